"""A co-executed step's graph run as a flat list of kernel calls.

When the Python side reads nothing from the graph before the step function returns,
every Input Feeding and Case Select of the step has been sent by the time the graph
runs (:meth:`~.coexec.CoRun.finish`). Then nothing about the run is left to decide
while it runs: the Case Selects fix which nodes are live and which are dead, and
the executor's order over them is fixed too. :class:`FlatStep` is that run written
out once, as :class:`~dataflow.runtime.flat_schedule.FlatSchedule` writes out a
planned step: a straight list of kernel calls on registers, with no ready list, no
pending counts and no delivery along edges.

The list is made by running the executor's own rules once, on symbols instead of
values (:class:`_Builder`): the ready list in the executor's order, pending counts,
dead tokens and Merge's first-live-input rule, exactly as
:meth:`~dataflow.runtime.executor.Executor._loop` applies them to a loop-free graph.
What the Case Selects decide is computed then: the nodes that depend on nothing
but Case Selects and constants (each case's ``Equal``) run at build time, every
Switch's predicate is known, a Switch or Merge is a register move, and a dead node
is no call at all. A ``_Recv`` becomes a read of the value Python sent (from the
step's rendezvous), a ``_Send`` a send to it, live or dead as the executor sends
it, so what the Python side fetches does not change.

When Python reads a value mid-step (``CoRun.fetch``), only a prefix of the feeds
and Case Selects has been sent: the graph advances as far as they let it, as the
executor does (a ``_Recv`` whose key was not sent waits), and continues at the next
advance. The run is written out in segments, one per advance: the builder keeps its
symbolic state between them, and a segment depends on the keys sent before it (and
the Case Select values among them). :class:`FlatSteps` (one per
:class:`~.generate.StepGraph`) keeps them as a tree keyed by those, each segment
built at the first step that needs it and kept for the graph's life, so a steady
step replays its segments with no building; a regeneration makes a new StepGraph and
so drops them. A graph with while-loop frames (folded Python loops) has no flat run;
nor has a first advance whose Switch predicates do not follow from the Case Selects
(the executor runs those steps); a later advance without one fails the step into a
fallback, and the graph's later steps use the executor.

>>> from dataflow.runtime.rendezvous import LocalRendezvous
>>> from dataflow.tracer.generate import generate
>>> from dataflow.tracer.trace_graph import TraceGraph
>>> from dataflow.tracer.trace import TraceRecorder
>>> from dataflow.tracer.location import Locator
>>> with df.eager_mode():
...     rec = TraceRecorder(Locator())
...     df.framework.eager.RECORDERS.append(rec.record)
...     try:
...         y = df.square(df.constant(3.0))
...         v = float(y)
...     finally:
...         df.framework.eager.RECORDERS.remove(rec.record)
...     tg = TraceGraph(); _ = tg.merge(rec.finish())
>>> step = generate(tg, resources={})
>>> rv = LocalRendezvous()
>>> (fed,) = step.feed_keys.values()
>>> rv.send(fed, np.float32(3.0), False)
>>> flat = flat_steps_of(step)
>>> flat.advance(flat.start(), rv)
True
>>> (fetched,) = step.fetch_keys.values()
>>> value, dead = rv.poll(fetched)
>>> float(value), dead, flat.runs, flat.builds
(9.0, False, 1, 1)
"""
from __future__ import annotations

import numpy as np  # noqa: F401  (the docstring's example uses np)

from .. import errors
from ..runtime.executor import _INT32, DEAD, Executor
from ..runtime.plan import (CONTROL_TO_MERGE, CONTROL_TRIGGER, MERGE, NORMAL, RECV, SEND,
                            SWITCH, TO_MERGE, TO_NODE)

__all__ = ["FlatStep", "FlatSteps", "flat_steps_of"]

_ROLES = frozenset({NORMAL, SWITCH, MERGE, SEND, RECV, CONTROL_TRIGGER})
_MODES = frozenset({TO_NODE, TO_MERGE, CONTROL_TO_MERGE})

# Entry kinds besides a kernel call (an entry whose ``fn`` is None).
_RECV, _SEND, _SEND_DEAD = range(3)


