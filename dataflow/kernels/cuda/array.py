"""GPU kernels of the array ops: views, shape queries, fills, transposes, broadcasts.

Reshape-like ops are free views of device arrays. Shape, Size and Rank answer in
host memory (their values feed shape arguments, which are host-memory inputs as in
TF). Ops that never look inside their values (identities, stacks, Const, NoOp)
run their CPU kernel unchanged on the GPU: device values just pass through.

>>> x = df.constant(np.arange(6, dtype=np.float32).reshape(2, 3))
>>> with df.device("/gpu:0"):
...     z = df.transpose(x)                # a strided-copy kernel on the device
>>> df.Session().run(z).tolist()
[[0.0, 3.0], [1.0, 4.0], [2.0, 5.0]]
"""
from __future__ import annotations

import numpy as np

from ..registry import register_kernel
from ._util import DeviceInput, element_strides, flat, host_kernel, launch, np_dtype
from .runtime import device_empty, host_array, is_device_value, serialized, to_host

__all__ = ["VALUE_AGNOSTIC", "transpose_device", "broadcast_device", "reshape_value"]

#: Ops whose CPU kernels only move values around: they run as they are on the GPU.
VALUE_AGNOSTIC = ("Identity", "StopGradient", "PreventGradient", "Snapshot",
                  "PlaceholderWithDefault", "Const", "Placeholder", "NoOp", "ControlTrigger",
                  "Stack", "StackPush", "StackPop", "StackSize")


for _t in VALUE_AGNOSTIC:
    register_kernel(_t, device="GPU")(host_kernel)


def _as_dims(shape) -> tuple:
    """A shape argument (host or device, 0-d or 1-d) as a tuple of ints."""
    arr = host_array(shape)
    return tuple(int(d) for d in np.atleast_1d(arr)) if arr.ndim else ()


