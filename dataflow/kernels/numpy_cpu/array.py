"""Array kernels: identity, reshaping, joining, indexing, shape queries, select."""
from __future__ import annotations

import numpy as np

from dataflow import errors

from ..registry import register_kernel, register_out_variant
from ._util import const, np_dtype, scalarize


def _identity(x):
    return x


for _t in ("Identity", "StopGradient", "PreventGradient", "Snapshot", "PlaceholderWithDefault"):
    register_kernel(_t)(const(_identity))


@register_kernel("Const")
def _const(ctx):
    value = ctx.attr("value")
    return lambda: value


@register_kernel("Placeholder")
def _placeholder(ctx):
    op = ctx.op

    def unfed():
        raise errors.InvalidArgumentError(
            None, op, f"You must feed a value for placeholder tensor '{op.name}' with dtype "
            f"{op.get_attr('dtype').name} and shape {op.get_attr('shape')}")
    return unfed


@register_kernel("ZerosLike")
def _zeros_like(ctx):
    return lambda x: scalarize(np.zeros_like(x))


@register_kernel("OnesLike")
def _ones_like(ctx):
    return lambda x: scalarize(np.ones_like(x))


@register_kernel("Reshape")
def _reshape(ctx):
    return lambda x, shape: scalarize(np.reshape(x, [int(d) for d in np.atleast_1d(shape)]
                                                 if np.ndim(shape) else []))


@register_kernel("Transpose")
def _transpose(ctx):
    perm = ctx.attr("perm")
    return lambda x: np.transpose(x, perm)


@register_kernel("ConcatV2")
def _concat(ctx):
    axis = ctx.attr("axis")
    return lambda *xs: np.concatenate(xs, axis=axis)


@register_kernel("Pack")
def _pack(ctx):
    axis = ctx.attr("axis")
    return lambda *xs: np.stack(xs, axis=axis)


@register_kernel("Fill")
def _fill(ctx):
    dt = np_dtype(ctx.output_dtypes[0])
    return lambda dims, value: scalarize(np.full([int(d) for d in np.atleast_1d(dims)]
                                                 if np.ndim(dims) else [], value, dtype=dt))


@register_kernel("Shape")
def _shape(ctx):
    dt = np_dtype(ctx.attr("out_type"))
    return lambda x: np.array(np.shape(x), dtype=dt)


@register_out_variant(_shape)
def _shape_out(ctx):
    """Shape into ``out`` (``plan_memory``)."""
    def shape_out(x, out):
        out[...] = np.shape(x)
    return shape_out


@register_kernel("Size")
def _size(ctx):
    dt = np_dtype(ctx.attr("out_type")).type
    return lambda x: dt(np.size(x))


@register_kernel("Rank")
def _rank(ctx):
    return lambda x: np.int32(np.ndim(x))


@register_kernel("GatherV2")
def _gather(ctx):
    axis = ctx.attr("axis")

    def gather(params, indices):
        n = np.shape(params)[axis]
        idx = np.asarray(indices)
        if idx.size and (idx.min() < 0 or idx.max() >= n):
            bad = idx[(idx < 0) | (idx >= n)].flat[0]
            raise errors.InvalidArgumentError(None, None, f"indices = {bad} is not in [0, {n})")
        return scalarize(np.take(params, idx, axis=axis))
    return gather


@register_kernel("OneHot")
def _one_hot(ctx):
    depth, axis = ctx.attr("depth"), ctx.attr("axis")
    dt = np_dtype(ctx.attr("dtype"))
    on, off = dt.type(ctx.attr("on_value")), dt.type(ctx.attr("off_value"))
    classes = np.arange(depth)

    def one_hot(indices):
        hot = np.asarray(indices)[..., None] == classes
        out = np.where(hot, on, off).astype(dt, copy=False)
        return out if axis == -1 else np.moveaxis(out, -1, axis)
    return one_hot


@register_kernel("SelectV2")
def _select(ctx):
    return lambda c, x, y: scalarize(np.where(c, x, y))


@register_kernel("Where")
def _where(ctx):
    return lambda c: np.argwhere(c).astype(np.int64)


@register_kernel("ExpandDims")
def _expand_dims(ctx):
    axis = ctx.attr("axis")
    return lambda x: np.expand_dims(x, axis)


@register_kernel("Squeeze")
def _squeeze(ctx):
    # An empty axis list means "every size-1 axis" (TF), not "no axis" (NumPy).
    axes = ctx.attr("squeeze_dims") or None
    return lambda x: scalarize(np.squeeze(x, axis=axes))


@register_kernel("Tile")
def _tile(ctx):
    return lambda x, multiples: scalarize(np.tile(x, [int(m) for m in np.atleast_1d(multiples)]))


def _static_key(spec):
    key = []
    for item in spec:
        kind = item[0]
        if kind == "int":
            key.append(item[1])
        elif kind == "slice":
            key.append(slice(*item[1:]))
        elif kind == "ellipsis":
            key.append(Ellipsis)
        elif kind == "newaxis":
            key.append(None)
        else:
            return None
    return tuple(key)


@register_kernel("StridedSlice")
def _strided_slice(ctx):
    spec = ctx.attr("spec")
    key = _static_key(spec)
    if key is not None:
        return lambda x: scalarize(x[key])

    def dynamic_slice(x, *args):
        return scalarize(x[slice_key(spec, args)])
    return dynamic_slice


def slice_key(spec, args):
    """The NumPy basic-indexing key of a StridedSlice ``spec`` (tensor entries from args)."""
    key = []
    for item in spec:
        kind = item[0]
        if kind == "tensor_int":
            key.append(int(args[item[1] - 1]))
        elif kind == "tensor_slice":
            key.append(slice(*(int(args[r[1] - 1]) if r[0] == "t" else r[1]
                               for r in item[1:])))
        else:
            key.append(_static_key((item,))[0])
    return tuple(key)
