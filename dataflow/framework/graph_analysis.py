"""Static analyses of a graph that every pass over it shares.

The run plan (:mod:`dataflow.runtime.plan`) and the partitioner
(:mod:`dataflow.partition`) both start the same way: keep only the ops a step needs,
then find the while-loop frame of each; a memory planner or a loop compiler starts
there too. These analyses read only the graph IR, so they live in the framework,
below every pass that uses them:

* :func:`prune`: the ops needed to compute some fetches and run some targets, where
  fed tensors cut the walk (TF's ``PruneForTargets``);
* :func:`fed_placeholder`: whether a fed Placeholder stands in for its feed;
* :func:`infer_frames`: each op's static while-loop :class:`Frame` (TF's
  ``BuildControlFlowInfo``), with the errors a malformed loop gets;
* :func:`reachable`: the ops one iteration of a frame reaches from given ops;
* :func:`switch_diamonds`: the two sides of raw Switch/Merge diamonds (built from
  ``switch`` and ``merge`` without ``cond``), of which one runs per execution.

>>> g = df.Graph()
>>> with g.as_default():
...     x = df.placeholder(df.float32, name="x")
...     two = df.constant(2.0, name="two")
...     y = df.multiply(x, two, name="y")
...     z = df.add(y, two, name="z")
>>> [op.name for op in prune([y], [], fed=set())]
['x', 'two', 'y']
>>> [op.name for op in prune([z], [], fed={y})]
['two', 'z']
>>> frame_of, frames = infer_frames(prune([z], [], fed={x}), fed={x})
>>> sorted(frames), frame_of[z.op].name
([''], '')
"""
from __future__ import annotations

from dataclasses import dataclass

from .. import errors
from . import op_registry as R
from .graph import Operation

__all__ = ["Frame", "prune", "fed_placeholder", "infer_frames", "reachable",
           "switch_diamonds"]


@dataclass(eq=False)
class Frame:
    """A while-loop frame found by :func:`infer_frames` ('' names the root frame).

    ``parent`` is the enclosing Frame (None for the root), ``parallel_iterations`` the
    loop's Enter attribute, ``depth`` the nesting depth (0 for the root).
    """

    name: str
    parent: "Frame | None"
    parallel_iterations: int = 1
    depth: int = 0


def prune(fetch_tensors, target_ops, fed) -> list[Operation]:
    """The ops needed to compute ``fetch_tensors`` and run ``target_ops``, in creation
    order. A tensor in ``fed`` (a set) cuts the walk: its producer is not needed for
    it; a control edge out of a fed Placeholder is satisfied by the feed
    (:func:`fed_placeholder`)."""
    needed: set = set()
    stack = [t.op for t in fetch_tensors if t not in fed] + list(target_ops)
    while stack:
        op = stack.pop()
        if op in needed:
            continue
        needed.add(op)
        for t in op._inputs:
            if t not in fed and t.op not in needed:
                stack.append(t.op)
        for c in op._control_inputs:
            if c not in needed and not fed_placeholder(c, fed):
                stack.append(c)
    return sorted(needed, key=lambda o: o._id)


def fed_placeholder(op: Operation, fed) -> bool:
    """A fed Placeholder is replaced by its feed; as in TF, control edges out of it
    are then satisfied by the feed itself (the op does not run)."""
    return op.type == "Placeholder" and op._outputs[0] in fed


def infer_frames(ops, fed) -> tuple[dict, dict]:
    """``(frame_of, frames)``: each op of ``ops`` (a pruned, closed set such as
    :func:`prune` returns) mapped to its :class:`Frame`, and the frames by name.

    As TF's ``BuildControlFlowInfo``: ops without inputs start in the root frame; an
    op is in the frame of its inputs; an Enter's outputs are in the child frame its
    ``frame_name`` names, an Exit's in the parent frame. Raises InvalidArgumentError
    (naming the op) for a frame entered from two parent frames, an Exit outside any
    loop, an op whose inputs come from different frames, and ops only a cycle reaches.
    """
    needed = set(ops)
    root = Frame("", None)
    frames = {"": root}
    frame_of: dict = {}
    out_edges: dict = {op: [] for op in ops}
    indegree = {}
    for op in ops:
        preds = [t.op for t in op._inputs if t not in fed]
        preds += [c for c in op._control_inputs if c in needed]
        indegree[op] = len(preds)
        for p in preds:
            out_edges[p].append(op)
    queue = [op for op in ops if indegree[op] == 0]
    for op in queue:
        frame_of[op] = root
    i = 0
    while i < len(queue):
        op = queue[i]
        i += 1
        out_f = _output_frame(op, frame_of[op], frames)
        for dst in out_edges[op]:
            have = frame_of.get(dst)
            if have is None:
                frame_of[dst] = out_f
                queue.append(dst)
            elif have is not out_f:
                raise errors.InvalidArgumentError(
                    None, dst, f"Node '{dst.name}' has inputs from different frames: the "
                    f"input '{op.name}' is in frame '{out_f.name or '<root>'}' while other "
                    f"inputs are in frame '{have.name or '<root>'}'.")
    missing = [op for op in ops if op not in frame_of]
    if missing:
        raise errors.InvalidArgumentError(
            None, missing[0], "Node is unreachable from any source: its inputs form a cycle "
            "that no Enter starts (a Merge back edge without an entry?)")
    return frame_of, frames


