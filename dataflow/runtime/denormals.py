"""``ConfigProto(flush_denormals=...)``: the floating-point mode a step's kernels run in.

With ``flush_denormals=True`` (the default, as TF1 and XLA run their CPU kernels) every
thread that runs a kernel of the step flushes subnormal floats to zero (FTZ and DAZ,
see :mod:`dataflow.util.float_env`); ``False`` keeps IEEE subnormals. The threads:

* the thread that calls ``Session.run`` (the single executor, the first partition of
  the threads mode, rank 0's partition in the MPI mode): set by :func:`step_float_mode`
  around the step, and put back as it was afterwards;
* the executor's worker pool (large kernels), the threads mode's partition threads and
  the fused kernels' split pool: each piece of work runs in the mode of the thread that
  handed it over (``float_env.in_callers_mode``);
* the processes mode's worker processes and the MPI mode's serving ranks: each runs its
  partition inside :func:`step_float_mode` with the Session's setting;
* BLAS's worker threads (NumPy's OpenBLAS pool, shared by the whole process), for steps
  whose plan has a kernel that uses them (:func:`plan_uses_blas`): set by the first
  such step and kept so between steps (waking every BLAS thread twice per step cost
  about 20 ms per library on a loaded machine); when the last open session that left
  it flushing closes, it goes back to IEEE, so NumPy code after ``with Session()``
  keeps IEEE behaviour. While a flushing session is open, a multi-threaded NumPy matmul
  outside its steps may flush subnormals in the part the worker threads compute. Two
  sessions with different settings stepping at the same time share that pool: the
  first to start decides while both run.
* Numba kernels run on the thread that calls them (no kernel uses Numba's parallel
  threading layer), so they follow the thread's mode.

The contract for the caller: after ``Session.run`` returns (or raises), the calling
thread's mode is what it was before; only while a step runs does it flush. The BLAS
pool is back in IEEE mode once every flushing session is closed.

>>> import dataflow as df
>>> from dataflow.util.float_env import count_subnormals
>>> x = df.placeholder(df.float32, [3])
>>> y = x * np.float32(1e-20)
>>> feed = {x: np.full(3, 1e-20, np.float32)}       # 1e-40: a float32 subnormal
>>> with df.Session(config=df.ConfigProto(flush_denormals=False)) as sess:
...     count_subnormals(sess.run(y, feed))
3
"""
from __future__ import annotations

import os
import threading
import weakref

from ..kernels.registry import kernel_is_parallel
from ..util import float_env
from .plan import node_device_type

__all__ = ["BLAS_THREADED_MIN_ELEMENTS", "plan_uses_blas", "release_blas_pool",
           "step_float_mode"]

_uses_blas: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()


# OpenBLAS runs a call on one thread below about 64^3 multiply-adds (GEMM) or 9216
# matrix elements (GEMV): an input of fewer elements than this never wakes its pool.
BLAS_THREADED_MIN_ELEMENTS = 4096


def plan_uses_blas(plan) -> bool:
    """Whether a Plan (or any partition of a PartitionedPlan) has a CPU kernel that may
    run on the BLAS worker threads: registered ``parallel=True``, with an input that is
    not statically smaller than :data:`BLAS_THREADED_MIN_ELEMENTS`; cached per plan.

    >>> import dataflow as df
    >>> from dataflow.runtime.plan import build_plan
    >>> from dataflow.runtime.device_set import DeviceSet
    >>> from dataflow.runtime.kernel_resolver import KernelResolver
    >>> with df.Graph().as_default() as g:
    ...     a = df.placeholder(df.float32, [2, 2])
    ...     b, c = df.matmul(a, a), a + a
    ...     big = df.placeholder(df.float32, [None, 64])
    ...     d, e = df.matmul(big, df.ones([64, 64])), big + big
    >>> kernels = KernelResolver(DeviceSet(g, {}, False), df.ConfigProto(), resources={})
    >>> [plan_uses_blas(build_plan(g, [t], [], [a, big], kernels.kernel_for))
    ...  for t in (b, c, d, e)]                # a 2x2 matmul runs on the calling thread
    [False, False, True, False]
    """
    try:
        return _uses_blas[plan]
    except KeyError:
        pass
    plans = getattr(plan, "plans", None)
    if plans is not None:
        uses = any(plan_uses_blas(p) for p in plans.values())
    else:
        uses = any(node_device_type(op) == "CPU" and kernel_is_parallel(op, "CPU")
                   and _may_be_threaded(op) for op in plan.ops)
    _uses_blas[plan] = uses
    return uses


