"""NumPy kernel of SparseSoftmaxCrossEntropyWithLogits: loss and backprop in one pass."""
from __future__ import annotations

import numpy as np

from dataflow import errors

from ..registry import register_kernel


@register_kernel("SparseSoftmaxCrossEntropyWithLogits")
def _sparse_softmax_xent(ctx):
    def sparse_softmax_xent(logits, labels):
        logits = np.asarray(logits)
        n = logits.shape[-1]
        flat = logits.reshape(-1, n)
        lab = np.asarray(labels).reshape(-1)
        bad = (lab < 0) | (lab >= n)
        if bad.any():
            raise errors.InvalidArgumentError(
                None, None, f"Received a label value of {lab[bad][0]} which is outside the "
                f"valid range of [0, {n}).  Label values: {' '.join(map(str, lab.tolist()))}")
        z = flat - flat.max(axis=1, keepdims=True)
        log_p = z - np.log(np.exp(z).sum(axis=1, keepdims=True))
        rows = np.arange(flat.shape[0])
        loss = -log_p[rows, lab]
        backprop = np.exp(log_p)
        backprop[rows, lab] -= 1
        loss = loss.reshape(logits.shape[:-1]).astype(logits.dtype, copy=False)
        return (loss if loss.ndim else loss[()]), \
            backprop.reshape(logits.shape).astype(logits.dtype, copy=False)
    return sparse_softmax_xent
