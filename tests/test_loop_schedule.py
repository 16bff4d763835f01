"""Planned steps with while loops run as flat lists of kernel calls, one per loop body
(dataflow/runtime/loop_schedule.py): the same kernels in the same order as the
plan-ordered executor, the same values as the unplanned run."""
from __future__ import annotations

import numpy as np
import pytest

import dataflow as df
from dataflow.runtime.feeds import convert_feeds, feed_templates
from dataflow.runtime.loop_schedule import LoopSchedule
from dataflow.runtime.memory_arena import ArenaExecutor
from tests.op_harness import fresh_rng
from tests.test_memory_arena import _rnn_grad

UNFUSED = df.ConfigProto(fuse_elementwise=False, compile_loops=False)


def _steps(sess):
    return [step for _plan, step in sess._arena.steps.values()]


def _no_loop_schedules(monkeypatch):
    """Arena steps built from now on run their loops on the ArenaExecutor."""
    monkeypatch.setattr(LoopSchedule, "build", classmethod(lambda cls, *a: None))


def _three_ways(g, fetches, feed, monkeypatch, mode=True, runs=2):
    """The fetched values of the unplanned run, the loop schedule and the plan-ordered
    executor (``runs`` steps each), the planned steps' schedules, and the reads and
    writes the checker saw (the same for both runners)."""
    with df.Session(graph=g, config=UNFUSED) as sess:
        unplanned = [sess.run(fetches, feed) for _ in range(runs)]
    with df.Session(graph=g, config=df.ConfigProto(plan_memory=mode)) as sess:
        flat = [sess.run(fetches, feed) for _ in range(runs)]
        schedules = [s.loop_flat for s in _steps(sess)]
        checked = _checked_events(_steps(sess)[0])
    with monkeypatch.context() as m:
        _no_loop_schedules(m)
        with df.Session(graph=g, config=df.ConfigProto(plan_memory=mode)) as sess:
            executor = [sess.run(fetches, feed) for _ in range(runs)]
            assert [s.loop_flat for s in _steps(sess)] == [None]
            assert _checked_events(_steps(sess)[0]) == checked
    return unplanned, flat, executor, schedules, checked


def _checked_events(step):
    """(reads, writes) the overlap checker saw (None: not a checking run)."""
    return None if step.checker is None else (step.checker.reads, step.checker.writes)


def _assert_identical(*runs):
    first = runs[0]
    for other in runs[1:]:
        for step_a, step_b in zip(first, other):
            for a, b in zip(step_a, step_b):
                np.testing.assert_array_equal(a, b, strict=True)


@pytest.mark.parametrize("mode", [True, "check"])
def test_rnn_gradient_loop_schedule_is_bit_identical(monkeypatch, mode):
    """The tanh RNN forward + gradient (two sibling loops, stacks) by its loop schedule:
    the unplanned run's and the executor's values bit for bit, over two steps (the
    second reuses the arena and the stacks' history copies); checked: no value read
    after its bytes were reused."""
    rng, _ = fresh_rng()
    g, fetches, feed = _rnn_grad(rng, steps=12, batch=8, hidden=32)
    unplanned, flat, executor, schedules, checker = _three_ways(g, fetches, feed,
                                                                monkeypatch, mode)
    with df.Session(graph=g, config=df.ConfigProto(plan_memory=mode)) as sess:
        sess.run(fetches, feed)
        hints = list(_steps(sess)[0].history_pairs.values())
    assert len(schedules) == 1 and isinstance(schedules[0], LoopSchedule)
    assert schedules[0].iterations == 2 * 13    # forward and gradient, 13 each
    # the hidden state's two history pushes: the value push takes the copy unseen
    assert [hint.get("take") for _next, hint in hints] == ["previous"]
    _assert_identical(unplanned, flat, executor)
    if mode == "check":
        assert checker[0] > 200 and checker[1] > 150


def test_loop_schedule_calls_the_kernels_in_the_executors_order():
    """The loop schedule and the plan-ordered executor call the same kernels, in the
    same order, the same number of times."""
    rng, _ = fresh_rng()
    g, fetches, feed = _rnn_grad(rng, steps=5)
    with df.Session(graph=g, config=df.ConfigProto(plan_memory=True)) as sess:
        sess.run(fetches, feed)
        plan, step = list(sess._arena.steps.values())[0]
        calls = []

        def wrap(gid, fn):
            def kernel(*args):
                calls.append(gid)
                return fn(*args)
            return kernel
        step.node_tuples = [node[:4] + (wrap(gid, node[4]),) + node[5:]
                            if node[4] is not None else node
                            for gid, node in enumerate(step.node_tuples)]
        schedule = LoopSchedule.build(plan, step)
        feed_values = convert_feeds(g, feed)[1]
        step.new_run()
        flat_out = schedule.run(feed_values)
        flat_calls = calls[:]
        calls.clear()
        step.new_run()
        executor_out = ArenaExecutor(plan, step, feed_templates(plan, feed_values)).run()
    assert flat_calls == calls and len(calls) > 60
    for a, b in zip(flat_out, executor_out):
        np.testing.assert_array_equal(a, b, strict=True)


