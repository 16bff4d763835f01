"""Elementwise math, comparisons, reductions, matmul and cast."""
from __future__ import annotations

import operator

import numpy as np

from ..registry import register_kernel
from ._util import const, np_dtype, scalarize


def _sigmoid(x):
    with np.errstate(over="ignore"):
        return 1 / (1 + np.exp(-x))


def _rsqrt(x):
    return 1 / np.sqrt(x)


def _reciprocal(x):
    return 1 / x


UNARY = {
    "Neg": operator.neg, "Square": lambda x: x * x, "Sqrt": np.sqrt, "Rsqrt": _rsqrt,
    "Exp": np.exp, "Log": np.log, "Log1p": np.log1p, "Tanh": np.tanh, "Sigmoid": _sigmoid,
    "Abs": operator.abs, "Sign": np.sign, "Reciprocal": _reciprocal, "Floor": np.floor,
    "Ceil": np.ceil, "Round": np.rint, "Sin": np.sin, "Cos": np.cos,
    # np.logical_not has a fast path for np.bool_ scalars (~160 ns, ``~x`` ~500 ns).
    "LogicalNot": np.logical_not,
}


def _floordiv(x, y):
    return x // y


def _squared_difference(x, y):
    d = x - y
    return d * d


def _maximum(x, y):
    # Scalars compare with Python operators (np.maximum costs ~1 µs on NumPy scalars);
    # ``x != x`` keeps np.maximum's NaN propagation.
    if type(x) is np.ndarray or type(y) is np.ndarray:
        return np.maximum(x, y)
    return x if x >= y or x != x else y


def _minimum(x, y):
    if type(x) is np.ndarray or type(y) is np.ndarray:
        return np.minimum(x, y)
    return x if x <= y or x != x else y


BINARY = {
    "AddV2": operator.add, "Sub": operator.sub, "Mul": operator.mul,
    "RealDiv": operator.truediv, "FloorDiv": _floordiv, "FloorMod": operator.mod,
    "Maximum": _maximum, "Minimum": _minimum, "Pow": operator.pow,
    "SquaredDifference": _squared_difference,
    "Less": operator.lt, "LessEqual": operator.le, "Greater": operator.gt,
    "GreaterEqual": operator.ge, "Equal": operator.eq, "NotEqual": operator.ne,
    "LogicalAnd": operator.and_, "LogicalOr": operator.or_,
}

for _t, _f in {**UNARY, **BINARY}.items():
    register_kernel(_t)(const(_f))


@register_kernel("AddN")
def _add_n(ctx):
    def add_n(*xs):
        total = xs[0] + xs[1]
        for x in xs[2:]:
            total = total + x
        return total
    return add_n


_INT_TYPES = ["int8", "int16", "int32", "int64", "uint8"]


def _check_divisor(y):
    # NumPy returns 0 (with a warning) for integer division by zero; TF's CPU kernels fail.
    if (not y) if type(y) is not np.ndarray else not y.all():
        raise ZeroDivisionError("Integer division by zero")


def _int_floordiv(x, y):
    _check_divisor(y)
    return x // y


def _int_floormod(x, y):
    _check_divisor(y)
    return x % y


register_kernel("FloorDiv", dtypes=_INT_TYPES, priority=1)(const(_int_floordiv))
register_kernel("FloorMod", dtypes=_INT_TYPES, priority=1)(const(_int_floormod))
# Rounding an integer is the identity (np.rint would return floats).
register_kernel("Round", dtypes=_INT_TYPES, priority=1)(const(lambda x: x))


@register_kernel("Pow", dtypes=["int8", "int16", "int32", "int64"], priority=1)
def _int_pow(ctx):
    def int_pow(x, y):
        if (y < 0) if type(y) is not np.ndarray else (y < 0).any():
            raise ValueError("Integers to negative integer powers are not allowed.")
        return x ** y
    return int_pow


def _axes(ctx):
    axis = ctx.attr("axis")
    return axis if axis is None or isinstance(axis, int) else tuple(axis)


@register_kernel("Sum")
def _sum(ctx):
    axis, kd, dt = _axes(ctx), ctx.attr("keep_dims"), np_dtype(ctx.output_dtypes[0])
    return lambda x: scalarize(np.sum(x, axis=axis, keepdims=kd, dtype=dt))


@register_kernel("Prod")
def _prod(ctx):
    axis, kd, dt = _axes(ctx), ctx.attr("keep_dims"), np_dtype(ctx.output_dtypes[0])
    return lambda x: scalarize(np.prod(x, axis=axis, keepdims=kd, dtype=dt))


@register_kernel("Mean")
def _mean(ctx):
    axis, kd, dt = _axes(ctx), ctx.attr("keep_dims"), np_dtype(ctx.output_dtypes[0])
    if dt.kind in "iu":
        def int_mean(x):
            x = np.asarray(x)
            n = x.size if axis is None else int(np.prod([x.shape[a] for a in np.atleast_1d(axis)]))
            total = np.sum(x, axis=axis, keepdims=kd, dtype=dt)
            return scalarize(_truncating_div(total, max(n, 1)).astype(dt, copy=False))
        return int_mean
    return lambda x: scalarize(np.mean(x, axis=axis, keepdims=kd, dtype=dt))


def _truncating_div(total, n):
    """Integer division rounding toward zero (C's ``/``, which TF's integer mean uses)."""
    q = total // n
    # Floor division rounds negative non-multiples down; step those back up by one.
    return q + ((q < 0) & (q * n != total))


def _extreme(np_fn, identity_attr):
    def factory(ctx):
        axis, kd = _axes(ctx), ctx.attr("keep_dims")
        dt = ctx.output_dtypes[0]
        fill = getattr(dt, identity_attr) if dt.is_numeric else None

        def reduce(x):
            if np.size(x) == 0:  # TF: the reduction of nothing is the dtype's identity
                return scalarize(np_fn(np.asarray(x), axis=axis, keepdims=kd, initial=fill))
            return scalarize(np_fn(x, axis=axis, keepdims=kd))
        return reduce
    return factory


register_kernel("Max")(_extreme(np.max, "min"))
register_kernel("Min")(_extreme(np.min, "max"))


@register_kernel("All")
def _all(ctx):
    axis, kd = _axes(ctx), ctx.attr("keep_dims")
    return lambda x: scalarize(np.all(x, axis=axis, keepdims=kd))


@register_kernel("Any")
def _any(ctx):
    axis, kd = _axes(ctx), ctx.attr("keep_dims")
    return lambda x: scalarize(np.any(x, axis=axis, keepdims=kd))


@register_kernel("MatMul", parallel=True)  # BLAS runs on every core already
def _matmul(ctx):
    ta, tb = ctx.attr("transpose_a"), ctx.attr("transpose_b")
    if not ta and not tb:
        return operator.matmul
    return lambda a, b: (a.T if ta else a) @ (b.T if tb else b)


@register_kernel("Cast")
def _cast(ctx):
    dt = np_dtype(ctx.attr("DstT"))
    to_scalar = dt.type

    def cast(x):
        if type(x) is np.ndarray:
            return x.astype(dt)  # C casting: floats to ints truncate toward zero
        # On NumPy scalars the scalar type's constructor is the same C cast, returns a
        # NumPy scalar, and is 2-6x faster than astype or a detour through a 0-d array.
        return to_scalar(x)
    return cast
