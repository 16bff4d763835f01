"""The evaluation order of a step, grouped by control-flow region.

Owl evaluates a graph in the post-order of a depth-first walk from its outputs and
plans memory in that same order. With control flow the order is hierarchical: a
while loop's ops (one iteration of its body) form a contiguous stretch that repeats,
and a ``cond``'s two branches follow one another (only one of them runs). Regions
come from the graph itself: loops from the static frames
(:func:`dataflow.framework.graph_analysis.infer_frames`, so raw loops count too),
cond branches from the ``CondContext`` that ``df.cond`` records on its ops, and from
raw Switch/Merge diamonds (built without ``cond``) as
:func:`dataflow.framework.graph_analysis.switch_diamonds` finds them: the two sides
of one predicate's Switches, one of which runs. A raw diamond it leaves out (nested,
crossing, or read past its Merges) is planned as if both sides ran, which is safe.

The order is a list of events ``("begin", region)``, ``("op", op)``, ``("end",
region)``; an event's index in the list is its time.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..framework import op_registry as R
from ..framework.graph_analysis import switch_diamonds

__all__ = ["RawBranch", "Region", "build_regions", "carried_merges", "evaluation_order"]

ROOT, LOOP, COND, BRANCH = "root", "loop", "cond", "branch"


@dataclass(eq=False)
class Region:
    """A node of the region tree: the root, a while loop (``key`` its frame), a cond
    (``key`` the Switch of its predicate) or one branch of it (``key`` its context)."""

    kind: str
    key: object
    parent: Region | None
    name: str = ""
    ops: list = field(default_factory=list)        # ops directly in this region
    children: list = field(default_factory=list)   # child regions, in creation order
    begin: int = -1
    end: int = -1
    depth: int = 0

    def path(self) -> list:
        out, r = [], self
        while r is not None:
            out.append(r)
            r = r.parent
        return out[::-1]


@dataclass(eq=False)
class RawBranch:
    """The key of one side of a raw Switch/Merge diamond (what a ``CondContext`` is to
    a ``cond`` branch): ``switch`` the diamond's first Switch, ``branch`` its output."""

    switch: object
    branch: bool


class _Builder:
    def __init__(self, ops, frame_of, frames):
        self.frame_of = frame_of
        self.frames = frames
        self.needed = set(ops)
        self.root = Region(ROOT, None, None, "<root>")
        self.regions: dict = {}
        self.loops: dict = {}
        self.contexts = _while_contexts(ops, frame_of)
        self.enters: dict = {}
        self.raw_sides = switch_diamonds(ops)
        self.raw_keys: dict = {}
        for op in ops:
            if op._op_def.role == R.ENTER:
                self.enters.setdefault(op.get_attr("frame_name"), []).append(op)

    def child(self, parent: Region, kind, key, name) -> Region:
        r = self.regions.get((kind, id(key)))
        if r is None:
            r = Region(kind, key, parent, name, depth=parent.depth + 1)
            self.regions[(kind, id(key))] = r
            parent.children.append(r)
        return r

    def loop_region(self, frame) -> Region:
        if frame.parent is None:
            return self.root
        if frame.name not in self.loops:
            self.loops[frame.name] = self.child(self._loop_parent(frame), LOOP, frame,
                                                frame.name)
        return self.loops[frame.name]

    def _loop_parent(self, frame) -> Region:
        """Where a loop sits: in the cond branch its WhileContext was built in, or, for
        a raw loop (no context), in the deepest region its entered values come from."""
        ctx = self.contexts.get(frame.name)
        if ctx is not None:
            return self.cond_chain(self.loop_region(frame.parent),
                                   _cond_contexts(ctx.outer_context))
        best = self.loop_region(frame.parent)
        for enter in self.enters.get(frame.name, []):
            src = enter._inputs[0].op
            if src not in self.needed:
                continue
            r = self.region_of(src)
            if src._op_def.role == R.EXIT:
                r = r.parent  # the region around the loop it leaves
            if r.depth > best.depth and best in r.path():
                best = r
        return best

    def cond_chain(self, region: Region, contexts) -> Region:
        for ctx in contexts:
            switch = ctx.pivot.op._inputs[0].op
            cond = self.child(region, COND, switch, f"cond({switch.name})")
            region = self.child(cond, BRANCH, ctx, f"{cond.name}:{'true' if ctx.branch else 'false'}")
        return region

    def region_of(self, op) -> Region:
        role = op._op_def.role
        if role == R.ENTER:
            frame = self.frames[op.get_attr("frame_name")]
            return self.loop_region(frame)
        frame = self.frame_of[op]
        region = self.loop_region(frame)
        if role == R.EXIT:
            return region
        ctx = op._control_flow_context
        conds = _cond_contexts(ctx)
        owner = _first_while(ctx)
        # A cond's branches are regions only where its context belongs to this frame: the
        # loop's own WhileContext (none for the root); a raw loop's body stays linear.
        if frame.parent is None:
            ok = owner is None
        else:
            expected = self.contexts.get(frame.name)
            ok = expected is not None and owner is expected
        if conds and ok:
            region = self.cond_chain(region, conds)
        side = self.raw_sides.get(op)
        if side is not None:
            region = self.raw_branch(region, *side)
        return region

    def raw_branch(self, region: Region, switch, branch) -> Region:
        """The region of one side of a raw diamond, in ``region`` (its Switches')."""
        key = self.raw_keys.get((switch, branch))
        if key is None:
            key = self.raw_keys[(switch, branch)] = RawBranch(switch, bool(branch))
        cond = self.child(region, COND, switch, f"cond({switch.name})")
        return self.child(cond, BRANCH, key,
                          f"{cond.name}:{'true' if branch else 'false'}")


