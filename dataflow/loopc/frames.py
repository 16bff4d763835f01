"""Recognition: which while-loop frames of a step can run as one compiled function.

From the step's pruned ops and their static frames
(:func:`dataflow.framework.graph_analysis.infer_frames`), :func:`recognize` builds a
:class:`LoopFrame` per frame and says for each one why it must stay interpreted, if it
must. A frame compiles when

* every non-constant Enter feeds exactly one two-input Merge whose other input is a
  NextIteration of the frame (a loop variable: Enter -> Merge <- NextIteration);
  constant Enters (loop invariants) may feed anything;
* every other op of the frame is a Switch, a Merge (a cond inside the loop: Switch/Merge
  pairs on one predicate, or any Merge whose inputs are exclusive at run time), an Exit,
  a ControlTrigger, or an op with a registered lowering (:mod:`.lowering`) that accepts
  it;
* its child frames compile too (they become loops nested in the generated code);
* nothing in it is fed, run as a target, placed off the CPU, or a Send/Recv.

The canonical loop's semantics (each iteration runs every op whose inputs are live; the
loop goes on while its NextIterations are live; each Exit is live in the last iteration
or dead) are checked again at run time by the generated code, which hands anything else
back to the interpreter (see :mod:`.codegen`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

from dataflow.framework import op_registry as R
from dataflow.framework.graph_analysis import infer_frames, prune
from dataflow.runtime.devices import device_type

from .lowering import LOWERINGS

__all__ = ["LoopFrame", "recognize"]

_CONTROL_ROLES = (R.SWITCH, R.MERGE, R.ENTER, R.EXIT, R.NEXT_ITERATION, R.CONTROL_TRIGGER)


@dataclass(eq=False)
class LoopFrame:
    """One while-loop frame, as the code generator sees it.

    ``loop_vars``: ``(enter, merge, next_iteration)`` per loop variable; ``invariants``:
    the constant Enters; ``exits``: its Exit ops; ``ops``: its other ops in creation
    order (Switches, cond Merges, lowered ops, ControlTriggers and the Enters of child
    frames); ``children``: nested frames by name; ``reason``: why it cannot compile
    (None: it can).
    """

    name: str
    enters: list = field(default_factory=list)
    loop_vars: list = field(default_factory=list)
    invariants: list = field(default_factory=list)
    exits: list = field(default_factory=list)
    ops: list = field(default_factory=list)
    children: dict = field(default_factory=dict)
    parent: str = ""
    reason: str | None = None


def recognize(fetch_tensors, target_ops, feed_tensors) -> dict:
    """``{frame name: LoopFrame}`` for every while-loop frame the step runs."""
    fed = set(feed_tensors)
    ops = prune(fetch_tensors, target_ops, fed)
    frame_of, frames = infer_frames(ops, fed)
    needed = set(ops)
    loops = {name: LoopFrame(name, parent=f.parent.name)
             for name, f in frames.items() if f.parent is not None}
    for op in ops:
        role = op._op_def.role
        if role == R.ENTER:
            loops[op.get_attr("frame_name")].enters.append(op)
        f = frame_of[op].name
        if f and role != R.ENTER:
            (loops[f].exits if role == R.EXIT else loops[f].ops).append(op)
        elif f and role == R.ENTER:
            loops[f].ops.append(op)        # the Enter of a child frame of f
    for loop in loops.values():
        if loop.parent:
            loops[loop.parent].children[loop.name] = loop
    targets = set(target_ops)
    # Deepest first: a frame compiles only if its children do.
    for loop in sorted(loops.values(), key=lambda lp: -frames[lp.name].depth):
        loop.reason = _check(loop, needed, fed, targets)
    return loops


def _consumers(op, needed):
    return [c for t in op._outputs for c in t._consumers if c in needed]


def _check(loop: LoopFrame, needed, fed, targets):
    for child in loop.children.values():
        if child.reason is not None:
            return f"nested frame '{child.name}': {child.reason}"
    members = loop.ops + loop.exits
    for op in members + loop.enters:
        if any(t in fed for t in op._outputs):
            return f"op '{op.name}' ({op.type}) is fed"
        if device_type(op.device) != "CPU":
            return f"op '{op.name}' ({op.type}) is on device {op.device}"
    for op in members:
        if op in targets:
            return f"op '{op.name}' ({op.type}) is run as a target inside the loop"
    merges_of_enter = set()
    for e in loop.enters:
        if e._control_outputs:
            return f"Enter '{e.name}' has control outputs"
        if e.get_attr("is_constant"):
            loop.invariants.append(e)
            continue
        users = _consumers(e, needed)
        if len(users) != 1 or users[0]._op_def.role != R.MERGE or len(users[0]._inputs) != 2:
            return (f"Enter '{e.name}' does not feed exactly one two-input Merge "
                    "(not a canonical loop variable)")
        m = users[0]
        other = m._inputs[1] if m._inputs[0].op is e else m._inputs[0]
        nxt = other.op
        if nxt._op_def.role != R.NEXT_ITERATION or nxt not in loop.ops:
            return f"Merge '{m.name}' is not fed by a NextIteration of its frame"
        if _consumers(nxt, needed) != [m] or nxt._control_outputs:
            return f"NextIteration '{nxt.name}' does not feed only its Merge"
        if any(c for c in _consumers(m, needed) if any(t is m._outputs[1]
                                                         for t in c._inputs)):
            return f"Merge '{m.name}': its value_index is read"
        if m._control_inputs:
            return f"Merge '{m.name}' has control inputs"
        loop.loop_vars.append((e, m, nxt))
        merges_of_enter.add(m)
    if not loop.loop_vars:
        return "no loop variable (no Enter -> Merge <- NextIteration)"
    nexts = {nxt for _, _, nxt in loop.loop_vars}
    for op in loop.ops:
        role = op._op_def.role
        if op in merges_of_enter or op in nexts:
            continue
        if role == R.NEXT_ITERATION:
            return f"NextIteration '{op.name}' does not close a loop variable"
        if role == R.MERGE:
            if any(t.op._op_def.role in (R.ENTER, R.NEXT_ITERATION) for t in op._inputs):
                return f"Merge '{op.name}' mixes loop and cond inputs"
            continue
        if role in (R.SWITCH, R.CONTROL_TRIGGER, R.ENTER):
            continue
        if role in (R.SEND, R.RECV):
            return f"op '{op.name}' ({op.type}) sends or receives across devices"
        if role != R.NORMAL:
            return f"op '{op.name}' ({op.type}) has role {role}"
        lowering = LOWERINGS.get(op.type)
        if lowering is None:
            return f"op '{op.name}' ({op.type}) has no loop lowering"
        why = lowering.check(op)
        if why:
            return f"op '{op.name}' ({op.type}): {why}"
    loop.ops = [op for op in loop.ops if op not in merges_of_enter and op not in nexts]
    return None
