"""Numba kernels of GatherV2 (float params) and OneHot (float output, last axis).

Results equal the NumPy kernels'; an out-of-range index raises the same error.

>>> table = df.constant(np.arange(6, dtype=np.float32).reshape(3, 2))
>>> ids = df.constant([2, 0])
>>> df.Session().run(df.gather(table, ids)).tolist()
[[4.0, 5.0], [0.0, 1.0]]
"""
from __future__ import annotations

import math

import numpy as np

from dataflow import errors

from . import _dispatch
from ._dispatch import FLOAT_TYPES, lazy, register_numba

_ndarray = np.ndarray
_I32, _I64 = np.dtype(np.int32), np.dtype(np.int64)


@register_numba("GatherV2")
def _gather(ctx, ref):
    """Compiled gather along any axis of a C-contiguous params array."""
    axis, op = ctx.attr("axis"), ctx.op
    dt = np.dtype(ctx.input_dtypes[0].as_numpy_dtype)
    fn = lazy("_array_jit", "kernel", "gather")

    def gather(params, indices):
        if type(params) is not _ndarray or params.dtype is not dt or params.ndim == 0 \
                or not params.flags.c_contiguous or type(indices) is not _ndarray \
                or not (indices.dtype is _I32 or indices.dtype is _I64):
            return ref(params, indices)
        ax = axis % params.ndim
        n = params.shape[ax]
        inner = params.size // n if n else 0
        if indices.size * inner < _dispatch.ARRAY_MIN_SIZE:
            return ref(params, indices)
        a = math.prod(params.shape[:ax])
        shape = params.shape[:ax] + indices.shape + params.shape[ax + 1:]
        out = np.empty(shape, dt)
        flat = np.ascontiguousarray(indices).reshape(-1)
        bad = fn(params.reshape(a, n, -1), flat, out.reshape(a, flat.size, -1))
        if bad >= 0:
            raise errors.InvalidArgumentError(
                None, op, f"indices = {flat[bad]} is not in [0, {n})")
        return out
    return gather


@register_numba("OneHot", dtypes=("int32", "int64"))
def _one_hot(ctx, ref):
    """Compiled one-hot for float outputs along the last axis."""
    dt = np.dtype(ctx.attr("dtype").as_numpy_dtype)
    depth = ctx.attr("depth")
    if dt.name not in FLOAT_TYPES or ctx.attr("axis") != -1 or depth <= 0:
        return ref
    on, off = dt.type(ctx.attr("on_value")), dt.type(ctx.attr("off_value"))
    fn = lazy("_array_jit", "kernel", "one_hot")

    def one_hot(indices):
        if type(indices) is not _ndarray or indices.size * depth < _dispatch.ARRAY_MIN_SIZE \
                or not (indices.dtype is _I32 or indices.dtype is _I64):
            return ref(indices)
        out = np.empty(indices.shape + (depth,), dt)
        fn(np.ascontiguousarray(indices).reshape(-1), on, off, out.reshape(-1, depth))
        return out
    return one_hot
