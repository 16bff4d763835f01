"""Gradients of stateful ops: a variable read passes its gradient to the variable's
handle; assignments and stacks have none (the stack-based history of while-loop
gradients is built by the autodiff machinery, not differentiated), and neither have
Send/Recv (the partitioner adds them after differentiation)."""
from __future__ import annotations

from .registry import NotDifferentiable, RegisterGradient


@RegisterGradient("ReadVariableOp")
def _read_grad(op, grad):
    return [grad]


for _t in ("VarHandleOp", "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp",
           "VarIsInitializedOp", "Stack", "StackPush", "StackPop", "StackSize",
           "ResourceApplyAdam", "_Send", "_Recv"):
    NotDifferentiable(_t)
