"""Partitioned execution: the design note's scenarios, each against the single-device run,
plus the structure checks TensorFlow's partition tests make."""
from __future__ import annotations

import threading
from typing import ClassVar

import numpy as np
import pytest

import dataflow as df
from dataflow.runtime.partitioned import PartitionedPlan, register_partition_mode, run_on_threads
from dataflow.runtime.rendezvous import LocalRendezvous

A, B, C = "/cpu:0", "/cpu:1", "/cpu:2"
DA, DB, DC = "/device:CPU:0", "/device:CPU:1", "/device:CPU:2"
CONFIG = {"device_count": {"CPU": 3}}


class RecordingRendezvous(LocalRendezvous):
    """Remembers every message ``(key, is_dead)`` of the step (the last step's in LOG)."""

    LOG: ClassVar[list] = []

    def __init__(self):
        super().__init__()
        self.log = RecordingRendezvous.LOG = []

    def send(self, key, value, is_dead):
        self.log.append((key, is_dead))
        super().send(key, value, is_dead)


register_partition_mode("recording", RecordingRendezvous, run_on_threads)


def run_both(build, feeds=None, fetch_names=None, mode="threads"):
    """Run ``build()``'s fetches partitioned and with every device cleared; returns both."""
    results = []
    for placed in (True, False):
        g = df.Graph()
        with g.as_default():
            fetches = build()
        if not placed:
            for op in g.get_operations():
                op._set_device("")
        feed = {g.get_tensor_by_name(k): v for k, v in (feeds or {}).items()}
        config = df.ConfigProto(partition_mode=mode, **CONFIG)
        with df.Session(graph=g, config=config) as sess:
            results.append(sess.run(fetches, feed))
            if placed:
                assert any(isinstance(p, PartitionedPlan) for p in sess._plans.values())
    return results


def assert_same(a, b):
    for x, y in zip(np.atleast_1d(np.asarray(a, dtype=object)).ravel(),
                    np.atleast_1d(np.asarray(b, dtype=object)).ravel()):
        np.testing.assert_allclose(np.asarray(x, dtype=float), np.asarray(y, dtype=float),
                                   rtol=1e-6)


def loop_body_on_b(n, parallel_iterations=10, factor=2.0):
    """``while i < n: (i, a) = (i + 1, a * factor + x)``: predicate and counter on A,
    the update of ``a`` on B."""
    x = df.placeholder(df.float32, [], name="x")
    with df.device(A):
        def body(i, a):
            with df.device(B):
                a2 = a * factor + x
            return i + 1, a2
        return df.while_loop(lambda i, a: i < n, body, (0, 1.0),
                             parallel_iterations=parallel_iterations)


# -- the design note's scenarios ---------------------------------------------------------------
@pytest.mark.parametrize("n", [0, 1, 7])
def test_loop_with_body_on_b_and_predicate_on_a(n):
    part, single = run_both(lambda: loop_body_on_b(n), {"x:0": 0.5})
    assert_same(part, single)
    assert part[0] == n


def test_loop_structure_control_loops_on_both_devices_the_body_one_reading_a_recv():
    g = df.Graph()
    with g.as_default():
        i, a = loop_body_on_b(3)
    part = df.partition(g, [i, a], feeds=[g.get_tensor_by_name("x:0")])
    (frame,) = part.loop_leaders
    assert part.loop_leaders[frame] == DA
    # The predicate's device anchors on a control loop too, reading its own LoopCond
    # (no message): the user's loop Merge can fire for an iteration that never starts.
    assert part.control_loops_on(DA)[frame].pred.op.type == "LoopCond"
    loop = part.control_loops_on(DB)[frame]
    assert [op.type for op in loop.ops] == ["Enter", "Merge", "Switch", "NextIteration"]
    assert loop.pred.op.type == "_Recv"
    assert loop.enter.get_attr("frame_name") == frame
    assert loop.switch.inputs[1] is loop.pred
    assert loop.merge.inputs[1].op is loop.next_iteration
    # the user's graph is untouched
    assert all(op.graph is g for op in g.get_operations())
    assert not any(op.type in ("_Send", "_Recv") for op in g.get_operations())


