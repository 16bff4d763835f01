"""Planned steps without control flow run as a flat list of kernel calls
(dataflow/runtime/flat_schedule.py), and the plan models the runtime's own bytes
(``MemoryPlan.runtime_bytes``) so that max batch runs under its budget as measured."""
from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import dataflow as df
from benchmarks.memory import measure_step_peak
from dataflow.memory import arena as arena_mod
from dataflow.runtime.feeds import convert_feeds, feed_templates
from dataflow.runtime.flat_schedule import FlatSchedule
from dataflow.runtime.memory_arena import ArenaExecutor
from tests.op_harness import fresh_rng
from tests.test_memory_arena import _mlp, _rnn_grad

UNFUSED = df.ConfigProto(fuse_elementwise=False, compile_loops=False)


def _steps(sess):
    """The arena steps a plan_memory session built, in build order."""
    return [step for _plan, step in sess._arena.steps.values()]


def _no_flat_schedules(monkeypatch):
    """Arena steps built from now on run on the ArenaExecutor (the step before this
    change)."""
    monkeypatch.setattr(FlatSchedule, "build", classmethod(lambda cls, *a: None))


def _train(g, fetches, init, feed, variables, steps, config, monkeypatch=None):
    with df.Session(graph=g, config=config) as sess:
        if monkeypatch is not None:
            with monkeypatch.context() as m:
                _no_flat_schedules(m)
                sess.run(init)
                losses = [sess.run(fetches, feed)[1]]   # builds the step's arena
        else:
            sess.run(init)
            losses = [sess.run(fetches, feed)[1]]
        losses += [sess.run(fetches, feed)[1] for _ in range(steps - 1)]
        flat = [s.flat is not None for s in _steps(sess)] if sess._arena else []
        return losses, sess.run(variables), flat


@pytest.mark.parametrize("compiled", [True, False])
def test_flat_schedule_is_bit_identical_to_the_executor_and_the_unplanned_run(
        compiled, monkeypatch):
    """An Adam MLP trained four steps: the flat schedule, the plan-ordered executor on
    the same plan, and the unplanned run give the same losses and variables, bit for
    bit."""
    rng, _ = fresh_rng()
    g, fetches, init, feed, variables = _mlp(rng, sizes=(64, 128, 10), batch=200)
    base = dict(use_compiled_kernels=compiled, fuse_elementwise=False)
    loss0, vars0, _ = _train(g, fetches, init, feed, variables, 4, df.ConfigProto(**base))
    planned = df.ConfigProto(plan_memory=True, **base)
    loss1, vars1, flat1 = _train(g, fetches, init, feed, variables, 4, planned)
    loss2, vars2, flat2 = _train(g, fetches, init, feed, variables, 4, planned, monkeypatch)
    assert flat1 == [True, True] and flat2 == [False, False]
    assert [float(v) for v in loss0] == [float(v) for v in loss1] == [float(v) for v in loss2]
    for a, b, c in zip(vars0, vars1, vars2):
        np.testing.assert_array_equal(a, b, strict=True)
        np.testing.assert_array_equal(a, c, strict=True)


def _recording(step, calls):
    """Make every kernel of ``step`` append its gid to ``calls`` (both runners read
    ``step.node_tuples``; the flat schedule its entries)."""
    def wrap(gid, fn):
        def kernel(*args):
            calls.append(gid)
            return fn(*args)
        return kernel
    step.node_tuples = [n[:4] + (wrap(gid, n[4]),) + n[5:] if n[4] is not None else n
                        for gid, n in enumerate(step.node_tuples)]
    if step.flat is not None:
        step.flat.entries = [(wrap(e[6], e[0]),) + e[1:] for e in step.flat.entries]


