"""Random kernels: one counter-based Philox stream per random op per Session.

The generator
-------------
Each random op owns a :class:`PhiloxStream`, created the first time a Session
builds a plan for the op and kept in the Session's resources (so it survives
across runs and plan rebuilds, and is dropped with the Session). The stream's
128-bit Philox-4x64 key is the op's ``(seed, seed2)`` pair; an op with both
seeds 0 (no graph or op seed: see :mod:`dataflow.framework.random_seed`) takes a
key from the operating system's entropy instead, so it differs in every Session.

Execution ``n`` of the op (counting from 0 in that Session) draws from NumPy's
``Philox`` bit generator with that key and the 256-bit counter ``[0, 0, 0, n]``:
every execution has a block of 2**192 counter values of its own. The only
shared state is the execution count, taken under a lock, so worker threads and
parallel loop iterations can draw concurrently; the same seeds give the same
values run after run in every new Session.

The values are not TF's: TF's Philox kernels map counters to floats differently,
so a seeded TF program and the same program here draw different (equally
distributed) numbers.
"""
from __future__ import annotations

import numpy as np

from dataflow import errors

from ..registry import register_kernel
from ..resources import PhiloxStream


def _stream(ctx) -> PhiloxStream:
    # The seeds are part of the key: eager op names are not unique (every eager
    # RandomUniform is named so), and two differently seeded ops must not share a stream.
    key = ("random_stream", ctx.op.name, ctx.attr("seed"), ctx.attr("seed2"))
    stream = ctx.resources.get(key)
    if stream is None:
        stream = ctx.resources[key] = PhiloxStream(ctx.attr("seed"), ctx.attr("seed2"))
    return stream


def _dims(shape, op) -> tuple:
    dims = tuple(int(d) for d in np.ravel(shape))
    if np.ndim(shape) != 1 or any(d < 0 for d in dims):
        raise errors.InvalidArgumentError(
            None, op, f"shape must be a vector of non-negative integers, got {shape!r}")
    return dims


def _float_sampler(ctx, draw):
    """A kernel drawing ``draw(generator, dims, float32|float64)`` cast to the op dtype."""
    stream, op = _stream(ctx), ctx.op
    out = ctx.attr("dtype").as_numpy_dtype
    work = np.float64 if out == np.float64 else np.float32  # NumPy draws no float16

    def kernel(shape):
        value = draw(stream.generator(), _dims(shape, op), work)
        return value.astype(out, copy=False)
    return kernel


def _truncated(gen, dims, dtype):
    """Standard normal values, each outside [-2, 2] redrawn (as TF's TruncatedNormal)."""
    x = gen.standard_normal(dims, dtype=dtype)
    bad = np.abs(x) > 2
    while bad.any():
        x[bad] = gen.standard_normal(int(bad.sum()), dtype=dtype)
        bad = np.abs(x) > 2
    return x


register_kernel("RandomUniform")(
    lambda ctx: _float_sampler(ctx, lambda g, d, t: g.random(d, dtype=t)))
register_kernel("RandomStandardNormal")(
    lambda ctx: _float_sampler(ctx, lambda g, d, t: g.standard_normal(d, dtype=t)))
register_kernel("TruncatedNormal")(lambda ctx: _float_sampler(ctx, _truncated))


@register_kernel("RandomUniformInt")
def _uniform_int(ctx):
    stream, op = _stream(ctx), ctx.op

    def kernel(shape, lo, hi):
        if np.ndim(lo) or np.ndim(hi):
            raise errors.InvalidArgumentError(None, op, "minval and maxval must be scalars")
        if lo >= hi:
            raise errors.InvalidArgumentError(None, op, f"Need minval < maxval: {lo} >= {hi}")
        return stream.generator().integers(lo, hi, _dims(shape, op), dtype=np.asarray(lo).dtype)
    return kernel


@register_kernel("RandomShuffle")
def _shuffle(ctx):
    stream = _stream(ctx)

    def kernel(value):
        if np.ndim(value) == 0:
            return value
        return np.asarray(value)[stream.generator().permutation(len(value))]
    return kernel


@register_kernel("Multinomial")
def _multinomial(ctx):
    stream, op = _stream(ctx), ctx.op
    out = ctx.attr("output_dtype").as_numpy_dtype

    def kernel(logits, num_samples):
        logits = np.asarray(logits, dtype=np.float64)
        if logits.ndim != 2:
            raise errors.InvalidArgumentError(None, op, f"logits should be a matrix, got "
                                              f"shape {logits.shape}")
        n = int(num_samples)
        if n < 0:
            raise errors.InvalidArgumentError(None, op, f"num_samples should be "
                                              f"nonnegative, got {n}")
        batch, classes = logits.shape
        if classes == 0 and n > 0:
            raise errors.InvalidArgumentError(None, op, "num_classes should be positive")
        # Inverse CDF of softmax(logits) per row; -inf logits have probability 0.
        shifted = np.exp(logits - logits.max(axis=1, keepdims=True))
        cdf = np.cumsum(shifted, axis=1)
        u = stream.generator().random((batch, n)) * cdf[:, -1:]
        idx = np.empty((batch, n), dtype=out)
        for row in range(batch):
            idx[row] = np.minimum(np.searchsorted(cdf[row], u[row], side="right"),
                                  classes - 1)
        return idx
    return kernel
