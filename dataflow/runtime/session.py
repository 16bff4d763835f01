"""``Session``: runs fetches of a graph, keeping variables across runs (``tf.Session``).

>>> import dataflow as df
>>> with df.Graph().as_default():
...     x = df.placeholder(df.float32)
...     y = x * 2.0
...     with Session() as sess:
...         out = sess.run({"y": y, "both": [x, y]}, feed_dict={x: 3.0})
>>> float(out["y"]), [float(v) for v in out["both"]]
(6.0, [3.0, 6.0])

The Session is the public face of several objects, each in its own module:

* :class:`~dataflow.runtime.device_set.DeviceSet` (``device_set.py``): which devices
  exist and where each op runs (soft placement, errors for unknown devices);
* :class:`~dataflow.runtime.kernel_resolver.KernelResolver` (``kernel_resolver.py``):
  the kernel of each node, with host copies for values in a device's own memory;
* :class:`~dataflow.runtime.plan_cache.PlanCache` (``plan_cache.py``): compiled
  plans by (graph version, fetches, targets, feeds);
* :class:`~dataflow.runtime.run_modes.StepDriver` (``run_modes.py``): builds a step's
  plan and runs it on one executor or per partition (threads, processes);
* ``feeds.py``: checking ``feed_dict`` and turning raw results into fetched values.
"""
from __future__ import annotations

import contextlib
import time

from .. import errors
from ..framework.graph import (Operation, Tensor, default_session, get_default_graph,
                               get_default_session)
from .device_set import DeviceSet
from .executor import DEAD
from .feeds import convert_feeds, fetched_value
from .host_memory import retain_freed_memory
from .kernel_resolver import KernelResolver
from .loop_hook import compile_loops_mode
from .memory_arena import ArenaCache
from .memory_budget import BudgetGuard
from .plan_cache import PlanCache
from .partitioned import PartitionedPlan
from .run_modes import StepDriver, WorkerPool
from .step_stats import StepStats, step_observers
from .structure import FetchMapper
from .thread_limits import thread_limit

__all__ = ["Session", "InteractiveSession", "ConfigProto", "RunOptions", "RunMetadata",
           "get_default_session"]


