"""Gradients of stateful ops: a variable read passes its gradient to the variable's
handle; assignments and stack handles have none (pushes and pops are differentiated in
``stack_grad``, for second-order gradients through while loops), and neither have
Send/Recv (the partitioner adds them after differentiation)."""
from __future__ import annotations

from ..ops.random_ops import RANDOM_OP_TYPES
from .registry import NotDifferentiable, RegisterGradient


@RegisterGradient("ReadVariableOp")
def _read_grad(op, grad):
    return [grad]


for _t in ("VarHandleOp", "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp",
           "VarIsInitializedOp", "Stack", "StackSize",
           "ResourceApplyAdam", "ReportUninitializedVariables",
           "_Send", "_Recv"):
    NotDifferentiable(_t)

# Random draws have no gradient with respect to their shape, bounds or seeds (TF's
# NotDifferentiable registrations); random_normal's mean/stddev get theirs through
# the Mul/Add the wrapper builds around the draw.
for _t in RANDOM_OP_TYPES:
    NotDifferentiable(_t)
