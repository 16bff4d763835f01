"""Flushing subnormal floats to zero, per thread and on the BLAS worker threads.

Flush-to-zero (FTZ: a subnormal result becomes a signed zero) and denormals-are-zero
(DAZ: a subnormal input is read as a signed zero) are modes of the CPU's floating-point
control register, which every thread has its own copy of: MXCSR bits 15 (FTZ) and 6
(DAZ) on x86-64, FPCR.FZ (bit 24, both at once) on aarch64. With them set, float work
that produces subnormals runs at full speed instead of taking a microcode assist per
value (TF1 and XLA run their kernels this way).

The register is read and written by a few lines of LLVM IR that llvmlite (a dependency
of Numba) compiles on first use, about 30 ms once per process; a call costs about
0.1 µs. No C compiler is needed. Where the mode cannot be set (another architecture,
an LLVM older than 15), :func:`supported` is False and every setter here is a no-op.

A new thread starts with its creator's mode (POSIX), but a thread pool that already
runs keeps the mode its threads started with: :func:`in_callers_mode` wraps work handed
to a pool so it runs in the submitting thread's mode, and :func:`set_blas_threads_flush`
runs a tiny job on every thread of each loaded OpenBLAS (whose pool does not take the
caller's mode unless it was built with ``CONSISTENT_FPCSR``, which NumPy's wheels are
not).

>>> from dataflow.util.float_env import (flush_denormals_on_this_thread, thread_flushes,
...                                      supported)
>>> before = flush_denormals_on_this_thread(True)
>>> x = np.float32(1e-20)
>>> float(x * x) == 0.0 or not supported()        # 1e-40 is subnormal in float32
True
>>> _ = flush_denormals_on_this_thread(before)       # back to the previous mode
>>> thread_flushes() == before
True
"""
from __future__ import annotations

import ctypes
import functools
import os
import platform
import sys
import threading
import warnings

import numpy as np

__all__ = ["count_subnormals", "flush_denormals_on_this_thread", "in_callers_mode",
           "set_blas_threads_flush", "supported", "thread_flushes", "blas_threads_in_mode"]

# Control-register bits that make up "flush": FTZ | DAZ on x86-64, FZ on aarch64.
_X86_BITS = (1 << 15) | (1 << 6)
_ARM_BITS = 1 << 24
_MAX_BLAS_THREADS = 512   # slots for the BLAS job's reports (OpenBLAS's MAX_THREADS <= 512)
_BLAS_PTHREAD = 0x4000    # OpenBLAS queue mode: call the routine as routine(args)


