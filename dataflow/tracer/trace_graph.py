"""The TraceGraph: traces merged into one DAG between a ``START`` and an ``END`` node.

A trace is a path ``START -> op -> op -> ... -> END``. Merging adds its ops as nodes
(an op equal to a node already there is that node) and its consecutive pairs as edges.
Two ops are one node when they agree on type, attributes, program location (call-site
stack and iteration index, :mod:`.location`), input dtypes and shapes, and on where each
input comes from (the same node's output, the same variable, or a feed). The last part
goes beyond the seed's criteria on purpose: every node then has one fixed producer per
input, so a value never has to be merged from alternative producers after a
Switch-Case, and each generated op reads exactly the tensors it read when traced.

>>> tg = TraceGraph()
>>> def op(t, loc, inputs=()):
...     return TraceOp(t, {}, (), (loc, 0), inputs, (None,) * len(inputs),
...                    ((df.float32, df.TensorShape([])),), t)
>>> a = Trace(); a.ops = [op("A", 1), op("B", 2), op("D", 4)]
>>> b = Trace(); b.ops = [op("A", 1), op("C", 3), op("D", 4)]
>>> tg.merge(a), tg.merge(b), tg.merge(b)            # the third adds nothing
(True, True, False)
>>> sorted(tg.edges)
[(-1, 0), (0, 1), (0, 3), (1, 2), (2, -2), (3, 2)]
"""
from __future__ import annotations

from .loops import LOOP_OP, fold_loops
from .trace import GRADIENT_OP, Trace, TraceOp, WRITING_VARIABLE_OPS

__all__ = ["TraceGraph", "Node", "START", "END", "CycleError"]

START = -1
END = -2


class CycleError(ValueError):
    """Merging a trace would make the TraceGraph cyclic (two call sites ran in the
    opposite order in another step)."""


class Node:
    """One node of the TraceGraph: a recorded op with its inputs as node ids."""

    __slots__ = ("id", "key", "op_type", "attrs", "location", "inputs", "feed_specs",
                 "out_specs", "name", "fetched")

    def __init__(self, nid, key, op: TraceOp, inputs):
        self.id = nid
        self.key = key
        self.op_type = op.op_type
        self.attrs = op.attrs
        self.location = op.location
        self.inputs = inputs           # ("n", node id, k) | ("v", name) | ("f",)
        self.feed_specs = op.feed_specs
        self.out_specs = op.out_specs
        self.name = op.name
        self.fetched: set = set()      # output indices Python reads or keeps

    @property
    def writes(self) -> bool:
        return self.op_type in WRITING_VARIABLE_OPS

    def variables(self):
        return [src[1] for src in self.inputs if src[0] == "v"]

    def __repr__(self):
        return f"<Node {self.id} {self.op_type}>"


def node_key(op_type, attrs_key, location, inputs, feed_specs) -> tuple:
    """A node's identity (see the module docstring). Output dtypes and shapes follow
    from the op, its attributes and its inputs' dtypes and shapes (a node input's are
    its producer's; a variable's are fixed; a feed's are in ``feed_specs``)."""
    return (op_type, attrs_key, location, inputs, feed_specs)


