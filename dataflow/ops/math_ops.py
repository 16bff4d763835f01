"""Elementwise math, comparisons, logic, reductions and matmul (TF names).

Elementwise op definitions and wrappers are derived from the elementwise op table
(:mod:`dataflow.framework.elementwise_table`), where a new elementwise op is one row.

>>> x = df.placeholder(df.float32, [2, 3])
>>> y = add(x, 1.0)          # AddV2
>>> s = reduce_sum(y, axis=0)
>>> y.op.type, s.op.type, s.shape.as_list()
('AddV2', 'Sum', [3])
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dtypes
from ..framework.convert import constant_value, convert_to_tensor
from ..framework.graph import Tensor, get_default_graph
from ..framework.op_registry import register_op
from ..framework.tensor_shape import TensorShape
from ..framework.elementwise_table import ELEMENTWISE
from . import shape_fns

# Elementwise ops come from the table (dataflow/framework/elementwise_table.py): op type ->
# wrapper name (TF's public name) for those whose wrapper lives here.
UNARY_OPS = {r.name: r.wrapper for r in ELEMENTWISE.values()
             if r.arity == 1 and r.wrapper and r.output == "same"}
BINARY_OPS = {r.name: r.wrapper for r in ELEMENTWISE.values()
              if r.arity == 2 and r.wrapper and r.output == "same"}
COMPARISON_OPS = {r.name: r.wrapper for r in ELEMENTWISE.values()
                  if r.arity == 2 and r.output == "bool" and r.dtypes != "bool"}
LOGICAL_BINARY_OPS = {r.name: r.wrapper for r in ELEMENTWISE.values()
                      if r.arity == 2 and r.output == "bool" and r.dtypes == "bool"}
REDUCTION_OPS = {"Sum": "reduce_sum", "Mean": "reduce_mean", "Max": "reduce_max",
                 "Min": "reduce_min", "Prod": "reduce_prod", "All": "reduce_all",
                 "Any": "reduce_any"}

# The dtypes each op takes (TF registers kernels for these only): the table's kinds, and
# the non-elementwise ops of this module.
_DTYPE_KIND = {**{r.name: r.dtypes for r in ELEMENTWISE.values()},
               **{t: "numeric" for t in ("MatMul", "Sum", "Mean", "Max", "Min", "Prod")},
               "All": "bool", "Any": "bool"}
# Default node names of the wrappers that back Python operators: TF names ``x + y``
# "add", ``x * y`` "mul"... (see the Graph docstring: ``a + a`` is "add:0").
_DEFAULT_NAMES = {r.name: r.default_name for r in ELEMENTWISE.values() if r.default_name}


def _same_shape_infer(op):
    """Two inputs of one dtype and one shape (the activation gradients)."""
    y, dy = op.inputs
    if y.dtype is not dy.dtype:
        raise TypeError(f"{op.type} '{op.name}': y and dy must share one dtype")
    return [(y.dtype, y.shape.merge_with(dy.shape))]


_SHAPE_FNS = {("unchanged", "same"): shape_fns.unchanged,
              ("unchanged", "bool"): shape_fns.unchanged,
              ("broadcast", "same"): shape_fns.broadcast,
              ("broadcast", "bool"): shape_fns.comparison,
              ("same", "same"): _same_shape_infer}

for _row in ELEMENTWISE.values():
    register_op(_row.name, in_place=_row.in_place)(_SHAPE_FNS[(_row.shape, _row.output)])


def _reduction_infer(op):
    x = op.inputs[0]
    axes = shape_fns.normalize_axis(op.get_attr("axis"), x.shape.ndims, op.name)
    out_dtype = x.dtype
    return [(out_dtype, shape_fns.reduced_shape(x.shape, axes, op.get_attr("keep_dims")))]


for _t in REDUCTION_OPS:
    register_op(_t)(_reduction_infer)


@register_op("MatMul")
def _matmul_infer(op):
    a, b = op.inputs
    ta, tb = op.get_attr("transpose_a"), op.get_attr("transpose_b")
    sa, sb = a.shape, b.shape
    for s, t in ((sa, a), (sb, b)):
        if s.ndims is not None and s.ndims != 2:
            raise ValueError(f"Shape must be rank 2 but is rank {s.ndims} for '{op.name}' "
                             f"(op: MatMul) with input {t.name} shape {s}")
    m = (sa[1] if ta else sa[0]) if sa.ndims else None
    ka = (sa[0] if ta else sa[1]) if sa.ndims else None
    kb = (sb[1] if tb else sb[0]) if sb.ndims else None
    n = (sb[0] if tb else sb[1]) if sb.ndims else None
    if ka is not None and kb is not None and ka != kb:
        raise ValueError(f"Dimensions must be equal, but are {ka} and {kb} for '{op.name}' "
                         f"(op: MatMul) with input shapes: {sa}, {sb}.")
    return [(a.dtype, TensorShape([m, n]))]


@register_op("Cast")
def _cast_infer(op):
    return [(op.get_attr("DstT"), op.inputs[0].shape)]


# -- wrappers --------------------------------------------------------------------------------

def check_input_dtype(op_type, dtype, param="x"):
    """TypeError unless ``op_type`` is defined for ``dtype`` (checked at build time, as TF)."""
    kind = _DTYPE_KIND.get(op_type)
    if kind == "float":
        ok, allowed = dtype.is_floating, "float16, float32, float64"
    elif kind == "numeric":
        ok, allowed = dtype.is_numeric, "float16, float32, float64, int8, int16, int32, " \
            "int64, uint8"
    elif kind == "bool":
        ok, allowed = dtype.is_bool, "bool"
    else:
        return
    if not ok:
        raise TypeError(f"Value passed to parameter '{param}' of {op_type} has DataType "
                        f"{dtype.name} not in list of allowed values: {allowed}")


def _unary(op_type, x, name):
    x = convert_to_tensor(x)
    check_input_dtype(op_type, x.dtype)
    return get_default_graph().create_op(op_type, [x], name=name or op_type).outputs[0]


def binary_operands(x, y, op_type="op"):
    """Convert ``x`` and ``y`` to tensors of one dtype (Python values adopt the other's)."""
    if isinstance(x, Tensor) or not isinstance(y, Tensor):
        x = convert_to_tensor(x)
        y = convert_to_tensor(y, dtype=x.dtype) if not isinstance(y, Tensor) else y
    else:
        y = convert_to_tensor(y)
        x = convert_to_tensor(x, dtype=y.dtype)
    if x.dtype is not y.dtype:
        raise TypeError(f"Input 'y' of '{op_type}' Op has type {y.dtype.name} that does not "
                        f"match type {x.dtype.name} of argument 'x'.")
    return x, y


def _binary(op_type, x, y, name):
    x, y = binary_operands(x, y, op_type)
    check_input_dtype(op_type, x.dtype)
    name = name or _DEFAULT_NAMES.get(op_type, op_type)
    return get_default_graph().create_op(op_type, [x, y], name=name).outputs[0]


def _make_unary(op_type, fn_name):
    def fn(x, name=None):
        return _unary(op_type, x, name)
    fn.__name__ = fn_name
    dtype = "bool" if op_type.startswith("Logical") else "float32"
    fn.__doc__ = (f"Elementwise ``{fn_name}`` (op type ``{op_type}``).\n\n"
                  f"    >>> y = {fn_name}(df.placeholder(df.{dtype}, [3]))\n"
                  f"    >>> y.op.type\n    '{op_type}'\n")
    return fn


def _make_binary(op_type, fn_name):
    def fn(x, y, name=None):
        return _binary(op_type, x, y, name)
    fn.__name__ = fn_name
    dtype = "bool" if op_type.startswith("Logical") else "float32"
    fn.__doc__ = (f"Elementwise ``{fn_name}`` with NumPy broadcasting (op type ``{op_type}``)."
                  f"\n\n    >>> x = df.placeholder(df.{dtype}, [2, 3])\n"
                  f"    >>> y = df.placeholder(df.{dtype}, [3])\n"
                  f"    >>> z = {fn_name}(x, y)\n"
                  f"    >>> z.op.type, z.shape.as_list()\n    ('{op_type}', [2, 3])\n")
    return fn


for _row in ELEMENTWISE.values():
    if _row.wrapper:
        _make = _make_unary if _row.arity == 1 else _make_binary
        globals()[_row.wrapper] = _make(_row.name, _row.wrapper)

subtract = globals()["subtract"]
multiply = globals()["multiply"]
add = globals()["add"]
negative = globals()["negative"]
pow = globals()["pow"]  # noqa: A001 - TF's name


def divide(x, y, name=None):
    """``x / y`` with true division: integer inputs are cast to float first, as in TF."""
    x, y = binary_operands(x, y, "RealDiv")
    if not x.dtype.is_numeric:  # any numeric dtype: integers are cast to float below
        raise TypeError(f"divide: expected a numeric tensor, got {x.dtype.name}")
    if x.dtype.is_integer:
        target = _dtypes.float64 if x.dtype in (_dtypes.int32, _dtypes.int64) \
            else _dtypes.float32
        x, y = cast(x, target), cast(y, target)
    return get_default_graph().create_op("RealDiv", [x, y], name=name or "truediv").outputs[0]


truediv = divide


def cast(x, dtype, name=None):
    """Convert ``x`` to ``dtype`` (floats to ints truncate toward zero, as in TF)."""
    x = convert_to_tensor(x)
    dtype = _dtypes.as_dtype(dtype)
    if x.dtype is dtype:
        return x
    return get_default_graph().create_op("Cast", [x], {"DstT": dtype, "SrcT": x.dtype},
                                         name=name or "Cast").outputs[0]


def _static_axis(op_type, axis):
    """``axis`` as None, an int or a tuple of ints (a constant tensor is accepted too)."""
    if isinstance(axis, Tensor):
        value = constant_value(axis)
        if value is None:
            raise TypeError(f"{REDUCTION_OPS[op_type]}: axis must be a Python int, a list of "
                            "ints or a constant (a static attribute here), not a computed "
                            "Tensor")
        axis = value
    if axis is None:
        return None
    if isinstance(axis, (list, tuple)) or np.ndim(axis) > 0:
        return tuple(int(a) for a in np.ravel(axis))
    return int(axis)


def _reduce(op_type, x, axis, keepdims, name):
    x = convert_to_tensor(x)
    axis = _static_axis(op_type, axis)
    check_input_dtype(op_type, x.dtype, "input")
    attrs = {"axis": axis, "keep_dims": bool(keepdims)}
    return get_default_graph().create_op(op_type, [x], attrs, name=name or op_type).outputs[0]


def _make_reduction(op_type, fn_name):
    def fn(input_tensor, axis=None, keepdims=None, name=None, reduction_indices=None,
           keep_dims=None):
        if axis is None:
            axis = reduction_indices
        keep = bool(keepdims if keepdims is not None else (keep_dims or False))
        return _reduce(op_type, input_tensor, axis, keep, name)
    fn.__name__ = fn_name
    dtype = "bool" if op_type in ("All", "Any") else "float32"
    fn.__doc__ = (f"Reduce with ``{op_type}`` over ``axis`` (all axes when None).\n\n"
                  f"    >>> x = df.placeholder(df.{dtype}, [2, 3])\n"
                  f"    >>> {fn_name}(x, axis=1, keepdims=True).shape.as_list()\n"
                  f"    [2, 1]\n")
    return fn


for _t, _n in REDUCTION_OPS.items():
    globals()[_n] = _make_reduction(_t, _n)

reduce_sum = globals()["reduce_sum"]


def matmul(a, b, transpose_a=False, transpose_b=False, name=None):
    """Matrix product of two rank-2 tensors (``a @ b``)."""
    a, b = binary_operands(a, b, "MatMul")
    check_input_dtype("MatMul", a.dtype, "a")
    attrs = {"transpose_a": bool(transpose_a), "transpose_b": bool(transpose_b)}
    return get_default_graph().create_op("MatMul", [a, b], attrs, name=name or "MatMul").outputs[0]


def scalar_mul(scalar, x, name=None):
    return multiply(scalar, x, name=name)


def add_n(inputs, name=None):
    """Sum of a list of tensors of one shape and dtype."""
    inputs = [convert_to_tensor(t) for t in inputs]
    if not inputs:
        raise ValueError("add_n requires at least one input")
    if len(inputs) == 1:
        from .array_ops import identity
        return identity(inputs[0], name=name)
    return get_default_graph().create_op("AddN", inputs, name=name or "AddN").outputs[0]


@register_op("AddN")
def _add_n_infer(op):
    shape = op.inputs[0].shape
    for t in op.inputs[1:]:
        if t.dtype is not op.inputs[0].dtype:
            raise TypeError(f"add_n: all inputs must have one dtype ({op.name})")
        shape = shape.merge_with(t.shape)
    return [(op.inputs[0].dtype, shape)]
