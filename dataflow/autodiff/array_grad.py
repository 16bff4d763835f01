"""Gradients of the array ops: reshaping, joining, indexing, selection (TF's array_grad)."""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dtypes
from ..ops import array_ops, grad_ops, math_ops
from ..ops.array_ops import reshape, shape
from ..framework.convert import convert_to_tensor
from ..framework.indexed_slices import IndexedSlices
from .math_grad import _unbroadcast
from .registry import AcceptsIndexedSlices, NotDifferentiable, RegisterGradient

# -- value-preserving ops --------------------------------------------------------------------

@RegisterGradient("PlaceholderWithDefault")
def _placeholder_with_default_grad(op, grad):
    return [grad]


@RegisterGradient("Print")
def _print_grad(op, grad):
    # Print is the identity of its first input (TF passes the gradient through too).
    return [grad] + [None] * (len(op.inputs) - 1)


@RegisterGradient("PreventGradient")
def _prevent_gradient_grad(op, _grad):
    try:
        reason = op.get_attr("message")
    except (KeyError, ValueError, AttributeError):
        reason = ""
    raise LookupError(f"Gradient explicitly disabled for '{op.name}' (PreventGradient). "
                      f"Reason: {reason}")


# -- reshaping ---------------------------------------------------------------------------------

def _reshape_to_input(op, grad):
    """``grad`` given the (run-time) shape of ``op``'s first input."""
    x = op.inputs[0]
    if x.shape.is_fully_defined():
        return reshape(grad, x.shape.as_list())
    return reshape(grad, shape(x))


@RegisterGradient("Reshape")
def _reshape_grad(op, grad):
    return [_reshape_to_input(op, grad), None]


@RegisterGradient("ExpandDims")
def _expand_dims_grad(op, grad):
    return [_reshape_to_input(op, grad)]


@RegisterGradient("Squeeze")
def _squeeze_grad(op, grad):
    return [_reshape_to_input(op, grad)]


@RegisterGradient("Transpose")
def _transpose_grad(op, grad):
    perm = op.get_attr("perm")
    if perm is None:  # reversing the axes is its own inverse
        return [array_ops.transpose(grad)]
    return [array_ops.transpose(grad, [int(p) for p in np.argsort(perm)])]


@RegisterGradient("Tile")
def _tile_grad(op, grad):
    # Reshape the gradient to [m0, d0, m1, d1, ...] and sum the copies (the m axes).
    x, multiples = op.inputs
    rank = x.shape.ndims
    if rank is None and multiples.shape.ndims == 1:
        rank = multiples.shape[0]
    if rank is None:
        raise ValueError(f"Gradient of Tile '{op.name}' needs the rank of its input or the "
                         "length of its multiples to be known when the graph is built")
    if rank == 0:
        return [grad, None]
    m = math_ops.cast(multiples, _dtypes.int32)
    pairs = array_ops.stack([m, shape(x)], axis=1)   # [[m0, d0], [m1, d1], ...]
    split = reshape(grad, reshape(pairs, [-1]))
    gx = math_ops.reduce_sum(split, axis=list(range(0, 2 * rank, 2)))
    gx.set_shape(x.shape)  # the run-time split shape hides what is statically known
    return [gx, None]


# -- joining -----------------------------------------------------------------------------------

def _dim(t, axis):
    """Size of ``t`` along ``axis``: a Python int when static, else a scalar tensor."""
    if t.shape.ndims is not None and t.shape.as_list()[axis] is not None:
        return t.shape.as_list()[axis]
    return shape(t)[axis]


def _axis_key(axis, item):
    """An index putting ``item`` at ``axis`` (negative axes count from the end)."""
    if axis >= 0:
        return (slice(None),) * axis + (item,)
    return (Ellipsis, item) + (slice(None),) * (-axis - 1)


@RegisterGradient("ConcatV2")
def _concat_grad(op, grad):
    axis = op.get_attr("axis")
    if isinstance(grad, IndexedSlices):
        return _concat_sparse_grad(op, grad)
    grads, start = [], 0
    for x in op.inputs:
        stop = start + _dim(x, axis)
        grads.append(grad[_axis_key(axis, slice(start, stop))])
        start = stop
    return grads


