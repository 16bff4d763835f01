"""The memory budget check behind ``ConfigProto(memory_budget_bytes=N)``.

:func:`budget_error` plans a step (:func:`~dataflow.memory.planner.plan`) and returns
the ResourceExhaustedError a Session raises, before running any kernel, when the
plan's peak exceeds the budget; ``import dataflow`` registers it with the runtime
(``dataflow.runtime.memory_budget.register_budget_check``).

>>> import dataflow as df
>>> g = df.Graph()
>>> with g.as_default():
...     x = df.placeholder(df.float32, [None, 256], name="x")
...     y = df.reduce_sum(df.tanh(x), name="total")
>>> err = budget_error(g, [y], [], {x: np.zeros((64, 256), np.float32)}, 1000)
>>> type(err).__name__, "'x'" in err.message
('ResourceExhaustedError', True)
>>> budget_error(g, [y], [], {x: np.zeros((1, 256), np.float32)}, 1 << 20) is None
True
"""
from __future__ import annotations

from .. import errors
from .planner import plan

__all__ = ["budget_error", "TOP_BUFFERS"]

# How many of the largest buffers the error names.
TOP_BUFFERS = 5


def budget_error(graph, tensors, targets, feed_dict, budget_bytes):
    """The error that refuses this step under ``budget_bytes``, or None when its
    plan's peak fits. A step whose memory cannot be planned (a while loop with no
    known trip count, a shape unknown after inference) is refused too: its budget
    cannot be checked, and running it anyway could exceed it."""
    try:
        p = plan(list(tensors) + list(targets), feed_dict=feed_dict, graph=graph)
    except (errors.OpError, KeyError) as e:
        message = getattr(e, "message", str(e))
        return errors.InvalidArgumentError(
            None, getattr(e, "op", None),
            f"ConfigProto(memory_budget_bytes={budget_bytes}): the step's memory cannot "
            f"be planned, so the budget cannot be checked: {message}")
    if p.peak_bytes <= budget_bytes:
        return None
    return errors.ResourceExhaustedError(None, None, _over_budget_message(p, budget_bytes))


def _over_budget_message(p, budget_bytes) -> str:
    largest = sorted(p.buffers, key=lambda b: b.size, reverse=True)[:TOP_BUFFERS]
    lines = [f"memory_budget_bytes={budget_bytes} exceeded: the step's planned peak is "
             f"{p.peak_bytes} bytes (arena {p.arena_bytes} + pinned {p.pinned_bytes} + "
             f"stacks {p.stack_bytes_for()}); nothing was run. Largest buffers:"]
    for b in largest:
        op = b.producer.name if b.producer is not None else b.name.split(":")[0]
        lines.append(f"  op '{op}' ({b.name}, {b.zone}): {b.size} bytes, shape "
                     f"{list(b.shape)}")
    return "\n".join(lines)
