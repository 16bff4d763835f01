"""``ConfigProto(plan_memory=True)``: run a step from its static memory plan.

The planner (:mod:`dataflow.memory`) sits above the runtime (the layers forbid
``runtime`` importing it), so the arena of a step is built by a registered hook:
``import dataflow`` installs :func:`dataflow.memory.arena.build_arena_step` with
:func:`register_arena_builder`. A Session with ``plan_memory`` holds an
:class:`ArenaCache`: one :class:`ArenaStep`-like object per (compiled step, fed shapes
and dtypes), built on first use, whose arena is allocated once and reused by every
later step with those shapes.

The step runs on an :class:`ArenaExecutor`: the plain executor (its scheduler loop is
not changed) with the built step's kernels, which write into their values' blocks,
and a ready list that always runs the ready node that comes first in the plan's
evaluation order (:class:`PlanOrderReady`). Running in that order is what makes the
plan's block sharing safe: every execution's predecessors come earlier in the order
(the planner checks it), so the executor runs exactly the order the plan assumed,
a loop's iterations one after another whatever ``parallel_iterations`` says, and
no kernel goes to a worker thread (one in flight would let later nodes run before it
finishes). A step without control flow has its order fixed before it runs: the
arena step then carries a :class:`~.flat_schedule.FlatSchedule` (``step.flat``), the
same kernels in the same order as a straight loop of calls, and
:func:`run_arena_step` runs that instead of the executor; a step with while loops
that fit the flat form carries a :class:`~.loop_schedule.LoopSchedule`
(``step.loop_flat``): one such list per loop body.

>>> calls = []
>>> cache = ArenaCache(build=lambda *a: calls.append(a[0]) or object())
>>> step = object()                       # stands for a compiled plan
>>> first = cache.step_for(step, None, [], [], [], [], None)
>>> first is cache.step_for(step, None, [], [], [], [], None), len(calls)
(True, 1)
"""
from __future__ import annotations

import heapq
import threading

import numpy as np

from .executor import DEAD, Executor
from .feeds import feed_templates
from .flat_schedule import FlatSchedule
from .loop_schedule import LoopSchedule

__all__ = ["ArenaCache", "ArenaExecutor", "MAX_ARENAS", "PlanOrderReady",
           "register_arena_builder", "run_arena_step"]

# Arenas kept per Session; past that it starts afresh (a program feeding a new shape
# every step must not grow it without bound).
MAX_ARENAS = 64

# ``build(plan, graph, tensors, targets, feed_tensors, feed_values, kernels, check)``
# -> the arena step (see dataflow.memory.arena.ArenaStep). Registered by import dataflow.
_BUILD: list = []


def register_arena_builder(build) -> None:
    """Make ``build`` the function that builds a step's arena for ``plan_memory``
    (``import dataflow`` registers :func:`dataflow.memory.arena.build_arena_step`).

    ::

        from dataflow.memory.arena import build_arena_step
        register_arena_builder(build_arena_step)
    """
    _BUILD[:] = [build]


class ArenaCache:
    """The arena steps of one Session, by ``(compiled step, fed shapes and dtypes)``.

    ``check`` builds checking steps (``plan_memory="check"``); ``heap`` is a shared
    :class:`dataflow.memory.Heap` the steps must be admitted to before running;
    ``resources`` the Session's resources (the heap moves its optimizer variables)."""

    def __init__(self, build=None, check=False, heap=None, resources=None):
        self._build = build
        self.check = check
        self.heap = heap
        self.resources = resources if resources is not None else {}
        self.steps: dict = {}
        self._lock = threading.Lock()
        # Held for a whole planned step (admission and run): concurrent steps of one
        # session would share its arenas, and a heap's sessions share the budget, so
        # they run one at a time (the heap's lock).
        self.run_lock = getattr(heap, "lock", None) or threading.RLock()

    def step_for(self, plan, graph, tensors, targets, feed_tensors, feed_values, kernels):
        """The arena step of this compiled step and these fed values, built on first
        use (and admitted to the heap, if any, every time)."""
        key = (id(plan), tuple((np.shape(v), getattr(v, "dtype", None)) for v in feed_values))
        entry = self.steps.get(key)
        if entry is None:
            with self._lock:
                entry = self.steps.get(key)
                if entry is None:
                    build = self._build or (_BUILD[0] if _BUILD else None)
                    if build is None:
                        raise RuntimeError("ConfigProto(plan_memory=True) needs the memory "
                                           "planner: import dataflow (it registers "
                                           "dataflow.memory's arena builder)")
                    step = build(plan, graph, list(tensors), list(targets),
                                 list(feed_tensors), list(feed_values), kernels, self.check)
                    _attach_flat_schedule(plan, step)
                    if len(self.steps) >= MAX_ARENAS:
                        self.clear()
                    entry = self.steps[key] = (plan, step)
        if self.heap is not None:
            self.heap.admit(self, entry[1])
        return entry[1]

    def clear(self):
        if self.heap is not None:
            self.heap.forget(self)
        self.steps.clear()


