"""Convolution and pooling ops (NHWC, TF1 names): ``conv2d``, ``depthwise_conv2d``,
``max_pool``, ``avg_pool`` and their backprop ops, as TF names them (Conv2DBackpropInput,
Conv2DBackpropFilter, MaxPoolGrad, AvgPoolGrad, DepthwiseConv2dNativeBackpropInput/Filter).

Padding follows TF: ``VALID`` keeps windows inside the input (output ``ceil((in - k') /
s) + 1`` with the dilated filter size ``k' = (k - 1) d + 1``); ``SAME`` gives ``ceil(in /
s)`` outputs and pads ``max((out - 1) s + k' - in, 0)`` entries, the smaller half before.
Max pooling ignores the padding; average pooling divides by the number of entries each
window really covers.

>>> x = df.placeholder(df.float32, [None, 8, 8, 1])
>>> w = df.ones([3, 3, 1, 16])
>>> h = df.nn.relu(conv2d(x, w, strides=[1, 1, 1, 1], padding="SAME"))
>>> h.shape
TensorShape([None, 8, 8, 16])
>>> p = max_pool(h, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID")
>>> p.shape
TensorShape([None, 4, 4, 16])
"""
from __future__ import annotations

from .. import dtypes as _dtypes
from ..framework.convert import constant_value, convert_to_tensor
from ..framework.graph import Tensor, get_default_graph
from ..framework.op_registry import register_op
from ..framework.tensor_shape import TensorShape
from .array_ops import shape_from_tensor

__all__ = ["conv2d", "conv2d_backprop_input", "conv2d_backprop_filter", "depthwise_conv2d",
           "depthwise_conv2d_native", "depthwise_conv2d_native_backprop_input",
           "depthwise_conv2d_native_backprop_filter", "max_pool", "avg_pool", "max_pool_grad",
           "max_pool_grad_grad", "avg_pool_grad", "conv_output_size", "same_padding"]


# -- geometry --------------------------------------------------------------------------------------

