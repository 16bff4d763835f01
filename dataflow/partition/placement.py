"""Device assignment: which device runs each op of a (pruned) graph.

* An op with a device (from ``df.device(...)``) runs there, as resolved by the
  caller's ``resolve(op)`` (the Session maps undeclared devices to an error or,
  with soft placement, to ``/cpu:0``).
* Control-flow ops without a device are colocated as TensorFlow does: a Switch
  with its data input, an Exit with its input, an Enter and a NextIteration with
  their consumer (the loop's Merge), a Merge with its incoming values (looking
  through Enter and NextIteration). Unplaced Identity-like ops run with their input
  and unplaced constants with their consumer (TF's placer heuristics). Other unplaced
  ops get the default device.
  A Switch runs with its data input, and an Enter or NextIteration that feeds a Merge
  on the Merge's device, even when they name another device (as TensorFlow's
  ``colocate_with`` in the builders; see :func:`_feeds_a_merge`).
* A loop-invariant Enter (``is_constant``) is duplicated on every device that
  consumes it, so each device reads the invariant locally in every iteration (its
  input crosses devices once per parent iteration, not once per iteration).

>>> placement = assign_devices(ops, default="/device:CPU:0")
>>> placement.devices_of(op)
['/device:CPU:0']
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..framework import op_registry as R
from ..framework.device_spec import canonical_device

__all__ = ["Placement", "assign_devices"]

# How an unplaced control-flow op finds its device: a function of the op and the
# devices known so far, returning a device or None (not yet known).
_COLOCATION_RULES: dict = {}


def _colocation_rule(role):
    def register(fn):
        _COLOCATION_RULES[role] = fn
        return fn
    return register


@_colocation_rule(R.SWITCH)
@_colocation_rule(R.EXIT)
def _with_data_input(op, known, consumers):
    return known.get(op._inputs[0].op)


@_colocation_rule(R.ENTER)
@_colocation_rule(R.NEXT_ITERATION)
def _with_consumer(op, known, consumers):
    for c in consumers.get(op, ()):
        d = known.get(c)
        if d is not None:
            return d
    return None


@_colocation_rule(R.MERGE)
def _with_incoming_value(op, known, consumers):
    for t in op._inputs:
        src = t.op
        d = known.get(src)
        if d is None and src._op_def.role in (R.ENTER, R.NEXT_ITERATION) and src._inputs:
            d = known.get(src._inputs[0].op)  # the value the Enter / NextIteration carries
        if d is not None:
            return d
    return None


def _rule_for(op):
    """The colocation rule of an op placed by its neighbours, or None (default device).

    Besides the control-flow primitives, TF's placer heuristics: an Identity-like op
    (``forwards_input``: Identity, LoopCond) runs with its input, and a generator (an
    op without inputs, e.g. a constant) with its consumer, so neither costs a transfer.
    """
    role = op._op_def.role
    rule = _COLOCATION_RULES.get(role)
    if rule is not None or role != R.NORMAL:
        return rule
    if op._op_def.forwards_input and op._inputs:
        return _with_data_input
    if not op._inputs and op._outputs and not op._op_def.stateful:
        return _with_consumer
    return None


def _feeds_a_merge(op, consumers) -> bool:
    """An Enter (not loop-invariant) or NextIteration feeding a Merge always runs on the
    Merge's device, whatever device it names: the executor's Merge treats a dead token
    from an Enter specially (the loop is entered dead), which it can only see when the
    Enter is a direct input, and a Recv waiting on its device's loop Merge must not feed
    that Merge."""
    role = op._op_def.role
    if role == R.ENTER and op.get_attr("is_constant") or role not in (R.ENTER,
                                                                         R.NEXT_ITERATION):
        return False
    return any(c._op_def.role == R.MERGE for c in consumers.get(op, ()))


def _switches_a_computed_value(op, fed) -> bool:
    """A Switch runs with its data input (as TF's ``colocate_with(data)``), whatever
    device it names, unless that input is fed: then the feed reaches any device."""
    return op._op_def.role == R.SWITCH and op._inputs[0] not in fed


@dataclass
class Placement:
    """The devices of each op: one, or several for a duplicated loop-invariant Enter.

    ``device[op]`` is the op's device; ``copies[op]`` lists every device that gets a
    copy of it (``[device[op]]`` except for duplicated Enters).
    """

    device: dict = field(default_factory=dict)
    copies: dict = field(default_factory=dict)

    def devices_of(self, op) -> list:
        return self.copies[op]

    @property
    def all_devices(self) -> list:
        return sorted({d for ds in self.copies.values() for d in ds})


def assign_devices(ops, default: str = "/device:CPU:0", resolve=None, fed=frozenset()):
    """Place ``ops`` (a pruned op list). ``resolve(op)`` maps an op with a device to the
    canonical device it runs on (default: its canonical name). ``fed`` tensors are cut:
    edges out of them do not count as consumers."""
    resolve = resolve or (lambda op: canonical_device(op.device))
    needed = set(ops)
    consumers: dict = {op: [] for op in ops}
    for op in ops:
        for t in op._inputs:
            if t not in fed and t.op in needed:
                consumers[t.op].append(op)
        for c in op._control_inputs:
            if c in needed:
                consumers[c].append(op)
    known: dict = {}
    pending = []
    for op in ops:
        if _feeds_a_merge(op, consumers) or _switches_a_computed_value(op, fed):
            pending.append(op)
        elif op.device:
            known[op] = resolve(op)
        elif _rule_for(op) is not None:
            pending.append(op)
        else:
            known[op] = default
    changed = True
    while pending and changed:  # a fixpoint: colocation follows chains of control flow
        changed, left = False, []
        for op in pending:
            d = _rule_for(op)(op, known, consumers)
            if d is None:
                left.append(op)
            else:
                known[op] = d
                changed = True
        pending = left
    for op in pending:
        known[op] = resolve(op) if op.device else default
    placement = Placement(device=known)
    for op in ops:
        placement.copies[op] = [known[op]]
        if op._op_def.role == R.ENTER and op.get_attr("is_constant"):
            users = sorted({known[c] for c in consumers[op]})
            if users:
                placement.copies[op] = users
    return placement
