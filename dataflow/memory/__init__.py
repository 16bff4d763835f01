"""Static memory planning: how much memory a step takes, known before it runs.

``df.memory.plan(fetches, feed_shapes=...)`` returns a :class:`MemoryPlan`: every
value's size, its block in one arena (Owl's best-fit planner with in-place reuse),
the arena's size, the pinned values, the stacks a gradient loop fills and a lower
bound, for graphs with cond and while loops.

>>> import dataflow as df
>>> g = df.Graph()
>>> with g.as_default():
...     x = df.placeholder(df.float32, [None, 8], name="x")
...     y = df.reduce_sum(df.sigmoid(x) * 2.0)
>>> df.memory.plan(y, feed_shapes={x: [100, 8]}, graph=g).peak_bytes > 0
True
"""
from . import arena  # noqa: F401  (dataflow installs arena.build_arena_step as the plan_memory hook)
from .batch import max_batch_size
from .budget import budget_error
from .heap import Heap
from .planner import ALIGNMENT, Buffer, MemoryPlan, StackUse, plan
from .shapes import StepShapes, infer_step_shapes

__all__ = ["ALIGNMENT", "Buffer", "budget_error", "Heap", "MemoryPlan", "StackUse", "StepShapes", "infer_step_shapes",
           "max_batch_size", "plan"]
