"""Python operators on Tensors (``a + b``, ``a @ b``, ``x[1:3]``...) mapped to ops."""
from __future__ import annotations

from ..framework import graph as _graph
from . import array_ops, math_ops


def _swap(fn):
    return lambda x, y: fn(y, x)


def install() -> None:
    m = math_ops
    table = {
        "__add__": m.add, "__radd__": _swap(m.add),
        "__sub__": m.subtract, "__rsub__": _swap(m.subtract),
        "__mul__": m.multiply, "__rmul__": _swap(m.multiply),
        "__truediv__": m.divide, "__rtruediv__": _swap(m.divide),
        "__floordiv__": m.floordiv, "__rfloordiv__": _swap(m.floordiv),
        "__mod__": m.floormod, "__rmod__": _swap(m.floormod),
        "__pow__": m.pow, "__rpow__": _swap(m.pow),
        "__matmul__": m.matmul, "__rmatmul__": _swap(m.matmul),
        "__lt__": m.less, "__le__": m.less_equal, "__gt__": m.greater,
        "__ge__": m.greater_equal,
        "__and__": m.logical_and, "__rand__": _swap(m.logical_and),
        "__or__": m.logical_or, "__ror__": _swap(m.logical_or),
        "__neg__": m.negative, "__abs__": m.abs, "__invert__": m.logical_not,
        "__getitem__": array_ops.strided_slice_item,
    }
    _graph._OPERATOR_TABLE.update(table)
