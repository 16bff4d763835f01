"""``df.function``: run one step of an imperative program on a generated graph (Terra).

The first calls run imperatively and record traces; then each call co-executes (see
:mod:`.coexec`): the Python side runs the step as a skeleton against the generated graph
while the graph computes it; a step that takes a path the graph does not have falls back
to imperative execution, its trace is merged and the graph regenerated.
"""
from __future__ import annotations

import collections
import functools
import gc
import random
import sys
import threading

from ..autodiff import tape as _tape
from ..framework import eager as _eager
from ..framework import graph as _graph
from ..train import optimizer as _optimizer
from .coexec import CoRun
from .generate import generate
from .location import Locator
from .trace import TraceRecorder, detach, feed_slice_bounds
from .trace_graph import CycleError, TraceGraph

__all__ = ["function", "Function"]

# Tracing calls before the first graph is generated: the first step usually creates
# variables (optimizer slots), the second shows the steady path (the seed's 2 traces).
TRACING_CALLS = 2


class _InStep(threading.local):
    active = False


_IN_STEP = _InStep()


class Function:
    """A step function run by the tracer; see :func:`function`."""

    def __init__(self, fn, mode="graph", ready_order_seed=None):
        if mode not in ("graph", "eager"):
            raise ValueError(f"df.function: mode must be 'graph' or 'eager', got {mode!r}")
        self._fn = fn
        self._mode = mode
        self._ready_order_seed = ready_order_seed
        self._ready_rng = None if ready_order_seed is None else random.Random(ready_order_seed)
        self._tg = TraceGraph()
        self._step = None
        self._tracing_calls = 0
        self._unrepeatable = 0         # traces kept out of the graph (see _merge)
        self._eager_only = None        # why the graph was given up, if it was
        self._attr_name = None
        self._gradient_memo = {}       # CoRun.gradient's memo, valid for this TraceGraph
        self.stats = {"traces": 0, "fallbacks": 0, "graph_steps": 0, "eager_steps": 0}
        # Why each fallback happened (a diagnostic; DATAFLOW_TRACER_DEBUG=1 prints them).
        self.fallback_reasons = collections.Counter()
        functools.update_wrapper(self, fn)

    # -- bound methods ------------------------------------------------------------------------
    def __set_name__(self, owner, name):
        self._attr_name = name

    def __get__(self, obj, objtype=None):
        if obj is None:
            return self
        # One Function (traces, graph, stats) per instance: its variables are its own.
        bound = Function(self._fn.__get__(obj, objtype), self._mode, self._ready_order_seed)
        name = self._attr_name or self._fn.__name__
        try:
            obj.__dict__[name] = bound
        except (AttributeError, TypeError):
            pass
        return bound

    @property
    def graph(self):
        """The generated graph (a ``df.Graph``), or None before the first is generated."""
        return None if self._step is None else self._step.graph

    @property
    def python_function(self):
        return self._fn

    # -- calling ------------------------------------------------------------------------------
    def __call__(self, *args, **kwargs):
        eager_graph = _eager._eager_graph()
        if _graph.get_default_graph() is eager_graph:
            # Already in eager mode (the usual case: a training loop runs eagerly):
            # entering it again would change nothing and costs two context managers.
            return self._run(args, kwargs)
        with eager_graph.as_default():
            return self._run(args, kwargs)

    def _run(self, args, kwargs):
        if self._mode == "eager" or self._eager_only is not None or _IN_STEP.active:
            # A df.function called inside another one's step is part of that step.
            result = self._fn(*args, **kwargs)
            self.stats["eager_steps"] += 1
            return result
        _IN_STEP.active = True
        # The collector is paused for the step: a step's many short-lived objects
        # (handles, matched ops, the executor's iteration state) then die by reference
        # count before any collection sees them, instead of being promoted to older
        # generations by collections that happen mid-step and so bringing on full
        # collections (a full pass costs 50-200 ms in these processes, several per
        # 60 steps). Cyclic garbage made in the step is collected after it.
        collecting = gc.isenabled()
        if collecting:
            gc.disable()
        try:
            if self._step is None:
                return self._trace(args, kwargs)
            return self._coexecute(args, kwargs)
        finally:
            _IN_STEP.active = False
            if collecting:
                gc.enable()

    def _call(self, locator, args, kwargs):
        locator.boundary = sys._getframe()
        try:
            return self._fn(*args, **kwargs)
        finally:
            # The locator holds the user frame it placed an op in last: let it go before
            # the end of the step finds what the program still references.
            locator.release()

    def _trace(self, args, kwargs):
        recorder = TraceRecorder(Locator())
        _eager.RECORDERS.append(recorder.record)
        previous = _eager.set_dispatcher(_tracing_dispatch)
        previous_runner = _tape.GRADIENT_RUNNER[0]
        # A tape's gradient is recorded as one node when the graph can compute it.
        _tape.GRADIENT_RUNNER[0] = functools.partial(_trace_gradient, recorder)
        try:
            result = self._call(recorder.locator, args, kwargs)
        except BaseException:
            detach(recorder)
            raise
        finally:
            _eager.set_dispatcher(previous)
            _tape.GRADIENT_RUNNER[0] = previous_runner
            _remove(_eager.RECORDERS, recorder.record)
        self.stats["eager_steps"] += 1
        self._tracing_calls += 1
        self._merge(recorder.finish(), regenerate=self._tracing_calls >= TRACING_CALLS)
        return result

    def _coexecute(self, args, kwargs):
        run = CoRun(self._tg, self._step, _eager._eager_graph().resources, self._ready_rng,
                    self._gradient_memo)
        previous = _eager.set_dispatcher(run.dispatch)
        previous_runner = _tape.GRADIENT_RUNNER[0]
        _tape.GRADIENT_RUNNER[0] = run.gradient
        previous_apply = _optimizer.APPLY_RUNNER[0]
        _optimizer.APPLY_RUNNER[0] = run.apply_gradients
        try:
            try:
                result = self._call(run.locator, args, kwargs)
                run.finish()
            except BaseException:
                run.abort()
                # It started on the graph and finished imperatively (in an exception):
                # a fallback; the partial trace is not a path, so it is not merged.
                self.stats["fallbacks"] += 1
                self.fallback_reasons[run.reason] += 1
                raise
        finally:
            _eager.set_dispatcher(previous)
            run.close()
            _tape.GRADIENT_RUNNER[0] = previous_runner
            _optimizer.APPLY_RUNNER[0] = previous_apply
            if run.recorder is not None:
                _remove(_eager.RECORDERS, run.recorder.record)
                detach(run.recorder)
        if run.fell_back:
            self.stats["fallbacks"] += 1
            self.fallback_reasons[run.reason] += 1
            self._merge(run.recorder.finish(), regenerate=True)
        else:
            self.stats["graph_steps"] += 1
        return result

    def _merge(self, trace, regenerate):
        nodes = self._tg.nodes
        if not trace.repeatable:
            # It used variables it created (optimizer slots on the first step): no later
            # step can take this path again, so the graph does without it.
            self._unrepeatable += 1
        else:
            try:
                changed = self._tg.merge(trace)
            except CycleError as exc:
                self._give_up(exc)
                return
        changed = trace.repeatable and changed
        self.stats["traces"] = self._tg.num_traces + self._unrepeatable
        if regenerate and (changed or self._step is None) and self._tg.nodes:
            # The graph before is extended when it can be (nothing runs it any more).
            self._step = generate(self._tg, _eager._eager_graph().resources,
                                  previous=self._step)
            # The memo names TraceGraph nodes and call sites, never generated ops (each
            # step looks up the current graph's feed keys and Case Selects), and a merge
            # keeps every node's id: it stays valid unless the merge rebuilt the
            # TraceGraph (a new loop body refolds all traces and renumbers the nodes).
            # So the first step on a regenerated graph need not run the gradient
            # functions and the optimizer update in Python again.
            if self._tg.nodes is not nodes:
                self._gradient_memo = {}

    def _give_up(self, reason):
        """Run imperatively from now on (the program's steps cannot form one DAG)."""
        self._eager_only = reason
        self._step = None

    def __repr__(self):
        return f"<df.function {getattr(self._fn, '__qualname__', self._fn)} {self.stats}>"


