"""Compiled reductions (imports Numba) over a C-contiguous array viewed as
``(A, R, B)``: R is the run of reduced axes, A the axes before it, B those after.

* ``*_last`` (B == 1): each of the A rows reduced over R contiguous elements;
* ``*_middle`` (B > 1): ``out[a, :]`` accumulates R rows of B elements in order, as
  NumPy does for a leading-axis reduction (the bias gradient's ``Sum`` over axis 0).

Sums over contiguous rows add blocks of :data:`BLOCK` elements with the ``reassoc``
fast-math flag (LLVM splits the block over vector accumulators) and add the block
sums in float64. NumPy sums pairwise instead, so float32 results differ from NumPy's
by rounding only (the tests allow 1e-5 relative to the sum of magnitudes); float64
likewise at 1e-12. ``reassoc`` changes no NaN or inf result.

>>> out = np.empty(2, np.float32)
>>> sum_last(np.ones((2, 3), np.float32), out)
>>> out.tolist()
[3.0, 3.0]
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ._scalar import zero

BLOCK = 2048

_JIT = {"nogil": True, "cache": True, "error_model": "numpy"}


@njit(fastmath={"reassoc"}, **_JIT)
def _sum_contiguous(v):
    total = 0.0
    n = v.size
    for start in range(0, n, BLOCK):
        acc = zero(v[0])
        for i in range(start, min(start + BLOCK, n)):
            acc += v[i]
        total += acc
    return total


@njit(**_JIT)
def sum_last(x, out):
    """``out[a] = sum(x[a, :])`` for a 2-D ``x``."""
    for a in range(x.shape[0]):
        out[a] = _sum_contiguous(x[a])


@njit(**_JIT)
def sum_middle(x, out):
    """``out[a, b] = sum(x[a, :, b])`` for a 3-D ``x``, rows added in order."""
    for a in range(x.shape[0]):
        o = out[a]
        o[:] = zero(x[0, 0, 0])
        for r in range(x.shape[1]):
            row = x[a, r]
            for b in range(x.shape[2]):
                o[b] += row[b]


LANES = 32


@njit(inline="always")
def _max_nan(a, x):
    # np.maximum's rule: a NaN on either side wins. Numba's np.maximum vectorizes in
    # the lane loop below (a hand-written ``x > a or x != x`` select did not: 7x slower).
    return np.maximum(a, x)


@njit(**_JIT)
def _max_contiguous(v, acc):
    """The max of a non-empty 1-D array, NaN if it holds one (as np.max); ``acc`` is
    scratch space of LANES elements (allocated once per kernel call, not per row)."""
    n = v.size
    m = v[0]
    start = 0
    if n >= 2 * LANES:
        # LANES independent running maxima: an elementwise loop over the rows of a
        # (rows, LANES) view, which vectorizes, instead of one serial chain of compares.
        rows = n // LANES
        start = rows * LANES
        w = v[:start].reshape(rows, LANES)
        acc[:] = w[0]
        for r in range(1, rows):
            row = w[r]
            for j in range(LANES):
                acc[j] = _max_nan(acc[j], row[j])
        for j in range(LANES):
            m = _max_nan(m, acc[j])
    for i in range(start, n):
        m = _max_nan(m, v[i])
    return m


@njit(**_JIT)
def max_last(x, out):
    """``out[a] = max(x[a, :])`` for a 2-D ``x`` (NaN if the row holds one)."""
    acc = np.empty(LANES, x.dtype)
    for a in range(x.shape[0]):
        out[a] = _max_contiguous(x[a], acc)


@njit(**_JIT)
def max_middle(x, out):
    """``out[a, b] = max(x[a, :, b])`` for a 3-D ``x`` (NaN-propagating)."""
    for a in range(x.shape[0]):
        o = out[a]
        o[:] = x[a, 0]
        for r in range(1, x.shape[1]):
            row = x[a, r]
            for b in range(x.shape[2]):
                o[b] = _max_nan(o[b], row[b])


def kernel(name):
    """The compiled reduction called ``name`` (for :func:`._dispatch.lazy`)."""
    return globals()[name]
