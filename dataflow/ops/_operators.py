"""Python operators on Tensors (``a + b``, ``a @ b``, ``x[1:3]``...) mapped to ops."""
from __future__ import annotations

from .. import dtypes as _dtypes
from ..framework import eager as _eager
from ..framework import graph as _graph
from . import array_ops, math_ops

# Operators whose wrapper, given two tensors of one dtype, only checks the dtype and
# creates the op: eager mode runs them without the wrapper (see register_fast_operator).
# method -> (op type, dtypes beyond the op's own check, operands swapped)
_FAST = {"__add__": ("AddV2", None, False), "__radd__": ("AddV2", None, True),
         "__sub__": ("Sub", None, False), "__rsub__": ("Sub", None, True),
         "__mul__": ("Mul", None, False), "__rmul__": ("Mul", None, True),
         # divide casts integers to floats first: only float operands skip it
         "__truediv__": ("RealDiv", "float", False), "__rtruediv__": ("RealDiv", "float", True),
         "__pow__": ("Pow", None, False), "__rpow__": ("Pow", None, True),
         "__lt__": ("Less", None, False), "__le__": ("LessEqual", None, False),
         "__gt__": ("Greater", None, False), "__ge__": ("GreaterEqual", None, False)}
_DIVIDE_NAME = "truediv"   # math_ops.divide's node name


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
    for method, (op_type, only, swap) in _FAST.items():
        accepted = [d for d in _ALL_DTYPES if _accepts(op_type, d)
                    and (only != "float" or d.is_floating)]
        name = _DIVIDE_NAME if op_type == "RealDiv" else \
            math_ops._DEFAULT_NAMES.get(op_type, op_type)
        _eager.register_fast_operator(method, op_type, name, accepted, swap)


_ALL_DTYPES = [_dtypes.float16, _dtypes.float32, _dtypes.float64, _dtypes.int8,
               _dtypes.int16, _dtypes.int32, _dtypes.int64, _dtypes.uint8, _dtypes.bool]


def _accepts(op_type, dtype) -> bool:
    try:
        math_ops.check_input_dtype(op_type, dtype)
    except TypeError:
        return False
    return True
