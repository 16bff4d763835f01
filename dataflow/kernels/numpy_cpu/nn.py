"""Neural-network kernels: softmax, log-softmax, fused softmax cross-entropy."""
from __future__ import annotations

import numpy as np

from ..registry import register_kernel, register_out_variant
from ._util import const


def _softmax(x):
    z = x - np.max(x, axis=-1, keepdims=True)
    e = np.exp(z)
    return e / np.sum(e, axis=-1, keepdims=True)


def _log_softmax(x):
    z = x - np.max(x, axis=-1, keepdims=True)
    return z - np.log(np.sum(np.exp(z), axis=-1, keepdims=True))


def _softmax_xent(logits, labels):
    log_p = _log_softmax(logits)
    loss = -np.sum(labels * log_p, axis=-1)
    return loss, np.exp(log_p) - labels


def _l2_loss(t):
    # Halving is exact: sum(t^2) * 0.5 is TF's sum(t^2 / 2) bit for bit (no underflow).
    return t.dtype.type(np.sum(np.square(t)) * t.dtype.type(0.5))


register_kernel("L2Loss")(const(_l2_loss))


# Relu, Elu and Softplus are rows of the elementwise op table (registered by numpy_cpu.math).
for _t, _f in {"Softmax": _softmax, "LogSoftmax": _log_softmax}.items():
    register_kernel(_t)(const(_f))
_softmax_xent_kernel = register_kernel("SoftmaxCrossEntropyWithLogits")(const(_softmax_xent))


@register_out_variant(_softmax_xent_kernel, alias_safe=False)
def _softmax_xent_out(ctx):
    """Loss and backprop written into ``out = (loss, backprop)`` (``plan_memory``): the
    kernel's operations, their results stored there."""
    def softmax_xent_out(logits, labels, out):
        loss, backprop = out
        log_p = _log_softmax(logits)
        prod = labels * log_p
        if prod.shape[:-1] != loss.shape or prod.shape != backprop.shape:
            for o, r in zip(out, _softmax_xent(logits, labels)):
                np.copyto(o, r)
            return
        np.sum(prod, axis=-1, out=loss)
        np.negative(loss, out=loss)
        np.exp(log_p, out=backprop)
        np.subtract(backprop, labels, out=backprop)
    return softmax_xent_out
