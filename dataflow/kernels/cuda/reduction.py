"""GPU kernels of the reductions (Sum, Mean, Prod, Max, Min over axes) and SumToShape.

The reduced axes are moved last (a transpose kernel, only when they are not already
last), the input is viewed as ``(m, k)`` rows, and a shared-memory tree reduction
(:mod:`dataflow.kernels.cuda.device.rows`) reduces each row. Empty inputs take the host
kernel (the identity values and NaN means are NumPy's there).

>>> x = df.constant(np.ones((2, 3, 4), np.float32))
>>> with df.device("/gpu:0"):
...     s = df.reduce_sum(x, axis=[0, 2], keepdims=True)
>>> df.Session().run(s).ravel().tolist()
[8.0, 8.0, 8.0]
"""
from __future__ import annotations

import numpy as np

from ..registry import register_kernel
from ._util import DeviceInput, flat, host_kernel, np_dtype
from .array import reshape_value, transpose_device
from .elementwise import NUMERIC
from .runtime import device_empty, host_array, row_launch, serialized, to_host

__all__ = ["reduce_device", "REDUCTION_OPS"]

REDUCTION_OPS = ("Sum", "Mean", "Prod", "Max", "Min")


def _normalize_axes(axis, ndim) -> tuple:
    if axis is None:
        return tuple(range(ndim))
    axes = (axis,) if np.ndim(axis) == 0 else tuple(axis)
    return tuple(sorted({int(a) % ndim for a in axes})) if ndim else ()


def reduce_device(op_type, x, axes, keep_dims, out_dtype):
    """Reduce device array ``x`` over ``axes`` (normalised, sorted) with ``op_type``."""
    from .device import rows as K
    shape = x.shape
    kept = [d for d in range(x.ndim) if d not in axes]
    x = transpose_device(x, kept + list(axes))
    m = int(np.prod([shape[d] for d in kept], dtype=np.int64))
    k = int(np.prod([shape[d] for d in axes], dtype=np.int64))
    out = device_empty((m,), out_dtype)
    if m:
        blocks, threads = row_launch(m)
        kernel = K.reduce_kernel(op_type, x.dtype, out_dtype, threads)
        kernel[blocks, threads](flat(x), m, k, out)
    if keep_dims:
        dims = tuple(1 if d in axes else shape[d] for d in range(len(shape)))
    else:
        dims = tuple(shape[d] for d in kept)
    return reshape_value(out, dims)


def _reduction(ctx):
    op_type = ctx.op.type
    axis, keep_dims = ctx.attr("axis"), ctx.attr("keep_dims")
    out_dt = np_dtype(ctx.output_dtypes[0])
    host_fn = host_kernel(ctx)
    conv = DeviceInput()

    def reduce(x):
        if np.size(x) == 0 or np.ndim(x) == 0:
            return host_fn(to_host(x))
        x = conv(x)
        return reduce_device(op_type, x, _normalize_axes(axis, x.ndim), keep_dims, out_dt)
    return serialized(reduce)


for _t in REDUCTION_OPS:
    register_kernel(_t, device="GPU", dtypes=NUMERIC)(_reduction)


@register_kernel("SumToShape", device="GPU", dtypes=NUMERIC)
def _sum_to_shape(ctx):
    """The gradient of broadcasting: sum ``grad`` over the axes broadcasting added or
    stretched, so it has ``shape`` again."""
    out_dt = np_dtype(ctx.output_dtypes[0])
    host_fn = host_kernel(ctx)
    conv = DeviceInput()

    def sum_to_shape(grad, shape):
        dims = tuple(int(d) for d in np.ravel(host_array(shape)))
        gshape = np.shape(grad)
        if gshape == dims:
            return grad
        if np.size(grad) == 0:
            return host_fn(to_host(grad), dims)
        grad = conv(grad)
        lead = len(gshape) - len(dims)
        axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(dims)
                                          if d == 1 and gshape[lead + i] != 1)
        return reshape_value(reduce_device("Sum", grad, axes, False, out_dt), dims)
    return serialized(sum_to_shape)