class FlatStep:
    """One segment of a generated graph's run, as a list of calls: what the executor runs
    between two advances of the step (all of it when Python read nothing mid-step).

    ``entries`` holds, per call, ``(fn, args, out, outs, drop, gid, kind, key)``: for
    a kernel (``fn`` not None) as in :class:`~dataflow.runtime.flat_schedule.
    FlatSchedule` (``args``: registers of its arguments, ``out``: the register of a
    single-output kernel's value or -1, ``outs``: ``(output index, register)`` of a
    multi-output one, ``drop``: registers whose last reader it is); for a ``_Recv``
    (kind ``_RECV``) the register it fills from rendezvous key ``key``; for a
    ``_Send`` the register it sends (``_SEND``) or a dead token (``_SEND_DEAD``).
    ``initial`` is the register file as far as this segment uses it: folded constants
    and what the build computed from the Case Selects (a run's registers from earlier
    segments stay; the new ones start from here)."""

    __slots__ = ("plan", "entries", "initial", "calls")

    # The executor's errors: an OpError naming the node whose kernel failed.
    _kernel_error = Executor._kernel_error

    def __init__(self, plan, entries, initial):
        self.plan = plan
        self.entries = entries
        self.initial = initial
        self.calls = sum(1 for e in entries if e[0] is not None)

    def run(self, rv, vals) -> None:
        """Run every call once on register file ``vals`` (extended with this segment's
        new registers), reading fed values from and sending fetched ones to ``rv``; an
        OpError naming the node when a kernel fails. The build read only keys that
        were sent, so every read finds its value."""
        initial = self.initial
        if len(vals) < len(initial):
            vals.extend(initial[len(vals):])
        poll = rv.poll
        send = rv.send
        entry = None
        try:
            for entry in self.entries:
                fn, args, out_reg, outs, drop, _gid, kind, key = entry
                if fn is not None:
                    # FlatSchedule.run's call, written out (a helper would cost a call per
                    # kernel): change the two together.
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
                elif kind == _RECV:
                    got = poll(key)
                    if got is None or got[1]:
                        # The Python side sends live values only, and the build saw it
                        # sent (the error names the _Recv).
                        raise errors.InternalError(None, None, "df.function: no live value "
                                                   f"was fed for {key[2]!r}")
                    vals[out_reg] = got[0]
                elif kind == _SEND:
                    send(key, vals[args[0]], False)
                else:
                    send(key, None, True)
                if drop:
                    for r in drop:
                        vals[r] = None
        except BaseException as exc:
            if entry is None:
                raise
            raise self._kernel_error(entry[5], exc)


class _Segment:
    """A node of a generated graph's tree of segments: ``flat`` the calls that bring a
    step here from its parent (None at the root), ``builder`` the symbolic state after
    them, ``sent`` the rendezvous keys the graph has seen sent by then, ``complete``
    whether every node has run, ``next``: the cache key of the next advance (the keys
    newly sent, with the Case Select values among them) -> the segment it leads to."""

    __slots__ = ("flat", "builder", "sent", "complete", "next")

    def __init__(self, flat, builder):
        self.flat = flat
        self.builder = builder
        self.sent = builder.sent
        self.complete = not builder.parked
        self.next: dict = {}


class FlatRun:
    """One step's flat run on a :class:`FlatSteps`: where it is in the tree of segments
    and its register file (see :meth:`FlatSteps.advance`)."""

    __slots__ = ("at", "vals")

    def __init__(self, root):
        self.at = root
        self.vals: list = []


