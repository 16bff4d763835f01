"""Co-execution: the Python side runs the step as a skeleton while the graph runs it.

While a step co-executes, eager dispatch is replaced (:func:`~dataflow.framework.eager.
set_dispatcher`) by :meth:`CoRun.dispatch`. Each op the program asks for is matched
against the TraceGraph: from the node matched last, the successor with the same node
key. A match returns an op whose outputs are :class:`Handle` s (placeholders that hold no
value yet) and sends, on the step's rendezvous, the Case Selects of the edge just taken
and the op's fed inputs. The graph runs the step out of order on the runtime's
executor, advanced on this thread (see the last paragraph); reading a handle's value
(``.numpy()``, ``bool``, printing, a stateful op run in Python) receives its Output
Fetching from the rendezvous.

A folded loop (:mod:`.loops`) is matched op by op too: each Python iteration's ops
against the loop's body, with handles that name the iteration. The values fed each
iteration (the loop index) are kept, and the first op after the loop sends the trip
count and those values stacked (one feed each); the last iteration's handles become the
loop node's outputs. The graph's ``while_loop`` runs when the graph is next advanced (a
value read after the loop, or the end of the step): Python never waits inside a folded
loop, since reading a body value there leaves the loop (:meth:`CoRun.fetch`). A
``GradientTape.gradient`` recorded as one node is matched as one op: its handles are the
graph's ``df.gradients`` outputs.

A step that leaves the known paths (an op the graph does not have, a value read that
the graph does not send, a path that ends early) *falls back*: the graph step is
cancelled, variables the graph may have written are restored from the
checkpoint taken at the start of the step, the ops matched so far are re-run eagerly
(stateful ops outside the graph, such as prints, ran once in Python and are not re-run),
the handles get their values, and the step goes on imperatively while a recorder
records the rest of its trace.

The graph side runs on the Python side's own thread, cooperatively (:meth:`~dataflow.
runtime.executor.Executor.advance`): it runs when Python needs a value from it, as far
as the values sent so far let it, and at the end of the step. Both sides share the
interpreter lock, so a thread of its own would only add hand-overs: a graph thread
started at the first Output Fetching measured 2.9x slower per step than running inline
on the SDPoint program, whose gradient reads shapes between every pair of layers.
A step whose graph has no while-loop frames runs it as flat lists of kernel calls
instead (:mod:`.flat_step`): one list per advance, built once per sequence of advances.
"""
from __future__ import annotations

import os
import sys
import threading
import weakref

import numpy as np

from .. import dtypes as _dtypes
from .. import errors
from ..framework import eager as _eager
from ..framework.eager import EagerOp, EagerTensor
from ..autodiff import tape as _tape
from ..framework.indexed_slices import IndexedSlices
from ..framework.op_registry import get_op_def
from ..framework.tensor_shape import TensorShape
from ..runtime.executor import Executor
from ..runtime.rendezvous import LocalRendezvous
from .flat_step import flat_steps_of
from .generate import GRAPH_DEVICE, PYTHON_DEVICE, ShapeOnly
from .location import Locator, intern_stack, stack_of
from .trace import (_RECORDED, GRADIENT_OP, TraceRecorder, TracedTensor, feed_slice_bounds,
                    freeze_attrs, gradient_between, is_recorded, variable_name)
from .trace_graph import END, START, node_key

__all__ = ["CoRun", "Handle"]

_SLOT = EagerTensor.__dict__["_value"]
_NO_INPUTS = ()
_NO_FEEDS: dict = {}   # shared by matched ops without fed inputs: never written to
_FED = ("f",)
# DATAFLOW_TRACER_DEBUG=1 prints why each fallback happened (also counted, always, in
# ``f.stats["fallback_reasons"]``).
_DEBUG = os.environ.get("DATAFLOW_TRACER_DEBUG", "") not in ("", "0")
_RESOURCE = _dtypes.resource


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
                node = self._run.node_info(self._node)
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


# Optimizer attributes that are its variables' tables, not Python state its updates read
# as values (slots exist once made: a step that makes one runs a VarHandleOp in Python,
# which keeps that step's update out of the memo).
_OPTIMIZER_TABLES = frozenset({"_slots", "_non_slot_dict", "_hyper_cache"})
_PLAIN = (int, float, bool, str)


def _inference_key(nid, inputs):
    """What :func:`_python_side_shapes` depends on: the node, and per input its value
    when it is a small integer tensor Python has (a shape, a size, slice bounds), else
    its dtype and shape; None when an input's shape is unknown."""
    key = [nid]
    for t in inputs:
        if type(t) is Handle and not t.has_value():
            shape = t._shape
            if shape is None:
                return None
            key.append(shape._dims)      # a tuple: TensorShape's own, no copy
            continue
        value = _SLOT.__get__(t, EagerTensor)
        if (t._dtype in _INTEGER and type(value) is np.ndarray
                and value.size <= _FOLD_MAX_ELEMENTS):
            key.append((value.dtype.str, value.shape, value.tobytes()))
        else:
            key.append((id(t._dtype), np.shape(value)))
    return tuple(key)


def _cached_python_side_shapes(op, nid, specs, dynamic, cache):
    """:func:`_python_side_shapes`, remembered per graph by :func:`_inference_key`."""
    key = _inference_key(nid, op._inputs)
    if key is None:
        return [(dt, None if (nid, k) in dynamic else traced)
                for k, (dt, traced) in enumerate(specs)]
    got = cache.get(key)
    if got is None:
        if len(cache) >= _SHAPE_CACHE_SIZE:   # values that change every step (crops)
            cache.clear()
        got = cache[key] = _python_side_shapes(op, nid, specs, dynamic)
    return got


def _python_side_shapes(op, nid, specs, dynamic):
    """The output specs of a matched op the graph cannot infer all shapes of: the
    generator saw its fed inputs as ``_Recv`` s, while here their values are known (a
    Reshape to a shape list made in Python, a conv gradient's ``shape(x)``), so the op's
    shape inference runs again with those values, and the outputs it gets fully defined
    need no Output Fetching when Python asks their shape. Outputs of the matched step
    stand in by dtype and static shape (the graph's view of them), or by their value
    when Python has it (a folded small integer op's); an output whose shape
    is still unknown, or one with an input of unknown shape, keeps None (its value is
    fetched for its shape); the outputs the graph infers keep their traced shape."""
    inferred = None
    inputs = []
    for t in op._inputs:
        if type(t) is Handle:
            if t.has_value():   # folded (see _fold_small_ints) or fetched: a constant
                inputs.append(EagerTensor(_SLOT.__get__(t, Handle), t._dtype))
                continue
            if t._shape is None:
                break
            inputs.append(ShapeOnly(t._dtype, t._shape))
        else:
            inputs.append(t)
    else:
        probe = EagerOp(op._graph, op._type, op._name, inputs, op._attrs)
        try:
            inferred = get_op_def(op._type).infer(probe)
        except Exception:  # noqa: BLE001 - inference that needs more than this: fetch
            inferred = None
    out = []
    for k, (dt, traced) in enumerate(specs):
        if (nid, k) in dynamic:
            traced = None
            if inferred is not None and inferred[k][1].is_fully_defined():
                traced = inferred[k][1]
        out.append((dt, traced))
    return out


# Shape arithmetic (a gradient's reduced shape, a Reshape's target computed from
# shapes): small integer ops. Their values decide later ops' shapes, which gradient
# functions read; computed in Python as well as in the graph they need no Output
# Fetching, and the gradient that reads them can be memoised.
_FOLD_MAX_ELEMENTS = 64
_SHAPE_CACHE_SIZE = 4096
_INTEGER = frozenset({_dtypes.int32, _dtypes.int64})


def _foldable_nodes(tg) -> frozenset:
    """Nodes whose outputs are all small integer tensors (see :func:`_fold_small_ints`);
    variable ops are not (they read or change state)."""
    out = set()
    for nid, node in enumerate(tg.nodes):
        specs = node.out_specs
        if (specs and not node.variables()
                and all(dt in _INTEGER and shape is not None and shape.is_fully_defined()
                        and shape.num_elements() <= _FOLD_MAX_ELEMENTS
                        for dt, shape in specs)):
            out.add(nid)
    return frozenset(out)


def _fold_small_ints(graph, op, outs):
    """Give ``outs`` (the handles of a matched small integer op) their values now, when
    every input's value is known in Python (fed, or a handle folded or fetched before):
    the op runs in Python too, on the values the graph gets. Otherwise, or if it fails,
    the handles stay as they are (the graph's value is fetched if Python reads it)."""
    shapes_only = get_op_def(op._type).reads_shapes_only
    inputs = []
    for t in op._inputs:
        if type(t) is Handle:
            if t.has_value():
                t = EagerTensor(_SLOT.__get__(t, Handle), t._dtype)
            elif shapes_only and t._shape is not None:
                # Shape, Size, Rank: a stand-in value of that shape (a view, no data).
                t = EagerTensor(np.broadcast_to(np.zeros((), t._dtype.as_numpy_dtype),
                                                t._shape.as_list()), t._dtype)
            else:
                return
        elif t._dtype not in _INTEGER and not shapes_only:
            return
        inputs.append(t)
    recorders = _eager.RECORDERS
    saved = recorders[:]
    recorders.clear()          # not an op of the program: no tape may record it
    try:
        done = _eager.execute_now(graph, op._type, inputs, dict(op._attrs), op._name)
    except Exception:  # noqa: BLE001 - the graph runs it and reports the error
        return
    finally:
        recorders[:] = saved
    for h, t in zip(outs, done._outputs):
        _SLOT.__set__(h, t._value)


