"""The cost of a fallback and a graph regeneration (issue 11, branch regen): a
regeneration extends the graph before it when it can (checked against a fresh generation
of the same TraceGraph), keeps the gradient memo and each node's inferred shapes, and
leaves out the ControlTriggers no node needs; results checked against eager execution."""
import numpy as np

import dataflow as df
from dataflow.tracer.coexec import CoRun
from dataflow.tracer.generate import generate
from dataflow.tracer.trace_graph import TraceGraph

# The path each step takes: two tracing calls on one path, a fallback onto the other,
# then both on the graph.
FLAGS = [True, True, False, True, False, False, True, False]


def _branching(mode, xs, w0, seed=None):
    """A write to ``w`` in one case only, between a read of ``w`` every step takes and
    a read after it."""
    with df.eager_mode():
        w = df.Variable(w0)
        total = df.Variable(0.0)

        def step(x, update):
            y = df.reduce_sum(df.matmul(x, w))             # read, every path
            if update:
                w.assign_sub(0.1 * df.transpose(x[:1]))    # write, one case only
            total.assign_add(y)                            # every path
            return y + df.reduce_sum(w.read_value())       # read after the write

        f = df.function(step, mode=mode, ready_order_seed=seed)
        out = [float(f(df.constant(x), flag)) for x, flag in zip(xs, FLAGS)]
        return out, w.numpy(), float(total.numpy()), f


def test_orderings_skip_the_control_trigger_only_when_dead_implies_dead(rng):
    xs = [rng.standard_normal((3, 4)).astype(np.float32) for _ in FLAGS]
    w0 = rng.standard_normal((4, 1)).astype(np.float32)
    want, want_w, want_total, _ = _branching("eager", xs, w0)
    for seed in (None, 0, 1, 2, 3):
        got, got_w, got_total, f = _branching("graph", xs, w0, seed)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got_w, want_w, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(got_total, want_total, rtol=1e-5, atol=1e-5)
        assert f.stats == {"traces": 2, "fallbacks": 1, "graph_steps": 5, "eager_steps": 2}
    ops = f.graph.get_operations()
    assert any(op.type == "Switch" for op in ops)      # a Case Select gates the write
    write = next(op for op in ops if op.type == "AssignSubVariableOp")
    # The read before it runs whenever the write does: a plain control edge.
    assert "ReadVariableOp" in [c.type for c in write._control_inputs]
    # The read after it runs in steps where the write is dead: through a ControlTrigger.
    after = [op for op in ops if op.type == "ReadVariableOp"
             and any(c.type == "ControlTrigger" and c._control_inputs == [write]
                     for c in op._control_inputs)]
    assert len(after) == 1
    # The unconditional accumulator's write needs no trigger either.
    add = next(op for op in ops if op.type == "AssignAddVariableOp")
    assert not [c for c in add._control_inputs if c.type == "ControlTrigger"]


def _guarded_embedding(mode, ids, scales, table0, took=None):
    """An embedding step (its IndexedSlices gradient is recorded op by op, so it and the
    Adam update go through the memo) that skips its update when the loss is too high;
    ``took`` collects the call index of each memo hit."""
    with df.eager_mode():
        table = df.Variable(table0)
        opt = df.train.AdamOptimizer(0.05)
        skipped = []

        def step(i, scale):
            with df.GradientTape() as tape:
                loss = df.reduce_sum(df.square(df.nn.embedding_lookup(table, i) * scale))
            g = tape.gradient(loss, table)
            if loss > 1000.0:
                skipped.append(float(loss))
                return loss
            opt.apply_gradients([(g, table)])
            return loss

        f = df.function(step, mode=mode)
        losses, memos, graphs = [], [], []
        for call, (i, scale) in enumerate(zip(ids, scales)):
            if took is not None:
                took.call = call
            losses.append(float(f(df.constant(i), scale)))
            memos.append(dict(f._gradient_memo) if mode == "graph" else {})
            graphs.append(f.graph)
        f.graphs = graphs
        return losses, table.numpy(), skipped, f, memos


class _Hits(list):
    call = None


