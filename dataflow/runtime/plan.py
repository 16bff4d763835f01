"""Compiling a (graph, feeds, fetches) triple into an executable plan.

Everything the executor's per-node loop needs is computed here, once, and
cached by the Session: the pruned node set, each node's static frame, integer
node ids, input-slot offsets in its frame's buffer, the pending-count and
input templates a new iteration copies, out-edges and kernel callables (one
:class:`NodeInfo` per node, with its :class:`Edge` s).

Two rewrites keep constants off the hot path:

* a ``Const`` (and a fed tensor) is folded into its consumers' input templates,
  so it never runs; the Const's control inputs move to the consumer, which
  keeps TF's deadness rule (a node with a dead control input is dead). An op
  whose kernel is registered ``constant`` (a ``VarHandleOp``: its handle is fixed
  once the kernel is built) is folded the same way, its kernel called once here:
  a training step reads each variable through its handle, and the convnet's
  26 handle nodes were a fifth of its step's nodes.
  Merges are never folded into: a constant arriving at a Merge is a live
  input with timing, not a template value.
* frames are inferred statically, as TF's ``BuildControlFlowInfo`` does: a
  node's frame is the frame of its inputs, Enter moves into the child frame
  named by ``frame_name``, Exit back to the parent; conflicts are errors
  (:mod:`dataflow.framework.graph_analysis`, which also prunes to the fetches).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from dataflow.kernels.registry import kernel_is_constant as _kernel_is_constant
from dataflow.kernels.registry import kernel_is_parallel as _kernel_is_parallel

from .. import errors
from ..framework import op_registry as R
from ..framework.graph import Operation, Tensor
from ..framework.graph_analysis import infer_frames, prune
from .devices import device_type
from .fusion import NO_FUSION, fuse_elementwise as _fuse_elementwise

# Role codes used by the executor (small ints compare faster than strings), one per
# OpDef role (dataflow.framework.op_registry).
NORMAL, SWITCH, MERGE, ENTER, EXIT, NEXT_ITERATION, CONTROL_TRIGGER, SEND, RECV = range(9)
_ROLE_CODES = {R.NORMAL: NORMAL, R.SWITCH: SWITCH, R.MERGE: MERGE, R.ENTER: ENTER,
               R.EXIT: EXIT, R.NEXT_ITERATION: NEXT_ITERATION,
               R.CONTROL_TRIGGER: CONTROL_TRIGGER, R.SEND: SEND, R.RECV: RECV}


# Edge delivery modes.
TO_NODE = 0            # data or control edge into a non-Merge node
TO_MERGE = 1           # data edge into a Merge
TO_MERGE_FROM_ENTER = 2  # data edge Enter -> Merge (a dead one kills the Merge, see SEMANTICS)
CONTROL_TO_MERGE = 3   # control edge into a Merge
TO_FETCH = 4           # the value is a fetched result
TO_EXIT = 5            # data edge into an Exit with no other inputs (see executor)
TO_NEXT = 6            # data edge into a NextIteration with no other inputs


class Edge(NamedTuple):
    """One out-edge of a plan node: where one output of the node (or its deadness) goes.

    ``dst_slot`` depends on ``mode``: the absolute input slot written in the
    destination frame's buffer for TO_NODE, TO_EXIT and TO_NEXT (-1: nothing is
    written, the edge only counts down the destination and carries deadness); the
    Merge's data input index (its ``value_index``) for TO_MERGE and
    TO_MERGE_FROM_ENTER; the result index for TO_FETCH; -1 for CONTROL_TO_MERGE.
    """

    out_index: int   # the source output carried; -1: a control edge (deadness only)
    dst_gid: int     # the destination node (-1 for TO_FETCH)
    dst_local: int   # its index in its frame's pending/dead lists (-1 for TO_FETCH)
    dst_slot: int    # see above
    mode: int        # how the executor delivers it: TO_NODE, TO_MERGE, ... (above)


class NodeInfo(NamedTuple):
    """What the executor needs to run one node (``Plan.nodes[gid]``)."""

    role: int        # executor role code: NORMAL, SWITCH, MERGE, ... (above)
    local: int       # index in its frame's pending/dead lists
    base: int        # first input slot in its frame's input buffer
    end: int         # one past its last input slot (a Merge has at least 2: value, index)
    fn: object       # the kernel of a NORMAL or CONTROL_TRIGGER node, else None
    edges: tuple     # out-edges (Edge), in delivery order
    nout: int        # outputs handed on (a Merge whose value_index nobody reads: 1)
    clear: bool      # drop its input values once it ran (root-frame NORMAL nodes)


def _plain_tuples(nodes) -> list:
    """``nodes`` as exact tuples (edges too), in the same field order.

    The executor's scheduler unpacks a node and each of its edges on every step.
    CPython 3.11 unpacks only an exact tuple on its fast path; a NamedTuple goes
    through the iterator protocol, which made the scalar while loop cost 16% more
    instructions per iteration (measured with callgrind). So the scheduler unpacks
    these copies, and everything else reads ``Plan.nodes`` by field name.
    """
    return [tuple(n._replace(edges=tuple(tuple(e) for e in n.edges))) for n in nodes]


@dataclass(eq=False)
class FramePlan:
    """Static description of one while-loop frame (or the root frame)."""

    name: str
    parent: "FramePlan | None"
    parallel_iterations: int = 1
    num_enters: int = 0
    num_nodes: int = 0
    num_slots: int = 0
    pending: list = field(default_factory=list)
    inputs: list = field(default_factory=list)
    ops: list = field(default_factory=list)
    depth: int = 0
    # The loop compiler's runner of this frame (dataflow.runtime.loop_hook), or None:
    # the executor then hands the frame's Enter values to it (Executor._enter).
    compiled: object = None


@dataclass(eq=False)
class Plan:
    """An executable plan.

    ``nodes[gid]`` is the :class:`NodeInfo` of node ``gid`` (its out-edges are
    :class:`Edge` s); ``node_tuples`` holds the same as plain tuples for the
    executor's scheduler loop (see :func:`_plain_tuples`). Nodes are not changed
    once the plan is built.
    """

    nodes: list               # gid -> NodeInfo
    ops: list
    frames: dict
    root: FramePlan
    root_ready: list
    enter_info: dict          # gid -> (child FramePlan, is_constant)
    merge_num_inputs: dict    # gid -> number of data inputs
    fetches: list             # fetched tensors, in result order
    fetch_from_feed: dict     # result index -> feed index (fetching a fed tensor)
    feed_slots: list          # per feed index: [(FramePlan, slot)]
    heavy: list               # gid -> True if its kernel may be worth a worker thread
    num_feeds: int = 0
    # gid -> (send_device, recv_device, tensor_name) of each Send/Recv node: the static
    # part of its rendezvous key (set by dataflow.runtime.partitioned; empty otherwise)
    transfers: dict = field(default_factory=dict)
    fusion: object = None     # the elementwise groups fused into single nodes (fusion.py)
    # frame name -> None (compiled) or why it runs interpreted (dataflow.runtime.loop_hook)
    loop_report: dict = field(default_factory=dict)
    node_tuples: list = field(init=False, repr=False)   # nodes as plain tuples

    def __post_init__(self):
        self.node_tuples = _plain_tuples(self.nodes)


def _role(op: Operation) -> int:
    return _ROLE_CODES[op._op_def.role]


def _frame_plans(frame_of, frames):
    """The analysis' frames (:func:`~dataflow.framework.graph_analysis.infer_frames`) as
    FramePlans, which the layout below fills in. A child frame comes after its parent."""
    plans: dict = {}
    for name, f in frames.items():
        parent = plans[f.parent.name] if f.parent is not None else None
        plans[name] = FramePlan(name, parent, f.parallel_iterations, depth=f.depth)
    return {op: plans[f.name] for op, f in frame_of.items()}, plans


def _foldable_const(op: Operation, fetched_ops: set) -> bool:
    if op in fetched_ops or len(op._outputs) != 1:
        return False
    if op.type != "Const" and (op._inputs or not _kernel_is_constant(op, node_device_type(op))):
        return False
    return all(_role(c) != MERGE for c in op.outputs[0]._consumers)


def _constant_kernel_values(folded, kernel_for) -> dict:
    """The values of the folded ops that are not Consts, from their constant kernels
    (built and called once per plan). An op ``kernel_for`` gives no kernel (a plan
    built for inspection only) leaves ``folded`` and stays a node."""
    values = {}
    for op in [op for op in folded if op.type != "Const"]:
        fn = kernel_for(op)
        if fn is None:
            folded.discard(op)
        else:
            values[op] = fn()
    return values


def build_plan(graph, fetch_tensors, target_ops, feed_tensors, kernel_for, *,
               fold_constants=True, fuse_elementwise=True) -> Plan:
    """Compile the subgraph that computes ``fetch_tensors`` and runs ``target_ops``.

    ``kernel_for(op)`` returns the kernel callable of a normal op (it raises for
    ops without a kernel on their device). ``fuse_elementwise`` runs the fusion pass
    (:mod:`.fusion`): a fused group's root reads the group's inputs, its interior ops
    leave the plan, and ``kernel_for`` gets a ``FusedNode`` for the root.
    """
    fed = set(feed_tensors)
    fed_index = {t: i for i, t in enumerate(feed_tensors)}
    ops = prune(fetch_tensors, target_ops, fed)
    needed = set(ops)
    _check_placeholders(ops, fed)
    frame_of, frames = _frame_plans(*infer_frames(ops, fed))
    for t in fetch_tensors:
        f = frame_of.get(t.op)
        if f is not None and _role(t.op) == EXIT:
            f = f.parent
        if t not in fed and f is not frames[""]:
            raise errors.InvalidArgumentError(
                None, t.op, f"Cannot fetch '{t.name}': it is inside while-loop frame "
                f"'{f.name}'. Fetch the loop's outputs instead.")

    fetched_ops = {t.op for t in fetch_tensors} | set(target_ops)
    folded = {op for op in ops if fold_constants and _foldable_const(op, fetched_ops)}
    kernel_values = _constant_kernel_values(folded, kernel_for)
    fusion = (_fuse_elementwise(ops, frame_of, fed, folded, fetched_ops, node_device_type)
              if fuse_elementwise else NO_FUSION)

    # Control inputs after folding: a folded Const hands its control inputs on.
    def control_preds(op):
        preds = [c for c in op._control_inputs if c in needed and c not in folded]
        for t in fusion.all_inputs_of(op):
            if t.op in folded and t not in fed:
                preds.extend(_const_controls(t.op, needed, folded))
        seen, out = set(), []
        for p in preds:
            if p not in seen:
                seen.add(p)
                out.append(p)
        return out

    forwarders = {op for op in ops if fold_constants and op not in folded
                  and _is_forwarder(op, fetched_ops, fed, folded, control_preds)}
    kept = [op for op in ops if op not in folded and op not in forwarders
            and op not in fusion.absorbed]
    gid_of = {op: i for i, op in enumerate(kept)}

    def producer(t: Tensor) -> Tensor:
        """The tensor that really carries ``t``'s value, looking through forwarders."""
        while t.op in forwarders:
            t = t.op._inputs[0]
        return t

    # Layout: local index and slot range per node, within its frame.
    layout = {}
    for op in kept:
        f = frame_of[op]
        nin = len(fusion.inputs_of(op))
        nslots = max(nin, 2) if _role(op) == MERGE else nin
        layout[op] = (f.num_nodes, f.num_slots, f.num_slots + nslots)
        f.num_nodes += 1
        f.num_slots += nslots
        f.ops.append(op)
    for f in frames.values():
        f.pending = [0] * f.num_nodes
        f.inputs = [None] * f.num_slots

    edges = {op: [] for op in kept}
    feed_slots = [[] for _ in feed_tensors]
    merge_num_inputs = {}
    enter_info = {}
    for op in kept:
        f = frame_of[op]
        local, base, _end = layout[op]
        role = _role(op)
        dynamic = 0
        for i, t in enumerate(fusion.inputs_of(op)):
            if t in fed:
                if role == MERGE:
                    raise errors.InvalidArgumentError(
                        None, op, f"Feeding '{t.name}', an input of Merge, is not supported")
                feed_slots[fed_index[t]].append((f, base + i))
            elif t.op in folded:
                f.inputs[base + i] = kernel_values[t.op] if t.op in kernel_values \
                    else t.op.get_attr("value")
            else:
                dynamic += 1
                src = producer(t)
                if role == MERGE:
                    # The Enter rule looks at the direct input, not through forwarders.
                    mode = TO_MERGE_FROM_ENTER if _role(t.op) == ENTER else TO_MERGE
                    edges[src.op].append(Edge(src._value_index, gid_of[op], local, i, mode))
                elif role in (EXIT, NEXT_ITERATION) and not control_preds(op):
                    edges[src.op].append(Edge(src._value_index, gid_of[op], local, base + i,
                                              TO_EXIT if role == EXIT else TO_NEXT))
                else:
                    edges[src.op].append(Edge(src._value_index, gid_of[op], local, base + i,
                                              TO_NODE))
        ctrl = control_preds(op)
        for c in ctrl:
            mode = CONTROL_TO_MERGE if role == MERGE else TO_NODE
            if c in forwarders:
                # A forwarder is dead exactly when its input value is: the control
                # edge becomes a value edge that stores nothing (slot -1).
                src = producer(c._inputs[0])
                edges[src.op].append(Edge(src._value_index, gid_of[op], local, -1, mode))
            else:
                edges[c].append(Edge(-1, gid_of[op], local, -1, mode))
        if role == MERGE:
            merge_num_inputs[gid_of[op]] = len(op._inputs)
            f.pending[local] = 2 * len(ctrl) + 1
        else:
            f.pending[local] = dynamic + len(ctrl)
        if role == ENTER:
            child = frames[op.get_attr("frame_name")]
            child.num_enters += 1
            enter_info[gid_of[op]] = (child, op.get_attr("is_constant"))

    _drop_implied_control_edges(edges, kept, frame_of, producer)

    fetch_from_feed = {}
    for j, t in enumerate(fetch_tensors):
        if t in fed:
            fetch_from_feed[j] = fed_index[t]
        elif t.op in folded:  # cannot happen: fetched consts are never folded
            raise errors.InternalError(None, t.op, "fetched constant was folded")
        else:
            edges[t.op].append(Edge(t._value_index, -1, -1, j, TO_FETCH))
    idle = _idle_switches(edges, gid_of)

    nodes, heavy = [], []
    for op in kept:
        role = _role(op)
        local, base, end = layout[op]
        fn = kernel_for(fusion.kernel_op(op)) if role in (NORMAL, CONTROL_TRIGGER) else None
        # Root-frame nodes run once per step, so their consumed inputs can be dropped at
        # once (loop iterations free their whole buffer when they finish instead).
        clear = role == NORMAL and frame_of[op] is frames[""] and end > base
        nout = len(op._outputs)
        if role == MERGE and not any(e.out_index == 1 for e in edges[op]):
            nout = 1  # nobody reads value_index: the Merge takes the single-output path
        nodes.append(NodeInfo(role, local, base, end, fn, tuple(edges[op]), nout, clear))
        heavy.append(role == NORMAL and not op._op_def.stateful and _may_be_big(op)
                     and not _kernel_is_parallel(op, node_device_type(op)))

    _keep_heavy_only_if_concurrent(heavy, nodes, kept, frame_of)
    root = frames[""]
    root_ready = [gid_of[op] for op in root.ops if root.pending[layout[op][0]] == 0
                  and _role(op) != MERGE and op not in idle]
    for op in root.ops:
        if _role(op) == MERGE and not any(t not in fed for t in op._inputs):
            raise errors.InvalidArgumentError(None, op, "Merge has no live inputs")
    return Plan(nodes=nodes, ops=kept, frames=frames, root=root, root_ready=root_ready,
                enter_info=enter_info, merge_num_inputs=merge_num_inputs,
                fetches=list(fetch_tensors), fetch_from_feed=fetch_from_feed,
                feed_slots=feed_slots, heavy=heavy, num_feeds=len(feed_tensors),
                fusion=fusion)