_UNMEMOISABLE = ("unmemoisable",)


def _shape_key(h):
    """A handle's shape as Python knows it, hashable (None: unknown)."""
    shape = h._shape if h is not None else None
    return None if shape is None else shape._dims


def _memo_part(t, run, inside, taped_inputs):
    """How a gradient's result tensor ``t`` is found again in a later step: ``("h",
    node, output, shape)`` an output of a node matched in the gradient's segment (with
    its shape when Python knew it: a gradient has its source's shape, and the segment's
    feeds are the same constants); ``("t", i, j)`` input ``j`` of taped op ``i`` (an
    embedding gradient's indices); ``("c", t)`` a constant the gradient functions made
    (a dense shape); None for None; else :data:`_UNMEMOISABLE`."""
    if t is None:
        return None
    if type(t) is Handle and t._run is run and t._node in inside:
        shape = t._shape
        return ("h", t._node, t._value_index,
                shape if shape is not None and shape.is_fully_defined() else None)
    at = taped_inputs.get(id(t))
    if at is not None:
        return ("t",) + at
    if type(t) is EagerTensor:
        return ("c", t)
    return _UNMEMOISABLE


class _RunPlan:
    """What every co-executed step on one generated graph looks up, computed once per
    graph (per :class:`~.generate.StepGraph`) instead of once per step.

    ``fast_succ[u]`` maps ``(op type, stack id, iteration index)`` to the one
    successor of ``u`` with that type and location (left out where two have it), and
    ``checks[v]`` holds the rest of node ``v``'s key (attributes, input wiring, fed
    specs): :meth:`CoRun.dispatch` checks an op against that one node field by field.
    ``body_sids[loop]`` are the stack ids of a folded loop's body ops, ``body_out``
    their output specs."""

    __slots__ = ("num_nodes", "out_specs", "dynamic_nodes", "foldable", "shape_cache",
                 "fast_succ", "checks", "body_sids", "body_out", "body_inputs",
                 "emit_info", "selects_from", "entries", "simple", "body_recs")

    def __init__(self, tg, step):
        self.num_nodes = len(tg.nodes)
        self.out_specs = [node.out_specs for node in tg.nodes]
        self.dynamic_nodes = frozenset(nid for nid, _ in step.dynamic)
        self.foldable = _foldable_nodes(tg)
        self.shape_cache: dict = {}   # see _cached_python_side_shapes
        # node key: (op type, attrs key, (stack, n), wiring, fed specs)
        self.checks = [(key[1], key[3], key[4]) for key in (n.key for n in tg.nodes)]
        self.fast_succ = {u: _by_location(succ) for u, succ in tg.succ.items()}
        # Per node: output specs, feed keys by input slot, dynamic, foldable, the
        # slots whose Input Feeding other inputs share (None for none); and per node,
        # the Case Selects of its out-edges that have some.
        self.emit_info = [
            (node.out_specs,
             {slot: step.feed_keys.get((nid, slot)) for slot in range(len(node.inputs))},
             nid in self.dynamic_nodes, nid in self.foldable,
             frozenset(slot for slot in range(len(node.inputs))
                       if step.feed_keys.get((nid, slot)) in step.shared_feeds) or None)
            for nid, node in enumerate(tg.nodes)]
        self.selects_from: dict = {}
        for (u, v), selects in step.edge_selects.items():
            if selects:
                self.selects_from.setdefault(u, {})[v] = selects
        self.simple = [_simple_node(tg.nodes[nid], self.checks[nid], self.emit_info[nid])
                       for nid in range(self.num_nodes)]
        self.body_sids = {loop: tuple(intern_stack(b.stack) for b in spec.body)
                          for loop, spec in tg.loops.items()}
        # Body ops' output specs as handles show them (no shape where it is dynamic).
        self.body_out = {loop: [[(dt, None if ((loop, j), k) in step.dynamic else shape)
                                 for k, (dt, shape) in enumerate(b.out_specs)]
                                for j, b in enumerate(spec.body)]
                         for loop, spec in tg.loops.items()}
        self.body_inputs = {loop: [_body_plan(tg.nodes[loop], spec, b) for b in spec.body]
                            for loop, spec in tg.loops.items()}
        self.entries = _loop_entries_by_location(tg, self.body_sids)
        # Per folded loop, per body op: what _loop_next checks, in one tuple.
        self.body_recs = {loop: [(b.op_type, self.body_sids[loop][j],
                                  _plain_attrs(b.attrs_key), b.attrs_key,
                                  self.body_inputs[loop][j])
                                 for j, b in enumerate(spec.body)]
                          for loop, spec in tg.loops.items()}


# Attribute value types whose equality agrees with their hash (so equal values are what
# equal keys hold): for these, _same_attrs compares values without hashing them
# (DType and TensorShape hash in Python).
_PLAIN_ATTRS = frozenset({str, int, float, bool, type(None), bytes, _dtypes.DType,
                          TensorShape})


def _same_attrs(attrs, key) -> bool:
    """Whether ``freeze_attrs(attrs) == key`` (an op's attributes against a node's
    attributes key), value by value: identical values, equal values of one plain type
    or equal hashable tuples match at once, unequal plain values differ; anything else
    is decided by :func:`freeze_attrs` itself."""
    if not attrs:
        return not key
    if len(attrs) != len(key):
        return False
    for item, want in zip(attrs.items(), key):
        if item[0] != want[0]:
            return False
        v, w = item[1], want[1]
        if v is w:
            continue
        t = type(v)
        if t is type(w):
            if t in _PLAIN_ATTRS:
                if v == w:
                    continue
                return False
            if t is tuple:       # (axes, a slice spec): equal and hashable, as the key
                try:
                    hash(v)
                except TypeError:
                    break
                if v == w:
                    continue
        break
    else:
        return True
    return freeze_attrs(attrs) == key


def _body_plan(outer, spec, b) -> tuple:
    """What each input of body op ``b`` must be (see :meth:`CoRun._body_matches`):
    ``("b", j, k)`` output ``k`` of body op ``j`` of this iteration; ``("c", j, k)``
    of the previous iteration (a loop variable); ``("xn", node, k)`` a node output
    before the loop; ``("xv", name)`` a variable; ``("xf", e, spec)`` a loop invariant
    fed once (loop input ``e``, whose spec may leave a dimension open); ``("f",
    spec)`` fed every iteration. A ``"c"`` entry also holds what starts the variable in
    the first iteration (the loop node's input: ``("n", node, k)``, ``("v", name)`` or
    :data:`_FED`, and then its fed spec)."""
    plan = []
    for q, src in enumerate(b.inputs):
        kind = src[0]
        if kind == "b":
            plan.append(src)
        elif kind == "c":
            jj, k, init = spec.variables[src[1]]
            # In the first iteration: the loop node's input that starts the variable.
            first = outer.inputs[init[1]]
            plan.append(("c", jj, k, first,
                         outer.feed_specs[init[1]] if first == _FED else None))
        elif kind == "x":
            want = outer.inputs[src[1]]
            if want[0] == "n":
                plan.append(("xn", want[1], want[2]))
            elif want[0] == "v":
                plan.append(("xv", want[1]))
            else:
                plan.append(("xf", src[1], outer.feed_specs[src[1]]))
        else:
            plan.append(("f", b.feed_specs[q]))
    return tuple(plan)


def _by_location(succ) -> dict:
    """``{(op type, stack id, n): successor}`` of one node's successors (by node key),
    leaving out a location two successors share."""
    out: dict = {}
    shared = set()
    for key, v in succ.items():
        op_type, _, (stack, n), _, _ = key
        at = (op_type, intern_stack(stack), n)
        if at in out:
            shared.add(at)
        out[at] = v
    for at in shared:
        del out[at]
    return out


def _loop_entries_by_location(tg, body_sids) -> dict:
    """``{u: {(op type, stack id, n): loop}}``: the folded loops that follow node ``u``,
    by the type and location of the op that enters them (the loop node's location, its
    body's first op). Left out where another successor of ``u`` or another loop has that
    type and location: :meth:`CoRun._match` decides those by the full key."""
    out: dict = {}
    for u, loops in tg.loop_entries.items():
        taken = {(key[0], intern_stack(key[2][0]), key[2][1]) for key in tg.succ[u]
                 if tg.succ[u][key] not in loops}
        at: dict = {}
        for loop in loops:
            stack, n = tg.nodes[loop].location
            sid = intern_stack(stack)
            if body_sids[loop][0] != sid:
                continue
            key = (tg.loops[loop].body[0].op_type, sid, n)
            at[key] = None if key in at or key in taken else loop
        at = {key: loop for key, loop in at.items() if loop is not None}
        if at:
            out[u] = at
    return out


