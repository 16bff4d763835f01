"""A reference interpreter of the control-flow rules in ``dataflow/spec/SEMANTICS.md``.

It runs the same :class:`dataflow.Graph` objects as the fast executor, but
keeps every token explicitly as ``(value, is_dead)`` under a key
``(op, port, tag)``. A *tag* is a tuple of ``(frame_name, iteration)`` pairs,
outermost first; the root tag is ``()``. ``port`` is an output index, or
:data:`CONTROL` for the node's control output (which carries its deadness).

The interpreter repeatedly picks ONE enabled ``(op, tag)`` at random and
fires it, until nothing is enabled; then it finishes frame instances that can
do nothing more (forwarding the dead Exits of their last iteration) and goes
on. It is written for clarity, not speed: it is the oracle the executor is
tested against, so every rule appears once, in one obvious place.

>>> import dataflow as df
>>> g = df.Graph()
>>> with g.as_default():
...     x = df.constant(2.0, df.float64)
...     y = df.while_loop(lambda v: v < 10.0, lambda v: v * 2.0, [x])
>>> run(g, [y])
[(np.float64(16.0), False)]
"""
from __future__ import annotations

import random
from typing import NamedTuple

import numpy as np

from dataflow.framework import op_registry as R
from dataflow.framework.convert import convert_value
from dataflow.kernels.registry import KernelContext, reference_kernel

__all__ = ["CONTROL", "ROOT", "FetchNotComputed", "Interpreter", "MergeRace", "SpecError",
           "Token", "run"]

ROOT: tuple = ()   # the tag of the root frame
CONTROL = -1       # the port of a node's control output


class SpecError(Exception):
    """The graph broke a rule the interpreter relies on (e.g. two tokens in one slot)."""


class FetchNotComputed(SpecError):
    """The run quiesced without producing a token for a fetched tensor."""


class MergeRace(SpecError):
    """A Merge got two live inputs at one tag: which one it forwarded depends on timing."""


class Token(NamedTuple):
    """A value on an edge. ``seq`` is its arrival order (a Merge takes the earliest)."""

    value: object
    is_dead: bool
    seq: int


def run(graph, fetches, feed_dict=None, seed=0, resources=None):
    """Run ``fetches`` (tensors or names) of ``graph``; return ``[(value, is_dead), ...]``.

    A dead fetch is ``(None, True)``, like ``Session.run_tokens``. ``seed`` picks
    the firing order; results must not depend on it. ``resources`` is the
    kernels' state (variables), a fresh dict by default.

    >>> import dataflow as df
    >>> g = df.Graph()
    >>> with g.as_default():
    ...     p = df.placeholder(df.bool, shape=[])
    ...     out_false, out_true = df.ops.switch(df.constant(3, df.int32), p)
    >>> run(g, [out_false, out_true], feed_dict={p: True}, seed=2)
    [(None, True), (np.int32(3), False)]
    """
    return Interpreter(graph, fetches, feed_dict, resources).run(seed)


def _role(op) -> str:
    return op._op_def.role


def _is_constant_enter(op) -> bool:
    return _role(op) == R.ENTER and bool(op.get_attr("is_constant"))


def _instance_of(tag):
    """The frame instance an iteration tag belongs to: ``(parent_tag, frame_name)``."""
    return tag[:-1], tag[-1][0]


