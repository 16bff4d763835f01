"""Compiled gather and one-hot (imports Numba).

>>> params3 = np.arange(6.0).reshape(1, 3, 2)    # (outer, n, inner)
>>> out3 = np.empty((1, 2, 2))
>>> gather(params3, np.array([2, 0]), out3), out3[0].tolist()   # -1: every index valid
(-1, [[4.0, 5.0], [0.0, 1.0]])
"""
from __future__ import annotations

from numba import njit

_JIT = {"nogil": True, "cache": True, "error_model": "numpy"}


@njit(**_JIT)
def gather(params, indices, out):
    """``out[a, k, :] = params[a, indices[k], :]`` for 3-D ``params``/``out`` and 1-D
    ``indices``; returns the position of the first out-of-range index, or -1."""
    n = params.shape[1]
    for k in range(indices.size):
        if indices[k] < 0 or indices[k] >= n:
            return k
    for a in range(params.shape[0]):
        for k in range(indices.size):
            src, dst = params[a, indices[k]], out[a, k]
            for b in range(src.size):
                dst[b] = src[b]
    return -1


@njit(**_JIT)
def one_hot(indices, on, off, out):
    """``out[k, d] = on if indices[k] == d else off`` for 2-D ``out``."""
    for k in range(indices.size):
        i = indices[k]
        row = out[k]
        for d in range(row.size):
            row[d] = on if d == i else off


def kernel(name):
    """The compiled kernel called ``name`` (for :func:`._dispatch.lazy`)."""
    return globals()[name]
