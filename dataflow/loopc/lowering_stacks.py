"""Stacks pushed and popped in one compiled frame (second-order gradients through loops).

A stack only pushed (a forward loop saving values) or only popped (its gradient loop) is
the code generator's own slot (:mod:`.codegen`). A gradient of a gradient loop pushes and
pops one stack in the same frame; such a stack is the resource kind ``"stack2"``: its
entries so far come in stacked along axis 0 (one buffer, grown by doubling as pushes
need), with the count, and go back after the compiled code returns, with the numbers of
pushes and pops. A pop hands out a copy of its entry (a later push in the same frame
reuses the row); a pop of an empty stack raises ``Fallback``, so the interpreter raises
"Stack ... is empty." itself. Stacks with a ``max_size`` stay interpreted (only the
interpreter knows when it is exceeded).

>>> from dataflow.loopc.lowering import RESOURCE_KINDS
>>> sorted(RESOURCE_KINDS)
['stack2', 'ta']
"""
from __future__ import annotations

import numpy as np

from .lowering import RESOURCE_KINDS, _dtype_name

__all__ = ["PushPopStacks"]

_STACK_OPS = ("StackPush", "StackPop", "StackSize")


def _all_ops(loop):
    yield from loop.ops
    for child in loop.children.values():
        yield from _all_ops(child)


def _entry(op):
    t = op._inputs[1] if op.type == "StackPush" else op._outputs[0]
    return _dtype_name(t), t.shape.ndims


def _unsupported(message):
    from .codegen import Unsupported   # (codegen imports this module's table)
    return Unsupported(message)


class PushPopStacks:
    """The resource kind ``"stack2"`` (see the module docstring)."""

    @staticmethod
    def claim(gen) -> set:
        uses: dict = {}
        for op in _all_ops(gen.top):
            if op.type in _STACK_OPS:
                uses.setdefault(gen._root(op._inputs[0]), []).append(op)
        gen.stack_slots = {}
        k = 0
        for root, ops in uses.items():
            types = {op.type for op in ops}
            if not {"StackPush", "StackPop"} <= types:
                continue
            entries = {_entry(op) for op in ops if op.type != "StackSize"}
            if len(entries) > 1:
                raise _unsupported(f"stack '{root._inputs[0].name}' holds mixed entries")
            dtype, rank = entries.pop()
            if dtype is None or rank is None:
                raise _unsupported(f"stack '{root._inputs[0].name}': entries of a "
                                   "non-numeric dtype or unknown rank")
            name = gen.param(("stack2", root, rank, dtype), f"sp{k}")
            names = (f"sp{k}_buf", f"sp{k}_n", f"sp{k}_buf_peak", f"sp{k}_pushes",
                     f"sp{k}_pops")
            gen.emit(1, f"{names[0]}, {names[1]} = {name}")
            gen.emit(1, f"{names[2]} = {names[1]}")
            gen.emit(1, f"{names[3]} = 0")
            gen.emit(1, f"{names[4]} = 0")
            gen.stack_slots[root] = names
            k += 1
        return set(gen.stack_slots)

    @staticmethod
    def finish(gen):
        exprs, results = [], []
        for root, names in getattr(gen, "stack_slots", {}).items():
            exprs.append(f"({', '.join(names)})")
            results.append(("stack2", root))
        return exprs, results

    @staticmethod
    def argument(desc, res):
        _, root, rank, dtype = desc
        if not hasattr(res, "entries"):
            return None, f"'{root._inputs[0].name}' is not a stack"
        if res.max_size > 0:
            return None, f"stack '{res.name}' has a max_size"
        if not res.entries:
            buf = np.empty((0,) * (rank + 1), dtype)
        else:
            values = [np.asarray(v) for v in res.entries]
            if any(v.shape != values[0].shape or v.ndim != rank for v in values):
                return None, f"stack '{res.name}': entries of different shapes or ranks"
            buf = np.ascontiguousarray(np.stack(values), dtype=dtype)
        return (buf, np.int64(len(res.entries))), res

    @staticmethod
    def commit(res, state):
        buf, n, _peak, pushes, pops = state
        res.entries = [buf[i] for i in range(int(n))]
        res.pushes += int(pushes)
        res.pops += int(pops)


RESOURCE_KINDS["stack2"] = PushPopStacks
