"""A planned step with while loops as flat lists of kernel calls, one per loop body.

A step run from its memory plan runs its nodes in the plan's evaluation order
(:mod:`.memory_arena`): a loop's iterations one after another, each running its
nodes in the order the plan gave the body once. That order is fixed before the
run, so the ready heap of the :class:`~.memory_arena.ArenaExecutor` only ever
rediscovers it, one Python call pair per node execution. :class:`LoopSchedule`
runs it directly, as :class:`~.flat_schedule.FlatSchedule` does for loop-free
steps: each frame (the root and every loop body) is a list of entries in the
plan's order over one shared value list (registers), and a loop is one entry of
its parent's list at the place the plan begins it.

The loop bookkeeping becomes a few assignments:

* a loop invariant (constant Enter) and a loop Switch's outputs are the registers
  they forward (no entry); a loop variable's Enter and NextIteration each write
  the variable's *carry* register, and its Merge moves the carry into the Merge's
  block (``ArenaStep.move_into_merge``, as the executor's ready list does);
* every iteration runs the body's *head* (the entries up to the node computing
  the loop predicate), reads the predicate once, then runs the entries live when
  it is true (the body; the next iteration follows) or those live when it is false
  (the Merges and Switches after the predicate and the Exits, which copy the loop
  variables' final values to the parent's registers; the loop ends). Which nodes
  run live under each predicate value is worked out when the schedule is built,
  with the executor's dead-token rules (a node with a dead input is dead, a
  ControlTrigger never is), so both runners call the same kernels in the same order;
* a kernel's stack pushes and pops are the arena step's kernels (the pushes copy
  out of the arena as before).

A step gets no schedule (:meth:`LoopSchedule.build` returns None; it runs on the
ArenaExecutor) when it has Send/Recv nodes, a Switch or Merge that is not a loop's
own (a cond, in the root frame or in a loop body), a Merge whose ``value_index``
is read, a loop variable Enter read by anything but its Merge, a loop invariant
Enter feeding a Merge, a NextIteration that would run when the predicate is false,
a body node other than an Exit that would be dead when it is true, a node before
the predicate that would be dead when it is false, a fetch inside a loop body, or
an order that puts a node before what it reads. Nested loops are entries of their
parent body's list.

>>> import dataflow as df
>>> g = df.Graph()
>>> with g.as_default():
...     x = df.placeholder(df.float32, [4], name="x")
...     _, y = df.while_loop(lambda i, h: i < 3, lambda i, h: (i + 1, df.tanh(h) * x),
...                          (0, df.ones([4])))
>>> with df.Session(graph=g, config=df.ConfigProto(plan_memory=True)) as sess:
...     out = sess.run(y, {x: np.full(4, 2.0, np.float32)})
...     (step,) = [s for _p, s in sess._arena.steps.values()]
>>> type(step.loop_flat).__name__, round(float(out[0]), 3)   # tanh(tanh(tanh(1)*2)*2)*2
('LoopSchedule', 1.897)
"""
from __future__ import annotations

import time

import numpy as np  # noqa: F401  (the docstring's example uses np)

from .executor import _NO_VALUE, Executor
from .plan import (CONTROL_TO_MERGE, CONTROL_TRIGGER, ENTER, EXIT, MERGE, NEXT_ITERATION,
                   NORMAL, SWITCH, TO_EXIT, TO_FETCH, TO_MERGE, TO_MERGE_FROM_ENTER, TO_NEXT,
                   TO_NODE)

__all__ = ["LoopSchedule"]

# Entry kinds: every entry is (kind, fn, args, out, outs, fetch, drop, gid).
_KERNEL, _MERGE, _NEXT, _EXIT, _LOOP = range(5)


class _Failed(Exception):
    """A kernel error inside a frame's entries, carried out to :meth:`LoopSchedule.run`
    (which names the node) through the enclosing loops' entries unchanged."""

    def __init__(self, gid, exc):
        super().__init__(gid, exc)
        self.gid, self.exc = gid, exc


