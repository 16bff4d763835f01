"""A planned step as a straight list of kernel calls (``ConfigProto(plan_memory=True)``).

A step run from its memory plan must run its nodes in the plan's evaluation order
(:mod:`.memory_arena`). For a step without control flow that order is fixed before
the run: every node runs once, and the order is a topological order of the graph.
So nothing has to be decided while it runs, and :class:`FlatSchedule` runs it as
a plain loop of kernel calls: no ready list, no pending counts, no delivery along
edges, no iteration state.

Each feed, folded constant and kernel output read by another kernel has one
*register* (a slot of the run's value list), and each kernel reads its arguments
from registers. Which register each argument comes from, which registers a node
writes, which results it fills and which registers die after it are all fixed when
the schedule is built; a register is cleared after its last reader, so a value
leaves the step when the executor would drop it (its ``clear`` of a root-frame
node's inputs). The kernels are the arena step's (they write into their blocks),
so a step computes bit for bit what the executor computes running the same
kernels in the same order.

A step with loops, conds, Send/Recv or a node whose order the plan does not fix
gets no schedule (:meth:`FlatSchedule.build` returns None) and runs on the
:class:`~.memory_arena.ArenaExecutor`.

>>> import dataflow as df
>>> from dataflow.runtime.plan import build_plan
>>> from dataflow.runtime.kernel_resolver import KernelResolver
>>> from dataflow.runtime.device_set import DeviceSet
>>> with df.Graph().as_default() as g:
...     x = df.placeholder(df.float32, [3])
...     y = df.tanh(x) * 2.0
>>> kernels = KernelResolver(DeviceSet(g, {}, False), df.ConfigProto(), resources={})
>>> plan = build_plan(g, [y], [], [x], kernels.kernel_for, fuse_elementwise=False)
>>> flat = FlatSchedule.build(plan, plan.node_tuples, list(range(len(plan.ops))))
>>> out = flat.run([np.zeros(3, np.float32)])
>>> out[0].tolist(), flat.calls
([0.0, 0.0, 0.0], 2)
"""
from __future__ import annotations

import numpy as np  # noqa: F401  (the docstring's example uses np)

from .executor import _NO_VALUE, Executor
from .plan import CONTROL_TRIGGER, NORMAL, TO_FETCH, TO_NODE

__all__ = ["FlatSchedule"]


