"""Gradients of variable ops: a read passes its gradient to the variable's handle."""
from __future__ import annotations

from .registry import NotDifferentiable, RegisterGradient


@RegisterGradient("ReadVariableOp")
def _read_grad(op, grad):
    return [grad]


for _t in ("VarHandleOp", "AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp",
           "VarIsInitializedOp"):
    NotDifferentiable(_t)
