"""Elementwise fusion: a plan-time pass that merges trees and DAGs of elementwise ops.

``build_plan`` runs :func:`fuse_elementwise` after pruning, frame inference and constant
folding. The pass finds maximal groups of elementwise float ops (the types in
:data:`FUSABLE`) of one frame, device and dtype whose intermediate values nobody else
reads, and describes each group by a backend-neutral :class:`FusedExpr` (the contract
with the kernels, in :mod:`dataflow.framework.fused_expr`). The user's graph is never
changed: the group's *root* (the op whose value leaves the group) stays
the plan node, reading the group's external inputs, and the interior ops leave the
plan. The root's kernel is the registered ``"FusedElementwise"`` kernel of its device
type, which receives the expression through ``ctx.op.expr`` (``ctx.op`` is a
:class:`FusedNode`); a device type without such a kernel is simply not fused.

What the plan builder makes of ``tanh(x * 2.0 + 1.0)`` (``kernel_for`` is the
Session's kernel lookup)::

    x = df.placeholder(df.float32, [1000])
    y = df.tanh(x * 2.0 + 1.0)          # Mul, AddV2, Tanh: one fused node
    plan = build_plan(df.get_default_graph(), [y], [], [x], kernel_for)
    plan.fusion.exprs[y.op].program
    # (('Mul', (('input', 0), ('const', '0x1.0000000000000p+1'))),
    #  ('AddV2', (('value', 0), ('const', '0x1.0000000000000p+0'))),
    #  ('Tanh', (('value', 1),)))

Dead tokens need no special care: a fused node is dead when any external input is,
exactly as the unfused group's root would be, and the control inputs of folded scalar
constants that became literals move to the root (as folding moves them to a consumer).
Interior ops must have no control edges in or out, must not be fetched and must not
have a fed output; those rules keep every observable value and ordering unchanged.
An error raised by a fused kernel names the root node.

Switches: ``df.ConfigProto(fuse_elementwise=False)`` or ``DATAFLOW_FUSION=0``.
"""
from __future__ import annotations

import heapq
import os
from dataclasses import dataclass, field

import numpy as np

from dataflow.framework.elementwise_table import fusable_ops
from dataflow.framework.fused_expr import CONST, FUSED_OP_TYPE, INPUT, VALUE, FusedExpr
from dataflow.kernels.registry import find_kernel

from .devices import parse_device

__all__ = ["FUSED_OP_TYPE", "FUSABLE", "FusedExpr", "FusedNode", "Fusion", "NO_FUSION",
           "fuse_elementwise", "fusion_enabled"]

#: Fusable op types and their number of inputs: the rows of the elementwise op table with
#: compiled scalar code that map floats to a float of the same dtype, elementwise with
#: NumPy broadcasting (the Relu gradient, ``ReluGrad``, among them).
FUSABLE = fusable_ops()

_FLOAT_DTYPES = ("float32", "float64")


@dataclass(frozen=True)
class FusedNode:
    """What a ``FusedElementwise`` kernel factory sees as ``ctx.op``: the group's root
    op (whose name, device and outputs the node keeps) and its :class:`FusedExpr`."""

    root: object
    expr: FusedExpr
    type = FUSED_OP_TYPE

    name = property(lambda self: self.root.name)
    device = property(lambda self: self.root.device)
    outputs = property(lambda self: self.root.outputs)
    graph = property(lambda self: self.root.graph)

    @property
    def inputs(self):
        return list(self.expr.inputs)

    def get_attr(self, name):
        return self.root.get_attr(name)


@dataclass
class Fusion:
    """The pass's result: ``exprs`` maps each root op to its expression, ``absorbed`` holds
    the interior ops (dropped from the plan), ``members`` each root's whole group."""

    exprs: dict = field(default_factory=dict)
    absorbed: set = field(default_factory=set)
    members: dict = field(default_factory=dict)

    def inputs_of(self, op):
        """The tensors the plan node of ``op`` reads."""
        expr = self.exprs.get(op)
        return op._inputs if expr is None else expr.inputs

    def all_inputs_of(self, op):
        """Every tensor the group of ``op`` reads (interior values and literals too), so
        folded constants hand their control inputs to the root."""
        group = self.members.get(op)
        if group is None:
            return op._inputs
        return [t for m in group for t in m._inputs]

    def kernel_op(self, op):
        """What to look up a kernel for: a :class:`FusedNode` for a root, else ``op``."""
        expr = self.exprs.get(op)
        return op if expr is None else FusedNode(op, expr)

    @property
    def nodes_removed(self) -> int:
        return len(self.absorbed)