def _simple_node(node, check, emit_info):
    """What :meth:`CoRun.dispatch` checks inline (:func:`_emit_simple`) for a node that
    most ops of a steady step match -- no small-int folding, attributes of plain types
    -- as ``(attributes as a dict, wiring, fed specs, output specs, feed keys, shared
    feed slots, whether an output's shape depends on values)``; None for any other node
    (it takes :meth:`CoRun._fits` and :meth:`CoRun._emit`).

    Comparing the op's attribute dict with the node's in one ``==`` is
    :func:`_same_attrs` for plain values (both compare them with ``==``)."""
    attrs_key, wiring, feed_specs = check
    specs, keys, dynamic, foldable, shared = emit_info
    if foldable:
        return None
    attrs = _plain_attrs(attrs_key)
    if attrs is None:
        return None
    return attrs, tuple(wiring), tuple(feed_specs), tuple(specs), keys, shared, dynamic


def _plain_attrs(attrs_key):
    """A node's attributes key as a dict, when every value is plain (see
    :func:`_simple_node`); else None."""
    attrs = {}
    for item in attrs_key:     # a folded loop's or a gradient's key is no item list
        if type(item) is not tuple or len(item) != 2 or not _plain(item[1]):
            return None
        attrs[item[0]] = item[1]
    return attrs


def _plain(value) -> bool:
    """A value of a plain attribute type, or a tuple of such values."""
    if type(value) is tuple:
        return all(_plain(v) for v in value)
    return type(value) in _PLAIN_ATTRS


def _run_plan(tg, step) -> _RunPlan:
    plan = getattr(step, "_coexec_plan", None)
    if plan is None or plan.num_nodes != len(tg.nodes):
        plan = step._coexec_plan = _RunPlan(tg, step)
    return plan


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


def _emit_simple(run, graph, op_type, inputs, attrs, name, nid, simple, cur):
    """:meth:`CoRun._fits` then :meth:`CoRun._emit` for a node with a ``simple`` record
    (:func:`_simple_node`), in one call: the op (its outputs handles) when it has the
    node's attributes and inputs, else None (the general path decides)."""
    want_attrs, wiring, feed_specs, specs, keys, shared, dynamic = simple
    try:
        if attrs != want_attrs:
            return None
    except (ValueError, TypeError):     # an array-valued attribute: the general path
        return None
    if len(inputs) != len(wiring):
        return None
    fed = None
    slot = 0
    # CoRun._fits's input check, written out here: this runs once per matched op, and a
    # shared helper would cost a call per op (change the two together).
    for t in inputs:
        src = wiring[slot]
        tt = type(t)
        if tt is Handle and t._run is run:
            if src[0] != "n" or src[1] != t._node or src[2] != t._value_index:
                return None
        elif tt is not EagerTensor and not isinstance(t, EagerTensor):
            return None
        elif src[0] == "v":
            if t._dtype is not _RESOURCE or variable_name(t) != src[1]:
                return None
        elif src[0] != "f" or t._dtype is _RESOURCE:
            return None
        else:
            value = t._value
            if (t._dtype, value.shape if type(value) is np.ndarray
                    else np.shape(value)) != feed_specs[slot]:
                return None
            if fed is None:
                fed = {}
            fed[slot] = t
        slot += 1
    if fed is not None and shared is not None and run._feeds_differ(nid, fed):
        return None
    selects = run._selects_from.get(cur)
    if selects is not None and nid in selects:
        send = run.rv.send
        for key, case in selects[nid]:
            send(key, case, False)
    run.cur = nid
    if fed is None:
        run.matched.append((nid, _NO_FEEDS))
    else:
        run._send_feeds(keys, shared, fed)
        run.matched.append((nid, fed))
    op = EagerOp(graph, op_type, name or op_type, inputs, attrs)
    if dynamic:
        specs = _cached_python_side_shapes(op, nid, specs, run._dynamic, run._shape_cache)
    return _handles_out(run, op, nid, specs)


def _handles_out(run, op, node, specs):
    """Give a matched op ``op`` its outputs: a :class:`Handle` per ``(dtype, shape)`` in
    ``specs`` for node ``node`` (an int, or ``(loop, j, t)`` in a folded loop), each
    known weakly to the run; then the recorders (tapes) see it. Returns ``op``."""
    handles = run.handles
    if len(specs) == 1:
        dt, shape = specs[0]
        h = Handle(run, node, 0, dt, shape, op)
        handles[(node, 0)] = weakref.ref(h)
        op._outputs = [h]
    else:
        outs = []
        for k, (dt, shape) in enumerate(specs):
            h = Handle(run, node, k, dt, shape, op)
            handles[(node, k)] = weakref.ref(h)
            outs.append(h)
        op._outputs = outs
    run._last_op = id(op)    # not the op: it would keep its outputs alive
    if _eager.RECORDERS:
        for record in _eager.RECORDERS:
            record(op)
    else:
        op._inputs = _NO_INPUTS
    return op


