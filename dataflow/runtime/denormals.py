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
  whose plan has a kernel that uses them (:func:`plan_uses_blas`): set when the first
  such step starts and, when the last one running ends, put back to the mode the
  calling thread goes back to, so NumPy code outside a step keeps the caller's IEEE
  behaviour. Two sessions with different settings stepping at the same time share that
  pool: the first to start decides while both run.
* Numba kernels run on the thread that calls them (no kernel uses Numba's parallel
  threading layer), so they follow the thread's mode.

The contract for the caller: after ``Session.run`` returns (or raises), the calling
thread's mode is what it was before; only while a step runs does it flush.

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

__all__ = ["BLAS_THREADED_MIN_ELEMENTS", "plan_uses_blas", "step_float_mode"]

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
    """The BLAS pool's mode across the steps running now (process-wide). Setting it
    costs a wake-up of every BLAS thread, as a small threaded matmul does; float_env
    skips it when the pool is known to be in that mode already."""

    def __init__(self):
        self.lock = threading.Lock()
        self.active = 0        # steps running that set the pool
        self.flushing = None   # the mode they set

    def enter(self, flush: bool):
        with self.lock:
            if self.active == 0:
                float_env.set_blas_threads_flush(flush)
                self.flushing = flush
            self.active += 1

    def leave(self, restore: bool):
        with self.lock:
            self.active -= 1
            if self.active == 0 and restore != self.flushing:
                float_env.set_blas_threads_flush(restore)


_pool = _BlasPool()


def _forget_after_fork():
    """A forked child (the processes mode's workers) has no step running: it starts
    with a fresh record and lock (the parent forks from inside a step)."""
    global _pool
    _pool = _BlasPool()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(after_in_child=_forget_after_fork)


class step_float_mode:   # noqa: N801 - used as a function: ``with step_float_mode(...)``
    """Run the body with the calling thread (and, when ``plan`` uses BLAS, the BLAS
    worker threads) flushing subnormals (``flush``) or keeping them; the thread's
    previous mode comes back afterwards, and the BLAS pool follows it. (A class, not a
    generator: it runs once per step, and this costs half as much.)

    >>> from dataflow.util.float_env import thread_flushes, supported
    >>> before = thread_flushes()
    >>> with step_float_mode(True):
    ...     inside = thread_flushes()
    >>> inside == supported(), thread_flushes() == before
    (True, True)
    """

    __slots__ = ("flush", "plan", "previous", "blas")

    def __init__(self, flush: bool, plan=None):
        self.flush, self.plan = flush, plan

    def __enter__(self):
        self.previous = float_env.flush_denormals_on_this_thread(self.flush)
        self.blas = self.plan is not None and plan_uses_blas(self.plan)
        if self.blas:
            _pool.enter(self.flush)
        return self

    def __exit__(self, *exc):
        if self.blas:
            _pool.leave(self.previous)
        float_env.flush_denormals_on_this_thread(self.previous)
        return False
