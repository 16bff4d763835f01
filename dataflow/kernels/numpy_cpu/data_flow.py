"""Stack kernels: a stack is a Python list owned by the step that made it."""
from __future__ import annotations

import numpy as np

from dataflow import errors

from ..registry import device_memory, register_kernel


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


def push_kernel(ctx):
    """StackPush on ``ctx``'s device. With ``swap_memory`` on a device whose memory is
    not the host's, the entry is copied to host memory after the push."""
    memory = device_memory(ctx.device_type) if ctx.attr("swap_memory") else None
    if memory is None:
        return StackResource.push
    to_host = memory.to_host

    def push_swapped(stack, value):
        stack.push(_Swapped(to_host(value)))
        return value
    return push_swapped


def pop_kernel(ctx):
    """StackPop on ``ctx``'s device: a swapped entry is copied back to the device first."""
    memory = device_memory(ctx.device_type)
    to_device = memory.to_device if memory is not None else None

    def pop(stack):
        value = stack.pop()
        if type(value) is _Swapped:
            return to_device(value.host) if to_device is not None else value.host
        return value
    return pop


class _Swapped:
    """A stack entry held in host memory for a device tensor."""

    __slots__ = ("host",)

    def __init__(self, host):
        self.host = host


register_kernel("StackPush")(push_kernel)
register_kernel("StackPop")(pop_kernel)
register_kernel("StackSize")(lambda ctx: lambda s: np.int32(len(s.entries)))
