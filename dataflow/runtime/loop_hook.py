"""Where the loop compiler plugs into the runtime.

The runtime may not import the loop compiler (``dataflow.loopc`` stands on the runtime
and the kernels), so ``import dataflow`` registers it here with
:func:`register_loop_compiler`; :class:`~dataflow.runtime.run_modes.SingleDriver` calls
it on each plan it builds. The compiler attaches a runner to the
:class:`~dataflow.runtime.plan.FramePlan` of each frame it compiles
(``FramePlan.compiled``) and its findings to ``Plan.loop_report`` (frame name -> None
when compiled, else why not); the executor hands such a frame's Enter values to the
runner (see ``Executor._enter``).

The mode comes from ``ConfigProto(compile_loops=...)``: ``None`` (the default) reads
``DATAFLOW_COMPILE_LOOPS`` (``0`` off, ``eager``, anything else the default, tiered);
``True`` is tiered, ``"eager"`` compiles before a frame's first run, ``False`` is off.

>>> compile_loops_mode(False), compile_loops_mode("eager"), compile_loops_mode(True)
(None, 'eager', 'tiered')
"""
from __future__ import annotations

import os

__all__ = ["attach_loop_compiler", "compile_loops_mode", "register_loop_compiler"]

_COMPILER: list = []


def register_loop_compiler(attach) -> None:
    """Install ``attach(plan, fetch_tensors, target_ops, feed_tensors, mode)``."""
    _COMPILER[:] = [attach]


def compile_loops_mode(value):
    """``None`` (off), ``"tiered"`` or ``"eager"`` for a ``compile_loops`` setting."""
    if value is None:
        env = os.environ.get("DATAFLOW_COMPILE_LOOPS", "1").strip().lower()
        value = False if env in ("0", "false", "off") else ("eager" if env == "eager" else True)
    if value is False:
        return None
    if value == "eager":
        return "eager"
    if value is True:
        return "tiered"
    raise ValueError(f"ConfigProto(compile_loops={value!r}): expected True, False or 'eager'")


def attach_loop_compiler(plan, fetch_tensors, target_ops, feed_tensors, mode) -> None:
    """Let the registered compiler attach runners to ``plan``'s frames (no-op when off,
    when nothing is registered, or when the plan has no loop)."""
    if mode is None or not _COMPILER or len(plan.frames) < 2:
        return
    _COMPILER[0](plan, fetch_tensors, target_ops, feed_tensors, mode)