def _random_loop_graph(rng):
    """A while loop over 1-3 variables with a random elementwise / matmul body,
    sometimes a nested loop in the body, and the gradient of its results."""
    n_vars = int(rng.integers(1, 4))
    trips = int(rng.integers(0, 6))
    nested = bool(rng.integers(0, 2))
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [4, 8], name="x")
        w = df.placeholder(df.float32, [8, 8], name="w")
        ops = [lambda a, b: df.tanh(a) + b, lambda a, b: a * 0.5 - b,
               lambda a, b: df.matmul(a, w) + b, lambda a, b: df.sin(a) * b,
               lambda a, b: df.sigmoid(a + b)]
        picks = [(int(rng.integers(len(ops))), int(rng.integers(n_vars)),
                  int(rng.integers(n_vars))) for _ in range(n_vars)]
        inner_trips = int(rng.integers(1, 4))

        def body(i, *vs):
            out = [ops[k](vs[a], vs[b]) for k, a, b in picks]
            if nested:
                _, h = df.while_loop(lambda j, h: j < inner_trips,
                                     lambda j, h: (j + 1, df.tanh(df.matmul(h, w)) + x),
                                     (0, out[0]))
                out[0] = h
            return (i + 1, *out)
        init = [x * float(k + 1) for k in range(n_vars)]
        result = df.while_loop(lambda i, *vs: i < trips, body, (0, *init),
                               parallel_iterations=int(rng.integers(1, 10)))
        loss = df.add_n([df.reduce_sum(v) for v in result[1:]])
        grads = df.gradients(loss, [x, w])
    feed = {x: rng.standard_normal((4, 8)).astype(np.float32),
            w: (rng.standard_normal((8, 8)) * 0.3).astype(np.float32)}
    return g, [loss] + [gr for gr in grads if gr is not None], feed


def test_random_loop_graphs_under_the_checker(monkeypatch):
    """Random while loops (1-3 variables, nested loops, their gradients) run by their loop
    schedules with the overlap checker on: the unplanned run's values and the
    executor's, bit for bit, and no value read after its bytes were reused."""
    rng, _ = fresh_rng()
    reads = 0
    for _ in range(16):
        g, fetches, feed = _random_loop_graph(rng)
        unplanned, flat, executor, schedules, checker = _three_ways(
            g, fetches, feed, monkeypatch, mode="check")
        assert len(schedules) == 1 and schedules[0] is not None
        _assert_identical(unplanned, flat, executor)
        reads += checker[0]
    assert reads > 500


def test_kernel_error_inside_a_loop_names_its_node():
    g = df.Graph()
    with g.as_default():
        params = df.placeholder(df.float32, [4], name="params")
        idx = df.placeholder(df.int32, [2], name="idx")
        _, out = df.while_loop(
            lambda i, v: i < 3,
            lambda i, v: (i + 1, df.gather(df.tanh(params), idx, name="pick") + v),
            (0, df.zeros([2])))
    with df.Session(graph=g, config=df.ConfigProto(plan_memory=True)) as sess:
        ok = sess.run(out, {params: np.zeros(4, np.float32), idx: np.array([1, 2], np.int32)})
        np.testing.assert_array_equal(ok, np.zeros(2, np.float32))
        assert isinstance(_steps(sess)[0].loop_flat, LoopSchedule)
        with pytest.raises(df.errors.InvalidArgumentError, match="pick"):
            sess.run(out, {params: np.zeros(4, np.float32), idx: np.array([1, 9], np.int32)})


def test_a_cond_in_the_body_runs_on_the_executor(monkeypatch):
    """A loop whose body holds a cond does not fit the flat form: the step runs on the
    plan-ordered executor, its values the unplanned run's."""
    rng, _ = fresh_rng()
    g, fetches, feed = _rnn_grad(rng, steps=6, cond_in_body=True)
    with df.Session(graph=g, config=UNFUSED) as sess:
        expected = sess.run(fetches, feed)
    with df.Session(graph=g, config=df.ConfigProto(plan_memory="check")) as sess:
        got = sess.run(fetches, feed)
        assert [s.loop_flat for s in _steps(sess)] == [None]
    _assert_identical([expected], [got])


def test_a_long_loop_stops_at_its_deadline():
    g = df.Graph()
    with g.as_default():
        n = df.placeholder(df.int32, [], name="n")
        _, h = df.while_loop(lambda i, h: i < n, lambda i, h: (i + 1, df.tanh(h)),
                             (0, df.ones([64])), name="spin")
    with df.Session(graph=g, config=df.ConfigProto(plan_memory=True)) as sess:
        sess.run(h, {n: 3})
        assert isinstance(_steps(sess)[0].loop_flat, LoopSchedule)
        with pytest.raises(df.errors.DeadlineExceededError, match="spin"):
            sess.run(h, {n: 10 ** 9}, options=df.RunOptions(timeout_in_ms=50))
