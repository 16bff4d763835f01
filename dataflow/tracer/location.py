"""Where an op runs: the program location that is part of a traced node's identity.

Terra identifies an op by its call-id stack (the nested calls it runs in) and the
counters of the loops around it, kept by rewriting the program (the seed's Figure 1).
Here the same information is read from the Python stack when the op is dispatched,
without rewriting anything:

* the *call-site stack* is the ``(code object, bytecode offset)`` of every frame between
  the op and the step function's caller, innermost first; frames of the ``dataflow``
  package itself are left out, so an op is placed by the user's code that asked for it
  (an operator on a tensor and the op wrapper behind it give the same location);
* the *iteration index* is how many times this step has already run an op at that
  same call-site stack. The n-th op from one line inside a loop is that loop's n-th
  iteration (for nested loops, the flattened iteration count), so two iterations of a
  loop give two nodes, and a step that runs the loop the same number of times gives
  the same nodes again.

Stacks are interned: each distinct stack gets a small int (:func:`intern_stack`,
:func:`stack_of`), built as a chain ``(innermost site, id of the rest)``. A co-executed
step finds an op's stack id by walking only the frames up to the innermost user frame:
the rest of the stack (that frame's callers, up to the step's frame) cannot change
while that frame runs, so its id is remembered for that frame
(:meth:`Locator.stack_id`).

>>> loc = Locator()
>>> [loc.here()[1] for _ in range(3)]        # one line, three iterations
[0, 1, 2]
>>> a = loc.here(); b = loc.here()           # two call sites
>>> a[0] != b[0]
True
>>> stack_of(intern_stack(a[0])) == a[0]
True
"""
from __future__ import annotations

import inspect
import os
import sys

__all__ = ["Locator", "intern_stack", "stack_of"]

# The dataflow package directory (this file is dataflow/tracer/location.py).
_LIBRARY = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
# id(code object) -> whether it belongs to the dataflow package (ids of live code
# objects are stable: a function's code lives as long as the function).
_IN_LIBRARY: dict = {}
# A generator's or coroutine's frame can be resumed from another caller: the rest of
# its stack is not fixed while it lives, so it is never remembered.
_RESUMABLE = inspect.CO_GENERATOR | inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR

# Interned stacks: id 0 is the empty stack; ``_CHAINS[(id(code), lasti, outer id)]`` is
# the id of the stack with that innermost site and that rest; ``_STACKS[id]`` the
# stack as a tuple of ``(id(code), lasti)`` pairs, innermost first.
_CHAINS: dict = {}
_STACKS: list = [()]


def _in_library(code) -> bool:
    key = id(code)
    hit = _IN_LIBRARY.get(key)
    if hit is None:
        hit = _IN_LIBRARY[key] = os.path.abspath(code.co_filename).startswith(_LIBRARY)
    return hit


def _chain(code_id, lasti, outer) -> int:
    """The id of the stack ``((code_id, lasti),) + stack_of(outer)``, made if new."""
    key = (code_id, lasti, outer)
    sid = _CHAINS.get(key)
    if sid is None:
        sid = _CHAINS[key] = len(_STACKS)
        _STACKS.append(((code_id, lasti),) + _STACKS[outer])
    return sid


def intern_stack(stack: tuple) -> int:
    """The small int that stands for call-site ``stack`` (a tuple of ``(id(code),
    lasti)`` pairs, innermost first): equal stacks get equal ids."""
    sid = 0
    for code_id, lasti in reversed(stack):
        sid = _chain(code_id, lasti, sid)
    return sid


def stack_of(sid: int) -> tuple:
    """The call-site stack that :func:`intern_stack` gave id ``sid``."""
    return _STACKS[sid]


class Locator:
    """Computes op locations within one step: the call-site stack up to ``boundary``
    (the frame that called the step function) and the per-stack occurrence count
    (``counts``, keyed by stack id)."""

    __slots__ = ("_frame", "_outer", "boundary", "counts")

    def __init__(self, boundary=None):
        self.boundary = boundary
        self.counts: dict = {}
        self._frame = None      # the innermost user frame seen last, and
        self._outer = 0         # the id of the stack of its callers

    def stack_id(self, f) -> int:
        """The id of the user's call-site stack from frame ``f`` outward.

        The library frames between ``f`` and the innermost user frame are walked each
        time (they differ per op); the rest comes from the last call when that user
        frame is the same one (held here until :meth:`release`, so no other frame can
        take its place)."""
        boundary = self.boundary
        known = _IN_LIBRARY
        while f is not None and f is not boundary:
            code = f.f_code
            lib = known.get(id(code))
            if lib is None:
                lib = _in_library(code)
            if not lib:
                break
            f = f.f_back
        else:
            return 0
        if f is self._frame:
            outer = self._outer
        else:
            outer = self._outer_id(f.f_back)
            if code.co_flags & _RESUMABLE:
                self._frame = None
            else:
                self._frame, self._outer = f, outer
        key = (id(code), f.f_lasti, outer)
        sid = _CHAINS.get(key)
        if sid is None:
            sid = _chain(*key)
        return sid

    def _outer_id(self, f) -> int:
        boundary = self.boundary
        sites = []
        while f is not None and f is not boundary:
            code = f.f_code
            lib = _IN_LIBRARY.get(id(code))
            if lib is None:
                lib = _in_library(code)
            if not lib:
                sites.append((id(code), f.f_lasti))
            f = f.f_back
        sid = 0
        for code_id, lasti in reversed(sites):
            sid = _chain(code_id, lasti, sid)
        return sid

    def release(self) -> None:
        """Forget the frames held: the remembered user frame and the boundary (at the
        end of a step: a frame object keeps its locals and its callers' alive, the
        step's own state among them, which would then wait for a garbage
        collection)."""
        self._frame = None
        self.boundary = None

    def count(self, sid) -> int:
        """The iteration index of an op at stack ``sid`` now (and count it)."""
        counts = self.counts
        n = counts.get(sid, 0)
        counts[sid] = n + 1
        return n

    def stack(self) -> tuple:
        """The user's call-site stack of the code running now, innermost first."""
        return _STACKS[self.stack_id(sys._getframe(1))]

    def here(self) -> tuple:
        """``(call-site stack, iteration index)`` of the op being dispatched now; each
        call counts one more execution of that stack in this step."""
        sid = self.stack_id(sys._getframe(1))
        counts = self.counts
        n = counts.get(sid, 0)
        counts[sid] = n + 1
        return _STACKS[sid], n