def test_every_recv_in_a_frame_waits_for_its_devices_control_loop():
    """TF's partition-test invariant: a Recv inside a loop frame has a control input from
    its device's per-iteration anchor (the control loop's Merge, on the predicate's
    device too); root-frame Recvs are sources."""
    g = df.Graph()
    with g.as_default():
        nested_three_devices()
    part = df.partition(g, g.get_collection("fetches"))
    checked = 0
    for pair in part.send_recv_pairs:
        recv = pair.recv
        dev = pair.key[1]
        assert recv.graph is part.partitions[dev] and pair.send.graph is part.partitions[
            pair.key[0]]
        assert pair.send.get_attr("tensor_name") == recv.get_attr("tensor_name") == pair.key[2]
        if not pair.frame:
            assert recv.control_inputs == [] and recv.inputs == ()
            continue
        (ctrl,) = recv.control_inputs
        assert ctrl.type == "Merge"
        assert ctrl is part.control_loops_on(dev)[pair.frame].merge
        checked += 1
    assert checked >= 5
    for loop in part.control_loops:
        assert [op.type for op in loop.ops] == ["Enter", "Merge", "Switch", "NextIteration"]
        assert all(op.graph is part.partitions[loop.device] for op in loop.ops)


def test_cond_split_across_devices_sends_a_dead_token_to_the_untaken_branch():
    def build():
        x = df.placeholder(df.float32, [], name="x")
        with df.device(A):
            p = x > 0.0
            x = x * 1.0   # computed on A: the branches' Switches on x run on A

        def true_fn():
            with df.device(B):
                return x * 10.0

        def false_fn():
            with df.device(C):
                return x - 100.0
        with df.device(A):
            return df.cond(p, true_fn, false_fn)

    for value in (2.0, -2.0):
        part, single = run_both(build, {"x:0": value}, mode="recording")
        assert part == pytest.approx(single)
        # data messages (a control edge from a Switch is live whenever the Switch ran)
        log = [(key, dead) for key, dead in RecordingRendezvous.LOG
               if not key[2].startswith("^")]
        to_b = [dead for key, dead in log if key[1] == DB]
        to_c = [dead for key, dead in log if key[1] == DC]
        assert to_b and to_c
        if value > 0:   # B computes, C's Recv gets a dead token and its result is dead
            assert not any(to_b) and all(to_c)
        else:
            assert all(to_b) and not any(to_c)
        back = [dead for key, dead in log if key[0] in (DB, DC) and key[1] == DA]
        assert sorted(back) == [False, True]   # one live result, one dead one


def nested_three_devices():
    """Outer loop (predicate on A), inner loop (predicate on B) with a body op on A; an
    outer-body op on C: C has nodes of the outer loop only."""
    x = df.placeholder_with_default(df.constant(1.5), [], name="x")
    with df.device(A):
        def outer_body(i, s):
            with df.device(B):
                def inner_body(j, u):
                    with df.device(A):
                        u2 = u + x
                    return j + 1, u2
                _, u = df.while_loop(lambda j, u: j < i, inner_body, (0, s))
            with df.device(C):
                s2 = u * 0.5
            return i + 1, s2
        i, s = df.while_loop(lambda i, s: i < 4, outer_body, (0, 1.0))
    df.get_default_graph().add_to_collection("fetches", i)
    df.get_default_graph().add_to_collection("fetches", s)
    return i, s


def test_nested_loops_over_three_devices():
    part, single = run_both(nested_three_devices)
    assert_same(part, single)
    g = df.Graph()
    with g.as_default():
        i, s = nested_three_devices()
    result = df.partition(g, [i, s])
    (outer,) = [n for n, parent in result.frame_parents.items() if parent == ""]
    (inner,) = [n for n, parent in result.frame_parents.items() if parent == outer]
    assert result.loop_leaders == {outer: DA, inner: DB}
    on_c = result.control_loops_on(DC)
    assert set(on_c) == {outer}              # C has only outer-loop nodes
    assert set(result.control_loops_on(DB)) == {outer, inner}
    assert set(result.control_loops_on(DA)) == {outer, inner}
    # stacked: A's inner control loop enters from A's outer control loop's pivot (its
    # Switch), C's outer control loop from a root-frame constant
    a_inner = result.control_loops_on(DA)[inner]
    assert a_inner.enter.inputs[0] is result.control_loops_on(DA)[outer].pivot
    assert on_c[outer].enter.inputs[0].op.type == "Const"


