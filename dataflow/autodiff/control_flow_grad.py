"""Gradients of the control-flow primitives inside ``cond`` (while loops come later).

A cond's gradient is a cond on the same predicate:

* the gradient of a Merge is a Switch of the incoming gradient on the cond's
  predicate, so each branch receives it only when it was taken;
* the gradient of a branch's Switch is a Merge of its output gradients: the
  taken side's real gradient and, on the other side, zeros that exist only when
  that side is taken (made by :func:`gradients._zeros_for`), so the Merge always
  has exactly one live input.
"""
from __future__ import annotations

from ..control_flow.context import get_output_context
from ..ops.control_flow_ops import merge, switch
from ..ops.math_ops import equal
from .registry import NotDifferentiable, RegisterGradient


@RegisterGradient("Switch")
def _switch_grad(op, grad_false, grad_true):
    ctx = op._control_flow_context
    if ctx is not None and ctx.IsCondContext():
        zero_side = (grad_false, grad_true)[1 - ctx.branch]
        if zero_side is None:
            return [None, None]
        return [merge([grad_false, grad_true], name="cond_grad")[0], None]
    # A raw Switch outside any cond: route each side's gradient back on the same pred.
    pred = op.inputs[1]
    back_false = switch(grad_false, pred)[0]
    back_true = switch(grad_true, pred)[1]
    return [merge([back_false, back_true])[0], None]


@RegisterGradient("Merge")
def _merge_grad(op, grad, _value_index_grad):
    ctx = get_output_context(op.inputs[0].op)
    if ctx is not None and ctx.IsCondContext():
        g_false, g_true = switch(grad, ctx.pred, name="cond_grad")
        return [g_false, g_true]
    # A raw Merge: input i gets the gradient when it was the one forwarded.
    index = op.outputs[1]
    return [switch(grad, equal(index, i))[1] for i in range(len(op.inputs))]


@RegisterGradient("Identity")
def _identity_grad(op, grad):
    return [grad]


@RegisterGradient("Snapshot")
def _snapshot_grad(op, grad):
    return [grad]


NotDifferentiable("LoopCond")
NotDifferentiable("ControlTrigger")
NotDifferentiable("NoOp")
NotDifferentiable("StopGradient")