NO_FUSION = Fusion()


def fusion_enabled(config_flag: bool = True) -> bool:
    """``config_flag`` (``ConfigProto.fuse_elementwise``) unless ``DATAFLOW_FUSION=0``."""
    return bool(config_flag) and os.environ.get("DATAFLOW_FUSION", "1").strip() != "0"


def fuse_elementwise(ops, frame_of, fed, folded, fetched_ops, kernel_device_type) -> Fusion:
    """Group the fusable ops of ``ops`` (the pruned op set, creation order).

    ``fed``: fed tensors; ``folded``: Const ops folded into their consumers (scalar ones
    become literals); ``fetched_ops``: fetched or target ops (never interior);
    ``kernel_device_type(op)``: the device type whose kernels ``op`` would use.
    """
    candidates = [op for op in ops if _fusable(op)]
    if len(candidates) < 2:
        return NO_FUSION
    uses: dict = {}
    control_sources = set()
    for op in ops:
        for t in op._inputs:
            if t not in fed:
                uses.setdefault(t.op, []).append(op)
        control_sources.update(op._control_inputs)
    cand_set = set(candidates)
    result = Fusion()
    assigned = set()
    # Consumers were created after their producers, so visiting in decreasing creation
    # order meets every op after all of its consumers: an op not taken by then roots
    # its own group.
    for root in reversed(candidates):
        if root in assigned:
            continue
        group = _grow(root, cand_set, assigned, uses, control_sources, fed, frame_of,
                      fetched_ops)
        assigned.update(group)
        if len(group) < 2:
            continue
        expr = _expression(group, root, fed, folded)
        if not expr.inputs or find_kernel(FusedNode(root, expr), kernel_device_type(root)) is None:
            continue
        result.exprs[root] = expr
        result.members[root] = group
        result.absorbed.update(m for m in group if m is not root)
    return result if result.exprs else NO_FUSION


def _fusable(op) -> bool:
    arity = FUSABLE.get(op.type)
    if arity is None or len(op._inputs) != arity or len(op._outputs) != 1:
        return False
    if op._control_inputs:
        return False
    dtype = op._outputs[0].dtype
    return dtype.name in _FLOAT_DTYPES and all(t.dtype == dtype for t in op._inputs)


def _grow(root, cand_set, assigned, uses, control_sources, fed, frame_of, fetched_ops):
    """The largest group rooted at ``root`` whose interior values only the group reads."""
    group = [root]
    members = {root}
    frame, device, dtype = frame_of[root], _device_key(root), root._outputs[0].dtype
    heap, seen = [], set()

    def push_producers(op):
        for t in op._inputs:
            p = t.op
            if t not in fed and p in cand_set and p not in seen:
                seen.add(p)
                heapq.heappush(heap, (-p._id, p._id, p))

    push_producers(root)
    while heap:
        _, _, p = heapq.heappop(heap)
        if (p in assigned or p in fetched_ops or p in control_sources
                or frame_of.get(p) is not frame or _device_key(p) != device
                or p._outputs[0].dtype != dtype or p._outputs[0] in fed
                or any(u not in members for u in uses.get(p, ()))):
            continue
        members.add(p)
        group.append(p)
        push_producers(p)
    group.sort(key=lambda o: o._id)
    return group


def _device_key(op):
    spec = parse_device(op.device) if op.device else None
    if spec is None:
        return ("CPU", 0)
    return (spec.job, spec.replica, spec.task, (spec.device_type or "CPU").upper(),
            spec.device_index or 0)


def _expression(group, root, fed, folded) -> FusedExpr:
    """The SSA program of ``group`` (sorted by creation order; ``root`` comes last)."""
    index = {op: i for i, op in enumerate(group)}
    inputs, input_index, program = [], {}, []
    for op in group:
        args = []
        for t in op._inputs:
            if t not in fed and t.op in index:
                args.append((VALUE, index[t.op]))
            elif t not in fed and t.op in folded and np.ndim(t.op.get_attr("value")) == 0:
                args.append((CONST, float(t.op.get_attr("value")).hex()))
            else:
                k = input_index.get(t)
                if k is None:
                    k = input_index[t] = len(inputs)
                    inputs.append(t)
                args.append((INPUT, k))
        program.append((op.type, tuple(args)))
    assert group[-1] is root
    return FusedExpr(tuple(inputs), tuple(program), root._outputs[0].dtype.name)