def _ir(arch: str) -> str:
    """The module: ``df_fenv_swap(mask, bits)`` sets the ``mask`` bits of the control
    register to ``bits`` and returns the previous register value; ``df_blas_job``
    does the same with the globals ``df_blas_mask``/``df_blas_bits`` and reports
    ``(pthread_self(), previous value)`` in the next free pair of ``df_blas_seen``."""
    if arch == "x86_64":
        access = """
declare void @llvm.x86.sse.stmxcsr(ptr)
declare void @llvm.x86.sse.ldmxcsr(ptr)
define i64 @df_fenv_swap(i64 %mask, i64 %bits) {
  %p = alloca i32, align 4
  call void @llvm.x86.sse.stmxcsr(ptr %p)
  %old32 = load i32, ptr %p, align 4
  %old = zext i32 %old32 to i64
  %keep = xor i64 %mask, -1
  %kept = and i64 %old, %keep
  %set = and i64 %bits, %mask
  %new = or i64 %kept, %set
  %new32 = trunc i64 %new to i32
  store i32 %new32, ptr %p, align 4
  call void @llvm.x86.sse.ldmxcsr(ptr %p)
  ret i64 %old
}
"""
    else:
        access = """
declare i64 @llvm.aarch64.get.fpcr()
declare void @llvm.aarch64.set.fpcr(i64)
define i64 @df_fenv_swap(i64 %mask, i64 %bits) {
  %old = call i64 @llvm.aarch64.get.fpcr()
  %keep = xor i64 %mask, -1
  %kept = and i64 %old, %keep
  %set = and i64 %bits, %mask
  %new = or i64 %kept, %set
  call void @llvm.aarch64.set.fpcr(i64 %new)
  ret i64 %old
}
"""
    bits = _X86_BITS if arch == "x86_64" else _ARM_BITS
    # Argument-free entry points for the per-step calls: ctypes converts no arguments
    # (0.25 µs a call against 1 µs with two).
    calls = f"""
define i64 @df_fenv_get() {{
  %old = call i64 @df_fenv_swap(i64 0, i64 0)
  ret i64 %old
}}
define i64 @df_fenv_flush() {{
  %old = call i64 @df_fenv_swap(i64 {bits}, i64 {bits})
  ret i64 %old
}}
define i64 @df_fenv_keep() {{
  %old = call i64 @df_fenv_swap(i64 {bits}, i64 0)
  ret i64 %old
}}
"""
    slots = 2 * _MAX_BLAS_THREADS
    return access + calls + f"""
@df_blas_mask = global i64 0
@df_blas_bits = global i64 0
@df_blas_count = global i64 0
@df_blas_seen = global [{slots} x i64] zeroinitializer
declare i64 @pthread_self()
define void @df_blas_job(ptr %args) {{
entry:
  %mask = load volatile i64, ptr @df_blas_mask
  %bits = load volatile i64, ptr @df_blas_bits
  %old = call i64 @df_fenv_swap(i64 %mask, i64 %bits)
  %i = atomicrmw add ptr @df_blas_count, i64 1 seq_cst
  %room = icmp ult i64 %i, {_MAX_BLAS_THREADS}
  br i1 %room, label %report, label %done
report:
  %tid = call i64 @pthread_self()
  %j = shl i64 %i, 1
  %at = getelementptr [{slots} x i64], ptr @df_blas_seen, i64 0, i64 %j
  store volatile i64 %tid, ptr %at
  %j1 = add i64 %j, 1
  %at1 = getelementptr [{slots} x i64], ptr @df_blas_seen, i64 0, i64 %j1
  store volatile i64 %old, ptr %at1
  br label %done
done:
  ret void
}}
"""


class _Native:
    """The compiled module of this process (built once, see :func:`_native`)."""

    def __init__(self, arch: str):
        import llvmlite.binding as llvm

        self.bits = _X86_BITS if arch == "x86_64" else _ARM_BITS
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        libc = ctypes.CDLL(None)
        llvm.add_symbol("pthread_self", ctypes.cast(libc.pthread_self, ctypes.c_void_p).value)
        module = llvm.parse_assembly(_ir(arch))
        module.verify()
        machine = llvm.Target.from_default_triple().create_target_machine()
        self._engine = llvm.create_mcjit_compiler(module, machine)  # keeps the code alive
        self._engine.finalize_object()
        address = self._engine.get_function_address
        self.swap = ctypes.CFUNCTYPE(ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64)(
            address("df_fenv_swap"))
        no_args = ctypes.CFUNCTYPE(ctypes.c_uint64)
        self.get = no_args(address("df_fenv_get"))
        self.flush = no_args(address("df_fenv_flush"))
        self.keep = no_args(address("df_fenv_keep"))
        self.blas_job = address("df_blas_job")
        glob = self._engine.get_global_value_address
        self.blas_mask = ctypes.c_uint64.from_address(glob("df_blas_mask"))
        self.blas_bits = ctypes.c_uint64.from_address(glob("df_blas_bits"))
        self.blas_count = ctypes.c_uint64.from_address(glob("df_blas_count"))
        self.blas_seen = (ctypes.c_uint64 * (2 * _MAX_BLAS_THREADS)).from_address(
            glob("df_blas_seen"))


