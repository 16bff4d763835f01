"""``ConfigProto(memory_budget_bytes=N)``: refuse a step whose static memory plan
exceeds the budget, before any of its kernels runs.

The runtime sits below :mod:`dataflow.memory` (the planner builds on the framework's
shape inference, and the layers forbid ``runtime`` importing it), so the check is a
registered hook: ``import dataflow`` installs :func:`dataflow.memory.budget_error`
with :func:`register_budget_check`. A Session with a budget holds a
:class:`BudgetGuard` that calls the hook once per (compiled step, fed shapes) and
remembers the outcome, so repeated steps with the same shapes never replan.

>>> calls = []
>>> guard = BudgetGuard(1024, check=lambda graph, tensors, targets, feeds, budget:
...                     calls.append(budget))
>>> step = object()                                  # stands for a compiled plan
>>> for _ in range(3):
...     guard.check(step, None, [], [], [], [])
>>> calls
[1024]
"""
from __future__ import annotations

import threading

import numpy as np

__all__ = ["BudgetGuard", "MAX_CHECKS", "register_budget_check"]

# Outcomes kept per guard; past that it starts afresh (a program feeding a new shape
# every step must not grow it without bound).
MAX_CHECKS = 1024

# ``check(graph, tensors, targets, feed_dict, budget)`` -> an exception to raise (the
# step does not fit, or its memory cannot be planned) or None. dataflow.memory's
# budget_error is registered by ``import dataflow``.
_CHECK: list = []


def register_budget_check(check) -> None:
    """Make ``check(graph, tensors, targets, feed_dict, budget)`` the function that
    decides whether a step fits ``memory_budget_bytes`` (``import dataflow`` registers
    :func:`dataflow.memory.budget_error`). It returns the exception to raise, or None.

    ::

        from dataflow.memory import budget_error
        register_budget_check(budget_error)
    """
    _CHECK[:] = [check]


class BudgetGuard:
    """The budget check of one Session: the hook's outcome per ``(compiled step, fed
    shapes and dtypes)``, computed on first use; ``check`` replaces the registered
    hook (tests)."""

    def __init__(self, budget_bytes: int, check=None):
        self.budget_bytes = budget_bytes
        self._check = check
        self._outcomes: dict = {}
        self._lock = threading.Lock()

    def check(self, step, graph, tensors, targets, feed_tensors, feed_values) -> None:
        """Raise the hook's error for this step and these fed values, if any. ``step``
        is the compiled plan (the PlanCache entry): the key holds it, so its id is
        never reused while the outcome is kept."""
        key = (id(step), tuple((np.shape(v), getattr(v, "dtype", None))
                               for v in feed_values))
        entry = self._outcomes.get(key)
        if entry is None:
            with self._lock:
                entry = self._outcomes.get(key)
                if entry is None:
                    error = self._plan(graph, tensors, targets, feed_tensors, feed_values)
                    if len(self._outcomes) >= MAX_CHECKS:
                        self._outcomes.clear()
                    entry = self._outcomes[key] = (step, error)
        error = entry[1]
        if error is not None:
            # A fresh exception each time: re-raising one instance would chain the
            # tracebacks of every refused step onto it.
            raise type(error)(None, error.op, error.message)

    def _plan(self, graph, tensors, targets, feed_tensors, feed_values):
        check = self._check or (_CHECK[0] if _CHECK else None)
        if check is None:
            raise RuntimeError("ConfigProto(memory_budget_bytes=...) needs the memory "
                               "planner: import dataflow (it registers dataflow.memory's "
                               "budget check)")
        return check(graph, list(tensors), list(targets),
                         dict(zip(feed_tensors, feed_values)), self.budget_bytes)

    def clear(self):
        self._outcomes.clear()
