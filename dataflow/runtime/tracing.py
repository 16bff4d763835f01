"""Traced execution: the executor variant that records one NodeExecStats per node run.

Tracing must cost nothing when it is off, so :meth:`Executor._loop` has no tracing
code at all. A traced run uses :class:`TracedExecutor`, a subclass that observes the
unchanged scheduler from outside:

* its ready list is a :class:`_TracingReady` list whose ``pop`` (the scheduler takes
  the next node) closes the previous node's record and opens the next one (start
  time, frame and iteration, deadness, the outputs of control-flow roles, which are
  their inputs);
* each NORMAL node's kernel is wrapped (in a copy of the plan's node table made for
  this run) to time the kernel and describe its outputs;
* ``_recv``, ``_launch`` and the completion queue are wrapped so that a Recv waiting
  for its value, or a kernel on a worker thread, is recorded until it completes;
* the node table copy turns the TO_EXIT and TO_NEXT shortcuts (an Exit or a
  NextIteration decided at delivery, without being scheduled) into plain TO_NODE
  edges, so every Exit and NextIteration is scheduled and recorded too. Both paths
  apply the same rules (see the executor's block comments), so results agree.

A :class:`StepStatsCollector` belongs to one executor run (one partition of a step)
and turns its records into :class:`~.step_stats.DeviceStepStats`; the drivers merge
the partitions' lists into the step's :class:`~.step_stats.StepStats` (the
processes mode sends each worker's list back with its results). A partition mode
traces a partition by calling :func:`make_executor` with a collector and returning
``collector.device_stats()`` with the partition's results.

>>> import dataflow as df
>>> from dataflow.runtime.plan import build_plan
>>> from dataflow.runtime.kernel_resolver import KernelResolver
>>> from dataflow.runtime.device_set import DeviceSet
>>> with df.Graph().as_default() as g:
...     y = df.constant(2.0) * 3.0
>>> plan = build_plan(g, [y], [], [], KernelResolver(DeviceSet(g, {}, False),
...                   df.ConfigProto(), {}).kernel_for)
>>> collector = StepStatsCollector(plan)
>>> [float(v) for v in make_executor(plan, collector=collector).run()]
[6.0]
>>> [(n.node_name, n.output[0].tensor_description.shape)
...  for d in collector.device_stats() for n in d.node_stats]
[('mul', ())]
"""
from __future__ import annotations

import queue
import threading
from time import time_ns

import numpy as np

from .executor import _PENDING, DEAD, Executor, frame_path
from .plan import (CONTROL_TRIGGER, ENTER, EXIT, MERGE, NEXT_ITERATION, NORMAL, RECV, SEND,
                   SWITCH, TO_EXIT, TO_NEXT, TO_NODE)
from .step_stats import DeviceStepStats, NodeExecStats, NodeOutput, describe, full_device_name

__all__ = ["StepStatsCollector", "TracedExecutor", "make_executor"]


def make_executor(plan, pool=None, templates=None, rendezvous=None, collector=None):
    """An :class:`~.executor.Executor` for ``plan``, or a :class:`TracedExecutor` that
    records into ``collector`` when one is given."""
    if collector is None:
        return Executor(plan, pool, templates, rendezvous)
    return TracedExecutor(plan, pool, templates, rendezvous, collector)


class _Record:
    """One node execution while the step runs (times in ns from ``time_ns``)."""

    __slots__ = ("gid", "path", "start", "end", "op_start", "op_end", "scheduled", "thread",
                 "dead", "outputs")

    def __init__(self, gid, path, start, thread, dead):
        self.gid, self.path, self.start, self.thread, self.dead = gid, path, start, thread, dead
        self.end = self.op_start = self.op_end = self.scheduled = None
        self.outputs = ()


