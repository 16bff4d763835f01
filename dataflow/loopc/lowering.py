"""The lowering table: per op type, the Numba code of one op inside a compiled loop.

A lowering is registered per op type (``@register_lowering("MatMul")``) as a function
``emit(e) -> [expression per output]`` of an :class:`~.codegen.OpEmitter` ``e``, which
gives the op (``e.op``), its input expressions (``e.args``), dtypes (``e.dtype(k)`` of
output ``k``, ``e.in_dtype(i)``), literal constants (``e.const(value)``) and
statements (``e.line(text)``). An optional ``check(op)`` returns why an op cannot be
lowered (then its frame runs interpreted, and ``RunMetadata.interpreted_frames`` says
so), or None.

Results must equal the NumPy reference kernel's: arithmetic and comparisons bit for bit
(scalars are cast back to the graph's dtype with ``cst``, see :mod:`.nbhelpers`),
exp/log/tanh/sigmoid within the bounds of :mod:`dataflow.kernels.approx`. Anything a
reference kernel raises for (a bad index, an integer division by zero, a failed
Assert, an empty stack) raises ``Fallback`` here instead, and the frame re-runs
interpreted, so the error is the interpreter's own.

>>> sorted(t for t in ("AddV2", "MatMul", "StackPush") if t in LOWERINGS)
['AddV2', 'MatMul', 'StackPush']
"""
from __future__ import annotations

import numpy as np

from dataflow.framework.elementwise_table import ELEMENTWISE

__all__ = ["LOWERINGS", "Lowering", "RESOURCE_KINDS", "register_lowering"]


class Lowering:
    """One registered lowering: ``emit(e)`` and ``check(op)`` (None or why not)."""

    __slots__ = ("emit", "_check")

    def __init__(self, emit, check=None):
        self.emit, self._check = emit, check

    def check(self, op):
        return None if self._check is None else self._check(op)


LOWERINGS: dict = {}

# Resources other than stacks and variables that a frame may use through a loop-invariant
# Enter, by parameter kind (``"ta"``: TensorArrays, :mod:`.lowering_ta`). Each kind is an
# object with ``claim(gen) -> Enters it takes`` and ``finish(gen) -> (expressions,
# results)`` for the code generator, ``argument(desc, value) -> (argument, record)`` (or
# ``(None, why not)``) and ``commit(record, returned state)`` for the runner.
RESOURCE_KINDS: dict = {}


def register_lowering(*op_types, check=None):
    """Register ``emit(e)`` as the lowering of ``op_types`` (``check(op)``: None or why
    not)."""
    def decorate(emit):
        for t in op_types:
            LOWERINGS[t] = Lowering(emit, check)
        return emit
    return decorate


def _dtype_name(t) -> str | None:
    np_type = t.dtype.as_numpy_dtype
    return None if np_type is None else np.dtype(np_type).name


def _same_numeric_dtypes(op):
    names = [_dtype_name(t) for t in list(op._inputs) + list(op._outputs)]
    if None in names:
        return "non-numeric dtype"
    return None


# -- elementwise ops ---------------------------------------------------------------------------

# Exact in Numba for every numeric dtype: the operator, then a cast to the graph's dtype.
_OPERATORS = {"AddV2": "({0} + {1})", "Sub": "({0} - {1})", "Mul": "({0} * {1})",
              "Neg": "(-{0})", "Square": "({0} * {0})",
              "Less": "({0} < {1})", "LessEqual": "({0} <= {1})", "Greater": "({0} > {1})",
              "GreaterEqual": "({0} >= {1})", "Equal": "({0} == {1})",
              "NotEqual": "({0} != {1})",
              "LogicalAnd": "np.logical_and({0}, {1})", "LogicalOr": "np.logical_or({0}, {1})",
              "LogicalNot": "np.logical_not({0})",
              "Maximum": "np.maximum({0}, {1})", "Minimum": "np.minimum({0}, {1})",
              "Abs": "np.abs({0})", "Sign": "np.sign({0})"}
# Float only: table rows with a scalar function (exact arithmetic; approximations for
# the transcendental ones), applied elementwise by ew1/ew2.
_FLOAT_ROWS = {name for name, row in ELEMENTWISE.items() if row.fusable}
# (Sin and Cos are libm's here and NumPy's own SIMD code in the reference kernel: both
# are within 1 ulp of the true value, so they may differ by 1 ulp from each other.)
_FLOAT_OPERATORS = {"RealDiv": "({0} / {1})", "Floor": "np.floor({0})",
                    "Ceil": "np.ceil({0})", "Sqrt": "np.sqrt({0})", "Sin": "np.sin({0})",
                    "Cos": "np.cos({0})"}
