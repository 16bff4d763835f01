"""Numba kernels of Sum, Mean and Max over float32/float64, and of SumToShape (the
gradient of a broadcast, e.g. a bias gradient summing ``(N, C)`` to ``(C,)``).

The reduced axes must form one run of adjacent axes (any ``axis`` of a 2-D array,
``axis=None``, trailing or leading runs); the array is then viewed as ``(A, R, B)``
and reduced by :mod:`dataflow.kernels.numba_cpu._reduction_jit`. Other axis sets,
non-contiguous arrays and small arrays use the NumPy kernel, and so does Max over
rows of 64 or more contiguous elements (NumPy is faster there). Sums differ from
NumPy's pairwise sums by rounding only (see ``_reduction_jit``); Max is exact.

>>> x = df.constant(np.ones((3, 4), np.float32))
>>> df.Session().run(df.reduce_sum(x, axis=0))   # (A, R, B) = (1, 3, 4)
array([3., 3., 3., 3.], dtype=float32)
"""
from __future__ import annotations

import math

import numpy as np

from . import _dispatch
from ._dispatch import lazy, reference_kernel, register_numba

_ndarray = np.ndarray


def split_axes(shape, axis, keep_dims):
    """``((A, R, B), out_shape)`` when the reduced axes are adjacent, else None.

    >>> split_axes((2, 3, 4), 1, False)
    ((2, 3, 4), (2, 4))
    """
    ndim = len(shape)
    axes = range(ndim) if axis is None else [axis] if isinstance(axis, int) else list(axis)
    if ndim == 0 or not axes or any(not -ndim <= a < ndim for a in axes):
        return None
    axes = sorted(a % ndim for a in axes)
    if len(set(axes)) != len(axes) or axes[-1] - axes[0] != len(axes) - 1:
        return None
    lo, hi = axes[0], axes[-1] + 1
    a, r, b = math.prod(shape[:lo]), math.prod(shape[lo:hi]), math.prod(shape[hi:])
    if keep_dims:
        out = shape[:lo] + (1,) * (hi - lo) + shape[hi:]
    else:
        out = shape[:lo] + shape[hi:]
    return (a, r, b), out


def _reduce_split(x, split, dt, last_fn, middle_fn):
    """``x`` seen as ``(A, R, B)`` reduced over R into a fresh ``(A,)`` or ``(A, B)``."""
    a, r, b = split
    if b == 1:
        out = np.empty(a, dt)
        last_fn(x.reshape(a, r), out)
    else:
        out = np.empty((a, b), dt)
        middle_fn(x.reshape(a, r, b), out)
    return out


def _reduction(last, middle, mean=False, last_max_run=None):
    """A factory for ``last``/``middle`` kernels; rows of ``last_max_run`` elements or
    more are left to NumPy (where its reduction is faster than ours)."""
    def factory(ctx, ref):
        axis, keep = ctx.attr("axis"), ctx.attr("keep_dims")
        dt = np.dtype(ctx.output_dtypes[0].as_numpy_dtype)
        if ctx.input_dtypes[0] != ctx.output_dtypes[0]:
            return ref
        last_fn = lazy("_reduction_jit", "kernel", last)
        middle_fn = lazy("_reduction_jit", "kernel", middle)
        plans = {}  # input shape -> split_axes(...): shapes repeat across runs

        def reduce(x):
            if type(x) is not _ndarray or x.size < _dispatch.REDUCTION_MIN_SIZE \
                    or x.dtype is not dt or not x.flags.c_contiguous:
                return ref(x)
            plan = plans.get(x.shape, False)
            if plan is False:
                plan = plans[x.shape] = split_axes(x.shape, axis, keep)
            if plan is None:
                return ref(x)
            (a, r, b), out_shape = plan
            if b == 1 and last_max_run is not None and r >= last_max_run:
                return ref(x)
            out = _reduce_split(x, (a, r, b), dt, last_fn, middle_fn)
            if mean:
                out /= dt.type(r)
            return out.reshape(out_shape) if out_shape else out[0]
        return reduce
    return factory


