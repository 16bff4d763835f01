"""Input Feeding in df.function's generated graph (issue 11, branch trecv): one ``_Recv``
per distinct fed Python value, shared by all its consumers, with the deadlock rule's
edges and the values the graph computes unchanged."""
import random

import numpy as np

import dataflow as df
from dataflow.tracer import generate as gen


def _recv_consumers(graph) -> dict:
    """``_Recv`` op -> the ops that read its value."""
    recvs = {op: [] for op in graph.get_operations() if op.type == "_Recv"}
    for op in graph.get_operations():
        for t in op.inputs:
            if t.op in recvs:
                recvs[t.op].append(op)
    return recvs


def _scaled(mode, xs, scales, w0):
    """One Python tensor (``scale``) fed to three ops, ``x`` to two."""
    with df.eager_mode():
        w = df.Variable(w0)

        def step(x, scale):
            y = df.matmul(x, w) * scale
            z = df.square(y) * scale
            w.assign_sub(df.matmul(x, y + z, transpose_a=True) * scale)
            return df.reduce_sum(z)

        f = df.function(step, mode=mode)
        out = [float(f(df.constant(x), df.constant(s))) for x, s in zip(xs, scales)]
        return out, w.numpy(), f


def test_a_value_fed_to_several_consumers_gets_one_recv_and_equals_eager(rng, monkeypatch):
    xs = [rng.standard_normal((6, 4)).astype(np.float32) for _ in range(6)]
    scales = rng.uniform(0.01, 0.1, size=6).astype(np.float32)   # another value each step
    w0 = rng.standard_normal((4, 4)).astype(np.float32) * 0.3
    want, want_w, _ = _scaled("eager", xs, scales, w0)
    got, got_w, f = _scaled("graph", xs, scales, w0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_w, want_w, rtol=1e-5, atol=1e-6)
    assert f.stats == {"traces": 1, "fallbacks": 0, "graph_steps": 4, "eager_steps": 2}
    readers = sorted(len(ops) for ops in _recv_consumers(f.graph).values())
    assert readers == [2, 3]                 # x read twice, scale three times
    # Without sharing, one _Recv per consumer, and the same values.
    monkeypatch.setattr(gen, "_share_key", lambda *args: None)
    got2, got_w2, f2 = _scaled("graph", xs, scales, w0)
    assert sorted(len(ops) for ops in _recv_consumers(f2.graph).values()) == [1] * 5
    np.testing.assert_allclose(got2, got, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(got_w2, got_w, rtol=1e-6, atol=1e-7)


def _two_factors(mode, xs):
    with df.eager_mode():
        def step(x, a, b):
            return df.reduce_sum(x * a + df.square(x) * b)

        one = df.constant(np.float32(0.5))
        equal = df.constant(np.float32(0.5))      # another object, the same value
        calls = ([(x, one, one) for x in xs[:4]] + [(xs[4], one, equal)]
                 + [(x, df.constant(np.float32(0.5)), df.constant(np.float32(2.0)))
                    for x in xs[5:]])
        f = df.function(step, mode=mode)
        return [float(f(df.constant(x), a, b)) for x, a, b in calls], f


def test_inputs_fed_one_tensor_while_tracing_and_two_later_fall_back_once(rng):
    xs = [rng.standard_normal(5).astype(np.float32) for _ in range(9)]
    want, _ = _two_factors("eager", xs)
    got, f = _two_factors("graph", xs)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    # a and b shared one _Recv until they carried different values: one fallback (the
    # equal values in step 5 ran on the graph), then a graph feeding them apart (the
    # same path: no new trace counted).
    assert f.stats == {"traces": 1, "fallbacks": 1, "graph_steps": 6, "eager_steps": 2}
    assert sorted(len(ops) for ops in _recv_consumers(f.graph).values()) == [1, 1, 2]


def test_a_value_fed_again_after_a_fetch_keeps_its_deadlock_edge():
    """The paper's Figure 5 with the fed constant used again after Python read a value:
    the later use cannot share the earlier ``_Recv`` (Python read ``y`` in between), so
    it gets its own, ordered after that fetch; no ready order hangs."""
    def program(x):
        k = df.constant(np.float32(random.random()))
        y = x * k
        v = float(df.reduce_sum(y))            # Output Fetching
        return y * k + v

    for seed in range(12):
        random.seed(seed)
        with df.eager_mode():
            xs = [df.constant(np.arange(3, dtype=np.float32) + i) for i in range(5)]
            want = [program(x).numpy() for x in xs]
            random.seed(seed)
            f = df.function(program, ready_order_seed=seed)
            got = [f(x).numpy() for x in xs]
        np.testing.assert_allclose(got, want, rtol=1e-6)
        assert f.stats["graph_steps"] == 3 and f.stats["fallbacks"] == 0
        recvs = _recv_consumers(f.graph)
        fetch = next(op for op in f.graph.get_operations() if op.type == "_Send")
        late = [r for r, ops in recvs.items() if fetch in r.control_inputs]
        # x's and k's first _Recv before the fetch; k's second and v's after it.
        assert len(recvs) == 4 and len(late) == 2


def _adam(mode, xs, w0, b0):
    with df.eager_mode():
        w, b = df.Variable(w0), df.Variable(b0)
        opt = df.train.AdamOptimizer(learning_rate=0.05)

        def step(x):
            with df.GradientTape() as tape:
                loss = df.reduce_sum(df.square(df.matmul(x, w) + b))
            grads = tape.gradient(loss, [w, b])
            opt.apply_gradients(zip(grads, [w, b]))
            return loss

        f = df.function(step, mode=mode)
        return [float(f(df.constant(x))) for x in xs], w.numpy(), b.numpy(), f


def test_adam_updates_of_two_variables_share_the_hyper_parameters_recvs(rng):
    xs = [rng.standard_normal((8, 3)).astype(np.float32) for _ in range(8)]
    w0 = rng.standard_normal((3, 2)).astype(np.float32)
    b0 = rng.standard_normal(2).astype(np.float32)
    want, want_w, want_b, _ = _adam("eager", xs, w0, b0)
    got, got_w, got_b, f = _adam("graph", xs, w0, b0)
    np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_allclose(got_w, want_w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_b, want_b, rtol=1e-5, atol=1e-6)
    assert f.stats["graph_steps"] == 6 and f.stats["fallbacks"] == 0
    updates = [op for op in f.graph.get_operations() if op.type == "ResourceApplyAdam"]
    assert len(updates) == 2
    fed = [[t.op for t in op.inputs if t.op.type == "_Recv"] for op in updates]
    assert fed[0] and fed[0] == fed[1]      # the same _Recv ops feed both updates