class _Loop:
    """One loop frame's entries (see the module docstring): ``enters`` are the
    (parent register, carry register) pairs written before iteration 0; ``pred`` the
    register of the loop predicate; ``clear`` the registers of the body emptied when
    the loop ends (nothing of it outlives the loop, as the executor frees a frame)."""

    __slots__ = ("name", "enters", "head", "pred", "body", "last", "clear", "gid")

    def __init__(self, name, enters, head, pred, body, last, clear, gid):
        self.name, self.enters, self.head, self.pred = name, enters, head, pred
        self.body, self.last, self.clear, self.gid = body, last, clear, gid


class _Refused(Exception):
    """The step does not fit the flat form (the reason is the message)."""


class LoopSchedule:
    """The entries of a planned step with while loops, in the plan's order (module
    docstring). ``root`` is the root frame's entry list; ``initial`` the value list at
    the start of a run (folded constants); ``feed_registers`` (feed index, register)."""

    __slots__ = ("plan", "root", "initial", "feed_registers", "num_results", "move",
                 "pinned", "deadline", "iterations")

    _kernel_error = Executor._kernel_error
    _deadline_error = staticmethod(Executor._deadline_error)

    def __init__(self, plan, root, initial, feed_registers, move):
        self.plan = plan
        self.root = root
        self.initial = initial
        self.feed_registers = feed_registers
        self.num_results = len(plan.fetches)
        self.move = move            # ArenaStep.move_into_merge
        self.pinned: dict = {}      # this run's arrays of fetched Merges (move_into_merge)
        self.deadline = None
        self.iterations = 0         # loop iterations of the last run (all frames)

    @classmethod
    def build(cls, plan, step):
        """The schedule of ``plan`` running the arena ``step``'s kernels in its plan's
        order, or None when the step does not fit the flat form (module docstring)."""
        try:
            return _Builder(plan, step).build(cls)
        except _Refused:
            return None

    def run(self, feed_values=(), deadline=None) -> list:
        """One step; the fetched values in fetch order (``feed_values`` in the plan's
        feed order; ``deadline`` a ``time.monotonic()`` bound checked per iteration)."""
        vals = self.initial[:]
        for i, r in self.feed_registers:
            vals[r] = feed_values[i]
        results = [_NO_VALUE] * self.num_results
        self.pinned = {}
        self.deadline = deadline
        self.iterations = 0
        try:
            self._block(self.root, vals, results)
        except _Failed as failed:
            raise self._kernel_error(failed.gid, failed.exc)
        finally:
            self.pinned = {}
        return results

    def _block(self, entries, vals, results):
        """Run one list of entries (a frame's head, body or last iteration's part)."""
        entry = None
        try:
            for entry in entries:
                kind, fn, args, out_reg, outs, fetch, drop, gid = entry
                if kind == _KERNEL:
                    n = len(args)
                    # Direct calls for the common arities: no list, no *args. Written out
                    # here as in FlatSchedule.run: a shared helper would cost one more
                    # Python call per kernel on the hot path.
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
                elif kind == _MERGE:
                    value = vals[args]
                    if fn is not None and value is not None:
                        value = fn(gid, value, self.pinned)
                    vals[out_reg] = value
                elif kind == _NEXT:
                    vals[out_reg] = vals[args]
                elif kind == _EXIT:
                    value = vals[out_reg] = vals[args]
                    for _k, j in fetch:
                        results[j] = value
                else:
                    self._loop(fn, vals, results)
                if drop:
                    for r in drop:
                        vals[r] = None
        except _Failed:
            raise
        except BaseException as exc:
            if entry is None:
                raise
            raise _Failed(entry[7], exc) from None

    def _loop(self, loop, vals, results):
        """Run one loop to its end: the predicate, read once per iteration, picks the
        body (and another iteration) or the last iteration's entries."""
        for src, carry in loop.enters:
            vals[carry] = vals[src]
        block, head, body, pred = self._block, loop.head, loop.body, loop.pred
        deadline = self.deadline
        num = 0
        while True:
            if deadline is not None and time.monotonic() > deadline:
                raise _Failed(loop.gid, self._deadline_error(
                    self.plan.ops[loop.gid], f" while starting iteration {num} of loop "
                    f"frame '{loop.name}'"))
            block(head, vals, results)
            if not vals[pred]:
                break
            block(body, vals, results)
            num += 1
        block(loop.last, vals, results)
        self.iterations += num + 1
        for r in loop.clear:
            vals[r] = None