_lock = threading.Lock()
_state: list = []          # [_Native or None], filled on first use


def _arch() -> str | None:
    machine = platform.machine().lower()
    if machine in ("x86_64", "amd64"):
        return "x86_64"
    if machine in ("aarch64", "arm64"):
        return "aarch64"
    return None


def _native() -> _Native | None:
    """The compiled module, or None where the mode cannot be set here."""
    if _state:
        return _state[0]
    with _lock:
        if not _state:
            _state.append(_build())
    return _state[0]


def _build() -> _Native | None:
    arch = _arch()
    try:
        import llvmlite.binding as llvm
        if arch is None or llvm.llvm_version_info < (15,):   # opaque pointers from 15
            return None
        return _Native(arch)
    except Exception as exc:  # noqa: BLE001 - keep IEEE behaviour, say why once
        warnings.warn(f"Cannot set the flush-to-zero mode on this machine ({exc}); "
                      "subnormal floats are kept", RuntimeWarning, stacklevel=3)
        return None


def supported() -> bool:
    """Whether this machine's flush-to-zero mode can be set (x86-64, aarch64).

    >>> isinstance(supported(), bool)
    True
    """
    return _native() is not None


def thread_flushes() -> bool:
    """Whether the calling thread flushes subnormals to zero (all of its mode bits set).

    >>> isinstance(thread_flushes(), bool)
    True
    """
    native = _native()
    if native is None:
        return False
    return native.get() & native.bits == native.bits


def flush_denormals_on_this_thread(enabled: bool = True) -> bool:
    """Set (``enabled``) or clear the calling thread's flush-to-zero mode (FTZ and DAZ);
    returns whether it was set before, so a caller can put it back. Other threads,
    running pools included, keep their own mode.

    >>> previous = flush_denormals_on_this_thread()
    >>> float(np.float64(1e-300) * 1e-20) == 0.0 or not supported()
    True
    >>> flush_denormals_on_this_thread(previous)
    True
    """
    native = _native()
    if native is None:
        return False
    old = native.flush() if enabled else native.keep()
    return old & native.bits == native.bits


def in_callers_mode(fn):
    """``fn`` wrapped to run in the calling thread's flush mode, whichever thread later
    calls it (for work handed to a thread pool); the pool thread keeps that mode.

    >>> from concurrent.futures import ThreadPoolExecutor
    >>> with ThreadPoolExecutor(1) as pool:
    ...     before = flush_denormals_on_this_thread(True)
    ...     on_pool = pool.submit(in_callers_mode(thread_flushes)).result()
    ...     _ = flush_denormals_on_this_thread(before)
    >>> on_pool == supported()
    True
    """
    native = _native()
    if native is None:
        return fn
    set_mode = native.flush if native.get() & native.bits == native.bits else native.keep

    @functools.wraps(fn)
    def run_in_mode(*args, **kwargs):
        set_mode()
        return fn(*args, **kwargs)
    return run_in_mode


# -- BLAS worker threads ----------------------------------------------------------------------