def test_loop_invariant_used_on_two_devices_is_entered_on_each():
    def build():
        x = df.placeholder(df.float32, [], name="x")
        with df.device(A):
            def body(i, a, b):
                with df.device(B):
                    a2 = a + x
                with df.device(C):
                    b2 = b * x
                return i + 1, a2, b2
            return df.while_loop(lambda i, a, b: i < 5, body, (0, 0.0, 1.0))

    part, single = run_both(build, {"x:0": 1.5})
    assert_same(part, single)
    g = df.Graph()
    with g.as_default():
        fetches = build()
    x = g.get_tensor_by_name("x:0")
    result = df.partition(g, list(fetches), feeds=[x])
    for dev in (DB, DC):
        enters = [op for op in result.partitions[dev].get_operations()
                  if op.type == "Enter" and op.get_attr("is_constant")]
        assert len(enters) == 1 and enters[0].inputs[0].op.type == "Placeholder"
    # x itself never crosses: each device is fed directly
    assert not any(p.key[2] == "x:0" for p in result.send_recv_pairs)


@pytest.mark.parametrize("parallel_iterations", [1, 10])
def test_parallel_iterations(parallel_iterations):
    def build():
        with df.device(A):
            def body(i, a, b):
                with df.device(B):   # depends on i only: B can run iterations ahead
                    a2 = a + df.cast(i, df.float32) * 2.0
                with df.device(C):
                    b2 = b + df.cast(i * i, df.float32)
                return i + 1, a2, b2
            return df.while_loop(lambda i, a, b: i < 30, body, (0, 0.0, 0.0),
                                 parallel_iterations=parallel_iterations)
    part, single = run_both(build)
    assert_same(part, single)


def gradient_of_loop_on_b():
    """A loop on A whose body runs on B, and the gradient of its loss w.r.t. ``w:0``."""
    w = df.placeholder(df.float64, [3], name="w")
    with df.device(A):
        def body(i, h):
            with df.device(B):
                h2 = df.tanh(h * w + 0.1)
            return i + 1, h2
        _, h = df.while_loop(lambda i, h: i < 4, body,
                             (0, df.constant([0.5, -0.2, 0.3], df.float64)))
        loss = df.reduce_sum(h * h)
    (gw,) = df.gradients(loss, [w])
    return loss, gw


def test_gradients_of_a_partitioned_loop():
    part, single = run_both(gradient_of_loop_on_b, {"w:0": np.array([0.7, -1.1, 0.4])})
    np.testing.assert_allclose(part[0], single[0], rtol=1e-12)
    np.testing.assert_allclose(part[1], single[1], rtol=1e-12)


def variable_updated_from_a():
    """A variable on B incremented by a value computed on A: (graph, v, update, init)."""
    g = df.Graph()
    with g.as_default():
        with df.device(B):
            v = df.Variable(0.0, name="v")
        with df.device(A):
            step = df.constant(2.5) * 2.0
        with df.device(B):
            update = v.assign_add(step)
        init = df.variables_initializer([v])
    return g, v, update, init


def test_variables_updated_from_another_device():
    g, v, update, init = variable_updated_from_a()
    with df.Session(graph=g, config=df.ConfigProto(**CONFIG)) as sess:
        sess.run(init)
        sess.run(update)
        assert sess.run(update) == 10.0
        assert sess.run(v) == 10.0


# -- failures ------------------------------------------------------------------------------
def failing_on_b():
    x = df.placeholder(df.float32, [], name="x")
    with df.device(A):
        def body(i, a, c):
            with df.device(B):
                check = df.Assert(a < 5.0, [a], name="too_big")
                with df.control_dependencies([check]):
                    a2 = a + x
            with df.device(C):
                c2 = c * 1.5
            return i + 1, a2, c2
        return df.while_loop(lambda i, a, c: i < 20, body, (0, 0.0, 1.0))


