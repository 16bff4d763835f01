"""GPU kernels of Softmax, LogSoftmax and SoftmaxCrossEntropyWithLogits (loss and
backprop in one kernel), over the last axis, one block per row.

>>> z = df.constant([[0.0, 0.0]])
>>> y = df.constant([[1.0, 0.0]])
>>> with df.device("/gpu:0"):
...     loss = df.nn.softmax_cross_entropy_with_logits(labels=y, logits=z)
>>> round(float(df.Session().run(loss)[0]), 6)    # log(2)
0.693147
"""
from __future__ import annotations

import numpy as np

from ..registry import register_kernel
from ._util import DeviceInput, flat, np_dtype
from .elementwise import FLOAT
from .runtime import device_empty, row_launch, serialized

__all__ = []


def _rows(shape):
    shape = tuple(shape)  # device shapes refuse negative indices (as in CUDA Python)
    k = shape[-1]
    return int(np.prod(shape[:-1], dtype=np.int64)), k


def _softmax_factory(ctx):
    log = ctx.op.type == "LogSoftmax"
    dt = np_dtype(ctx.output_dtypes[0])
    conv = DeviceInput()

    def softmax(x):
        from .device import rows as K
        x = conv(x)
        out = device_empty(x.shape, dt)
        m, k = _rows(x.shape)
        if m and k:
            blocks, threads = row_launch(m)
            K.softmax_kernel(dt, threads, log)[blocks, threads](flat(x), m, k, flat(out))
        return out
    return serialized(softmax)


for _t in ("Softmax", "LogSoftmax"):
    register_kernel(_t, device="GPU", dtypes=FLOAT)(_softmax_factory)


@register_kernel("SoftmaxCrossEntropyWithLogits", device="GPU", dtypes=FLOAT)
def _xent(ctx):
    dt = np_dtype(ctx.output_dtypes[0])
    conv_logits, conv_labels = DeviceInput(), DeviceInput()

    def xent(logits, labels):
        from .device import rows as K
        shape = tuple(np.broadcast_shapes(np.shape(logits), np.shape(labels)))
        if np.shape(logits) != shape or np.shape(labels) != shape:
            raise ValueError(f"logits and labels must have the same shape, got "
                             f"{np.shape(logits)} and {np.shape(labels)}")
        logits, labels = conv_logits(logits), conv_labels(labels)
        m, k = _rows(shape)
        loss = device_empty((m,), dt)
        backprop = device_empty(shape, dt)
        if m and k:
            blocks, threads = row_launch(m)
            K.xent_kernel(dt, threads)[blocks, threads](flat(logits), flat(labels), m, k,
                                                         loss, flat(backprop))
        return loss.reshape(shape[:-1]) if len(shape) != 2 else loss, backprop
    return serialized(xent)
