"""Run-mode drivers: how a Session compiles and runs one step.

Two drivers, chosen per step by :class:`StepDriver`:

* :class:`SingleDriver` ("single"): one :class:`~dataflow.runtime.plan.Plan`, run by
  one :class:`~dataflow.runtime.executor.Executor` on the calling thread (large
  kernels go to the session's worker pool);
* :class:`PartitionedDriver`: one plan per device
  (:mod:`dataflow.runtime.partitioned`), run by a registered partition mode:
  ``"threads"`` (the default, a thread per partition) or ``"processes"`` (a worker
  process per device, :mod:`dataflow.runtime.multiprocess`), or any mode added with
  :func:`~dataflow.runtime.partitioned.register_partition_mode`.

A step runs partitioned when the ops it needs are explicitly placed on two or more
devices, or always when its mode says so (the processes mode: variables live in the
device processes). Everything else keeps the single-executor path.

>>> import numpy as np, dataflow as df
>>> from dataflow.runtime.device_set import DeviceSet
>>> from dataflow.runtime.kernel_resolver import KernelResolver
>>> with df.Graph().as_default() as g:
...     x = df.placeholder(df.float32, [])
...     y = x * 2.0
>>> kernels = KernelResolver(DeviceSet(g, {}, False), df.ConfigProto(), resources={})
>>> plan = SingleDriver.build(g, [y], [], [x], kernels.kernel_for)
>>> pool = WorkerPool()
>>> [float(v) for v in SingleDriver(pool).execute(plan, [np.float32(3.0)], deadline=None)]
[6.0]
>>> pool.shutdown()
"""
from __future__ import annotations

import sys
import threading
import weakref
from concurrent.futures import ThreadPoolExecutor

from ..framework.graph_analysis import prune
from .denormals import release_blas_pool, step_float_mode
from .feeds import feed_templates
from .fusion import fusion_enabled
from .loop_hook import attach_loop_compiler, compile_loops_mode
from .memory_arena import run_arena_step
from .partitioned import PartitionedPlan, build_partitioned_plan, partition_mode, run_partitioned
from .plan import build_plan
from .tracing import StepStatsCollector, make_executor

__all__ = ["PartitionedDriver", "SingleDriver", "StepDriver", "WorkerPool"]


class WorkerPool:
    """The session's worker threads for large kernels, started on first use
    (``inter_op_parallelism_threads`` of them; 0 means two).

    >>> pool = WorkerPool(1)
    >>> pool.get().submit(sum, [1, 2]).result()
    3
    >>> pool.shutdown()
    """

    def __init__(self, threads: int = 0):
        self._threads = threads or 2
        self._pool = None
        self._lock = threading.Lock()

    def get(self) -> ThreadPoolExecutor:
        pool = self._pool
        if pool is None:
            with self._lock:
                if self._pool is None:
                    self._pool = ThreadPoolExecutor(max_workers=self._threads,
                                                    thread_name_prefix="dataflow")
                pool = self._pool
        return pool

    def shutdown(self):
        pool, self._pool = self._pool, None
        if pool is not None:
            pool.shutdown(wait=False)


class SingleDriver:
    """The whole step as one plan, run by one executor."""

    name = "single"

    def __init__(self, pool: WorkerPool):
        self._pool = pool

    @staticmethod
    def build(graph, tensors, targets, feed_tensors, kernel_for, compile_loops=None,
              **plan_options):
        """The step's plan; ``compile_loops`` (a :func:`~.loop_hook.compile_loops_mode`)
        lets the loop compiler take its frames."""
        plan = build_plan(graph, tensors, targets, feed_tensors, kernel_for, **plan_options)
        attach_loop_compiler(plan, tensors, targets, feed_tensors, compile_loops)
        return plan

    def execute(self, plan, feed_values, deadline, stats=None, loop_log=None,
                arena=None) -> list:
        """Raw fetched values of one step (fed fetches: None); with ``stats`` (a
        :class:`~.step_stats.StepStats`) the step is traced into it; ``loop_log`` (a
        list) gets ``(frame name, None or why interpreted)`` per loop frame run. With
        ``arena`` (the step's arena, ``plan_memory``) it runs from the memory plan
        (:func:`~.memory_arena.run_arena_step`; not traced node by node)."""
        if arena is not None:
            return run_arena_step(plan, arena, feed_values, deadline)
        collector = None if stats is None else StepStatsCollector(plan)
        executor = make_executor(plan, self._pool.get(), feed_templates(plan, feed_values),
                                 collector=collector)
        executor.loop_log = loop_log
        # A traced step records every node execution: its loops run interpreted.
        executor.interpret_loops = collector is not None
        raw = executor.run(deadline)
        if collector is not None:
            stats.merge(collector.device_stats())
        return raw

    def close(self):
        pass