def _concat_sparse_grad(op, grad):
    """A sparse gradient of a concatenation: each input gets the rows whose indices fall
    in its range, shifted to its own indices (TF's _ConcatGradHelper), so the shards of
    a sharded embedding_lookup get IndexedSlices; along another axis, dense."""
    if op.get_attr("axis") != 0:
        return _concat_grad(op, convert_to_tensor(grad))
    grads, start = [], 0
    for x in op.inputs:
        stop = start + _dim(x, 0)
        in_range = math_ops.logical_and(math_ops.greater_equal(grad.indices, start),
                                        math_ops.less(grad.indices, stop))
        picked = reshape(array_ops.where(in_range), [-1])
        indices = array_ops.gather(grad.indices, picked) - math_ops.cast(start,
                                                                          grad.indices.dtype)
        grads.append(IndexedSlices(array_ops.gather(grad.values, picked), indices, shape(x)))
        start = stop
    return grads


@RegisterGradient("Pack")
def _pack_grad(op, grad):
    axis = op.get_attr("axis")
    return [grad[_axis_key(axis, i)] for i in range(len(op.inputs))]


# -- indexing and selection ----------------------------------------------------------------------

@RegisterGradient("GatherV2")
def _gather_grad(op, grad):
    """Along axis 0, TF1's sparse gradient: the gathered rows' gradients at ``indices``
    of a tensor shaped as ``params`` (an IndexedSlices); along other axes, dense."""
    params, indices = op.inputs
    axis = op.get_attr("axis")
    if axis != 0:
        return [grad_ops.gather_grad(grad, indices, shape(params), axis), None]
    params_shape = shape(params)
    count = array_ops.expand_dims(array_ops.size(indices), 0)
    values = reshape(grad, array_ops.concat([count, params_shape[1:]], 0))
    if params.shape.ndims is not None and indices.shape.is_fully_defined():
        values.set_shape([int(np.prod(indices.shape.as_list()))] + params.shape.as_list()[1:])
    return [IndexedSlices(values, reshape(indices, count), params_shape), None]


@RegisterGradient("GatherGrad")
def _gather_grad_grad(op, grad):
    # GatherGrad is linear in its gradient input, and its adjoint is the gather itself.
    _, indices, _ = op.inputs
    return [array_ops.gather(grad, indices, axis=op.get_attr("axis")), None, None]


@RegisterGradient("StridedSlice")
def _strided_slice_grad(op, grad):
    x, *index_tensors = op.inputs
    g = grad_ops.strided_slice_grad(grad, shape(x), op.get_attr("spec"), index_tensors)
    return [g] + [None] * len(index_tensors)


@RegisterGradient("StridedSliceGrad")
def _strided_slice_grad_grad(op, grad):
    # The adjoint of writing into zeros at a key is reading at that key.
    index_tensors = op.inputs[2:]
    sliced = op.graph.create_op("StridedSlice", [grad, *index_tensors],
                                {"spec": op.get_attr("spec")}, name="strided_slice").outputs[0]
    return [sliced, None] + [None] * len(index_tensors)


@RegisterGradient("SelectV2")
def _select_grad(op, grad):
    c, x, y = op.inputs
    out = op.outputs[0]
    zeros = array_ops.zeros_like(grad)
    return [None,
            _unbroadcast(array_ops.where(c, grad, zeros), x, (c, y), out),
            _unbroadcast(array_ops.where(c, zeros, grad), y, (c, x), out)]


@RegisterGradient("Fill")
def _fill_grad(op, grad):
    # Every element is the one scalar value: it gets the sum of their gradients.
    return [None, math_ops.reduce_sum(grad)]


# -- the gradient helper ops ---------------------------------------------------------------------

@RegisterGradient("SumToShape")
def _sum_to_shape_grad(op, grad):
    return [grad_ops.broadcast_to(grad, shape(op.inputs[0])), None]


@RegisterGradient("BroadcastTo")
def _broadcast_to_grad(op, grad):
    return [grad_ops.sum_to_shape(grad, shape(op.inputs[0])), None]


# Gradient functions that pass a sparse gradient on as it is (TF's do too): a gather's
# IndexedSlices reaches a variable through its read.
for _t in ("Identity", "Snapshot", "ReadVariableOp", "PlaceholderWithDefault", "ConcatV2"):
    AcceptsIndexedSlices(_t)


@RegisterGradient("UnsortedSegmentSum")
def _unsorted_segment_sum_grad(op, grad):
    # Each data row went into its segment's sum: it gets that segment's gradient.
    return [array_ops.gather(grad, op.inputs[1]), None, None]


# -- no gradient -------------------------------------------------------------------------------

# Sources, shape queries, integer outputs and ops whose value does not depend
# smoothly on their inputs.
for _t in ("Const", "Placeholder", "Shape", "Size", "Rank", "OneHot", "Where",
           "ZerosLike", "OnesLike", "ReducedShape", "Assert", "PrintV2", "Unique",
           "ResourceScatterAdd", "ResourceSparseApplyMomentum"):
    NotDifferentiable(_t)
