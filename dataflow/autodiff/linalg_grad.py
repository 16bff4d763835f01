"""Gradients of linear-algebra ops."""
from __future__ import annotations

from ..framework.graph import get_default_graph
from ..ops.array_ops import zeros_like
from .registry import NotDifferentiable, RegisterGradient


@RegisterGradient("Qr")
def _qr_grad(op, dq, dr):
    q, r = op.outputs
    a = op.inputs[0]
    m, n = (a.shape.dims[-2:] if a.shape.ndims is not None else (None, None))
    if m is None or n is None or n > m or (op.get_attr("full_matrices") and m != n):
        raise NotImplementedError(
            f"QrGrad not implemented when ncols > nrows or full_matrices is true and "
            f"ncols != nrows (op '{op.name}', input shape {a.shape})")
    dq = zeros_like(q) if dq is None else dq
    dr = zeros_like(r) if dr is None else dr
    grad = get_default_graph().create_op("QrGrad", [q, r, dq, dr], name="QrGrad").outputs[0]
    grad.set_shape(a.shape)
    return [grad]


NotDifferentiable("QrGrad")