class _OpenBLAS:
    """One loaded OpenBLAS: its pool size and ``blas_level1_thread``, an exported
    internal that runs a routine once on each of ``nthreads`` threads (the calling
    thread included) and has kept its signature since GotoBLAS2."""

    def __init__(self, path: str):
        lib = ctypes.CDLL(path)
        self.path = path
        self.num_threads = ctypes.c_int.in_dll(lib, "blas_num_threads")
        # How many threads a BLAS call uses now (openblas_set_num_threads and
        # threadpoolctl lower it below the pool's size); the pool size where not exported.
        try:
            self.cpu_number = ctypes.c_int.in_dll(lib, "blas_cpu_number")
        except ValueError:
            self.cpu_number = self.num_threads
        run = lib.blas_level1_thread
        run.restype = ctypes.c_int
        run.argtypes = [ctypes.c_int, ctypes.c_long, ctypes.c_long, ctypes.c_long,
                        ctypes.c_void_p, ctypes.c_void_p, ctypes.c_long, ctypes.c_void_p,
                        ctypes.c_long, ctypes.c_void_p, ctypes.c_long, ctypes.c_void_p,
                        ctypes.c_int]
        self.run = run
        self.alpha = (ctypes.c_double * 2)()
        # (flush, threads) after the last complete set: the first ``threads`` threads of
        # the pool (the caller's share first) are in that mode; a pool whose calls have
        # not grown past them since needs no second job.
        self.known = None

    def active_threads(self) -> int:
        """How many threads a BLAS call of this library runs on now (the caller's too)."""
        return max(min(int(self.cpu_number.value), int(self.num_threads.value)), 1)

    def on_every_thread(self, job: int, n: int) -> int:
        """Run ``job`` once on each of ``n`` job slots (the calling thread and n - 1 of
        the pool's threads); returns ``n``."""
        self.run(_BLAS_PTHREAD, n, 0, 0, ctypes.addressof(self.alpha), None, 0, None, 0,
                 None, 0, job, n)
        return n


_blas_libs: list = []      # [len(sys.modules) when found, [_OpenBLAS, ...]]
_blas_lock = threading.Lock()
_warned: set = set()


def _openblas_libraries() -> list:
    """The loaded OpenBLAS libraries, looked up again after new imports (SciPy brings
    its own; looking costs milliseconds, so not at every step)."""
    if _blas_libs and _blas_libs[0] != len(sys.modules):
        # What each pool's threads were set to outlives the lookup (see _threads_to_set).
        known = {lib.path: lib.known for lib in _blas_libs[1]}
        _blas_libs.clear()
    else:
        known = {}
    if not _blas_libs:
        found = []
        try:
            from threadpoolctl import threadpool_info
            for info in threadpool_info():
                if info.get("internal_api") == "openblas":
                    try:
                        found.append(_OpenBLAS(info["filepath"]))
                        found[-1].known = known.get(info["filepath"])
                    except (OSError, AttributeError):   # symbols not exported: skip it
                        _warn_once(info["filepath"], "its thread-pool symbols are hidden")
        except ImportError:
            _warn_once("threadpoolctl", "threadpoolctl is not installed")
        _blas_libs[:] = [len(sys.modules), found]
    return _blas_libs[1]


def _warn_once(key, why):
    if key not in _warned:
        _warned.add(key)
        warnings.warn(f"BLAS worker threads keep their floating-point mode ({why}); a "
                      "multi-threaded matmul may keep subnormals in part of its result",
                      RuntimeWarning, stacklevel=4)


def set_blas_threads_flush(enabled: bool, force: bool = False) -> list:
    """Set (``enabled``) or clear the flush-to-zero mode on the threads of each loaded
    OpenBLAS pool that its calls run on now (the calling thread too: OpenBLAS runs one
    share of the work on it), and when the mode changes, on every thread an earlier set
    reached; threads beyond a threadpoolctl limit stay asleep (see
    :func:`_threads_to_set`). Returns, per library, whether all the threads reached
    flushed before (a pool this function set before and whose calls have not grown past
    the threads set is not woken again unless ``force``, which reads every thread's mode
    back); the calling thread's
    own mode is left as it was (set it with :func:`flush_denormals_on_this_thread`).
    A pool whose threads
    could not all be reached (another thread was running BLAS at the time: retried; or
    an unusual build) is left as reached and named in a RuntimeWarning, once.

    >>> before = set_blas_threads_flush(True)
    >>> _ = set_blas_threads_flush(False)
    """
    native = _native()
    if native is None:
        return []
    results = []
    with _blas_lock:
        caller = native.get() & native.bits    # the jobs set this thread too
        try:
            for lib in _openblas_libraries():
                results.append(_set_pool(native, lib, enabled, force))
        finally:
            native.swap(native.bits, caller)
    return results