def test_an_op_failing_on_b_cancels_a_and_c():
    g = df.Graph()
    with g.as_default():
        fetches = failing_on_b()
    x = g.get_tensor_by_name("x:0")
    before = threading.active_count()
    with df.Session(graph=g, config=df.ConfigProto(**CONFIG)) as sess:
        opts = df.RunOptions(timeout_in_ms=20_000)
        with pytest.raises(df.errors.InvalidArgumentError) as info:
            sess.run(fetches, {x: 1.0}, options=opts)
        assert info.value.op.name.endswith("too_big") and info.value.op.type == "Assert"
        assert info.value.op.graph is g     # the user's op, not its partition copy
        # the same session runs again, with nothing left over from the failed step
        i, a, c = sess.run(fetches, {x: 0.1}, options=opts)
        assert i == 20 and a == pytest.approx(2.0) and c == pytest.approx(1.5 ** 20)
    assert threading.active_count() <= before


def test_deadline_cancels_every_partition():
    g = df.Graph()
    with g.as_default():
        fetches = loop_body_on_b(10**9, factor=0.5)
    with df.Session(graph=g, config=df.ConfigProto(**CONFIG)) as sess, \
            pytest.raises(df.errors.DeadlineExceededError):
        sess.run(fetches, {g.get_tensor_by_name("x:0"): 0.0},
                 options=df.RunOptions(timeout_in_ms=100))


def test_rendezvous_cancel_wakes_waiters_and_drops_later_sends():
    rv = LocalRendezvous()
    got = []
    rv.recv_async(("a", "b", "t", ()), lambda v, d, e: got.append((v, d, e)))
    err = df.errors.CancelledError(None, None, "stop")
    rv.cancel(err)
    assert got == [(None, False, err)]
    rv.send(("a", "b", "u", ()), 1.0, False)
    with pytest.raises(df.errors.CancelledError):
        rv.recv(("a", "b", "u", ()), timeout=1.0)


def test_rendezvous_delivers_value_and_dead_bit_in_either_order():
    rv = LocalRendezvous()
    rv.send(("a", "b", "t", (("f", 0),)), None, True)
    assert rv.recv(("a", "b", "t", (("f", 0),))) == (None, True)
    box = []
    rv.recv_async(("a", "b", "t", (("f", 1),)), lambda v, d, e: box.append((v, d, e)))
    assert box == []
    rv.send(("a", "b", "t", (("f", 1),)), 7, False)
    assert box == [(7, False, None)]


# -- messages ------------------------------------------------------------------------------
def test_messages_per_iteration_match_the_construction():
    """Per iteration: one message per Send/Recv pair of the frame; those are the edges
    crossing devices plus one predicate per device other than the predicate's (every
    device has a control loop; the predicate's reads its LoopCond)."""
    g = df.Graph()
    with g.as_default():
        fetches = loop_body_on_b(6)
    x = g.get_tensor_by_name("x:0")
    result = df.partition(g, list(fetches), feeds=[x])
    (frame,) = result.loop_leaders
    pairs = [p for p in result.send_recv_pairs if p.frame == frame]
    preds = [p for p in pairs if p.kind == "predicate"]
    assert len(preds) == len(result.control_loops) - 1 == 1
    crossing = [p for p in pairs if p.kind != "predicate"]
    assert result.messages_per_iteration(frame) == len(crossing) + len(preds)
    with df.Session(graph=g, config=df.ConfigProto(partition_mode="recording",
                                                   **CONFIG)) as sess:
        assert sess.run(fetches, {x: 1.0})[0] == 6
    per_iteration = {}
    for key, _ in RecordingRendezvous.LOG:
        if key[3]:
            per_iteration[key[3][-1][1]] = per_iteration.get(key[3][-1][1], 0) + 1
    # iterations 0..6 exist (the last one sends the predicate False and dead values)
    assert sorted(per_iteration) == list(range(7))
    assert set(per_iteration.values()) == {result.messages_per_iteration(frame)}


# -- devices and options -------------------------------------------------------------------
def test_session_devices_declares_the_devices():
    g = df.Graph()
    with g.as_default():
        with df.device(A):
            a = df.constant(1.0)
        with df.device("/cpu:5"):
            b = df.add(a, 1.0, name="on_five")
    with df.Session(graph=g, devices=[A, B]) as sess:
        assert sess.list_devices() == ["/device:CPU:0", "/device:CPU:1"]
        with pytest.raises(df.errors.InvalidArgumentError) as info:
            sess.run(b)
        assert info.value.op.name == "on_five" and "CPU:5" in str(info.value)
    soft = df.ConfigProto(allow_soft_placement=True)
    with df.Session(graph=g, devices=[A, B], config=soft) as sess:
        assert sess.run(b) == 2.0