def _tracing_dispatch(graph, op_type, inputs, attrs=None, name=None, output_specs=None):
    """Eager dispatch while a step is traced: slice bounds are fed as the co-executed
    step feeds them (:func:`~.trace.feed_slice_bounds`), so both give the same nodes."""
    if op_type == "StridedSlice":
        inputs, attrs = feed_slice_bounds(op_type, inputs, attrs)
    return _eager.execute_now(graph, op_type, inputs, attrs, name, output_specs)


def _trace_gradient(recorder, tape, targets, sources, output_gradients):
    return recorder.record_gradient(tape, targets, sources, output_gradients,
                                    tape._eager_gradients)


def _remove(hooks, fn):
    for i in range(len(hooks) - 1, -1, -1):
        if hooks[i] == fn:
            del hooks[i]
            return


def function(fn=None, *, mode="graph", ready_order_seed=None):
    """Mark ``fn`` as one step of an imperative program, run by co-execution (Terra).

    The body is ordinary imperative code (Python control flow on tensor values,
    ``.numpy()``, printing, NumPy or scikit-learn, attribute mutation, early returns,
    a ``GradientTape`` and an optimizer). The first calls run it eagerly and record its
    traces; later calls run it on the generated graph while Python runs the program's
    skeleton; a call that takes a new path falls back to eager execution for the rest
    of that call, and the graph is regenerated with the new trace.

    ``mode="eager"`` runs every call imperatively (to compare). ``ready_order_seed``
    (test-only) makes the graph executor take ready nodes in a random order from that
    seed. ``f.stats`` counts ``traces`` (distinct traces merged), and each call once in
    ``graph_steps`` (finished on the graph), ``fallbacks`` (started on the graph,
    finished imperatively) or ``eager_steps`` (traced or ``mode="eager"`` calls);
    ``f.graph`` is the generated ``df.Graph``. ``f.fallback_reasons`` counts why calls
    fell back (``"new op MatMul after node 3"``: a new path; ``"read of unfetched ..."``:
    Python read a value the graph does not send; ``"graph failed: ..."``); with the
    environment variable ``DATAFLOW_TRACER_DEBUG=1`` each fallback prints its reason.

    Which loops qualify for a ``while_loop`` (:mod:`dataflow.tracer.loops` has the full
    rule and the reasons): a Python loop whose iterations trace alike -- the same ops
    with the same attributes, shapes and call sites, each input from the same place in
    every iteration (the same iteration, the previous one, a value made before the loop,
    a variable, or a value fed from Python such as the loop index ``t`` of
    ``xs[:, t]``) -- whose body Python does not read while it runs, that writes no
    variable, and of which only the last iteration's values are used after it, is
    folded into one ``while_loop`` whose trip count Python feeds as it leaves it: a new
    trip count runs on the same graph, with no new trace. A ``GradientTape.gradient``
    is one node, computed by ``df.gradients`` on the graph (through folded loops too),
    when the tape recorded every op between its sources and targets, no other tape
    records it, and its gradients are dense. Other loops (and ``df.while_loop`` run
    eagerly) are unrolled: each iteration's ops are nodes of their own, so a new trip
    count is a new path (one fallback, then it is in the graph too).
    A tensor whose value Python reads is fetched from the graph; every
    tensor still referenced when the step returns is materialised. Variables must be
    created once (a step that makes a new variable every call never reaches the graph);
    an output whose shape the graph cannot infer is fetched when Python asks for it.
    A gradient that is not one node and that the skeleton matched once is taken from a
    memo in later steps (same taped nodes, call site, targets and sources): its graph
    nodes are matched and fed without running the gradient functions in Python again;
    so is an
    ``Optimizer.apply_gradients`` whose optimizer holds only plain Python values (a
    changed learning rate is computed again, then memoised too). The garbage collector
    is paused while a step runs (cyclic garbage the step made is collected after it),
    and the generated graph runs on the calling thread, as far as the values Python has
    sent allow, whenever Python reads a value and when the step returns.

    >>> with df.eager_mode():
    ...     w = df.Variable([1.0, -2.0])
    ...     opt = df.train.GradientDescentOptimizer(0.1)
    ...
    ...     @df.function
    ...     def step(x):
    ...         with df.GradientTape() as tape:
    ...             loss = df.reduce_sum(df.square(w * x))
    ...         opt.apply_gradients([(tape.gradient(loss, w), w)])
    ...         return loss
    ...
    ...     losses = [round(float(step(df.constant([1.0, 1.0]))), 4) for _ in range(4)]
    >>> losses
    [5.0, 3.2, 2.048, 1.3107]
    >>> step.stats
    {'traces': 1, 'fallbacks': 0, 'graph_steps': 2, 'eager_steps': 2}
    """
    if fn is None:
        return lambda f: Function(f, mode, ready_order_seed)
    return Function(fn, mode, ready_order_seed)
