"""``ConfigProto(intra_op_parallelism_threads=n)``: how many threads one kernel may use.

The kernels that run on several threads are the BLAS ones (NumPy's matmul; the
executor keeps them off its worker pool) and anything built on OpenMP. Their thread
pools belong to the process, not to a session, so a session with ``n > 0`` sets them
to ``n`` threads for the duration of each of its steps and restores the previous
counts afterwards (through ``threadpoolctl``, about 20 µs a step; sessions that leave
it at 0 pay nothing). Two sessions stepping at the same time with different limits
share the process's pools, so the last one to start wins while both run. The
Numba-compiled CPU kernels are single-threaded, so they are not affected. Without
``threadpoolctl`` installed the option cannot act: the Session warns and runs with
the libraries' own thread counts.

>>> limit = thread_limit(1)
>>> with limit():
...     pass                      # BLAS runs on one thread here
>>> thread_limit(0) is None
True
"""
from __future__ import annotations

import threading
import warnings

__all__ = ["thread_limit"]

_controller = None
_lock = threading.Lock()


def thread_limit(threads: int):
    """A no-argument function returning a context manager that bounds the BLAS and
    OpenMP thread pools to ``threads`` while it is active; None for ``threads == 0``
    (the libraries' defaults) or when ``threadpoolctl`` is missing."""
    if not threads:
        return None
    controller = _get_controller()
    if controller is None:
        warnings.warn("ConfigProto(intra_op_parallelism_threads=...) needs the "
                      "threadpoolctl package to bound the BLAS threads; it is not "
                      "installed, so kernels use the libraries' default thread counts",
                      RuntimeWarning, stacklevel=3)
        return None
    return lambda: controller.limit(limits=threads)


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
