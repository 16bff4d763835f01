"""Gradients of the neural-network ops (TF's nn_grad)."""
from __future__ import annotations

from ..ops import array_ops, grad_ops, math_ops, nn_ops
from ..ops.math_ops import reduce_sum
from .registry import RegisterGradient


def _is_zeros(t) -> bool:
    """Whether ``t`` is the zero filler made for an output nobody differentiates."""
    return t is None or t.op.type == "ZerosLike"


@RegisterGradient("Relu")
def _relu_grad(op, grad):
    # TF's ReluGrad of the output: one op (a select, so inf * 0 gives no NaN).
    return [grad_ops.activation_grad("ReluGrad", grad, op.outputs[0])]


@RegisterGradient("Elu")
def _elu_grad(op, grad):
    # For x <= 0, d/dx (exp(x) - 1) = exp(x) = y + 1.
    y = op.outputs[0]
    return [array_ops.where(math_ops.greater(y, 0), grad, grad * (y + 1.0))]


@RegisterGradient("Softplus")
def _softplus_grad(op, grad):
    return [grad * math_ops.sigmoid(op.inputs[0])]


@RegisterGradient("L2Loss")
def _l2_loss_grad(op, grad):
    return [op.inputs[0] * grad]


@RegisterGradient("Softmax")
def _softmax_grad(op, grad):
    # J^T g for the softmax Jacobian diag(y) - y y^T, row by row.
    y = op.outputs[0]
    return [(grad - reduce_sum(grad * y, axis=-1, keepdims=True)) * y]


@RegisterGradient("LogSoftmax")
def _log_softmax_grad(op, grad):
    softmax = math_ops.exp(op.outputs[0])
    return [grad - reduce_sum(grad, axis=-1, keepdims=True) * softmax]


@RegisterGradient("SoftmaxCrossEntropyWithLogits")
def _softmax_xent_grad(op, grad_loss, grad_backprop):
    """Output 0 (the loss) uses output 1, the kernel's backprop ``softmax - labels``.

    The backprop output itself is differentiable too (second-order gradients of the
    loss go through it): d backprop / d logits is the softmax Jacobian and
    d backprop / d labels is -1.
    """
    logits = op.inputs[0]
    backprop = op.outputs[1]
    g_loss = array_ops.expand_dims(grad_loss, -1)
    grad_logits = g_loss * backprop
    grad_labels = g_loss * -nn_ops.log_softmax(logits)
    if not _is_zeros(grad_backprop):
        softmax = nn_ops.softmax(logits)
        dot = reduce_sum(grad_backprop * softmax, axis=-1, keepdims=True)
        grad_logits = grad_logits + (grad_backprop - dot) * softmax
        grad_labels = grad_labels - grad_backprop
    return [grad_logits, grad_labels]