def test_unknown_partition_mode_is_a_clear_error():
    with pytest.raises(df.errors.UnimplementedError, match="carrier-pigeon"):
        df.Session(graph=df.Graph(), config=df.ConfigProto(partition_mode="carrier-pigeon"))


def test_partition_api_with_fetch_names_and_unknown_devices():
    g = df.Graph()
    with g.as_default():
        with df.device(A):
            x = df.constant(2.0, name="x")
        with df.device(B):
            y = df.multiply(x, 3.0, name="y")
    part = df.partition(g, "y:0")
    assert part.devices == [DA, DB]
    assert part.fetches[0][0] == DB and part.fetches[0][1].name == "y:0"
    assert [(p.kind, p.key) for p in part.send_recv_pairs] == [("data", (DA, DB, "x:0"))]
    with pytest.raises(df.errors.InvalidArgumentError) as info:
        df.partition(g, [y], devices=[A])
    assert info.value.op.device == DB


def test_fed_tensor_used_on_two_devices_and_fetched():
    def build():
        with df.device(A):
            x = df.constant(1.0, name="x") + 1.0
        with df.device(B):
            y = x * 2.0
        with df.device(C):
            z = x - 1.0
        return [x, y, z]
    part, single = run_both(build, {"add:0": 5.0})
    assert part == single == [5.0, 10.0, 4.0]


@pytest.mark.parametrize("devices", [2, 4])
def test_benchmark_loop_sends_the_constructions_message_count(devices):
    """benchmarks/partition_table.py's loop: per iteration, each non-leader device gets the
    predicate and the counter, nothing else (its loop variable lives there entirely)."""
    from benchmarks.partition_table import build_loop
    n = 25
    g, fetches = build_loop(devices, n)
    gs, fetches_s = build_loop(devices, n, placed=False)
    result = df.partition(g, fetches)
    (frame,) = result.loop_leaders
    assert result.messages_per_iteration(frame) == 2 * (devices - 1)
    assert len(result.control_loops) == devices
    config = df.ConfigProto(device_count={"CPU": devices}, partition_mode="recording")
    with df.Session(graph=g, config=config) as sess, df.Session(graph=gs) as single:
        assert sess.run(fetches) == single.run(fetches_s)
    in_loop = [key for key, _ in RecordingRendezvous.LOG if key[3]]
    assert len(in_loop) == (n + 1) * 2 * (devices - 1)
    assert len(RecordingRendezvous.LOG) == len(in_loop)   # nothing crosses outside it


def test_a_failure_stops_a_partition_that_never_waits():
    """A runs a long loop that receives nothing from B (b's whole loop lives on B); when B
    fails, A stops at its next iteration instead of running to the end or the deadline."""
    g = df.Graph()
    with g.as_default():
        with df.device(A):
            counter = df.Variable(0, name="counter")
            i0 = df.constant(0)
        with df.device(B):
            b0 = df.constant(0)

        def cond(i, b):
            with df.device(A):
                return i < 10**8

        def body(i, b):
            with df.device(A), df.control_dependencies([counter.assign_add(1)]):
                i2 = i + 1
            with df.device(B):
                check = df.Assert(b < 3, [b], name="b_small")
                with df.control_dependencies([check]):
                    b2 = b + 1
            return i2, b2
        loop = df.while_loop(cond, body, (i0, b0))
        init = df.variables_initializer([counter])
    part = df.partition(g, list(loop))
    assert all(p.key[1] == DB for p in part.send_recv_pairs)   # A never waits on B
    with df.Session(graph=g, config=df.ConfigProto(**CONFIG)) as sess:
        sess.run(init)
        with pytest.raises(df.errors.InvalidArgumentError) as info:
            sess.run(loop, options=df.RunOptions(timeout_in_ms=60_000))
        assert info.value.op.name.endswith("b_small")
        assert sess.run(counter) < 10**6


