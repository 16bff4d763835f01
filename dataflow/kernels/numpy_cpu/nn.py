"""Neural-network kernels: softmax, log-softmax, fused softmax cross-entropy."""
from __future__ import annotations

import numpy as np

from ..registry import register_kernel
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


# Relu, Elu and Softplus are rows of the elementwise op table (registered by numpy_cpu.math).
for _t, _f in {"Softmax": _softmax,
               "LogSoftmax": _log_softmax, "SoftmaxCrossEntropyWithLogits": _softmax_xent}.items():
    register_kernel(_t)(const(_f))
