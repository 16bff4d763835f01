"""Co-execution: the Python side runs the step as a skeleton while the graph runs it.

While a step co-executes, eager dispatch is replaced (:func:`~dataflow.framework.eager.
set_dispatcher`) by :meth:`CoRun.dispatch`. Each op the program asks for is matched
against the TraceGraph: from the node matched last, the successor with the same node
key. A match returns an op whose outputs are :class:`Handle` s (placeholders that hold no
value yet) and sends, on the step's rendezvous, the Case Selects of the edge just taken
and the op's fed inputs. The graph runs on its own thread meanwhile, out of order, on
the runtime's executor; reading a handle's value (``.numpy()``, ``bool``, printing, a
stateful op run in Python) receives its Output Fetching from the rendezvous.

A step that leaves the known paths (an op the graph does not have, a value read that
the graph does not send, a path that ends early) *falls back*: the graph step is
cancelled and joined, variables the graph may have written are restored from the
checkpoint taken at the start of the step, the ops matched so far are re-run eagerly
(stateful ops outside the graph, such as prints, ran once in Python and are not re-run),
the handles get their values, and the step goes on imperatively while a recorder
records the rest of its trace.
"""
from __future__ import annotations

import os
import sys
import threading
import time
import weakref

import numpy as np

from .. import dtypes as _dtypes
from .. import errors
from ..framework import eager as _eager
from ..framework.eager import EagerOp, EagerTensor
from ..runtime.executor import Executor
from ..runtime.rendezvous import LocalRendezvous
from .location import Locator
from .trace import (TraceRecorder, TracedTensor, feed_slice_bounds, freeze_attrs, is_recorded,
                    variable_name)
from .trace_graph import END, START, node_key

__all__ = ["CoRun", "Handle", "GraphWorker"]

_SLOT = EagerTensor.__dict__["_value"]
_NO_INPUTS = ()
_FED = ("f",)
INLINE_DEADLINE_S = 120.0
# DATAFLOW_TRACER_DEBUG=1 prints why each fallback happened (also counted, always, in
# ``f.stats["fallback_reasons"]``).
_DEBUG = os.environ.get("DATAFLOW_TRACER_DEBUG", "") not in ("", "0")
_RESOURCE = _dtypes.resource
# The graph side starts at the Python side's first Output Fetching, on a thread of its
# own, and runs concurrently with the rest of the Python side from then on; a step with
# no Output Fetching before its end runs its graph when the Python side has sent all
# its feeds, on the Python side's thread (it would only wait otherwise). Under the
# interpreter lock the two sides never run Python code at once, so starting earlier
# only adds lock hand-overs (MLP step: 0.93 ms started at the step's start).


class Handle(TracedTensor):
    """The Python side's tensor for an output of a matched op: the value arrives from
    the graph (Output Fetching) the first time Python reads it, and stays.

    It is an EagerTensor to every op and to the program: dtype and shape are the
    traced ones; reads after the step see the materialised value.
    """

    __slots__ = ("_run", "_node", "_opref")

    def __init__(self, run, node, k, dtype, shape, op):
        self._dtype = dtype
        self._shape = shape
        self._op = None
        self._value_index = k
        self._consumers = ()
        self._run = run
        self._node = node
        # The op holds its outputs; the handle holds the op weakly (no reference cycle:
        # a handle nobody uses is freed at once, and the handles alive when the step
        # returns are exactly those the program still references).
        self._opref = weakref.ref(op)

    @property
    def op(self):
        op = self._op
        if op is None:
            op = self._opref()
            if op is None:   # gone: a stand-in with the node's type and attributes
                node = self._run.tg.nodes[self._node]
                op = self._op = EagerOp(_eager._eager_graph(), node.op_type, node.name,
                                        (), node.attrs)
                op._outputs = _WeakOutputs([weakref.ref(self)])
        return op

    @property
    def _value(self):
        try:
            return _SLOT.__get__(self, Handle)
        except AttributeError:
            pass
        value = self._run.fetch(self)
        _SLOT.__set__(self, value)
        return value

    @_value.setter
    def _value(self, value):
        _SLOT.__set__(self, value)

    def has_value(self) -> bool:
        try:
            _SLOT.__get__(self, Handle)
            return True
        except AttributeError:
            return False

    def __len__(self):
        if self._shape is None:        # a shape that depends on values: fetch
            return super().__len__()
        if self._shape.ndims == 0:
            raise TypeError("len() of a 0-d tensor (a scalar) is not defined")
        return self._shape.as_list()[0]


class GraphWorker:
    """Starts the graph side of each co-executed step on a thread of its own.

    A thread started per step measured faster than one long-lived worker waiting on a
    queue (digits MLP step, 2 loaded cores: about 1.0 ms against 3 ms per step): starting
    a thread hands the interpreter lock over at once, and the graph runs up to its first
    pending feed while the Python side is still starting; a waiting worker gets the lock
    only when the Python side next blocks or its switch interval expires.
    """

    def submit(self, job):
        threading.Thread(target=job, daemon=True, name="dataflow-function-graph").start()

    def close(self):
        pass