class StepStatsCollector:
    """Records the node executions of one executor run of ``plan`` (one partition).

    ``device`` names the partition's device; without it (a single-plan run) each node
    is filed under its op's device (``/device:CPU:0`` when it has none).
    """

    def __init__(self, plan, device: str = ""):
        self.plan = plan
        self.device = device
        self.records: list = []
        self.thread_names: dict = {}
        self._labels: dict = {}   # (gid, dead) -> timeline label

    def device_stats(self) -> list:
        """The records as one :class:`~.step_stats.DeviceStepStats` per device (picklable:
        the processes mode sends them back with the results)."""
        by_device: dict = {}
        devices: dict = {}
        plan = self.plan
        for rec in self.records:
            op = plan.ops[rec.gid]
            where = self.device or op.device
            name = devices.get(where)
            if name is None:
                name = devices[where] = full_device_name(where)
            stats = by_device.get(name)
            if stats is None:
                stats = by_device[name] = DeviceStepStats(name)
            stats.node_stats.append(self._node_stats(rec, op))
            stats.thread_names.setdefault(rec.thread, self.thread_names.get(rec.thread, ""))
        return list(by_device.values())

    def _node_stats(self, rec, op) -> NodeExecStats:
        start = rec.start
        end = rec.end if rec.end is not None else start
        op_start = rec.op_start if rec.op_start is not None else start
        op_end = rec.op_end if rec.op_end is not None else end
        frame, iteration = rec.path[-1] if rec.path else ("", 0)
        key = ""
        role = self.plan.nodes[rec.gid].role
        if role in (SEND, RECV):
            src, dst, tensor = self.plan.transfers.get(rec.gid, ("", "", op.name))
            key = f"{src};{dst};{tensor};{_path_text(rec.path)}"
        outputs = [NodeOutput(slot, d) for slot, d in rec.outputs]
        scheduled = rec.scheduled if rec.scheduled is not None else start
        label = self._labels.get((rec.gid, rec.dead))
        if label is None:
            label = self._labels[(rec.gid, rec.dead)] = _label(op, role, rec.dead)
        return NodeExecStats(
            node_name=op.name, op_type=op.type, timeline_label=label,
            scheduled_micros=scheduled // 1000, all_start_micros=start // 1000,
            op_start_rel_micros=(op_start - start) // 1000,
            op_end_rel_micros=(op_end - start) // 1000,
            all_end_rel_micros=(end - start) // 1000, all_start_nanos=start,
            op_start_rel_nanos=op_start - start, op_end_rel_nanos=op_end - start,
            all_end_rel_nanos=end - start, output=outputs, thread_id=rec.thread,
            frame_name=frame, iteration_id=iteration, frame_path=rec.path, is_dead=rec.dead,
            rendezvous_key=key)


def _path_text(path) -> str:
    return "/".join(f"{f}:{i}" for f, i in path)


def _label(op, role, dead) -> str:
    """TF's timeline label: ``name = Op(inputs)``; a transfer names its tensor and peer."""
    if role == SEND:
        body = f"{op.get_attr('tensor_name')} @{op.get_attr('recv_device')}"
    elif role == RECV:
        body = f"{op.get_attr('tensor_name')} @{op.get_attr('send_device')}"
    else:
        body = ", ".join(t.name for t in op.inputs)
    return f"{op.name} = {op.type}({body}){' [dead]' if dead else ''}"


class _TracingReady(list):
    """The traced executor's ready list: taking a node (``pop``) is where a record starts."""

    __slots__ = ("started",)

    def pop(self):
        item = list.pop(self)
        self.started(item)
        return item


class _TracingQueue:
    """A completion queue wrapper: a Recv's value or a worker's result arriving ends the
    waiting node's record."""

    def __init__(self, inner, completed):
        self._inner = inner
        self._completed = completed
        self.put = inner.put

    def get(self, timeout=None):
        item = self._inner.get(timeout=timeout)
        self._completed(item)
        return item


