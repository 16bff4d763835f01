"""Which ``cblas_?gemm`` NumPy itself calls (no Numba import: the runner puts the answer
in generated modules' names, since their cached object code calls it by name), and how
many threads its pool may use while a compiled loop runs (:func:`loop_blas_threads`).

>>> sorted(numpy_gemm()) in ([], ['float32', 'float64'])
True
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import os
import threading

__all__ = ["loop_blas_threads", "numpy_gemm", "threads_for_loops"]

# Symbol spellings of cblas_?gemm: NumPy >= 2 wheels bundle scipy-openblas with prefixed
# ILP64 names ("64_": 64-bit integer arguments); other builds link a plain CBLAS.
_GEMM_SPELLINGS = (("scipy_cblas_{}gemm64_", True), ("cblas_{}gemm64_", True),
                   ("scipy_cblas_{}gemm", False), ("cblas_{}gemm", False))


@functools.lru_cache(maxsize=None)
def _numpy_library():
    """NumPy's ``_multiarray_umath`` as a ctypes library (``dlsym`` on it searches the
    libraries it depends on, its BLAS among them), or None."""
    try:
        from numpy._core import _multiarray_umath as umath
    except ImportError:   # NumPy 1.x
        from numpy.core import _multiarray_umath as umath
    try:
        return ctypes.CDLL(umath.__file__)
    except OSError:
        return None


@functools.lru_cache(maxsize=None)
def numpy_gemm() -> dict:
    """``{"float32": (symbol, ilp64, address), "float64": ...}`` for the BLAS that NumPy's
    ``_multiarray_umath`` links; empty where none of the known spellings is exported."""
    lib = _numpy_library()
    if lib is None:
        return {}
    for spelling, ilp64 in _GEMM_SPELLINGS:
        names = {dt: spelling.format(c) for dt, c in (("float32", "s"), ("float64", "d"))}
        try:
            return {dt: (name, ilp64, ctypes.cast(getattr(lib, name), ctypes.c_void_p).value)
                    for dt, name in names.items()}
        except AttributeError:
            continue
    return {}


# -- the pool's size inside compiled loops ------------------------------------------------------
#
# A compiled RNN step calls a GEMM of 32 x 256 x 256 every 20-40 us. OpenBLAS splits it
# between the calling thread and a pool thread it wakes for each call: on a quiet
# 2-core host twice as fast as one thread (21 against 39 us), but when more threads are
# runnable than there are cores, the woken thread waits for a time slice and the call
# with it (0.4-2 ms per GEMM measured at load 5-8, 10-50x one thread's time). So while a
# compiled loop that multiplies matrices runs on an oversubscribed host, the pool is
# capped at one thread, and put back afterwards. OpenBLAS never splits the inner
# dimension between threads, so every thread count gives the same bits.

_SET_SPELLINGS = (("scipy_openblas_get_num_threads64_", "scipy_openblas_set_num_threads64_"),
                  ("openblas_get_num_threads64_", "openblas_set_num_threads64_"),
                  ("scipy_openblas_get_num_threads", "scipy_openblas_set_num_threads"),
                  ("openblas_get_num_threads", "openblas_set_num_threads"))


@functools.lru_cache(maxsize=None)
def _pool_calls():
    """``(get, set)`` of the thread count of NumPy's OpenBLAS, or None (another BLAS)."""
    lib = _numpy_library()
    for get_name, set_name in _SET_SPELLINGS if lib is not None else ():
        try:
            get, put = getattr(lib, get_name), getattr(lib, set_name)
        except AttributeError:
            continue
        get.restype, get.argtypes = ctypes.c_int, []
        put.restype, put.argtypes = None, [ctypes.c_int]
        return get, put
    return None


def threads_for_loops(current: int, load: float, cpus: int) -> int:
    """The BLAS thread count a compiled loop runs with: ``current``, or 1 when the
    1-minute load average says more threads are runnable than ``cpus`` can serve with
    one to spare (a compiled loop's own two threads make a load of about 2 by
    themselves).

    >>> threads_for_loops(2, 0.9, 2), threads_for_loops(2, 5.3, 2), threads_for_loops(8, 5.3, 16)
    (2, 1, 8)
    """
    return 1 if current > 1 and load > cpus + 0.5 else current


_capped = {"depth": 0, "restore": None}
_cap_lock = threading.Lock()


@contextlib.contextmanager
def loop_blas_threads():
    """Run the block with NumPy's BLAS pool at :func:`threads_for_loops`' count; the count
    is put back when the last of overlapping blocks (threads) leaves."""
    calls = _pool_calls()
    if calls is None:
        yield
        return
    get, put = calls
    with _cap_lock:
        if _capped["depth"] == 0:
            current = get()
            wanted = threads_for_loops(current, os.getloadavg()[0], os.cpu_count() or 1)
            _capped["restore"] = current if wanted != current else None
            if wanted != current:
                put(wanted)
        _capped["depth"] += 1
    try:
        yield
    finally:
        with _cap_lock:
            _capped["depth"] -= 1
            if _capped["depth"] == 0 and _capped["restore"] is not None:
                put(_capped["restore"])
                _capped["restore"] = None