def _threads_to_set(lib, enabled, force) -> int:
    """How many of ``lib``'s threads a set of mode ``enabled`` must reach: those its calls
    run on now, and, when it changes the mode, every thread an earlier set reached; 0
    when they are all in that mode already. Threads that calls do not reach (a pool
    limited by threadpoolctl) are left asleep: waking them costs more than the step
    (each spins for milliseconds after the job, taking a core from the caller), and
    they are set when a step first runs with more threads."""
    active = lib.active_threads()
    known = lib.known
    if known is None:     # not known (never set, or since a fork): clearing reaches all
        return max(active, int(lib.num_threads.value)) if force or not enabled else active
    if known[0] == enabled:
        if known[1] >= active and not force:
            return 0
        return max(active, known[1])
    return max(active, known[1])


def blas_threads_in_mode(enabled: bool) -> bool:
    """Whether every OpenBLAS thread that a BLAS call reaches now is known to be in mode
    ``enabled`` (a set with :func:`set_blas_threads_flush` would wake none)."""
    return all(_threads_to_set(lib, enabled, False) == 0 for lib in _openblas_libraries())


def _set_pool(native, lib, enabled, force) -> bool:
    n_set = _threads_to_set(lib, enabled, force)
    if n_set == 0:
        return enabled
    lib.known = None
    native.blas_mask.value = native.bits
    native.blas_bits.value = native.bits if enabled else 0
    before = None
    for _attempt in range(3):
        native.blas_count.value = 0
        n = lib.on_every_thread(native.blas_job, n_set)
        reports = min(int(native.blas_count.value), _MAX_BLAS_THREADS)
        seen = {native.blas_seen[2 * i]: native.blas_seen[2 * i + 1] for i in range(reports)}
        if before is None:     # the worker threads' modes (pthread_self() is get_ident())
            workers = [v for t, v in seen.items() if t != threading.get_ident()]
            before = all(v & native.bits == native.bits for v in workers)
        if len(seen) == n:     # each job ran on a thread of its own: every thread is set
            lib.known = (enabled, n)
            return before
    _warn_once(lib.path, f"only {len(seen)} of the {n} threads of {lib.path} ran the "
               "mode-setting job")
    return before


def _forget_blas_modes():
    """OpenBLAS stops its pool before a fork (in the parent too) and starts new threads,
    in their creator's mode, at the next call: no pool's mode is known after a fork."""
    for lib in _blas_libs[1] if _blas_libs else ():
        lib.known = None


def _fresh_locks_after_fork():
    """A forked child starts with unlocked locks (a parent thread may hold one)."""
    global _lock, _blas_lock
    _lock, _blas_lock = threading.Lock(), threading.Lock()
    _forget_blas_modes()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_forget_blas_modes, after_in_child=_fresh_locks_after_fork)


def count_subnormals(x) -> int:
    """How many elements of the float array ``x`` are subnormal (exponent field zero,
    fraction nonzero). It reads the bit patterns, so the answer does not depend on the
    calling thread's mode (with DAZ set, a float comparison would see them as zeros).

    >>> count_subnormals(np.array([1e-40, 1e-30, 0.0], np.float32))
    1
    """
    a = np.ascontiguousarray(x)
    if a.dtype.kind != "f" or a.dtype.itemsize not in _UINT_OF_SIZE:
        return 0
    info = np.finfo(a.dtype)
    bits = a.view(_UINT_OF_SIZE[a.dtype.itemsize])
    fraction = (1 << info.nmant) - 1
    exponent = ((1 << info.nexp) - 1) << info.nmant
    return int(np.count_nonzero(((bits & exponent) == 0) & ((bits & fraction) != 0)))


_UINT_OF_SIZE = {2: np.uint16, 4: np.uint32, 8: np.uint64}