class ConfigProto:
    """Session options, as TF's ``ConfigProto`` (the fields this runtime has). An
    unknown keyword raises TypeError naming it (a misspelt option is not ignored).

    ``device_count={"CPU": 2}`` creates simulated devices ``/cpu:0`` and ``/cpu:1``;
    ``device_count={"GPU": n}`` uses at most ``n`` of the machine's GPUs (``/gpu:0``
    exists when a CUDA GPU or Numba's CUDA simulator is there, see ``dataflow/kernels/cuda``);
    ``allow_soft_placement`` moves ops on unknown devices to ``/cpu:0``, and ops
    without a kernel on their device to the CPU's kernel;
    ``log_device_placement`` prints, when a step's plan is built, one line per node it
    runs to stderr: ``name: (OpType): /job:localhost/replica:0/task:0/device:CPU:0``,
    the device whose kernel runs it, as TF1 does (fed tensors and folded constants
    are not nodes of the step);
    ``inter_op_parallelism_threads`` sizes the worker pool for large kernels
    (0: two threads); ``intra_op_parallelism_threads`` bounds the threads one kernel
    may use (BLAS, OpenMP) while this session's steps run (0: the libraries' defaults;
    see ``dataflow/runtime/thread_limits.py``); ``fold_constants`` can switch
    constant folding off;
    ``fuse_elementwise`` (on by default) fuses groups of elementwise float ops into one
    generated kernel each (see ``dataflow/runtime/fusion.py``); the environment variable
    ``DATAFLOW_FUSION=0`` switches fusion off for every session;
    ``use_compiled_kernels=False`` runs the NumPy reference kernels on the CPU instead of
    the Numba-compiled ones (``DATAFLOW_NUMBA_KERNELS=0`` does so for every session).
    ``retain_host_memory`` (on by default) lets the process keep freed host memory for
    the next step instead of page-faulting it back in (process-wide glibc malloc
    settings, applied by the first Session; see ``dataflow/runtime/host_memory.py``).
    ``partition_mode``
    says how a graph placed on several devices runs its partitions: ``"threads"`` (the
    default: one executor per device, each on its own thread), ``"processes"`` (one
    worker process per device, see ``dataflow/runtime/multiprocess``) or another
    registered mode (see ``dataflow/runtime/partitioned.py``);
    ``memory_budget_bytes=N`` plans each step's memory (``df.memory.plan``, once per
    compiled step and fed shapes) and raises ResourceExhaustedError naming the largest
    buffers and the peak, before any kernel runs, when the peak exceeds ``N`` bytes
    (a step whose memory cannot be planned, such as a while loop with no known trip
    count, raises InvalidArgumentError instead of running unchecked);
    ``compile_loops`` runs each while-loop frame the loop compiler can take as one
    Numba function (``dataflow/loopc``): ``None`` (the default) is on unless
    ``DATAFLOW_COMPILE_LOOPS=0``, with a frame's first run interpreted while a thread
    compiles it; ``"eager"`` compiles before the first run; ``False`` is off;
    ``flush_denormals`` (on by default, as TF1 and XLA do) runs every kernel of a step
    with subnormal floats flushed to zero (FTZ and DAZ), on every thread that runs one;
    ``False`` keeps IEEE subnormals. The calling thread gets its own mode back when
    ``run`` returns (see ``dataflow/runtime/denormals.py``);
    ``plan_memory=True`` runs each step from its memory plan: one arena per compiled
    step and fed shapes, allocated once, every planned value a view at its offset that
    its kernel writes into (``out=`` variants; a kernel without one computes and copies,
    and is listed in ``RunMetadata.copied_kernels``), the plan's order kept, no worker
    threads and no fusion (see ``dataflow/runtime/memory_arena.py``);
    ``plan_memory="check"`` also asserts, during the run, that no value is read after
    another value overwrote its bytes (slow: for tests); ``memory_heap``, a
    :class:`dataflow.memory.Heap` shared by several sessions, implies ``plan_memory``
    and keeps their steps within its budget by moving other sessions' gradient and
    optimizer zones to host copies:

    >>> with Session(config=ConfigProto(fuse_elementwise=False)) as sess:
    ...     float(sess.run(df.constant(2.0) * 3.0))
    6.0
    >>> ConfigProto(allow_soft_placment=True)
    Traceback (most recent call last):
    TypeError: ConfigProto.__init__() got an unexpected keyword argument 'allow_soft_placment'
    """

    def __init__(self, device_count=None, allow_soft_placement=False,
                 log_device_placement=False, inter_op_parallelism_threads=0,
                 intra_op_parallelism_threads=0, fold_constants=True,
                 fuse_elementwise=True, use_compiled_kernels=True, retain_host_memory=True,
                 partition_mode="threads", memory_budget_bytes=None, compile_loops=None,
                 flush_denormals=True, plan_memory=False, memory_heap=None):
        self.device_count = dict(device_count or {})
        self.allow_soft_placement = allow_soft_placement
        self.log_device_placement = log_device_placement
        self.inter_op_parallelism_threads = _thread_count(
            "inter_op_parallelism_threads", inter_op_parallelism_threads)
        self.intra_op_parallelism_threads = _thread_count(
            "intra_op_parallelism_threads", intra_op_parallelism_threads)
        self.fold_constants = fold_constants
        self.fuse_elementwise = fuse_elementwise
        self.use_compiled_kernels = use_compiled_kernels
        self.retain_host_memory = retain_host_memory
        # How a graph placed on several devices runs its partitions: "threads" (each
        # partition's executor on its own thread) or another registered mode.
        self.partition_mode = partition_mode
        self.memory_budget_bytes = _budget(memory_budget_bytes)
        # Loop frames as compiled functions: None (default: on, tiered), True, "eager",
        # False (see dataflow/runtime/loop_hook.py).
        compile_loops_mode(compile_loops)   # a bad value fails here
        self.compile_loops = compile_loops
        # Kernels flush subnormal floats to zero (FTZ/DAZ) on every thread that runs them.
        self.flush_denormals = bool(flush_denormals)
        # Run steps from their memory plans (True, or "check" to verify the arena too);
        # a shared dataflow.memory.Heap implies it.
        if plan_memory not in (False, True, "check"):
            raise ValueError(f"ConfigProto(plan_memory={plan_memory!r}): expected False, "
                             "True or 'check'")
        self.plan_memory = plan_memory or (memory_heap is not None)
        self.memory_heap = memory_heap