class FlatSteps:
    """The flat runs of one generated graph (a :class:`~.generate.StepGraph`): a tree of
    segments, one per sequence of advances seen so far (the keys sent before each and
    the Case Select values among them), each built when first needed (see the module
    docstring).

    ``runs`` counts the steps run flat, ``builds`` the segments built (the tests read
    them)."""

    __slots__ = ("plan", "root", "recv_keys", "select_keys", "runs", "builds", "broken")

    def __init__(self, step):
        plan = step.plan
        self.plan = plan
        self.runs = self.builds = 0
        # A later segment the builder could not decide: the graph's steps use the executor.
        self.broken = False
        self.select_keys = frozenset(key for pairs in step.edge_selects.values()
                                     for key, _ in pairs)
        self.root = None        # None: no flat run at all
        if _loop_free(plan):
            self.recv_keys = frozenset(_rendezvous_key(plan, gid) for gid in plan.transfers
                                       if plan.nodes[gid].role == RECV)
            self.root = _Segment(None, _Builder(plan))

    @property
    def possible(self) -> bool:
        """Whether steps on this graph can run flat (no while-loop frames)."""
        return self.root is not None and not self.broken

    @property
    def segments(self) -> list:
        """Every segment built so far (their :class:`FlatStep`), parents first."""
        out, todo = [], [self.root] if self.root is not None else []
        while todo:
            seg = todo.pop(0)
            out.extend(s.flat for s in seg.next.values() if s is not None)
            todo.extend(s for s in seg.next.values() if s is not None)
        return out

    def start(self) -> FlatRun:
        """A step's flat run, before its first advance."""
        return FlatRun(self.root)

    def advance(self, run: FlatRun, rv) -> bool | None:
        """Run what the executor would run now, given the keys sent to ``rv`` so far:
        True when the step is complete, False when what is left waits for values not
        sent yet. None when the step's first advance has no flat run (nothing was run
        or taken from ``rv``: the executor runs the step); an InternalError when a
        later one has none (the step falls back; the graph's later steps use the
        executor)."""
        at = run.at
        sent = at.sent
        recv_keys = self.recv_keys
        select_keys = self.select_keys
        new = []
        cases = []
        # The rendezvous's unclaimed sends, in the order sent (a LocalRendezvous: the
        # step's own, on this thread); the graph's own sends are not Recv keys.
        for key, entry in rv._slots.items():
            if key in recv_keys and key not in sent and entry[0] == "value":
                if key in select_keys:
                    case = None if entry[2] else int(entry[1])
                    new.append((key, case))
                    cases.append(key)
                else:
                    new.append(key)
        new = tuple(new)
        nxt = at.next.get(new, _MISSING)
        if nxt is _MISSING:
            nxt = at.next[new] = self._build(at, new)
        if nxt is None:
            if at is self.root:
                return None
            self.broken = True
            raise errors.InternalError(None, None, "df.function: the flat run cannot "
                                       "continue after a read mid-step")
        if at is self.root:
            self.runs += 1
        for key in cases:        # decided at build time: taken, as the executor takes them
            rv.poll(key)
        run.at = nxt
        nxt.flat.run(rv, run.vals)
        return nxt.complete

    def _build(self, at, new):
        builder = at.builder.copy()
        try:
            builder.resume(new, self.select_keys)
        except _NotFlat:
            return None
        self.builds += 1
        return _Segment(builder.segment(), builder)


_MISSING = object()
_PARKED = object()      # a Recv whose key was not sent yet


def flat_steps_of(step) -> FlatSteps:
    """The :class:`FlatSteps` of generated graph ``step``, made at its first use."""
    flat = getattr(step, "_flat_steps", None)
    if flat is None or flat.plan is not step.plan:
        flat = step._flat_steps = FlatSteps(step)
    return flat


def _loop_free(plan) -> bool:
    """Whether the plan's nodes and edges are all of the kinds a flat run handles: one
    frame (no while loops), no feeds and no fetches (the step's values come and go by
    rendezvous)."""
    if len(plan.frames) != 1 or plan.enter_info or plan.num_feeds or plan.fetches:
        return False
    for node in plan.node_tuples:
        if node[0] not in _ROLES:
            return False
        for edge in node[5]:
            if edge[4] not in _MODES:
                return False
    return True


def _rendezvous_key(plan, gid):
    src, dst, name = plan.transfers[gid]
    return (src, dst, name, ())


class _NotFlat(Exception):
    """The step cannot be written out for this tuple of Case Selects."""


