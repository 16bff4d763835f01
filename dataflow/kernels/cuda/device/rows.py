"""Row kernels with shared-memory tree reductions: Sum/Mean/Max/Min/Prod over the last
axis of an ``(m, k)`` view, softmax, log-softmax and softmax cross-entropy.

One block handles one row at a time (blocks stride over rows): each thread folds a
strided part of the row into a register, then the block combines the ``tpb`` partial
results in shared memory in ``log2(tpb)`` steps. ``tpb`` (threads per block, a power
of two) is a compile-time constant, as shared-array sizes must be.

>>> from numba import cuda
>>> x_flat = cuda.to_device(np.arange(6, dtype=np.float32))   # 2 rows of 3
>>> out = cuda.device_array(2, np.float32)
>>> k = reduce_kernel("Sum", np.dtype(np.float32), np.dtype(np.float32), 32)
>>> k[2, 32](x_flat, 2, 3, out)                                # a block per row
>>> out.copy_to_host()
array([ 3., 12.], dtype=float32)
"""
from __future__ import annotations

import functools
import math

import numba
import numpy as np
from numba import cuda

__all__ = ["reduce_kernel", "softmax_kernel", "xent_kernel", "REDUCTIONS"]


def _combiners(dt):
    def add(a, b):
        return a + b

    def mul(a, b):
        return a * b

    def maximum(a, b):
        return a if a >= b or a != a else b  # NaN propagates, as np.max

    def minimum(a, b):
        return a if a <= b or a != a else b

    if dt.kind == "f":
        lowest, highest = dt.type(-np.inf), dt.type(np.inf)
    elif dt.kind == "b":
        lowest, highest = dt.type(False), dt.type(True)
    else:
        lowest, highest = np.iinfo(dt).min, np.iinfo(dt).max
        lowest, highest = dt.type(lowest), dt.type(highest)
    # op type -> (combine, identity)
    return {"Sum": (add, dt.type(0)), "Mean": (add, dt.type(0)), "Prod": (mul, dt.type(1)),
            "Max": (maximum, lowest), "Min": (minimum, highest)}


REDUCTIONS = ("Sum", "Mean", "Prod", "Max", "Min")


def _tree(combine, tpb):
    """A device function combining ``v`` over the block through shared array ``sh``;
    every thread gets the result."""
    @cuda.jit(device=True)
    def tree(sh, tid, v):
        sh[tid] = v
        cuda.syncthreads()
        s = tpb // 2
        while s > 0:
            if tid < s:
                sh[tid] = combine(sh[tid], sh[tid + s])
            cuda.syncthreads()
            s //= 2
        r = sh[0]
        cuda.syncthreads()  # nobody overwrites sh[0] before everyone read it
        return r
    return tree


@functools.lru_cache(maxsize=None)
def reduce_kernel(op_type: str, dtype: np.dtype, out_dtype: np.dtype, tpb: int):
    """``out[r] = reduce(x[r*k:(r+1)*k])`` (Mean divides by ``k``; integer means
    truncate toward zero, as C's and TF's)."""
    combine, identity = _combiners(out_dtype)[op_type]
    combine = cuda.jit(device=True)(combine)
    tree = _tree(combine, tpb)
    acc_type = numba.from_dtype(out_dtype)
    mean = op_type == "Mean"
    int_mean = mean and out_dtype.kind in "iu"
    as_acc = out_dtype.type  # k as the accumulator's type: float32 means stay float32

    @cuda.jit
    def reduce_rows(x, m, k, out):
        sh = cuda.shared.array(tpb, acc_type)
        tid = cuda.threadIdx.x
        for row in range(cuda.blockIdx.x, m, cuda.gridDim.x):
            acc = identity
            base = row * k
            for j in range(tid, k, tpb):
                acc = combine(acc, x[base + j])
            r = tree(sh, tid, acc)
            if tid == 0:
                if int_mean:
                    q = abs(r) // k
                    out[row] = -q if r < 0 else q
                elif mean:
                    out[row] = r / as_acc(k)
                else:
                    out[row] = r
    return reduce_rows


@functools.lru_cache(maxsize=None)
def _block_ops(dtype: np.dtype, tpb: int):
    combiners = _combiners(dtype)
    return (_tree(cuda.jit(device=True)(combiners["Max"][0]), tpb),
            _tree(cuda.jit(device=True)(combiners["Sum"][0]), tpb))


@functools.lru_cache(maxsize=None)
def softmax_kernel(dtype: np.dtype, tpb: int, log: bool):
    """Softmax (or log-softmax) of each row: ``exp(x - max) / sum(exp(x - max))``."""
    block_max, block_sum = _block_ops(dtype, tpb)
    nb_type = numba.from_dtype(dtype)
    zero, lowest = dtype.type(0), dtype.type(-np.inf)

    @cuda.jit
    def softmax_rows(x, m, k, out):
        sh = cuda.shared.array(tpb, nb_type)
        tid = cuda.threadIdx.x
        for row in range(cuda.blockIdx.x, m, cuda.gridDim.x):
            base = row * k
            acc = lowest
            for j in range(tid, k, tpb):
                v = x[base + j]
                acc = v if v > acc or v != v else acc
            mx = block_max(sh, tid, acc)
            acc = zero
            for j in range(tid, k, tpb):
                acc += math.exp(x[base + j] - mx)
            total = block_sum(sh, tid, acc)
            if log:
                lse = math.log(total)
                for j in range(tid, k, tpb):
                    out[base + j] = x[base + j] - mx - lse
            else:
                for j in range(tid, k, tpb):
                    out[base + j] = math.exp(x[base + j] - mx) / total
    return softmax_rows


@functools.lru_cache(maxsize=None)
def xent_kernel(dtype: np.dtype, tpb: int):
    """Softmax cross-entropy per row: ``loss[r] = -sum(labels * log_softmax(logits))``
    and ``backprop = softmax(logits) - labels``, in one pass over the row."""
    block_max, block_sum = _block_ops(dtype, tpb)
    nb_type = numba.from_dtype(dtype)
    zero, lowest = dtype.type(0), dtype.type(-np.inf)

    @cuda.jit
    def xent_rows(logits, labels, m, k, loss, backprop):
        sh = cuda.shared.array(tpb, nb_type)
        tid = cuda.threadIdx.x
        for row in range(cuda.blockIdx.x, m, cuda.gridDim.x):
            base = row * k
            acc = lowest
            for j in range(tid, k, tpb):
                v = logits[base + j]
                acc = v if v > acc or v != v else acc
            mx = block_max(sh, tid, acc)
            acc = zero
            for j in range(tid, k, tpb):
                acc += math.exp(logits[base + j] - mx)
            total = block_sum(sh, tid, acc)
            lse = mx + math.log(total)
            acc = zero
            for j in range(tid, k, tpb):
                z = logits[base + j]
                y = labels[base + j]
                acc += y * (lse - z)
                backprop[base + j] = math.exp(z - mx) / total - y
            r = block_sum(sh, tid, acc)
            if tid == 0:
                loss[row] = r
    return xent_rows
