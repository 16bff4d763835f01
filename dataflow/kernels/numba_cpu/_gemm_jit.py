"""The float32 GEMM of :mod:`.gemm` (imports Numba): register-blocked micro-kernels whose
accumulators are SSA vector values.

LLVM keeps the accumulators of a loop written in Numba over a local array in memory (2-25x
slower than OpenBLAS, measured). The micro-kernels here are written as LLVM IR through
``numba.extending.intrinsic`` instead: a loop over k whose ``MR x NV`` accumulators of
``<16 x float>`` are phi nodes, each step one broadcast of ``A[i, k]`` per row, one load of
``B[k, j:j+16]`` per vector and ``MR x NV`` calls of ``llvm.fma.v16f32`` (with AVX-512 one
``vfmadd231ps`` on zmm registers each; without, LLVM splits the vectors and the bits stay
the same). Loads and stores are masked by the columns left, so one kernel serves edge
tiles.

**The result, whatever the layout and transposes:** ``C[i, j]`` is the chain
``c = fma(A[i, k], B[k, j], c)`` over ``k = 0, 1, ..., K-1`` from ``c = 0``, rounded once
per step (an FMA). ``A @ B``, ``A @ (B^T)^T`` and ``(A^T)^T @ B`` therefore give the same
bits: each route only moves operands, never reorders a sum.

The routes from a product's layouts and transposes to these tiles, and the helper thread
that shares a product's tiles on two cores, are in :mod:`._gemm_par`.

>>> a = np.arange(6, dtype=np.float32).reshape(2, 3)
>>> fma_reference(a, np.ones((3, 4), np.float32)).tolist()
[[3.0, 3.0, 3.0, 3.0], [12.0, 12.0, 12.0, 12.0]]
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from .gemm import own_gemm_applies

__all__ = ["applies", "fma_reference"]

_JIT = {"nogil": True, "cache": True, "error_model": "numpy"}

_F32 = ir.FloatType()
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)
_LANES = 16
_V16 = ir.VectorType(_F32, _LANES)
_M16 = ir.VectorType(ir.IntType(1), _LANES)
_VPTR = _V16.as_pointer()
_FPTR = _F32.as_pointer()


def _declare(module, name, ret, args):
    try:
        return module.get_global(name)
    except KeyError:
        return ir.Function(module, ir.FunctionType(ret, args), name=name)


def _splat(builder, value):
    vec = builder.insert_element(ir.Constant(_V16, ir.Undefined), value, ir.Constant(_I32, 0))
    return builder.shuffle_vector(vec, ir.Constant(_V16, ir.Undefined),
                                  ir.Constant(ir.VectorType(_I32, _LANES), [0] * _LANES))


def _tile(mr, nv):
    """An intrinsic ``tile(pa, sai, sak, pb, ldb, pc, ldc, k, cols)``: the ``mr x cols``
    block ``C = A @ B`` (``cols <= 16 * nv``) with ``A[i, kk]`` at float element
    ``pa + i*sai + kk*sak``, ``B[kk, j]`` at ``pb + kk*ldb + j`` and ``C[i, j]`` at
    ``pc + i*ldc + j`` (``pa``, ``pb``, ``pc`` byte addresses)."""
    def codegen(context, builder, signature, args):
        pa, sai, sak, pb, ldb, pc, ldc, kc, cols = args
        module = builder.module
        fma = _declare(module, "llvm.fma.v16f32", _V16, [_V16, _V16, _V16])
        mload = _declare(module, "llvm.masked.load.v16f32.p0", _V16,
                         [_VPTR, _I32, _M16, _V16])
        mstore = _declare(module, "llvm.masked.store.v16f32.p0", ir.VoidType(),
                          [_V16, _VPTR, _I32, _M16])
        a0, b0, c0 = (builder.inttoptr(p, _FPTR) for p in (pa, pb, pc))
        four = ir.Constant(_I32, 4)
        zero = ir.Constant(_V16, [0.0] * _LANES)
        # lane j of vector v is live when 16*v + j < cols (masked-off lanes are never touched)
        cols32 = builder.trunc(cols, _I32)
        lim = builder.insert_element(ir.Constant(ir.VectorType(_I32, _LANES), ir.Undefined),
                                     cols32, ir.Constant(_I32, 0))
        lim = builder.shuffle_vector(lim, ir.Constant(ir.VectorType(_I32, _LANES), ir.Undefined),
                                     ir.Constant(ir.VectorType(_I32, _LANES), [0] * _LANES))
        masks = [builder.icmp_signed("<", ir.Constant(ir.VectorType(_I32, _LANES),
                                                      [16 * v + j for j in range(_LANES)]), lim)
                 for v in range(nv)]

        def at(base, offset, v=0):
            p = builder.gep(base, [builder.add(offset, ir.Constant(_I64, 16 * v))],
                            source_etype=_F32)
            return builder.bitcast(p, _VPTR)

        pre = builder.block
        loop = builder.append_basic_block("k_loop")
        done = builder.append_basic_block("k_done")
        builder.cbranch(builder.icmp_signed(">", kc, ir.Constant(_I64, 0)), loop, done)

        builder.position_at_end(loop)
        k = builder.phi(_I64)
        acc = [[builder.phi(_V16) for _ in range(nv)] for _ in range(mr)]
        brow = builder.mul(k, ldb)
        bvec = [builder.call(mload, [at(b0, brow, v), four, masks[v], zero]) for v in range(nv)]
        arow = builder.mul(k, sak)
        new = []
        for i in range(mr):
            offset = builder.add(arow, builder.mul(ir.Constant(_I64, i), sai))
            a = builder.load(builder.gep(a0, [offset], source_etype=_F32), typ=_F32)
            a = _splat(builder, a)
            new.append([builder.call(fma, [a, bvec[v], acc[i][v]]) for v in range(nv)])
        k1 = builder.add(k, ir.Constant(_I64, 1))
        k.add_incoming(ir.Constant(_I64, 0), pre)
        k.add_incoming(k1, loop)
        for i in range(mr):
            for v in range(nv):
                acc[i][v].add_incoming(zero, pre)
                acc[i][v].add_incoming(new[i][v], loop)
        builder.cbranch(builder.icmp_signed("<", k1, kc), loop, done)

        builder.position_at_end(done)
        outs = [[builder.phi(_V16) for _ in range(nv)] for _ in range(mr)]
        for i in range(mr):
            crow = builder.mul(ir.Constant(_I64, i), ldc)
            for v in range(nv):
                outs[i][v].add_incoming(zero, pre)
                outs[i][v].add_incoming(new[i][v], loop)
                builder.call(mstore, [outs[i][v], at(c0, crow, v), four, masks[v]])
        return context.get_dummy_value()

    @intrinsic
    def tile(typingctx, pa, sai, sak, pb, ldb, pc, ldc, k, cols):
        return types.void(*([types.int64] * 9)), codegen
    return tile


# Wide tiles (4 rows x 64 columns: 16 accumulators, 8 loads for 16 FMAs a step) for
# outputs wider than 32 columns; narrow ones (8 x 32, the same 16 accumulators) for the
# transposed route's C^T, whose width is the batch. One-row tiles finish the rows left.
_wide, _wide_row = _tile(4, 4), _tile(1, 4)
_narrow, _narrow_row = _tile(8, 2), _tile(1, 2)


@njit(**_JIT)
def _tiles(pa, sai, sak, pb, ldb, pc, ldc, m, n, k):
    """``C = A @ B`` by tiles: ``A[i, kk]`` at float ``pa + i*sai + kk*sak``, ``B[kk, j]``
    at ``pb + kk*ldb + j``, ``C[i, j]`` at ``pc + i*ldc + j`` (byte addresses)."""
    wide = n > 32
    width = 64 if wide else 32
    rows = 4 if wide else 8
    for j0 in range(0, n, width):
        cols = min(width, n - j0)
        b = pb + 4 * j0
        i0 = 0
        while i0 + rows <= m:
            a, c = pa + 4 * i0 * sai, pc + 4 * (i0 * ldc + j0)
            if wide:
                _wide(a, sai, sak, b, ldb, c, ldc, k, cols)
            else:
                _narrow(a, sai, sak, b, ldb, c, ldc, k, cols)
            i0 += rows
        while i0 < m:
            a, c = pa + 4 * i0 * sai, pc + 4 * (i0 * ldc + j0)
            if wide:
                _wide_row(a, sai, sak, b, ldb, c, ldc, k, cols)
            else:
                _narrow_row(a, sai, sak, b, ldb, c, ldc, k, cols)
            i0 += 1


@njit(**_JIT)
def _keep_alive(*arrays):
    """A use of arrays whose addresses a tile call read: Numba frees an array after its
    last use as a variable, and an address is none."""
    return len(arrays)


@njit(**_JIT)
def _element_strides(x):
    """A 2-D float32 array's strides in elements (0 along a dimension of size 1, whose
    stride is never used), or ``(-1, -1)`` when one is not a whole number of elements."""
    s0 = x.strides[0] if x.shape[0] > 1 else 0
    s1 = x.strides[1] if x.shape[1] > 1 else 0
    if s0 % 4 or s1 % 4:
        return -1, -1
    return s0 // 4, s1 // 4


#: :func:`.gemm.own_gemm_applies` for compiled callers (the loop compiler's MatMul).
applies = njit(**_JIT)(own_gemm_applies)


def _fma_f32(context, builder, signature, args):
    fn = _declare(builder.module, "llvm.fma.f32", _F32, [_F32, _F32, _F32])
    return builder.call(fn, list(args))


@intrinsic
def _fma(typingctx, x, y, z):
    return types.float32(types.float32, types.float32, types.float32), _fma_f32


@njit(**_JIT)
def fma_reference(a, b):
    """The defined result by scalar FMAs, element by element: ``c = fma(a[i, kk],
    b[kk, j], c)`` for ``kk`` in order from ``c = 0`` (for tests)."""
    m, k = a.shape
    n = b.shape[1]
    out = np.zeros((m, n), np.float32)
    for i in range(m):
        for j in range(n):
            c = np.float32(0)
            for kk in range(k):
                c = _fma(a[i, kk], b[kk, j], c)
            out[i, j] = c
    return out
