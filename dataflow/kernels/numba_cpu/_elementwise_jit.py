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


# In-place loops: the result overwrites the operand of the result's shape, passed once.
# A loop above called with ``out`` over an operand takes LLVM's path for overlapping
# arrays, which does not vectorize (AddV2 over 115 008 float32: 10.8 us apart, 28.8 us
# in place); the planner's in-place reuse calls these instead.
def _vv_x(name):
    @njit(**JIT)
    def binary_vv_x(x, y):
        for i in range(x.size):
            x[i] = binary(name, x[i], y[i])
    return binary_vv_x


def _vv_y(name):
    @njit(**JIT)
    def binary_vv_y(x, y):
        for i in range(y.size):
            y[i] = binary(name, x[i], y[i])
    return binary_vv_y


def _vs_x(name):
    @njit(**JIT)
    def binary_vs_x(x, s):
        for i in range(x.size):
            x[i] = binary(name, x[i], s)
    return binary_vs_x


def _sv_y(name):
    @njit(**JIT)
    def binary_sv_y(s, y):
        for i in range(y.size):
            y[i] = binary(name, s, y[i])
    return binary_sv_y


def _rows_x(name):
    @njit(**JIT)
    def binary_rows_x(x, row):
        for i in range(x.shape[0]):
            for j in range(x.shape[1]):
                x[i, j] = binary(name, x[i, j], row[j])
    return binary_rows_x


def _rows_rev_y(name):
    @njit(**JIT)
    def binary_rows_rev_y(row, y):
        for i in range(y.shape[0]):
            for j in range(y.shape[1]):
                y[i, j] = binary(name, row[j], y[i, j])
    return binary_rows_rev_y


def _cols_x(name):
    @njit(**JIT)
    def binary_cols_x(x, col):
        for i in range(x.shape[0]):
            c = col[i]
            for j in range(x.shape[1]):
                x[i, j] = binary(name, x[i, j], c)
    return binary_cols_x


def _cols_rev_y(name):
    @njit(**JIT)
    def binary_cols_rev_y(col, y):
        for i in range(y.shape[0]):
            c = col[i]
            for j in range(y.shape[1]):
                y[i, j] = binary(name, c, y[i, j])
    return binary_cols_rev_y


# pattern -> the in-place loop writing the first (x) or the second (y) operand
_INPLACE = {"x": {"vv": _vv_x, "vs": _vs_x, "rows": _rows_x, "cols": _cols_x},
            "y": {"vv": _vv_y, "sv": _sv_y, "rows_rev": _rows_rev_y, "cols_rev": _cols_rev_y}}


@functools.cache
def binary_inplace_loop(name, operand, pattern):
    """The in-place loop of binary op ``name`` for ``pattern`` writing ``operand``
    ("x" or "y"): ``loop(x, y)``, or None when that operand cannot be the result."""
    make = _INPLACE[operand].get(pattern)
    return make(name) if make is not None else None


@njit(**JIT)
def select_vv(c, x, y, out):
    """``out[i] = x[i] if c[i] else y[i]`` over 1-D arrays of one shape."""
    for i in range(x.size):
        out[i] = x[i] if c[i] else y[i]


def select_loop():
    """The compiled select loop (for :func:`dataflow.kernels.numba_cpu._dispatch.lazy`)."""
    return select_vv