class CoRun:
    """One co-executed step of ``fn_state`` (a :class:`~.function.Function`'s state) on
    ``step`` (its :class:`~.generate.StepGraph`)."""

    def __init__(self, tg, step, resources, ready_order=None, gradient_memo=None):
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
        self._started = False
        self._graph_complete = False
        # Whether the graph may run as flat lists of calls (flat_step.py); a test-only
        # ready order keeps the executor (it randomises the executor's order). _flat:
        # the step's flat run (a FlatRun) once it started on one.
        self._flat_allowed = ready_order is None
        self._flat = None
        self.ran_flat = False
        # Looked up once per op in dispatch: bound here once per step.
        plan = _run_plan(tg, step)
        self._succ = tg.succ
        self._out_specs = plan.out_specs
        self._edge_selects = step.edge_selects
        self._feed_keys = step.feed_keys
        self._dynamic = step.dynamic
        self._dynamic_nodes = plan.dynamic_nodes
        self._foldable = plan.foldable
        self._shape_cache = plan.shape_cache
        self._fast_succ = plan.fast_succ
        self._emit_info = plan.emit_info
        self._selects_from = plan.selects_from
        self._checks = plan.checks
        self._body_sids = plan.body_sids
        self._body_out = plan.body_out
        self._body_inputs = plan.body_inputs
        self._entries = plan.entries
        self._simple = plan.simple
        self._body_recs = plan.body_recs
        # Shared Input Feedings sent so far in this step: key -> the tensor sent.
        self._sent_shared: dict = {}
        # Gradient computations matched in earlier steps (see :meth:`gradient`), valid
        # for this TraceGraph; and how many ops ran in Python (not matched) so far.
        self.gradient_memo = {} if gradient_memo is None else gradient_memo
        self._python_ops = 0
        self._last_op = None             # id of the op dispatch matched last
        self.reason = None           # why the step fell back (a short text), if it did
        # Folded loops: [loop node, spec, next body op, iteration] while Python runs
        # one, the loop invariants it fed, and where each body op ran (for a replay).
        self._loop = None
        # The node ids (loop, j, t) of this iteration's body ops so far and of the
        # previous iteration's (None in the first): handles are checked against them.
        self._iteration_nodes = ((), None)
        self._loop_fed: dict = {}
        self._loop_rows: dict = {}       # per-iteration feed name -> values so far
        self._loop_entries = tg.loop_entries
        self._body_locations: dict = {}
        self.dispatch = self._dispatcher()

    # -- the graph side ---------------------------------------------------------------------
    def _advance_graph(self):
        """Run the graph side on this thread as far as the values sent so far let it
        (a failure is kept in ``graph_error`` and cancels the rendezvous).

        When the graph has a flat run (:mod:`.flat_step`) each advance -- a read mid-step,
        the end of the step -- runs the flat segment for the keys sent since the last,
        and the executor is not used in the step."""
        if self._graph_complete or self.graph_error is not None:
            return
        try:
            if not self._started:
                self._started = True
                if self._flat_allowed:
                    flat = flat_steps_of(self.step)
                    if flat.possible:
                        self._flat = flat.start()
                if self._flat is None:
                    self._executor.start()
            if self._flat is not None:
                complete = flat_steps_of(self.step).advance(self._flat, self.rv)
                if complete is not None:
                    self.ran_flat = True
                    self._graph_complete = complete
                    return
                self._flat = None     # no flat run for this step: nothing was taken
                self._executor.start()
            self._graph_complete = self._executor.advance()
        except Exception as exc:  # noqa: BLE001 - handed to the Python side
            self.graph_error = exc
            self.rv.cancel(exc)

    @property
    def fell_back(self) -> bool:
        return self.recorder is not None

    # -- the Python side: dispatch ----------------------------------------------------------
    def _dispatcher(self):
        """This step's eager dispatch (``eager.execute``'s signature, see ``dispatch``
        below) as a plain function, a closure over the run: installed as
        ``EagerGraph.create_op`` it is called with no bound-method wrapper in between
        (a frame and a repacking of the arguments less per op). :meth:`close` drops it
        (it refers to the run)."""
        run = self
        owner_id = self.owner
        stack_id = self.locator.stack_id
        counts = self.locator.counts
        execute_now = _eager.execute_now
        get_ident = threading.get_ident
        getframe = sys._getframe

        def dispatch(graph, op_type, inputs, attrs=None, name=None, output_specs=None):
            """Eager dispatch while the step co-executes.

            The op is matched by its node key (:func:`~.trace_graph.node_key`) among
            the successors of the node matched last, or against the folded loop Python
            is in. The common case -- one successor with this op's type and location --
            is checked field by field against that node's key (:meth:`CoRun._fits`, or
            :meth:`CoRun._loop_next` in a folded loop) without building the op's own
            key; any other case, a mismatch included, takes the full key
            (:meth:`CoRun._match`), so both give the same node or the same fallback."""
            owner = get_ident() == owner_id
            if op_type == "StridedSlice" and owner:
                inputs, attrs = feed_slice_bounds(op_type, inputs, attrs)
            if run.recorder is not None or not owner:
                return execute_now(graph, op_type, inputs, attrs, name, output_specs)
            recorded = _RECORDED.get(op_type)
            if recorded is None:
                recorded = is_recorded(op_type)
            if not recorded:
                # Printing, random numbers, I/O: run now in Python on fetched inputs.
                run._python_ops += 1
                return execute_now(graph, op_type, inputs, attrs, name, output_specs)
            sid = stack_id(getframe(1))
            n = counts.get(sid, 0)
            counts[sid] = n + 1
            if attrs is None:
                attrs = {}
            if run._loop is None:
                cur = run.cur
                nid = run._fast_succ[cur].get((op_type, sid, n))
                if nid is not None:
                    simple = run._simple[nid]
                    if simple is not None:
                        op = _emit_simple(run, graph, op_type, inputs, attrs, name, nid,
                                          simple, cur)
                        if op is not None:
                            return op
                    fed = run._fits(nid, inputs, attrs)
                    if fed is not None:
                        return run._emit(graph, op_type, inputs, attrs, name, nid, fed)
                elif run.cur in run._entries:
                    op = run._enter_loop(graph, op_type, inputs, attrs, name, sid, n)
                    if op is not None:
                        return op
            else:
                op = run._loop_next(graph, op_type, inputs, attrs, name, sid, n)
                if op is not None:
                    return op
                if run._leaves_loop(op_type, sid):
                    # The first op after the loop: what _match would decide (it ends the
                    # loop and dispatches the op again), without building the op's full
                    # key or walking the stack a second time.
                    run._end_loop()
                    nid = run._fast_succ[run.cur].get((op_type, sid, n))
                    if nid is not None:
                        fed = run._fits(nid, inputs, attrs)
                        if fed is not None:
                            return run._emit(graph, op_type, inputs, attrs, name, nid, fed)
            return run._match(graph, op_type, inputs, attrs, name, output_specs, sid, n)

        return dispatch

    def close(self):
        """The step is over: drop the dispatcher (its closure refers back to the run,
        which would otherwise wait for a garbage collection)."""
        self.dispatch = None

    def _fits(self, nid, inputs, attrs):
        """Whether an op with these inputs and attributes (its type and location already
        equal to node ``nid``'s) has ``nid``'s key: its fed inputs (``{slot: tensor}``,
        :data:`_NO_FEEDS` for none) if so, else None. (Its input loop is written out
        again in :func:`_emit_simple`: change the two together.)"""
        attrs_key, wiring, feed_specs = self._checks[nid]
        if not _same_attrs(attrs, attrs_key):
            return None
        if len(inputs) != len(wiring):
            return None
        fed = _NO_FEEDS
        for slot, t in enumerate(inputs):
            src = wiring[slot]
            tt = type(t)
            if tt is Handle and t._run is self:
                if src[0] != "n" or src[1] != t._node or src[2] != t._value_index:
                    return None
                continue
            if tt is not EagerTensor and not isinstance(t, EagerTensor):
                return None          # _match reports it
            if t._dtype is _RESOURCE:
                vname = variable_name(t)
                if vname is not None:
                    if src[0] != "v" or src[1] != vname:
                        return None
                    continue
            if src[0] != "f":
                return None
            value = t._value
            if (t._dtype, value.shape if type(value) is np.ndarray
                    else np.shape(value)) != feed_specs[slot]:
                return None
            if fed is _NO_FEEDS:
                fed = {}
            fed[slot] = t
        if fed and self._emit_info[nid][4] is not None and self._feeds_differ(nid, fed):
            return None              # _match falls back
        return fed

    def _feeds_differ(self, nid, fed) -> bool:
        """Whether node ``nid``'s fed inputs ``fed`` give an Input Feeding that several
        inputs share (see generate's ``_share_key``) another value than the one sent
        for it in this step (or than another of these inputs): the graph would compute
        with the wrong one, so the op is not matched (a fallback; the new trace tells
        the generator not to share it)."""
        _, keys, _, _, shared = self._emit_info[nid]
        if shared is None:
            return False
        sent = self._sent_shared
        here: dict = {}
        for slot, t in fed.items():
            if slot not in shared:
                continue
            if _feed_conflicts(here, sent, keys[slot], t):
                return True
        return False

    def _send_feeds(self, keys, shared, fed):
        """Send ``fed`` (``{slot: tensor}``) with ``keys`` (by slot); a slot in
        ``shared`` whose Input Feeding was sent already in this step is not sent again
        (its value was checked equal by :meth:`_feeds_differ`)."""
        send = self.rv.send
        if shared is None:
            for slot, t in fed.items():
                send(keys[slot], t._value, False)
            return
        sent = self._sent_shared
        for slot, t in fed.items():
            key = keys[slot]
            if slot in shared:
                if key in sent:
                    continue
                sent[key] = t
            send(key, t._value, False)

    def _wiring(self, op_type, inputs):
        """Per input, where it comes from (``("n", node, k)``, ``("v", name)`` or
        :data:`_FED`) and its fed ``(dtype, shape)`` (None when not fed); and the fed
        inputs (``{slot: tensor}``, None for none). TypeError/ValueError for an input
        that is not an eager tensor."""
        wiring, feed_specs, fed = [], [], None
        for slot, t in enumerate(inputs):
            tt = type(t)
            if tt is Handle and t._run is self:
                wiring.append(("n", t._node, t._value_index))
                feed_specs.append(None)
                continue
            if tt is not EagerTensor and not isinstance(t, EagerTensor):
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
            if fed is None:
                fed = {}
            fed[slot] = t
        return wiring, feed_specs, fed

    def _match(self, graph, op_type, inputs, attrs, name, output_specs, sid, n):
        """Match an op by its full node key (see :meth:`dispatch`); falls back when no
        successor and no folded loop has it."""
        location = (stack_of(sid), n)
        wiring, feed_specs, fed = self._wiring(op_type, inputs)
        cur = self.cur
        succ = self._succ[cur]
        nid = None
        if succ:
            nid = succ.get(node_key(op_type, freeze_attrs(attrs), location, tuple(wiring),
                                    tuple(feed_specs)))
        in_loop = self._loop is not None
        if in_loop or (nid is None and cur in self._loop_entries):
            # Inside a folded loop the loop decides first: its next op, its next
            # iteration, or leaving it (then the op is matched after the loop node).
            got = self._loop_dispatch(graph, op_type, inputs, attrs, name, output_specs,
                                      location, sid, wiring, feed_specs, fed)
            if got is not None or self.recorder is not None:
                return got
            if in_loop:
                nid = None
        why = f"new op {op_type} after node {cur}"
        if nid is not None and fed and self._feeds_differ(nid, fed):
            nid = None
            why = f"{op_type} after node {cur}: values fed to one Input Feeding differ"
        if nid is None:
            self._fallback(why)
            # The new op runs now, recorded at the location just computed.
            self.recorder.replaying(location)
            try:
                return _eager.execute_now(graph, op_type, inputs, attrs, name, output_specs)
            finally:
                self.recorder.replaying(None)
        return self._emit(graph, op_type, inputs, attrs, name, nid,
                          _NO_FEEDS if fed is None else fed)

    def _emit(self, graph, op_type, inputs, attrs, name, nid, fed):
        """The skeleton's op for a matched node ``nid``: the edge's Case Selects and the
        fed inputs sent, handles for its outputs, seen by the recorders (tapes)."""
        selects = self._selects_from.get(self.cur)
        if selects is not None and nid in selects:
            send = self.rv.send
            for key, case in selects[nid]:
                send(key, case, False)
        self.cur = nid
        specs, keys, dynamic, foldable, shared = self._emit_info[nid]
        if fed:
            self._send_feeds(keys, shared, fed)
        self.matched.append((nid, fed))
        op = EagerOp(graph, op_type, name or op_type, inputs, attrs)
        if dynamic:
            specs = _cached_python_side_shapes(op, nid, specs, self._dynamic,
                                               self._shape_cache)
        handles = self.handles
        outs = []
        for k, (dt, shape) in enumerate(specs):
            h = Handle(self, nid, k, dt, shape, op)
            handles[(nid, k)] = weakref.ref(h)
            outs.append(h)
        op._outputs = outs
        if foldable:
            _fold_small_ints(graph, op, outs)
        self._last_op = id(op)    # not the op: it would keep its outputs alive
        if _eager.RECORDERS:
            for record in _eager.RECORDERS:
                record(op)
        else:
            op._inputs = _NO_INPUTS
        return op

    # -- GradientTape.gradient as one step of the skeleton ----------------------------------
    def gradient(self, tape, targets, sources, output_gradients):
        """``tape``'s gradients (installed as the autodiff layer's ``GRADIENT_RUNNER``).

        A gradient the trace recorded as one node is matched as one
        (:meth:`_match_gradient`): the graph computes it. Otherwise:
        The gradient ops follow from the ops on the tape, the targets and the sources
        alone: registered gradient functions see an op's type, attributes, dtypes and
        shapes, never values (``df.gradients`` runs the same functions on a graph). So
        once a gradient computed from a node, at a call site, over the same taped nodes
        matched graph nodes, a later step in the same state matches the same nodes with
        the same fed constants: they are taken and fed from the memo, without running
        the gradient functions. Anything that would make the computation differ is in
        the memo key (the node matched last, the call site and its iteration index, the
        taped nodes, the targets and the sources) or keeps it out of the memo (a value
        read, an op run in Python, an outer tape recording, output gradients, a
        fallback); a different shape or path upstream means different taped nodes.
        """
        compute = tape._eager_gradients
        if threading.get_ident() == self.owner:
            self._end_loop()
        if self.recorder is not None and threading.get_ident() == self.owner:
            return self.recorder.record_gradient(tape, targets, sources, output_gradients,
                                                 compute)
        if (threading.get_ident() != self.owner or _eager.RECORDERS):
            return compute(targets, sources, output_gradients)
        sid = self.locator.stack_id(sys._getframe(1))
        stack = stack_of(sid)
        grads = self._match_gradient(tape, targets, sources, output_gradients, stack, sid)
        if grads is not None:
            return grads
        if self._expects_gradient_node(stack):
            # A new gradient where the graph has no gradient ops of its own: fall back
            # now, so that the new trace records it as one node too.
            location = (stack, self.locator.count(sid))
            self._fallback(f"new gradient after node {self.cur}")
            self.recorder.replaying(location)
            try:
                return self.recorder.record_gradient(tape, targets, sources,
                                                     output_gradients, compute)
            finally:
                self.recorder.replaying(None)
        if output_gradients is not None:
            return compute(targets, sources, output_gradients)
        key = self._gradient_key(tape, targets, sources, sid)
        if key is None:
            return compute(targets, sources, output_gradients)
        entry = self.gradient_memo.get(key)
        if entry is not None and not self._segment_differs(entry[0], tape._ops):
            return self._take_gradient(tape, entry, sid)
        start, reads, python_ops = len(self.matched), len(self.read), self._python_ops
        grads = compute(targets, sources, output_gradients)
        if (self.recorder is None and len(self.read) == reads
                and self._python_ops == python_ops):
            entry = self._gradient_entry(tape, start, stack, sid, grads)
            if entry is not None:
                self.gradient_memo[key] = entry
        return grads

    def _gradient_key(self, tape, targets, sources, sid):
        """The memo key of a gradient computation, or None when something in it is not
        a node of this step (an op run in Python on the tape, a target or source that
        is neither a matched output nor a variable).

        A node whose output shapes the graph cannot infer (a Reshape to a shape fed from
        Python) can have other shapes in another step: gradient functions read them and
        make constants from them, so the shapes Python knows for such outputs are part
        of the key (an unknown one, None, is read through an Output Fetching, which
        keeps the computation out of the memo anyway)."""
        dynamic = self._dynamic_nodes
        owned = self._taped_outputs(tape)
        if owned is None:
            return None
        taped = []
        for outs in owned:
            node = outs[0]._node
            taped.append(node)
            if node in dynamic:
                taped.append(tuple(_shape_key(o) for o in outs))
        wired = []
        for t in targets:
            if type(t) is not Handle or t._run is not self:
                return None
            wired.append((t._node, t._value_index, _shape_key(t)
                          if t._node in dynamic else None))
        for s in sources:
            t = getattr(s, "handle", None)
            t = s if t is None else t
            if type(t) is Handle and t._run is self:
                wired.append(("n", t._node, t._value_index, _shape_key(t)
                              if t._node in dynamic else None))
                continue
            name = variable_name(t) if isinstance(t, EagerTensor) else None
            if name is None:
                return None
            wired.append(("v", name))
        return (self.cur, sid, self.locator.counts.get(sid, 0), tuple(taped),
                tuple(wired))

    def _gradient_entry(self, tape, start, stack, sid, grads):
        """What a later step replays: per matched node, its fed inputs (an input of a
        taped op, as ``(op index, input index)``: a forward input such as the batch, fed
        anew from the tape each step; or a constant the gradient functions made from the
        op's static type, attributes and shapes, fed again as it is), the call site's
        count after them and the nodes of the gradients. None when an op inside ran at
        another call site (a user function called from a gradient)."""
        taped_inputs = {id(t): (i, j) for i, op in enumerate(tape._ops)
                        for j, t in enumerate(op._inputs)}
        feeds = self._segment_feeds(start, stack, taped_inputs)
        if feeds is None:
            return None
        inside = {nid for nid, _ in self.matched[start:]}
        results = []
        for g in grads:
            if type(g) is IndexedSlices:   # a sparse gradient (an embedding's)
                parts = tuple(_memo_part(t, self, inside, taped_inputs)
                              for t in (g.values, g.indices, g.dense_shape))
                if _UNMEMOISABLE in parts:
                    return None
                results.append(("s",) + parts)
                continue
            part = _memo_part(g, self, inside, {})
            if part is _UNMEMOISABLE or (part is not None and part[0] != "h"):
                return None
            results.append(part)
        return tuple(feeds), self.locator.counts.get(sid, 0), tuple(results)

    def _take_gradient(self, tape, entry, sid):
        segment, count, results = entry
        taped = tape._ops
        self._take_segment(segment, taped, sid, count)
        made: dict = {}
        grads = []
        for r in results:
            if r is not None and r[0] == "s":
                grads.append(IndexedSlices(*(self._memo_value(p, made, taped)
                                             for p in r[1:])))
            else:
                grads.append(self._memo_value(r, made, taped))
        return grads

    def _memo_value(self, part, made, taped):
        """The tensor a memo entry's result part stands for in this step (see
        :func:`_memo_part`)."""
        if part is None:
            return None
        kind = part[0]
        if kind == "c":
            return part[1]
        if kind == "t":
            return taped[part[1]]._inputs[part[2]]
        _, nid, k, shape = part
        outs = made.get(nid)
        if outs is None:
            outs = made[nid] = self._node_handles(nid)
        h = outs[k]
        if shape is not None:
            h._shape = shape
        return h

    def _segment_differs(self, segment, taped) -> bool:
        """Whether taking memo ``segment`` would feed a shared Input Feeding two values
        (see :meth:`_feeds_differ`); then the memo is not taken and its ops are
        dispatched one by one, which falls back at the op that differs."""
        emit_info = self._emit_info
        sent = self._sent_shared
        here: dict = {}
        for nid, spec in segment:
            shared = emit_info[nid][4]
            if shared is None:
                continue
            keys = emit_info[nid][1]
            for slot, at, t in spec:
                if slot not in shared:
                    continue
                if at is not None:
                    t = taped[at[0]]._inputs[at[1]]
                if _feed_conflicts(here, sent, keys[slot], t):
                    return True
        return False

    def _take_segment(self, segment, taped, sid, count):
        """Match the memo's nodes from the node matched last, sending their edges' Case
        Selects and their feeds (an ``(i, j)`` feed: input ``j`` of ``taped[i]`` now)."""
        send = self.rv.send
        emit_info = self._emit_info
        edge_selects = self._edge_selects
        matched = self.matched
        cur = self.cur
        for nid, spec in segment:
            selects = edge_selects.get((cur, nid))
            if selects:
                for key, case in selects:
                    send(key, case, False)
            fed = _NO_FEEDS
            if spec:
                fed = {}
                for slot, at, t in spec:
                    if at is not None:
                        t = taped[at[0]]._inputs[at[1]]
                    fed[slot] = t
                _, keys, _, _, shared = emit_info[nid]
                self._send_feeds(keys, shared, fed)
            matched.append((nid, fed))
            cur = nid
        self.cur = cur
        self.locator.counts[sid] = count

    # -- Optimizer.apply_gradients as one step of the skeleton ------------------------------
    def apply_gradients(self, optimizer, pairs, global_step, name, apply):
        """``optimizer``'s update (installed as the train layer's ``APPLY_RUNNER``).

        Unlike gradient functions, an optimizer reads Python state: its
        hyper-parameters (a learning rate changed on a schedule), its slots, variable
        constraints. The memo key carries the optimizer's Python attributes by value,
        and an optimizer with any attribute that is not a plain number, string or None
        (a callable or tensor learning rate, say), a variable with a constraint, a
        gradient that is not an output matched in this step, or a ``global_step`` is
        never memoised. The other conditions are :meth:`gradient`'s.
        """
        if threading.get_ident() == self.owner:
            self._end_loop()
        if (self.recorder is not None or threading.get_ident() != self.owner
                or global_step is not None or _eager.RECORDERS):
            return apply(pairs, global_step, name)
        sid = self.locator.stack_id(sys._getframe(1))
        key = self._apply_key(optimizer, pairs, name, sid)
        if key is None:
            return apply(pairs, global_step, name)
        entry = self.gradient_memo.get(key)
        if (entry is not None and entry[3] is optimizer
                and not self._segment_differs(entry[0], _NO_INPUTS)):
            segment, count, returns_op, _ = entry
            self._take_segment(segment, _NO_INPUTS, sid, count)
            if not returns_op:
                return None
            node = self.tg.nodes[segment[-1][0]]
            return EagerOp(_eager._eager_graph(), node.op_type, node.name, _NO_INPUTS,
                           node.attrs)
        start, reads, python_ops = len(self.matched), len(self.read), self._python_ops
        self._last_op = None
        result = apply(pairs, global_step, name)
        # The result is kept as "the last node's op", so it must be that op (alive
        # here, so its id is not reused) with no outputs (a group's NoOp), or None.
        if (self.recorder is None and len(self.read) == reads
                and self._python_ops == python_ops and len(self.matched) > start
                and (result is None or (type(result) is EagerOp
                                        and id(result) == self._last_op
                                        and not result._outputs))):
            feeds = self._segment_feeds(start, stack_of(sid), {})
            if feeds is not None:
                # The entry holds the optimizer: its id in the key cannot be reused by
                # a new optimizer (whose slots are other variables) while the memo lives.
                self.gradient_memo[key] = (feeds, self.locator.counts.get(sid, 0),
                                           result is not None, optimizer)
        return result

    def _apply_key(self, optimizer, pairs, name, sid):
        state = []
        # In the attributes' own order: the same state set in another order is only
        # another key (computed once more), never a wrong hit.
        for attr, value in vars(optimizer).items():
            if attr in _OPTIMIZER_TABLES:
                continue
            if value is not None and type(value) not in _PLAIN:
                return None
            state.append((attr, type(value), value))
        wired = []
        for g, v in pairs:
            if getattr(v, "constraint", None) is not None:
                return None
            handle = getattr(v, "handle", None)
            vname = variable_name(handle) if isinstance(handle, EagerTensor) else None
            if vname is None:
                return None
            if g is None:
                wired.append((None, vname))
            elif type(g) is Handle and g._run is self:
                wired.append((g._node, g._value_index, vname))
            elif type(g) is IndexedSlices:    # an embedding's sparse gradient
                parts = self._slices_key(g)
                if parts is None:
                    return None
                wired.append((parts, vname))
            else:
                return None
        return ("apply", self.cur, sid, self.locator.counts.get(sid, 0), id(optimizer),
                type(optimizer), tuple(state), tuple(wired), name)

    def _slices_key(self, g):
        """An ``IndexedSlices`` gradient's part of an update's memo key: its values and
        indices must be outputs matched in this step; its dense shape such an output,
        or a constant (keyed by value: a memo hit feeds the recorded constant)."""
        parts = []
        for t in (g.values, g.indices, g.dense_shape):
            if type(t) is Handle and t._run is self:
                parts.append((t._node, t._value_index))
            elif t is g.dense_shape and t is None:
                parts.append(None)
            elif t is g.dense_shape and type(t) is EagerTensor:
                value = np.asarray(t._value)
                parts.append((value.dtype.str, value.shape, value.tobytes()))
            else:
                return None
        return tuple(parts)

    def _segment_feeds(self, start, stack, taped_inputs):
        """The matched nodes since ``start`` with their feeds for :meth:`_take_segment`,
        or None when one ran at another call site or has a fed input that is neither a
        taped op's input nor a constant made inside (an EagerTensor)."""
        segment = self.matched[start:]
        nodes = self.tg.nodes
        feeds = []
        for nid, fed in segment:
            if type(nid) is not int or nodes[nid].location[0] != stack:
                return None
            spec = []
            for slot, t in fed.items():
                at = taped_inputs.get(id(t))
                if at is None and type(t) is not EagerTensor:
                    return None
                spec.append((slot, at, t))
            feeds.append((nid, tuple(spec)))
        return tuple(feeds)

    def _node_handles(self, nid):
        """Handles for all outputs of node ``nid`` (matched without running its op)."""
        node = self.tg.nodes[nid]
        op = EagerOp(_eager._eager_graph(), node.op_type, node.name, _NO_INPUTS,
                     node.attrs)
        dynamic = self._dynamic
        outs = []
        for k, (dt, shape) in enumerate(node.out_specs):
            h = Handle(self, nid, k, dt, None if (nid, k) in dynamic else shape, op)
            self.handles[(nid, k)] = weakref.ref(h)
            outs.append(h)
        op._outputs = outs
        return outs

    def _take_edge(self, u, v):
        for key, case in self.step.edge_selects.get((u, v), ()):
            self.rv.send(key, case, False)
        self.cur = v

    # -- reading values ---------------------------------------------------------------------
    def fetch(self, handle):
        """The value of ``handle`` (Output Fetching); a fallback when the graph does not
        send it or the graph step failed."""
        if self._loop is not None and type(handle._node) is tuple:
            self._end_loop()     # a read after the loop of its last iteration's value
        k = (handle._node, handle._value_index)
        if self.recorder is None:
            key = self.step.fetch_keys.get(k)
            if key is not None:
                got = self.rv.poll(key)
                if got is None:
                    self._advance_graph()
                    got = self.rv.poll(key)
                if got is not None and not got[1]:
                    self.read.setdefault(k, len(self.matched))
                    return got[0]
                if self.graph_error is not None:   # the eager re-run raises a real error
                    why = f"graph failed: {type(self.graph_error).__name__}"
                elif got is None:   # the deadlock rule makes this a bug: fall back
                    why = "fetch waits for a feed"
                else:
                    why = "fetch dead"
            else:
                why = f"read of unfetched {self.node_info(handle._node).op_type}"
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
        if self._loop is not None:
            self._end_loop()
        if self.recorder is not None:
            return
        if self.cur not in self.tg.to_end:
            self._fallback("path ends early")
            return
        self._take_edge(self.cur, END)
        self._advance_graph()
        for ref in list(self.handles.values()):
            h = ref()
            if h is not None and not h.has_value():
                h._value           # noqa: B018 - receives it (or falls back)
                if self.recorder is not None:
                    return
        if self.graph_error is not None:
            self._fallback(f"graph failed: {type(self.graph_error).__name__}")
        elif not self._graph_complete:   # everything is sent: a Recv nobody feeds (a bug)
            self._fallback("graph waits for a feed at the end of the step")
        else:
            self._release()

    def _release(self):
        """Drop the finished step's state. Every handle still referenced has its value
        now, but each keeps this run (``_run``) alive, and a handle the next step takes
        as a fed input (a loss kept on ``self``) lands in that step's ``matched``: without
        this, each step kept the previous one -- its executor, rendezvous, fed values
        and variable checkpoint -- and memory grew every step (1.8 MB per step on
        music_transformer, each step's arrays on fresh, page-faulting memory)."""
        self._executor = self.rv = self._flat = None
        self.matched = []
        self.handles = {}
        self.read = {}
        self.cells = self.checkpoint = {}
        self._loop_fed = self._loop_rows = {}
        self._body_locations = {}

    def abort(self):
        """The step function raised while co-executing: bring the state to what eager
        execution would have left (the matched ops re-run), then the error propagates."""
        if self.recorder is None:
            self._fallback("the step raised")

    # -- fallback ---------------------------------------------------------------------------
    def _fallback(self, reason):
        self.reason = reason
        self._loop = None
        if _DEBUG:
            print(f"df.function fallback: {reason}", file=sys.stderr)
        self.rv.cancel(errors.CancelledError(None, None, "df.function: the step left the "
                                             "graph (fallback)"))
        self._executor.cancelled = True   # runs on this thread: it is not running now
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
        replayed = []       # (node id, the op re-run), for gradients matched as one node
        for i, (nid, fed) in enumerate(self.matched):
            if type(fed) is _LoopExit:
                for m, (j, k, _) in enumerate(tg.loops[nid].variables):
                    values[(nid, m)] = values[((nid, j, fed.trips - 1), k)]
                continue
            if type(nid) is tuple:
                node, inputs = self._body_replay_inputs(nid, fed, values)
                sid, n = self._body_locations[nid]
                location = (stack_of(sid), n)
            else:
                node = tg.nodes[nid]
                location = node.location
                if node.op_type == GRADIENT_OP:
                    self._replay_gradient(recorder, nid, fed, values, replayed)
                    continue
                inputs = [self._source_value(src, fed, slot, values)
                          for slot, src in enumerate(node.inputs)]
            handles = []
            for k in range(len(node.out_specs)):
                ref = self.handles.get((nid, k))
                handles.append(ref() if ref is not None else None)
            recorder.replaying(location)
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
            replayed.append((nid[0] if type(nid) is tuple else nid, op))
            for k in range(len(node.out_specs)):
                position = self.read.get((nid, k))
                if position is not None:
                    recorder.note_fetched(i, k, position)

    def _source_value(self, src, fed, slot, values):
        """The replayed value of a node input wired as ``src``."""
        if src[0] == "n":
            return values[(src[1], src[2])]
        if src[0] == "v":
            return self.tg.variables[src[1]]
        return fed[slot]

    def _body_replay_inputs(self, nid, fed, values):
        """Body op ``nid = (loop, j, iteration)``: its BodyOp and replayed inputs."""
        loop, j, t = nid
        spec = self.tg.loops[loop]
        outer = self.tg.nodes[loop].inputs
        b = spec.body[j]
        inputs = []
        for q, src in enumerate(b.inputs):
            kind = src[0]
            if kind == "b":
                inputs.append(values[((loop, src[1], t), src[2])])
            elif kind == "c":
                jj, k, init = spec.variables[src[1]]
                if t > 0:
                    inputs.append(values[((loop, jj, t - 1), k)])
                else:
                    inputs.append(self._source_value(outer[init[1]], fed, q, values))
            elif kind == "x":
                inputs.append(self._source_value(outer[src[1]], fed, q, values))
            else:
                inputs.append(fed[q])
        return b, inputs

    def _replay_gradient(self, recorder, nid, fed, values, replayed):
        """Re-run a gradient matched as one node: ``tape.gradient`` over the re-run ops
        between its sources and targets (all of them were on the tape when it was
        matched, see :meth:`_all_taped`)."""
        node = self.tg.nodes[nid]
        between = self.tg.gradient_between[nid]
        tape = _TapeOps([op for u, op in replayed if u in between])
        n_targets, n_sources = node.attrs["targets"], node.attrs["sources"]
        inputs = [self._source_value(src, fed, slot, values)
                  for slot, src in enumerate(node.inputs)]
        targets = inputs[:n_targets]
        sources = inputs[n_targets:n_targets + n_sources]
        output_gradients = inputs[n_targets + n_sources:] or None
        recorder.replaying(node.location)
        try:
            grads = recorder.record_gradient(
                tape, targets, sources, output_gradients,
                lambda t, s, g: _tape.GradientTape._eager_gradients(tape, t, s, g))
        finally:
            recorder.replaying(None)
        present = [g for g in grads if g is not None]
        handles = []
        for k, g in enumerate(present):
            values[(nid, k)] = g
            ref = self.handles.get((nid, k))
            h = ref() if ref is not None else None
            if h is not None:
                _SLOT.__set__(h, g._value)
            handles.append(h)
        if present:
            stand_in = EagerOp(_eager._eager_graph(), GRADIENT_OP, "gradient", (), {})
            stand_in._outputs = present
            recorder.alias(stand_in, handles)

    # -- folded loops -------------------------------------------------------------------------
    def node_info(self, nid):
        """The node (or folded loop body op) behind handle node ``nid``."""
        if type(nid) is tuple:
            return self.tg.loops[nid[0]].body[nid[1]]
        return self.tg.nodes[nid]

    def _loop_next(self, graph, op_type, inputs, attrs, name, sid, n):
        """The common case of :meth:`_loop_dispatch` while Python runs a folded loop:
        the op is the body's next op, in this iteration or the next one, checked input
        by input against the body op's plan (:func:`_body_plan`) without building the
        op's wiring: the same test as :meth:`_body_matches` (a loop variable in the first
        iteration is checked against the loop node's input that starts it). None when
        it is not; :meth:`_match` then decides (leaving the loop, or a fallback)."""
        state = self._loop
        loop, spec, j, t = state
        recs = self._body_recs[loop]
        starts = j == len(recs)     # the first op of the next iteration
        if starts:
            j = 0
        want_type, want_sid, want_attrs, attrs_key, plan = recs[j]
        if want_type != op_type or want_sid != sid:
            return None
        try:      # one dict comparison settles plain attributes (see _simple_node)
            same = want_attrs is not None and attrs == want_attrs
        except (ValueError, TypeError):
            same = False
        if not same and not _same_attrs(attrs, attrs_key):
            return None
        if len(inputs) != len(plan):
            return None
        this, previous = self._iteration_nodes
        if starts:
            this, previous = (), this
        fed = _NO_FEEDS
        for q, x in enumerate(inputs):
            want = plan[q]
            kind = want[0]
            mine = type(x) is Handle and x._run is self
            if kind == "b":      # an op of this iteration
                if not mine or x._node is not this[want[1]] or x._value_index != want[2]:
                    return None
                continue
            if kind == "c":      # a loop variable: the previous iteration's op
                if previous is not None:
                    if (not mine or x._node is not previous[want[1]]
                            or x._value_index != want[2]):
                        return None
                    continue
                # The first iteration: the value that starts it (as _body_matches).
                want = want[3]
                kind = want[0]
                if kind == "n":
                    if not mine or x._node != want[1] or x._value_index != want[2]:
                        return None
                    continue
                kind = "xv" if kind == "v" else "c0"
            if kind == "xn":     # a value made before the loop
                if not mine or x._node != want[1] or x._value_index != want[2]:
                    return None
                continue
            if mine or not isinstance(x, EagerTensor):
                return None
            vname = variable_name(x) if x._dtype is _RESOURCE else None
            if kind == "xv":     # a variable
                if vname != want[1]:
                    return None
                continue
            if vname is not None:
                return None
            value = x._value
            got = (x._dtype, value.shape if type(value) is np.ndarray else np.shape(value))
            if kind == "xf":     # a loop invariant fed once: the same object every time
                sent = self._loop_fed.get(want[1])
                if not _fits(got, want[2]) or (sent is not None and sent is not x):
                    return None
            elif kind == "c0":   # fed: the first value of a loop variable
                if got != plan[q][4]:
                    return None
            elif got != want[1]:  # "f": fed every iteration
                return None
            if fed is _NO_FEEDS:
                fed = {}
            fed[q] = x
        if starts:
            self._next_iteration(loop, t + 1)
        return self._body_op(graph, op_type, inputs, attrs, name, fed, (sid, n))

    def _enter_loop(self, graph, op_type, inputs, attrs, name, sid, n):
        """The common case of entering a folded loop (see :meth:`_loop_dispatch`): the
        one loop after the node matched last whose entry has this op's type and location,
        its body's first op checked by :meth:`_loop_next`. None (nothing changed) when
        there is none or the op does not fit it."""
        loop = self._entries[self.cur].get((op_type, sid, n))
        if loop is None:
            return None
        spec = self.tg.loops[loop]
        saved = self._iteration_nodes, self._loop_fed, self._loop_rows
        self._loop = [loop, spec, 0, 0]
        self._iteration_nodes = ([None] * len(spec.body), None)
        self._loop_fed = {}
        self._loop_rows = {}
        op = self._loop_next(graph, op_type, inputs, attrs, name, sid, n)
        if op is None:
            self._loop = None
            self._iteration_nodes, self._loop_fed, self._loop_rows = saved
            return None
        # The loop's edge (its Case Selects, the node matched last); nothing above
        # read the node matched last.
        self._take_edge(self.cur, loop)
        return op

    def _leaves_loop(self, op_type, sid) -> bool:
        """Whether an op that :meth:`_loop_next` did not take leaves the folded loop
        Python runs: an iteration is complete and the op is not the body's first (another
        type or call site), so :meth:`_loop_dispatch` would end the loop and match it
        after the loop node."""
        loop, spec, j, _ = self._loop
        return j == len(spec.body) and (spec.body[0].op_type != op_type
                                        or self._body_sids[loop][0] != sid)

    def _next_iteration(self, loop, t):
        """Python starts iteration ``t`` of the folded loop it runs."""
        state = self._loop
        state[2] = 0
        state[3] = t
        self._iteration_nodes = ([None] * len(state[1].body), self._iteration_nodes[0])

    def _loop_dispatch(self, graph, op_type, inputs, attrs, name, output_specs, location,
                       sid, wiring, feed_specs, fed):
        """Match an op against a folded loop: enter a loop that follows the node matched
        last, go on with its body, start its next iteration or leave it. None when the
        op is none of these (the caller falls back)."""
        attrs_key = freeze_attrs(attrs)
        wiring, feed_specs = tuple(wiring), tuple(feed_specs)
        body_location = (sid, location[1])
        if self._loop is None:
            for loop in self._loop_entries.get(self.cur, ()):
                spec = self.tg.loops[loop]
                if (self.tg.nodes[loop].location == location
                        and self._body_matches(loop, spec, 0, 0, op_type, attrs_key, sid,
                                               wiring, feed_specs, fed, {})):
                    self._take_edge(self.cur, loop)
                    self._loop = [loop, spec, 0, 0]
                    self._iteration_nodes = ([None] * len(spec.body), None)
                    self._loop_fed = {}
                    self._loop_rows = {}
                    return self._body_op(graph, op_type, inputs, attrs, name, fed,
                                         body_location)
            return None
        loop, spec, j, t = self._loop
        if j == len(spec.body):
            if self._body_matches(loop, spec, 0, t + 1, op_type, attrs_key, sid, wiring,
                                  feed_specs, fed, self._loop_fed):
                self._next_iteration(loop, t + 1)
                return self._body_op(graph, op_type, inputs, attrs, name, fed, body_location)
            self._end_loop()
            # Matched again now that the last iteration's values are the loop's outputs
            # (the location is computed again: uncount this one).
            self.locator.counts[sid] -= 1
            return self.dispatch(graph, op_type, inputs, attrs, name, output_specs)
        if self._body_matches(loop, spec, j, t, op_type, attrs_key, sid, wiring, feed_specs,
                              fed, self._loop_fed):
            return self._body_op(graph, op_type, inputs, attrs, name, fed, body_location)
        return None

    def _body_matches(self, loop, spec, j, t, op_type, attrs_key, sid, wiring, feed_specs,
                      fed, loop_fed):
        """Whether the op matches body op ``j`` of iteration ``t``; ``loop_fed``: the
        loop's invariant feeds sent so far (input index -> tensor)."""
        b = spec.body[j]
        if (b.op_type != op_type or self._body_sids[loop][j] != sid
                or b.attrs_key != attrs_key or len(b.inputs) != len(wiring)):
            return False
        outer = self.tg.nodes[loop]
        for q, src in enumerate(b.inputs):
            kind = src[0]
            if kind == "b":
                want = ("n", (loop, src[1], t), src[2])
            elif kind == "c":
                jj, k, init = spec.variables[src[1]]
                if t > 0:
                    want = ("n", (loop, jj, t - 1), k)
                else:
                    want = outer.inputs[init[1]]
                    if want == _FED and feed_specs[q] != outer.feed_specs[init[1]]:
                        return False
            elif kind == "x":
                want = outer.inputs[src[1]]
                if want == _FED:   # fed once: the same object in every iteration
                    sent = loop_fed.get(src[1])
                    if (not _fits(feed_specs[q], outer.feed_specs[src[1]])
                            or (sent is not None and sent is not fed.get(q))):
                        return False
            else:
                want = _FED
                if feed_specs[q] != b.feed_specs[q]:
                    return False
            if wiring[q] != want:
                return False
        return True

    def _body_op(self, graph, op_type, inputs, attrs, name, fed, location):
        """The skeleton's op for the loop's next body op (matched): its feeds sent with
        the iteration's key, handles for its outputs; ``location``: ``(stack id,
        iteration index)``, for a replay."""
        state = self._loop
        loop, spec, j, t = state
        state[2] = j + 1
        nk = (loop, j, t)
        self._iteration_nodes[0][j] = nk
        if fed:
            b = spec.body[j]
            body_feeds = self.step.loop_keys[loop][2]
            send = self.rv.send
            for q, tensor in fed.items():
                src = b.inputs[q]
                if src[0] == "c":      # the fed first value of a loop variable
                    key = self._feed_keys[(loop, spec.variables[src[1]][2][1])]
                elif src[0] == "x":    # a loop invariant: fed at its first use
                    if src[1] in self._loop_fed:
                        continue
                    self._loop_fed[src[1]] = tensor
                    key = self._feed_keys[(loop, src[1])]
                else:     # fed with every iteration's value when the loop ends
                    self._loop_rows.setdefault(body_feeds[(j, q)], []).append(tensor._value)
                    continue
                send(key, tensor._value, False)
        else:
            fed = _NO_FEEDS
        self.matched.append((nk, fed))
        self._body_locations[nk] = location
        op = EagerOp(graph, op_type, name or op_type, inputs, attrs)
        return _handles_out(self, op, nk, self._body_out[loop][j])

    def _send_loop_feeds(self, loop, trips):
        """The graph's loop runs ``trips`` iterations, reading row ``t`` of each value
        Python fed per iteration (generate._loop_feeds): both sent as Python leaves it."""
        _, trips_name, body_feeds = self.step.loop_keys[loop]
        send = self.rv.send
        send((PYTHON_DEVICE, GRAPH_DEVICE, trips_name, ()), np.int32(trips), False)
        body = self.tg.loops[loop].body
        for (j, q), name in body_feeds.items():
            dtype = body[j].feed_specs[q][0].as_numpy_dtype
            send((PYTHON_DEVICE, GRAPH_DEVICE, name, ()),
                 np.stack(self._loop_rows[name]).astype(dtype, copy=False), False)

    def _end_loop(self):
        """Python left the loop it was running (if any): the graph's loop gets its trip
        count and per-iteration values, and the handles of the last iteration's values
        become the loop node's outputs. Leaving in the middle of an iteration falls
        back."""
        if self._loop is None:
            return
        loop, spec, j, t = self._loop
        self._loop = None
        if j != len(spec.body):
            self._fallback(f"loop {loop} left in the middle of an iteration")
            return
        self._send_loop_feeds(loop, t + 1)
        done = set()
        for m, (jj, k, _) in enumerate(spec.variables):
            if (jj, k) in done:
                continue
            done.add((jj, k))
            ref = self.handles.get(((loop, jj, t), k))
            h = ref() if ref is not None else None
            if h is not None:
                h._node, h._value_index = loop, m
                self.handles[(loop, m)] = ref
        self.matched.append((loop, _LoopExit(t + 1)))

    # -- gradients matched as one node -------------------------------------------------------
    def _match_gradient(self, tape, targets, sources, output_gradients, stack, sid):
        """Match ``tape.gradient`` against a gradient node (:data:`~.trace.GRADIENT_OP`)
        following the node matched last: handles for its gradients, or None."""
        succ = self._succ[self.cur]
        if not succ:
            return None
        wiring, feed_specs, fed = [], [], {}
        for t in targets:
            if type(t) is not Handle or t._run is not self:
                return None
            wiring.append(("n", t._node, t._value_index))
            feed_specs.append(None)
        for s in sources:
            handle = getattr(s, "handle", None)
            t = s if handle is None else handle
            if type(t) is Handle and t._run is self:
                wiring.append(("n", t._node, t._value_index))
            else:
                name = variable_name(t) if isinstance(t, EagerTensor) else None
                if name is None:
                    return None
                wiring.append(("v", name))
            feed_specs.append(None)
        for g in output_gradients or ():
            if type(g) is Handle and g._run is self:
                wiring.append(("n", g._node, g._value_index))
                feed_specs.append(None)
            elif isinstance(g, EagerTensor):
                fed[len(wiring)] = g
                wiring.append(_FED)
                feed_specs.append((g._dtype, np.shape(g._value)))
            else:
                return None
        counts = self.locator.counts
        n = counts.get(sid, 0)
        attrs_key = (("targets", len(targets)), ("sources", len(sources)))
        nid = succ.get(node_key(GRADIENT_OP, attrs_key, (stack, n), tuple(wiring),
                                tuple(feed_specs)))
        if nid is None or not self._all_taped(tape, nid):
            return None
        counts[sid] = n + 1
        self._take_edge(self.cur, nid)
        for slot, g in fed.items():
            self.rv.send(self._feed_keys[(nid, slot)], g._value, False)
        self.matched.append((nid, fed or _NO_FEEDS))
        node = self.tg.nodes[nid]
        op = EagerOp(_eager._eager_graph(), GRADIENT_OP, "gradient", _NO_INPUTS, {})
        grads, outs = [], []
        for spec in node.out_specs:
            if spec is None:
                grads.append(None)
                continue
            h = Handle(self, nid, len(outs), spec[0], spec[1], op)
            self.handles[(nid, len(outs))] = weakref.ref(h)
            outs.append(h)
            grads.append(h)
        op._outputs = outs
        return grads

    def _expects_gradient_node(self, stack) -> bool:
        """Whether no node after the one matched last is a gradient op run at ``stack``
        (the graph has the gradient as one node, or nothing there)."""
        nodes = self.tg.nodes
        return not any(nodes[v].location[0] == stack and nodes[v].op_type != GRADIENT_OP
                       for v in self._succ[self.cur].values())

    def _all_taped(self, tape, nid) -> bool:
        """Whether every node between the gradient node's sources and targets is on the
        tape now (as when it was traced: then ``df.gradients`` gives the tape's
        gradients)."""
        between = self.tg.gradient_between.get(nid)
        if between is None:
            node = self.tg.nodes[nid]
            n_targets = node.attrs["targets"]
            sources = node.inputs[n_targets:n_targets + node.attrs["sources"]]
            targets = [src[1] for src in node.inputs[:n_targets]]
            between = self.tg.gradient_between[nid] = frozenset(
                gradient_between(self.tg.nodes, sources, targets))
        taped = set()
        for op in tape._ops:      # as _taped_outputs, keeping only the nodes
            outs = op._outputs
            if not outs:
                return False
            h = outs[0]
            if type(h) is not Handle or h._run is not self:
                return False
            node = h._node
            taped.add(node[0] if type(node) is tuple else node)
        return between <= taped

    def _taped_outputs(self, tape):
        """The outputs of each op on ``tape``, or None when one of them is not this
        run's (an op with no output, or one that ran in Python or in another step)."""
        owned = []
        for op in tape._ops:
            outs = op._outputs
            if not outs:
                return None
            h = outs[0]
            if type(h) is not Handle or h._run is not self:
                return None
            owned.append(outs)
        return owned


