"""Scalar device functions of the elementwise ops, one set per dtype.

Each op's scalar function is built from its row of the elementwise op table
(:mod:`dataflow.framework.elementwise_table`: the ``cuda`` expression, else the ``scalar``
one) per NumPy dtype with its constants (0, 1) of that dtype, so float32 kernels never
promote to float64 (a literal ``1.0`` would).
``math.exp``/``math.tanh``/... compile to libdevice calls, fast on the GPU.

>>> f = scalar_fn("Sigmoid", np.dtype(np.float32))   # a cuda.jit device function
"""
from __future__ import annotations

import functools
import math

import numpy as np
from numba import cuda

from ....framework.elementwise_table import ELEMENTWISE

__all__ = ["UNARY", "BINARY", "device_source", "scalar_fn"]


def _primitives(dt):
    """What the table's expressions may call, as device functions on ``dt``: typed
    constants and the math functions (libdevice, with the edge cases the simulator's
    Python ``math`` module would raise on answered here)."""
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

    @cuda.jit(device=True)
    def tanh(x):
        return math.tanh(x)

    @cuda.jit(device=True)
    def sigmoid(x):
        # exp(-x) overflows to inf for very negative x: 1 / inf is the right limit 0.
        return one / (one + exp(-x))

    return {"_one": one, "_zero": zero, "_exp": exp, "_log": log, "_sqrt": sqrt,
            "_tanh": tanh, "_sigmoid": sigmoid}


# Scalar code of the table's rows for the GPU, and of Cast (the identity: the store into
# the output array converts).
_EXPRESSIONS = {**{r.name: (r.arity, r.cuda_scalar) for r in ELEMENTWISE.values()
                   if r.cuda_scalar is not None},
                "Cast": (1, "{0}")}
#: Op types with a scalar device function, by arity.
UNARY = tuple(name for name, (arity, _) in _EXPRESSIONS.items() if arity == 1)
BINARY = tuple(name for name, (arity, _) in _EXPRESSIONS.items() if arity == 2)


def device_source(op_type: str) -> str:
    """Python source of ``op_type``'s scalar device function."""
    arity, expr = _EXPRESSIONS[op_type]
    args = [f"x{k}" for k in range(arity)]
    return f"def scalar_{op_type.lower()}({', '.join(args)}):\n" \
           f"    return {expr.format(*args)}\n"


@functools.lru_cache(maxsize=None)
def scalar_fn(op_type: str, dtype: np.dtype):
    """The device function of ``op_type`` on scalars of ``dtype``."""
    namespace = _primitives(dtype)
    exec(compile(device_source(op_type), f"<{op_type} {dtype}>", "exec"), namespace)
    return cuda.jit(device=True)(namespace[f"scalar_{op_type.lower()}"])
