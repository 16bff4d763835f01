"""Gradients of the ops in :mod:`dataflow.ops.extra_array_ops` (as TF's array_grad)."""
from __future__ import annotations

from .. import dtypes as _dtypes
from ..ops import array_ops, extra_array_ops as xa, math_ops
from ..ops.array_ops import reshape, shape
from .registry import NotDifferentiable, RegisterGradient


def _zeros_for_missing(grads, outputs):
    """Outputs nobody differentiated get zeros, so they can be joined again."""
    return [array_ops.zeros_like(o) if g is None else g for g, o in zip(grads, outputs)]


@RegisterGradient("Slice")
def _slice_grad(op, grad):
    # Pad the gradient with zeros back to the input's shape: [begin, rest] per dimension.
    x, begin, _ = op.inputs
    begin = math_ops.cast(begin, _dtypes.int32)
    after = shape(x) - begin - shape(op.outputs[0])
    paddings = array_ops.stack([begin, after], axis=1)
    g = xa.pad(grad, paddings)
    g.set_shape(x.shape)
    return [g, None, None]


def _split_grad(op, *grads):
    return [array_ops.concat(_zeros_for_missing(grads, op.outputs), op.get_attr("axis"))]


RegisterGradient("SplitV")(_split_grad)
RegisterGradient("Split")(_split_grad)


@RegisterGradient("Unpack")
def _unpack_grad(op, *grads):
    return [array_ops.stack(_zeros_for_missing(grads, op.outputs), axis=op.get_attr("axis"))]


@RegisterGradient("PadV2")
def _pad_grad(op, grad):
    x, paddings, _ = op.inputs
    begin = math_ops.cast(reshape(xa.slice(paddings, [0, 0], [-1, 1]), [-1]), _dtypes.int32)
    g = xa.slice(grad, begin, shape(x))
    g.set_shape(x.shape)
    return [g, None, None]


@RegisterGradient("MirrorPad")
def _mirror_pad_grad(op, grad):
    g = xa.mirror_pad_grad(grad, op.inputs[1], op.get_attr("mode"))
    g.set_shape(op.inputs[0].shape)
    return [g, None]


@RegisterGradient("MirrorPadGrad")
def _mirror_pad_grad_grad(op, grad):
    # MirrorPadGrad is the adjoint of MirrorPad (both linear): its gradient is MirrorPad.
    return [xa.pad(grad, op.inputs[1], mode=op.get_attr("mode")), None]


@RegisterGradient("GatherNd")
def _gather_nd_grad(op, grad):
    params, indices = op.inputs
    params_shape = math_ops.cast(shape(params), indices.dtype)
    g = xa.scatter_nd(indices, grad, params_shape)
    g.set_shape(params.shape)
    return [g, None]


@RegisterGradient("ScatterNd")
def _scatter_nd_grad(op, grad):
    indices = op.inputs[0]
    return [None, xa.gather_nd(grad, indices), None]


@RegisterGradient("ReverseV2")
def _reverse_grad(op, grad):
    return [xa.reverse(grad, list(op.get_attr("axis")))]


@RegisterGradient("Cumsum")
def _cumsum_grad(op, grad):
    # Each output sums the inputs before it, so each input receives the sum of the
    # gradients after it: the same scan in the other direction.
    return [xa.cumsum(grad, axis=op.get_attr("axis"), exclusive=op.get_attr("exclusive"),
                      reverse=not op.get_attr("reverse"))]


@RegisterGradient("TopKV2")
def _top_k_grad(op, grad_values, _grad_indices):
    # Scatter each value's gradient to the flat position of the entry it came from.
    x, indices = op.inputs[0], op.outputs[1]
    k = op.get_attr("k")
    n = shape(x)[-1]
    total = array_ops.size(x)
    rows = xa.range(0, total, math_ops.maximum(n, 1))
    flat = reshape(reshape(indices, [-1, k]) + array_ops.expand_dims(rows, -1), [-1, 1])
    g = xa.scatter_nd(flat, reshape(grad_values, [-1]), reshape(total, [1]))
    g = reshape(g, shape(x))
    g.set_shape(x.shape)
    return [g]


for _t in ("ArgMax", "ArgMin", "Range", "LinSpace", "InTopKV2"):
    NotDifferentiable(_t)
