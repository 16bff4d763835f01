"""Graph generation: a TraceGraph becomes one ``df.Graph`` that runs a whole step.

* Algorithm 1 (:mod:`.case_assignment`) splits the nodes into switch-cases. A
  switch-case with more than one case gets a *Case Select*: an int32 the Python side
  feeds when it takes one of the switch-case's control edges. Case ``j``'s block is
  gated by ``Switch(select == j)``: every op of the block takes the Switch's true output
  (through an Identity, the case's pivot) as a control input, so the blocks of the cases
  not taken run dead, as the branches of a ``cond`` do. A switch-case with one case gets
  no Switch. No value leaves a block through a Merge: a node's identity includes where
  its inputs come from, so a node runs only in steps whose path also ran its producers.
* Each recorded op becomes the same op type with the same attributes and the traced
  output dtypes and shapes.
* Variables are graph variables: one ``VarHandleOp`` per variable with the variable's
  shared name, built with the eager variables' resources, so the graph reads and writes
  the very cells that eager code uses (variables made by the first step, such as
  optimizer slots and beta powers, exist once). Two variable ops of one variable, one of
  them a write, are ordered as the program ordered them (read-after-write,
  write-after-read, write-after-write) by a control edge through a ``ControlTrigger``:
  the earlier op may be in a case not taken (dead), and the later one must still run.
* *Input Feeding*: each fed input is a ``_Recv`` from the Python side (a device of its
  own) and each read or kept output an *Output Fetching* ``_Send`` to it, on the
  runtime's rendezvous. A feed gets the case pivot of its consumer (it is dead, not
  awaited, when the case is not taken) and, as the seed's deadlock rule asks, control
  edges from the Output Fetching ops whose values Python read before it fed this one
  (through ControlTriggers: the fetched node may be dead in this step). Inputs fed
  one Python tensor in every trace (an optimizer's hyper-parameter fed to each
  variable's update) after the same fetches share one ``_Recv``: Python sends it at
  the first of them it meets in a step, and falls back if another of them is then fed
  a different value (see :func:`_share_key`).

* A folded Python loop (:mod:`.loops`) is one ``while_loop``: its variables start from
  the loop node's inputs, its body is one iteration's ops, and it runs while its
  iteration count is below a trip count that Python feeds when it leaves the loop, so
  any trip count runs on the same graph. A value fed every iteration (a loop index,
  a slice bound) is fed then too, all iterations' values stacked, and the body reads
  its iteration's row: the loop's frame receives nothing from Python, so the loop
  compiler can run it as one function. The loop node's outputs are its variables'
  exits.
* A ``GradientTape.gradient`` recorded as one node (:data:`~.trace.GRADIENT_OP`) is
  ``df.gradients`` of its targets with respect to its sources on the generated graph,
  through folded loops as through any ``while_loop``.
Loops that do not fold are unrolled: each iteration's ops are nodes of their own, and
a step with another trip count is another path.

>>> from dataflow.tracer.trace_graph import TraceGraph
>>> from dataflow.tracer.trace import TraceRecorder
>>> from dataflow.tracer.location import Locator
>>> with df.eager_mode():
...     rec = TraceRecorder(Locator())
...     df.framework.eager.RECORDERS.append(rec.record)
...     try:
...         y = df.square(df.constant(3.0))
...         v = float(y)
...     finally:
...         df.framework.eager.RECORDERS.remove(rec.record)
...     tg = TraceGraph(); _ = tg.merge(rec.finish())
>>> step = generate(tg, resources={})
>>> sorted(op.type for op in step.graph.get_operations())
['Square', '_Recv', '_Send']
"""
from __future__ import annotations

import contextlib
import gc

import numpy as np

from .. import dtypes as _dtypes
from ..framework.eager import EagerOp
from ..framework.graph import Graph
from ..framework.tensor_shape import TensorShape
from ..runtime.device_set import DeviceSet
from ..runtime.fusion import fusion_enabled
from ..runtime.host_memory import retain_freed_memory
from ..runtime.kernel_resolver import KernelResolver
from ..runtime.loop_hook import attach_loop_compiler, compile_loops_mode
from ..runtime.partitioned import transfer_keys
from ..runtime.plan import build_plan
from ..runtime.session import ConfigProto
from ..autodiff.gradients import gradients as _gradients
from ..control_flow.while_loop import while_loop as _while_loop
from ..framework.convert import convert_to_tensor
from .case_assignment import assign_cases
from .loops import LOOP_OP
from .trace import GRADIENT_OP, VARIABLE_OPS, is_recorded
from .trace_graph import END, START, TraceGraph