class TraceGraph:
    """Nodes, edges (``(u, v)`` with ``START``/``END``) and successors by node key."""

    def __init__(self):
        self.nodes: list = []
        self.by_key: dict = {}
        self.edges: set = set()
        self.succ: dict = {START: {}}      # node id -> {node key: successor id}
        self.to_end: set = set()           # nodes with an edge to END
        self.variables: dict = {}          # variable name -> handle
        self.num_traces = 0                # distinct traces merged
        # node id -> outputs (u, k) that Python read before it fed that node's inputs:
        # the seed's deadlock rule orders those feeds after those fetches.
        self.read_before: dict = {}
        # Outputs whose shape Python read, and per node the shape reads made before it
        # (the generator fetches those whose shape the graph cannot infer: dynamic).
        self.shape_read: set = set()
        self.shape_read_before: dict = {}
        # Folded loops (:mod:`.loops`): spec key -> LoopSpec, loop node id -> LoopSpec,
        # node id -> the loop nodes that follow it; and the traces merged so far, as
        # recorded (a newly found loop body refolds them all: see :meth:`merge`).
        self.loop_specs: dict = {}
        self.loops: dict = {}
        self.loop_entries: dict = {}
        self.traces: list = []
        self.gradient_between: dict = {}   # gradient node id -> nodes it differentiates
        # What graph generation inferred per node (see generate._note_dynamic_shapes),
        # kept for the next generation: a node's ops and inputs never change once merged.
        self.inferred: dict = {}
        # (node id, input) fed -> the (node id, input) that first fed the same Python
        # tensor in every trace through both (itself where the traces disagree): the
        # generator gives such inputs one Input Feeding (see :meth:`_note_feed_aliases`).
        self.feed_alias: dict = {}

    def merge(self, trace: Trace) -> bool:
        """Add ``trace`` (its loops folded, :func:`~.loops.fold_loops`); True if it
        brought a node, an edge or a fetched output that was not there (the generated
        graph must change). CycleError if it would make the graph cyclic (nothing is
        changed then).

        A trace whose loop has a body not seen before rebuilds the graph from every
        trace merged so far, folded again with it: a trace that ran that loop once,
        unrolled until now, becomes the same path as the others."""
        folded = fold_loops(trace, self.loop_specs)
        new_specs = {op.attrs["loop"].key: op.attrs["loop"] for op in folded.ops
                     if op.op_type == LOOP_OP and op.attrs["loop"].key not in self.loop_specs}
        if not new_specs:
            changed = self._merge_folded(folded)
            if changed:
                self.traces.append(trace)
            return changed
        saved = self.__dict__.copy()
        try:
            self.loop_specs = {**self.loop_specs, **new_specs}
            self._rebuild(self.traces + [trace])
        except CycleError:
            self.__dict__.update(saved)
            raise
        self.num_traces = saved["num_traces"] + 1
        return True

    def _rebuild(self, traces):
        """Merge ``traces`` into an empty graph (the loop bodies known are kept)."""
        specs = self.loop_specs
        variables = self.variables
        self.__init__()
        self.loop_specs, self.variables = specs, variables
        for t in traces:
            folded = fold_loops(t, specs)
            for op in folded.ops:
                if op.op_type == LOOP_OP:
                    specs.setdefault(op.attrs["loop"].key, op.attrs["loop"])
            self._merge_folded(folded)
            self.traces.append(t)

    def _merge_folded(self, trace: Trace) -> bool:
        ids, new_nodes, path = [], [], []
        for op in trace.ops:
            inputs = tuple(("n", ids[s[1]], s[2]) if s[0] == "n" else s for s in op.inputs)
            key = node_key(op.op_type, op.attrs_key, op.location, inputs, op.feed_specs)
            nid = self.by_key.get(key)
            if nid is None:
                nid = len(self.nodes) + len(new_nodes)
                new_nodes.append(Node(nid, key, op, inputs))
            ids.append(nid)
        path = [START] + ids + [END]
        new_edges = [e for e in zip(path, path[1:]) if e not in self.edges]
        self._check_acyclic(new_nodes, new_edges)
        for n in new_nodes:
            self.nodes.append(n)
            self.by_key[n.key] = n.id
            self.succ[n.id] = {}
            if n.op_type == LOOP_OP:
                self.loops[n.id] = n.attrs["loop"]
        changed = bool(new_nodes or new_edges)
        if changed:
            self.num_traces += 1
        for u, v in new_edges:
            self.edges.add((u, v))
            if v == END:
                self.to_end.add(u)
            else:
                self.succ[u][self.nodes[v].key] = v
                if v in self.loops:
                    self.loop_entries.setdefault(u, []).append(v)
        for i, k in trace.fetched | trace.alive:
            node = self.nodes[ids[i]]
            if k not in node.fetched:
                node.fetched.add(k)
                changed = True
        for (i, k), position in trace.reads.items():
            for j in range(position, len(trace.ops)):
                if ("f",) in trace.ops[j].inputs:
                    before = self.read_before.setdefault(ids[j], set())
                    if (ids[i], k) not in before:
                        before.add((ids[i], k))
                        changed = True
        for (i, k), position in trace.shape_reads.items():
            out = (ids[i], k)
            if out not in self.shape_read:
                self.shape_read.add(out)
                changed = True
            for j in range(position, len(trace.ops)):
                if ("f",) in trace.ops[j].inputs:
                    before = self.shape_read_before.setdefault(ids[j], set())
                    if out not in before:
                        before.add(out)
                        changed = True
        for name, handle in trace.variables.items():
            self.variables.setdefault(name, handle)
        return self._note_feed_aliases(trace, ids) or changed

    def _note_feed_aliases(self, trace, ids) -> bool:
        """Note which fed inputs of ``trace`` (by ``ids``, its node ids) were fed one
        Python tensor (the same object: an optimizer's hyper-parameter fed to every
        variable's update); True if an input fed like an earlier one in every trace so
        far was not in this one (the graph that shares their Input Feeding must change).
        Only plain nodes' inputs are shared (folded loops and gradient nodes feed their
        own). An alias is kept only while every trace agrees on it, so a graph step's
        check that the values sent agree fails only after a program changed them."""
        aliases = self.feed_alias
        first: dict = {}       # id of a fed tensor -> (node id, input) it fed first
        broken = False
        for j, op in enumerate(trace.ops):
            if not op.feed_ids or op.op_type in (LOOP_OP, GRADIENT_OP):
                continue
            for q, fid in enumerate(op.feed_ids):
                if fid is None:
                    continue
                here = (ids[j], q)
                origin = first.setdefault(fid, here)
                old = aliases.get(here)
                if old is None:
                    aliases[here] = origin
                elif old != origin:
                    broken = broken or old != here
                    aliases[here] = here
        return broken

    def _check_acyclic(self, new_nodes, new_edges):
        succ: dict = {}
        for u, v in self.edges:
            succ.setdefault(u, []).append(v)
        for u, v in new_edges:
            succ.setdefault(u, []).append(v)
        state: dict = {}
        for root in succ:
            if state.get(root):
                continue
            stack = [(root, iter(succ.get(root, ())))]
            state[root] = 1
            while stack:
                u, it = stack[-1]
                v = next(it, None)
                if v is None:
                    state[u] = 2
                    stack.pop()
                elif state.get(v) == 1:
                    raise CycleError(f"ops ran in opposite orders in two steps (node {v})")
                elif not state.get(v):
                    state[v] = 1
                    stack.append((v, iter(succ.get(v, ()))))

    def successors(self, u):
        return [v for (a, v) in self.edges if a == u]

    def topological_order(self) -> list:
        """Node ids (no START/END), each after all its predecessors."""
        indeg = {n.id: 0 for n in self.nodes}
        succ: dict = {}
        for u, v in self.edges:
            succ.setdefault(u, []).append(v)
            if v != END:
                indeg[v] += 1
        ready = sorted(v for v in succ.get(START, []) if v != END)
        for v in ready:
            indeg[v] -= 1
        ready = [v for v in ready if indeg[v] == 0]
        order = []
        while ready:
            u = ready.pop(0)
            order.append(u)
            for v in sorted(succ.get(u, [])):
                if v == END:
                    continue
                indeg[v] -= 1
                if indeg[v] == 0:
                    ready.append(v)
        return order
