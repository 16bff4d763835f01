"""Scalar functions of the elementwise ops, for compiled loops (imports Numba).

Each op's scalar function is built from its row of the elementwise op table
(:mod:`dataflow.framework.elementwise_table`); ``unary(name, x)`` and
``binary(name, x, y)`` call the one named by a string literal, so one loop
source serves every op and Numba's disk cache keys each loop by the op name::

    @njit
    def loop(x, out):
        for i in range(x.size):
            out[i] = unary("Tanh", x[i])

The table writes arithmetic as the NumPy reference kernels compute it, so results are
bitwise equal (no fast-math, constants typed as the argument); Exp, Log, Tanh and
Sigmoid use :mod:`dataflow.kernels.approx` (bounds in its docstring). Callers compile with
``error_model="numpy"`` (see :mod:`dataflow.kernels.approx`).
"""
from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload
from numba.np.numpy_support import as_dtype

from ...framework.elementwise_table import ELEMENTWISE
from .. import approx

__all__ = ["BINARY", "UNARY", "binary", "cast_like", "is_nan_bits", "nan_like", "one", "unary",
           "zero"]

UNARY: dict = {}
BINARY: dict = {}


def _register(table, name):
    def decorate(fn):
        table[name] = njit(error_model="numpy")(fn)
        return fn
    return decorate


def _constant(value):
    """``f(x)``: ``value`` as a constant of x's float type (a bare Python float is
    float64, which would turn float32 arithmetic into float64)."""
    def stub(x):
        return value

    @overload(stub)
    def _impl(x):
        if isinstance(x, types.Float):
            c = as_dtype(x).type(value)
            return lambda x: c
        return None
    return stub


one = _constant(1)
zero = _constant(0)
nan_like = _constant(np.nan)


def cast_like(x, v):
    """``v`` converted to the type of ``x`` (compiled code)."""
    raise TypeError("compiled code only")


@overload(cast_like)
def _cast_like_impl(x, v):
    if x == types.float32:
        return lambda x, v: np.float32(v)
    if x == types.float64:
        return lambda x, v: np.float64(v)
    return None


def is_nan_bits(x):
    """NaN test on the IEEE bits, valid under the ``nnan`` fast-math flag (compiled code)."""
    raise TypeError("compiled code only")


@overload(is_nan_bits)
def _is_nan_bits_impl(x):
    if x == types.float32:
        mask, inf = np.int32(0x7FFFFFFF), np.int32(0x7F800000)
    elif x == types.float64:
        mask, inf = np.int64(0x7FFFFFFFFFFFFFFF), np.int64(0x7FF0000000000000)
    else:
        return None
    return lambda x: (approx.float_bits(x) & mask) > inf


def unary(name, x):
    """The registered scalar function of op ``name`` applied to ``x`` (compiled code)."""
    raise TypeError("compiled code only")


def binary(name, x, y):
    """The registered scalar function of op ``name`` applied to ``x, y`` (compiled code)."""
    raise TypeError("compiled code only")


@overload(unary)
def _unary_impl(name, x):
    if not isinstance(name, types.StringLiteral):
        return None
    f = UNARY[name.literal_value]
    return lambda name, x: f(x)


@overload(binary)
def _binary_impl(name, x, y):
    if not isinstance(name, types.StringLiteral):
        return None
    f = BINARY[name.literal_value]
    return lambda name, x, y: f(x, y)


# -- the scalar functions, built from the elementwise op table ------------------------------

# What the table's scalar expressions may call (see dataflow/framework/elementwise_table.py):
# exact arithmetic, and kernels.approx's vectorizable transcendental functions.
_PRIMITIVES = {"np": np, "one": one, "zero": zero, "_sqrt": np.sqrt, "_exp": approx.exp,
               "_log": approx.log, "_tanh": approx.tanh, "_sigmoid": approx.sigmoid}


def scalar_source(row) -> str:
    """Python source of ``row``'s scalar function: its expression over ``x0``/``x1``,
    with ``_one``/``_zero`` typed like ``x0``."""
    args = [f"x{k}" for k in range(row.arity)]
    lines = [f"def scalar_{row.name.lower()}({', '.join(args)}):"]
    if "_one" in row.scalar:
        lines.append("    _one = one(x0)")
    if "_zero" in row.scalar:
        lines.append("    _zero = zero(x0)")
    lines.append("    return " + row.scalar.format(*args))
    return "\n".join(lines) + "\n"


def _build(row):
    namespace = dict(_PRIMITIVES)
    exec(compile(scalar_source(row), f"<scalar {row.name}>", "exec"), namespace)
    return njit(error_model="numpy")(namespace[f"scalar_{row.name.lower()}"])


for _row in (r for r in ELEMENTWISE.values() if r.fusable):
    (UNARY if _row.arity == 1 else BINARY)[_row.name] = _build(_row)