def _feed_conflicts(here: dict, sent: dict, key, t) -> bool:
    """Whether ``t`` is another value than the one this shared Input Feeding ``key``
    already carries in this check (``here``) or was sent in this step (``sent``);
    otherwise ``t`` is recorded in ``here`` for the inputs that follow."""
    prev = here.get(key)
    if prev is None:
        prev = sent.get(key)
    if prev is not None and not _same_fed_value(prev, t):
        return True
    here[key] = t
    return False


def _same_fed_value(a, b) -> bool:
    """Whether fed tensors ``a`` and ``b`` carry the same value (the same object, or
    equal dtype, shape and elements)."""
    if a is b:
        return True
    if a._dtype is not b._dtype:
        return False
    va, vb = a._value, b._value
    if np.shape(va) != np.shape(vb):
        return False
    try:
        return bool(np.array_equal(va, vb, equal_nan=True))
    except TypeError:      # strings, objects: no NaN
        return bool(np.array_equal(va, vb))


def _fits(spec, pattern) -> bool:
    """A fed ``(dtype, shape)`` fits a loop input's spec (None: any size)."""
    if spec[0] != pattern[0] or len(spec[1]) != len(pattern[1]):
        return False
    for d, p in zip(spec[1], pattern[1]):
        if p is not None and p != d:
            return False
    return True


class _LoopExit:
    """The ``matched`` entry of a folded loop Python left after ``trips`` iterations."""

    __slots__ = ("trips",)

    def __init__(self, trips):
        self.trips = trips


class _TapeOps:
    """A tape's recorded ops, kept for a fallback (a tape forgets them after use)."""

    __slots__ = ("_ops",)

    def __init__(self, ops):
        self._ops = ops