def conv_output_size(size, k, stride, dilation, padding):
    """Output length of one spatial dimension (None when ``size`` is unknown)."""
    if size is None:
        return None
    eff = (k - 1) * dilation + 1
    if padding == "SAME":
        return -(-size // stride)
    return (size - eff) // stride + 1 if size >= eff else 0


def same_padding(size, k, stride, dilation, padding):
    """``(before, after)`` padding of one spatial dimension."""
    if padding != "SAME":
        return 0, 0
    eff = (k - 1) * dilation + 1
    out = -(-size // stride)
    total = max((out - 1) * stride + eff - size, 0)
    return total // 2, total - total // 2


def _four(value, what, fn):
    """TF's ``strides``/``ksize``/``dilations``: an int, or a list of 1, 2 or 4 ints."""
    if isinstance(value, Tensor):
        v = constant_value(value)
        if v is None:
            raise TypeError(f"{fn}: {what} must be a list of ints or a constant")
        value = v.tolist()
    if isinstance(value, int):
        value = [value]
    value = [int(v) for v in value]
    if len(value) == 1:
        return (1, value[0], value[0], 1)
    if len(value) == 2:
        return (1, value[0], value[1], 1)
    if len(value) != 4:
        raise ValueError(f"{fn}: {what} should be of length 1, 2 or 4, got {len(value)}")
    return tuple(value)


def _padding(padding, fn):
    if not isinstance(padding, (str, bytes)):
        raise ValueError(f"{fn}: padding must be 'SAME' or 'VALID' (explicit paddings are not "
                         f"supported), got {padding!r}")
    p = padding.decode() if isinstance(padding, bytes) else padding
    p = p.upper()
    if p not in ("SAME", "VALID"):
        raise ValueError(f"{fn}: padding must be 'SAME' or 'VALID', got {padding!r}")
    return p


def _data_format(data_format, fn):
    if data_format not in (None, "NHWC"):
        raise ValueError(f"{fn}: only the NHWC data format is supported on the CPU, got "
                         f"{data_format!r}")


def _check_rank4(op, t, what):
    if t.shape.ndims not in (None, 4):
        raise ValueError(f"Shape must be rank 4 but is rank {t.shape.ndims} for '{op.name}' "
                         f"(op: {op.type}) {what} with shape {t.shape}")


def _check_strides(op, strides, dilations=(1, 1, 1, 1)):
    if strides[0] != 1 or strides[3] != 1:
        raise ValueError(f"{op.type} '{op.name}': strides in the batch and depth dimensions "
                         f"are not supported, got {list(strides)}")
    if min(strides) < 1 or min(dilations) < 1:
        raise ValueError(f"{op.type} '{op.name}': strides and dilations must be positive")
    if dilations[0] != 1 or dilations[3] != 1:
        raise ValueError(f"{op.type} '{op.name}': dilations in the batch and depth dimensions "
                         f"are not supported, got {list(dilations)}")


def _spatial_out(op, in_dims, kh, kw, strides, dilations, padding):
    """``[oh, ow]`` of an NHWC input (None where unknown); ValueError when a VALID window
    does not fit."""
    out = []
    for size, k, s, d in ((in_dims[1], kh, strides[1], dilations[1]),
                          (in_dims[2], kw, strides[2], dilations[2])):
        if size is not None and k is not None and padding == "VALID" \
                and size < (k - 1) * d + 1:
            raise ValueError(f"Computed output size would be negative: "
                             f"{(size - (k - 1) * d - 1) // s + 1} [input_size: {size}, "
                             f"effective_filter_size: {(k - 1) * d + 1}, stride: {s}] "
                             f"(op '{op.name}' of type {op.type})")
        out.append(None if k is None else conv_output_size(size, k, s, d, padding))
    return out


def _dims(t):
    return t.shape.as_list() if t.shape.ndims is not None else [None] * 4


def _float_input(op, t):
    if not t.dtype.is_floating:
        raise TypeError(f"{op.type} '{op.name}': expected a floating-point input, got "
                        f"{t.dtype.name}")


# -- definitions -----------------------------------------------------------------------------------

def _conv_out_shape(op, x, filt, depthwise):
    """The output shape of Conv2D / DepthwiseConv2dNative from input and filter shapes."""
    strides, dilations = op.get_attr("strides"), op.get_attr("dilations")
    _check_strides(op, strides, dilations)
    xd, fd = _dims(x), _dims(filt)
    if xd[3] is not None and fd[2] is not None and xd[3] != fd[2]:
        raise ValueError(f"Depth of input ({xd[3]}) is not equal to the input depth of the "
                         f"filter ({fd[2]}) for '{op.name}' (op: {op.type}) with input shapes: "
                         f"{x.shape}, {filt.shape}.")
    oh, ow = _spatial_out(op, xd, fd[0], fd[1], strides, dilations, op.get_attr("padding"))
    if depthwise:
        c = xd[3] if xd[3] is not None else fd[2]
        channels = None if c is None or fd[3] is None else c * fd[3]
    else:
        channels = fd[3]
    return TensorShape([xd[0], oh, ow, channels])


def _conv_infer(op):
    x, filt = op.inputs
    _float_input(op, x)
    if filt.dtype is not x.dtype:
        raise TypeError(f"{op.type} '{op.name}': input and filter must share one dtype "
                        f"({x.dtype.name} vs {filt.dtype.name})")
    _check_rank4(op, x, "input")
    _check_rank4(op, filt, "filter")
    return [(x.dtype, _conv_out_shape(op, x, filt, op.type == "DepthwiseConv2dNative"))]


register_op("Conv2D")(_conv_infer)
register_op("DepthwiseConv2dNative")(_conv_infer)


def _backprop_input_infer(op):
    sizes, filt, dout = op.inputs
    _check_rank4(op, dout, "out_backprop")
    return [(dout.dtype, shape_from_tensor(sizes) if sizes.shape.ndims == 1 and
             sizes.shape[0] in (None, 4) else TensorShape([None] * 4))]


def _backprop_filter_infer(op):
    x, sizes, dout = op.inputs
    _check_rank4(op, dout, "out_backprop")
    return [(dout.dtype, shape_from_tensor(sizes) if sizes.shape.ndims == 1 and
             sizes.shape[0] in (None, 4) else TensorShape([None] * 4))]


for _t in ("Conv2DBackpropInput", "DepthwiseConv2dNativeBackpropInput"):
    register_op(_t)(_backprop_input_infer)
for _t in ("Conv2DBackpropFilter", "DepthwiseConv2dNativeBackpropFilter"):
    register_op(_t)(_backprop_filter_infer)


def _pool_infer(op):
    x = op.inputs[0]
    _float_input(op, x)
    _check_rank4(op, x, "input")
    ksize, strides = op.get_attr("ksize"), op.get_attr("strides")
    _check_strides(op, strides)
    if ksize[0] != 1 or ksize[3] != 1:
        raise ValueError(f"{op.type} '{op.name}': pooling is not supported across the batch "
                         f"or depth dimensions, got ksize {list(ksize)}")
    if min(ksize) < 1:
        raise ValueError(f"{op.type} '{op.name}': ksize must be positive, got {list(ksize)}")
    xd = _dims(x)
    oh, ow = _spatial_out(op, xd, ksize[1], ksize[2], strides, (1, 1, 1, 1),
                          op.get_attr("padding"))
    return [(x.dtype, TensorShape([xd[0], oh, ow, xd[3]]))]


register_op("MaxPool")(_pool_infer)
register_op("AvgPool")(_pool_infer)


@register_op("MaxPoolGrad")
def _max_pool_grad_infer(op):
    x = op.inputs[0]
    return [(x.dtype, x.shape)]


@register_op("MaxPoolGradGrad")
def _max_pool_grad_grad_infer(op):
    return [(op.inputs[1].dtype, op.inputs[1].shape)]


@register_op("AvgPoolGrad")
def _avg_pool_grad_infer(op):
    sizes, grad = op.inputs
    return [(grad.dtype, shape_from_tensor(sizes) if sizes.shape.ndims == 1 and
             sizes.shape[0] in (None, 4) else TensorShape([None] * 4))]


# -- wrappers --------------------------------------------------------------------------------------

def _create(op_type, inputs, attrs, name):
    return get_default_graph().create_op(op_type, inputs, attrs, name=name or op_type).outputs[0]


def _conv_attrs(fn, strides, padding, dilations, data_format):
    if strides is None:
        raise ValueError(f"{fn}: strides must be given")
    if padding is None:
        raise ValueError(f"{fn}: padding must be given")
    _data_format(data_format, fn)
    return {"strides": _four(strides, "strides", fn), "padding": _padding(padding, fn),
            "dilations": _four(dilations if dilations is not None else 1, "dilations", fn),
            "data_format": "NHWC"}


def _pair(a, b, fn):
    a = convert_to_tensor(a)
    b = convert_to_tensor(b, dtype=a.dtype) if not isinstance(b, Tensor) else b
    return a, b


def conv2d(input, filter=None, strides=None, padding=None, use_cudnn_on_gpu=True,  # noqa: A002
           data_format="NHWC", dilations=(1, 1, 1, 1), name=None, filters=None):
    """2-D convolution (cross-correlation, as TF) of an NHWC ``input`` with a ``filter`` of
    shape ``[height, width, in_channels, out_channels]``.

    >>> x = df.reshape(df.range(9.0), [1, 3, 3, 1])      # one 3x3 image: 0..8
    >>> w = df.ones([2, 2, 1, 1])                          # sums each 2x2 window
    >>> y = conv2d(x, w, strides=[1, 1, 1, 1], padding="SAME")
    >>> df.Session().run(y)[0, :, :, 0]
    array([[ 8., 12.,  7.],
           [20., 24., 13.],
           [13., 15.,  8.]], dtype=float32)
    """
    if filter is None:
        filter = filters  # noqa: A001
    if filter is None:
        raise ValueError("conv2d: filter must be given")
    attrs = _conv_attrs("conv2d", strides, padding, dilations, data_format)
    x, w = _pair(input, filter, "conv2d")
    return _create("Conv2D", [x, w], attrs, name)


def _sizes(sizes):
    if isinstance(sizes, Tensor):
        return sizes
    if isinstance(sizes, TensorShape):
        sizes = sizes.as_list()
    return convert_to_tensor(list(sizes), dtype=_dtypes.int32)


def conv2d_backprop_input(input_sizes, filter=None, out_backprop=None, strides=None,  # noqa: A002
                          padding=None, use_cudnn_on_gpu=True, data_format="NHWC",
                          dilations=(1, 1, 1, 1), name=None, filters=None):
    """The gradient of conv2d with respect to its input (of shape ``input_sizes``)."""
    filter = filters if filter is None else filter  # noqa: A001
    attrs = _conv_attrs("conv2d_backprop_input", strides, padding, dilations, data_format)
    w = convert_to_tensor(filter)
    return _create("Conv2DBackpropInput",
                   [_sizes(input_sizes), w, convert_to_tensor(out_backprop, dtype=w.dtype)],
                   attrs, name)


def conv2d_backprop_filter(input, filter_sizes, out_backprop, strides, padding,  # noqa: A002
                           use_cudnn_on_gpu=True, data_format="NHWC", dilations=(1, 1, 1, 1),
                           name=None):
    """The gradient of conv2d with respect to its filter (of shape ``filter_sizes``)."""
    attrs = _conv_attrs("conv2d_backprop_filter", strides, padding, dilations, data_format)
    x = convert_to_tensor(input)
    return _create("Conv2DBackpropFilter",
                   [x, _sizes(filter_sizes), convert_to_tensor(out_backprop, dtype=x.dtype)],
                   attrs, name)


def depthwise_conv2d_native(input, filter, strides, padding, data_format="NHWC",  # noqa: A002
                            dilations=(1, 1, 1, 1), name=None):
    """Each input channel convolved with its own ``channel_multiplier`` filters (filter
    ``[h, w, in_channels, multiplier]``; output channel ``c * multiplier + m``)."""
    attrs = _conv_attrs("depthwise_conv2d_native", strides, padding, dilations, data_format)
    x, w = _pair(input, filter, "depthwise_conv2d_native")
    return _create("DepthwiseConv2dNative", [x, w], attrs, name)


def depthwise_conv2d(input, filter, strides, padding, rate=None, name=None,  # noqa: A002
                     data_format=None, dilations=None):
    """TF1's ``tf.nn.depthwise_conv2d``: ``depthwise_conv2d_native`` with an optional
    dilation ``rate`` (``[rh, rw]``; strides must then be 1, as TF1 requires).

    >>> x = df.reshape(df.range(18.0), [1, 3, 3, 2])
    >>> w = df.ones([2, 2, 2, 1])                          # one filter per channel
    >>> y = depthwise_conv2d(x, w, strides=[1, 1, 1, 1], padding="SAME", rate=[2, 2])
    >>> df.Session().run(y)[0, :, :, 0]
    array([[ 8., 16.,  8.],
           [16., 32., 16.],
           [ 8., 16.,  8.]], dtype=float32)
    """
    rate = dilations if rate is None else rate
    rate = (1, 1) if rate is None else tuple(int(r) for r in rate)
    if len(rate) == 4:
        rate = rate[1:3]
    st = _four(strides, "strides", "depthwise_conv2d")
    if max(rate) > 1 and max(st) > 1:
        raise ValueError("strides > 1 not supported in conjunction with dilation_rate > 1")
    return depthwise_conv2d_native(input, filter, st, padding, data_format=data_format,
                                   dilations=(1, rate[0], rate[1], 1),
                                   name=name or "depthwise")


def depthwise_conv2d_native_backprop_input(input_sizes, filter, out_backprop, strides,  # noqa: A002
                                           padding, data_format="NHWC",
                                           dilations=(1, 1, 1, 1), name=None):
    """The gradient of depthwise_conv2d_native with respect to its input."""
    attrs = _conv_attrs("depthwise_conv2d_native_backprop_input", strides, padding, dilations,
                        data_format)
    w = convert_to_tensor(filter)
    return _create("DepthwiseConv2dNativeBackpropInput",
                   [_sizes(input_sizes), w, convert_to_tensor(out_backprop, dtype=w.dtype)],
                   attrs, name)


def depthwise_conv2d_native_backprop_filter(input, filter_sizes,  # noqa: A002
                                            out_backprop, strides, padding, data_format="NHWC",
                                            dilations=(1, 1, 1, 1), name=None):
    """The gradient of depthwise_conv2d_native with respect to its filter."""
    attrs = _conv_attrs("depthwise_conv2d_native_backprop_filter", strides, padding, dilations,
                        data_format)
    x = convert_to_tensor(input)
    return _create("DepthwiseConv2dNativeBackpropFilter",
                   [x, _sizes(filter_sizes), convert_to_tensor(out_backprop, dtype=x.dtype)],
                   attrs, name)


def _pool_attrs(fn, ksize, strides, padding, data_format):
    _data_format(data_format, fn)
    return {"ksize": _four(ksize, "ksize", fn), "strides": _four(strides, "strides", fn),
            "padding": _padding(padding, fn), "data_format": "NHWC"}


def max_pool(value, ksize, strides, padding, data_format="NHWC", name=None,
             input=None):  # noqa: A002
    """The maximum of each ``ksize`` window (padding never wins).

    >>> h = df.reshape(df.range(9.0), [1, 3, 3, 1])
    >>> y = max_pool(h, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME")
    >>> df.Session().run(y)[0, :, :, 0]
    array([[4., 5.],
           [7., 8.]], dtype=float32)
    """
    value = input if value is None else value
    attrs = _pool_attrs("max_pool", ksize, strides, padding, data_format)
    return _create("MaxPool", [convert_to_tensor(value)], attrs, name)


def avg_pool(value, ksize, strides, padding, data_format="NHWC", name=None,
             input=None):  # noqa: A002
    """The mean of each ``ksize`` window over the entries it covers (padding excluded).

    >>> h = df.reshape(df.range(16.0), [1, 4, 4, 1])
    >>> y = avg_pool(h, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="VALID")
    >>> df.Session().run(y)[0, :, :, 0]
    array([[ 2.5,  4.5],
           [10.5, 12.5]], dtype=float32)
    """
    value = input if value is None else value
    attrs = _pool_attrs("avg_pool", ksize, strides, padding, data_format)
    return _create("AvgPool", [convert_to_tensor(value)], attrs, name)


def _pool_attrs_of(op):
    return {k: op.get_attr(k) for k in ("ksize", "strides", "padding", "data_format")}


def max_pool_grad(orig_input, orig_output, grad, attrs, name=None):
    """MaxPoolGrad: ``grad`` routed to the entry each window took its maximum from."""
    return _create("MaxPoolGrad", [orig_input, orig_output, grad], attrs, name)


def max_pool_grad_grad(orig_input, orig_output, grad, attrs, name=None):
    """MaxPoolGradGrad: ``grad`` (input-shaped) read at each window's maximum."""
    return _create("MaxPoolGradGrad", [orig_input, orig_output, grad], attrs, name)


def avg_pool_grad(orig_input_shape, grad, attrs, name=None):
    """AvgPoolGrad: each window's gradient spread evenly over the entries it covers."""
    return _create("AvgPoolGrad", [_sizes(orig_input_shape), grad], attrs, name)
