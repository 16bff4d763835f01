"""Elementwise CUDA kernels: unary, binary with NumPy broadcasting, strided copies, fill.

All kernels are grid-stride loops over flat (1-D, C-contiguous) views, so one launch
shape serves any size. Broadcasting passes each input's element strides per output
dimension (0 along broadcast dimensions) as tuples; kernels are specialised per
(op, dtype) and Numba specialises them again per argument types (ndim).

>>> from numba import cuda
>>> x_flat = cuda.to_device(np.zeros(5, np.float32))
>>> out_flat = cuda.device_array(5, np.float32)
>>> k = unary_kernel("Tanh", np.dtype(np.float32))
>>> k[1, 32](x_flat, out_flat)                 # blocks, threads per block
>>> out_flat.copy_to_host()
array([0., 0., 0., 0., 0.], dtype=float32)
"""
from __future__ import annotations

import functools

import numpy as np
from numba import cuda

from .scalar import scalar_fn

__all__ = ["unary_kernel", "binary_same_kernel", "binary_scalar_kernel",
           "binary_broadcast_kernel", "strided_copy_kernel", "fill_kernel", "select_kernel"]


@functools.lru_cache(maxsize=None)
def unary_kernel(op_type: str, dtype: np.dtype):
    """``out[i] = f(x[i])``."""
    f = scalar_fn(op_type, dtype)

    @cuda.jit
    def unary(x, out):
        for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
            out[i] = f(x[i])
    return unary


@functools.lru_cache(maxsize=None)
def binary_same_kernel(op_type: str, dtype: np.dtype):
    """``out[i] = f(a[i], b[i])`` for inputs of the output's shape."""
    f = scalar_fn(op_type, dtype)

    @cuda.jit
    def binary_same(a, b, out):
        for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
            out[i] = f(a[i], b[i])
    return binary_same


@functools.lru_cache(maxsize=None)
def binary_scalar_kernel(op_type: str, dtype: np.dtype, scalar_first: bool):
    """``out[i] = f(s, b[i])`` (or ``f(b[i], s)``) with a host scalar ``s`` passed by
    value: a constant operand costs no host-to-device copy."""
    f = scalar_fn(op_type, dtype)
    if scalar_first:
        @cuda.jit
        def binary_scalar(s, b, out):
            for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
                out[i] = f(s, b[i])
    else:
        @cuda.jit
        def binary_scalar(s, b, out):
            for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
                out[i] = f(b[i], s)
    return binary_scalar


@cuda.jit(device=True)
def _offsets(i, shape, sa, sb):
    """Element offsets into two broadcast inputs of flat output index ``i``."""
    ia = 0
    ib = 0
    for d in range(len(shape) - 1, -1, -1):
        c = i % shape[d]
        i //= shape[d]
        ia += c * sa[d]
        ib += c * sb[d]
    return ia, ib


@functools.lru_cache(maxsize=None)
def binary_broadcast_kernel(op_type: str, dtype: np.dtype):
    """``out[i] = f(a[ia], b[ib])`` with NumPy broadcasting: ``shape`` is the output
    shape, ``sa``/``sb`` the inputs' element strides per output dimension."""
    f = scalar_fn(op_type, dtype)

    @cuda.jit
    def binary_broadcast(a, sa, b, sb, shape, out):
        for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
            ia, ib = _offsets(i, shape, sa, sb)
            out[i] = f(a[ia], b[ib])
    return binary_broadcast


@cuda.jit
def strided_copy_kernel(x, sx, shape, out):
    """``out[i] = x[offset(i)]``: transposes (permuted strides) and broadcasts (zero
    strides) of a flat input into a flat C-ordered output of ``shape``."""
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        ix, _ = _offsets(i, shape, sx, sx)
        out[i] = x[ix]


@cuda.jit
def fill_kernel(value, out):
    """``out[:] = value``."""
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        out[i] = value


@cuda.jit
def select_kernel(c, sc, x, sx, y, sy, shape, out):
    """``out[i] = x[..] if c[..] else y[..]`` with all three inputs broadcast."""
    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):
        ic, ix = _offsets(i, shape, sc, sx)
        iy, _ = _offsets(i, shape, sy, sy)
        out[i] = x[ix] if c[ic] else y[iy]
