"""Small matrix products on one BLAS thread, on machines with few cores.

NumPy's OpenBLAS runs every GEMM on all cores, and its worker threads then spin for
a while waiting for the next one. On this project's 2-core machine that spinning
takes the second core from whatever the executor runs next: in the digits MLP Adam
step (eight 1797x64x64 GEMMs between elementwise kernels) one BLAS thread for those
GEMMs made the whole step 14 % faster (2.73 -> 2.34 ms and 3.89 -> 3.35 ms, two
interleaved runs), although such a GEMM alone is faster on two threads (110 vs
187 µs). Large products keep every thread. The thread count is switched per call
through threadpoolctl (about a microsecond); where threadpoolctl or a BLAS it knows
is missing, or the machine has more than :data:`MAX_CPUS` cores, nothing changes.

>>> mm = single_thread_when_small(operator.matmul)   # doctest: +SKIP
"""
from __future__ import annotations

import os

import numpy as np

__all__ = ["MAX_CPUS", "SMALL_GEMM_FLOPS", "single_thread_when_small"]

#: Products of fewer multiply-adds than this run on one BLAS thread (2048^3 keeps all).
SMALL_GEMM_FLOPS = 1 << 25
#: Machines with more cores than this keep BLAS's own threading (measured on 2 only).
MAX_CPUS = 2

_controller = []   # [lib controller or None], filled on first use


def _blas():
    """threadpoolctl's controller of NumPy's BLAS and its thread count, or None."""
    if not _controller:
        lib = None
        if _num_cpus() <= MAX_CPUS and os.environ.get("DATAFLOW_SMALL_GEMM_THREADS") != "0":
            try:
                from threadpoolctl import ThreadpoolController
                libs = ThreadpoolController().select(user_api="blas").lib_controllers
                lib = (libs[0], libs[0].num_threads) if libs and libs[0].num_threads > 1 \
                    else None
            except Exception:  # no threadpoolctl, or a BLAS it cannot drive
                lib = None
        _controller.append(lib)
    return _controller[0]


def _num_cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:
        return os.cpu_count() or 1


def single_thread_when_small(matmul, transpose_a=False, transpose_b=False):
    """``matmul(a, b)``, running 2-D products below :data:`SMALL_GEMM_FLOPS` on one
    BLAS thread (see the module docstring); ``matmul`` itself when that never applies."""
    blas = _blas()
    if blas is None:
        return matmul
    lib, threads = blas
    k_axis = 0 if transpose_a else 1
    n_axis = 0 if transpose_b else 1

    def small_on_one_thread(a, b):
        if type(a) is np.ndarray and type(b) is np.ndarray and a.ndim == 2 and b.ndim == 2 \
                and a.size * b.shape[n_axis] < SMALL_GEMM_FLOPS and a.shape[k_axis]:
            lib.set_num_threads(1)
            try:
                return matmul(a, b)
            finally:
                lib.set_num_threads(threads)
        return matmul(a, b)
    return small_on_one_thread
