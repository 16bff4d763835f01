"""Gradients of the convolution and pooling ops (as TF's nn_grad): each forward op's
gradient is its backprop op, and each backprop op (linear in its gradient input) is
differentiated by the forward op or the other backprop op, so second derivatives work."""
from __future__ import annotations

from ..ops import array_ops, conv_ops
from ..ops.array_ops import shape
from .registry import RegisterGradient


def _attrs(op):
    return {k: op.get_attr(k) for k in ("strides", "padding", "dilations", "data_format")}


def _shaped(t, like):
    t.set_shape(like.shape)
    return t


def _create(op, op_type, inputs, like):
    out = op.graph.create_op(op_type, inputs, _attrs(op), name=op_type).outputs[0]
    return _shaped(out, like)


@RegisterGradient("Conv2D")
def _conv2d_grad(op, grad):
    x, w = op.inputs
    return [_create(op, "Conv2DBackpropInput", [shape(x), w, grad], x),
            _create(op, "Conv2DBackpropFilter", [x, shape(w), grad], w)]


@RegisterGradient("Conv2DBackpropInput")
def _conv2d_backprop_input_grad(op, grad):
    _, w, dout = op.inputs
    return [None, _create(op, "Conv2DBackpropFilter", [grad, shape(w), dout], w),
            _create(op, "Conv2D", [grad, w], dout)]


@RegisterGradient("Conv2DBackpropFilter")
def _conv2d_backprop_filter_grad(op, grad):
    x, _, dout = op.inputs
    return [_create(op, "Conv2DBackpropInput", [shape(x), grad, dout], x), None,
            _create(op, "Conv2D", [x, grad], dout)]


@RegisterGradient("DepthwiseConv2dNative")
def _depthwise_grad(op, grad):
    x, w = op.inputs
    return [_create(op, "DepthwiseConv2dNativeBackpropInput", [shape(x), w, grad], x),
            _create(op, "DepthwiseConv2dNativeBackpropFilter", [x, shape(w), grad], w)]


@RegisterGradient("DepthwiseConv2dNativeBackpropInput")
def _depthwise_backprop_input_grad(op, grad):
    _, w, dout = op.inputs
    return [None, _create(op, "DepthwiseConv2dNativeBackpropFilter", [grad, shape(w), dout], w),
            _create(op, "DepthwiseConv2dNative", [grad, w], dout)]


@RegisterGradient("DepthwiseConv2dNativeBackpropFilter")
def _depthwise_backprop_filter_grad(op, grad):
    x, _, dout = op.inputs
    return [_create(op, "DepthwiseConv2dNativeBackpropInput", [shape(x), grad, dout], x), None,
            _create(op, "DepthwiseConv2dNative", [x, grad], dout)]


def _pool_attrs(op):
    return {k: op.get_attr(k) for k in ("ksize", "strides", "padding", "data_format")}


@RegisterGradient("MaxPool")
def _max_pool_grad(op, grad):
    x = op.inputs[0]
    return [_shaped(conv_ops.max_pool_grad(x, op.outputs[0], grad, _pool_attrs(op)), x)]


@RegisterGradient("MaxPoolGrad")
def _max_pool_grad_grad(op, grad):
    x, y, dout = op.inputs
    return [array_ops.zeros_like(x), array_ops.zeros_like(y),
            _shaped(conv_ops.max_pool_grad_grad(x, y, grad, _pool_attrs(op)), dout)]


@RegisterGradient("MaxPoolGradGrad")
def _max_pool_grad_grad_grad(op, grad):
    x, y, g = op.inputs
    return [array_ops.zeros_like(x), array_ops.zeros_like(y),
            _shaped(conv_ops.max_pool_grad(x, y, grad, _pool_attrs(op)), g)]


@RegisterGradient("AvgPool")
def _avg_pool_grad(op, grad):
    x = op.inputs[0]
    return [_shaped(conv_ops.avg_pool_grad(shape(x), grad, _pool_attrs(op)), x)]


@RegisterGradient("AvgPoolGrad")
def _avg_pool_grad_grad(op, grad):
    a = _pool_attrs(op)
    out = op.graph.create_op("AvgPool", [grad], a, name="AvgPool").outputs[0]
    return [None, _shaped(out, op.inputs[1])]
