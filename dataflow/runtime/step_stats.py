"""Step statistics: what ``RunMetadata.step_stats`` holds after a traced run.

The classes mirror TF1's ``StepStats`` protos (``step_stats.proto``) as plain
dataclasses, field for field where this runtime has the data:

* :class:`StepStats` - ``dev_stats``: one :class:`DeviceStepStats` per device;
* :class:`DeviceStepStats` - ``device`` (a full name,
  ``/job:localhost/replica:0/task:0/device:CPU:0``), ``node_stats`` and
  ``thread_names`` (thread id -> name, the executor threads that ran nodes);
* :class:`NodeExecStats` - one per executed node and iteration: ``node_name``,
  ``timeline_label``, ``scheduled_micros``, ``all_start_micros``,
  ``op_start_rel_micros``, ``op_end_rel_micros``, ``all_end_rel_micros`` (and the
  same in nanoseconds, as TF 1.15 added), ``output`` (:class:`NodeOutput` with a
  :class:`TensorDescription`: dtype, shape, bytes) and ``thread_id``.

Beyond TF's proto, a :class:`NodeExecStats` says where in the control flow the node
ran and whether it computed anything: ``frame_name`` and ``iteration_id`` (the
innermost while-loop frame, ``""`` and 0 in the root frame), ``frame_path`` (every
``(frame, iteration)`` from the root down), ``is_dead`` (a dead node computes
nothing and has no outputs) and, for ``_Send``/``_Recv``, ``rendezvous_key``: the
same string on a Send and the Recv that receives its value (how the timeline draws
the transfer as an arrow).

Times are wall-clock (``time.time_ns``), so partitions in several processes of one
host line up. ``all_start`` is when the scheduler took the node; ``op_start`` /
``op_end`` bracket its kernel (NORMAL nodes); ``all_end`` is when the scheduler
moved on (outputs delivered). A ``_Recv`` whose value was not there yet lets the
scheduler run other nodes meanwhile: its ``op_start`` is when the value arrived, and
``op_start`` .. ``all_end`` is the delivery on the scheduler's thread. A kernel handed
to a worker thread is recorded on that thread, from the kernel's start to its end,
and ``scheduled_micros`` is when the scheduler handed it over.

>>> import dataflow as df
>>> x = df.placeholder(df.float32, [])
>>> y = df.while_loop(lambda v: v < 4.0, lambda v: v * 2.0, [x])
>>> meta = df.RunMetadata()
>>> with df.Session() as sess:
...     _ = sess.run(y, {x: 1.0}, run_metadata=meta,
...                  options=df.RunOptions(trace_level=df.RunOptions.FULL_TRACE))
>>> [d.device for d in meta.step_stats.dev_stats]
['/job:localhost/replica:0/task:0/device:CPU:0']
>>> sorted((n.iteration_id, n.is_dead) for n in meta.step_stats.dev_stats[0].node_stats
...        if n.node_name == "while/mul")   # the last iteration's body is dead
[(0, False), (1, False), (2, True)]
"""
from __future__ import annotations

import contextlib
from dataclasses import dataclass, field

import numpy as np

from ..framework.device_spec import parse_device

__all__ = ["DeviceStepStats", "NodeExecStats", "NodeOutput", "StepStats", "TensorDescription",
           "full_device_name", "observe_steps", "step_observers"]


@dataclass(frozen=True, slots=True)
class TensorDescription:
    """An output's dtype name, shape and size in bytes (TF's ``TensorDescription``, with
    ``allocation_description.requested_bytes`` as ``requested_bytes``)."""

    dtype: str
    shape: tuple
    requested_bytes: int


@dataclass(slots=True)
class NodeOutput:
    """Output ``slot`` of a node and its :class:`TensorDescription`."""

    slot: int
    tensor_description: TensorDescription


