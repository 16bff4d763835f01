"""ConfigProto(memory_budget_bytes=N): a step whose static memory plan exceeds the
budget is refused before any kernel runs; the plan is made once per (compiled step,
fed shapes)."""
from __future__ import annotations

import numpy as np
import pytest

import dataflow as df
import dataflow.memory.budget as budget_mod
from tests.op_harness import fresh_rng

BIG = 1 << 30


def _step(features=64, hidden=128):
    """A dense layer, a variable increment and a Print: the increment and the Print
    show whether anything of a refused step ran."""
    rng, _ = fresh_rng()
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [None, features], name="x")
        w = df.constant(rng.standard_normal((features, hidden)).astype(np.float32), name="w")
        h = df.tanh(df.matmul(x, w, name="hidden"), name="act")
        counter = df.Variable(np.zeros(2, np.float32), name="counter")
        bump = df.assign_add(counter, np.ones(2, np.float32), name="bump")
        y = df.Print(df.reduce_sum(h, axis=1), [h], message="STEP-RAN ", name="printed")
        init = df.global_variables_initializer()
    return g, x, y, bump, counter, init


def _counting_planner(monkeypatch):
    calls = []
    real = budget_mod.plan

    def counted(*args, **kwargs):
        calls.append(kwargs.get("feed_dict"))
        return real(*args, **kwargs)

    monkeypatch.setattr(budget_mod, "plan", counted)
    return calls


def _peak(g, fetches, feed):
    return df.memory.plan(fetches, feed_dict=feed, graph=g).peak_bytes


def test_over_budget_raises_before_anything_runs(monkeypatch, capfd):
    g, x, y, bump, counter, init = _step()
    feed = {x: fresh_rng()[0].standard_normal((256, 64)).astype(np.float32)}
    peak = _peak(g, [y, bump], feed)
    with df.Session(graph=g, config=df.ConfigProto(memory_budget_bytes=peak - 1)) as sess:
        sess.run(init)
        executed = []
        real_execute = sess._driver.execute
        monkeypatch.setattr(sess._driver, "execute",
                            lambda *a, **k: executed.append(a) or real_execute(*a, **k))
        capfd.readouterr()
        with pytest.raises(df.errors.ResourceExhaustedError) as info:
            sess.run([y, bump], feed)
        assert executed == []                       # no kernel of the step was started
        assert "STEP-RAN" not in capfd.readouterr().err
        monkeypatch.undo()
        np.testing.assert_array_equal(sess.run(counter), [0.0, 0.0])   # not incremented
    assert f"planned peak is {peak} bytes" in info.value.message
    assert f"memory_budget_bytes={peak - 1}" in info.value.message


def test_error_names_the_largest_buffers_and_sizes():
    g, x, y, bump, _, _ = _step(features=64, hidden=512)
    feed = {x: np.zeros((300, 64), np.float32)}
    p = df.memory.plan([y, bump], feed_dict=feed, graph=g)
    largest = max(p.buffers, key=lambda b: b.size)
    # hidden/act are [300, 512] float32: larger than the [64, 512] weight and the feed.
    assert largest.producer.name in ("hidden", "act") and largest.size >= 300 * 512 * 4
    with df.Session(graph=g, config=df.ConfigProto(memory_budget_bytes=1024)) as sess:
        with pytest.raises(df.errors.ResourceExhaustedError) as info:
            sess.run([y, bump], feed)
    lines = info.value.message.splitlines()
    assert f"op '{largest.producer.name}'" in lines[1]
    assert f"{largest.size} bytes" in lines[1]
    assert "op 'w'" in info.value.message                 # the 128 KiB constant is listed


def test_under_budget_runs_like_no_budget():
    g, x, y, bump, counter, init = _step()
    feed = {x: fresh_rng()[0].standard_normal((32, 64)).astype(np.float32)}
    peak = _peak(g, [y, bump], feed)
    results = []
    for config in (df.ConfigProto(), df.ConfigProto(memory_budget_bytes=peak)):
        with df.Session(graph=g, config=config) as sess:
            sess.run(init)
            out = [sess.run([y, bump], feed) for _ in range(2)]
            results.append((out, sess.run(counter)))
    (plain, plain_counter), (budgeted, budgeted_counter) = results
    for (py, pb), (by, bb) in zip(plain, budgeted):
        np.testing.assert_array_equal(by, py)
        np.testing.assert_array_equal(bb, pb)
    np.testing.assert_array_equal(budgeted_counter, [2.0, 2.0])
    np.testing.assert_array_equal(budgeted_counter, plain_counter)