_INT_ONLY = {"FloorDiv": "({0} // {1})", "FloorMod": "({0} % {1})"}


def _elementwise_check(op):
    why = _same_numeric_dtypes(op)
    if why:
        return why
    dt = _dtype_name(op._inputs[0])
    is_float = dt.startswith("float")
    if op.type in _INT_ONLY and is_float:
        return f"{op.type} on {dt} is not lowered"
    if op.type in _FLOAT_OPERATORS and not is_float:
        return f"{op.type} on {dt} is not lowered"
    if op.type not in _OPERATORS and op.type not in _INT_ONLY and op.type not in \
            _FLOAT_OPERATORS and not (is_float and op.type in _FLOAT_ROWS):
        return f"{op.type} on {dt} is not lowered"
    if dt == "float16":
        return "float16 is not lowered"
    return None


def _elementwise(e):
    op, args, out = e.op, e.args, e.dtype(0)
    t = op.type
    if t in _INT_ONLY:
        e.line(f"check_divisor({args[1]})")
        return [f"cst({_INT_ONLY[t].format(*args)}, {out!r})"]
    if t in _FLOAT_OPERATORS:
        return [f"cst({_FLOAT_OPERATORS[t].format(*args)}, {out!r})"]
    if t in _OPERATORS:
        return [f"cst({_OPERATORS[t].format(*args)}, {out!r})"]
    fn = "ew1" if len(args) == 1 else "ew2"
    return [f"cst({fn}({t!r}, {', '.join(args)}), {out!r})"]


register_lowering(*sorted(set(_OPERATORS) | _FLOAT_ROWS | set(_FLOAT_OPERATORS) |
                          set(_INT_ONLY)), check=_elementwise_check)(_elementwise)


@register_lowering("AddN", check=_same_numeric_dtypes)
def _add_n(e):
    out = e.dtype(0)
    total = f"cst({e.args[0]} + {e.args[1]}, {out!r})"
    for a in e.args[2:]:
        total = f"cst({total} + {a}, {out!r})"
    return [total]


@register_lowering("Identity", "StopGradient", "PreventGradient", "Snapshot", "LoopCond")
def _identity(e):
    return list(e.args[:1])


@register_lowering("NoOp")
def _no_op(e):
    return []


@register_lowering("Select", "SelectV2", check=lambda op: _same_numeric_dtypes(op)
                   if _dtype_name(op._inputs[1]) else "non-numeric dtype")
def _select(e):
    c, x, y = e.args
    return [f"cst(where3({c}, {x}, {y}), {e.dtype(0)!r})"]


def _const_check(op):
    value = op.get_attr("value")
    if np.asarray(value).dtype.kind not in "biuf":
        return "non-numeric constant"
    return None


@register_lowering("Const", check=_const_check)
def _const(e):
    return [e.const(e.op.get_attr("value"))]


@register_lowering("ZerosLike", "OnesLike", check=_same_numeric_dtypes)
def _fill_like(e):
    fill = "0" if e.op.type == "ZerosLike" else "1"
    return [f"cst(np.zeros_like({e.args[0]}) + {fill}, {e.dtype(0)!r})"]


# -- matmul and reductions ---------------------------------------------------------------------

def _matmul_check(op):
    dt = _dtype_name(op._outputs[0])
    if dt not in ("float32", "float64"):
        return f"MatMul on {dt} (BLAS takes floats only)"
    if any(t.shape.ndims not in (None, 2) for t in op._inputs):
        return "MatMul of non-matrices"
    return None


@register_lowering("MatMul", check=_matmul_check)
def _matmul(e):
    # gemm: NumPy's own cblas_?gemm with the transposes as flags (see nbhelpers).
    a, b = e.args
    ta, tb = bool(e.op.get_attr("transpose_a")), bool(e.op.get_attr("transpose_b"))
    if tb and e.dtype(0) == "float32" and e.invariant(1):
        # A loop-invariant B^T (dz W^T in an RNN's gradient loop): W^T copied once per
        # run of the frame for the own GEMM's NN tiles, the same bits as per call.
        bt = e.hoist(f"gemm_pack_b({b})")
        return [f"gemm_packed({a}, {b}, {bt}, {ta}, par)"]
    return [f"gemm_par({a}, {b}, {ta}, {tb}, par)"]