class Interpreter:
    """One run of a pruned graph. Use :func:`run` unless you need to inspect the state.

    >>> import dataflow as df
    >>> g = df.Graph()
    >>> with g.as_default():
    ...     i = df.while_loop(lambda i: i < 2, lambda i: i + 1, [df.constant(0)])
    >>> it = Interpreter(g, [i])
    >>> it.run(seed=0)
    [(np.int32(2), False)]
    >>> it.highest   # frame instance -> last iteration started
    {((), 'while/while_context'): 2}
    """

    def __init__(self, graph, fetches, feed_dict=None, resources=None):
        self.fetches = [graph.as_graph_element(f, allow_operation=False) for f in fetches]
        self.feeds = {}
        for key, value in (feed_dict or {}).items():
            t = graph.as_graph_element(key, allow_operation=False)
            self.feeds[t] = convert_value(value, t.dtype)   # as Session converts feeds
        # Feeding a Placeholder also satisfies control edges from it: TF rewrites them to
        # come from the feed, so the unfed-placeholder kernel never runs.
        self.fed_placeholders = {t.op for t in self.feeds if t.op.type == "Placeholder"}
        self.resources = {} if resources is None else resources
        self.ops = self._prune()
        self.consumers = self._consumer_map()
        self.enters_of = {}   # frame name -> Enter ops into it (each must fire per instance)
        for op in self.ops:
            if _role(op) == R.ENTER:
                self.enters_of.setdefault(op.get_attr("frame_name"), []).append(op)
        self.kernels = {}
        self.tokens = {}        # (op, port, tag) -> Token
        self.fired = set()      # (op, tag) pairs that have run
        self.highest = {}       # frame instance -> highest iteration started
        self.dead_exits = {}    # tag -> Exit ops that fired dead at that tag
        self.finished = set()   # frame instances whose completion was handled
        self.candidates = set()  # a superset of the enabled, unfired (op, tag) pairs
        self.seq = 0

    # -- static structure ----------------------------------------------------------------------
    def _prune(self) -> set:
        """The ops the fetches need; a fed tensor cuts the walk (its producer is not needed)."""
        needed, stack = set(), [t.op for t in self.fetches if t not in self.feeds]
        while stack:
            op = stack.pop()
            if op not in needed:
                needed.add(op)
                stack.extend(t.op for t in op._inputs if t not in self.feeds)
                stack.extend(c for c in op._control_inputs if c not in self.fed_placeholders)
        return needed

    def _consumer_map(self) -> dict:
        """op -> the needed ops that read any of its outputs or its control output."""
        out = {op: set() for op in self.ops}
        for op in self.ops:
            for t in op._inputs:
                if t not in self.feeds:
                    out[t.op].add(op)
            for c in op._control_inputs:
                if c not in self.fed_placeholders:
                    out[c].add(op)
        return out

    # -- reading tokens ------------------------------------------------------------------------
    def _source_tag(self, producer, tag):
        """Where a consumer at ``tag`` finds ``producer``'s token.

        A constant Enter's token lives in iteration 0 of the frame instance but is
        visible to every iteration of it, including iterations that start later.
        """
        if _is_constant_enter(producer):
            if not tag or tag[-1][0] != producer.get_attr("frame_name"):
                raise SpecError(f"{producer.name} is read outside its frame (tag {tag})")
            return tag[:-1] + ((tag[-1][0], 0),)
        return tag

    def _read(self, t, tag):
        """The token of tensor ``t`` at ``tag``, or None if it has not arrived."""
        if t in self.feeds:   # a fed value is a root value, available at every tag
            return Token(self.feeds[t], False, -1)
        return self.tokens.get((t.op, t._value_index, self._source_tag(t.op, tag)))

    def _read_control(self, op, tag):
        """The control token (deadness) of ``op`` at ``tag``, or None if it has not run."""
        if op in self.fed_placeholders:
            return Token(None, False, -1)
        return self.tokens.get((op, CONTROL, self._source_tag(op, tag)))

    # -- writing tokens ------------------------------------------------------------------------
    def _put(self, op, port, tag, value, is_dead):
        """Store one token and mark the consumers that might now be enabled."""
        key = (op, port, tag)
        if key in self.tokens:
            raise SpecError(f"two tokens for output {port} of {op.name} at tag {tag}")
        if tag and _instance_of(tag) in self.finished:
            raise SpecError(f"{op.name} sends a token into finished frame instance {tag}")
        self.seq += 1
        self.tokens[key] = Token(None if is_dead else value, is_dead, self.seq)
        reader_tags = [tag]
        if _is_constant_enter(op):
            parent, frame = _instance_of(tag)
            reader_tags = [parent + ((frame, n),) for n in range(self.highest[(parent, frame)] + 1)]
        for consumer in self.consumers[op]:
            self.candidates.update((consumer, t) for t in reader_tags)

    def _put_all(self, op, tag, outputs, is_dead):
        """Every output of ``op`` (``outputs[k]``) and its control output, all at ``tag``."""
        for k in range(len(op._outputs)):
            self._put(op, k, tag, None if is_dead else outputs[k], is_dead)
        self._put(op, CONTROL, tag, None, is_dead)

    def _start_iteration(self, tag):
        """Note that iteration ``tag`` exists; constant Enters become visible in it."""
        inst = _instance_of(tag)
        n = tag[-1][1]
        if n <= self.highest.get(inst, -1):
            return
        if n != self.highest.get(inst, -1) + 1:
            raise SpecError(f"iteration {tag} started before its predecessor")
        self.highest[inst] = n
        parent, frame = inst
        for enter in self.enters_of.get(frame, []):
            if _is_constant_enter(enter) and (enter, parent) in self.fired:
                self.candidates.update((c, tag) for c in self.consumers[enter])

    # -- enabling --------------------------------------------------------------------------------
    def _enabled(self, op, tag) -> bool:
        if (op, tag) in self.fired:
            return False
        if any(self._read_control(c, tag) is None for c in op._control_inputs):
            return False
        if _role(op) == R.MERGE:
            return self._merge_decision(op, tag) is not None
        return all(self._read(t, tag) is not None for t in op._inputs)

    def _merge_decision(self, op, tag):
        """``(value, index)`` of the live input a Merge takes, ``(None, None)`` if it is
        dead, or None while undecided. Inputs are considered in arrival order: the first
        live one wins; a dead one from an Enter kills the Merge at once (a loop entered on
        an untaken branch); otherwise the Merge is dead once all inputs are dead."""
        arrived = []
        for index, t in enumerate(op._inputs):
            tok = self._read(t, tag)
            if tok is not None:
                arrived.append((tok.seq, index, tok, t))
        for _seq, index, tok, t in sorted(arrived, key=lambda a: (a[0], a[1])):
            if not tok.is_dead:
                return tok.value, index
            if _role(t.op) == R.ENTER:
                return None, None
        if len(arrived) == len(op._inputs):
            return None, None
        return None

    # -- firing ----------------------------------------------------------------------------------
    def _fire(self, op, tag):
        """Run one enabled ``(op, tag)`` and send its outputs where its role says."""
        self.fired.add((op, tag))
        role = _role(op)
        if role == R.MERGE:   # control inputs only gate a Merge; their deadness is ignored
            value, index = self._merge_decision(op, tag)
            if index is None:
                self._put_all(op, tag, None, True)
            else:
                self._put_all(op, tag, (value, np.int32(index)), False)
            return
        if role == R.CONTROL_TRIGGER:   # never dead, whatever its inputs
            self._put_all(op, tag, (), False)
            return
        inputs = [self._read(t, tag) for t in op._inputs]
        dead = any(tok.is_dead for tok in inputs) or any(
            self._read_control(c, tag).is_dead for c in op._control_inputs)
        values = [tok.value for tok in inputs]
        if role == R.NORMAL:
            self._put_all(op, tag, None if dead else self._compute(op, values), dead)
        elif role == R.SWITCH:
            self._fire_switch(op, tag, values, dead)
        elif role == R.ENTER:
            child = tag + ((op.get_attr("frame_name"), 0),)
            self._start_iteration(child)
            self._put_all(op, child, values, dead)
        elif role == R.EXIT:
            if not tag:
                raise SpecError(f"Exit {op.name} ran in the root frame")
            if dead:   # held back: only the last iteration's dead Exits reach the parent
                self.dead_exits.setdefault(tag, []).append(op)
            else:
                self._put_all(op, tag[:-1], values, False)
        elif role == R.NEXT_ITERATION:
            if not tag:
                raise SpecError(f"NextIteration {op.name} ran in the root frame")
            if not dead:   # a dead NextIteration stops there: no iteration n+1 from it
                frame, n = tag[-1]
                nxt = tag[:-1] + ((frame, n + 1),)
                self._start_iteration(nxt)
                self._put_all(op, nxt, values, False)
        else:
            raise SpecError(f"unknown role {role!r} of {op.name}")

    def _fire_switch(self, op, tag, values, dead):
        """Output 1 carries data if pred, output 0 if not; the other output is dead.
        The Switch itself (its control output) is dead only if an input was."""
        if dead:
            self._put_all(op, tag, None, True)
            return
        data, pred = values
        self._put(op, 0, tag, data, bool(pred))
        self._put(op, 1, tag, data, not bool(pred))
        self._put(op, CONTROL, tag, None, False)

    def _compute(self, op, values):
        """Call ``op``'s NumPy reference kernel (never a compiled one: the oracle must not
        share code with what it checks); returns a tuple with one entry per output."""
        fn = self.kernels.get(op)
        if fn is None:
            factory = reference_kernel(op)
            if factory is None:
                raise SpecError(f"no CPU kernel for {op.type} ({op.name})")
            fn = self.kernels[op] = factory(KernelContext(op=op, resources=self.resources))
        out = fn(*values)
        return (out,) if len(op._outputs) == 1 else out

    # -- frame completion ------------------------------------------------------------------------
    def _finishable(self):
        """Frame instances that can do nothing more (call only when nothing is enabled):
        every Enter into the instance has fired, and every instance nested inside it
        has been finished already (so inner loops complete before outer ones)."""
        open_ = [inst for inst in self.highest if inst not in self.finished]
        result = []
        for parent, frame in open_:
            if not all((e, parent) in self.fired for e in self.enters_of[frame]):
                continue
            prefix = len(parent)
            if any(len(p) > prefix and p[:prefix] == parent and p[prefix][0] == frame
                   for p, _f in open_):
                continue
            result.append((parent, frame))
        return sorted(result)

    def _finish(self, inst):
        """The frame instance is done: its last iteration's dead Exits reach the parent."""
        self.finished.add(inst)
        parent, frame = inst
        last = parent + ((frame, self.highest[inst]),)
        for exit_op in self.dead_exits.get(last, []):
            self._put_all(exit_op, parent, None, True)

    # -- driver ----------------------------------------------------------------------------------
    def _ready(self) -> list:
        """The enabled (op, tag) pairs, in a fixed order so a seed fixes the schedule."""
        ready = [c for c in self.candidates if self._enabled(*c)]
        # Pairs that are not enabled are dropped: a new token re-adds them.
        self.candidates = set(ready)
        return sorted(ready, key=lambda c: (c[0]._id, c[1]))

    def run(self, seed=0):
        """Fire enabled nodes one at a time in a random order until quiescent."""
        rng = random.Random(seed)
        for op in self.ops:   # sources: nothing to wait for; they live in the root frame
            if all(c in self.fed_placeholders for c in op._control_inputs) \
                    and all(t in self.feeds for t in op._inputs):
                self.candidates.add((op, ROOT))
        while True:
            ready = self._ready()
            if ready:
                pick = rng.choice(ready)
                self.candidates.discard(pick)
                self._fire(*pick)
                continue
            done = self._finishable()
            if not done:
                break
            self._finish(rng.choice(done))
        self._check_merges()
        return [self._result(t) for t in self.fetches]

    def _check_merges(self):
        """Raise :class:`MergeRace` if some Merge saw two live inputs at one tag: such a
        graph has no single right answer, so it cannot be compared with anything."""
        for op, tag in self.fired:
            if _role(op) == R.MERGE:
                live = {t for t in op._inputs
                        if (tok := self._read(t, tag)) is not None and not tok.is_dead}
                if len(live) > 1:
                    raise MergeRace(f"{op.name} at tag {tag} got live inputs from "
                                    f"{sorted(t.name for t in live)}")

    def _result(self, t):
        """``(value, is_dead)`` of a fetch, shaped as ``Session.run_tokens`` returns it."""
        if t in self.feeds:
            return self.feeds[t], False
        tok = self.tokens.get((t.op, t._value_index, ROOT))
        if tok is None:
            raise FetchNotComputed(f"the run finished without computing fetch {t.name}")
        if tok.is_dead:
            return None, True
        v = tok.value
        if type(v) is np.ndarray and v.ndim == 0:
            v = v[()]
        return v, False