__all__ = ["StepGraph", "generate", "PYTHON_DEVICE", "GRAPH_DEVICE"]

# The Python side is one more device of the step: feeds come from it, fetches go to it.
PYTHON_DEVICE = "/job:localhost/replica:0/task:0/device:PYTHON:0"
GRAPH_DEVICE = "/job:localhost/replica:0/task:0/device:CPU:0"


class StepGraph:
    """A generated step: the graph, its compiled plan and the rendezvous keys the Python
    side uses.

    ``edge_selects[(u, v)]``: the ``(select key, case index)`` pairs to send when the
    Python side takes edge ``u -> v``; ``feed_keys[(node, input)]`` and
    ``fetch_keys[(node, output)]``: rendezvous keys; ``written``: names of the variables
    the graph may write (checkpointed at the start of each step); ``dynamic``: outputs
    whose shape depends on values (their traced shape is not trusted).
    """

    def __init__(self, graph, switch_cases):
        self.graph = graph
        self.switch_cases = switch_cases
        self.plan = None
        self.edge_selects: dict = {}
        self.feed_keys: dict = {}
        self.fetch_keys: dict = {}
        self.written: set = set()
        self.dynamic: set = set()    # (node, output) whose shape depends on values
        # feed_keys values that several fed inputs share (one Input Feeding per
        # distinct fed value): Python sends each once per step.
        self.shared_feeds: frozenset = frozenset()
        # Folded loop node id -> (frame name, trip count tensor name, {(body op, input):
        # tensor name of the stacked per-iteration feed}); all fed when Python leaves
        # the loop (see _loop_feeds).
        self.loop_keys: dict = {}
        self.gradient_ops: set = set()   # ops df.gradients made for gradient nodes
        self._kept = None   # what the next generation may extend (see _Kept), or None


def _key(src, dst, name):
    return (src, dst, name, ())


def _ancestors(tg: TraceGraph, order):
    """Node id -> bit set (an int) of its ancestors (START excluded)."""
    preds: dict = {}
    for u, v in tg.edges:
        if u != START and v != END:
            preds.setdefault(v, []).append(u)
    anc: dict = {}
    for v in order:
        bits = 0
        for u in preds.get(v, ()):
            bits |= anc[u] | (1 << u)
        anc[v] = bits
    return anc


def generate(tg: TraceGraph, resources: dict, config=None, previous=None) -> StepGraph:
    """Build and compile the step graph of ``tg``; ``resources`` is where the graph's
    variable kernels find their cells (the eager graph's).

    ``previous``, the StepGraph generated before ``tg`` last changed, is extended rather
    than rebuilt when it can be (see :func:`_extendable`): its graph, which nothing
    runs any more, gets the new Case Selects, nodes and Output Fetchings and its nodes
    the new pivots and edges; the result is the graph a fresh generation would build
    (names aside), and ``previous`` cannot be used or extended again."""
    order = tg.topological_order()
    rank = {v: i for i, v in enumerate(order)}
    rank[START], rank[END] = -1, len(order)
    switch_cases = assign_cases(sorted(tg.edges, key=lambda e: (rank[e[0]], rank[e[1]])),
                                START, END, order=rank.__getitem__)
    kept = previous._kept if previous is not None else None
    if previous is not None:
        previous._kept = None
    if kept is not None and not _extendable(tg, order, _cases_of(switch_cases), kept):
        kept = None
    g = Graph() if kept is None else kept.graph
    step = StepGraph(g, switch_cases)
    with g.as_default():
        pivots = _build_case_selects(g, step, switch_cases)
        step._kept = _build_nodes(g, step, tg, order, pivots, kept)
    step.shared_feeds = _shared_keys(step.feed_keys)
    config = config or ConfigProto()
    if config.retain_host_memory:
        retain_freed_memory()    # as a Session's first step does: no page faults per step
    resolver = KernelResolver(DeviceSet(g, {}, False), config, resources)
    plan = build_plan(g, [], _step_targets(g, step.gradient_ops), [], resolver.kernel_for,
                      fuse_elementwise=fusion_enabled(config.fuse_elementwise))
    plan.transfers = transfer_keys(plan)
    # Folded loops and their gradient loops: the loop compiler takes the frames it can
    # (a folded loop's frame receives nothing from Python: see _loop_feeds).
    attach_loop_compiler(plan, [], [op for op in g.get_operations()
                                    if op._control_flow_context is None], [],
                         compile_loops_mode(config.compile_loops))
    step.plan = plan
    # The graph, its plan and the kernels compiled for it live as long as this graph.
    # Moved to the oldest generation now, in the step that pays for the generation
    # anyway, rather than by the first generation-1 collection of a later step, which
    # scans them all (12-40 ms a few steps after each generation, on the examples).
    gc.collect(1)
    return step