def _budget(value):
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"ConfigProto(memory_budget_bytes={value!r}): expected a byte "
                         "count >= 0 or None (no budget)")
    return value


def _thread_count(name, value) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ValueError(f"ConfigProto({name}={value!r}): expected a thread count >= 0 "
                         "(0: the default)")
    return value


class RunOptions:
    """Per-run options (TF's ``RunOptions``); an unknown keyword raises TypeError.

    ``timeout_in_ms`` bounds the step (DeadlineExceededError; 0: no bound).
    ``trace_level`` takes TF1's constants (``RunOptions.NO_TRACE``, ``SOFTWARE_TRACE``,
    ``HARDWARE_TRACE``, ``FULL_TRACE``): any level above ``NO_TRACE`` traces the step
    when ``run`` gets a ``run_metadata`` (this runtime records the same at every level:
    one record per node execution, see :mod:`dataflow.runtime.step_stats`), in every
    partition mode; ``df.timeline.Timeline`` turns it into a Chrome trace.

    >>> options = RunOptions(timeout_in_ms=1000, trace_level=RunOptions.FULL_TRACE)
    """

    NO_TRACE, SOFTWARE_TRACE, HARDWARE_TRACE, FULL_TRACE = 0, 1, 2, 3

    def __init__(self, timeout_in_ms=0, trace_level=NO_TRACE):
        if trace_level not in (self.NO_TRACE, self.SOFTWARE_TRACE, self.HARDWARE_TRACE,
                               self.FULL_TRACE):
            raise ValueError(f"RunOptions(trace_level={trace_level!r}): expected one of "
                             "NO_TRACE, SOFTWARE_TRACE, HARDWARE_TRACE, FULL_TRACE (0-3)")
        self.timeout_in_ms = timeout_in_ms
        self.trace_level = trace_level


class RunMetadata:
    """Filled by ``run``: ``step_stats``, a :class:`~.step_stats.StepStats` (TF1's
    structure: ``dev_stats[i].node_stats``), has one record per node execution when the
    run was traced (``RunOptions(trace_level=RunOptions.FULL_TRACE)``) and is empty
    otherwise.

    ``compiled_frames`` lists the while-loop frames that ran as compiled functions in the
    run (``ConfigProto.compile_loops``), ``interpreted_frames`` maps each other frame
    that ran to why it ran interpreted (the op or shape that kept it out, or that its
    compiled code was not ready yet). Under ``ConfigProto(plan_memory=True)``: ``memory_plan``, the step's
    :class:`dataflow.memory.MemoryPlan`, and ``copied_kernels``, the ``"name (Type)"``
    of each node whose kernel has no ``out=`` variant (it computes, then copies into
    its block); None and ``[]`` otherwise."""

    def __init__(self):
        self.step_stats = StepStats()
        self.compiled_frames = []
        self.interpreted_frames = {}
        self.memory_plan = None
        self.copied_kernels = []


