"""Scalar device functions of the elementwise ops, one set per dtype.

Each op's scalar function is built per NumPy dtype with its constants (0, 1) of
that dtype, so float32 kernels never promote to float64 (a literal ``1.0`` would).
``math.exp``/``math.tanh``/... compile to libdevice calls, fast on the GPU.

>>> f = scalar_fn("Sigmoid", np.dtype(np.float32))   # a cuda.jit device function
"""
from __future__ import annotations

import functools
import math

import numpy as np
from numba import cuda

__all__ = ["UNARY", "BINARY", "COMPARISONS", "scalar_fn"]


def _unary(dt):
    zero, one = dt.type(0), dt.type(1)
    if dt.kind == "f":
        nan, inf = dt.type(np.nan), dt.type(np.inf)
        # exp overflows above log(max): answer inf without calling it (the simulator
        # runs Python's math.exp, which raises OverflowError there).
        exp_max = dt.type(np.log(np.finfo(dt).max))
    else:
        nan = inf = exp_max = zero  # unused: the float-only ops are never built for ints

    @cuda.jit(device=True)
    def exp(x):
        return inf if x > exp_max else math.exp(x)

    @cuda.jit(device=True)
    def log(x):
        # Python's math.log (simulator) raises at x <= 0; libdevice returns these.
        return math.log(x) if x > zero else (-inf if x == zero else nan)

    @cuda.jit(device=True)
    def sqrt(x):
        return math.sqrt(x) if x >= zero else nan

    def sigmoid(x):
        # exp(-x) overflows to inf for very negative x: 1 / inf is the right limit 0.
        return one / (one + exp(-x))

    def relu(x):
        # NaN stays NaN (np.maximum(x, 0) propagates it).
        return zero if x < zero else x

    return {
        "Neg": lambda x: -x,
        "Square": lambda x: x * x,
        "Sqrt": sqrt,
        "Rsqrt": lambda x: one / sqrt(x),
        "Exp": exp,
        "Log": log,
        "Tanh": lambda x: math.tanh(x),
        "Sigmoid": sigmoid,
        "Abs": lambda x: -x if x < zero else x,
        "Reciprocal": lambda x: one / x,
        "Relu": relu,
        "LogicalNot": lambda x: not x,
        "Cast": lambda x: x,  # the store into the output array converts
    }


def _binary(dt):
    one = dt.type(1)

    def maximum(x, y):
        return x if x >= y or x != x else y  # NaN in either propagates

    def minimum(x, y):
        return x if x <= y or x != x else y

    def squared_difference(x, y):
        d = x - y
        return d * d

    return {
        "AddV2": lambda x, y: x + y,
        "Sub": lambda x, y: x - y,
        "Mul": lambda x, y: x * y,
        "RealDiv": lambda x, y: x / y,
        "Maximum": maximum,
        "Minimum": minimum,
        "SquaredDifference": squared_difference,
        # The activation gradients take (y, dy), as TF's kernels do.
        "TanhGrad": lambda y, dy: dy * (one - y * y),
        "SigmoidGrad": lambda y, dy: dy * (y * (one - y)),
        "Less": lambda x, y: x < y,
        "LessEqual": lambda x, y: x <= y,
        "Greater": lambda x, y: x > y,
        "GreaterEqual": lambda x, y: x >= y,
        "Equal": lambda x, y: x == y,
        "NotEqual": lambda x, y: x != y,
        "LogicalAnd": lambda x, y: x and y,
        "LogicalOr": lambda x, y: x or y,
    }


_PROBE = np.dtype(np.float64)
#: Op types with a scalar device function, by arity.
UNARY = tuple(_unary(_PROBE))
BINARY = tuple(_binary(_PROBE))
COMPARISONS = ("Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual")


@functools.lru_cache(maxsize=None)
def scalar_fn(op_type: str, dtype: np.dtype):
    """The device function of ``op_type`` on scalars of ``dtype``."""
    table = _unary(dtype) if op_type in UNARY else _binary(dtype)
    return cuda.jit(device=True)(table[op_type])