class PartitionedDriver:
    """One plan per device, run by partition mode ``mode_name`` (UnimplementedError
    naming the registered modes when there is no such mode)."""

    def __init__(self, mode_name: str, session, pool: WorkerPool):
        self.mode = partition_mode(mode_name)   # an unknown mode fails here, not at run time
        # A weak reference: a Session dropped without close() is freed at once, and the
        # mode state's finalizer (the processes mode's) then stops its workers.
        self._session = weakref.ref(session)
        self._pool = pool
        self.mode_state = None    # the mode's per-Session state, made on first use
        if self.mode.on_session is not None:
            self.mode.on_session(session)   # the MPI mode: ranks other than 0 serve here

    @property
    def name(self) -> str:
        return self.mode.name

    def wants(self, places) -> bool:
        """Whether a step whose explicitly placed ops are on ``places`` runs partitioned."""
        return len(set(places) - {None}) >= 2 or self.mode.partition_single_device

    def build(self, graph, tensors, targets, feed_tensors, kernel_for, *, resolve,
              devices=None, **plan_options):
        if self.mode.device_name is not None and devices is not None:
            def resolve(op, _name=self.mode.device_name):  # the mode names devices
                return _name(devices, op)
        return build_partitioned_plan(graph, tensors, targets, feed_tensors, kernel_for,
                                      default_device=self.mode.default_device,
                                      resolve=resolve, **plan_options)

    def execute(self, plan, feed_values, deadline, stats=None) -> list:
        return run_partitioned(plan, feed_values, deadline, self.mode.name, self._pool.get(),
                               feed_templates, runner=self._runner(), stats=stats)

    def _runner(self):
        """The mode's per-Session runner, if it has one (made once)."""
        if self.mode.per_session is None:
            return None
        if self.mode_state is None:
            self.mode_state = self.mode.per_session(self._session())
        return self.mode_state.run

    def close(self):
        mode_state, self.mode_state = self.mode_state, None
        if mode_state is not None:
            mode_state.close()   # e.g. the processes mode's worker processes


class StepDriver:
    """Builds each step's plan with the right driver and runs it.

    ``devices`` is the session's :class:`~dataflow.runtime.device_set.DeviceSet`,
    ``kernels`` its :class:`~dataflow.runtime.kernel_resolver.KernelResolver`.
    ``config.log_device_placement`` prints each node's device to stderr when a plan
    is built; ``config.intra_op_parallelism_threads`` bounds the BLAS/OpenMP threads
    of the kernels while a step runs (see :mod:`dataflow.runtime.thread_limits`);
    ``config.flush_denormals`` sets the floating-point mode the step's kernels run in
    (see :mod:`dataflow.runtime.denormals`).
    """

    def __init__(self, session, config, devices, kernels, pool: WorkerPool, thread_limit=None):
        self._config = config
        self._devices = devices
        self._kernels = kernels
        self.single = SingleDriver(pool)
        self.partitioned = PartitionedDriver(config.partition_mode, session, pool)
        self._thread_limit = thread_limit

    def build(self, graph, tensors, targets, feed_tensors):
        """The plan of one step: a PartitionedPlan or a Plan."""
        ops = prune(tensors, targets, set(feed_tensors))
        places = {self._devices.declared_place(op) for op in ops if op.device}
        # Read at every build: DATAFLOW_FUSION may change between plans.
        # plan_memory plans every op's value: fused groups would leave planned values
        # unmade, so it runs unfused.
        options = dict(fold_constants=self._config.fold_constants,
                       fuse_elementwise=fusion_enabled(self._config.fuse_elementwise)
                       and not getattr(self._config, "plan_memory", False))
        if self.partitioned.wants(places):
            plan = self.partitioned.build(graph, tensors, targets, feed_tensors,
                                          self._kernels.kernel_for,
                                          resolve=self._devices.device_name,
                                          devices=self._devices, **options)
        else:
            plan = self.single.build(graph, tensors, targets, feed_tensors,
                                     self._kernels.kernel_for,
                                     compile_loops=compile_loops_mode(
                                         self._config.compile_loops), **options)
        if self._config.log_device_placement:
            self.log_placement(plan)
        return plan

    def execute(self, plan, feed_values, deadline, stats=None, loop_log=None,
                arena=None) -> list:
        """Raw fetched values of one step: one executor, or one per partition. With
        ``stats`` (a :class:`~.step_stats.StepStats`) the step is traced into it;
        ``loop_log`` collects how each loop frame ran (single-executor steps); with
        ``arena`` it runs from the memory plan (single executor only)."""
        if isinstance(plan, PartitionedPlan):
            driver, extra = self.partitioned, {}
        else:
            driver, extra = self.single, {"loop_log": loop_log}
            if arena is not None:
                extra["arena"] = arena
        with step_float_mode(self._config.flush_denormals, plan, self):
            if self._thread_limit is None:
                return driver.execute(plan, feed_values, deadline, stats, **extra)
            with self._thread_limit():
                return driver.execute(plan, feed_values, deadline, stats, **extra)

    def log_placement(self, plan, file=None):
        """Print ``name: (type): device`` for every node of ``plan``, as TF1's
        ``log_device_placement`` does (the device whose kernel runs the node)."""
        file = file if file is not None else sys.stderr
        plans = plan.plans.values() if isinstance(plan, PartitionedPlan) else [plan]
        chosen = self._kernels.devices_of_kernels
        lines = []
        for p in plans:
            for op in p.ops:
                kind, index = chosen.get(op.name) or self._devices.place(op)
                lines.append(f"{op.name}: ({op.type}): /job:localhost/replica:0/task:0/"
                             f"device:{kind}:{index}")
        print("\n".join(lines), file=file)

    def close(self):
        self.partitioned.close()
        self.single.close()
        release_blas_pool(self)   # the BLAS pool back to IEEE once no session flushes
