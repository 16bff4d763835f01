"""NumPy kernels of the ops in :mod:`dataflow.ops.extra_array_ops`: argmax/argmin, slice,
split, unstack, pad, gather_nd/scatter_nd, reverse, range, linspace, cumsum, top_k,
in_top_k (and MirrorPadGrad)."""
from __future__ import annotations

import numpy as np

from dataflow import errors

from ..registry import register_kernel
from ._util import np_dtype, scalarize


def _bad(message):
    return errors.InvalidArgumentError(None, None, message)


@register_kernel("ArgMax")
def _argmax(ctx):
    axis, dt = ctx.attr("axis"), np_dtype(ctx.attr("output_type"))
    return lambda x: _arg(np.argmax, x, axis, dt)


@register_kernel("ArgMin")
def _argmin(ctx):
    axis, dt = ctx.attr("axis"), np_dtype(ctx.attr("output_type"))
    return lambda x: _arg(np.argmin, x, axis, dt)


def _arg(fn, x, axis, dt):
    x = np.asarray(x)
    if x.shape[axis % x.ndim] == 0:
        raise _bad(f"Reduction axis {axis} is empty in shape {list(x.shape)}")
    return scalarize(fn(x, axis=axis).astype(dt, copy=False))


@register_kernel("Slice")
def _slice(ctx):
    def slice_(x, begin, size):
        x = np.asarray(x)
        begin, size = np.atleast_1d(begin), np.atleast_1d(size)
        if begin.size != x.ndim or size.size != x.ndim:
            raise _bad(f"Expected begin and size arguments to be 1-D tensors of size "
                       f"{x.ndim}, but got shapes {list(begin.shape)} and {list(size.shape)}")
        key = []
        for i, (b, s, d) in enumerate(zip(begin.tolist(), size.tolist(), x.shape)):
            s = d - b if s == -1 else s
            if b < 0 or s < 0 or b + s > d:
                raise _bad(f"Expected size[{i}] in [0, {d - b}], but got {s} (begin[{i}] = "
                           f"{b}, dimension of size {d})")
            key.append(slice(b, b + s))
        return scalarize(x[tuple(key)].copy())
    return slice_


def _outputs(values):
    """A kernel returns its single output as such, several as a tuple."""
    return values[0] if len(values) == 1 else tuple(values)


@register_kernel("SplitV")
def _split_v(ctx):
    sizes, axis = list(ctx.attr("size_splits")), ctx.attr("axis")

    def split(x):
        d = np.shape(x)[axis]
        known = sum(s for s in sizes if s != -1)
        full = [d - known if s == -1 else s for s in sizes]
        if any(s < 0 for s in full) or sum(full) != d:
            raise _bad(f"Determined shape must either match input shape along split_dim "
                       f"exactly if fully specified, or be less than the size of the input "
                       f"along split_dim if not fully specified. Got: {known} vs {d}")
        return _outputs(np.split(x, np.cumsum(full)[:-1], axis=axis))
    return split


@register_kernel("Split")
def _split(ctx):
    n, axis = ctx.attr("num_split"), ctx.attr("axis")

    def split(x):
        d = np.shape(x)[axis]
        if d % n:
            raise _bad(f"Number of ways to split should evenly divide the split dimension, "
                       f"but got split_dim {axis} (size = {d}) and num_split {n}")
        return _outputs(np.split(x, n, axis=axis))
    return split


@register_kernel("Unpack")
def _unpack(ctx):
    num, axis = ctx.attr("num"), ctx.attr("axis")

    def unpack(x):
        x = np.asarray(x)
        if x.shape[axis] != num:
            raise _bad(f"Input shape axis {axis} must equal {num}, got shape {list(x.shape)}")
        return _outputs([scalarize(np.take(x, i, axis=axis)) for i in range(num)])
    return unpack


def _paddings(p, x):
    p = np.asarray(p).reshape(-1, 2) if np.size(p) else np.zeros((0, 2), np.int64)
    if p.shape[0] != np.ndim(x):
        raise _bad(f"The first dimension of paddings must be the rank of inputs"
                   f"[{p.shape[0]},2] {list(np.shape(x))}")
    if (p < 0).any():
        raise _bad(f"Paddings must be non-negative: {p.tolist()}")
    return [(int(a), int(b)) for a, b in p]


@register_kernel("PadV2")
def _pad(ctx):
    def pad(x, paddings, value):
        return scalarize(np.pad(x, _paddings(paddings, x), mode="constant",
                                constant_values=value))
    return pad


@register_kernel("MirrorPad")
def _mirror_pad(ctx):
    mode = ctx.attr("mode")
    offset, np_mode = (0, "symmetric") if mode == "SYMMETRIC" else (1, "reflect")

    def mirror_pad(x, paddings):
        p = _paddings(paddings, x)
        for i, ((a, b), d) in enumerate(zip(p, np.shape(x))):
            if max(a, b) > d - offset:
                raise _bad(f"paddings must be no greater than the dimension size: {a}, {b} "
                           f"greater than {d - offset} (dimension {i}, mode {mode})")
        return scalarize(np.pad(x, p, mode=np_mode))
    return mirror_pad


@register_kernel("MirrorPadGrad")
def _mirror_pad_grad(ctx):
    offset = 0 if ctx.attr("mode") == "SYMMETRIC" else 1

    def mirror_pad_grad(grad, paddings):
        g = np.array(grad, copy=True)
        for axis, (a, b) in enumerate(_paddings(paddings, g)):
            g = _fold_axis(g, axis, a, b, offset)
        return scalarize(g)
    return mirror_pad_grad


