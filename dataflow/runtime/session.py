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
from ..framework.graph import Operation, Tensor, get_default_graph
from .devices import parse_device
from .executor import DEAD, _NO_VALUE, Executor
from .plan import build_plan
from .structure import FetchMapper

__all__ = ["Session", "InteractiveSession", "ConfigProto", "RunOptions", "RunMetadata",
           "get_default_session"]


class ConfigProto:
    """Session options, as TF's ``ConfigProto`` (the fields this runtime uses).

    ``device_count={"CPU": 2}`` creates simulated devices ``/cpu:0`` and ``/cpu:1``;
    ``allow_soft_placement`` moves ops on unknown devices to ``/cpu:0``;
    ``inter_op_parallelism_threads`` sizes the worker pool for large kernels
    (0: two threads); ``fold_constants`` can switch constant folding off.
    """

    def __init__(self, device_count=None, allow_soft_placement=False,
                 log_device_placement=False, inter_op_parallelism_threads=0,
                 intra_op_parallelism_threads=0, fold_constants=True, **unused):
        self.device_count = dict(device_count or {})
        self.allow_soft_placement = allow_soft_placement
        self.log_device_placement = log_device_placement
        self.inter_op_parallelism_threads = inter_op_parallelism_threads
        self.intra_op_parallelism_threads = intra_op_parallelism_threads
        self.fold_constants = fold_constants
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


_default_session = threading.local()


def get_default_session():
    """The innermost ``sess.as_default()`` session of this thread, or None."""
    stack = getattr(_default_session, "stack", None)
    return stack[-1] if stack else None


class Session:
    """Runs parts of a graph (``tf.compat.v1.Session``)."""

    def __init__(self, target="", graph=None, config=None):
        if target:
            raise ValueError("Distributed targets are not supported yet; use target=''")
        self._graph = graph or get_default_graph()
        self._config = config or ConfigProto()
        self._resources: dict = {}
        self._plans: dict = {}
        self._pool = None
        self._closed = False
        self._lock = threading.Lock()
        self._devices = self._make_devices()

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
                devices |= {(kind, i) for i in range(n)}
        return devices

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
        stack = getattr(_default_session, "stack", None)
        if stack is None:
            stack = _default_session.stack = []
        stack.append(self)
        try:
            yield self
        finally:
            stack.remove(self)

    def close(self):
        """Release resources (variables, worker threads)."""
        self._closed = True
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
        executor = Executor(plan, self._worker_pool(), self._templates(plan, feed_values))
        raw = executor.run(deadline)
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
        Used by the differential tests against ``spec/``."""
        tensors = [self._graph.as_graph_element(f, allow_operation=False) for f in fetches]
        feed_tensors, feed_values = self._convert_feeds(feed_dict)
        plan = self._plan(tensors, [], feed_tensors)
        timeout = getattr(options, "timeout_in_ms", 0) if options is not None else 0
        deadline = time.monotonic() + timeout / 1000.0 if timeout and timeout > 0 else None
        raw = Executor(plan, self._worker_pool(), self._templates(plan, feed_values)).run(deadline)
        for j, i in plan.fetch_from_feed.items():
            raw[j] = feed_values[i]
        return [(None, True) if v is DEAD else (self._fetched_value(t, v, plan), False)
                for t, v in zip(tensors, raw)]

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
                plan = build_plan(g, tensors, targets, feed_tensors, self._kernel_for,
                                  fold_constants=self._config.fold_constants)
                self._plans[key] = plan
        return plan

    def _kernel_for(self, op):
        from kernels.registry import KernelContext, find_kernel
        device = self._place(op)
        dtype = device[0]
        factory = find_kernel(op, dtype)
        if factory is None and self._config.allow_soft_placement and dtype != "CPU":
            dtype, factory = "CPU", find_kernel(op, "CPU")
        if factory is None:
            raise errors.NotFoundError(
                None, op, f"No kernel registered for op type {op.type} on device type "
                f"{dtype} (dtype {op.inputs[0].dtype.name if op.inputs else '-'})")
        ctx = KernelContext(op=op, device=op.device, device_type=dtype,
                            resources=self._resources, options=self._config)
        try:
            return factory(ctx)
        except errors.OpError:
            raise
        except Exception as e:
            raise errors.InvalidArgumentError(None, op, f"Cannot build kernel: {e}") from e

    def _place(self, op):
        if not op.device:
            return ("CPU", 0)
        spec = parse_device(op.device)
        dev = (spec.device_type or "CPU", spec.device_index or 0)
        if dev in self._devices:
            return dev
        if self._config.allow_soft_placement:
            return ("CPU", 0)
        raise errors.InvalidArgumentError(
            None, op, f"Cannot assign a device for operation {op.name}: {op.device} was "
            f"explicitly assigned but this session has only {self.list_devices()}. Pass "
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


def _short(value) -> str:
    text = repr(value)
    return text if len(text) < 60 else text[:57] + "..."