def _shared_keys(feed_keys) -> frozenset:
    """The rendezvous keys that more than one fed input has."""
    seen, shared = set(), set()
    for key in feed_keys.values():
        (shared if key in seen else seen).add(key)
    return frozenset(shared)


def _step_targets(g, gradient_ops) -> list:
    """The ops the step's plan is asked to run: each op outside ``gradient_ops`` that no
    other op outside them consumes (by a data or control edge), and the stateful ops
    among them. Every op outside ``gradient_ops`` leads to such a target, so the plan
    runs every traced op (Output Fetchings and variable writes included); of what
    ``df.gradients`` built for a gradient node, only what the gradients need (a tape
    over a layer fed its input computes no gradient for that input; TF's gradient
    functions build it, and a Session's pruning drops it: mlp_adam's [64, 128] x
    [128, 64] MatMul). Not all ops: a target is never fused into its consumer's kernel,
    folded or elided, so naming every op left the generated graph without elementwise
    fusion (music_transformer: 21 Mul kernels at 490 us per step where the hand-written
    graph fuses them) and ran its ``VarHandleOp`` s as kernels every step instead of
    folding them."""
    ops = g.get_operations()
    consumed = set()
    for op in ops:
        if op not in gradient_ops:
            consumed.update(t.op for t in op._inputs)
            consumed.update(op._control_inputs)
    return [op for op in ops if (op._op_def.stateful if op in gradient_ops
                                 else op not in consumed)]


def _recv(g, name, dtype, shape):
    op = g.create_op("_Recv", [], {"send_device": PYTHON_DEVICE,
                                   "recv_device": GRAPH_DEVICE, "tensor_name": name,
                                   "dtype": dtype, "shape": shape}, name=name)
    return op


def _build_case_selects(g, step, switch_cases):
    """One Case Select (a fed int32) per switch-case with several cases; returns
    node id -> the pivot op that gates the node's case."""
    pivots: dict = {}
    for s, sc in enumerate(switch_cases):
        if len(sc) < 2:
            continue
        name = f"case_select_{s}"
        select = _recv(g, name, _dtypes.int32, TensorShape([])).outputs[0]
        key = _key(PYTHON_DEVICE, GRAPH_DEVICE, name)
        for j, (block, control) in enumerate(sc):
            for edge in control:
                step.edge_selects.setdefault(edge, []).append((key, np.int32(j)))
            if not block:
                continue
            index = g.create_op("Const", [], {"value": np.int32(j), "dtype": _dtypes.int32},
                                name=f"case_{s}_{j}/index").outputs[0]
            taken = g.create_op("Equal", [select, index], name=f"case_{s}_{j}/taken").outputs[0]
            switch = g.create_op("Switch", [taken, taken], name=f"case_{s}_{j}/switch")
            pivot = g.create_op("Identity", [switch.outputs[1]], name=f"case_{s}_{j}/pivot")
            for v in block:
                pivots[v] = pivot
    return pivots


class _Group:
    """A loop or gradient node in the generated graph: its output tensors and an op that
    runs after all of them (the target of control edges that order variables)."""

    __slots__ = ("outputs", "done")

    def __init__(self, g, name, outputs):
        self.outputs = outputs
        self.done = g.create_op("NoOp", [], name=name)
        for t in outputs:
            if t is not None:
                self.done._add_control_input(t.op)


class _Kept:
    """What a generation built, for the next one to extend (see :func:`generate`): kept
    only for a graph with no Case Select and no folded loop, where no op can be dead
    and every ordering and deadlock edge is a plain control edge."""

    __slots__ = ("graph", "nodes", "num", "built", "handles", "sent", "recvs",
                 "gradient_ops", "shared")

    def __init__(self, graph, tg, built, handles, sent, recvs, gradient_ops, shared):
        self.graph = graph
        self.nodes = tg.nodes          # the list itself: a rebuilt TraceGraph has another
        self.num = len(tg.nodes)
        self.built = built             # node id -> op (a _Group for a gradient)
        self.handles = handles         # variable name -> VarHandleOp output
        self.sent = sent               # (node id, k) -> its Output Fetching (_Send)
        self.recvs = recvs             # (node id, input) -> its Input Feeding (_Recv)
        self.gradient_ops = gradient_ops
        # Each Input Feeding several inputs share: their (node id, input), alias, and
        # the reads before each (the extension keeps it only while these hold).
        self.shared = shared


