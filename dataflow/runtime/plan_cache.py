"""The compiled plans of one Session, keyed by what a step asks for.

A step is compiled once per ``(graph version, fetched tensors, target ops, fed
tensors)``: the graph's version changes whenever an op is added, so a plan never
outlives the graph it was built for. The cache holds at most :data:`MAX_PLANS`
plans; past that it starts afresh (a program that builds new fetches every step
must not grow it without bound).

>>> import dataflow as df
>>> with df.Graph().as_default() as g:
...     y = df.constant(1.0)
>>> cache = PlanCache(lambda graph, tensors, targets, feeds: object())
>>> cache.get(g, [y], [], []) is cache.get(g, [y], [], [])
True
>>> with g.as_default():
...     z = y + 1.0                      # the graph grew: a new plan
>>> len(cache), cache.get(g, [y], [], []) is next(iter(cache.values()))
(1, False)
"""
from __future__ import annotations

import threading

__all__ = ["MAX_PLANS", "PlanCache"]

MAX_PLANS = 256


class PlanCache:
    """Plans by ``(graph.version, tensors, targets, feed tensors)``; ``build(graph,
    tensors, targets, feed_tensors)`` compiles a missing one (under a lock: one build at
    a time)."""

    def __init__(self, build):
        self._build = build
        self._plans: dict = {}
        self._lock = threading.Lock()

    def get(self, graph, tensors, targets, feed_tensors):
        """The plan of this step, built on first use."""
        key = (graph.version, tuple(tensors), tuple(targets), tuple(feed_tensors))
        plan = self._plans.get(key)
        if plan is None:
            with self._lock:
                plan = self._plans.get(key)   # another thread may have built it
                if plan is None:
                    if len(self._plans) > MAX_PLANS:
                        self._plans.clear()
                    plan = self._plans[key] = self._build(graph, tensors, targets,
                                                          feed_tensors)
        return plan

    def values(self):
        """The cached plans (for tests and diagnostics)."""
        return self._plans.values()

    def __len__(self) -> int:
        return len(self._plans)

    def clear(self):
        self._plans.clear()