def _may_be_threaded(op) -> bool:
    for t in op.inputs:
        n = t.shape.num_elements()
        if n is None or n >= BLAS_THREADED_MIN_ELEMENTS:
            return True
    return False


class _BlasPool:
    """The BLAS pool's mode (process-wide). Setting it wakes every BLAS thread, which
    costs 7-15 us on an idle machine but about 20 ms per library on a loaded one (the
    threads have gone to sleep), so it is not flipped twice per step: a step sets the
    mode it needs if the pool is not in it, and the pool stays so between steps. When
    the last open session whose steps set it flushing closes, it goes back to the
    closing thread's own mode (IEEE for a thread that never set one)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.active = 0        # steps running that use the pool
        self.flushing = None   # the mode the pool is in (None: not known)
        self.holders = weakref.WeakSet()   # open sessions that left it flushing

    def enter(self, flush: bool, holder=None):
        with self.lock:
            if self.active == 0 and (self.flushing is not flush
                                     or not float_env.blas_threads_in_mode(flush)):
                float_env.set_blas_threads_flush(flush)
                self.flushing = flush
            self.active += 1
            if flush and holder is not None:
                self.holders.add(holder)

    def leave(self):
        with self.lock:
            self.active -= 1

    def release(self, holder):
        """``holder`` (a session's step driver) closes: put the pool back to the calling
        thread's mode when no open session keeps it flushing and no step runs."""
        with self.lock:
            self.holders.discard(holder)
            if self.active == 0 and not self.holders and self.flushing:
                restore = float_env.thread_flushes()
                float_env.set_blas_threads_flush(restore)
                self.flushing = restore


_pool = _BlasPool()


def _forget_after_fork():
    """A forked child (the processes mode's workers) has no step running: it starts
    with a fresh record and lock (the parent forks from inside a step)."""
    global _pool
    _pool = _BlasPool()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


def release_blas_pool(holder) -> None:
    """A session's step driver ``holder`` closes: when no other open session keeps the
    BLAS pool flushing, it goes back to the calling thread's mode."""
    _pool.release(holder)


class step_float_mode:   # noqa: N801 - used as a function: ``with step_float_mode(...)``
    """Run the body with the calling thread (and, when ``plan`` uses BLAS, the BLAS
    worker threads) flushing subnormals (``flush``) or keeping them; the thread's
    previous mode comes back afterwards. The BLAS pool keeps the step's mode until
    the step driver ``holder`` (a session's) calls :func:`release_blas_pool` on close;
    worker processes and MPI ranks, which run nothing but steps, pass none. (A class,
    not a generator: it runs once per step, and this costs half as much.)

    >>> from dataflow.util.float_env import thread_flushes, supported
    >>> before = thread_flushes()
    >>> with step_float_mode(True):
    ...     inside = thread_flushes()
    >>> inside == supported(), thread_flushes() == before
    (True, True)
    """

    __slots__ = ("flush", "plan", "holder", "previous", "blas")

    def __init__(self, flush: bool, plan=None, holder=None):
        self.flush, self.plan, self.holder = flush, plan, holder

    def __enter__(self):
        self.previous = float_env.flush_denormals_on_this_thread(self.flush)
        self.blas = self.plan is not None and plan_uses_blas(self.plan)
        if self.blas:
            _pool.enter(self.flush, self.holder)
        return self

    def __exit__(self, *exc):
        if self.blas:
            _pool.leave()
        float_env.flush_denormals_on_this_thread(self.previous)
        return False