def _axes_of(op):
    axis = op.get_attr("axis")
    if axis is None:
        return None
    return [axis] if isinstance(axis, int) else list(axis)


def _sum_check(op):
    why = _same_numeric_dtypes(op)
    if why:
        return why
    axes = _axes_of(op)
    rank = op._inputs[0].shape.ndims
    if axes is None:
        return None
    if rank is None:
        return "reduction axes over an input of unknown rank"
    axes = sorted({a % rank for a in axes}) if rank else []
    if axes == list(range(rank)):
        return None
    if rank == 2 and len(axes) == 1 and op.type in ("Sum", "Mean"):
        return None
    return f"reduction over axes {axes} of a rank-{rank} input is not lowered"


@register_lowering("Sum", "Mean", "Max", "Min", check=_sum_check)
def _reduce(e):
    op, x, out = e.op, e.args[0], e.dtype(0)
    axes = _axes_of(op)
    rank = op._inputs[0].shape.ndims
    keep = op.get_attr("keep_dims")
    full = axes is None or sorted({a % rank for a in axes} if rank else []) == list(range(rank))
    if full:
        if op.type in ("Max", "Min"):
            fn = "np.max" if op.type == "Max" else "np.min"
            value = f"cst({fn}(np.asarray({x})), {out!r})"
            e.line(f"if np.asarray({x}).size == 0: raise Fallback()")
        elif op.type == "Sum":
            value = f"cst(psum({x}), {out!r})"
        else:
            if not out.startswith("float"):
                return None
            value = f"cst(psum({x}) / max(np.asarray({x}).size, 1), {out!r})"
        if keep and rank:
            return [f"np.full({(1,) * rank}, {value})"]
        return [value]
    axis = axes[0] % rank
    total = f"axis_sum({x}, {axis})"
    if op.type == "Mean":
        total = f"({total} / max({x}.shape[{axis}], 1))"
    value = f"cst({total}, {out!r})"
    if keep:
        shape = "(1, -1)" if axis == 0 else "(-1, 1)"
        return [f"{value}.reshape({shape})"]
    return [value]


# -- array ops ---------------------------------------------------------------------------------

def _static_length(t):
    dims = t.shape.as_list() if t.shape.ndims is not None else None
    return None if not dims or dims[0] is None else dims[0]


def _reshape_check(op):
    if _dtype_name(op._inputs[0]) is None:
        return "non-numeric dtype"
    if _static_length(op._inputs[1]) is None:
        return "target shape of unknown length"
    return None


@register_lowering("Reshape", check=_reshape_check)
def _reshape(e):
    x, s = e.args
    n = _static_length(e.op._inputs[1])
    dims = ", ".join(f"{s}[{i}]" for i in range(n)) + ("," if n == 1 else "")
    return [f"np.ascontiguousarray(np.asarray({x})).reshape(({dims}))"]


@register_lowering("Shape", check=lambda op: None if op._inputs[0].shape.ndims is not None
                   else "Shape of an input of unknown rank")
def _shape(e):
    rank = e.op._inputs[0].shape.ndims
    dt = e.dtype(0)
    if rank == 0:
        return [f"np.zeros(0, np.{dt})"]
    return [f"np.array(np.asarray({e.args[0]}).shape, np.{dt})"]


def _gather_check(op):
    if _dtype_name(op._inputs[0]) is None:
        return "non-numeric dtype"
    axis = op.get_attr("axis")
    if axis not in (0, None):
        return f"GatherV2 on axis {axis} is not lowered"
    if op._inputs[0].shape.ndims in (None, 0):
        return "GatherV2 of params of unknown rank"
    return None


@register_lowering("GatherV2", check=_gather_check)
def _gather(e):
    params, idx = e.args[:2]
    e.line(f"check_index({idx}, {params}.shape[0])")
    return [f"{params}[{idx}]"]


def _pack_check(op):
    if _dtype_name(op._inputs[0]) is None:
        return "non-numeric dtype"
    if op.get_attr("axis") != 0:
        return "Pack along an axis other than 0 is not lowered"
    return None


@register_lowering("Pack", check=_pack_check)
def _pack(e):
    items = ", ".join(f"np.asarray({a})" for a in e.args)
    if e.op._inputs[0].shape.ndims == 0:
        return [f"np.array([{', '.join(e.args)}], np.{e.dtype(0)})"]
    return [f"np.stack(({items},))"]


