"""Keeping freed host memory in the process, so tensors do not page-fault on every step.

A training step allocates the same arrays every step and frees them at the end. With
glibc's default malloc settings, blocks of 128 KiB and more may come from fresh ``mmap``
regions, and free space at the top of the heap is handed back to the kernel once it
passes a threshold that glibc adapts to the blocks freed so far; so, depending on the
process's allocation history, the next step may touch new pages and take one page fault
per 4 KiB it writes. On the project's 2-core VM a fault costs about 2 µs
(``benchmarks/host_memory_table.py``): the hand-written NumPy MLP Adam step took 530-700
faults per step (3.0-3.6 ms) and our step alternating with it 270-390 (the pair 4.6 ms);
with the settings below, none (1.7 ms, and 3.4 ms for the pair).

So the first :class:`~dataflow.Session` of a process asks glibc (``mallopt``) to serve
blocks up to :data:`MMAP_THRESHOLD` from the heap and to keep up to
:data:`TRIM_THRESHOLD` of free heap memory for reuse, as caching allocators (TF's BFC,
PyTorch's CUDA allocator) keep theirs. Larger arrays still come from ``mmap`` (NumPy asks
for huge pages for them, so they fault rarely). The setting is process-wide; switch it
off with ``ConfigProto(retain_host_memory=False)`` or ``DATAFLOW_RETAIN_HOST_MEMORY=0``.
Elsewhere than glibc (macOS, musl, Windows) nothing changes.

>>> retain_freed_memory() in (True, False)   # True on glibc unless switched off
True
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading

__all__ = ["MMAP_THRESHOLD", "TRIM_THRESHOLD", "retain_freed_memory", "retained"]

#: Blocks below this size come from the heap (32 MiB is glibc's own ceiling for the
#: threshold it adapts by itself).
MMAP_THRESHOLD = 32 << 20
#: Free memory at the top of a heap is returned to the kernel beyond this much.
TRIM_THRESHOLD = 512 << 20

_M_TRIM_THRESHOLD = -1   # glibc's malloc.h parameter numbers
_M_MMAP_THRESHOLD = -3

_state = {"done": False, "retained": False}
_lock = threading.Lock()


def retained() -> bool:
    """Whether this process runs with the settings of :func:`retain_freed_memory`."""
    return _state["retained"]


def retain_freed_memory() -> bool:
    """Apply the malloc settings described in the module docstring, once per process.

    Returns whether they are in effect: False off glibc, when ``mallopt`` refuses them,
    or when ``DATAFLOW_RETAIN_HOST_MEMORY=0``.
    """
    with _lock:
        if not _state["done"]:
            _state["done"] = True
            if os.environ.get("DATAFLOW_RETAIN_HOST_MEMORY", "1") != "0":
                _state["retained"] = _set_glibc_thresholds()
    return _state["retained"]


def _set_glibc_thresholds() -> bool:
    libc = _glibc()
    if libc is None:
        return False
    # The trim threshold first: setting the mmap threshold alone would leave glibc's
    # adaptive trimming (twice the largest freed mmap block) switched off at its default.
    return bool(libc.mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
                and libc.mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))


def _glibc():
    """glibc through ctypes, or None where the C library is another one."""
    try:
        libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
        libc.gnu_get_libc_version  # only glibc has it; AttributeError elsewhere
        libc.mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
        libc.mallopt.restype = ctypes.c_int
        return libc
    except (OSError, AttributeError):
        return None