def test_plan_is_made_once_per_step_and_shapes(monkeypatch):
    g, x, y, bump, _, init = _step()
    calls = _counting_planner(monkeypatch)
    with df.Session(graph=g, config=df.ConfigProto(memory_budget_bytes=BIG)) as sess:
        sess.run(init)
        n_init = len(calls)
        for _ in range(3):
            sess.run([y, bump], {x: np.ones((8, 64), np.float32)})
        assert len(calls) == n_init + 1
        sess.run([y, bump], {x: np.ones((9, 64), np.float32)})     # a new shape: replanned
        assert len(calls) == n_init + 2
        sess.run([y, bump], {x: np.ones((8, 64), np.float32)})     # seen before
        assert len(calls) == n_init + 2
        sess.run(y, {x: np.ones((8, 64), np.float32)})             # another step
        assert len(calls) == n_init + 3


def test_new_feed_shape_rechecks_the_budget(monkeypatch):
    g, x, y, bump, counter, init = _step()
    small = {x: np.ones((4, 64), np.float32)}
    large = {x: np.ones((4096, 64), np.float32)}
    budget = _peak(g, [y, bump], small)
    assert _peak(g, [y, bump], large) > budget
    calls = _counting_planner(monkeypatch)
    with df.Session(graph=g, config=df.ConfigProto(memory_budget_bytes=budget)) as sess:
        sess.run(init)
        sess.run([y, bump], small)
        n = len(calls)
        for _ in range(2):          # refused each time, planned once
            with pytest.raises(df.errors.ResourceExhaustedError, match="exceeded"):
                sess.run([y, bump], large)
        assert len(calls) == n + 1
        sess.run([y, bump], small)
        np.testing.assert_array_equal(sess.run(counter), [2.0, 2.0])


def test_loop_without_trip_count_cannot_be_checked(capfd):
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [8], name="x")
        # The trip count depends on the data: no bound the planner can read.
        h = df.while_loop(lambda h: df.reduce_max(h) > 0.5, lambda h: df.sin(h) * 0.5,
                          [x], name="unbounded")
        (dx,) = df.gradients(df.reduce_sum(h), [x])
        counter = df.Variable(0.0, name="counter")
        bump = df.assign_add(counter, 1.0)
        out = df.Print(dx, [dx], message="STEP-RAN ")
        init = df.global_variables_initializer()
    x0 = np.full(8, 1.5, np.float32)
    feed = {x: x0}
    with df.Session(graph=g, config=df.ConfigProto(memory_budget_bytes=BIG)) as sess:
        sess.run(init)
        capfd.readouterr()
        with pytest.raises(df.errors.InvalidArgumentError) as info:
            sess.run([out, bump], feed)
        assert "STEP-RAN" not in capfd.readouterr().err
        assert float(sess.run(counter)) == 0.0
    message = info.value.message
    assert "budget cannot be checked" in message and "unbounded" in message
    with df.Session(graph=g) as sess:             # without a budget the step runs
        sess.run(init)
        grad, value = np.ones(8), x0.astype(np.float64)
        while value.max() > 0.5:                  # the chain rule through each iteration
            grad, value = grad * np.cos(value) * 0.5, np.sin(value) * 0.5
        np.testing.assert_allclose(sess.run(out, feed), grad, rtol=1e-5)


def test_budget_must_be_a_byte_count():
    with pytest.raises(ValueError, match="memory_budget_bytes"):
        df.ConfigProto(memory_budget_bytes=-1)
    with pytest.raises(ValueError, match="memory_budget_bytes"):
        df.ConfigProto(memory_budget_bytes=1.5)
    assert df.ConfigProto().memory_budget_bytes is None