class FlatSchedule:
    """The kernel calls of one loop-free plan, in the plan's order (module docstring).

    ``entries`` holds, per call: ``(fn, args, out, outs, fetch, drop, gid)`` where
    ``args`` are the list indices of the kernel's arguments, ``out`` the register of
    a single-output kernel's value (-1: none, or several outputs in ``outs`` as
    ``(output index, register)``), ``fetch`` the ``(output index, result index)``
    pairs (output index None: a single-output kernel's value), ``drop`` the registers
    whose last reader this call is."""

    __slots__ = ("plan", "entries", "initial", "feed_registers", "num_results", "calls")

    # The executor's errors: an OpError naming the node whose kernel failed.
    _kernel_error = Executor._kernel_error

    def __init__(self, plan, entries, initial, feed_registers):
        self.plan = plan
        self.entries = entries
        self.initial = initial                 # the registers at the start of a run
        self.feed_registers = feed_registers   # (feed index, register)
        self.num_results = len(plan.fetches)
        self.calls = len(entries)

    @property
    def num_registers(self) -> int:
        """Length of the value list a run copies (feeds, constants, kernel outputs)."""
        return len(self.initial)

    @classmethod
    def build(cls, plan, node_tuples, times):
        """The schedule of ``plan`` running ``node_tuples`` (the arena step's kernels)
        in the order of ``times`` (gid -> position in the plan's order), or None when
        the step has control flow or the order does not put every node after what it
        reads (then the executor runs it)."""
        if len(plan.frames) != 1 or plan.enter_info or plan.merge_num_inputs:
            return None
        if any(node[0] not in (NORMAL, CONTROL_TRIGGER) for node in node_tuples):
            return None
        order = sorted(range(len(node_tuples)), key=times.__getitem__)
        source = {}          # input slot -> (producer gid, output index)
        for gid, node in enumerate(node_tuples):
            for k, _dg, _dl, ds, mode in node[5]:
                if mode == TO_NODE and ds >= 0:
                    source[ds] = (gid, k)
                elif mode not in (TO_NODE, TO_FETCH):
                    return None
        fed_slot = {slot: i for i, slots in enumerate(plan.feed_slots) for _f, slot in slots}
        # One register per feed, per kernel output read by another kernel, and per
        # input slot filled before the run (a folded constant): the run's value list.
        initial: list = []
        register: dict = {}
        for key, value in [(("feed", i), None) for i in range(plan.num_feeds)] \
                + [(source[ds], None) for ds in sorted(source)]:
            if key not in register:
                register[key] = len(initial)
                initial.append(value)
        slot_register = {}
        for gid in order:
            base, end = node_tuples[gid][2:4]
            for s in range(base, end):
                if s in source:
                    slot_register[s] = register[source[s]]
                elif s in fed_slot:
                    slot_register[s] = register[("feed", fed_slot[s])]
                else:
                    slot_register[s] = len(initial)
                    initial.append(plan.root.inputs[s])
        position = {gid: p for p, gid in enumerate(order)}
        last_read: dict = {}   # register of a kernel output -> position of its last reader
        for gid in order:
            base, end = node_tuples[gid][2:4]
            for s in range(base, end):
                if s in source:
                    if position[source[s][0]] >= position[gid]:
                        return None
                    last_read[slot_register[s]] = position[gid]
            for _k, dg, _dl, _ds, mode in node_tuples[gid][5]:
                if mode == TO_NODE and position[dg] <= position[gid]:
                    return None     # a control successor placed before it
        dies_after: dict = {}
        for reg, p in last_read.items():
            dies_after.setdefault(p, []).append(reg)
        entries = []
        for p, gid in enumerate(order):
            role, _local, base, end, fn, edges, nout, _clear = node_tuples[gid]
            if role == CONTROL_TRIGGER:    # no value: its control edges are the order
                continue
            if fn is None:
                return None
            args = tuple(slot_register[s] for s in range(base, end))
            outs = sorted({(k, register[(gid, k)]) for k, _dg, _dl, ds, mode in edges
                           if mode == TO_NODE and ds >= 0})
            # A single-output kernel's value is fetched whole (output index None).
            fetch = tuple((None if nout == 1 else k, ds)
                          for k, _dg, _dl, ds, mode in edges if mode == TO_FETCH)
            out = -1
            if nout == 1:
                out = outs[0][1] if outs else -1
                outs = ()
            entries.append((fn, args, out, tuple(outs), fetch,
                            tuple(dies_after.get(p, ())), gid))
        feeds = tuple((i, register[("feed", i)]) for i in range(plan.num_feeds))
        return cls(plan, entries, initial, feeds)

    def run(self, feed_values=()) -> list:
        """Run every call once; the fetched values in fetch order (``feed_values``: the
        step's fed values, in the plan's feed order)."""
        vals = self.initial[:]
        for i, r in self.feed_registers:
            vals[r] = feed_values[i]
        results = [_NO_VALUE] * self.num_results
        entry = None
        try:
            for entry in self.entries:
                fn, args, out_reg, outs, fetch, drop, _gid = entry
                n = len(args)
                # Direct calls for the common arities: no list, no *args.
                if n == 2:
                    out = fn(vals[args[0]], vals[args[1]])
                elif n == 1:
                    out = fn(vals[args[0]])
                elif n == 0:
                    out = fn()
                else:
                    out = fn(*[vals[i] for i in args])
                if out_reg >= 0:
                    vals[out_reg] = out
                elif outs:
                    for k, r in outs:
                        vals[r] = out[k]
                if fetch:
                    for k, j in fetch:
                        results[j] = out if k is None else out[k]
                if drop:
                    for r in drop:
                        vals[r] = None
        except BaseException as exc:
            if entry is None:
                raise
            raise self._kernel_error(entry[6], exc)
        return results