def _output_frame(op, f, frames) -> Frame:
    """The frame of ``op``'s outputs, given ``op`` runs in ``f`` (creating the child
    frame an Enter opens on first sight)."""
    role = op._op_def.role
    if role == R.ENTER:
        name = op.get_attr("frame_name")
        child = frames.get(name)
        if child is None:
            child = frames[name] = Frame(name, f, op.get_attr("parallel_iterations"),
                                         depth=f.depth + 1)
        elif child.parent is not f:
            raise errors.InvalidArgumentError(
                None, op, f"Frame '{name}' is entered from two different parent frames "
                f"('{child.parent.name}' and '{f.name}')")
        return child
    if role == R.EXIT:
        if f.parent is None:
            raise errors.InvalidArgumentError(
                None, op, "Exit node is not inside a while-loop frame (no Enter leads "
                "to it)")
        return f.parent
    return f


def reachable(start_ops, within=None) -> set:
    """The ops reachable from ``start_ops`` along data and control edges within one
    iteration: the walk does not follow a NextIteration's output (the back edge into
    the next iteration), nor leave ``within`` (a set of ops; None: the whole graph).
    ``start_ops`` themselves are included only when reached again.

    >>> g = df.Graph()
    >>> with g.as_default():
    ...     a = df.constant(1.0, name="a")
    ...     b = a + a
    ...     c = b * b
    >>> sorted(op.name for op in reachable([b.op]))
    ['mul']
    """
    seen: set = set()
    stack = list(start_ops)
    while stack:
        op = stack.pop()
        if op._op_def.role == R.NEXT_ITERATION:
            continue  # its output feeds the next iteration's Merge
        succ = [c for t in op._outputs for c in t._consumers] + op._control_outputs
        for dst in succ:
            if dst not in seen and (within is None or dst in within):
                seen.add(dst)
                stack.append(dst)
    return seen


def switch_diamonds(ops) -> dict:
    """The raw Switch/Merge diamonds among ``ops``: ``{op: (key, branch)}`` for every op
    on one side of one, ``key`` the diamond (the first of its Switches, in ``ops``'
    order), ``branch`` the Switch output (0 false, 1 true) the op depends on.

    Switches on one predicate tensor form one diamond: per execution that predicate
    takes one value, so the ops depending on a false output and those depending on a
    true output never both run. A side holds what depends (data or control edge) on
    its Switch outputs, up to the Merges that join both sides. A diamond is kept only
    when its sides stay within it: every side op has the context (loop, ``cond``
    branch) of its Switches, no op depends on both sides but a joining Merge, and no
    side op depends on a joining Merge (it would run after the diamond); nested and
    crossing ones are left out (their ops are then simply not reported: treating
    them as running is always safe).

    >>> from dataflow.ops import control_flow_ops as cf
    >>> g = df.Graph()
    >>> with g.as_default():
    ...     x = df.placeholder(df.float32, [4], name="x")
    ...     p = df.placeholder(df.bool, [], name="p")
    ...     f, t = cf.switch(x, p)
    ...     y, _ = cf.merge([df.negative(f, name="neg"), df.exp(t, name="exp")])
    >>> sides = switch_diamonds(g.get_operations())
    >>> sorted((op.name, branch) for op, (key, branch) in sides.items())
    [('exp', 1), ('neg', 0)]
    """
    groups: dict = {}      # predicate tensor -> its Switches
    for op in ops:
        if op._op_def.role == R.SWITCH and len(op._inputs) == 2:
            groups.setdefault(op._inputs[1], []).append(op)
    within = set(ops)
    labels: dict = {}      # op -> {key: set of branches}
    sides: dict = {}
    for switches in groups.values():
        side = _diamond_sides(switches, within)
        if side is None:
            continue
        sides[switches[0]] = side
        for op, branch in side.items():
            labels.setdefault(op, {})[switches[0]] = branch
    # A diamond whose Switches lie on a side of another is nested; two diamonds sharing
    # side ops cross: both are left out.
    keep = {key for key in sides if key not in labels
            and all(len(labels.get(sw, ())) == 0 for sw in _switches_of(key, groups))}
    out = {}
    for key in keep:
        side = sides[key]
        if any(len(labels[op]) > 1 and any(k in keep and k is not key for k in labels[op])
               for op in side):
            continue
        for op, branch in side.items():
            out[op] = (key, branch)
    return out


def _switches_of(key, groups):
    return next(sw for sw in groups.values() if sw[0] is key)


def _diamond_sides(switches, within):
    """``{op: branch}`` of the diamond of ``switches`` (one predicate), or None when
    it is not a closed diamond (see :func:`switch_diamonds`)."""
    context = switches[0]._control_flow_context
    if any(sw._control_flow_context is not context for sw in switches):
        return None
    side: dict = {}
    joins = set()
    stack = []
    for sw in switches:
        for branch, t in enumerate(sw._outputs[:2]):
            for c in t._consumers:
                stack.append((c, branch))
        for c in sw._control_outputs:
            return None   # a control edge from a Switch: live on both sides
    while stack:
        op, branch = stack.pop()
        if op not in within:
            continue
        if op._op_def.role == R.MERGE:
            joins.add(op)
            continue
        if op._control_flow_context is not context or op._op_def.role in (
                R.ENTER, R.EXIT, R.NEXT_ITERATION, R.SWITCH):
            return None
        seen = side.get(op)
        if seen is not None:
            if seen != branch:
                return None
            continue
        side[op] = branch
        for t in op._outputs:
            stack.extend((c, branch) for c in t._consumers)
        stack.extend((c, branch) for c in op._control_outputs)
    if not side:
        return None
    for merge in joins:   # a join reads one value from each side, nothing else
        if merge._control_flow_context is not context or len(merge._inputs) != 2:
            return None
        got = []
        for t in merge._inputs:
            if t.op in side:
                got.append(side[t.op])
            elif t.op in switches:
                got.append(t.value_index)
            else:
                return None
        if sorted(got) != [0, 1]:
            return None
    if joins and not reachable(joins, within).isdisjoint(side):
        return None   # a side op reads a join: it runs after the diamond, not in it
    return side
