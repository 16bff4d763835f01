"""Kernels of the gradient helper ops (:mod:`dataflow.ops.grad_ops`)."""
from __future__ import annotations

import numpy as np

from ..registry import register_kernel, register_out_variant
from ._util import np_dtype, scalarize
from .array import slice_key


def _as_shape(shape):
    """A run-time shape tensor (1-D int array) as a tuple of Python ints."""
    if type(shape) is np.ndarray:
        return tuple(shape.ravel().tolist())   # 10x faster than int() per element
    return tuple(int(d) for d in np.ravel(shape))


def _sum_to_shape(grad, shape):
    shape = _as_shape(shape)
    if np.shape(grad) == shape:
        return grad
    g = np.asarray(grad)
    lead = g.ndim - len(shape)
    # Broadcasting prepends axes and stretches size-1 axes: sum both kinds away.
    axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape)
                                      if d == 1 and g.shape[lead + i] != 1)
    out = np.sum(g, axis=axes, dtype=g.dtype).reshape(shape)
    return scalarize(out)


@register_kernel("SumToShape")
def _sum_to_shape_kernel(ctx):
    return _sum_to_shape


@register_out_variant(_sum_to_shape_kernel, alias_safe=False)
def _sum_to_shape_out(ctx):
    """SumToShape into ``out`` (``plan_memory``): the same ``np.sum``, written there."""
    def sum_to_shape_out(grad, shape, out):
        shape = _as_shape(shape)
        g = np.asarray(grad)
        if g.shape == shape:
            np.copyto(out, g)
            return
        lead = g.ndim - len(shape)
        axes = tuple(range(lead)) + tuple(lead + i for i, d in enumerate(shape)
                                          if d == 1 and g.shape[lead + i] != 1)
        kept = tuple(n for i, n in enumerate(g.shape) if i not in axes)
        np.sum(g, axis=axes, dtype=g.dtype, out=out.reshape(kept))
    return sum_to_shape_out


@register_kernel("BroadcastTo")
def _broadcast_to(ctx):
    def broadcast_to(x, shape):
        shape = _as_shape(shape)
        if np.shape(x) == shape:
            return x
        if type(x) is not np.ndarray:  # a scalar, e.g. the gradient of a mean
            return np.full(shape, x)
        # A copy (np.broadcast_to's view is read-only and shares x's memory); the
        # assignment raises as np.broadcast_to does when the shapes do not broadcast.
        out = np.empty(shape, x.dtype)
        out[...] = x
        return scalarize(out)
    return broadcast_to


@register_out_variant(_broadcast_to, alias_safe=False)
def _broadcast_to_out(ctx):
    """BroadcastTo into ``out`` (``plan_memory``): ``x`` stretched over it."""
    def broadcast_to_out(x, shape, out):
        out[...] = x    # raises as the kernel does when the shapes do not broadcast
    return broadcast_to_out


@register_kernel("ReducedShape")
def _reduced_shape(ctx):
    axis = ctx.attr("axis")

    def reduced_shape(shape):
        out = np.array(shape, copy=True)
        if axis is None:
            out[:] = 1
        else:
            out[list(axis)] = 1  # NumPy indexing accepts the negative axes too
        return out
    return reduced_shape


@register_kernel("GatherGrad")
def _gather_grad(ctx):
    axis = ctx.attr("axis")
    dt = np_dtype(ctx.output_dtypes[0])

    def gather_grad(grad, indices, params_shape):
        shape = _as_shape(params_shape)
        out = np.zeros(shape, dtype=dt)
        ax = axis % len(shape)
        idx = np.asarray(indices)
        g = np.asarray(grad)
        # grad is params[:ax] + indices.shape + params[ax+1:]: bring the index axes to
        # the front to match ``view[idx]``; np.add.at sums repeated indices.
        g = np.moveaxis(g, list(range(ax, ax + idx.ndim)), list(range(idx.ndim)))
        np.add.at(np.moveaxis(out, ax, 0), idx, g)
        return scalarize(out)
    return gather_grad


@register_kernel("StridedSliceGrad")
def _strided_slice_grad(ctx):
    spec = ctx.attr("spec")
    dt = np_dtype(ctx.output_dtypes[0])

    def strided_slice_grad(grad, shape, *args):
        out = np.zeros(_as_shape(shape), dtype=dt)
        # Basic indexing selects each element at most once, so assignment suffices.
        out[slice_key(spec, args)] = grad
        return scalarize(out)
    return strided_slice_grad