def _drop_implied_control_edges(edges, kept_ops, frame_of, producer):
    """Remove control edges whose deadness a data edge into the same node already implies.

    The builders give input-less ops (constants) a control edge from a pivot, and
    folding moves it onto the consumer, which usually reads a value that dies with
    the pivot anyway. A control edge adds nothing when the destination also reads

    * the same source output (or any output of a source whose outputs all die with
      the node), or
    * for a pivot ``Switch(p, p)`` (the cond builder's), output ``k`` of any Switch on
      the same predicate ``p``: that output is dead whenever ``p`` is dead or not ``k``,
      which is exactly when the pivot's output ``k`` is.
    """
    switched = {}  # dst gid -> {(predicate tensor, output index)} of its Switch data inputs
    for src, out in edges.items():
        if _role(src) == SWITCH:
            pred = producer(src._inputs[1])
            for k, dg, _, ds, mode in out:
                if ds >= 0 and mode == TO_NODE:
                    switched.setdefault(dg, set()).add((pred, k))
    for src, out in edges.items():
        if not any(ds == -1 and mode == TO_NODE for _, _, _, ds, mode in out):
            continue
        same_death = _role(src) != SWITCH
        pivot_pred = None
        if _role(src) == SWITCH and producer(src._inputs[0]) is producer(src._inputs[1]):
            pivot_pred = producer(src._inputs[1])
        data = {(k, dg) for k, dg, _, ds, mode in out if ds >= 0 and mode == TO_NODE}
        data_dsts = {dg for _, dg in data}
        kept = []
        for e in out:
            k, dg, dl, ds, mode = e
            if ds == -1 and mode == TO_NODE and (
                    (k, dg) in data or (k < 0 and same_death and dg in data_dsts)
                    or (pivot_pred is not None and k >= 0
                        and (pivot_pred, k) in switched.get(dg, ()))):
                frame_of[kept_ops[dg]].pending[dl] -= 1
                continue
            kept.append(e)
        edges[src] = kept