def _cases_of(switch_cases) -> dict:
    """Node id -> ``(switch-case, case)`` of the nodes a Case Select gates."""
    return {v: (s, j) for s, sc in enumerate(switch_cases) if len(sc) > 1
            for j, (block, _) in enumerate(sc) for v in block}


def _extendable(tg, order, cases, kept) -> bool:
    """Whether the graph in ``kept`` can become ``tg``'s by additions only: ``tg`` has
    the same nodes and more (not rebuilt), and every control edge between two of the
    kept nodes (variable orderings, the deadlock rule's fetch -> feed edges: all plain
    in the kept graph) may stay plain, i.e. the later node is dead whenever the earlier
    one is (:func:`_guards`). Otherwise a fresh graph is built. (A gradient node that
    comes under a Case Select gets the pivot on its outputs, as a fresh one has it.)"""
    if kept.nodes is not tg.nodes:
        return False
    owner = {}
    for u, op in kept.built.items():
        owner[op.done if type(op) is _Group else op] = u
    for (u, _), send in kept.sent.items():
        owner[send] = u
    guards: dict = {}
    nodes = tg.nodes
    for v in order:
        node = nodes[v]
        guards[v] = mine = _guards(node, cases.get(v), guards)
        if v >= kept.num:
            continue
        op = kept.built[v]
        if type(op) is _Group:      # a gradient: no ordering edges, no feeds
            continue
        sources = list(op._control_inputs)
        for slot, src in enumerate(node.inputs):
            if src[0] == "f":
                sources.extend(kept.recvs[(v, slot)]._control_inputs)
        for c in sources:
            u = owner.get(c)
            if u is not None and not guards[u] <= mine:
                return False
    return all(_still_shared(tg, guards, members) for members in kept.shared)


def _shared_inputs(tg, recvs) -> list:
    """Per ``_Recv`` that several fed inputs share, ``((node id, input), alias, reads
    before the node, shape reads before it)`` for each of them."""
    users: dict = {}
    for (v, slot), recv in recvs.items():
        users.setdefault(recv, []).append((v, slot))
    return [tuple(((v, slot), tg.feed_alias.get((v, slot)),
                   frozenset(tg.read_before.get(v, ())),
                   frozenset(tg.shape_read_before.get(v, ())))
                  for v, slot in members)
            for members in users.values() if len(members) > 1]


def _still_shared(tg, guards, members) -> bool:
    """Whether inputs that share an Input Feeding in a kept graph may still share it
    (see :func:`_share_key`): the same alias and reads before them as when it was
    built, and the guards of the one that made it (the first) among each one's."""
    first = members[0][0][0]
    for (v, slot), alias, read, shape_read in members:
        if (tg.feed_alias.get((v, slot)) != alias or not guards[first] <= guards[v]
                or frozenset(tg.read_before.get(v, ())) != read
                or frozenset(tg.shape_read_before.get(v, ())) != shape_read):
            return False
    return True


def _share_key(tg, v, slot, spec, before):
    """What fed input ``slot`` of node ``v`` must have in common with another for the
    two to take one ``_Recv`` (one Input Feeding per distinct fed value): the Python
    tensor they were fed in every trace (``tg.feed_alias``), the same fetches before
    them (the deadlock rule's edges into the ``_Recv`` are then right for each: Python
    sends it at whichever of them it meets first, after the same reads), and the fed
    spec. None for an input that is never shared. (The ``_Recv`` has the guards of the
    input that made it, and only inputs with those guards and maybe more take it: it is
    dead only when all of them are, and live when any of them runs.)"""
    alias = tg.feed_alias.get((v, slot))
    if alias is None:
        return None
    return (alias, frozenset(before), spec)


def _shared_recv(shared, share, mine):
    """The ``_Recv`` made for inputs with ``share`` (see :func:`_share_key`) whose
    maker's guards are among ``mine``, or None."""
    for recv, guards in shared.get(share, ()):
        if guards <= mine:
            return recv
    return None


