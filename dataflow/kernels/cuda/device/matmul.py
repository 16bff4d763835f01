"""Tiled shared-memory matrix multiply: ``out = op(a) @ op(b)``, ``op`` a transpose or not.

Each block computes one ``tile x tile`` tile of ``out`` at a time (blocks stride over
the tiles): per step along ``k`` the block stages a tile of ``op(a)`` and one of
``op(b)`` in shared memory, so each global element is read ``k / tile`` times
instead of ``k`` times. Transposes are index swaps when staging, never copies.

>>> from numba import cuda
>>> a = cuda.to_device(np.ones((2, 3), np.float32))
>>> b = cuda.to_device(np.ones((4, 3), np.float32))     # used transposed
>>> out = cuda.device_array((2, 4), np.float32)
>>> k = matmul_kernel(np.dtype(np.float32), 4, False, True)
>>> k[(1, 1), (4, 4)](a, b, out)                         # (bx, by) blocks of 4x4 threads
>>> out.copy_to_host().tolist()
[[3.0, 3.0, 3.0, 3.0], [3.0, 3.0, 3.0, 3.0]]
"""
from __future__ import annotations

import functools

import numba
import numpy as np
from numba import cuda

__all__ = ["matmul_kernel"]


@functools.lru_cache(maxsize=None)
def matmul_kernel(dtype: np.dtype, tile: int, transpose_a: bool, transpose_b: bool):
    """The kernel for 2-D ``a``, ``b`` and ``out`` of ``dtype``; launch with
    ``(tile, tile)`` threads per block."""
    nb_type = numba.from_dtype(dtype)
    zero = dtype.type(0)

    @cuda.jit
    def matmul(a, b, out):
        sa = cuda.shared.array((tile, tile), nb_type)
        sb = cuda.shared.array((tile, tile), nb_type)
        tx = cuda.threadIdx.x
        ty = cuda.threadIdx.y
        m, n = out.shape
        kdim = a.shape[0] if transpose_a else a.shape[1]
        steps = (kdim + tile - 1) // tile
        for ti in range(cuda.blockIdx.y, (m + tile - 1) // tile, cuda.gridDim.y):
            for tj in range(cuda.blockIdx.x, (n + tile - 1) // tile, cuda.gridDim.x):
                row = ti * tile + ty
                col = tj * tile + tx
                acc = zero
                for t in range(steps):
                    ka = t * tile + tx
                    if row < m and ka < kdim:
                        sa[ty, tx] = a[ka, row] if transpose_a else a[row, ka]
                    else:
                        sa[ty, tx] = zero
                    kb = t * tile + ty
                    if col < n and kb < kdim:
                        sb[ty, tx] = b[col, kb] if transpose_b else b[kb, col]
                    else:
                        sb[ty, tx] = zero
                    cuda.syncthreads()
                    for q in range(tile):
                        acc += sa[ty, q] * sb[q, tx]
                    cuda.syncthreads()
                if row < m and col < n:
                    out[row, col] = acc
    return matmul