class TracedExecutor(Executor):
    """An :class:`~.executor.Executor` that records every node it runs into a
    :class:`StepStatsCollector` (see the module docstring for how)."""

    def __init__(self, plan, pool=None, templates=None, rendezvous=None, collector=None):
        super().__init__(plan, pool, templates, rendezvous)
        self.collector = collector if collector is not None else StepStatsCollector(plan)
        self._current = None      # the record of the node the scheduler runs now
        self._waiting = {}        # (gid, iteration) -> record of a Recv or worker kernel
        self._thread = None
        self._raw_fns = [n.fn for n in plan.nodes]
        self.nodes = [n._replace(edges=tuple(_scheduled(e) for e in n.edges))
                      for n in plan.nodes]
        self.node_tuples = [self._traced_tuple(gid, t) for gid, t in enumerate(plan.node_tuples)]
        self.ready = _TracingReady()
        self.ready.started = self._started

    def _traced_tuple(self, gid, t):
        role, local, base, end, fn, edges, nout, clear = t
        if role == NORMAL and fn is not None:
            fn = self._timed(fn, nout)
        return (role, local, base, end, fn, tuple(tuple(_scheduled(e)) for e in edges), nout,
                clear)

    def _timed(self, fn, nout):
        def traced_kernel(*args):
            start = time_ns()
            out = fn(*args)
            rec = self._current
            rec.op_start, rec.op_end = start, time_ns()
            rec.outputs = _outputs(out, nout)
            return out
        return traced_kernel

    # -- the run -----------------------------------------------------------------------------
    def run(self, deadline=None):
        self._thread = threading.get_ident()
        self.collector.thread_names[self._thread] = threading.current_thread().name
        self.done_queue = _TracingQueue(self.done_queue if self.done_queue is not None
                                        else queue.SimpleQueue(), self._completed)
        try:
            return super().run(deadline)
        finally:
            self._close_current(time_ns())

    def _started(self, item):
        """The scheduler took ``item`` = (gid, iteration): close the previous record and
        open this one."""
        now = time_ns()
        self._close_current(now)
        gid, it = item
        role, local, base, _end, _fn, _edges, nout, _clear = self.node_tuples[gid]
        inputs = it.inputs
        if role == MERGE:
            dead = inputs[base] is DEAD
        elif role == CONTROL_TRIGGER:
            dead = False
        else:
            dead = it.dead[local] > 0
        rec = _Record(gid, frame_path(it), now, self._thread, dead)
        if not dead and role != NORMAL:
            rec.outputs = _role_outputs(role, inputs, base, nout)
        self.collector.records.append(rec)
        self._current = rec

    def _close_current(self, now):
        rec = self._current
        if rec is not None:
            rec.end = now
            self._current = None

    def _detach(self, gid, it):
        """The current node completes later (a Recv waiting, a kernel on a worker)."""
        rec = self._current
        self._current = None
        self._waiting[(gid, it)] = rec
        return rec

    def _completed(self, item):
        """A result came out of the completion queue (the scheduler now delivers it)."""
        gid, it, out, exc = item
        rec = self._waiting.pop((gid, it), None)
        if rec is None:
            return
        if self.nodes[gid].role != RECV:   # a worker's kernel: it ran from op_start to op_end
            rec.end = rec.op_end if rec.op_end is not None else time_ns()
            return
        # A Recv that waited: op_start is when its value arrived; the scheduler delivers
        # it now, and the record ends when the scheduler takes its next node.
        rec.op_start = time_ns()
        self._current = rec
        if exc is None:
            if out is DEAD:
                rec.dead = True
            else:
                rec.outputs = ((0, describe(out)),)

    # -- the executor's hooks ----------------------------------------------------------------
    def _recv(self, gid, it):
        out = super()._recv(gid, it)
        if out is _PENDING:
            self._detach(gid, it)
        elif out is DEAD:
            self._current.dead = True
        else:
            self._current.outputs = ((0, describe(out)),)
        return out

    def _launch(self, gid, it, fn, args):
        rec = self._detach(gid, it)
        rec.scheduled = rec.start
        raw, nout, names = self._raw_fns[gid], self.nodes[gid].nout, self.collector.thread_names

        def on_worker(*a):
            rec.start = rec.op_start = time_ns()
            rec.thread = me = threading.get_ident()
            if me not in names:
                names[me] = threading.current_thread().name
            out = raw(*a)
            rec.op_end = time_ns()
            rec.outputs = _outputs(out, nout)
            return out

        super()._launch(gid, it, on_worker, args)

    def _wait_for_worker(self, deadline):
        self._close_current(time_ns())
        super()._wait_for_worker(deadline)


def _scheduled(edge):
    """``edge`` with the TO_EXIT / TO_NEXT shortcut replaced by a scheduled TO_NODE edge
    (their destination's pending count is 1: one data input, no control input)."""
    if edge[4] in (TO_EXIT, TO_NEXT):
        return edge._replace(mode=TO_NODE) if hasattr(edge, "_replace") else \
            (edge[0], edge[1], edge[2], edge[3], TO_NODE)
    return edge


def _outputs(out, nout) -> tuple:
    if nout == 1:
        return ((0, describe(out)),)
    if not nout or out is None:
        return ()
    return tuple((k, describe(v)) for k, v in enumerate(out))


def _role_outputs(role, inputs, base, nout) -> tuple:
    """What a live control-flow node outputs: its data input (a Switch on the output its
    predicate picks; a Merge also its value_index)."""
    if role == SWITCH:
        return ((1 if inputs[base + 1] else 0, describe(inputs[base])),)
    if role == MERGE:
        value = ((0, describe(inputs[base])),)
        return value + ((1, describe(np.int32(inputs[base + 1]))),) if nout == 2 else value
    if role in (ENTER, EXIT, NEXT_ITERATION):
        return ((0, describe(inputs[base])),)
    return ()
