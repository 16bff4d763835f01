"""Gradient of SparseSoftmaxCrossEntropyWithLogits (as TF's nn_grad)."""
from __future__ import annotations

from ..ops import array_ops, nn_ops
from ..ops.math_ops import reduce_sum
from .registry import RegisterGradient


@RegisterGradient("SparseSoftmaxCrossEntropyWithLogits")
def _sparse_softmax_xent_grad(op, grad_loss, grad_backprop):
    """The loss's gradient is the kernel's backprop ``softmax - onehot(labels)``; the
    backprop output's own gradient (second order) goes through the softmax Jacobian.
    Labels are integers: they get none."""
    backprop = op.outputs[1]
    grad = array_ops.expand_dims(grad_loss, -1) * backprop
    if grad_backprop is not None and grad_backprop.op.type != "ZerosLike":
        softmax = nn_ops.softmax(op.inputs[0])
        dot = reduce_sum(grad_backprop * softmax, axis=-1, keepdims=True)
        grad = grad + (grad_backprop - dot) * softmax
    return [grad, None]
