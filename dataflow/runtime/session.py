"""``Session``: runs fetches of a graph, keeping variables across runs (``tf.Session``).

>>> x = placeholder(float32)
>>> y = x * 2.0
>>> with Session() as sess:
...     sess.run({"y": y, "both": [x, y]}, feed_dict={x: 3.0})
{'y': 6.0, 'both': [3.0, 6.0]}
"""
from __future__ import annotations

import contextlib
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from .. import errors
from ..framework.convert import convert_value
from ..framework.graph import (Operation, Tensor, default_session, get_default_graph,
                               get_default_session)
from ..framework.graph_analysis import prune
from .devices import (available_device_count, host_copy_function, inputs_from_device_memory,
                      known_device_types, parse_device, unavailable_hint, with_host_inputs)
from .executor import DEAD, _NO_VALUE, Executor
from .fusion import fusion_enabled
from .host_memory import retain_freed_memory
from .partitioned import PartitionedPlan, build_partitioned_plan, partition_mode, run_partitioned
from .plan import build_plan
from .structure import FetchMapper

__all__ = ["Session", "InteractiveSession", "ConfigProto", "RunOptions", "RunMetadata",
           "get_default_session"]


class ConfigProto:
    """Session options, as TF's ``ConfigProto`` (the fields this runtime uses).

    ``device_count={"CPU": 2}`` creates simulated devices ``/cpu:0`` and ``/cpu:1``;
    ``device_count={"GPU": n}`` uses at most ``n`` of the machine's GPUs (``/gpu:0``
    exists when a CUDA GPU or Numba's CUDA simulator is there, see ``dataflow/kernels/cuda``);
    ``allow_soft_placement`` moves ops on unknown devices to ``/cpu:0``;
    ``inter_op_parallelism_threads`` sizes the worker pool for large kernels
    (0: two threads); ``fold_constants`` can switch constant folding off;
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
    default: one executor per device, each on its own thread) or another registered
    mode (see ``dataflow/runtime/partitioned.py``):

    >>> sess = Session(config=ConfigProto(fuse_elementwise=False))  # doctest: +SKIP
    """

    def __init__(self, device_count=None, allow_soft_placement=False,
                 log_device_placement=False, inter_op_parallelism_threads=0,
                 intra_op_parallelism_threads=0, fold_constants=True,
                 fuse_elementwise=True, use_compiled_kernels=True, retain_host_memory=True,
                 **unused):
        self.device_count = dict(device_count or {})
        self.allow_soft_placement = allow_soft_placement
        self.log_device_placement = log_device_placement
        self.inter_op_parallelism_threads = inter_op_parallelism_threads
        self.intra_op_parallelism_threads = intra_op_parallelism_threads
        self.fold_constants = fold_constants
        self.fuse_elementwise = fuse_elementwise
        self.use_compiled_kernels = use_compiled_kernels
        self.retain_host_memory = retain_host_memory
        # How a graph placed on several devices runs its partitions: "threads" (each
        # partition's executor on its own thread) or another registered mode.
        self.partition_mode = unused.pop("partition_mode", "threads")
        self.extra = unused


class RunOptions:
    """Per-run options: ``timeout_in_ms`` bounds the step (DeadlineExceededError)."""

    def __init__(self, timeout_in_ms=0, trace_level=0, **unused):
        self.timeout_in_ms = timeout_in_ms
        self.trace_level = trace_level