class _WeakOutputs(list):
    """The outputs of a handle's stand-in op, held weakly (the handle holds the stand-in:
    no reference cycle)."""

    __slots__ = ()

    def __getitem__(self, i):
        got = list.__getitem__(self, i)
        return [r() for r in got] if isinstance(i, slice) else got()

    def __iter__(self):
        for r in list.__iter__(self):
            yield r()


class CoRun:
    """One co-executed step of ``fn_state`` (a :class:`~.function.Function`'s state) on
    ``step`` (its :class:`~.generate.StepGraph`)."""

    def __init__(self, tg, step, resources, worker, ready_order=None):
        self.tg = tg
        self.step = step
        self.locator = Locator()
        self.rv = LocalRendezvous()
        self.cur = START
        self.matched: list = []      # (node id, {input slot: fed tensor})
        self.handles: dict = {}      # (node id, k) -> weakref to its Handle
        self.read: dict = {}         # (node id, k) read by Python -> ops matched then
        self.recorder = None         # after a fallback: records the rest of the step
        self.owner = threading.get_ident()
        self.graph_error = None
        self.cells = {name: resources.get(name) for name in step.written}
        self.checkpoint = {name: c.value for name, c in self.cells.items() if c is not None}
        self._executor = Executor(step.plan, None, None, self.rv, ready_order)
        self._graph_done = threading.Event()
        self._worker = worker
        self._started = False
        self.reason = None           # why the step fell back (a short text), if it did

    def _start(self, inline=False):
        """Start the graph side (once). ``inline``: the Python side has sent everything
        and only waits for the graph, so the graph runs on this thread (no thread to
        start and no lock to hand over)."""
        if not self._started:
            self._started = True
            if inline:
                # Everything is sent: the graph never waits for the Python side now. A
                # wait would be a bug; the deadline turns it into a fallback, not a hang.
                self._run_graph(deadline=time.monotonic() + INLINE_DEADLINE_S)
            else:
                self._worker.submit(self._run_graph)

    # -- the graph side ---------------------------------------------------------------------
    def _run_graph(self, deadline=None):
        try:
            self._executor.run(deadline)
        except BaseException as exc:  # noqa: BLE001 - handed to the Python side
            self.graph_error = exc
            self.rv.cancel(exc)
        finally:
            self._graph_done.set()

    @property
    def fell_back(self) -> bool:
        return self.recorder is not None

    # -- the Python side: dispatch ----------------------------------------------------------
    def dispatch(self, graph, op_type, inputs, attrs=None, name=None, output_specs=None):
        """Eager dispatch while the step co-executes (``eager.execute``'s signature)."""
        if op_type == "StridedSlice" and threading.get_ident() == self.owner:
            inputs, attrs = feed_slice_bounds(op_type, inputs, attrs)
        if self.recorder is not None or threading.get_ident() != self.owner:
            return _eager.execute_now(graph, op_type, inputs, attrs, name, output_specs)
        if not is_recorded(op_type):
            # Printing, random numbers, I/O: run now in Python on fetched inputs.
            return _eager.execute_now(graph, op_type, inputs, attrs, name, output_specs)
        location = self.locator.here()
        wiring, feed_specs, fed = [], [], {}
        for slot, t in enumerate(inputs):
            if type(t) is Handle and t._run is self:
                wiring.append(("n", t._node, t._value_index))
                feed_specs.append(None)
                continue
            if not isinstance(t, EagerTensor):
                _eager._check_input(op_type, t)
            if t._dtype is _RESOURCE:
                vname = variable_name(t)
                if vname is not None:
                    wiring.append(("v", vname))
                    feed_specs.append(None)
                    continue
            wiring.append(_FED)
            value = t._value
            feed_specs.append((t._dtype, value.shape if type(value) is np.ndarray
                               else np.shape(value)))
            fed[slot] = t
        attrs = attrs or {}
        cur = self.cur
        succ = self.tg.succ[cur]
        nid = None
        if succ:
            key = node_key(op_type, freeze_attrs(attrs), location, tuple(wiring),
                           tuple(feed_specs))
            nid = succ.get(key)
        if nid is None:
            self._fallback(f"new op {op_type} after node {cur}")
            # The new op runs now, recorded at the location just computed.
            self.recorder.replaying(location)
            try:
                return _eager.execute_now(graph, op_type, inputs, attrs, name, output_specs)
            finally:
                self.recorder.replaying(None)
        self._take_edge(cur, nid)
        rv = self.step.feed_keys
        send = self.rv.send
        for slot, t in fed.items():
            send(rv[(nid, slot)], t._value, False)
        self.matched.append((nid, fed))
        node = self.tg.nodes[nid]
        op = EagerOp(graph, op_type, name or op_type, inputs, attrs)
        handles = self.handles
        outs = []
        dynamic = self.step.dynamic
        for k, (dt, shape) in enumerate(node.out_specs):
            h = Handle(self, nid, k, dt, None if (nid, k) in dynamic else shape, op)
            handles[(nid, k)] = weakref.ref(h)
            outs.append(h)
        op._outputs = outs
        if _eager.RECORDERS:
            for record in _eager.RECORDERS:
                record(op)
        else:
            op._inputs = _NO_INPUTS
        return op

    def _take_edge(self, u, v):
        for key, case in self.step.edge_selects.get((u, v), ()):
            self.rv.send(key, case, False)
        self.cur = v

    # -- reading values ---------------------------------------------------------------------
    def fetch(self, handle):
        """The value of ``handle`` (Output Fetching); a fallback when the graph does not
        send it or the graph step failed."""
        k = (handle._node, handle._value_index)
        if self.recorder is None:
            key = self.step.fetch_keys.get(k)
            if key is not None:
                self._start()
                try:
                    value, dead = self.rv.recv(key)
                except Exception as exc:  # noqa: BLE001 - the graph step failed: fall
                    value, dead = exc, True   # back, the eager re-run raises a real error
                if not dead:
                    self.read.setdefault(k, len(self.matched))
                    return value
                why = (f"graph failed: {type(value).__name__}" if value is not None
                       else "fetch dead")
            else:
                why = f"read of unfetched {self.tg.nodes[handle._node].op_type}"
            self.read.setdefault(k, len(self.matched))
            self._fallback(why)
        if handle.has_value():
            return _SLOT.__get__(handle, Handle)
        raise errors.InternalError(None, None, f"df.function: the value of node "
                                   f"{handle._node} output {handle._value_index} was lost "
                                   "in a fallback")

    # -- the end of the step ----------------------------------------------------------------
    def finish(self):
        """After the step function returned: check the path is complete, materialise the
        handles still referenced, wait for the graph. Falls back when any fails."""
        if self.recorder is not None:
            return
        if self.cur not in self.tg.to_end:
            self._fallback("path ends early")
            return
        self._take_edge(self.cur, END)
        self._start(inline=True)
        for k, ref in list(self.handles.items()):
            h = ref()
            if h is not None and not h.has_value():
                h._value           # noqa: B018 - receives it (or falls back)
                if self.recorder is not None:
                    return
        self._graph_done.wait()
        if self.graph_error is not None:
            self._fallback(f"graph failed: {type(self.graph_error).__name__}")

    def abort(self):
        """The step function raised while co-executing: bring the state to what eager
        execution would have left (the matched ops re-run), then the error propagates."""
        if self.recorder is None:
            self._fallback("the step raised")

    # -- fallback ---------------------------------------------------------------------------
    def _fallback(self, reason):
        self.reason = reason
        if _DEBUG:
            print(f"df.function fallback: {reason}", file=sys.stderr)
        self.rv.cancel(errors.CancelledError(None, None, "df.function: the step left the "
                                             "graph (fallback)"))
        self._executor.deadline = 0.0
        if self._started:
            self._graph_done.wait()
        for name, cell in self.cells.items():
            if cell is not None and name in self.checkpoint:
                cell.value = self.checkpoint[name]
        recorder = self.recorder = TraceRecorder(self.locator)
        saved = list(_eager.RECORDERS)
        _eager.RECORDERS[:] = [recorder.record]   # tapes saw these ops already
        try:
            self._replay(recorder)
        finally:
            _eager.RECORDERS[:] = saved + [recorder.record]

    def _replay(self, recorder):
        tg = self.tg
        values: dict = {}
        eager_graph = _eager._eager_graph()
        for i, (nid, fed) in enumerate(self.matched):
            node = tg.nodes[nid]
            inputs = []
            for slot, src in enumerate(node.inputs):
                if src[0] == "n":
                    inputs.append(values[(src[1], src[2])])
                elif src[0] == "v":
                    inputs.append(tg.variables[src[1]])
                else:
                    inputs.append(fed[slot])
            handles = []
            for k in range(len(node.out_specs)):
                ref = self.handles.get((nid, k))
                handles.append(ref() if ref is not None else None)
            recorder.replaying(node.location)
            try:
                op = _eager.execute_now(eager_graph, node.op_type, inputs, dict(node.attrs),
                                        node.name)
            finally:
                recorder.replaying(None)
            for k, out in enumerate(op._outputs):
                values[(nid, k)] = out
                h = handles[k]
                if h is not None:
                    _SLOT.__set__(h, out._value)
            recorder.alias(op, handles)
            for k in range(len(node.out_specs)):
                position = self.read.get((nid, k))
                if position is not None:
                    recorder.note_fetched(i, k, position)