def _build_nodes(g, step, tg, order, pivots, kept=None):
    """Build ``tg``'s nodes in ``order`` into ``g``; with ``kept`` (its graph is ``g``),
    the nodes it built are taken as they are, given their new pivots, edges and Output
    Fetchings. Returns what the next generation may extend, or None."""
    if kept is None:
        handles: dict = {}  # variable name -> graph VarHandleOp output
        built: dict = {}    # node id -> graph op (a _Group for loops and gradients)
        sent: dict = {}     # (node id, k) -> its Output Fetching (a _Send)
        recvs: dict = {}    # (node id, input) -> its Input Feeding (a _Recv)
        num_kept = 0
    else:
        handles, built, sent, recvs = kept.handles, kept.built, kept.sent, kept.recvs
        num_kept = kept.num
        step.gradient_ops.update(kept.gradient_ops)
    sends = dict(sent)      # (node id, k) -> its Output Fetching, then the
    #                         ControlTrigger after it once a feed needs one
    triggers: dict = {}     # node id -> ControlTrigger after it (variable ordering)
    var_ops: dict = {}      # variable name -> node ids touching it, in order
    partial: dict = {}      # (node id, k) of a dynamic output -> its inferred shape
    # A node's guards: the case pivots it is dead without (its own, its producers').
    # Nothing else makes an op of the root frame dead, so whenever a node runs, every
    # node whose guards are among its own runs too, and an ordering or deadlock edge
    # from such a node needs no ControlTrigger: a plain control edge makes the later
    # node dead only in steps where it is dead anyway (one node less per edge; with no
    # Case Select, none anywhere). See _guards.
    guards: dict = {}
    anc = _ancestors(tg, order)
    shared: dict = {}       # _share_key -> [(a _Recv they share, its maker's guards)]
    for v in order:
        node = tg.nodes[v]
        guards[v] = mine = _guards(node, pivots.get(v), guards)
        reuse = v < num_kept
        group = node.op_type in (LOOP_OP, GRADIENT_OP)
        # The seed's deadlock rule: a feed waits for the fetches Python made before it.
        before = ()
        if ("f",) in node.inputs:
            before = set(tg.read_before.get(v, ()))
            before.update(out for out in tg.shape_read_before.get(v, ())
                          if out in step.dynamic)
        inputs, feeds = [], []
        for slot, src in enumerate(node.inputs):
            kind = src[0]
            if reuse:
                if kind == "f":
                    recv = recvs[(v, slot)]
                    name = recv.get_attr("tensor_name")
                    step.feed_keys[(v, slot)] = _key(PYTHON_DEVICE, GRAPH_DEVICE, name)
                    if name == f"feed_{v}_{slot}":  # its own (or one it made to share)
                        feeds.append(recv)
            elif kind == "n":
                inputs.append(built[src[1]].outputs[src[2]])
            elif kind == "v":
                inputs.append(_variable(g, tg, handles, src[1]))
            else:
                dtype, shape = node.feed_specs[slot]
                share = None if group else _share_key(tg, v, slot, node.feed_specs[slot],
                                                      before)
                recv = None if share is None else _shared_recv(shared, share, mine)
                if recv is None:    # a new Input Feeding: its pivot and deadlock edges
                    recv = _recv(g, f"feed_{v}_{slot}", dtype, TensorShape(shape))
                    feeds.append(recv)
                    if share is not None:
                        shared.setdefault(share, []).append((recv, mine))
                step.feed_keys[(v, slot)] = _key(PYTHON_DEVICE, GRAPH_DEVICE,
                                                 recv.get_attr("tensor_name"))
                recvs[(v, slot)] = recv
                inputs.append(recv.outputs[0])
        pivot = pivots.get(v)
        if reuse:
            op = built[v]
            if not group:
                _note_dynamic_shapes(step, v, op, node, partial, tg.inferred)
            if pivot is not None:
                # A gradient's outputs wait for its pivot (see _build_gradient).
                for t in (op.outputs if group else ()):
                    if t is not None:
                        t.op._add_control_input(pivot)
                if not group:
                    op._add_control_input(pivot)
        elif node.op_type == LOOP_OP:
            op = _build_loop(g, step, v, node, inputs, pivot)
        elif node.op_type == GRADIENT_OP:
            op = _build_gradient(g, step, v, node, inputs, pivot, built, partial)
        else:
            op = g.create_op(node.op_type, inputs, dict(node.attrs),
                             name=f"n{v}_{node.op_type}", output_specs=list(node.out_specs))
            _note_dynamic_shapes(step, v, op, node, partial, tg.inferred)
            if pivot is not None:
                op._add_control_input(pivot)
        built[v] = op
        if pivot is not None:
            for recv in feeds:
                recv._add_control_input(pivot)
        if feeds:
            for u, k in sorted(before):
                done = _fetch_done(g, sends, u, k, guards[u] <= mine)
                for recv in feeds:
                    recv._add_control_input(done)
        earlier = anc[v]
        # A gradient node reads no variable (its sources are the variables' reads); a
        # loop reads the variables of its body, none written before it in the step.
        names = () if node.op_type == GRADIENT_OP else node.variables()
        for name in names:
            for u in var_ops.get(name, ()):
                if (not group and (earlier >> u & 1)
                        and (node.writes or tg.nodes[u].writes)):
                    op._add_control_input(_trigger(g, triggers, built, u,
                                                   guards[u] <= mine))
            var_ops.setdefault(name, []).append(v)
            if node.writes:
                step.written.add(name)
        fetched = set(node.fetched)
        fetched.update(k for k in range(len(op.outputs))
                       if (v, k) in step.dynamic and (v, k) in tg.shape_read)
        for k in sorted(fetched):
            name = f"fetch_{v}_{k}"
            send = sent.get((v, k))
            if send is None:
                send = sent[(v, k)] = sends[(v, k)] = g.create_op(
                    "_Send", [op.outputs[k]], {
                        "send_device": GRAPH_DEVICE, "recv_device": PYTHON_DEVICE,
                        "tensor_name": name}, name=name)
            step.fetch_keys[(v, k)] = _key(GRAPH_DEVICE, PYTHON_DEVICE,
                                           send.get_attr("tensor_name"))
    if pivots or tg.loops:
        return None
    return _Kept(g, tg, built, handles, sent, recvs, step.gradient_ops,
                 _shared_inputs(tg, recvs))


