"""Numba kernels of Softmax, LogSoftmax, SoftmaxCrossEntropyWithLogits and
SparseSoftmaxCrossEntropyWithLogits (float32, float64), over the last axis of
C-contiguous arrays.

They use :func:`dataflow.kernels.approx.exp` and sum rows in blocks, so results differ from
the NumPy kernels by the approximation's bound plus summation rounding (the tests
allow 2e-6 relative for float32 and 1e-13 for float64, plus a few ulps of the
logits' scale for losses near 0). The
cross-entropy returns the loss and the backprop ``softmax - labels`` from one pass.

>>> z = df.constant(np.zeros((2, 4), np.float32))
>>> y = df.constant(np.eye(4, dtype=np.float32)[:2])
>>> loss = df.nn.softmax_cross_entropy_with_logits(labels=y, logits=z)
>>> [round(float(v), 4) for v in df.Session().run(loss)]      # log(4) per row
[1.3863, 1.3863]
"""
from __future__ import annotations

import numpy as np

from . import _dispatch
from ._dispatch import lazy, reference_kernel, register_numba

_ndarray = np.ndarray
SHORT_ROW = 32   # rows below this take xent_short_rows (measured: 1797 x 10 2.1x faster)


def _usable(x, dt):
    return type(x) is _ndarray and x.size >= _dispatch.SOFTMAX_MIN_SIZE and x.dtype is dt \
        and x.flags.c_contiguous and x.shape[-1] > 0


def _rowwise(kernel_name):
    def factory(ctx, ref):
        """``out`` row by row from the compiled kernel, as the NumPy kernel's shape."""
        dt = np.dtype(ctx.input_dtypes[0].as_numpy_dtype)
        fn = lazy("_nn_jit", "kernel", kernel_name)

        def rowwise(x):
            if not _usable(x, dt):
                return ref(x)
            out = np.empty(x.shape, dt)
            n = x.shape[-1]
            fn(x.reshape(-1, n), out.reshape(-1, n))
            return out
        return rowwise
    return factory


register_numba("Softmax")(_rowwise("softmax_rows"))
register_numba("LogSoftmax")(_rowwise("log_softmax_rows"))


def _softmax_xent_out(ctx, ref_out):
    """Loss and backprop written into ``out = (loss, backprop)`` (``plan_memory``);
    other cases compute with the kernel and copy."""
    dt = np.dtype(ctx.input_dtypes[0].as_numpy_dtype)
    fn = lazy("_nn_jit", "kernel", "xent_rows")
    short_fn = lazy("_nn_jit", "kernel", "xent_short_rows")
    kernel = _softmax_xent(ctx, reference_kernel(ctx))

    def softmax_xent_out(logits, labels, out):
        loss, backprop = out
        if not _usable(logits, dt) or type(labels) is not _ndarray \
                or labels.shape != logits.shape or labels.dtype is not dt \
                or not labels.flags.c_contiguous or loss.shape != logits.shape[:-1]:
            for o, r in zip(out, kernel(logits, labels)):
                np.copyto(o, r)
            return
        n = logits.shape[-1]
        (short_fn if n < SHORT_ROW else fn)(logits.reshape(-1, n), labels.reshape(-1, n),
                                            loss.reshape(-1), backprop.reshape(-1, n))
    return softmax_xent_out


@register_numba("SoftmaxCrossEntropyWithLogits", out=_softmax_xent_out, out_alias_safe=False)
def _softmax_xent(ctx, ref):
    """Loss and backprop in one pass when logits and labels share shape and dtype."""
    dt = np.dtype(ctx.input_dtypes[0].as_numpy_dtype)
    fn = lazy("_nn_jit", "kernel", "xent_rows")
    short_fn = lazy("_nn_jit", "kernel", "xent_short_rows")

    def softmax_xent(logits, labels):
        if not _usable(logits, dt) or type(labels) is not _ndarray \
                or labels.shape != logits.shape or labels.dtype is not dt \
                or not labels.flags.c_contiguous:
            return ref(logits, labels)
        n = logits.shape[-1]
        backprop = np.empty(logits.shape, dt)
        loss = np.empty(logits.shape[:-1], dt)
        (short_fn if n < SHORT_ROW else fn)(logits.reshape(-1, n), labels.reshape(-1, n),
                                            loss.reshape(-1), backprop.reshape(-1, n))
        return (loss if loss.ndim else loss[()]), backprop
    return softmax_xent


@register_numba("SparseSoftmaxCrossEntropyWithLogits")
def _sparse_softmax_xent(ctx, ref):
    """Loss and backprop in one compiled pass over the block (the NumPy kernel's eight
    array operations took 20 µs on the convnet's 64 x 10 logits); a label out of range
    goes back to the NumPy kernel, which raises its error."""
    dt = np.dtype(ctx.input_dtypes[0].as_numpy_dtype)
    fn = lazy("_nn_jit", "kernel", "sparse_xent_rows")

    def sparse_softmax_xent(logits, labels):
        if not _usable(logits, dt) or type(labels) is not _ndarray \
                or labels.shape != logits.shape[:-1] or labels.dtype.kind != "i":
            return ref(logits, labels)
        n = logits.shape[-1]
        backprop = np.empty(logits.shape, dt)
        loss = np.empty(logits.shape[:-1], dt)
        if fn(logits.reshape(-1, n), labels.reshape(-1), loss.reshape(-1),
              backprop.reshape(-1, n)) >= 0:
            return ref(logits, labels)
        return (loss if loss.ndim else loss[()]), backprop
    return sparse_softmax_xent