class _Builder:
    """Builds a :class:`LoopSchedule` (raises :class:`_Refused` when it does not fit)."""

    def __init__(self, plan, step):
        self.plan = plan
        self.step = step
        self.nodes = step.node_tuples
        self.times = step.times
        self.loop_begin = step.loop_begin
        self.merge_moves = step.merges
        self.move = step.move_into_merge
        self.frame_of = {}
        gid_of = {id(op): gid for gid, op in enumerate(plan.ops)}
        for frame in plan.frames.values():
            for op in frame.ops:
                self.frame_of[gid_of[id(op)]] = frame
        self.fed = {(id(frame), slot): i for i, slots in enumerate(plan.feed_slots)
                    for frame, slot in slots}
        self.initial: list = [None] * plan.num_feeds
        self.produced: dict = {}      # (gid, output index) -> register
        self.slot_regs: dict = {}     # (id(frame), slot) -> register
        self.carry: dict = {}         # loop Merge gid -> its carry register

    # -- the graph's shape ---------------------------------------------------------------
    def _check_shape(self):
        plan, nodes = self.plan, self.nodes
        if len(plan.frames) < 2:
            raise _Refused("no loop")
        self.source = {}       # (id(frame), slot) -> (producer gid, output index)
        self.controls = {}     # gid -> [(producer gid, output index)] of control edges
        self.merge_in = {}     # Merge gid -> [(producer gid, mode, value index)]
        for gid, node in enumerate(nodes):
            role = node[0]
            if role not in (NORMAL, CONTROL_TRIGGER, ENTER, EXIT, NEXT_ITERATION, MERGE,
                            SWITCH):
                raise _Refused("Send/Recv")
            if role == NORMAL and node[4] is None:
                raise _Refused("a node without a kernel")
            for k, dg, _dl, ds, mode in node[5]:
                if mode in (TO_NODE, TO_EXIT, TO_NEXT):
                    if ds >= 0:
                        self.source[(id(self.frame_of[dg]), ds)] = (gid, k)
                    else:
                        self.controls.setdefault(dg, []).append((gid, k))
                elif mode in (TO_MERGE, TO_MERGE_FROM_ENTER):
                    self.merge_in.setdefault(dg, []).append((gid, mode, ds))
                elif mode == CONTROL_TO_MERGE:
                    raise _Refused("a Merge with control inputs")
                elif mode == TO_FETCH and self.frame_of[gid] is not plan.root \
                        and role != EXIT:
                    raise _Refused("a fetch inside a loop")
        for gid, node in enumerate(nodes):
            role, frame = node[0], self.frame_of[gid]
            if role in (MERGE, SWITCH) and frame is plan.root:
                raise _Refused("a cond in the root frame")
            if role == MERGE:
                self._check_loop_merge(gid, node)
            elif role == NEXT_ITERATION:
                if [e[4] for e in node[5]] != [TO_MERGE]:
                    raise _Refused("a NextIteration not feeding one Merge")
            elif role == ENTER:
                if not plan.enter_info[gid][1] and len(node[5]) != 1:
                    raise _Refused("a loop variable's Enter read by more than its Merge")
                child, constant = plan.enter_info[gid]
                for _k, dg, _dl, _ds, mode in node[5]:
                    if (mode == TO_MERGE_FROM_ENTER) == bool(constant) \
                            or self.frame_of[dg] is not child:
                        raise _Refused("an Enter not feeding its loop as a loop variable "
                                       "or an invariant")

    def _check_loop_merge(self, gid, node):
        ins = self.merge_in.get(gid, [])
        modes = sorted(mode for _g, mode, _i in ins)
        if modes != [TO_MERGE, TO_MERGE_FROM_ENTER] or node[6] != 1:
            raise _Refused("a Merge that is not a loop variable's")
        for src, mode, _index in ins:
            if mode == TO_MERGE and (self.nodes[src][0] != NEXT_ITERATION
                                     or len(self.nodes[src][5]) != 1):
                raise _Refused("a Merge fed by something other than a NextIteration")
        if any(k == 1 for k, *_ in node[5]):
            raise _Refused("a loop Merge's value_index is read")

    def _loop_switches(self, frame):
        """The frame's Switches (all must be the loop's: data from a loop Merge, one
        predicate) and the predicate's producer."""
        pred = None
        switches = []
        for gid in self.members[id(frame)]:
            node = self.nodes[gid]
            if node[0] != SWITCH:
                continue
            data = self.source.get((id(frame), node[2]))
            p = self.source.get((id(frame), node[2] + 1))
            if data is None or self.nodes[data[0]][0] != MERGE or p is None \
                    or (pred is not None and p != pred):
                raise _Refused("a cond inside a loop body")
            for k, dg, _dl, _ds, mode in node[5]:
                if k < 0 or (k == 0 and mode != TO_EXIT):
                    raise _Refused("a loop Switch's false output feeds a non-Exit")
            pred = p
            switches.append(gid)
        if pred is None:
            raise _Refused("a loop frame without a predicate")
        return switches, pred

    # -- liveness under each predicate value -------------------------------------------
    def _live(self, frame, pred_value):
        """gid -> whether it runs live in an iteration whose predicate is
        ``pred_value`` (for the frame's own nodes, in order; nested loops' Enters and
        Exits included): the executor's dead-token rules."""
        live = {}
        own = id(frame)

        def port_live(src, k):
            role = self.nodes[src][0]
            if role == EXIT and self.frame_of[src] is not frame:
                # a nested loop's Exit: it runs when the loop's Enters do
                src = self.first_enter[id(self.frame_of[src])]
            elif self.frame_of[src] is not frame:
                return True           # an invariant from an enclosing frame
            if src not in live:
                raise _Refused("a node runs before what it reads")
            if self.nodes[src][0] == SWITCH and self.frame_of[src] is frame:
                return live[src] and k == int(pred_value)
            return live[src]

        for gid in self.order[own]:
            node = self.nodes[gid]
            role = node[0]
            if role == MERGE:
                live[gid] = True
                continue
            if role == CONTROL_TRIGGER:
                live[gid] = True
                continue
            ins = [self.source[(own, s)] for s in range(node[2], node[3])
                   if (own, s) in self.source]
            ins += self.controls.get(gid, [])
            live[gid] = all(port_live(src, k) for src, k in ins)
        for child in self.children[own]:
            # A loop runs when its variables' Enters are live (invariants do not
            # start it: with dead variables every Merge, so every node, is dead).
            if len({live[gid] for gid in self.var_enters[id(child)]}) != 1:
                raise _Refused("a nested loop's variable Enters differ in deadness")
        return live

    def _check_anchored(self, frame):
        """Every node of a nested loop's body depends on a loop variable: entered with
        dead variables (in its parent's last iteration) nothing in it runs, which is
        what skipping its entry does. (A node fed by invariants alone would run.)"""
        own = id(frame)
        anchored = {}
        for gid in self.order[own]:
            node = self.nodes[gid]
            if node[0] in (MERGE, SWITCH):
                anchored[gid] = True
                continue
            srcs = [self.source[(own, s)] for s in range(node[2], node[3])
                    if (own, s) in self.source] + self.controls.get(gid, [])
            ok = False
            for src, _k in srcs:
                if self.nodes[src][0] == EXIT and self.frame_of[src] is not frame:
                    src = self.first_enter[id(self.frame_of[src])]
                elif self.frame_of[src] is not frame:
                    continue
                ok = ok or anchored.get(src, False)
            anchored[gid] = ok
            if not ok and node[0] != ENTER:
                raise _Refused("a nested loop's node fed by invariants alone")

    # -- building ----------------------------------------------------------------------
    def build(self, cls):
        plan = self.plan
        self._check_shape()
        self.members = {id(f): [] for f in plan.frames.values()}
        for gid in range(len(self.nodes)):
            self.members[id(self.frame_of[gid])].append(gid)
        self.children = {id(f): [] for f in plan.frames.values()}
        for f in plan.frames.values():
            if f.parent is not None:
                self.children[id(f.parent)].append(f)
        self.first_enter, enters_of, self.var_enters = {}, {}, {}
        for gid, (child, constant) in sorted(plan.enter_info.items()):
            enters_of.setdefault(id(child), []).append(gid)
            if not constant:
                self.first_enter.setdefault(id(child), gid)
                self.var_enters.setdefault(id(child), []).append(gid)
        self.enters_of = enters_of
        if any(id(f) not in self.var_enters or f.name not in self.loop_begin
               for f in plan.frames.values() if f is not plan.root):
            raise _Refused("a loop without variables, or not in the plan's order")
        times = self.times
        self.order = {key: sorted(gids, key=times.__getitem__)
                      for key, gids in self.members.items()}
        self._check_order()
        root_entries, _reads, _produced = self._frame_entries(plan.root)
        feeds = tuple((i, i) for i in range(plan.num_feeds))
        schedule = cls(plan, root_entries, self.initial, feeds, self.move)
        self._hint_histories()
        return schedule

    def _hint_histories(self):
        """Tell each pair of stack pushes holding a loop variable's history (the arena
        step's ``history_pairs``) which earlier copy its value push matches, where the
        schedule proves it: both pushes in a loop of the root frame (run once per step),
        the value push pushing a loop variable's Merge output and the next push what the
        variable's NextIteration carries. The Merge copied those bytes, so the value
        push takes the next push's copy of the iteration before without comparing."""
        carried = {}       # Merge output register -> the register its NextIteration reads
        for gid, node in enumerate(self.nodes):
            if node[0] == NEXT_ITERATION:
                merge = node[5][0][1]
                out = self.produced.get((merge, 0))
                src = self.slot_regs.get((id(self.frame_of[gid]), node[2]))
                if out is not None and src is not None:
                    carried[out] = src
        for value_gid, (next_gid, hint) in self.step.history_pairs.items():
            hint.pop("take", None)
            frame = self.frame_of[value_gid]
            if frame is not self.frame_of[next_gid] or frame.parent is not self.plan.root:
                continue
            value_reg = self.slot_regs.get((id(frame), self.nodes[value_gid][2] + 1))
            next_reg = self.slot_regs.get((id(frame), self.nodes[next_gid][2] + 1))
            if value_reg is None or next_reg is None or carried.get(value_reg) != next_reg:
                continue
            # the next push of this iteration came first: the match is the one before it
            hint["take"] = "previous" if self.times[next_gid] < self.times[value_gid] \
                else "next"

    def _check_order(self):
        """Every edge within a frame goes forward in the plan's order (the back edge
        NextIteration -> Merge excepted); an Exit's readers come after its loop."""
        times, nodes = self.times, self.nodes
        for gid, node in enumerate(nodes):
            frame = self.frame_of[gid]
            for _k, dg, _dl, _ds, mode in node[5]:
                if mode == TO_FETCH or node[0] == NEXT_ITERATION:
                    continue
                if node[0] == EXIT:
                    if times[dg] <= self.loop_begin.get(frame.name, -1):
                        raise _Refused("an Exit read before its loop")
                elif node[0] == ENTER:
                    continue
                elif self.frame_of[dg] is frame and times[dg] <= times[gid]:
                    raise _Refused("a node placed before what it reads")

    def _new_register(self, value=None):
        self.initial.append(value)
        return len(self.initial) - 1

    def _value_register(self, gid, k):
        """The register holding output ``k`` of ``gid``: Enters and loop Switches
        forward their input's register, other nodes have their own."""
        role = self.nodes[gid][0]
        if role in (ENTER, SWITCH):
            return self._slot_register(self.frame_of[gid], self.nodes[gid][2])
        key = (gid, k)
        if key not in self.produced:
            self.produced[key] = self._new_register()
        return self.produced[key]

    def _slot_register(self, frame, slot):
        key = (id(frame), slot)
        reg = self.slot_regs.get(key)
        if reg is None:
            src = self.source.get(key)
            if src is not None:
                reg = self._value_register(*src)
            elif key in self.fed:
                reg = self.fed[key]
            else:
                reg = self._new_register(frame.inputs[slot])
            self.slot_regs[key] = reg
        return reg

    def _frame_entries(self, frame):
        """``(entries, registers read, registers produced)`` of a frame: the root's
        list, or (for a loop) the :class:`_Loop` entry's parts, built recursively."""
        own = id(frame)
        items = [(self.times[gid], gid) for gid in self.order[own]
                 if self.nodes[gid][0] != ENTER]
        items += [(self.loop_begin[c.name], None, c) for c in self.children[own]]
        items.sort(key=lambda item: item[0])
        entries, reads_at, produced = [], [], set()
        for item in items:
            if item[1] is None:
                entry, reads, made = self._loop_entry(item[2])
            else:
                entry, reads, made = self._node_entry(frame, item[1])
                if entry is None:
                    continue
            entries.append(entry)
            reads_at.append(reads)
            produced |= made
        if frame is self.plan.root:
            entries = self._with_drops(entries, reads_at, produced)
        return entries, set().union(*reads_at) if reads_at else set(), produced

    def _node_entry(self, frame, gid):
        role, _local, base, end, fn, edges, nout, _clear = self.nodes[gid]
        if role in (CONTROL_TRIGGER, SWITCH):
            return None, set(), set()   # no value: orders only / forwards its input
        if role == MERGE:
            carry = self._carry(gid)
            out = self._value_register(gid, 0)
            move = self.move if gid in self.merge_moves else None
            return (_MERGE, move, carry, out, None, (), (), gid), {carry}, {out, carry}
        if role == NEXT_ITERATION:
            (_k, merge, _dl, _idx, _mode), = edges
            src = self._slot_register(frame, base)
            return (_NEXT, None, src, self._carry(merge), None, (), (), gid), {src}, set()
        if role == EXIT:
            src = self._slot_register(frame, base)
            out = self._value_register(gid, 0)
            fetch = tuple((None, ds) for _k, _dg, _dl, ds, mode in edges if mode == TO_FETCH)
            return (_EXIT, None, src, out, None, fetch, (), gid), {src}, {out}
        args = tuple(self._slot_register(frame, s) for s in range(base, end))
        outs = sorted({(k, self._value_register(gid, k)) for k, _dg, _dl, ds, mode in edges
                       if mode in (TO_NODE, TO_EXIT, TO_NEXT) and ds >= 0})
        fetch = tuple((None if nout == 1 else k, ds)
                      for k, _dg, _dl, ds, mode in edges if mode == TO_FETCH)
        out = -1
        if nout == 1:
            out = outs[0][1] if outs else -1
            outs = ()
        made = {r for _k, r in outs} | ({out} if out >= 0 else set())
        return (_KERNEL, fn, args, out, tuple(outs), fetch, (), gid), set(args), made

    def _carry(self, merge):
        if merge not in self.carry:
            self.carry[merge] = self._new_register()
        return self.carry[merge]

    def _loop_entry(self, child):
        """The parent's entry running loop ``child``, its registers read and produced."""
        own = id(child)
        _switches, pred_src = self._loop_switches(child)
        if child.parent is not self.plan.root:
            self._check_anchored(child)
        pred = self._value_register(*pred_src)
        live_true, live_false = self._live(child, True), self._live(child, False)
        enters = []
        for gid in self.enters_of[own]:
            node = self.nodes[gid]
            src = self._slot_register(self.frame_of[gid], node[2])
            if not self.plan.enter_info[gid][1]:
                (_k, merge, _dl, _idx, _mode), = node[5]
                enters.append((src, self._carry(merge)))
        entries, _reads, _made = self._frame_entries(child)
        pred_time = self.times[pred_src[0]]
        head, body, last = [], [], []
        for entry in entries:
            gid = entry[7]
            t = self.times[gid] if entry[0] != _LOOP else self.loop_begin[entry[1].name]
            role = self.nodes[gid][0]
            is_exit = entry[0] == _EXIT and self.frame_of[gid] is child
            if role == NEXT_ITERATION and live_false[gid]:
                raise _Refused("a NextIteration live when the predicate is false")
            if not is_exit and not live_true[gid]:
                raise _Refused("a body node dead when the predicate is true")
            if t <= pred_time:
                if not live_false[gid]:
                    raise _Refused("a node before the predicate dead when it is false")
                head.append(entry)
                continue
            if not is_exit:
                body.append(entry)
            if live_false[gid]:
                last.append(entry)
        reads = set()
        produced = set()
        for entry in entries:
            reads |= self._entry_reads(entry)
            produced |= self._entry_made(entry)
        reads |= {src for src, _c in enters} | {pred}
        exits = {entry[3] for entry in entries
                 if entry[0] == _EXIT and self.frame_of[entry[7]] is child}
        clear = tuple(sorted((produced | {c for _s, c in enters}) - exits))
        first = self.first_enter[own]
        loop = _Loop(child.name, tuple(enters), tuple(head), pred, tuple(body), tuple(last),
                     clear, first)
        entry = (_LOOP, loop, None, -1, None, (), (), first)
        return entry, reads - set(clear), exits

    @staticmethod
    def _entry_reads(entry):
        kind = entry[0]
        if kind == _KERNEL:
            return set(entry[2])
        if kind == _LOOP:
            loop = entry[1]
            out = {src for src, _c in loop.enters} | {loop.pred}
            for part in (loop.head, loop.body, loop.last):
                for e in part:
                    out |= _Builder._entry_reads(e)
            return out
        return {entry[2]}

    @staticmethod
    def _entry_made(entry):
        kind = entry[0]
        if kind == _KERNEL:
            return {r for _k, r in entry[4]} | ({entry[3]} if entry[3] >= 0 else set())
        if kind == _LOOP:
            loop = entry[1]
            out = {c for _s, c in loop.enters}
            for part in (loop.head, loop.body, loop.last):
                for e in part:
                    out |= _Builder._entry_made(e)
            return out
        return {entry[3]}

    @staticmethod
    def _with_drops(entries, reads_at, produced):
        """The root's entries, each with the produced registers whose last reader it is
        (cleared after it: a value leaves the step when the executor would drop it)."""
        last = {}
        for p, reads in enumerate(reads_at):
            for r in reads:
                if r in produced:
                    last[r] = p
        dies = {}
        for r, p in last.items():
            dies.setdefault(p, []).append(r)
        return [e[:6] + (tuple(sorted(dies.get(p, ()))),) + e[7:]
                for p, e in enumerate(entries)]