def _build_loop(g, step, v, node, ext, pivot):
    """The ``while_loop`` of folded loop node ``v`` (see the module docstring). Loop
    variable 0 counts iterations; it starts behind the case pivot, so a loop whose case
    is not taken is dead from its first Merge on (its trip count is never awaited)."""
    spec = node.attrs["loop"]
    with g.control_dependencies([pivot] if pivot is not None else None):
        start = g.create_op("Const", [], {"value": np.int32(0), "dtype": _dtypes.int32},
                            name=f"loop_{v}/start").outputs[0]
    initial = [start]
    for j, k, init in spec.variables:
        if init[0] == "x":
            initial.append(ext[init[1]])
        else:   # only read after the loop: the first iteration overwrites it
            dtype, shape = spec.body[j].out_specs[k]
            initial.append(g.create_op(
                "Const", [], {"value": np.zeros(shape.as_list(), dtype.as_numpy_dtype),
                              "dtype": dtype}, name=f"loop_{v}/zeros_{j}_{k}").outputs[0])
    invariants = [TensorShape([])] + [spec.body[j].out_specs[k][1]
                                      for j, k, _ in spec.variables]
    trips_name = f"loop_{v}_trips"
    frame: list = []
    hoisted = _build_invariants(g, v, spec, ext, pivot)
    trips, stacked, body_feeds = _loop_feeds(g, v, spec, hoisted, trips_name, pivot)

    def cond(count, *_):
        frame.append(g._get_control_flow_context().name)
        return g.create_op("Less", [count, trips], name=f"loop_{v}/go").outputs[0]

    def body(count, *variables):
        made = []
        for j, b in enumerate(spec.body):
            if j in hoisted:
                made.append(hoisted[j])
                continue
            inputs = []
            for q, src in enumerate(b.inputs):
                kind = src[0]
                if kind == "b":
                    inputs.append(made[src[1]].outputs[src[2]])
                elif kind == "c":
                    inputs.append(variables[src[1]])
                elif kind == "x":
                    inputs.append(ext[src[1]])
                else:   # this iteration's row of the value fed for every iteration
                    inputs.append(g.create_op(
                        "GatherV2", [stacked[(j, q)], count], {"axis": 0},
                        name=f"loop_{v}/row_{j}_{q}").outputs[0])
            op = g.create_op(b.op_type, inputs, dict(b.attrs), name=f"n{v}_{j}_{b.op_type}",
                             output_specs=list(b.out_specs))
            _note_dynamic_shapes(step, (v, j), op)
            made.append(op)
        one = g.create_op("Const", [], {"value": np.int32(1), "dtype": _dtypes.int32},
                          name=f"loop_{v}/one").outputs[0]
        nxt = g.create_op("AddV2", [count, one], name=f"loop_{v}/count").outputs[0]
        return [nxt] + [made[j].outputs[k] for j, k, _ in spec.variables]

    exits = _while_loop(cond, body, initial, shape_invariants=invariants,
                        name=f"loop_{v}")
    step.loop_keys[v] = (frame[0], trips_name, body_feeds)
    for j, op in hoisted.items():
        _note_dynamic_shapes(step, (v, j), op)
    group = _Group(g, f"loop_{v}/done", list(exits[1:]))
    for op in hoisted.values():     # later variable writes wait for the hoisted reads
        group.done._add_control_input(op)
    return group