def _while_contexts(ops, frame_of) -> dict:
    """Frame name -> the WhileContext that built it (absent for raw loops)."""
    out = {}
    for op in ops:
        ctx = op._control_flow_context
        while ctx is not None:
            if ctx.IsWhileContext():
                out.setdefault(ctx.name, ctx)
            ctx = ctx.outer_context
    return out


def _cond_contexts(ctx) -> list:
    """The CondContexts from ``ctx`` outward up to the first WhileContext, outermost first."""
    out = []
    while ctx is not None and ctx.IsCondContext():
        out.append(ctx)
        ctx = ctx.outer_context
    return out[::-1]


def _first_while(ctx):
    while ctx is not None and ctx.IsCondContext():
        ctx = ctx.outer_context
    return ctx


def build_regions(ops, frame_of, frames):
    """``(root, region_of)``: the region tree of ``ops`` and each op's region."""
    b = _Builder(ops, frame_of, frames)
    region_of = {}
    for op in ops:
        r = b.region_of(op)
        region_of[op] = r
        r.ops.append(op)
    return b.root, region_of, b.contexts


def evaluation_order(root: Region, region_of, needed, fed, sinks,
                     forwarded=None) -> list:
    """The events of one step: a post-order DFS from ``sinks`` (fetched and target
    ops, in order) over each region's items, a child region counting as one item;
    a loop's variables' Merges first (``forwarded(op)``: the input tensor whose memory
    ``op``'s output is, or None; default: forwarding ops only)."""
    events: list = []
    _emit(root, region_of, needed, fed, sinks, events, forwarded or _forwarded_input)
    return events


def _item_at(op, region: Region, region_of):
    """The item of ``region`` that holds ``op`` (the op itself or a child region), or
    None when ``op`` is outside ``region``."""
    r = region_of[op]
    if r is region:
        return op
    while r is not None and r.parent is not region:
        r = r.parent
    return r


def _ops_under(region: Region) -> list:
    out = list(region.ops)
    for c in region.children:
        out.extend(_ops_under(c))
    return out


def _preds(item, region, region_of, needed, fed) -> list:
    ops = _ops_under(item) if isinstance(item, Region) else [item]
    inside = set(ops)
    out = []
    for op in ops:
        srcs = []
        for t in op._inputs:
            if t in fed or t.op not in needed:
                continue
            if op._op_def.role == R.MERGE and t.op._op_def.role == R.NEXT_ITERATION:
                continue  # the back edge: the next iteration's value
            srcs.append(t.op)
        srcs += [c for c in op._control_inputs if c in needed]
        for src in srcs:
            if src in inside:
                continue
            it = _item_at(src, region, region_of)
            if it is not None and it is not item and all(it is not o for o in out):
                out.append(it)
    return out


