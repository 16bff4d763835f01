"""Fused optimizer kernels."""
from __future__ import annotations

import numpy as np

from ..registry import register_kernel
from ._util import np_dtype, scalarize


@register_kernel("ResourceApplyAdam")
def _apply_adam(ctx):
    def apply(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad):
        lr_t = lr * np.sqrt(1 - beta2_power) / (1 - beta1_power)
        m_new = beta1 * m.read() + (1 - beta1) * grad
        v_new = beta2 * v.read() + (1 - beta2) * grad * grad
        var.store_owned(var.read() - lr_t * m_new / (np.sqrt(v_new) + epsilon))
        m.store_owned(m_new)
        v.store_owned(v_new)
    return apply


@register_kernel("Unique")
def _unique(ctx):
    def unique(x):
        x = np.asarray(x)
        values, first, inverse = np.unique(x, return_index=True, return_inverse=True)
        order = np.argsort(first, kind="stable")        # first appearance, as TF
        rank = np.empty_like(order)
        rank[order] = np.arange(len(order))
        return values[order], rank[inverse.reshape(-1)].astype(np.int32).reshape(x.shape)
    return unique


@register_kernel("UnsortedSegmentSum")
def _unsorted_segment_sum(ctx):
    dt = np_dtype(ctx.output_dtypes[0])

    def segment_sum(data, ids, num):
        data, ids = np.asarray(data), np.asarray(ids)
        out = np.zeros((int(num),) + data.shape[ids.ndim:], dtype=dt)
        np.add.at(out, ids, data)                        # in order: repeated ids add up
        return scalarize(out)
    return segment_sum


@register_kernel("ResourceScatterAdd")
def _scatter_add(ctx):
    def scatter_add(var, indices, updates):
        value = np.array(var.read(), copy=True)
        np.add.at(value, np.asarray(indices), updates)
        var.store_owned(value)
    return scatter_add


@register_kernel("ResourceSparseApplyMomentum")
def _sparse_apply_momentum(ctx):
    nesterov = ctx.attr("use_nesterov")

    def apply(var, accum, lr, grad, indices, momentum):
        v, a = np.array(var.read(), copy=True), np.array(accum.read(), copy=True)
        for row, i in enumerate(np.asarray(indices)):    # rows in order, as TF's kernel
            a[i] = a[i] * momentum + grad[row]
            v[i] -= (grad[row] * lr + a[i] * momentum * lr) if nesterov else a[i] * lr
        var.store_owned(v)
        accum.store_owned(a)
    return apply