def test_flat_schedule_calls_the_kernels_in_the_plans_order():
    """The flat schedule and the plan-ordered executor call the same kernels in the same
    order, the memory plan's, and give the same values (the MLP's loss and gradients)."""
    rng, _ = fresh_rng()
    g, fetches, init, feed, _variables = _mlp(rng, sizes=(32, 16, 10), batch=20)
    with g.as_default():
        variables = df.trainable_variables()
        grads = df.gradients(fetches[1], variables)
    with df.Session(graph=g, config=df.ConfigProto(plan_memory=True)) as sess:
        sess.run(init)
        sess.run([fetches[1]] + grads, feed)
        (plan, step), = [v for v in sess._arena.steps.values() if v[0].fetches]
        calls = []
        _recording(step, calls)
        flat_out = step.flat.run(_feeds(g, feed))
        flat_calls = calls[:]
        calls.clear()
        executor_out = _executor_run(plan, step, _feeds(g, feed))
    assert flat_calls == calls
    assert flat_calls == sorted(flat_calls, key=step.times.__getitem__)
    assert len(flat_calls) == step.flat.calls > 20
    assert len(flat_out) == len(executor_out) == 1 + len(variables)
    for a, b in zip(flat_out, executor_out):
        np.testing.assert_array_equal(a, b, strict=True)


def _feeds(g, feed):
    """The fed values in the order the Session's plans take them."""
    return convert_feeds(g, feed)[1]


def _executor_run(plan, step, feed_values):
    """The plan-ordered executor on the same arena step (its kernels record too)."""
    flat, step.flat = step.flat, None
    try:
        return ArenaExecutor(plan, step, feed_templates(plan, feed_values)).run()
    finally:
        step.flat = flat


def _random_dag(rng, ops=12, n=48):
    """A random loop-free graph over float64 vectors of ``n`` and ``n x n`` matrices:
    unary, binary, matmul, reduce and broadcast ops, some intermediate values fetched."""
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float64, [n], name="x")
        m = df.placeholder(df.float64, [n, n], name="m")
        vecs, mats = [x], [m]
        for _ in range(ops):
            kind = rng.integers(0, 6)
            a = vecs[rng.integers(len(vecs))]
            b = vecs[rng.integers(len(vecs))]
            if kind == 0:
                vecs.append(df.tanh(a))
            elif kind == 1:
                vecs.append(a * b + 0.25)
            elif kind == 2:
                mats.append(df.sin(mats[rng.integers(len(mats))]) - a)
            elif kind == 3:
                mats.append(df.matmul(mats[rng.integers(len(mats))],
                                      mats[rng.integers(len(mats))]) * 0.01)
            elif kind == 4:
                vecs.append(df.reduce_sum(mats[rng.integers(len(mats))], axis=0) * 0.1 + a)
            else:
                vecs.append(df.exp(-df.abs(a)) - b)
        values = vecs[1:] + mats[1:]
        picked = rng.choice(len(values), size=min(3, len(values)), replace=False)
        fetches = [values[i] for i in picked] + [df.reduce_sum(vecs[-1])]
    feed = {x: rng.standard_normal(n), m: rng.standard_normal((n, n))}
    return g, fetches, feed


def test_no_two_live_values_overlap_on_random_loop_free_graphs():
    """60 random loop-free graphs run by their flat schedules with the overlap checker
    on: no value is read after another value overwrote its bytes, and the fetched values
    equal the unplanned run's."""
    rng, _ = fresh_rng()
    reads = 0
    for _ in range(60):
        g, fetches, feed = _random_dag(rng, ops=int(rng.integers(4, 20)))
        with df.Session(graph=g, config=UNFUSED) as sess:
            expected = sess.run(fetches, feed)
        with df.Session(graph=g, config=df.ConfigProto(plan_memory="check")) as sess:
            for _ in range(2):
                got = sess.run(fetches, feed)
                for a, b in zip(expected, got):
                    np.testing.assert_array_equal(a, b, strict=True)
            (step,) = _steps(sess)
            assert step.flat is not None
            reads += step.checker.reads
    assert reads > 300


