"""Shared dtype/shape inference functions for op definitions."""
from __future__ import annotations

from .. import dtypes as _dtypes
from ..framework.tensor_shape import TensorShape, broadcast_shapes


def unchanged(op):
    """One output with the dtype and shape of input 0."""
    x = op.inputs[0]
    return [(x.dtype, x.shape)]


def broadcast(op):
    """NumPy broadcasting of inputs 0 and 1, dtype of input 0."""
    x, y = op.inputs[0], op.inputs[1]
    try:
        shape = broadcast_shapes(x.shape, y.shape)
    except ValueError as e:
        raise ValueError(f"{e} (op '{op.name}' of type {op.type})") from None
    return [(x.dtype, shape)]


def comparison(op):
    """Broadcast shape, bool dtype."""
    return [(_dtypes.bool, broadcast(op)[0][1])]


def scalar(dtype):
    def infer(op):
        return [(dtype, TensorShape([]))]
    return infer


def no_outputs(op):
    return []


def normalize_axis(axis, ndims, op_name="op"):
    """A tuple of non-negative axes (``None`` means every axis; needs a known rank)."""
    if axis is None:
        return None if ndims is None else tuple(range(ndims))
    axes = (axis,) if isinstance(axis, int) else tuple(axis)
    if ndims is None:
        return axes if all(a >= 0 for a in axes) else None
    out = []
    for a in axes:
        if not -ndims <= a < ndims:
            raise ValueError(f"Invalid reduction dimension {a} for input with {ndims} "
                             f"dimensions (op '{op_name}')")
        out.append(a % ndims)
    return tuple(out)


def reduced_shape(shape: TensorShape, axes, keepdims: bool) -> TensorShape:
    if shape.ndims is None:
        return TensorShape(None)
    if axes is None:
        return TensorShape(None)
    dims = shape.as_list()
    if keepdims:
        return TensorShape([1 if i in axes else d for i, d in enumerate(dims)])
    return TensorShape([d for i, d in enumerate(dims) if i not in axes])
