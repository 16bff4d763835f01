"""The loop compiler: whole while-loop frames as one Numba function each.

A frame (the dataflow between its Enters and Exits, with conds and nested loops
inside, forward and gradient loops alike) is recognized from the step's graph
(:mod:`.frames`), generated as structured code by per-op lowerings (:mod:`.codegen`,
:mod:`.lowering`) and run by a :class:`~.runner.FrameRunner` that the executor calls
with the frame's Enter values. The graph and its results do not change, only how the
frame runs; whatever the compiled code does not cover runs interpreted, exactly as
before. ``import dataflow`` installs :func:`attach` as the runtime's loop compiler.

``sess.run(..., run_metadata=md)`` says what ran how::

    md = df.RunMetadata()
    sess.run(y, run_metadata=md)
    md.compiled_frames      # ['while/while_context']
    md.interpreted_frames   # {frame name: why it ran interpreted}

A frame whose generated function would exceed ``codegen.MAX_STATEMENTS`` statements
(Numba's compile time grows with the square of its size) runs interpreted, listed with
that reason, and its nested frames are compiled on their own. Structurally identical
frames share one generated module and its machine code.

Switches: ``df.ConfigProto(compile_loops=False)`` (or ``DATAFLOW_COMPILE_LOOPS=0``)
off; ``compile_loops="eager"`` compiles before a frame's first run instead of
interpreting it while a thread compiles.
"""
from __future__ import annotations

from dataflow.runtime.loop_hook import register_loop_compiler

from .codegen import Unsupported, generate
from .frames import recognize
from .runner import FrameRunner, wait_for_compiles

__all__ = ["attach", "wait_for_compiles"]


def attach(plan, fetch_tensors, target_ops, feed_tensors, mode) -> None:
    """Attach a :class:`~.runner.FrameRunner` to each outermost compilable frame of
    ``plan`` and record every frame's outcome in ``plan.loop_report``."""
    loops = recognize(fetch_tensors, target_ops, feed_tensors)
    gid_of = {op: gid for gid, op in enumerate(plan.ops)}
    report = {}

    def depth(loop):
        return 0 if not loop.parent else 1 + depth(loops[loop.parent])

    for loop in sorted(loops.values(), key=depth):
        if loop.reason is not None:
            report[loop.name] = loop.reason
            continue
        if loop.parent and report.get(loop.parent) is None:
            report[loop.name] = None   # compiled inside its parent's function
            continue
        frame_plan = plan.frames.get(loop.name)
        try:
            if frame_plan is None:
                raise Unsupported("the frame has no plan")
            missing = [op.name for op in loop.enters + loop.exits if op not in gid_of]
            if missing:
                raise Unsupported(f"Enters/Exits {missing} are not nodes of the plan")
            source = generate(loop)
        except Unsupported as exc:
            loop.reason = report[loop.name] = str(exc)
            continue
        first = loop.enters[0] if loop.enters else None
        frame_plan.compiled = FrameRunner(source, gid_of, mode, first)
        report[loop.name] = None
    plan.loop_report = report


register_loop_compiler(attach)