def _attach_flat_schedule(plan, step) -> None:
    """Give an arena step without control flow its :class:`~.flat_schedule.FlatSchedule`
    (``step.flat``), one with while loops that fit the flat form its
    :class:`~.loop_schedule.LoopSchedule` (``step.loop_flat``); otherwise both stay
    None and it runs on the :class:`ArenaExecutor`."""
    if getattr(step, "node_tuples", None) is not None:
        step.flat = FlatSchedule.build(plan, step.node_tuples, step.times)
        if step.flat is None:
            step.loop_flat = LoopSchedule.build(plan, step)


class PlanOrderReady(list):
    """The ready list of an :class:`ArenaExecutor`: a heap whose ``pop`` returns the
    ready ``(gid, iteration)`` that comes first in the plan's evaluation order.

    An execution's key is, from the root frame down, ``(begin of the loop, iteration
    number)`` for every loop it is in, then its op's time in the order (an Enter, run
    in the parent iteration, takes its loop's begin). ``pop`` also moves a Merge's
    value into the Merge's block before the Merge runs (the plan gives a loop
    variable and a cond's result a block of their own)."""

    __slots__ = ("times", "root_keys", "loop_begin", "merges", "move", "nodes", "pinned",
                 "_last", "_prefix")

    def __init__(self, step, node_tuples):
        super().__init__()
        self.times = step.times
        self.root_keys = step.root_keys
        self.loop_begin = step.loop_begin
        self.merges = step.merges
        self.move = step.move_into_merge
        self.nodes = node_tuples
        self.pinned: dict = {}     # this run's arrays of fetched Merges (see move_into_merge)
        self._last = None          # the loop iteration whose key prefix is in _prefix
        self._prefix = ()
        step.new_run()

    def append(self, item, _push=heapq.heappush):
        # Entries are (key, gid, item): two entries never have the same key and gid.
        # Runs once per node execution: the common case (another push from the loop
        # iteration of the last one) comes first, with one attribute read.
        it = item[1]
        if it is self._last:
            gid = item[0]
            _push(self, (self._prefix + (self.times[gid],), gid, item))
            return
        gid = item[0]
        if it.is_root:
            _push(self, (self.root_keys[gid], gid, item))
            return
        prefix, i = (), it
        while not i.is_root:
            prefix = (self.loop_begin[i.frame.plan.name], i.num) + prefix
            i = i.frame.parent_iter
        self._last, self._prefix = it, prefix
        _push(self, (prefix + (self.times[gid],), gid, item))

    def pop(self, index=-1, _pop=heapq.heappop):
        item = _pop(self)[2]
        gid = item[0]
        if gid in self.merges:
            it = item[1]
            base = self.nodes[gid][2]
            value = it.inputs[base]
            if value is not DEAD and value is not None:
                it.inputs[base] = self.move(gid, value, self.pinned)
        return item


class ArenaExecutor(Executor):
    """An :class:`~.executor.Executor` running one arena step (see the module
    docstring): the step's kernels, the plan's order, no worker threads."""

    def __init__(self, plan, step, templates=None):
        super().__init__(plan, None, templates)
        self.step = step
        self.node_tuples = step.node_tuples
        self.ready = PlanOrderReady(step, step.node_tuples)
        # A compiled loop frame (dataflow/loopc) allocates its own values outside the
        # arena and the plan's order: planned steps run their loops interpreted.
        self.interpret_loops = True

    def run(self, deadline=None):
        try:
            return super().run(deadline)
        finally:
            # The step keeps nothing of this run between steps (the caller holds the
            # fetched values it wants): its memory is the arena's alone.
            self.step.new_run()


def run_arena_step(plan, step, feed_values=(), deadline=None) -> list:
    """The raw fetched values of one planned step: the step's flat schedule when it has
    one (``step.flat``, a :class:`~.flat_schedule.FlatSchedule`: no control flow), or
    its loop schedule (``step.loop_flat``, a :class:`~.loop_schedule.LoopSchedule`),
    else an :class:`ArenaExecutor`. ``feed_values`` in the plan's feed order."""
    flat = getattr(step, "flat", None)
    looped = getattr(step, "loop_flat", None) if flat is None else None
    if flat is None and looped is None:
        return ArenaExecutor(plan, step, feed_templates(plan, feed_values)).run(deadline)
    step.new_run()
    try:
        if looped is not None:
            return looped.run(feed_values, deadline)
        return flat.run(feed_values)
    finally:
        step.new_run()   # as ArenaExecutor.run: nothing of this run kept between steps