def test_a_loop_without_loop_cond_cannot_span_devices():
    from dataflow import ops
    g = df.Graph()
    with g.as_default():
        with df.device(A):
            e = ops.enter(df.constant(0), frame_name="raw")
            three = ops.enter(df.constant(3), frame_name="raw", is_constant=True)
            one = ops.enter(df.constant(1), frame_name="raw", is_constant=True)
            m, _ = ops.merge([e, e])
            f, t = ops.switch(m, m < three)          # no loop_cond
        with df.device(B):
            nxt = ops.next_iteration(t + one)
        m.op.update_input(1, nxt)
        with df.device(A):
            out = ops.exit(f)
    version = g.version
    with pytest.raises(df.errors.InvalidArgumentError, match="no LoopCond") as info:
        df.partition(g, [out])
    assert info.value.op is not None
    assert g.version == version          # partitioning never changes the user's graph
    with df.Session(graph=g, config=df.ConfigProto(**CONFIG)) as sess, \
            pytest.raises(df.errors.InvalidArgumentError, match="no LoopCond"):
        sess.run(out)


# -- regressions ---------------------------------------------------------------------------
def loop_made_live_by_a_control_trigger(maximum_iterations=None, parallel_iterations=10):
    """``while i < 2: (i, v) = (i + 1, 2 * identity(x) after ControlTrigger(after i))``:
    the ControlTrigger runs live in the last iteration too (its input is dead there), so
    ``v``'s NextIteration is live after the predicate turned False and ``v``'s Merge fires
    for an iteration that never starts. ``v``'s loop ops and the predicate are on A, ``i``'s
    on B (DATAFLOW_TEST_SEED=448140721 of test_partition_differential, written by hand)."""
    x = df.placeholder(df.int32, [2], name="x")

    def body(i, v):
        with df.control_dependencies([i.op]):
            trigger = df.control_trigger(name="trigger")
        with df.control_dependencies([trigger]):
            c = df.identity(x)
        return df.add(i, 1, name="next_i"), df.add(c, c)

    i, v = df.while_loop(lambda i, v: df.less(i, 2), body, (0, x),
                         maximum_iterations=maximum_iterations,
                         parallel_iterations=parallel_iterations)
    ops = df.get_default_graph().get_operations()
    *other_merges, _ = [op for op in ops if op.type == "Merge"]    # v's Merge is last
    on_b = {op.name for m in other_merges for op in (m, m.inputs[0].op, m.inputs[1].op)}
    for op in ops:
        op._set_device(B if op.name in on_b or op.name.endswith(("trigger", "next_i"))
                       else A)
    return i, v


@pytest.mark.parametrize("mode", ["threads", "processes"])
@pytest.mark.parametrize("loop_args,feed_exit", [
    ({}, False), ({}, True), ({"maximum_iterations": 1, "parallel_iterations": 1}, True)],
    ids=["plain", "exit-fed", "max-iterations-1"])
def test_a_loop_merge_firing_after_the_last_iteration_does_not_hang_the_partitions(
        mode, loop_args, feed_exit):
    # Before the fix the predicate's device anchored its Recvs on the loop's own Merge,
    # which fired again after the last iteration: its Recvs waited for messages no
    # device sends (DeadlineExceededError). Every device now anchors on a control loop.
    x_value = np.array([4, -2], np.int32)
    results = []
    for placed in (True, False):
        g = df.Graph()
        with g.as_default():
            i, v = loop_made_live_by_a_control_trigger(**loop_args)
        if not placed:
            for op in g.get_operations():
                op._set_device("")
        feeds = {g.get_tensor_by_name("x:0"): x_value}
        if feed_exit:
            feeds[i] = np.int32(7)                  # the Exit of i is fed, v fetched
        config = df.ConfigProto(partition_mode=mode if placed else "threads", **CONFIG)
        with df.Session(graph=g, config=config) as sess:       # unplaced: one executor
            results.append(sess.run([i, v], feeds,
                                    options=df.RunOptions(timeout_in_ms=20_000)))
            assert any(isinstance(p, PartitionedPlan) for p in sess._plans.values()) \
                == placed
    part, single = results
    trips = 1 if loop_args.get("maximum_iterations") == 1 else 2
    assert part[0] == single[0] == (7 if feed_exit else trips)
    np.testing.assert_array_equal(part[1], 2 * x_value)
    np.testing.assert_array_equal(single[1], 2 * x_value)
