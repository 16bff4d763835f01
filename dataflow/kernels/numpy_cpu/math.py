"""Elementwise math, comparisons, reductions, matmul and cast.

Elementwise kernels are the NumPy functions of the elementwise op table
(:mod:`dataflow.framework.elementwise_table`).
"""
from __future__ import annotations

import operator

import numpy as np

from ...framework.elementwise_table import ELEMENTWISE, INT_DTYPES
from ..registry import register_kernel
from ._util import const, np_dtype, scalarize


def _register_elementwise():
    """The reference kernel of every row of the elementwise op table: its NumPy function,
    and for integer inputs its integer variant where it has one."""
    for row in ELEMENTWISE.values():
        register_kernel(row.name)(const(row.numpy))
        if row.numpy_int is not None:
            register_kernel(row.name, dtypes=INT_DTYPES)(const(row.numpy_int))


_register_elementwise()


@register_kernel("AddN")
def _add_n(ctx):
    def add_n(*xs):
        total = xs[0] + xs[1]
        for x in xs[2:]:
            total = total + x
        return total
    return add_n


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