class Session:
    """Runs parts of a graph (``tf.compat.v1.Session``).

    ``devices=["/cpu:0", "/cpu:1"]`` declares the devices (an op placed elsewhere raises
    unless ``allow_soft_placement``); without it, every CPU the graph names exists. A
    graph placed on several devices runs partitioned (:func:`dataflow.partition`).
    """

    def __init__(self, target="", graph=None, config=None, devices=None):
        if target:
            raise ValueError("Distributed targets are not supported yet; use target=''")
        self._graph = graph or get_default_graph()
        self._config = config = config or ConfigProto()
        if config.retain_host_memory:
            retain_freed_memory()
        self._resources: dict = {}
        self._closed = False
        self._devices = DeviceSet(self._graph, config.device_count,
                                  config.allow_soft_placement, devices)
        self._kernels = KernelResolver(self._devices, config, self._resources)
        self._pool = WorkerPool(config.inter_op_parallelism_threads)
        self._driver = StepDriver(self, config, self._devices, self._kernels, self._pool,
                                  thread_limit(config.intra_op_parallelism_threads))
        self._plans = PlanCache(self._driver.build)   # no reference back to the Session
        self._budget = (BudgetGuard(config.memory_budget_bytes)
                        if config.memory_budget_bytes is not None else None)
        self._arena = (ArenaCache(check=config.plan_memory == "check",
                                  heap=config.memory_heap, resources=self._resources)
                       if config.plan_memory else None)

    graph = property(lambda self: self._graph)
    sess_str = property(lambda self: "")

    def list_devices(self):
        """The device names this session created."""
        return self._devices.list_devices()

    # -- context managers ------------------------------------------------------------------
    def __enter__(self):
        self._ctx = self.as_default()
        self._ctx.__enter__()
        return self

    def __exit__(self, *exc):
        self._ctx.__exit__(*exc)
        self.close()
        return False

    @contextlib.contextmanager
    def as_default(self):
        """Make this the default session (for ``Tensor.eval`` and ``Operation.run``)."""
        with default_session(self):
            yield self

    def close(self):
        """Release resources (variables, worker threads, worker processes)."""
        self._closed = True
        self._driver.close()
        self._resources.clear()
        self._plans.clear()
        if self._budget is not None:
            self._budget.clear()
        if self._arena is not None:
            self._arena.clear()
        self._pool.shutdown()

    # -- running ---------------------------------------------------------------------------
    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Run the ops needed for ``fetches`` and return their values in the same structure.

        ``fetches`` is a Tensor, Operation, name, Variable or a nested list / tuple /
        dict / namedtuple of them (an Operation fetches ``None``). ``feed_dict`` maps
        tensors (or their names) to values that replace them for this run.
        """
        mapper = FetchMapper(fetches, self._graph)
        tensors = [f for f in mapper.unique if isinstance(f, Tensor)]
        targets = [f for f in mapper.unique if isinstance(f, Operation)]
        stats = self._stats_for(options, run_metadata)
        loop_log = [] if run_metadata is not None else None
        plan, raw = self._run_step(tensors, targets, feed_dict, options, stats, loop_log,
                                   run_metadata)
        if run_metadata is not None:
            run_metadata.step_stats = stats if stats is not None else StepStats()
            _record_loops(run_metadata, plan, loop_log)
        for observe in list(step_observers()):
            observe(stats)
        devices = self._devices
        return mapper.build({t: fetched_value(t, v, devices) for t, v in zip(tensors, raw)})

    def run_tokens(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Like :meth:`run` on a flat list of tensors, but a dead fetch comes back as
        ``(None, True)`` instead of raising: returns ``[(value, is_dead), ...]``.
        Used by the differential tests against ``dataflow/spec/`` (``run_metadata``
        gets the step stats of a traced run, as in :meth:`run`)."""
        tensors = [self._graph.as_graph_element(f, allow_operation=False) for f in fetches]
        stats = self._stats_for(options, run_metadata)
        loop_log = [] if run_metadata is not None else None
        plan, raw = self._run_step(tensors, [], feed_dict, options, stats, loop_log,
                                   run_metadata)
        if run_metadata is not None:
            run_metadata.step_stats = stats if stats is not None else StepStats()
            _record_loops(run_metadata, plan, loop_log)
        devices = self._devices
        return [(None, True) if v is DEAD else (fetched_value(t, v, devices), False)
                for t, v in zip(tensors, raw)]

    @staticmethod
    def _stats_for(options, run_metadata):
        """A StepStats to fill when this run is traced (a trace level above NO_TRACE and
        somewhere to put the result, or ``dataflow profile`` observing), else None."""
        traced = step_observers() or (
            run_metadata is not None and options is not None
            and getattr(options, "trace_level", 0) > RunOptions.NO_TRACE)
        return StepStats() if traced else None

    def _run_step(self, tensors, targets, feed_dict, options, stats=None, loop_log=None,
                  run_metadata=None):
        """The one path of ``run`` and ``run_tokens``: ``(plan, raw results)`` in the
        order of ``tensors`` (fed fetches hold their fed values); ``stats``, a StepStats,
        gets the step's statistics (a traced run); ``run_metadata`` the memory plan of a
        ``plan_memory`` step."""
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        feed_tensors, feed_values = convert_feeds(self._graph, feed_dict)
        plan = self._plans.get(self._graph, tensors, targets, feed_tensors)
        if self._budget is not None:   # refuse an over-budget step before any kernel runs
            self._budget.check(plan, self._graph, tensors, targets, feed_tensors,
                               feed_values)
        timeout = getattr(options, "timeout_in_ms", 0) if options is not None else 0
        deadline = time.monotonic() + timeout / 1000.0 if timeout and timeout > 0 else None
        if self._arena is None:
            raw = self._driver.execute(plan, feed_values, deadline, stats, loop_log)
        else:
            if isinstance(plan, PartitionedPlan):
                raise errors.UnimplementedError(
                    None, None, "ConfigProto(plan_memory=True) runs single-executor steps "
                    "only; this step is partitioned across devices")
            with self._arena.run_lock:
                arena = self._arena.step_for(plan, self._graph, tensors, targets,
                                             feed_tensors, feed_values, self._kernels)
                if run_metadata is not None:
                    run_metadata.memory_plan = arena.plan
                    run_metadata.copied_kernels = list(arena.copied)
                raw = self._driver.execute(plan, feed_values, deadline, stats, loop_log,
                                           arena)
        for j, i in plan.fetch_from_feed.items():
            raw[j] = feed_values[i]
        return plan, raw


