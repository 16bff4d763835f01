"""The largest batch that fits a memory budget (CalcGraph's dichotomic search).

>>> import dataflow as df
>>> g = df.Graph()
>>> with g.as_default():
...     x = df.placeholder(df.float32, [None, 256], name="x")
...     y = df.reduce_sum(df.tanh(x) * 2.0)
>>> b = max_batch_size(y, {x: [None, 256]}, budget_bytes=1 << 20, graph=g)
>>> df.memory.plan(y, feed_shapes={x: [b, 256]}, graph=g).peak_bytes <= 1 << 20
True
"""
from __future__ import annotations

import itertools

from .. import errors
from ..framework.tensor_shape import as_shape
from .planner import plan

__all__ = ["max_batch_size"]


def max_batch_size(fetches, feed_shapes, budget_bytes, graph=None, trip_counts=None) -> int:
    """The largest batch ``b`` whose plan's ``peak_bytes`` is at most ``budget_bytes``.

    ``feed_shapes`` gives each placeholder's shape with ``None`` in dimension 0 for
    the batched ones (the same ``b`` for all). As CalcGraph: plan batch 1 (a
    ResourceExhaustedError giving its peak if even that does not fit), guess the
    linear extrapolation, double while it fits, then bisect. Every planned batch is
    kept, and the peaks must grow with the batch over the searched range (a
    FailedPreconditionError otherwise: bisection would not be sound).
    """
    shapes = {k: as_shape(v) for k, v in feed_shapes.items()}
    batched = [k for k, s in shapes.items() if s.ndims and s.dims[0] is None]
    if not batched:
        raise errors.InvalidArgumentError(
            None, None, "max_batch_size: no feed_shapes entry has None in dimension 0")
    seen: dict = {}

    def peak(b: int) -> int:
        if b not in seen:
            sized = {k: ([b] + s.dims[1:] if k in batched else s) for k, s in shapes.items()}
            seen[b] = plan(fetches, feed_shapes=sized, graph=graph,
                           trip_counts=trip_counts).peak_bytes
        return seen[b]

    one = peak(1)
    if one > budget_bytes:
        raise errors.ResourceExhaustedError(
            None, None, f"max_batch_size: batch 1 already needs {one} bytes, over the "
            f"budget of {budget_bytes} bytes")
    lo, hi = 1, max(2, budget_bytes // one)   # a linear guess first
    while peak(hi) <= budget_bytes:
        lo, hi = hi, hi * 2
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if peak(mid) <= budget_bytes:
            lo = mid
        else:
            hi = mid
    _check_monotone(seen)
    return lo


def _check_monotone(seen: dict) -> None:
    batches = sorted(seen)
    for a, b in itertools.pairwise(batches):
        if seen[b] < seen[a]:
            raise errors.FailedPreconditionError(
                None, None, f"max_batch_size: the planned peak is not monotone in the "
                f"batch (batch {a}: {seen[a]} bytes, batch {b}: {seen[b]} bytes)")
