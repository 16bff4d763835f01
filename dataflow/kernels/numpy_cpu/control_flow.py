"""Kernels of the ordinary ops around control flow (the five primitives have none:
the executor implements them)."""
from __future__ import annotations

from ..registry import register_kernel
from ._util import const


def _noop(*args):
    return None


register_kernel("LoopCond")(const(lambda pred: pred))
register_kernel("NoOp")(const(_noop))
register_kernel("ControlTrigger")(const(_noop))