def _fold_axis(g, axis, a, b, offset):
    """Add the mirrored borders of ``g`` along ``axis`` back onto the entries they copy."""
    g = np.moveaxis(g, axis, 0)
    n = g.shape[0] - a - b
    core = g[a:a + n].copy()
    for i in range(a):   # border entry i mirrors core entry a - 1 - i + offset - a
        core[a - 1 - i + offset] += g[i]
    for j in range(b):   # entry a + n + j mirrors core entry n - 1 - j - offset
        core[n - 1 - j - offset] += g[a + n + j]
    return np.moveaxis(core, 0, axis)


def _index_tuple(indices, shape, what):
    """The NumPy advanced-indexing tuple of ``indices`` (last dim = index depth), checked."""
    idx = np.asarray(indices)
    k = idx.shape[-1]
    if k > len(shape):
        raise _bad(f"index innermost dimension length must be <= params rank; saw: {k} vs. "
                   f"{len(shape)}")
    flat = idx.reshape(-1, k)
    for j in range(k):
        col = flat[:, j]
        bad = (col < 0) | (col >= shape[j])
        if bad.any():
            i = int(np.argmax(bad))
            raise _bad(f"{what}: indices[{i}] = {flat[i].tolist()} does not index into "
                       f"shape {list(shape)}")
    return tuple(idx[..., j] for j in range(k))


@register_kernel("GatherNd")
def _gather_nd(ctx):
    def gather_nd(params, indices):
        params = np.asarray(params)
        return scalarize(np.array(params[_index_tuple(indices, params.shape, "GatherNd")]))
    return gather_nd


@register_kernel("ScatterNd")
def _scatter_nd(ctx):
    def scatter_nd(indices, updates, shape):
        shape = [int(d) for d in np.atleast_1d(shape)]
        updates = np.asarray(updates)
        out = np.zeros(shape, updates.dtype)
        key = _index_tuple(indices, shape, "ScatterNd")
        want = np.shape(indices)[:-1] + tuple(shape[np.shape(indices)[-1]:])
        if updates.shape != want:
            raise _bad(f"updates has shape {list(updates.shape)}, expected {list(want)}")
        np.add.at(out, key, updates)
        return scalarize(out)
    return scatter_nd


@register_kernel("ReverseV2")
def _reverse(ctx):
    axes = ctx.attr("axis")
    return lambda x: scalarize(np.flip(x, axis=axes).copy()) if axes else x


@register_kernel("Range")
def _range(ctx):
    dt = np_dtype(ctx.output_dtypes[0])

    def range_(start, limit, delta):
        start, limit, delta = start.item(), limit.item(), delta.item()
        if delta == 0:
            raise _bad(f"Requires delta != 0: {delta}")
        if (delta > 0 and start > limit) or (delta < 0 and start < limit):
            raise _bad(f"Requires start {'<=' if delta > 0 else '>='} limit when delta "
                       f"{'>' if delta > 0 else '<'} 0: {start}/{limit}")
        if dt.kind == "i":
            n = (abs(limit - start) + abs(delta) - 1) // abs(delta)
        else:
            n = int(np.ceil(abs((limit - start) / delta)))
        return (start + np.arange(n, dtype=dt) * dt.type(delta)).astype(dt, copy=False)
    return range_


@register_kernel("LinSpace")
def _linspace(ctx):
    dt = np_dtype(ctx.output_dtypes[0])

    def linspace(start, stop, num):
        if num <= 0:
            raise _bad(f"Requires num > 0: {num}")
        return np.linspace(start, stop, int(num)).astype(dt)
    return linspace


@register_kernel("Cumsum")
def _cumsum(ctx):
    axis, exclusive, reverse = ctx.attr("axis"), ctx.attr("exclusive"), ctx.attr("reverse")

    def cumsum(x):
        x = np.asarray(x)
        ax = axis % x.ndim
        y = np.flip(x, ax) if reverse else x
        out = np.cumsum(y, axis=ax, dtype=x.dtype)
        if exclusive:   # shift by one: each element leaves itself out
            out = np.concatenate([np.zeros_like(np.take(out, [0], axis=ax)),
                                  np.take(out, np.arange(out.shape[ax] - 1), axis=ax)], axis=ax)
        return np.flip(out, ax).copy() if reverse else out
    return cumsum


@register_kernel("TopKV2")
def _top_k(ctx):
    k = ctx.attr("k")

    def top_k(x):
        x = np.asarray(x)
        if x.shape[-1] < k:
            raise _bad(f"input must have at least k columns. Had {x.shape[-1]}, needed {k}")
        # A stable sort of the negated values keeps equal values in index order; NumPy
        # sorts NaN last, TF treats it as larger than every number: flip NaN to the front.
        key = -x if x.dtype.kind != "u" else x.max(initial=0) - x
        if x.dtype.kind == "f":
            key = np.where(np.isnan(x), -np.inf, key)
        order = np.argsort(key, axis=-1, kind="stable")[..., :k]
        values = np.take_along_axis(x, order, axis=-1)
        return values, order.astype(np.int32)
    return top_k


@register_kernel("InTopKV2")
def _in_top_k(ctx):
    k = ctx.attr("k")

    def in_top_k(predictions, targets):
        p = np.asarray(predictions)
        t = np.asarray(targets)
        if p.shape[0] != t.shape[0]:
            raise _bad(f"First dimension of predictions {p.shape[0]} must match length of "
                       f"targets {t.shape[0]}")
        n = p.shape[1]
        valid = (t >= 0) & (t < n)
        target_p = p[np.arange(len(t)), np.where(valid, t, 0)]
        larger = (p > target_p[:, None]).sum(axis=1)
        finite = np.isfinite(p).all(axis=1)
        return valid & finite & (larger < k)
    return in_top_k
