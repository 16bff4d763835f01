"""Gradient of ReverseSequence: the same reversal of the gradient (it is a permutation
that is its own inverse)."""
from __future__ import annotations

from ..ops.sequence_ops import reverse_sequence
from .registry import RegisterGradient


@RegisterGradient("ReverseSequence")
def _reverse_sequence_grad(op, grad):
    return [reverse_sequence(grad, op.inputs[1], seq_axis=op.get_attr("seq_dim"),
                             batch_axis=op.get_attr("batch_dim")), None]
