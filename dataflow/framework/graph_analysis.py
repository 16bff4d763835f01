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
* :func:`reachable`: the ops one iteration of a frame reaches from given ops.

>>> g = Graph()
>>> with g.as_default():
...     x = placeholder(float32, name="x")
...     two = constant(2.0, name="two")
...     y = multiply(x, two, name="y")
...     z = add(y, two, name="z")
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

__all__ = ["Frame", "prune", "fed_placeholder", "infer_frames", "reachable"]


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

    >>> g = Graph()
    >>> with g.as_default():
    ...     a = constant(1.0, name="a")
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
