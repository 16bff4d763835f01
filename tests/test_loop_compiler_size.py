"""The loop compiler's bounds on compile time: a size limit and shared modules.

Numba's compile time grows with the square of a generated function's size (second-order
gradient frames of nested loops reach 1000 statements and a minute of LLVM time each),
so a frame over ``codegen.MAX_STATEMENTS`` runs interpreted and says why, while its
nested frames are compiled on their own; structurally identical frames share one module.
"""
from __future__ import annotations

import numpy as np

import dataflow as df
from dataflow.loopc import codegen, runner
from dataflow.loopc.frames import recognize

EAGER = df.ConfigProto(compile_loops="eager")
OFF = df.ConfigProto(compile_loops=False)


def _run(graph, fetches, feeds, config):
    with df.Session(graph=graph, config=config) as sess:
        md = df.RunMetadata()
        out = sess.run(fetches, feeds, run_metadata=md)
    return out, md


def _nested_program():
    """An outer loop (with a cond) around an inner loop; arithmetic only, so compiled
    and interpreted values are equal bit for bit."""
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float64, [3])

        def inner(j, v):
            return j + 1, v * 0.75 + x

        def outer(i, v):
            _, v = df.while_loop(lambda j, w: j < i, inner, (0, v))
            v = df.cond(df.equal(i % 2, 0), lambda: v * 1.25, lambda: v - x)
            return i + 1, v
        _, y = df.while_loop(lambda i, v: i < 5, outer, (0, x))
    return g, x, y


def _statements(fetch, feeds):
    """Statement counts of the generated functions of each frame, by frame name."""
    loops = recognize([fetch], [], list(feeds))
    return {name: codegen.generate(loop).source.count("\n") - 1
            for name, loop in loops.items()}


def test_a_frame_over_the_size_limit_runs_interpreted_and_its_inner_frame_compiles(
        monkeypatch):
    g, x, y = _nested_program()
    feeds = {x: np.array([0.5, -1.0, 2.0])}
    with g.as_default():
        sizes = _statements(y, feeds)
    outer, inner = "while/while_context", "while/while/while_context"
    assert sizes[outer] > sizes[inner] > 0, sizes
    monkeypatch.setattr(codegen, "MAX_STATEMENTS", sizes[inner])
    compiled, md = _run(g, y, feeds, EAGER)
    assert md.compiled_frames == [inner], md.interpreted_frames
    reason = md.interpreted_frames[outer]
    assert f"too large to compile: {sizes[outer]} statements" in reason, reason
    assert f"limit of {sizes[inner]}" in reason, reason
    interpreted, md_off = _run(g, y, feeds, OFF)
    assert md_off.compiled_frames == []
    np.testing.assert_array_equal(compiled, interpreted, strict=True)
    # Under the default limit the whole nest compiles as one function, same values.
    monkeypatch.setattr(codegen, "MAX_STATEMENTS", sizes[outer])
    whole, md_whole = _run(g, y, feeds, EAGER)
    assert sorted(md_whole.compiled_frames) == [inner, outer], md_whole.interpreted_frames
    np.testing.assert_array_equal(whole, interpreted, strict=True)


def test_structurally_identical_frames_share_one_compiled_module():
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float64, [])

        def loop(start):
            # A constant no other test uses: the module is new to this process.
            return df.while_loop(lambda i, v: i < 7,
                                 lambda i, v: (i + 1, v * v * 1.0625 + 0.3125),
                                 (0, start))[1]
        y = loop(x) + loop(x * 2.0)
    before = set(runner._modules)
    out, md = _run(g, y, {x: 0.25}, EAGER)
    assert sorted(md.compiled_frames) == ["while/while_context", "while_1/while_context"]
    assert len(set(runner._modules) - before) == 1
    expected = 0.0
    for start in (0.25, 0.5):
        v = start
        for _ in range(7):
            v = v * v * 1.0625 + 0.3125
        expected += v
    assert out == expected
    interpreted, _ = _run(g, y, {x: 0.25}, OFF)
    assert out == interpreted