def test_flat_schedule_error_names_the_node():
    g = df.Graph()
    with g.as_default():
        params = df.placeholder(df.float32, [4], name="params")
        idx = df.placeholder(df.int32, [2], name="idx")
        out = df.gather(df.tanh(params), idx, name="pick")
    with df.Session(graph=g, config=df.ConfigProto(plan_memory=True)) as sess:
        np.testing.assert_array_equal(
            sess.run(out, {params: np.zeros(4, np.float32), idx: np.array([1, 2], np.int32)}),
            np.zeros(2, np.float32))
        assert _steps(sess)[0].flat is not None
        with pytest.raises(df.errors.InvalidArgumentError, match="pick"):
            sess.run(out, {params: np.zeros(4, np.float32), idx: np.array([1, 9], np.int32)})


def test_control_flow_and_an_order_against_the_graph_get_no_flat_schedule():
    """A cond or a loop runs on the executor; a flat schedule is refused for an order
    that puts a node before what it reads."""
    rng, _ = fresh_rng()
    g, fetches, feed = _rnn_grad(rng, steps=3)
    with df.Session(graph=g, config=df.ConfigProto(plan_memory=True)) as sess:
        sess.run(fetches, feed)
        assert [s.flat for s in _steps(sess)] == [None]
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [8], name="x")
        p = df.placeholder(df.bool, [], name="p")
        y = df.cond(p, lambda: df.tanh(x), lambda: x * 2.0)
    with df.Session(graph=g, config=df.ConfigProto(plan_memory=True)) as sess:
        assert sess.run(y, {x: np.ones(8, np.float32), p: False}).tolist() == [2.0] * 8
        assert [s.flat for s in _steps(sess)] == [None]
    g, fetches, init, feed, _variables = _mlp(rng, sizes=(8, 4, 2), batch=3)
    with df.Session(graph=g, config=df.ConfigProto(plan_memory=True)) as sess:
        sess.run(init)
        sess.run(fetches, feed)
        plan, step = list(sess._arena.steps.values())[-1]
        assert FlatSchedule.build(plan, step.node_tuples, step.times) is not None
        backwards = [-t for t in step.times]
        assert FlatSchedule.build(plan, step.node_tuples, backwards) is None


# -- the runtime's own bytes ----------------------------------------------------------------

def _chain(n_ops, size=1000):
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [size], name="x")
        h = x
        for i in range(n_ops):
            h = df.tanh(h) * 1.5 if i % 2 else df.sin(h) + 0.5
        out = df.reduce_sum(h)
    return g, out, None, {x: np.ones(size, np.float32)}


def _workloads(rng):
    g, fetches, init, feed, _v = _mlp(rng, sizes=(64, 64, 10), batch=500)
    yield "adam mlp", g, fetches, init, feed
    for n in (2, 60):
        g, out, init, feed = _chain(n)
        yield f"chain of {2 * n} ops", g, out, init, feed
    for steps in (3, 30):
        g, fetches, feed = _rnn_grad(rng, steps=steps, batch=8, hidden=32)
        yield f"rnn T={steps}", g, fetches, None, feed


def test_runtime_bytes_bound_what_a_planned_step_allocates_besides_its_values():
    """What a planned step allocates beyond the plan's values (the scratch of its
    kernels, its stacks, its fetched values) is at most the plan's ``runtime_bytes``,
    and not far under it (the model is calibrated, not padded): Adam MLP and chains
    (flat schedules), loops with stacks (the executor)."""
    rng, _ = fresh_rng()
    for name, g, fetch, init, feed in _workloads(rng):
        p = df.memory.plan(fetch, feed_dict=feed, graph=g)
        with df.Session(graph=g, config=df.ConfigProto(plan_memory=True)) as sess:
            if init is not None:
                sess.run(init)
            transient = measure_step_peak(sess, fetch, feed)
        values = p.scratch_bytes + p.stack_bytes_for() + p.zones["fetches"]
        own = transient - values
        assert 0 < own <= p.runtime_bytes <= own + 4096 + own // 4, (name, own, p.runtime_bytes)


