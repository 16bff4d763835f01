"""Compiled elementwise loops (imports Numba): one loop per (op, broadcast pattern).

Each builder returns a dispatcher that closes over the op name only, so Numba's
disk cache (``cache=True``) stores one entry per (op, pattern, dtypes) and a new
process loads it instead of compiling. Builders are memoized: every node of one op
type shares one dispatcher. Patterns (all arrays C-contiguous):

* ``vv``: same shape, flattened: ``out[i] = f(x[i], y[i])``;
* ``vs`` / ``sv``: an array with a scalar on the right / left;
* ``rows`` / ``rows_rev``: ``(m, n)`` with a length-``n`` row (a bias add), the row on
  the right / left;
* ``cols`` / ``cols_rev``: ``(m, n)`` with an ``(m, 1)`` column, right / left.

>>> x, y, out = np.ones(4), np.arange(4.0), np.empty(4)
>>> binary_loop("AddV2", "vv")(x, y, out)
>>> out.tolist()
[1.0, 2.0, 3.0, 4.0]
"""
from __future__ import annotations

import functools

from numba import njit

from ._scalar import binary, unary

# No fast-math: arithmetic must match NumPy bit for bit, and kernels.approx needs IEEE
# semantics. error_model="numpy": no zero-division branch, so the loops vectorize.
JIT = {"nogil": True, "cache": True, "error_model": "numpy"}


@functools.cache
def unary_loop(name):
    """``loop(x, out)`` over 1-D arrays: ``out[i] = op(x[i])``."""
    @njit(**JIT)
    def unary_vv(x, out):
        for i in range(x.size):
            out[i] = unary(name, x[i])
    return unary_vv


@functools.cache
def unary_inplace_loop(name):
    """``loop(x)`` over a 1-D array: ``x[i] = op(x[i])``. ``unary_loop`` with ``out`` over
    ``x`` takes LLVM's path for overlapping arrays, which does not vectorize (measured
    40x slower on the approximate exp); one array does."""
    @njit(**JIT)
    def unary_inplace(x):
        for i in range(x.size):
            x[i] = unary(name, x[i])
    return unary_inplace


def _vv(name):
    @njit(**JIT)
    def binary_vv(x, y, out):
        for i in range(x.size):
            out[i] = binary(name, x[i], y[i])
    return binary_vv


def _vs(name):
    @njit(**JIT)
    def binary_vs(x, s, out):
        for i in range(x.size):
            out[i] = binary(name, x[i], s)
    return binary_vs


def _sv(name):
    @njit(**JIT)
    def binary_sv(s, y, out):
        for i in range(y.size):
            out[i] = binary(name, s, y[i])
    return binary_sv


def _rows(name):
    @njit(**JIT)
    def binary_rows(x, row, out):
        for i in range(x.shape[0]):
            for j in range(x.shape[1]):
                out[i, j] = binary(name, x[i, j], row[j])
    return binary_rows


def _rows_rev(name):
    @njit(**JIT)
    def binary_rows_rev(row, y, out):
        for i in range(y.shape[0]):
            for j in range(y.shape[1]):
                out[i, j] = binary(name, row[j], y[i, j])
    return binary_rows_rev


def _cols(name):
    @njit(**JIT)
    def binary_cols(x, col, out):
        for i in range(x.shape[0]):
            c = col[i]
            for j in range(x.shape[1]):
                out[i, j] = binary(name, x[i, j], c)
    return binary_cols


def _cols_rev(name):
    @njit(**JIT)
    def binary_cols_rev(col, y, out):
        for i in range(y.shape[0]):
            c = col[i]
            for j in range(y.shape[1]):
                out[i, j] = binary(name, c, y[i, j])
    return binary_cols_rev


_PATTERNS = {"vv": _vv, "vs": _vs, "sv": _sv, "rows": _rows, "rows_rev": _rows_rev,
             "cols": _cols, "cols_rev": _cols_rev}


@functools.cache
def binary_loop(name, pattern):
    """The compiled loop of binary op ``name`` for broadcast ``pattern`` (see above)."""
    return _PATTERNS[pattern](name)


@njit(**JIT)
def select_vv(c, x, y, out):
    """``out[i] = x[i] if c[i] else y[i]`` over 1-D arrays of one shape."""
    for i in range(x.size):
        out[i] = x[i] if c[i] else y[i]


def select_loop():
    """The compiled select loop (for :func:`dataflow.kernels.numba_cpu._dispatch.lazy`)."""
    return select_vv