def _record_loops(run_metadata, plan, loop_log):
    """Fill ``compiled_frames`` and ``interpreted_frames`` from the plan's loop report
    and how each frame ran in this step (``loop_log``)."""
    report = getattr(plan, "loop_report", None) or {}
    frames = getattr(plan, "frames", None) or {}
    ran_compiled, why = set(), {}
    for name, reason in loop_log or ():
        if reason is None:
            ran_compiled.add(name)
        else:
            why.setdefault(name, reason)
    # Frames nested in a frame that ran compiled ran inside its function.
    nested = {name for name, reason in report.items() if reason is None
              and _inside(frames, name, ran_compiled)}
    run_metadata.compiled_frames = sorted(ran_compiled | nested)
    interpreted = {}
    for name in frames:
        if not name or name in run_metadata.compiled_frames:
            continue
        interpreted[name] = why.get(name) or report.get(name) or (
            "the loop compiler is off" if not report else
            "its enclosing frame ran interpreted")
    run_metadata.interpreted_frames = interpreted


def _inside(frames, name, outer):
    f = frames.get(name)
    f = f.parent if f is not None else None
    while f is not None and f.name:
        if f.name in outer:
            return True
        f = f.parent
    return False


class InteractiveSession(Session):
    """A Session that installs itself as the default session on construction."""

    def __init__(self, target="", graph=None, config=None):
        super().__init__(target, graph, config)
        self._ctx = self.as_default()
        self._ctx.__enter__()

    def close(self):
        if getattr(self, "_ctx", None) is not None:
            ctx, self._ctx = self._ctx, None
            ctx.__exit__(None, None, None)
        super().close()
