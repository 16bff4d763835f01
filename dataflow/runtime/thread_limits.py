"""``ConfigProto(intra_op_parallelism_threads=n)``: how many threads one kernel may use.

The kernels that run on several threads are the BLAS ones (NumPy's matmul; the
executor keeps them off its worker pool) and anything built on OpenMP. Their thread
pools belong to the process, not to a session, so a session with ``n > 0`` sets them
to ``n`` threads for the duration of each of its steps and restores the previous
counts afterwards (through ``threadpoolctl``, about 20 µs a step; sessions that leave
it at 0 pay nothing). Two sessions stepping at the same time with different limits
share the process's pools, so the last one to start wins while both run. The
Numba-compiled CPU kernels are single-threaded; the loop compiler's products share
their work with one helper thread only when :func:`kernel_threads` is 2 or more. Without
``threadpoolctl`` installed the option cannot act: the Session warns and runs with
the libraries' own thread counts.

>>> limit = thread_limit(1)
>>> with limit():
...     pass                      # BLAS runs on one thread here
>>> thread_limit(0) is None
True
"""
from __future__ import annotations

import os
import threading
import warnings

__all__ = ["kernel_threads", "thread_limit"]

_controller = None
_lock = threading.Lock()


def thread_limit(threads: int):
    """A no-argument function returning a context manager that bounds the BLAS and
    OpenMP thread pools (and :func:`kernel_threads`) to ``threads`` while it is active;
    None for ``threads == 0`` (the libraries' defaults)."""
    if not threads:
        return None
    controller = _get_controller()
    if controller is None:
        warnings.warn("ConfigProto(intra_op_parallelism_threads=...) needs the "
                      "threadpoolctl package to bound the BLAS threads; it is not "
                      "installed, so kernels use the libraries' default thread counts",
                      RuntimeWarning, stacklevel=3)
        return lambda: _Limited(threads, None)
    return lambda: _Limited(threads, controller)


class _Limited:
    """The context of one limited step: the BLAS pools bounded, :func:`kernel_threads`
    set (process-wide, as the pools are), both restored on exit."""

    __slots__ = ("threads", "controller", "_pools", "_before")

    def __init__(self, threads, controller):
        self.threads, self.controller = threads, controller

    def __enter__(self):
        global _kernel_threads
        self._pools = self.controller.limit(limits=self.threads) \
            if self.controller is not None else None
        if self._pools is not None:
            self._pools.__enter__()
        self._before, _kernel_threads = _kernel_threads, self.threads
        return self

    def __exit__(self, *exc):
        global _kernel_threads
        _kernel_threads = self._before
        if self._pools is not None:
            self._pools.__exit__(*exc)
        return False


_kernel_threads = 0


def kernel_threads() -> int:
    """How many threads one kernel may use now: the running step's
    ``intra_op_parallelism_threads``, or the cores this process may run on when no
    step bounds it.

    >>> kernel_threads() >= 1
    True
    >>> with thread_limit(1)():
    ...     kernel_threads()
    1
    """
    return _kernel_threads or _cores()


def _cores() -> int:
    try:
        return len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def _get_controller():
    """One ``ThreadpoolController`` per process (making one inspects every loaded
    library: milliseconds), or None without threadpoolctl."""
    global _controller
    with _lock:
        if _controller is None:
            try:
                from threadpoolctl import ThreadpoolController
            except ImportError:
                return None
            _controller = ThreadpoolController()
    return _controller