def reshape_value(x, dims):
    """``x`` with shape ``dims`` (-1 inferred): a view for device arrays."""
    if not is_device_value(x):
        out = np.reshape(x, dims)
        return out[()] if out.ndim == 0 else out
    if -1 in dims:
        known = int(np.prod([d for d in dims if d != -1]))
        dims = tuple(x.size // max(known, 1) if d == -1 else d for d in dims)
    return x.reshape(dims) if tuple(dims) != x.shape else x


@register_kernel("Reshape", device="GPU")
def _reshape(ctx):
    return lambda x, shape: reshape_value(x, _as_dims(shape))


def _stand_in(x):
    """A host array of ``x``'s shape that costs no memory (a broadcast view), for host
    kernels that only look at the shape."""
    return np.broadcast_to(np.int8(0), np.shape(x)) if is_device_value(x) else x


def _view_kernel(ctx):
    """ExpandDims, Squeeze: the host kernel computes the result shape on a stand-in,
    the device array is reshaped to it (a view)."""
    host_fn = host_kernel(ctx)
    return lambda x: reshape_value(x, np.shape(host_fn(_stand_in(x))))


def _host_shape_kernel(ctx):
    """Shape, Size, Rank: read the shape, answer in host memory."""
    host_fn = host_kernel(ctx)
    return lambda x: host_fn(_stand_in(x))


for _t in ("ExpandDims", "Squeeze"):
    register_kernel(_t, device="GPU")(_view_kernel)


for _t in ("Shape", "Size", "Rank"):
    register_kernel(_t, device="GPU")(_host_shape_kernel)


def _fill(shape, value, dtype):
    from .device import elementwise as K
    out = device_empty(shape, dtype)
    if out.size:
        launch(K.fill_kernel, out.size, dtype.type(value), flat(out))
    return out


@register_kernel("ZerosLike", device="GPU")
def _zeros_like(ctx):
    dt = np_dtype(ctx.output_dtypes[0])
    return serialized(lambda x: _fill(np.shape(x), 0, dt))


@register_kernel("OnesLike", device="GPU")
def _ones_like(ctx):
    dt = np_dtype(ctx.output_dtypes[0])
    return serialized(lambda x: _fill(np.shape(x), 1, dt))


@register_kernel("Fill", device="GPU")
def _fill_kernel(ctx):
    dt = np_dtype(ctx.output_dtypes[0])
    return serialized(lambda dims, value: _fill(_as_dims(dims), to_host(value), dt))


def _strided_copy(x, strides, shape):
    from .device import elementwise as K
    out = device_empty(shape, x.dtype)
    if out.size:
        launch(K.strided_copy_kernel, out.size, flat(x), tuple(strides), tuple(shape),
               flat(out))
    return out


def transpose_device(x, perm):
    """A C-contiguous device copy of ``x`` with axes permuted by ``perm``."""
    perm = tuple(int(p) % max(x.ndim, 1) for p in perm)
    if perm == tuple(range(x.ndim)):
        return x
    own = element_strides(x.shape)
    return _strided_copy(x, [own[p] for p in perm], [x.shape[p] for p in perm])


def broadcast_device(x, shape):
    """A C-contiguous device copy of ``x`` broadcast to ``shape``."""
    from ._util import broadcast_strides
    shape = tuple(shape)
    np.broadcast_shapes(x.shape, shape)  # raises ValueError when incompatible
    if x.shape == shape:
        return x
    return _strided_copy(x, broadcast_strides(x.shape, shape), shape)


@register_kernel("Transpose", device="GPU")
def _transpose(ctx):
    perm = ctx.attr("perm")
    conv = DeviceInput()

    def transpose(x):
        x = conv(x)
        # perm None reverses the dimensions, as the CPU kernel and TF do.
        return transpose_device(x, tuple(reversed(range(x.ndim))) if perm is None else perm)
    return serialized(transpose)


@register_kernel("BroadcastTo", device="GPU")
def _broadcast_to(ctx):
    conv = DeviceInput()
    return serialized(lambda x, shape: broadcast_device(conv(x), _as_dims(shape)))


@register_kernel("LoopCond", device="GPU")
def _loop_cond(ctx):
    # The executor reads the predicate on the host (TF keeps it in host memory too).
    return to_host


@register_kernel("GatherV2", device="GPU")
def _gather(ctx):
    """Gather along the ``axis`` attribute. The indices are checked on the host (they are
    small, and an out-of-range index must be an error, not a stray read), as the CPU
    kernel does; ``params`` stays on the device."""
    from .device import array as K
    axis = ctx.attr("axis")
    dt = np_dtype(ctx.output_dtypes[0])
    conv_params, conv_indices = DeviceInput(), DeviceInput()

    def gather(params, indices):
        shape = tuple(np.shape(params))
        ax = axis % len(shape)
        idx = host_array(indices)
        n = shape[ax]
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            bad = idx[(idx < 0) | (idx >= n)].flat[0]
            raise ValueError(f"indices = {bad} is not in [0, {n})")
        out_shape = shape[:ax] + idx.shape + shape[ax + 1:]
        out = device_empty(out_shape, dt)
        if out.size:
            outer = int(np.prod(shape[:ax], dtype=np.int64))
            inner = int(np.prod(shape[ax + 1:], dtype=np.int64))
            dev_idx = conv_indices(indices if is_device_value(indices) else
                                   idx.astype(np.int64, copy=False))
            launch(K.gather_kernel, out.size, flat(conv_params(params)), flat(dev_idx),
                   outer, n, inner, flat(out))
        return out
    return serialized(gather)


@register_kernel("OneHot", device="GPU")
def _one_hot(ctx):
    """One-hot rows with the classes on the last axis (other axes: the host kernel)."""
    from .device import array as K
    depth, axis = ctx.attr("depth"), ctx.attr("axis")
    dt = np_dtype(ctx.attr("dtype"))
    on, off = dt.type(ctx.attr("on_value")), dt.type(ctx.attr("off_value"))
    host_fn = host_kernel(ctx)
    conv = DeviceInput()

    def one_hot(indices):
        if axis not in (-1, np.ndim(indices)):
            return host_fn(to_host(indices))
        out = device_empty(tuple(np.shape(indices)) + (depth,), dt)
        if out.size:
            launch(K.one_hot_kernel, out.size, flat(conv(indices)), depth, on, off, flat(out))
        return out
    return serialized(one_hot)