register_numba("Sum")(_reduction("sum_last", "sum_middle"))
register_numba("Mean")(_reduction("sum_last", "sum_middle", mean=True))
# np.max over long contiguous rows is SIMD with a tree at the end: 1.5x faster than our
# 32-lane loop at 1e6 elements, 1.9x on rows of 100. Ours wins on short rows (1.5x on
# rows of 10, as in softmax over classes) and across rows (``max_middle``).
register_numba("Max")(_reduction("max_last", "max_middle", last_max_run=64))


def _sum_to_shape_out(ctx, ref_out):
    """SumToShape into ``out`` (``plan_memory``): the compiled reduction writes there;
    the other cases compute with the kernel and copy."""
    dt = np.dtype(ctx.input_dtypes[0].as_numpy_dtype)
    middle_fn = lazy("_reduction_jit", "kernel", "sum_middle")
    last_fn = lazy("_reduction_jit", "kernel", "sum_last")
    kernel = _sum_to_shape(ctx, reference_kernel(ctx))
    plans = {}

    def sum_to_shape_out(grad, shape, out):
        plan = _compiled_split(plans, grad, shape, dt)[0]
        if plan is None:
            np.copyto(out, kernel(grad, shape))
            return
        a, r, b = plan
        if b == 1:
            last_fn(grad.reshape(a, r), out.reshape(a))
        else:
            middle_fn(grad.reshape(a, r, b), out.reshape(a, b))
    return sum_to_shape_out


@register_numba("SumToShape", out=_sum_to_shape_out, out_alias_safe=False)
def _sum_to_shape(ctx, ref):
    """Sums a broadcast gradient back to ``shape`` when the summed axes are adjacent
    (leading axes for a bias); other cases use the NumPy kernel."""
    dt = np.dtype(ctx.input_dtypes[0].as_numpy_dtype)
    middle_fn = lazy("_reduction_jit", "kernel", "sum_middle")
    last_fn = lazy("_reduction_jit", "kernel", "sum_last")
    plans = {}  # (grad shape, target shape) -> split, or None for the NumPy kernel

    def sum_to_shape(grad, shape):
        plan, target = _compiled_split(plans, grad, shape, dt)
        if plan is None:
            return ref(grad, shape)
        out = _reduce_split(grad, plan, dt, last_fn, middle_fn)
        return out.reshape(target) if target else out[0]
    return sum_to_shape


def _compiled_split(plans, grad, shape, dt):
    """``(plan, target shape)`` for the compiled SumToShape of ``grad`` (plan None: use
    the NumPy kernel — not a C-contiguous array of ``dt``, too small, or axes not
    adjacent). ``plans`` memoises the split per (grad shape, target)."""
    if type(grad) is not _ndarray or grad.size < _dispatch.REDUCTION_MIN_SIZE \
            or grad.dtype is not dt or not grad.flags.c_contiguous:
        return None, None
    target = tuple(shape.tolist()) if type(shape) is _ndarray else tuple(shape)
    key = (grad.shape, target)
    plan = plans.get(key, False)
    if plan is False:
        plan = plans[key] = _sum_to_shape_plan(grad.shape, target)
    return plan, target


def _sum_to_shape_plan(grad_shape, target):
    """``(A, R, B)`` of SumToShape's reduction when its axes are adjacent and it sums
    something, else None.

    >>> _sum_to_shape_plan((32, 64), (64,))
    (1, 32, 64)
    """
    lead = len(grad_shape) - len(target)
    if lead < 0 or any(d not in (1, g) for d, g in zip(target, grad_shape[lead:])):
        return None
    axes = list(range(lead)) + [lead + i for i, d in enumerate(target)
                                if d == 1 and grad_shape[lead + i] != 1]
    if not axes:
        return None
    split = split_axes(grad_shape, tuple(axes), False)
    return None if split is None else split[0]