def test_the_gradient_memo_survives_a_regeneration(rng, monkeypatch):
    table0 = rng.standard_normal((10, 4)).astype(np.float32)
    ids = [rng.integers(0, 6, 8).astype(np.int32) for _ in range(9)]
    scales = [1.0] * 9
    scales[5] = 100.0                      # one glitched batch: the skipping path
    want, want_table, want_skipped, _, _ = _guarded_embedding("eager", ids, scales, table0)
    took = _Hits()
    take_segment = CoRun._take_segment

    def counting(self, *args):
        took.append(took.call)
        return take_segment(self, *args)

    monkeypatch.setattr(CoRun, "_take_segment", counting)
    got, table, skipped, f, memos = _guarded_embedding("graph", ids, scales, table0, took)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(table, want_table, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(skipped, want_skipped, rtol=1e-5)
    assert len(skipped) == 1
    assert f.stats["fallbacks"] == 1 and f.stats["graph_steps"] == 6
    # Memoised on the first graph step (call 2); the fallback (call 5) regenerated the
    # graph and kept the entries, so the first step on the new graph (call 6) takes
    # the gradient and the update from the memo, as every later one does.
    assert memos[2] and all(memos[c].items() >= memos[2].items() for c in range(2, 9))
    assert sorted(set(took)) == [3, 4, 5, 6, 7, 8]
    assert took.count(6) == took.count(3) == 2          # the gradient and the update


def _signature(step):
    """A generated graph's structure, names aside: per op its type, its inputs' and
    control inputs' types, and the Python side's keys."""
    ops = step.graph.get_operations()
    shape = sorted((op.type, tuple(sorted(t.op.type for t in op.inputs)),
                    tuple(sorted(c.type for c in op._control_inputs))) for op in ops)
    return (shape, sorted(step.feed_keys), sorted(step.fetch_keys),
            sorted(step.edge_selects), sorted(step.written), sorted(step.dynamic),
            len(step.plan.nodes))


def test_a_regeneration_extends_the_graph_before_it_as_a_fresh_one_would_be(rng):
    """The path the fallback adds leaves every edge of the kept nodes as it was: the
    graph before is extended (the same Graph object), and it has the structure a fresh
    generation gives; the losses equal eager's (the test above)."""
    table0 = rng.standard_normal((10, 4)).astype(np.float32)
    ids = [rng.integers(0, 6, 8).astype(np.int32) for _ in range(8)]
    scales = [1.0] * 8
    scales[4] = 100.0
    want = _guarded_embedding("eager", ids, scales, table0)
    got = _guarded_embedding("graph", ids, scales, table0)
    np.testing.assert_allclose(got[0], want[0], rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got[1], want[1], rtol=1e-5, atol=1e-6)
    f = got[3]
    assert f.stats["fallbacks"] == 1
    assert f.graphs[3] is f.graphs[4] is f.graphs[7]            # extended in place
    assert any(op.type == "Switch" for op in f.graph.get_operations())
    fresh = generate(f._tg, df.framework.eager._eager_graph().resources)
    assert fresh.graph is not f.graph
    assert _signature(fresh) == _signature(f._step)


def test_a_kept_edge_that_would_need_a_trigger_gets_a_fresh_graph(rng):
    """The write every traced step made is in one case only once the other path is
    merged, and the read after it in every case: its plain edge would make that read
    dead in steps without the write, so the graph is generated afresh."""
    xs = [rng.standard_normal((3, 4)).astype(np.float32) for _ in FLAGS]
    w0 = rng.standard_normal((4, 1)).astype(np.float32)
    with df.eager_mode():
        w = df.Variable(w0)
        graphs = []

        def step(x, update):
            if update:
                w.assign_sub(0.1 * df.transpose(x[:1]))
            return df.reduce_sum(w.read_value())

        f = df.function(step)
        for x, flag in zip(xs, FLAGS):
            f(df.constant(x), flag)
            graphs.append(f.graph)
    assert f.stats["fallbacks"] == 1
    assert graphs[2] is not graphs[1] and graphs[3] is graphs[2]
    fresh = generate(f._tg, df.framework.eager._eager_graph().resources)
    assert _signature(fresh) == _signature(f._step)


def test_inferred_shapes_are_kept_per_node_and_equal_a_fresh_inference(rng):
    with df.eager_mode():
        w = df.Variable(rng.standard_normal((4, 2)).astype(np.float32))

        def step(x, n):
            h = df.reshape(df.matmul(x, w), [n, -1])    # a shape fed from Python
            return df.reduce_sum(h * 2.0, axis=1)

        f = df.function(step)
        x = df.constant(rng.standard_normal((6, 4)).astype(np.float32))
        want = np.sum(np.reshape(x.numpy() @ w.numpy(), [3, -1]) * 2.0, axis=1)
        for _ in range(3):
            np.testing.assert_allclose(f(x, 3).numpy(), want, rtol=1e-5)
        tg = f._tg
        assert tg.inferred            # filled by the first generation
        kept = generate(tg, df.framework.eager._eager_graph().resources)
        fresh_tg = TraceGraph()
        fresh_tg.__dict__.update({**tg.__dict__, "inferred": {}})
        fresh = generate(fresh_tg, df.framework.eager._eager_graph().resources)
        assert kept.dynamic == fresh.dynamic and kept.dynamic
        assert set(kept.fetch_keys) == set(fresh.fetch_keys)


def _gradient_in_a_case(mode, xs, w0):
    with df.eager_mode():
        w = df.Variable(w0)
        graphs = []

        def step(x, train):
            y = df.reduce_sum(df.matmul(x, w))
            if train:
                with df.GradientTape() as tape:
                    loss = df.reduce_sum(df.square(df.matmul(x, w)))
                w.assign_sub(0.1 * tape.gradient(loss, w))
            return y

        f = df.function(step, mode=mode)
        out = []
        for x, flag in zip(xs, FLAGS):
            out.append(float(f(df.constant(x), flag)))
            graphs.append(f.graph)
        return out, w.numpy(), f, graphs


def test_a_kept_gradient_node_that_comes_under_a_case_gets_its_pivot(rng):
    xs = [rng.standard_normal((3, 4)).astype(np.float32) for _ in FLAGS]
    w0 = rng.standard_normal((4, 2)).astype(np.float32) * 0.5
    want, want_w, _, _ = _gradient_in_a_case("eager", xs, w0)
    got, got_w, f, graphs = _gradient_in_a_case("graph", xs, w0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_w, want_w, rtol=1e-5, atol=1e-6)
    assert f.stats == {"traces": 2, "fallbacks": 1, "graph_steps": 5, "eager_steps": 2}
    assert graphs[2] is graphs[1]                       # extended
    pivot = next(op for op in f.graph.get_operations() if op.name.endswith("/pivot"))
    outs = [op for op in f.graph.get_operations() if "/out_" in op.name]
    assert outs and all(pivot in op._control_inputs for op in outs)
    fresh = generate(f._tg, df.framework.eager._eager_graph().resources)
    assert _signature(fresh) == _signature(f._step)
