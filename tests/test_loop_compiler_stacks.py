"""Stacks pushed and popped in one compiled frame (dataflow/loopc/lowering_stacks.py)
against the interpreter: entries, their order and counts after the loop, and the
interpreter's error for a pop of an empty stack."""
from __future__ import annotations

import numpy as np
import pytest

import dataflow as df
from dataflow import ops

EAGER = df.ConfigProto(compile_loops="eager")
INTERPRETED = df.ConfigProto(compile_loops=False)
FRAME = "while/while_context"


def _build(pops_per_step, steps=4):
    """A stack filled with two rows before the loop; each step pops ``pops_per_step``
    entries and then pushes the last popped one plus the step's value, using a popped
    entry again after that push (which reuses the popped row in the compiled buffer);
    a second loop pops what is left."""
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float64, [steps, 3])
        h = ops.stack(df.float64)
        first = ops.stack_push(h, df.constant([1.0, 2.0, 3.0], df.float64))
        with df.control_dependencies([first]):
            second = ops.stack_push(h, df.constant([-4.0, 5.0, 0.5], df.float64))

        def body(t, carry):
            with df.control_dependencies([carry]):   # after the pushes before the loop
                popped = ops.stack_pop(h, df.float64, shape=[3])
            for _ in range(pops_per_step - 1):
                with df.control_dependencies([popped]):
                    popped = ops.stack_pop(h, df.float64, shape=[3]) + popped
            with df.control_dependencies([popped]):
                pushed = ops.stack_push(h, popped * 0.5 + x[t])
            with df.control_dependencies([pushed]):
                again = ops.stack_push(h, carry + 1.0)
            with df.control_dependencies([again]):
                carry = carry * 0.25 + popped * 3.0
            return t + 1, carry

        with df.control_dependencies([second]):
            start = df.identity(df.zeros([3], df.float64))
        _, carry = df.while_loop(lambda t, c: t < steps, body, (0, start),
                                 parallel_iterations=1)
        with df.control_dependencies([carry]):
            left = ops.stack_size(h)

        def drain(k, acc):
            return k - 1, acc * 2.0 + ops.stack_pop(h, df.float64, shape=[3])
        _, drained = df.while_loop(lambda k, a: k > 0, drain, (left, carry),
                                   parallel_iterations=1)
    return g, x, [carry, left, drained]


def _run(graph, fetches, feeds, config):
    with df.Session(graph=graph, config=config) as sess:
        md = df.RunMetadata()
        try:
            return sess.run(fetches, feeds, run_metadata=md), md
        except df.errors.OpError as exc:
            return (type(exc), str(exc)), md


def test_pushes_and_pops_in_one_frame_match_the_interpreter():
    g, x, fetches = _build(1)
    xv = np.random.default_rng(3).standard_normal([4, 3])
    got, md = _run(g, fetches, {x: xv}, EAGER)
    want, _ = _run(g, fetches, {x: xv}, INTERPRETED)
    assert FRAME in md.compiled_frames, md.interpreted_frames
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b, strict=True)
    assert want[1] == 2 + 4    # two rows before, one more per step


@pytest.mark.parametrize("steps", [1, 3])
def test_popping_an_empty_stack_raises_as_interpreted(steps):
    """Two pops and two pushes per step keep the size; with one row too few the first
    step's second pop finds the stack empty."""
    g, x, fetches = _build(3, steps)
    xv = np.ones([steps, 3])
    compiled, _ = _run(g, fetches, {x: xv}, EAGER)
    interpreted, _ = _run(g, fetches, {x: xv}, INTERPRETED)
    assert compiled == interpreted
    assert compiled[0] is df.errors.InvalidArgumentError and "is empty" in compiled[1]