def _loop_feeds(g, v, spec, hoisted, trips_name, pivot):
    """The values Python feeds a folded loop, once, when it leaves the loop: its trip
    count, and per body input fed every iteration (a loop index, a slice bound) all the
    iterations' values stacked on a new axis 0, which the body reads row ``count``. The
    frame then has no ``_Recv`` of its own, so the loop compiler can take it (a frame
    that receives from Python per iteration runs interpreted), and a new trip count is
    still the same graph. Returns ``(trips, {(body op, input): stacked tensor},
    {(body op, input): its tensor name})``; each is behind the case pivot."""
    recvs = [_recv(g, trips_name, _dtypes.int32, TensorShape([]))]
    stacked, names = {}, {}
    for j, b in enumerate(spec.body):
        if j in hoisted:
            continue
        for q, src in enumerate(b.inputs):
            if src[0] in ("b", "c", "x"):
                continue
            dtype, shape = b.feed_specs[q]
            names[(j, q)] = name = f"feed_{v}_{j}_{q}"
            recvs.append(_recv(g, name, dtype, TensorShape([None] + list(shape))))
            stacked[(j, q)] = recvs[-1].outputs[0]
    if pivot is not None:
        for recv in recvs:
            recv._add_control_input(pivot)
    return recvs[0].outputs[0], stacked, names


def _build_invariants(g, v, spec, ext, pivot) -> dict:
    """Body ops computed from loop invariants only (a variable's read: the body writes
    no variable), built once before the loop instead of in every iteration: body op
    index -> op. The loop then captures their values, and its gradient loop reads them
    as invariants instead of popping one copy per iteration from a stack."""
    hoisted: dict = {}
    for j, b in enumerate(spec.body):
        if not b.inputs or not (b.op_type == "ReadVariableOp" or is_recorded(b.op_type)
                                and b.op_type not in VARIABLE_OPS):
            continue
        if not all(src[0] == "x" or (src[0] == "b" and src[1] in hoisted)
                   for src in b.inputs):
            continue
        inputs = [ext[src[1]] if src[0] == "x" else hoisted[src[1]].outputs[src[2]]
                  for src in b.inputs]
        with g.control_dependencies([pivot] if pivot is not None else None):
            hoisted[j] = g.create_op(b.op_type, inputs, dict(b.attrs),
                                     name=f"n{v}_{j}_{b.op_type}",
                                     output_specs=list(b.out_specs))
    return hoisted


def _build_gradient(g, step, v, node, inputs, pivot, built, partial):
    """``df.gradients`` for gradient node ``v``: targets, sources and output gradients
    are its inputs; its outputs the gradients the tape gave (None ones left out)."""
    n_targets, n_sources = node.attrs["targets"], node.attrs["sources"]
    targets = inputs[:n_targets]
    sources = inputs[n_targets:n_targets + n_sources]
    grad_ys = inputs[n_targets + n_sources:] or None
    first = len(g.get_operations())
    with _inferred_shapes(built, partial):
        grads = _gradients(targets, sources, grad_ys=grad_ys, name=f"gradient_{v}")
    # What df.gradients built: its unused results (the gradient of a fed input) are
    # pruned, as a Session prunes them (see _step_targets).
    step.gradient_ops.update(g.get_operations()[first:])
    outputs = []
    for s, (grad, spec) in enumerate(zip(grads, node.out_specs)):
        if spec is None:
            continue
        if grad is None:
            raise ValueError(f"df.function: gradient node {v} found no path to source {s} "
                             "that the tape differentiated")
        with g.control_dependencies([pivot] if pivot is not None else None):
            outputs.append(g.create_op("Identity", [convert_to_tensor(grad)],
                                       name=f"gradient_{v}/out_{s}").outputs[0])
    return _Group(g, f"gradient_{v}/done", outputs)


@contextlib.contextmanager
def _inferred_shapes(built, partial):
    """While a gradient node is built, the graph's dynamic outputs show the shapes
    inferred for them, not the traced ones: the gradient functions then build Shape ops
    where a traced shape would be a stale constant (after a Reshape to a fed shape, a
    Sum's gradient would tile to the first trace's shape)."""
    saved = []
    for (u, k), shape in partial.items():
        t = built[u].outputs[k]
        saved.append((t, t._shape))
        t._shape = shape
    try:
        yield
    finally:
        for t, shape in saved:
            t._shape = shape