def _concat_check(op):
    if _dtype_name(op._inputs[0]) is None:
        return "non-numeric dtype"
    if op._inputs[0].shape.ndims is None and op.get_attr("axis") < 0:
        return "ConcatV2 along a negative axis of inputs of unknown rank"
    return None


@register_lowering("ConcatV2", check=_concat_check)
def _concat(e):
    axis = e.op.get_attr("axis")
    if axis < 0:
        axis += e.op._inputs[0].shape.ndims
    items = ", ".join(e.args) + ("," if len(e.args) == 1 else "")
    return [f"np.concatenate(({items}), axis={axis})"]


def _one_hot_check(op):
    if op.get_attr("axis") not in (-1, None):
        return "OneHot along an axis other than the last"
    if _dtype_name(op._outputs[0]) is None:
        return "non-numeric dtype"
    return None


@register_lowering("OneHot", check=_one_hot_check)
def _one_hot(e):
    dt = e.dtype(0)
    on, off = e.const(np.dtype(dt).type(e.op.get_attr("on_value"))), \
        e.const(np.dtype(dt).type(e.op.get_attr("off_value")))
    return [f"one_hot({e.args[0]}, {int(e.op.get_attr('depth'))}, {on}, {off})"]


# -- Assert, stacks and variables ---------------------------------------------------------------

@register_lowering("Assert")
def _assert(e):
    # A failed Assert re-runs the frame interpreted, which raises the kernel's own error.
    e.line(f"if not np.all({e.args[0]}): raise Fallback()")
    return []


def _stack_value_check(op):
    value = op._inputs[1]
    if _dtype_name(value) is None:
        return "non-numeric stack entries"
    if value.shape.ndims is None:
        return "stack entries of unknown rank"
    return None


def _stack_names(e):
    """``(buf, count, names of a pushed-and-popped stack or None)`` of the op's stack:
    the code generator's push or pop slot, or a :mod:`.lowering_stacks` one."""
    both = getattr(e.gen, "stack_slots", {}).get(e.gen._root(e.op._inputs[0]))
    if both is not None:
        return both[0], both[1], both
    buf, n = e.stack(e.op._inputs[0])
    return buf, n, None


@register_lowering("StackPush", check=_stack_value_check)
def _stack_push(e):
    buf, n, both = _stack_names(e)
    value = e.args[1]
    e.line(f"{buf} = stack_push({buf}, {n}, cst({value}, {e.in_dtype(1)!r}))")
    e.line(f"{n} += 1")
    e.line(f"if {n} > {buf}_peak: {buf}_peak = {n}")
    if both:
        e.line(f"{both[3]} += 1")
    return [value]


@register_lowering("StackPop", check=lambda op: None if _dtype_name(op._outputs[0])
                   else "non-numeric stack entries")
def _stack_pop(e):
    buf, n, both = _stack_names(e)
    e.line(f"if {n} == 0: raise Fallback()")
    e.line(f"{n} -= 1")
    if both:
        # A later push in this frame reuses the row: the entry leaves as a copy.
        e.line(f"{both[4]} += 1")
        return [f"stack_take_copy({buf}, {n})"]
    return [f"stack_take({buf}, {n})"]


@register_lowering("StackSize")
def _stack_size(e):
    _, n, _ = _stack_names(e)
    return [f"np.int32({n})"]


@register_lowering("ReadVariableOp", check=lambda op: None if _dtype_name(op._outputs[0])
                   else "non-numeric variable")
def _read_variable(e):
    return [e.variable(e.op._inputs[0])]


def _assign_check(op):
    if _dtype_name(op._inputs[1]) is None:
        return "non-numeric variable"
    if op.type == "AssignVariableOp" and not op.attrs.get("validate_shape", True):
        return "assign with validate_shape=False"
    return None


@register_lowering("AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp",
                   check=_assign_check)
def _assign_variable(e):
    var = e.variable(e.op._inputs[0])
    value, dt = e.args[1], e.in_dtype(1)
    if e.op.type == "AssignAddVariableOp":
        value = f"({var} + {value})"
    elif e.op.type == "AssignSubVariableOp":
        value = f"({var} - {value})"
    e.line(f"check_same_shape({var}, {value})")
    e.line(f"{var} = cst({value}, {dt!r})")
    return [var]


# The array and NN lowerings (and Cast) live in their own module, registered into this table.
from . import lowering_array  # noqa: E402,F401  (registers on import)
from . import lowering_ta  # noqa: E402,F401  (registers on import)
from . import lowering_stacks  # noqa: E402,F401  (registers on import)
