"""Indexing kernels: gather along an axis and one-hot encoding, as grid-stride loops
over the flat output.

>>> from numba import cuda
>>> params = cuda.to_device(np.array([10.0, 20.0, 30.0], np.float32))  # outer 1, n 3, inner 1
>>> indices = cuda.to_device(np.array([2, 0], np.int32))
>>> out = cuda.device_array(2, np.float32)
>>> gather_kernel[1, 32](params, indices, 1, 3, 1, out)
>>> out.copy_to_host()
array([30., 10.], dtype=float32)
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