def _note_dynamic_shapes(step, v, op, node=None, partial=None, inferred=None):
    """Outputs whose shape the graph cannot infer from its inputs' shapes (it depends on
    a fed value or on data: ``Unique``, a shape computed in Python...): the Python side
    must not take their traced shape for granted, so their handles fetch the value when
    the shape is asked for. The graph's tensors carry the traced shapes, so an input
    from such an output stands in with the shape inferred for it (what follows a
    Reshape to a fed shape is dynamic too); ``partial`` keeps those shapes. A folded
    loop's body ops (no ``node``) are inferred from the graph's own input shapes.

    ``inferred`` (the TraceGraph's :attr:`~.trace_graph.TraceGraph.inferred`) keeps each
    node's result from one generation to the next: it follows from the node alone (its
    type, attributes, and its inputs' traced shapes) and the shapes inferred for its
    dynamic inputs, which are the key, so a regeneration infers only new nodes."""
    probe = op
    dynamic_inputs = [] if node is None else [
        slot for slot, src in enumerate(node.inputs)
        if src[0] == "n" and (src[1], src[2]) in step.dynamic]
    key = None
    if inferred is not None:
        key = (v, tuple(partial[node.inputs[slot][1:]]._dims for slot in dynamic_inputs))
        got = inferred.get(key)
        if got is not None:
            _mark_dynamic(step, v, got, partial)
            return
    if dynamic_inputs:
        inputs = list(op.inputs)
        for slot in dynamic_inputs:
            src = node.inputs[slot]
            inputs[slot] = ShapeOnly(inputs[slot].dtype, partial[(src[1], src[2])])
        probe = EagerOp(None, op.type, op.name, inputs, dict(node.attrs))
    try:
        specs = op._op_def.infer(probe)
    except Exception:  # noqa: BLE001 - inference may need values only a run has
        specs = None
    found = tuple((k, TensorShape(None) if specs is None else specs[k][1])
                  for k in range(len(op.outputs))
                  if specs is None or not specs[k][1].is_fully_defined())
    if key is not None:
        inferred[key] = found
    _mark_dynamic(step, v, found, partial)


def _mark_dynamic(step, v, found, partial):
    """Note ``found`` (``(output, inferred shape)`` pairs) of node ``v`` as dynamic."""
    for k, shape in found:
        step.dynamic.add((v, k))
        if partial is not None:
            partial[(v, k)] = shape


class ShapeOnly:
    """A tensor known by dtype and static shape only (no value, no producer), as an
    input of a shape inference outside a graph (a placeholder's view)."""

    __slots__ = ("dtype", "shape")
    op = EagerOp(None, "Placeholder", "Placeholder", (), {})
    graph = None
    name = "Placeholder:0"

    def __init__(self, dtype, shape):
        self.dtype = dtype
        self.shape = shape

    def get_shape(self):
        return self.shape


def _guards(node, pivot, guards) -> frozenset:
    """The case pivots without which ``node`` is dead: its own and those of the nodes
    it reads (a feed is behind its consumer's pivot; a variable handle is never dead).
    Dead values start only at a Case Select's Switch in the root frame, and a node is
    dead exactly when one of its guards is (its case or a producer's was not taken)."""
    mine = frozenset() if pivot is None else frozenset((pivot,))
    for src in node.inputs:
        if src[0] == "n" and guards[src[1]]:
            mine = mine | guards[src[1]]
    return mine


def _fetch_done(g, sends, u, k, live=False):
    """A ControlTrigger after the Output Fetching of ``(u, k)``: live once it was sent
    or skipped (dead). When the consumer is dead whenever ``u`` is (``live``), the
    Output Fetching itself."""
    op = sends[(u, k)]
    if op.type == "_Send" and not live:
        ct = g.create_op("ControlTrigger", [], name=f"{op.name}/done")
        ct._add_control_input(op)
        op = sends[(u, k)] = ct
    return op


def _trigger(g, triggers, built, u, live=False):
    """A ControlTrigger after node ``u``: live once ``u`` ran or was skipped (dead).
    When the later node is dead whenever ``u`` is (``live``: see :func:`_guards`),
    ``u`` itself."""
    if live:
        op = built[u]
        return op.done if type(op) is _Group else op
    ct = triggers.get(u)
    if ct is None:
        ct = triggers[u] = g.create_op("ControlTrigger", [], name=f"n{u}/done")
        op = built[u]
        ct._add_control_input(op.done if type(op) is _Group else op)
    return ct


def _variable(g, tg, handles, name):
    h = handles.get(name)
    if h is None:
        attrs = tg.variables[name]._op._attrs
        with g.control_dependencies(None):
            h = handles[name] = g.create_op("VarHandleOp", [], {
                "dtype": attrs["dtype"], "shape": attrs["shape"], "shared_name": name},
                name=f"var/{name}").outputs[0]
    return h
