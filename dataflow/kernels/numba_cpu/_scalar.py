"""Scalar functions of the elementwise ops, for compiled loops (imports Numba).

Each op's scalar function is registered by op type; ``unary(name, x)`` and
``binary(name, x, y)`` call the one named by a string literal, so one loop
source serves every op and Numba's disk cache keys each loop by the op name::

    @njit
    def loop(x, out):
        for i in range(x.size):
            out[i] = unary("Tanh", x[i])

Arithmetic is written as the NumPy reference kernels compute it, so results are
bitwise equal (no fast-math, constants typed as the argument); Exp, Log, Tanh and
Sigmoid use :mod:`dataflow.kernels.approx` (bounds in its docstring). Callers compile with
``error_model="numpy"`` (see :mod:`dataflow.kernels.approx`).
"""
from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload
from numba.np.numpy_support import as_dtype

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


# -- unary -------------------------------------------------------------------------------

@_register(UNARY, "Neg")
def _neg(x):
    return -x


@_register(UNARY, "Square")
def _square(x):
    return x * x


@_register(UNARY, "Sqrt")
def _sqrt(x):
    return np.sqrt(x)


@_register(UNARY, "Rsqrt")
def _rsqrt(x):
    return one(x) / np.sqrt(x)


@_register(UNARY, "Reciprocal")
def _reciprocal(x):
    return one(x) / x


@_register(UNARY, "Abs")
def _abs(x):
    return abs(x)


@_register(UNARY, "Exp")
def _exp(x):
    return approx.exp(x)


@_register(UNARY, "Log")
def _log(x):
    return approx.log(x)


@_register(UNARY, "Tanh")
def _tanh(x):
    return approx.tanh(x)


@_register(UNARY, "Sigmoid")
def _sigmoid(x):
    return approx.sigmoid(x)


@_register(UNARY, "Relu")
def _relu(x):
    # np.maximum(x, 0): NaN stays NaN. Bitwise ``|`` keeps the select branch-free.
    z = zero(x)
    return x if (x > z) | (x != x) else z  # noqa: PLR0124 (NaN test)


# -- binary ------------------------------------------------------------------------------

@_register(BINARY, "AddV2")
def _add(x, y):
    return x + y


@_register(BINARY, "Sub")
def _sub(x, y):
    return x - y


@_register(BINARY, "Mul")
def _mul(x, y):
    return x * y


@_register(BINARY, "RealDiv")
def _div(x, y):
    return x / y


@_register(BINARY, "Maximum")
def _maximum(x, y):
    # np.maximum propagates a NaN from either side.
    return x if (x >= y) | (x != x) else y  # noqa: PLR0124 (NaN test)


@_register(BINARY, "Minimum")
def _minimum(x, y):
    return x if (x <= y) | (x != x) else y  # noqa: PLR0124 (NaN test)


@_register(BINARY, "SquaredDifference")
def _squared_difference(x, y):
    d = x - y
    return d * d


@_register(BINARY, "TanhGrad")
def _tanh_grad(y, dy):
    return dy * (one(y) - y * y)


@_register(BINARY, "SigmoidGrad")
def _sigmoid_grad(y, dy):
    return dy * (y * (one(y) - y))