def test_history_pushes_compare_values_in_small_slices():
    """A loop variable's second push finds the first push's copy by comparing values in
    slices: the same answer as np.array_equal (a difference in the last slice, -0.0 and
    0.0, NaN, a transposed operand) with a temporary of at most one slice's booleans."""
    rng, _ = fresh_rng()
    a = rng.standard_normal(10_000).astype(np.float32)
    b = a.copy()
    assert arena_mod._same_values(a, b)
    b[-1] += 1.0
    assert not arena_mod._same_values(a, b)
    zeros = np.zeros(5000)
    assert arena_mod._same_values(zeros, -zeros) == np.array_equal(zeros, -zeros)
    nan = np.full(3000, np.nan)
    assert arena_mod._same_values(nan, nan.copy()) == np.array_equal(nan, nan.copy())
    m = rng.standard_normal((300, 200))
    assert arena_mod._same_values(m.T, m.T.copy()) and not arena_mod._same_values(m.T, m.T + 1)
    big = rng.standard_normal(1_000_000)
    other = big.copy()
    tracemalloc.start()
    try:
        tracemalloc.reset_peak()
        assert arena_mod._same_values(big, other)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert peak < 4 * arena_mod._COMPARE_CHUNK, peak


def test_max_batch_runs_under_its_budget_as_measured():
    """The batch max_batch_size returns runs from its plan within the budget as
    measured (arena + the step's peak + the feeds and variables it holds), and the next
    batch's plan is over it: an Adam MLP and a loop gradient (stacks)."""
    rng, _ = fresh_rng()
    g, fetches, init, feed, _variables = _mlp(rng, sizes=(64, 64, 10), batch=1)
    x, y = list(feed)
    w = rng.standard_normal((32, 32)).astype(np.float32)
    gr = df.Graph()
    with gr.as_default():
        wt = df.placeholder(df.float32, [32, 32], name="w")
        xt = df.placeholder(df.float32, [None, 32], name="x")
        _, h = df.while_loop(lambda i, h: i < 20,
                             lambda i, h: (i + 1, df.tanh(df.matmul(h, wt) + xt)),
                             (0, df.zeros_like(xt)))
        (dw,) = df.gradients(df.reduce_sum(h), [wt])
    cases = [(g, fetches, init, {x: [None, 64], y: [None, 10]}, 1 << 20,
              lambda b: {x: rng.standard_normal((b, 64)).astype(np.float32),
                         y: np.eye(10, dtype=np.float32)[rng.integers(0, 10, b)]}),
             (gr, dw, None, {wt: [32, 32], xt: [None, 32]}, 2 << 20,
              lambda b: {wt: w, xt: rng.standard_normal((b, 32)).astype(np.float32)})]
    for graph, fetch, init_op, shapes, budget, feed_of in cases:
        b = df.memory.max_batch_size(fetch, shapes, budget, graph=graph)
        feed_b = feed_of(b)
        plan_b = df.memory.plan(fetch, feed_dict=feed_b, graph=graph)
        plan_next = df.memory.plan(fetch, feed_dict=feed_of(b + 1), graph=graph)
        assert plan_b.peak_bytes <= budget < plan_next.peak_bytes
        config = df.ConfigProto(plan_memory=True, memory_budget_bytes=budget)
        with df.Session(graph=graph, config=config) as sess:
            if init_op is not None:
                sess.run(init_op)
            transient = measure_step_peak(sess, fetch, feed_b)
            arena = _steps(sess)[-1].arena.nbytes
        held = sum(v.nbytes for v in feed_b.values()) + plan_b.zones["variables"]
        assert b > 10 and arena + transient + held <= budget, (b, arena + transient + held)
