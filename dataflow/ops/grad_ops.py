"""Helper ops used by gradient functions (shapes known only at run time).

Static shapes may be partly unknown (placeholders with ``None`` dimensions), so a
gradient cannot always be reduced or broadcast with shapes fixed at build time.
These ops take the target shape as a run-time int tensor (usually ``shape(x)``):

* ``SumToShape(grad, shape)``: sum a broadcast gradient back to ``shape`` (the
  inverse of NumPy broadcasting; TF does this with BroadcastGradientArgs + Sum).
* ``BroadcastTo(x, shape)``: NumPy-broadcast ``x`` to ``shape`` (TF's BroadcastTo).
* ``ReducedShape(shape)``: ``shape`` with the reduced ``axis`` set to 1 (TF's
  ``math_ops.reduced_shape``), to put back the dimensions a reduction dropped.
* ``GatherGrad(grad, indices, params_shape)``: scatter-add ``grad`` into zeros of
  ``params_shape`` at ``indices`` along ``axis`` (the dense gradient of GatherV2).
* ``StridedSliceGrad(grad, shape, *index_tensors)``: write ``grad`` into zeros of
  ``shape`` at the basic-indexing key ``spec`` (the gradient of StridedSlice).
* ``TanhGrad(y, dy)`` = ``dy * (1 - y * y)`` and ``SigmoidGrad(y, dy)`` =
  ``dy * y * (1 - y)`` from the forward output ``y``: one node instead of three, as
  TF's fused kernels (backprop through an RNN runs them every iteration).

>>> x = df.placeholder(df.float32, [3])
>>> grad = df.ones([2, 3])                 # the gradient of x broadcast to [2, 3]
>>> gx = sum_to_shape(grad, df.shape(x))
>>> df.Session().run(gx)
array([2., 2., 2.], dtype=float32)
"""
from __future__ import annotations

from .. import dtypes as _dtypes
from ..framework.convert import convert_to_tensor, register_tensor_conversion
from ..framework.graph import Tensor, get_default_graph
from ..framework.indexed_slices import IndexedSlices
from ..framework.op_registry import register_op
from ..framework.tensor_shape import TensorShape
from .array_ops import shape_from_tensor

__all__ = [
    "activation_grad",
    "broadcast_to",
    "gather_grad",
    "reduced_shape",
    "strided_slice_grad",
    "sum_to_shape",
]


def _check_shape_tensor(op, t: Tensor, what="shape"):
    if not t.dtype.is_integer:
        raise TypeError(f"{op.type} '{op.name}': {what} must be an integer tensor, got "
                        f"{t.dtype.name}")


@register_op("SumToShape")
def _sum_to_shape_infer(op):
    grad, shape = op.inputs
    _check_shape_tensor(op, shape)
    return [(grad.dtype, shape_from_tensor(shape))]


@register_op("BroadcastTo")
def _broadcast_to_infer(op):
    x, shape = op.inputs
    _check_shape_tensor(op, shape)
    return [(x.dtype, shape_from_tensor(shape))]


@register_op("ReducedShape")
def _reduced_shape_infer(op):
    shape = op.inputs[0]
    _check_shape_tensor(op, shape)
    return [(shape.dtype, shape.shape)]


@register_op("GatherGrad")
def _gather_grad_infer(op):
    grad, indices, params_shape = op.inputs
    _check_shape_tensor(op, indices, "indices")
    _check_shape_tensor(op, params_shape, "params_shape")
    return [(grad.dtype, shape_from_tensor(params_shape))]


@register_op("StridedSliceGrad")
def _strided_slice_grad_infer(op):
    grad, shape = op.inputs[:2]
    _check_shape_tensor(op, shape)
    return [(grad.dtype, shape_from_tensor(shape))]


# -- wrappers --------------------------------------------------------------------------------

def _create(op_type, inputs, attrs=None, name=None):
    return get_default_graph().create_op(op_type, inputs, attrs,
                                         name=name or op_type).outputs[0]


def _shape_arg(shape):
    if isinstance(shape, Tensor):
        return shape
    if isinstance(shape, TensorShape):
        shape = shape.as_list()
    return convert_to_tensor(list(shape), dtype=_dtypes.int32)


def sum_to_shape(grad, shape, name=None) -> Tensor:
    """Sum ``grad`` over the axes along which a tensor of ``shape`` was broadcast."""
    return _create("SumToShape", [convert_to_tensor(grad), _shape_arg(shape)], name=name)


def broadcast_to(x, shape, name=None) -> Tensor:
    """``x`` broadcast (NumPy rules) to ``shape``."""
    return _create("BroadcastTo", [convert_to_tensor(x), _shape_arg(shape)], name=name)


def reduced_shape(shape, axis, name=None) -> Tensor:
    """``shape`` with entries ``axis`` (every entry when None) replaced by 1."""
    axis = None if axis is None else ((axis,) if isinstance(axis, int) else tuple(axis))
    return _create("ReducedShape", [_shape_arg(shape)], {"axis": axis}, name=name)


def gather_grad(grad, indices, params_shape, axis, name=None) -> Tensor:
    """Zeros of ``params_shape`` with ``grad`` added at ``indices`` along ``axis``."""
    return _create("GatherGrad", [convert_to_tensor(grad), convert_to_tensor(indices),
                                  _shape_arg(params_shape)], {"axis": int(axis)}, name=name)


def strided_slice_grad(grad, shape, spec, index_tensors=(), name=None) -> Tensor:
    """Zeros of ``shape`` with ``grad`` written at the StridedSlice key ``spec``."""
    return _create("StridedSliceGrad", [convert_to_tensor(grad), _shape_arg(shape),
                                        *index_tensors], {"spec": spec}, name=name)


# TanhGrad and SigmoidGrad are rows of the elementwise op table (defined by math_ops).
def activation_grad(op_type, y, dy, name=None):
    """``TanhGrad`` or ``SigmoidGrad`` of forward output ``y`` and incoming gradient ``dy``
    (for ``ReluGrad``, TF's order: the incoming gradient, then the features)."""
    return get_default_graph().create_op(op_type, [convert_to_tensor(y), convert_to_tensor(dy)],
                                         name=name or op_type).outputs[0]


def _densify_indexed_slices(slices, dtype, name):
    """An IndexedSlices as the dense tensor it stands for (TF's ``_IndexedSlicesToTensor``):
    its rows added into zeros of ``dense_shape``."""
    if dtype is not None and dtype is not slices.dtype:
        raise TypeError(f"Tensor conversion requested dtype {dtype.name} for IndexedSlices "
                        f"with dtype {slices.dtype.name}")
    if slices.dense_shape is None:
        raise ValueError(f"Cannot convert {slices!r} to a Tensor: its dense_shape is unknown")
    dense = gather_grad(slices.values, slices.indices, slices.dense_shape, 0, name=name)
    dense.set_shape(slices.shape)
    return dense


register_tensor_conversion(IndexedSlices, _densify_indexed_slices)
