"""Stack kernels: a stack is a Python list owned by the step that made it."""
from __future__ import annotations

import numpy as np

from dataflow import errors

from ..registry import register_kernel


class StackResource:
    """The entries of one stack, with counts of pushes and pops (for tests and stats)."""

    __slots__ = ("name", "max_size", "entries", "pushes", "pops")

    def __init__(self, name, max_size):
        self.name, self.max_size = name, max_size
        self.entries = []
        self.pushes = self.pops = 0

    def push(self, value):
        if 0 < self.max_size <= len(self.entries):
            raise errors.InvalidArgumentError(
                None, None, f"Stack {self.name} is full (max_size {self.max_size})")
        self.entries.append(value)
        self.pushes += 1
        return value

    def pop(self):
        if not self.entries:
            raise errors.InvalidArgumentError(None, None, f"Stack {self.name} is empty.")
        self.pops += 1
        return self.entries.pop()


@register_kernel("Stack")
def _stack(ctx):
    name, max_size = ctx.op.name, ctx.attr("max_size")
    return lambda: StackResource(name, max_size)


register_kernel("StackPush")(lambda ctx: StackResource.push)
register_kernel("StackPop")(lambda ctx: StackResource.pop)
register_kernel("StackSize")(lambda ctx: lambda s: np.int32(len(s.entries)))