class _Builder:
    """Runs the executor's rules on a loop-free plan on registers instead of values, and
    writes down the calls (see the module docstring); resumable: each :meth:`resume`
    continues with the keys newly sent, and :meth:`segment` writes down the calls made
    since the last one. A Recv whose key was not sent waits (``parked``) as the
    executor's does."""

    def __init__(self, plan):
        self.plan = plan
        self.nodes = plan.node_tuples
        self.initial: list = []      # register -> its value at the start of a run
        self.known: list = []        # register -> whether that value is known (else None)
        self.derived: list = []      # register -> computed from a Case Select
        self.inputs = [None] * plan.root.num_slots   # slot -> register or DEAD
        self.filled = [False] * plan.root.num_slots
        self.pending = plan.root.pending[:]
        self.dead = [0] * len(self.pending)
        self.sent: frozenset = frozenset()   # every key seen sent (Case Selects too)
        self.cases: dict = {}        # Case Select key -> its value (None: dead)
        self.parked: dict = {}       # key not sent yet -> the gid of its waiting Recv
        self.ready = list(plan.root_ready)
        self.calls: list = []        # (fn, args, out, gid, kind, key), in order

    def copy(self):
        """This state, to continue in another way (the calls made so far dropped)."""
        other = object.__new__(_Builder)
        other.plan, other.nodes, other.sent = self.plan, self.nodes, self.sent
        for name in ("initial", "known", "derived", "inputs", "filled", "pending", "dead",
                     "ready"):
            setattr(other, name, getattr(self, name)[:])
        other.cases = dict(self.cases)
        other.parked = dict(self.parked)
        other.calls = []
        return other

    def resume(self, new, select_keys):
        """Continue with the keys in ``new`` sent (in the order sent; a Case Select's as
        ``(key, value)``): the Recvs waiting for them are ready, the most recent last,
        as the executor picks them up."""
        keys = []
        for item in new:
            if len(item) == 2 and item[0] in select_keys:
                key, case = item
                self.cases[key] = case
            else:
                key = item
            keys.append(key)
        self.sent = self.sent.union(keys)
        for key in keys:
            gid = self.parked.pop(key, None)
            if gid is not None:
                self.ready.append(gid)
        self._run()

    def _register(self, value=None, known=False, derived=False) -> int:
        self.initial.append(value)
        self.known.append(known)
        self.derived.append(derived)
        return len(self.initial) - 1

    def _slot(self, s):
        """The register (or DEAD) in input slot ``s``: a folded constant if no edge
        wrote it."""
        if not self.filled[s]:
            self.filled[s] = True
            self.inputs[s] = self._register(self.plan.root.inputs[s], known=True)
        return self.inputs[s]

    def _run(self):
        """The executor's ``_loop`` (its general delivery path) on registers."""
        ready = self.ready
        nodes = self.nodes
        while ready:
            gid = ready.pop()
            role, local, base, end, fn, edges, nout, _clear = nodes[gid]
            node_dead = self.dead[local]
            out = None
            if role == NORMAL:
                if not node_dead:
                    out = self._normal(gid, fn, base, end, nout)
            elif role == SWITCH:
                if not node_dead:
                    data, pred = self._slot(base), self._slot(base + 1)
                    if not self.known[pred]:
                        raise _NotFlat   # a predicate the Case Selects do not decide
                    out = (DEAD, data) if self.initial[pred] else (data, DEAD)
            elif role == MERGE:
                value = self._slot(base)
                node_dead = value is DEAD
                if not node_dead:
                    index = self._register(_INT32[self.inputs[base + 1]], known=True)
                    out = value if nout == 1 else (value, index)
            elif role == SEND:   # runs even when dead: the dead bit is sent
                key = _rendezvous_key(self.plan, gid)
                if node_dead:
                    self.calls.append((None, (), -1, gid, _SEND_DEAD, key))
                else:
                    self.calls.append((None, (self._slot(base),), -1, gid, _SEND, key))
            elif role == RECV:
                if not node_dead:
                    out, dead = self._recv(gid)
                    if out is _PARKED:
                        continue        # delivered once its key is sent
                    if dead:
                        node_dead, out = 1, None
            else:  # ControlTrigger: never dead
                node_dead = 0
            self._deliver(edges, out, nout, node_dead, ready)

    def _normal(self, gid, fn, base, end, nout):
        args = tuple(self._slot(s) for s in range(base, end))
        if args and all(self.known[r] for r in args) and any(self.derived[r] for r in args) \
                and not self.plan.ops[gid]._op_def.stateful:
            # Computed from Case Selects (and constants) only: decided now.
            try:
                value = fn(*[self.initial[r] for r in args])
            except Exception:   # noqa: BLE001 - the executor raises it, naming the node
                raise _NotFlat from None
            if nout == 1:
                return self._register(value, known=True, derived=True)
            return tuple(self._register(v, known=True, derived=True) for v in value)
        if nout == 1:
            out = self._register()
        else:
            out = tuple(self._register() for _ in range(nout))
        self.calls.append((fn, args, out, gid, None, None))
        return out

    def _recv(self, gid):
        key = _rendezvous_key(self.plan, gid)
        if key not in self.sent:
            self.parked[key] = gid
            return _PARKED, False
        if key in self.cases:
            value = self.cases[key]
            return (None, True) if value is None else (self._register(value, True, True),
                                                       False)
        out = self._register()
        self.calls.append((None, (), out, gid, _RECV, key))
        return out, False

    def _deliver(self, edges, out, nout, node_dead, ready):
        """The executor's delivery (``Executor._deliver``) of registers and DEAD."""
        for k, dg, dl, ds, mode in edges:
            if node_dead:
                v = DEAD
            elif k < 0:
                v = None
            elif nout == 1:
                v = out
            else:
                v = out[k]
            if mode == TO_NODE:
                if v is DEAD:
                    self.dead[dl] += 1
                elif ds >= 0:
                    self.inputs[ds] = v
                    self.filled[ds] = True
                self.pending[dl] -= 1
                if not self.pending[dl]:
                    ready.append(dg)
            else:
                self._deliver_to_merge(dg, dl, ds, mode, v, ready)

    def _deliver_to_merge(self, dg, dl, index, mode, v, ready):
        """``Executor._deliver_to_merge`` on registers (no Enter inputs: no loops)."""
        p = self.pending[dl]
        base = self.nodes[dg][2]
        if mode == CONTROL_TO_MERGE:
            p -= 2
        elif v is DEAD:
            self.dead[dl] += 1
            if not p & 1:
                return
            if self.dead[dl] < self.plan.merge_num_inputs[dg]:
                return
            p -= 1
            self.inputs[base] = DEAD
            self.filled[base] = True
        elif p & 1:
            p -= 1
            self.inputs[base] = v
            self.inputs[base + 1] = index
            self.filled[base] = self.filled[base + 1] = True
        else:
            return
        self.pending[dl] = p
        if not p:
            ready.append(dg)

    def _live(self) -> set:
        """The registers that nodes not run yet hold as inputs (later segments read
        them)."""
        live = set()
        inputs, filled, known = self.inputs, self.filled, self.known
        for node in self.nodes:
            if self.pending[node[1]] > 0:
                for s in range(node[2], node[3]):
                    r = inputs[s]
                    if filled[s] and type(r) is int and not known[r]:
                        live.add(r)
        return live

    def segment(self) -> FlatStep:
        """The calls since the last segment with their registers' last readers: a
        register is cleared after the call that reads it last, unless a later segment
        reads it (a value leaves the step as early as it does on the executor, which
        clears a node's inputs once it ran)."""
        live = self._live()
        last_read: dict = {}
        for p, (_fn, args, _out, _gid, _kind, _key) in enumerate(self.calls):
            for r in args:
                if not self.known[r]:
                    last_read[r] = p
        dies_after: dict = {}
        for r, p in last_read.items():
            if r not in live:
                dies_after.setdefault(p, []).append(r)
        entries = []
        for p, (fn, args, out, gid, kind, key) in enumerate(self.calls):
            outs = ()
            if type(out) is tuple:
                outs = tuple((k, r) for k, r in enumerate(out)
                             if r in last_read or r in live)
                out = -1
            elif fn is not None and out not in last_read and out not in live:
                out = -1          # nobody reads it (a variable write's output)
            entries.append((fn, args, out, outs, tuple(dies_after.get(p, ())), gid,
                            kind, key))
        self.calls = []
        return FlatStep(self.plan, entries, self.initial[:])