class RunMetadata:
    """Filled by ``run``: ``step_stats`` holds the number of nodes the plan runs."""

    def __init__(self):
        self.step_stats = {}


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
        self._config = config or ConfigProto()
        if self._config.retain_host_memory:
            retain_freed_memory()
        self._resources: dict = {}
        self._plans: dict = {}
        self._pool = None
        self._closed = False
        self._lock = threading.Lock()
        self._devices = self._make_devices() if devices is None else _parse_devices(devices)
        partition_mode(self._partition_mode)  # an unknown mode fails here, not at run time

    graph = property(lambda self: self._graph)
    sess_str = property(lambda self: "")

    def _make_devices(self):
        counts = {k.upper(): int(v) for k, v in self._config.device_count.items()}
        cpus = max(counts.get("CPU", 1), 1)
        used = {parse_device(op.device).device_index or 0 for op in self._graph._ops
                if op.device and (parse_device(op.device).device_type or "CPU") == "CPU"}
        if not counts.get("CPU"):
            cpus = max([cpus] + [i + 1 for i in used])
        devices = {("CPU", i) for i in range(cpus)}
        for kind, n in counts.items():  # GPUs and any other device type with kernels
            if kind != "CPU":
                devices |= {(kind, i) for i in range(self._device_limit(kind, n))}
        return devices

    @staticmethod
    def _device_limit(kind, requested):
        """How many ``kind`` devices exist: a device type a kernel package registered
        (GPU) has what the machine has, at most ``requested``; others are simulated."""
        if kind not in known_device_types():
            return requested
        return min(requested, available_device_count(kind))

    def _add_available_device(self, dev) -> bool:
        """Create device ``dev`` on first use when the machine has it (GPUs are counted
        only when a graph asks for one: counting imports the CUDA runtime)."""
        kind, index = dev
        if kind == "CPU" or kind not in known_device_types():
            return False
        limit = {k.upper(): int(v) for k, v in self._config.device_count.items()}.get(kind)
        if index >= self._device_limit(kind, index + 1 if limit is None else limit):
            return False
        self._devices.add(dev)
        return True

    def list_devices(self):
        """The device names this session created."""
        return sorted(f"/device:{t}:{i}" for t, i in self._devices)

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
        """Release resources (variables, worker threads)."""
        self._closed = True
        mode_state, self._mode_state = getattr(self, "_mode_state", None), None
        if mode_state is not None:
            mode_state.close()   # e.g. the processes mode's worker processes
        self._resources.clear()
        self._plans.clear()
        if self._pool is not None:
            self._pool.shutdown(wait=False)
            self._pool = None

    # -- running ---------------------------------------------------------------------------
    def run(self, fetches, feed_dict=None, options=None, run_metadata=None):
        """Run the ops needed for ``fetches`` and return their values in the same structure.

        ``fetches`` is a Tensor, Operation, name, Variable or a nested list / tuple /
        dict / namedtuple of them (an Operation fetches ``None``). ``feed_dict`` maps
        tensors (or their names) to values that replace them for this run.
        """
        if self._closed:
            raise RuntimeError("Attempted to use a closed Session.")
        mapper = FetchMapper(fetches, self._graph)
        feed_tensors, feed_values = self._convert_feeds(feed_dict)
        tensors = [f for f in mapper.unique if isinstance(f, Tensor)]
        targets = [f for f in mapper.unique if isinstance(f, Operation)]
        plan = self._plan(tensors, targets, feed_tensors)
        timeout = getattr(options, "timeout_in_ms", 0) if options is not None else 0
        deadline = time.monotonic() + timeout / 1000.0 if timeout and timeout > 0 else None
        raw = self._execute(plan, feed_values, deadline)
        if run_metadata is not None:
            run_metadata.step_stats = {"nodes": len(plan.nodes)}
        for j, i in plan.fetch_from_feed.items():
            raw[j] = feed_values[i]
        values = {}
        for j, t in enumerate(tensors):
            values[t] = self._fetched_value(t, raw[j], plan)
        return mapper.build(values)

    def run_tokens(self, fetches, feed_dict=None, options=None):
        """Like :meth:`run` on a flat list of tensors, but a dead fetch comes back as
        ``(None, True)`` instead of raising: returns ``[(value, is_dead), ...]``.
        Used by the differential tests against ``dataflow/spec/``."""
        tensors = [self._graph.as_graph_element(f, allow_operation=False) for f in fetches]
        feed_tensors, feed_values = self._convert_feeds(feed_dict)
        plan = self._plan(tensors, [], feed_tensors)
        timeout = getattr(options, "timeout_in_ms", 0) if options is not None else 0
        deadline = time.monotonic() + timeout / 1000.0 if timeout and timeout > 0 else None
        raw = self._execute(plan, feed_values, deadline)
        for j, i in plan.fetch_from_feed.items():
            raw[j] = feed_values[i]
        return [(None, True) if v is DEAD else (self._fetched_value(t, v, plan), False)
                for t, v in zip(tensors, raw)]

    def _execute(self, plan, feed_values, deadline):
        """Raw fetched values of one step: one executor, or one per partition."""
        if isinstance(plan, PartitionedPlan):
            return run_partitioned(plan, feed_values, deadline, self._partition_mode,
                                   self._worker_pool(), self._templates,
                                   runner=self._mode_runner())
        return Executor(plan, self._worker_pool(), self._templates(plan, feed_values)).run(
            deadline)

    @property
    def _partition_mode(self) -> str:
        return getattr(self._config, "partition_mode", "threads")

    def _mode_runner(self):
        """The partition mode's per-Session runner, if it has one (made once)."""
        mode = partition_mode(self._partition_mode)
        if mode.per_session is None:
            return None
        if getattr(self, "_mode_state", None) is None:
            self._mode_state = mode.per_session(self)
        return self._mode_state.run

    def _partitioned_plan(self, tensors, targets, feed_tensors):
        """A PartitionedPlan when the ops these fetches need are explicitly placed on two
        or more devices (unplaced ops then run on /cpu:0), else None: graphs on one
        device keep the single-executor path."""
        ops = prune(tensors, targets, set(feed_tensors))
        if len({self._declared_place(op) for op in ops if op.device} - {None}) < 2 and \
                not partition_mode(self._partition_mode).partition_single_device:
            return None
        return build_partitioned_plan(
            self._graph, tensors, targets, feed_tensors, self._kernel_for,
            fold_constants=self._config.fold_constants, default_device="/device:CPU:0",
            resolve=lambda op: "/device:{}:{}".format(*self._place(op)),
            fuse_elementwise=fusion_enabled(getattr(self._config, "fuse_elementwise", True)))

    def _declared_place(self, op):
        """``_place(op)``, or None for an undeclared device (the plan's kernel lookup
        then reports it, naming the op that needs the kernel)."""
        try:
            return self._place(op)
        except errors.InvalidArgumentError:
            return None

    @staticmethod
    def _templates(plan, feed_values):
        """Per-frame input templates with this run's feed values filled in."""
        if not plan.num_feeds:
            return None
        templates = {}
        for i, slots in enumerate(plan.feed_slots):
            for frame, slot in slots:
                tmpl = templates.get(frame)
                if tmpl is None:
                    tmpl = templates[frame] = frame.inputs[:]
                tmpl[slot] = feed_values[i]
        return templates

    def _fetched_value(self, t, v, plan):
        if v is DEAD:
            raise errors.InvalidArgumentError(
                None, t.op, f"Retval of fetch '{t.name}' does not have a value: the tensor "
                "is dead (it is on an untaken branch of a Switch).")
        if v is _NO_VALUE:
            raise errors.InternalError(
                None, t.op, f"The step finished without computing fetch '{t.name}': some "
                "node never received all of its inputs (malformed control flow?)")
        if type(v) is np.ndarray:
            if v.ndim == 0:
                return v[()]
            if not v.flags.writeable:  # constants and variable storage: hand out a copy
                return v.copy()
            return v
        if len(self._devices) > 1:  # a value left in a GPU's memory comes back as NumPy
            to_host = host_copy_function({kind for kind, _ in self._devices})
            if to_host is not None:
                return to_host(v)
        return v

    def _convert_feeds(self, feed_dict):
        if not feed_dict:
            return [], []
        tensors, values = [], []
        for key, value in feed_dict.items():
            try:
                t = self._graph.as_graph_element(key, allow_tensor=True, allow_operation=False)
            except (KeyError, ValueError, TypeError) as e:
                raise TypeError(f"Cannot interpret feed_dict key {key!r} as a Tensor: {e}") \
                    from None
            if not isinstance(t, Tensor):
                raise TypeError(f"Cannot feed {key!r}: it is not a Tensor")
            if t.dtype.as_numpy_dtype is None:
                raise errors.InvalidArgumentError(None, t.op, f"Cannot feed '{t.name}' of "
                                                  f"dtype {t.dtype.name}")
            if isinstance(value, Tensor):
                raise TypeError(f"The value of a feed cannot be a df.Tensor object (feeding "
                                f"'{t.name}'). Acceptable feed values include Python "
                                "scalars, strings, lists and NumPy arrays.")
            try:
                arr = convert_value(value, t.dtype)
            except (TypeError, ValueError) as e:
                raise errors.InvalidArgumentError(
                    None, t.op, f"Cannot feed value {_short(value)} to '{t.name}' of dtype "
                    f"{t.dtype.name}: {e}") from None
            if not t.shape.is_compatible_with(np.shape(arr)):
                raise errors.InvalidArgumentError(
                    None, t.op, f"Cannot feed value of shape {np.shape(arr)} for Tensor "
                    f"'{t.name}', which has shape '{t.shape}'")
            tensors.append(t)
            values.append(arr)
        return tensors, values

    def _plan(self, tensors, targets, feed_tensors):
        g = self._graph
        key = (g.version, tuple(tensors), tuple(targets), tuple(feed_tensors))
        plan = self._plans.get(key)
        if plan is None:
            with self._lock:
                if len(self._plans) > 256:
                    self._plans.clear()
                plan = self._partitioned_plan(tensors, targets, feed_tensors)
                if plan is None:
                    plan = build_plan(g, tensors, targets, feed_tensors, self._kernel_for,
                                      fold_constants=self._config.fold_constants,
                                      fuse_elementwise=fusion_enabled(
                                          getattr(self._config, "fuse_elementwise", True)))
                self._plans[key] = plan
        return plan

    def _kernel_for(self, op):
        from dataflow.kernels.registry import KernelContext, find_kernel
        device = self._place(op)
        dtype = device[0]
        # Without compiled kernels the CPU runs the NumPy reference kernels (priority 0).
        cap = None if getattr(self._config, "use_compiled_kernels", True) else 0
        factory = find_kernel(op, dtype, cap if dtype == "CPU" else None)
        if factory is None and self._config.allow_soft_placement and dtype != "CPU":
            dtype, factory = "CPU", find_kernel(op, "CPU", cap)
        if factory is None:
            raise errors.NotFoundError(
                None, op, f"No kernel registered for op type {op.type} on device type "
                f"{dtype} (dtype {op.inputs[0].dtype.name if op.inputs else '-'})")
        ctx = KernelContext(op=op, device=op.device, device_type=dtype,
                            resources=self._resources, options=self._config)
        try:
            fn = factory(ctx)
        except errors.OpError:
            raise
        except Exception as e:
            raise errors.InvalidArgumentError(None, op, f"Cannot build kernel: {e}") from e
        return self._with_host_copies(op, fn) if dtype == "CPU" else fn

    def _device_memory_kinds(self) -> frozenset:
        """The device types named in the graph whose memory is not the host's (cached
        per graph version: plan building asks once per CPU op)."""
        cached = getattr(self, "_memory_kinds", None)
        if cached is not None and cached[0] == self._graph.version:
            return cached[1]
        kinds = {parse_device(o.device).device_type for o in self._graph._ops if o.device}
        found = frozenset(k for k in kinds - {None, "CPU"} if host_copy_function([k]))
        self._memory_kinds = (self._graph.version, found)
        return found

    def _with_host_copies(self, op, fn):
        """A CPU kernel whose inputs may come from a device with memory of its own (a
        GPU) copies those inputs to the host first. Decided once per plan, so graphs
        without such devices pay nothing per node (see ``devices.py``)."""
        memory_kinds = self._device_memory_kinds()
        if not memory_kinds:
            return fn
        to_host = host_copy_function(memory_kinds)

        def in_device_memory(producer):
            place = self._declared_place(producer)
            return place is not None and place[0] in memory_kinds

        indices = inputs_from_device_memory(op, in_device_memory)
        return with_host_inputs(fn, indices, to_host) if indices else fn

    def _place(self, op):
        if not op.device:
            return ("CPU", 0)
        spec = parse_device(op.device)
        dev = (spec.device_type or "CPU", spec.device_index or 0)
        if dev in self._devices or self._add_available_device(dev):
            return dev
        if self._config.allow_soft_placement:
            return ("CPU", 0)
        hint = unavailable_hint(dev[0]) if dev[0] in known_device_types() and \
            not available_device_count(dev[0]) else ""
        raise errors.InvalidArgumentError(
            None, op, f"Cannot assign a device for operation {op.name}: {op.device} was "
            f"explicitly assigned but this session has only {self.list_devices()}"
            f"{' (' + hint + ')' if hint else ''}. Pass "
            "config=df.ConfigProto(allow_soft_placement=True) to place it on /cpu:0.")

    def _worker_pool(self):
        if self._pool is None:
            n = self._config.inter_op_parallelism_threads or 2
            self._pool = ThreadPoolExecutor(max_workers=n, thread_name_prefix="dataflow")
        return self._pool


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


def _parse_devices(names) -> set:
    """``Session(devices=["/cpu:0", "/cpu:1"])``: the declared devices as (type, index)."""
    out = set()
    for name in names:
        spec = parse_device(name)
        out.add((spec.device_type or "CPU", spec.device_index or 0))
    return out or {("CPU", 0)}


def _short(value) -> str:
    text = repr(value)
    return text if len(text) < 60 else text[:57] + "..."
