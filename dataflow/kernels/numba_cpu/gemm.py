"""MatMul (float32) through an own AVX-512 GEMM (tiles in :mod:`._gemm_jit`, entry points in
:mod:`._gemm_par`) for the shapes where it measured faster than NumPy's OpenBLAS with both
its AVX2 (Haswell) and AVX-512 (SkylakeX) kernels; OpenBLAS (the NumPy kernel) otherwise.

Which products take it depends only on the node's shapes and ``transpose_b``
(:func:`own_gemm_applies`), never on the operands' memory layout, and its result is
defined element by element (an FMA chain over ``k`` in order, see :mod:`._gemm_jit`), so
the loop compiler's MatMul (``dataflow.loopc``) calls the same kernel for the same nodes
and compiled loops keep the interpreter's bits.

>>> a = df.constant(np.full((32, 64), 0.5, np.float32))
>>> b = df.constant(np.full((64, 64), 2.0, np.float32))
>>> float(df.Session().run(df.matmul(a, b))[0, 0])
64.0
"""
from __future__ import annotations

import functools

import numpy as np

from . import _dispatch
from ._dispatch import lazy, register_numba

__all__ = ["own_gemm_applies", "own_gemm_enabled"]

_ndarray = np.ndarray
_F32 = np.dtype(np.float32)

# The range measured faster than OpenBLAS (one thread, both kernel sets, 2026-11-24;
# benchmarks/RESULTS.md "An own float32 GEMM"): mostly 0.4-0.9x its time inside these
# bounds. Larger products need the cache blocking this kernel does not do (B's panel of
# k x 64 columns is read from L2 once per 4 rows of m), outputs of fewer than 4 rows are
# bound by one row's four accumulator chains, and with B transposed the kernel runs
# C^T = B^T A^T on m-wide tiles, which wastes vector lanes below m = 16.
MAX_K, MAX_N, MAX_M = 512, 512, 512
MAX_MKN = 1 << 23             # m * k * n
MAX_K_TALL = 64               # k for m > TALL_M
TALL_M = 128
MAX_ROW_KN = 65536            # k * n for outputs of fewer than 4 rows
MIN_M_TRANSPOSED_B, MAX_M_TRANSPOSED_B = 16, 64


def own_gemm_applies(m, n, k, transpose_b):
    """Whether an ``(m, k) @ (k, n)`` float32 product takes the own kernel.

    >>> own_gemm_applies(32, 256, 256, False), own_gemm_applies(1024, 1024, 1024, False)
    (True, False)
    """
    if m < 1 or n < 1 or k > MAX_K or n > MAX_N or m > MAX_M or m * k * n > MAX_MKN:
        return False
    if m > TALL_M and k > MAX_K_TALL:
        return False
    if transpose_b:
        return MIN_M_TRANSPOSED_B <= m <= MAX_M_TRANSPOSED_B
    return m >= 4 or k * n <= MAX_ROW_KN


@functools.lru_cache(maxsize=None)
def own_gemm_enabled() -> bool:
    """True when the Numba kernels are on and the host has AVX-512 (the kernel's bits are
    the same without it, LLVM splitting its vectors, but it is not faster there).

    >>> isinstance(own_gemm_enabled(), bool)
    True
    """
    if not _dispatch.ENABLED:
        return False
    from llvmlite import binding as llvm   # loaded with Numba; only asked once
    return bool(llvm.get_host_cpu_features().get("avx512f", False))


def _is_f32(dtype):
    """Whether ``dtype`` is float32. Identity is the common case, but not the only one:
    arrays that Numba's disk-cached functions return (and unpickled ones) carry an equal
    dtype object of their own, and sending those to OpenBLAS would change the bits."""
    return dtype is _F32 or dtype == _F32


def _product_shape(a, b, ta, tb):
    """``(m, n, k)`` of ``op(a) @ op(b)`` for float32 matrices, or None."""
    if type(a) is not _ndarray or type(b) is not _ndarray or not _is_f32(a.dtype) \
            or not _is_f32(b.dtype) or a.ndim != 2 or b.ndim != 2:
        return None
    m, k = (a.shape[1], a.shape[0]) if ta else a.shape
    k2, n = (b.shape[1], b.shape[0]) if tb else b.shape
    if k != k2 or not own_gemm_applies(m, n, k, tb) or not own_gemm_enabled():
        return None
    return m, n, k


def _matmul_out(ctx, ref_out):
    """The product written into ``out`` (``plan_memory``), the same bits as :func:`_matmul`
    whatever ``out``'s layout (one not C-contiguous receives a copy); the NumPy kernel's
    ``out=`` form for other shapes and an ``out`` of another dtype or shape."""
    ta, tb = bool(ctx.attr("transpose_a")), bool(ctx.attr("transpose_b"))
    fn = lazy("_gemm_par", "kernel", "matmul_into")

    def matmul_out(a, b, out):
        shape = _product_shape(a, b, ta, tb)
        if shape is None or type(out) is not _ndarray or not _is_f32(out.dtype) \
                or out.shape != shape[:2]:
            return ref_out(a, b, out)
        if out.flags.c_contiguous:
            fn(a, b, ta, tb, out)
            return
        product = np.empty(shape[:2], _F32)
        fn(a, b, ta, tb, product)
        out[...] = product
    return matmul_out


def _may_call_blas(op) -> bool:
    """Whether a float32 MatMul node may reach OpenBLAS (and so its worker threads):
    not when both operands' static shapes put it in :func:`own_gemm_applies`'s range on
    a host where the own GEMM runs."""
    shapes = [t.shape.as_list() if t.shape.ndims == 2 else None for t in op.inputs]
    if None in shapes or any(d is None for s in shapes for d in s) or not own_gemm_enabled():
        return True
    (ra, ca), (rb, cb) = shapes
    ta, tb = bool(op.get_attr("transpose_a")), bool(op.get_attr("transpose_b"))
    m, k = (ca, ra) if ta else (ra, ca)
    n = rb if tb else cb
    return not own_gemm_applies(m, n, k, tb)


@register_numba("MatMul", dtypes=("float32",), parallel=_may_call_blas, out=_matmul_out,
                out_alias_safe=False)
def _matmul(ctx, ref):
    """float32 products in :func:`own_gemm_applies`'s range by the own GEMM, the NumPy
    kernel (OpenBLAS, on every core: hence ``parallel`` for the nodes whose static
    shapes do not rule it out) for the rest."""
    ta, tb = bool(ctx.attr("transpose_a")), bool(ctx.attr("transpose_b"))
    fn = lazy("_gemm_par", "kernel", "matmul_into")

    def matmul(a, b):
        shape = _product_shape(a, b, ta, tb)
        if shape is None:
            return ref(a, b)
        out = np.empty(shape[:2], _F32)
        fn(a, b, ta, tb, out)
        return out
    return matmul
