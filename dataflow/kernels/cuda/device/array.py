"""Indexing kernels: gather along an axis and one-hot encoding, as grid-stride loops
over the flat output.

>>> gather_kernel[blocks, threads](params, indices, outer, n, inner, out)   # doctest: +SKIP
"""
from __future__ import annotations

from numba import cuda

__all__ = ["gather_kernel", "one_hot_kernel"]


@cuda.jit
def gather_kernel(params, indices, outer, n, inner, out):
    """``out[o, j, i] = params[o, indices[j], i]`` with ``params`` viewed as
    ``(outer, n, inner)`` and ``out`` as ``(outer, len(indices), inner)`` (the grid
    covers ``out``, so ``outer`` only documents the layout)."""
    m = indices.size
    for t in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        i = t % inner
        r = t // inner
        j = r % m
        o = r // m
        out[t] = params[(o * n + indices[j]) * inner + i]


@cuda.jit
def one_hot_kernel(indices, depth, on, off, out):
    """``out[k, c] = on if indices[k] == c else off`` (classes on the last axis)."""
    for t in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[t] = on if indices[t // depth] == t % depth else off