def _emit(region: Region, region_of, needed, fed, sinks, events, forwarded) -> None:
    items = list(region.ops) + list(region.children)
    if region.kind == COND:  # the true branch, then the false one
        items.sort(key=lambda r: -r.key.branch)
        order = items
    else:
        roots = []
        for op in sinks:
            it = _item_at(op, region, region_of) if op in region_of else None
            if it is not None and all(it is not r for r in roots):
                roots.append(it)
        preds = {id(it): _preds(it, region, region_of, needed, fed) for it in items}
        fed_by = {id(p) for ps in preds.values() for p in ps}
        roots += [it for it in items if id(it) not in fed_by] + items  # outputs first
        if region.kind == LOOP:
            # A loop variable's Merge first (after its Enter): it reads the value the
            # last iteration carried, whose block lives to the loop's end only, so
            # nothing of this iteration may be placed (and reuse memory) before it.
            roots = _loop_merges(region, forwarded) + roots
        order = _post_order(roots, lambda it: preds[id(it)])
    region.begin = len(events)
    events.append(("begin", region))
    for it in order:
        if isinstance(it, Region):
            _emit(it, region_of, needed, fed, sinks, events, forwarded)
        else:
            events.append(("op", it))
    region.end = len(events)
    events.append(("end", region))


def _loop_merges(region: Region, forwarded) -> list:
    """The loop variables' Merges of a loop region, a Merge that copies another's value
    (its NextIteration carries that Merge's output, through Switches, identities and
    views: ``forwarded(op)`` is the tensor an op's output is) before that one: each
    copies into its own block, so a Merge must read the value it carries before the
    other Merge of the iteration overwrites it. (In a cycle, a swap or rotation, one
    Merge reads a value already overwritten: the planner gives it a save block.)"""
    merges = _variable_merges(region)
    carried = carried_merges(region, forwarded)
    order: list = []
    seen: set = set()

    def visit(m):
        if m in seen:
            return
        seen.add(m)
        for reader in merges:
            if carried.get(reader) is m:
                visit(reader)
        order.append(m)
    for m in merges:
        visit(m)
    return order


def _variable_merges(region: Region) -> list:
    return [op for op in region.ops if op._op_def.role == R.MERGE and any(
        t.op._op_def.role == R.NEXT_ITERATION for t in op._inputs)]


def carried_merges(region: Region, forwarded=None) -> dict:
    """``{merge: other}`` for the loop variables' Merges of a loop region whose
    NextIteration carries another Merge's value (through Switches, identities and
    views: ``forwarded(op)`` is the tensor an op's output is, or None). Each Merge has
    at most one such ``other``, so the copies form chains and at most simple cycles
    (variables swapped or rotated); a cycle has no order in which every Merge reads
    its value before it is overwritten (the planner's ``merge_saves`` break it).

    >>> from dataflow.framework.graph_analysis import infer_frames
    >>> a0, b0 = df.constant([1.0]), df.constant([2.0])
    >>> _, a, b = df.while_loop(lambda i, a, b: i < 3, lambda i, a, b: (i + 1, b, a),
    ...                         [df.constant(0), a0, b0])
    >>> ops = df.get_default_graph().get_operations()
    >>> frame_of, frames = infer_frames(ops, set())
    >>> root, region_of, _ = build_regions(ops, frame_of, frames)
    >>> pairs = carried_merges(root.children[0])
    >>> sorted((m.name, o.name) for m, o in pairs.items())   # a swap: a cycle of two
    [('while/Merge_1', 'while/Merge_2'), ('while/Merge_2', 'while/Merge_1')]
    """
    forwarded = forwarded or _forwarded_input
    merges = _variable_merges(region)
    mine = set(merges)
    carried = {}
    for m in merges:
        t = next(t for t in m._inputs if t.op._op_def.role == R.NEXT_ITERATION)
        for _ in range(len(region.ops) + 1):
            t = forwarded(t.op) if t is not None and t.op not in mine else t
            if t is None or t.op in mine:
                break
        if t is not None and t.op in mine and t.op is not m:
            carried[m] = t.op
    return carried


def _forwarded_input(op):
    """The tensor ``op``'s output is, when its kernel forwards an input (Switch, Enter,
    NextIteration, an identity); None otherwise."""
    d = op._op_def
    if op._inputs and (d.forwards_input or d.role in (R.SWITCH, R.ENTER, R.EXIT,
                                                      R.NEXT_ITERATION)):
        return op._inputs[0]
    return None


def _post_order(roots, preds) -> list:
    done: set = set()
    order: list = []
    for root in roots:
        if id(root) in done:
            continue
        stack = [(root, iter(preds(root)))]
        done.add(id(root))
        while stack:
            item, it = stack[-1]
            nxt = next((p for p in it if id(p) not in done), None)
            if nxt is None:
                stack.pop()
                order.append(item)
            else:
                done.add(id(nxt))
                stack.append((nxt, iter(preds(nxt))))
    return order
