"""``dataflow.framework.graph_analysis``: pruning, frame inference and reachability.

The plan and the partitioner are built on these; here they are checked on their own, on
graphs from the builders (``df.while_loop``) and hand-built malformed ones.
"""
import pytest

import dataflow as df
from dataflow.framework.graph_analysis import (Frame, fed_placeholder, infer_frames, prune,
                                               reachable)
from dataflow.ops import control_flow_ops as cf

pytestmark = pytest.mark.usefixtures("graph")


def names(ops):
    return [op.name for op in ops]


# -- prune -----------------------------------------------------------------------------------
def test_prune_keeps_what_the_fetches_need_in_creation_order():
    a = df.constant(1.0, name="a")
    b = df.constant(2.0, name="b")
    unused = df.add(a, b, name="unused")
    c = df.multiply(b, a, name="c")
    assert names(prune([c], [], set())) == ["a", "b", "c"]
    assert unused.op not in prune([c], [], set())


def test_a_fed_tensor_cuts_the_walk():
    x = df.placeholder(df.float32, name="x")
    y = df.multiply(x, 2.0, name="y")
    one = df.constant(1.0, name="one")
    z = df.add(y, one, name="z")
    assert names(prune([z], [], {y})) == ["one", "z"]
    assert names(prune([z], [], {x})) == [y.op.inputs[1].op.name, "y", "one", "z"]
    assert names(prune([y], [], {y})) == []       # a fed fetch needs nothing


def test_targets_and_control_inputs_are_kept():
    a = df.constant(1.0, name="a")
    side = df.identity(a, name="side")
    with df.control_dependencies([side.op]):
        gated = df.identity(a, name="gated")
    target = df.no_op(name="target")
    assert names(prune([gated], [target], set())) == ["a", "side", "gated", "target"]


def test_a_control_edge_from_a_fed_placeholder_is_satisfied_by_the_feed():
    x = df.placeholder(df.float32, name="x")
    with df.control_dependencies([x.op]):
        c = df.constant(3.0, name="c")
    assert fed_placeholder(x.op, {x})
    assert not fed_placeholder(x.op, set())
    assert not fed_placeholder(c.op, {c})        # only Placeholders stand in for feeds
    assert names(prune([c], [], {x})) == ["c"]
    assert names(prune([c], [], set())) == ["x", "c"]


# -- infer_frames ----------------------------------------------------------------------------
def _nested_loops():
    def outer_body(i, acc):
        inner = df.while_loop(lambda j, s: j < 3, lambda j, s: (j + 1, s + 1.0),
                              [0, acc], parallel_iterations=4, name="inner")
        return i + 1, inner[1]
    return df.while_loop(lambda i, acc: i < 2, outer_body, [0, 0.0], parallel_iterations=7,
                         name="outer")


def test_frames_of_nested_loops():
    i, acc = _nested_loops()
    ops = prune([acc], [], set())
    frame_of, frames = infer_frames(ops, set())
    root = frames[""]
    assert root.parent is None and root.depth == 0
    outer = next(f for f in frames.values() if f.depth == 1)
    inner = next(f for f in frames.values() if f.depth == 2)
    assert len(frames) == 3
    assert inner.parent is outer and outer.parent is root
    assert (outer.parallel_iterations, inner.parallel_iterations) == (7, 4)
    assert all(isinstance(f, Frame) for f in frames.values())
    assert set(frame_of) == set(ops)
    for op in ops:
        f = frame_of[op]
        # An Enter runs in the parent of the frame it opens, an Exit in the frame it leaves.
        if op.type == "Enter":
            assert frames[op.get_attr("frame_name")].parent is f
        if op.type == "Exit":
            assert f is not root
        if op.type == "LoopCond":
            assert f in (outer, inner)
    assert frame_of[acc.op] is outer            # the outer loop's Exit
    # Each frame holds exactly one LoopCond: the loops' predicates.
    assert sorted(frame_of[op].name for op in ops if op.type == "LoopCond") == \
        sorted([outer.name, inner.name])


def test_an_enter_of_a_fed_value_still_opens_its_frame():
    x = df.placeholder(df.float32, name="x")
    e = cf.enter(x, "loop", name="e")
    y = cf.exit(df.identity(e, name="body"), name="out")
    frame_of, frames = infer_frames(prune([y], [], {x}), {x})
    assert frame_of[e.op] is frames[""]
    assert frame_of[y.op].name == "loop"
    assert frames["loop"].parent is frames[""]


def test_exit_outside_a_loop_is_an_error_naming_it():
    bad = cf.exit(df.constant(1.0), name="stray_exit")
    with pytest.raises(df.errors.InvalidArgumentError, match="not inside a while-loop") as info:
        infer_frames(prune([bad], [], set()), set())
    assert info.value.op is bad.op


def test_inputs_from_two_frames_are_an_error_naming_the_consumer():
    a = df.constant(1.0, name="a")
    inside = df.identity(cf.enter(a, "f"), name="inside")
    mixed = df.add(inside, a, name="mixed")
    with pytest.raises(df.errors.InvalidArgumentError, match="different frames") as info:
        infer_frames(prune([mixed], [], set()), set())
    assert info.value.op is mixed.op


def test_a_frame_entered_from_two_parents_is_an_error():
    a = df.constant(1.0, name="a")
    outer = cf.enter(a, "outer")
    in_outer = cf.enter(outer, "shared", name="from_outer")
    in_root = cf.enter(a, "shared", name="from_root")
    both = df.add(in_outer, in_root, name="both")
    with pytest.raises(df.errors.InvalidArgumentError, match="two different parent frames"):
        infer_frames(prune([both], [], set()), set())


def test_a_cycle_no_enter_starts_is_an_error():
    a = df.constant(1.0, name="a")
    m, _ = cf.merge([a, a], name="m")
    nxt = cf.next_iteration(df.identity(m), name="nxt")
    m.op._update_input(0, nxt)
    m.op._update_input(1, nxt)
    with pytest.raises(df.errors.InvalidArgumentError, match="unreachable from any source"):
        infer_frames(prune([m], [], set()), set())


# -- reachable -------------------------------------------------------------------------------
def test_reachable_follows_data_and_control_edges():
    a = df.constant(1.0, name="a")
    b = df.identity(a, name="b")
    with df.control_dependencies([b.op]):
        c = df.constant(2.0, name="c")
    d = df.identity(c, name="d")
    other = df.identity(a, name="other")
    assert sorted(names(reachable([b.op]))) == ["c", "d"]
    assert sorted(names(reachable([a.op]))) == ["b", "c", "d", "other"]
    assert sorted(names(reachable([a.op], within={b.op, other.op}))) == ["b", "other"]


def test_reachable_stays_within_one_iteration():
    i = df.while_loop(lambda i: i < 3, lambda i: i + 1, [0], name="w")
    ops = prune([i], [], set())
    merge = next(op for op in ops if op.type == "Merge")
    nxt = next(op for op in ops if op.type == "NextIteration")
    seen = reachable([merge])
    assert nxt in seen                # the body reaches the back edge ...
    assert merge not in seen          # ... which is not followed into the next iteration
    assert any(op.type == "Exit" for op in seen)