def _idle_switches(edges, gid_of) -> set:
    """Switches left without out-edges (a cond pivot whose every use was implied): nothing
    schedules them any more, so they are dropped from the sources and their inputs."""
    idle = {op for op, out in edges.items() if _role(op) == SWITCH and not out}
    if idle:
        gids = {gid_of[op] for op in idle}
        for src, out in edges.items():
            if any(e.dst_gid in gids for e in out):
                edges[src] = [e for e in out if e.dst_gid not in gids]
    return idle


_MAX_HEAVY_ANALYSED = 256


def _keep_heavy_only_if_concurrent(heavy, nodes, kept, frame_of):
    """Clear the worker-thread flag of large kernels that can never overlap another one.

    A hand-off to a worker only pays when another large kernel runs meanwhile. Two
    large kernels of one frame can overlap only if neither reaches the other; when
    every pair is ordered (a chain such as matmul -> add -> tanh in an RNN body) the
    executor need not even look. Overlap across iterations of a loop is not counted.
    """
    by_frame = {}
    for gid, h in enumerate(heavy):
        if h:
            by_frame.setdefault(frame_of[kept[gid]], []).append(gid)
    for frame, hs in by_frame.items():
        if len(hs) > _MAX_HEAVY_ANALYSED:
            continue
        reach = {h: _reachable(h, nodes, kept, frame, frame_of) for h in hs}
        for a in hs:
            if all(b == a or b in reach[a] or a in reach[b] for b in hs):
                heavy[a] = False