@dataclass(slots=True)
class NodeExecStats:
    """One execution of one node (one iteration of it, inside a loop); see the module
    docstring for the fields."""

    node_name: str
    op_type: str = ""
    timeline_label: str = ""
    scheduled_micros: int = 0
    all_start_micros: int = 0
    op_start_rel_micros: int = 0
    op_end_rel_micros: int = 0
    all_end_rel_micros: int = 0
    all_start_nanos: int = 0
    op_start_rel_nanos: int = 0
    op_end_rel_nanos: int = 0
    all_end_rel_nanos: int = 0
    output: list = field(default_factory=list)
    thread_id: int = 0
    frame_name: str = ""
    iteration_id: int = 0
    frame_path: tuple = ()
    is_dead: bool = False
    rendezvous_key: str = ""


@dataclass(slots=True)
class DeviceStepStats:
    """The node executions of one device (TF's ``DeviceStepStats``)."""

    device: str
    node_stats: list = field(default_factory=list)
    thread_names: dict = field(default_factory=dict)


@dataclass(slots=True)
class StepStats:
    """Per-device statistics of one step (TF's ``StepStats``): empty unless the run was
    traced (``RunOptions(trace_level=RunOptions.FULL_TRACE)``)."""

    dev_stats: list = field(default_factory=list)

    def merge(self, device_stats) -> None:
        """Add ``device_stats`` (DeviceStepStats, e.g. from several partitions), joining
        the entries of one device into one."""
        by_name = {d.device: d for d in self.dev_stats}
        for d in device_stats:
            mine = by_name.get(d.device)
            if mine is None:
                mine = by_name[d.device] = DeviceStepStats(d.device)
                self.dev_stats.append(mine)
            mine.node_stats.extend(d.node_stats)
            mine.thread_names.update(d.thread_names)


def full_device_name(name: str, default: str = "/device:CPU:0") -> str:
    """``name`` with every part spelt out, as TF names devices in step stats.

    >>> full_device_name("/cpu:1")
    '/job:localhost/replica:0/task:0/device:CPU:1'
    >>> full_device_name("/job:worker/task:2/device:CPU:0")
    '/job:worker/replica:0/task:2/device:CPU:0'
    """
    spec = parse_device(name or default)
    job = spec.job if spec.job is not None else "localhost"
    return (f"/job:{job}/replica:{spec.replica or 0}/task:{spec.task or 0}"
            f"/device:{spec.device_type or 'CPU'}:{spec.device_index or 0}")


# Descriptions already made, by (dtype, shape) for arrays and by type for scalars: a
# traced loop describes the same few kinds of values over and over (and reading
# dtype.name is slow). Descriptions are frozen, so records can share them.
_DESCRIPTIONS: dict = {}


def describe(value) -> TensorDescription:
    """dtype, shape and bytes of one output value (a non-array: its type name, 0 bytes)."""
    t = type(value)
    key = (value.dtype, value.shape) if t is np.ndarray else t
    d = _DESCRIPTIONS.get(key)
    if d is None:
        if len(_DESCRIPTIONS) > 4096:
            _DESCRIPTIONS.clear()
        d = _DESCRIPTIONS[key] = _describe(value)
    return d


def _describe(value) -> TensorDescription:
    if type(value) is np.ndarray or isinstance(value, np.generic):
        return TensorDescription(value.dtype.name, tuple(value.shape), int(value.nbytes))
    if isinstance(value, (bool, int, float, complex)):
        a = np.asarray(value)
        return TensorDescription(a.dtype.name, (), int(a.nbytes))
    return TensorDescription(type(value).__name__, (), 0)


# Observers of every step (``dataflow profile``): while one is installed, every
# Session.run is traced and the observer gets the step's StepStats.
_OBSERVERS: list = []


def step_observers() -> list:
    """The installed observers (what :func:`observe_steps` added)."""
    return _OBSERVERS


@contextlib.contextmanager
def observe_steps(callback):
    """Trace every ``Session.run`` while the block runs; ``callback(step_stats)`` gets the
    :class:`StepStats` of each (``dataflow profile`` uses it).

    >>> import dataflow as df
    >>> seen = []
    >>> with observe_steps(seen.append), df.Session() as sess:
    ...     _ = sess.run(df.constant(1.0) + 2.0)
    >>> [n.node_name for n in seen[0].dev_stats[0].node_stats]
    ['add']
    """
    _OBSERVERS.append(callback)
    try:
        yield
    finally:
        _OBSERVERS.remove(callback)
