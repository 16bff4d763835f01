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

>>> loc = Locator()
>>> [loc.here()[1] for _ in range(3)]        # one line, three iterations
[0, 1, 2]
>>> a = loc.here(); b = loc.here()           # two call sites
>>> a[0] != b[0]
True
"""
from __future__ import annotations

import os
import sys

__all__ = ["Locator"]

# The dataflow package directory (this file is dataflow/tracer/location.py).
_LIBRARY = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
# id(code object) -> whether it belongs to the dataflow package (ids of live code
# objects are stable: a function's code lives as long as the function).
_IN_LIBRARY: dict = {}


def _in_library(code) -> bool:
    key = id(code)
    hit = _IN_LIBRARY.get(key)
    if hit is None:
        hit = _IN_LIBRARY[key] = os.path.abspath(code.co_filename).startswith(_LIBRARY)
    return hit


class Locator:
    """Computes op locations within one step: the call-site stack up to ``boundary``
    (the frame that called the step function) and the per-stack occurrence count."""

    __slots__ = ("boundary", "counts")

    def __init__(self, boundary=None):
        self.boundary = boundary
        self.counts: dict = {}

    def stack(self) -> tuple:
        """The user's call-site stack of the code running now, innermost first."""
        boundary = self.boundary
        f = sys._getframe(1)
        sites = []
        known = _IN_LIBRARY
        while f is not None and f is not boundary:
            code = f.f_code
            lib = known.get(id(code))       # _in_library, inlined: once per frame per op
            if lib is None:
                lib = _in_library(code)
            if not lib:
                sites.append((id(code), f.f_lasti))
            f = f.f_back
        return tuple(sites)

    def here(self) -> tuple:
        """``(call-site stack, iteration index)`` of the op being dispatched now; each
        call counts one more execution of that stack in this step."""
        stack = self.stack()
        n = self.counts.get(stack, 0)
        self.counts[stack] = n + 1
        return stack, n