def _reachable(start, nodes, kept, frame, frame_of) -> set:
    """Nodes of ``frame`` reachable from ``start`` within one iteration."""
    seen, stack = set(), [start]
    while stack:
        gid = stack.pop()
        node = nodes[gid]
        if node.role in (NEXT_ITERATION, EXIT, ENTER) and gid != start:
            continue
        for e in node.edges:
            dg = e.dst_gid
            if dg >= 0 and dg not in seen and frame_of[kept[dg]] is frame:
                seen.add(dg)
                stack.append(dg)
    return seen


def _may_be_big(op) -> bool:
    """False when static shapes prove every input small (scalars in loops, say), or
    when the op only reads its inputs' shapes."""
    from .executor import BIG_BYTES
    if op._op_def.reads_shapes_only:
        return False
    total = 0
    for t in op._inputs:
        n = t.shape.num_elements()
        if n is None or t.dtype.as_numpy_dtype is None:
            return True
        total += n * t.dtype.np.itemsize
    return total >= BIG_BYTES


def _is_forwarder(op, fetched_ops, fed, folded, control_preds) -> bool:
    """Identity-like ops the plan can bypass: one dynamic input, no control inputs."""
    if not op._op_def.forwards_input or op in fetched_ops or len(op._inputs) != 1:
        return False
    t = op._inputs[0]
    return t not in fed and t.op not in folded and not control_preds(op)


def _const_controls(const_op, needed, folded):
    return [c for c in const_op._control_inputs if c in needed and c not in folded] + [
        cc for c in const_op._control_inputs if c in folded
        for cc in _const_controls(c, needed, folded)]


def _check_placeholders(ops, fed):
    """Fail before running on an unfed placeholder that will surely run.

    One with control inputs (a placeholder built in a cond branch takes the branch
    pivot) may be dead in this step; its kernel raises the same error if it runs, as
    TF1's does, so an unfed placeholder of an untaken branch is no error.
    """
    for op in ops:
        if op.type == "Placeholder" and op.outputs[0] not in fed and not op._control_inputs:
            raise errors.InvalidArgumentError(
                None, op, f"You must feed a value for placeholder tensor '{op.name}' with "
                f"dtype {op.get_attr('dtype').name} and shape {op.get_attr('shape')}")


def node_device_type(op: Operation) -> str:
    return device_type(op.device)
