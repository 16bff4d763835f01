"""Compiled softmax, log-softmax and fused softmax cross-entropy (imports Numba), row
by row over a C-contiguous ``(rows, n)`` array.

Each row takes its max, writes ``e = exp(x - max)`` with :func:`dataflow.kernels.approx.exp`,
sums ``e`` as the reductions do, then finishes in one more pass. The cross-entropy
computes the loss and its gradient ``softmax - labels`` in that last pass, with no
temporaries. NaN and inf propagate as in the NumPy kernels (a row's max is NaN if
the row holds a NaN; an inf max makes the row NaN).

>>> x2d = np.zeros((2, 4), np.float32)
>>> out2d = np.empty_like(x2d)
>>> softmax_rows(x2d, out2d)
>>> out2d.tolist()
[[0.25, 0.25, 0.25, 0.25], [0.25, 0.25, 0.25, 0.25]]
"""
from __future__ import annotations

import math

import numpy as np
from numba import njit

from .. import approx
from ._reduction_jit import LANES, _max_contiguous, _sum_contiguous
from ._scalar import cast_like, zero

_JIT = {"nogil": True, "cache": True, "error_model": "numpy"}


@njit(**_JIT)
def _exp_shifted(v, m, out):
    """``out = exp(v - m)``; returns the sum of ``out`` in v's dtype."""
    for j in range(v.size):
        out[j] = approx.exp(v[j] - m)
    return cast_like(m, _sum_contiguous(out))


@njit(**_JIT)
def softmax_rows(x, out):
    """``out[a] = softmax(x[a])`` for 2-D ``x``."""
    acc = np.empty(LANES, x.dtype)
    for a in range(x.shape[0]):
        o = out[a]
        s = _exp_shifted(x[a], _max_contiguous(x[a], acc), o)
        for j in range(o.size):
            o[j] = o[j] / s


@njit(**_JIT)
def log_softmax_rows(x, out):
    """``out[a] = x[a] - max - log(sum(exp(x[a] - max)))`` for 2-D ``x``."""
    acc = np.empty(LANES, x.dtype)
    for a in range(x.shape[0]):
        row, o = x[a], out[a]
        m = _max_contiguous(row, acc)
        lse = cast_like(m, math.log(_exp_shifted(row, m, o)))
        for j in range(o.size):
            o[j] = (row[j] - m) - lse


@njit(fastmath={"reassoc"}, **_JIT)
def _xent_tail(row, labels, bp, m, lse, s):
    # bp holds exp(row - m); it becomes softmax - labels, and the loss is returned.
    acc = zero(m)
    for j in range(row.size):
        acc += labels[j] * ((row[j] - m) - lse)
        bp[j] = bp[j] / s - labels[j]
    return -acc


@njit(**_JIT)
def xent_rows(x, labels, loss, backprop):
    """Per row: ``loss[a] = -sum(labels * log_softmax(x[a]))`` and
    ``backprop[a] = softmax(x[a]) - labels[a]``."""
    acc = np.empty(LANES, x.dtype)
    for a in range(x.shape[0]):
        row, bp = x[a], backprop[a]
        m = _max_contiguous(row, acc)
        s = _exp_shifted(row, m, bp)
        lse = cast_like(m, math.log(s))
        loss[a] = _xent_tail(row, labels[a], bp, m, lse, s)


@njit(**_JIT)
def xent_short_rows(x, labels, loss, backprop):
    """:func:`xent_rows` for rows shorter than a vector loop pays (class counts such as
    10). Each pass runs over the whole block with 2-D indexing: ``exp`` over the flat
    ``(rows * n)`` block and ``log`` over the vector of row sums vectorize across
    rows, and no per-row slice is made (a slice costs reference counting). On
    1797 x 10 float32: 52 µs, against 112 µs slicing row by row."""
    rows, n = x.shape
    m = np.empty(rows, x.dtype)
    for a in range(rows):
        mx = x[a, 0]
        for j in range(1, n):
            v = x[a, j]
            mx = v if (v > mx or v != v) else mx   # a NaN sticks, as in np.max
        m[a] = mx
    for a in range(rows):
        for j in range(n):
            backprop[a, j] = x[a, j] - m[a]
    # In place and written out here: a helper taking source and destination as two
    # (aliasing) arrays fails LLVM's overlap check and runs scalar, 6x slower.
    flat = backprop.reshape(-1)
    for i in range(flat.size):
        flat[i] = approx.exp(flat[i])
    s = np.empty(rows, x.dtype)
    for a in range(rows):
        acc = zero(m[0])
        for j in range(n):
            acc += backprop[a, j]
        s[a] = acc
    lse = np.empty(rows, x.dtype)
    for a in range(rows):
        lse[a] = approx.log(s[a])
    for a in range(rows):
        total = zero(m[0])
        for j in range(n):
            total += labels[a, j] * ((x[a, j] - m[a]) - lse[a])
        loss[a] = -total
    for a in range(rows):
        for j in range(n):
            backprop[a, j] = backprop[a, j] / s[a] - labels[a, j]


@njit(**_JIT)
def sparse_xent_rows(x, labels, loss, backprop):
    """:func:`xent_short_rows` with integer class labels: ``loss[a] = lse - (x[a, y] - m)``
    and ``backprop[a] = softmax(x[a]) - onehot(y)``. Returns the first row whose label is
    outside ``[0, n)`` (nothing is written then), or -1."""
    rows, n = x.shape
    for a in range(rows):
        if labels[a] < 0 or labels[a] >= n:
            return a
    m = np.empty(rows, x.dtype)
    for a in range(rows):
        mx = x[a, 0]
        for j in range(1, n):
            v = x[a, j]
            mx = v if (v > mx or v != v) else mx   # a NaN sticks, as in np.max
        m[a] = mx
    for a in range(rows):
        for j in range(n):
            backprop[a, j] = x[a, j] - m[a]
    flat = backprop.reshape(-1)   # in place, written out: see xent_short_rows
    for i in range(flat.size):
        flat[i] = approx.exp(flat[i])
    s = np.empty(rows, x.dtype)
    for a in range(rows):
        acc = zero(m[0])
        for j in range(n):
            acc += backprop[a, j]
        s[a] = acc
    for a in range(rows):
        loss[a] = approx.log(s[a]) - (x[a, labels[a]] - m[a])
    for a in range(rows):
        for j in range(n):
            backprop[a, j] = backprop[a, j] / s[a]
        backprop[a, labels[a]] -= 1
    return -1


def kernel(name):
    """The compiled kernel called ``name`` (for :func:`._dispatch.lazy`)."""
    return globals()[name]
