"""Random ops: the documented Philox streams (checked against NumPy's Philox directly),
distributions, TF1's seed rules, per-run state, and that no graph pass folds, fuses or
merges a random op."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dataflow as df
from dataflow.framework.random_seed import DEFAULT_GRAPH_SEED, get_seed


def _philox(seed, seed2, n=0):
    """The generator the docs promise for execution ``n`` of an op seeded (seed, seed2)."""
    return np.random.Generator(np.random.Philox(
        counter=np.array([0, 0, 0, n], np.uint64), key=np.array([seed, seed2], np.uint64)))


shapes = st.lists(st.integers(0, 4), min_size=0, max_size=3)


@settings(max_examples=25, deadline=None)
@given(shape=shapes, seed=st.integers(1, 2 ** 31 - 2), lo=st.floats(-5, 5, allow_subnormal=False),
       width=st.floats(0.5, 5), dtype=st.sampled_from([np.float32, np.float64]))
def test_random_uniform_is_the_documented_philox_stream(shape, seed, lo, width, dtype):
    with df.Graph().as_default():
        u = df.random_uniform(shape, lo, lo + width, dtype=dtype, seed=seed)
        with df.Session() as sess:
            got = [sess.run(u) for _ in range(2)]
    d = df.as_dtype(dtype)
    for n in range(2):
        raw = _philox(DEFAULT_GRAPH_SEED, seed, n).random(tuple(shape), dtype=dtype)
        want = raw * (dtype(lo + width) - dtype(lo)) + dtype(lo)
        assert got[n].dtype == d.as_numpy_dtype and got[n].shape == tuple(shape)
        np.testing.assert_allclose(got[n], want, rtol=1e-6)


@settings(max_examples=25, deadline=None)
@given(shape=shapes, seed=st.integers(1, 1000), mean=st.floats(-3, 3, allow_subnormal=False),
       std=st.floats(0.1, 3))
def test_random_normal_is_the_documented_philox_stream(shape, seed, mean, std):
    with df.Graph().as_default():
        df.set_random_seed(seed)
        x = df.random_normal(shape, mean, std, dtype=df.float64)
        op = x.op.inputs[0].op.inputs[0].op
        assert op.type == "RandomStandardNormal"
        # TF1's rule: no op seed under a graph seed -> the number of ops made so far.
        assert (op.get_attr("seed"), op.get_attr("seed2")) == (seed, 3)
        with df.Session() as sess:
            got = sess.run(x)
    want = _philox(seed, 3).standard_normal(tuple(shape)) * std + mean
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)


@settings(max_examples=25, deadline=None)
@given(lo=st.integers(-50, 50), width=st.integers(1, 60), seed=st.integers(1, 99),
       dtype=st.sampled_from([df.int32, df.int64]))
def test_random_uniform_int_matches_numpy_integers(lo, width, seed, dtype):
    with df.Graph().as_default():
        k = df.random_uniform([3, 5], lo, lo + width, dtype=dtype, seed=seed)
        assert k.op.type == "RandomUniformInt" and k.dtype is dtype and k.shape == [3, 5]
        with df.Session() as sess:
            got = sess.run(k)
    want = _philox(DEFAULT_GRAPH_SEED, seed).integers(lo, lo + width, (3, 5),
                                                      dtype=dtype.as_numpy_dtype)
    np.testing.assert_array_equal(got, want)


def test_distributions(graph):
    df.set_random_seed(7)
    n = 200_000
    u = df.random_uniform([n], -2.0, 3.0)
    z = df.random_normal([n], 1.0, 2.0)
    t = df.truncated_normal([n], 0.0, 1.0, dtype=df.float64)
    k = df.random_uniform([n], 0, 5, dtype=df.int64)
    h = df.random_normal([1000], dtype=df.float16)
    with df.Session() as sess:
        u, z, t, k, h = sess.run([u, z, t, k, h])
    assert u.min() >= -2 and u.max() < 3 and abs(u.mean() - 0.5) < 0.02
    assert abs(z.mean() - 1) < 0.02 and abs(z.std() - 2) < 0.02
    # Truncated at 2 standard deviations: the standard deviation is TF's 0.87962566...
    assert np.abs(t).max() <= 2 and abs(t.std() - 0.87962566103423978) < 0.005
    assert sorted(np.unique(k)) == [0, 1, 2, 3, 4]
    assert abs(np.bincount(k) / n - 0.2).max() < 0.01
    assert h.dtype == np.float16


def test_random_shuffle_permutes_the_first_dimension(graph):
    value = np.arange(24).reshape(6, 4)
    s = df.random_shuffle(value, seed=3)
    assert s.shape == [6, 4] and s.dtype is df.int64
    with df.Session() as sess:
        runs = [sess.run(s) for _ in range(5)]
    for r in runs:
        np.testing.assert_array_equal(np.sort(r[:, 0]), value[:, 0])
        np.testing.assert_array_equal(r - r[:, :1], value - value[:, :1])  # rows intact
    assert len({r.tobytes() for r in runs}) > 1


def test_multinomial_frequencies_follow_softmax(graph):
    logits = np.log(np.array([[0.1, 0.2, 0.7], [0.5, 0.5, 0.0]]))
    idx = df.multinomial(logits, 20000, seed=1)
    cat = df.random.categorical(logits.astype(np.float32), 4, dtype=df.int32)
    assert idx.dtype is df.int64 and idx.shape == [2, 20000]
    assert cat.dtype is df.int32 and cat.shape == [2, 4]
    with df.Session() as sess:
        got, c = sess.run([idx, cat])
    freq0 = np.bincount(got[0], minlength=3) / 20000
    np.testing.assert_allclose(freq0, [0.1, 0.2, 0.7], atol=0.015)
    assert 2 not in got[1]  # probability 0 (logit -inf) is never drawn
    assert c.min() >= 0 and c.max() <= 2


def test_seed_rules(graph):
    assert get_seed(None) == (None, None)
    assert get_seed(5) == (DEFAULT_GRAPH_SEED, 5)
    df.set_random_seed(0)
    assert get_seed(0) == (0, 2 ** 31 - 1)  # (0, 0) would mean "unseeded"
    df.set_random_seed(11)
    df.constant(1.0)
    assert get_seed(None) == (11, 1)
    assert get_seed(4) == (11, 4)


def _run_twice_in_new_sessions(make):
    """Values of two runs in each of two new Sessions of a graph built by ``make``."""
    out = []
    for _ in range(2):
        with df.Graph().as_default():
            t = make()
            with df.Session() as sess:
                out.append([sess.run(t) for _ in range(2)])
    return out


@pytest.mark.parametrize("graph_seed,op_seed,reproducible", [
    (1, None, True), (None, 3, True), (1, 3, True), (None, None, False)])
def test_sequences_repeat_in_new_sessions_only_when_seeded(graph_seed, op_seed,
                                                           reproducible):
    def make():
        if graph_seed is not None:
            df.set_random_seed(graph_seed)
        return df.random_uniform([8], seed=op_seed)
    (a1, a2), (b1, b2) = _run_twice_in_new_sessions(make)
    assert not np.array_equal(a1, a2)  # state advances run after run
    assert np.array_equal(a1, b1) == reproducible
    assert np.array_equal(a2, b2) == reproducible


def test_a_fresh_op_without_seed_differs_and_equal_seeds_agree(graph):
    df.set_random_seed(2)
    a = df.random_normal([6])
    b = df.random_normal([6])  # another op seed: another sequence
    c = df.random_normal([6], seed=9)
    d = df.random_normal([6], seed=9)  # same (graph, op) seeds: the same sequence, as TF
    with df.Session() as sess:
        a, b, c, d = sess.run([a, b, c, d])
    assert not np.array_equal(a, b)
    np.testing.assert_array_equal(c, d)


def test_state_survives_plan_rebuilds_and_is_per_session(graph):
    df.set_random_seed(4)
    u = df.random_uniform([3])
    other = u * 2.0
    with df.Session() as sess:
        first = sess.run(u)
        second = sess.run(other) / 2.0  # another fetch set: another plan, same stream
        third = sess.run(u)
    with df.Session() as sess:
        again = [sess.run(u) for _ in range(3)]
    np.testing.assert_allclose([first, second, third], again, rtol=1e-6)
    assert not np.allclose(first, second)


@pytest.mark.parametrize("compiled", [True, False])
def test_random_ops_are_not_folded_fused_or_merged(graph, compiled):
    df.set_random_seed(5)
    x = df.random_uniform([4])
    y = df.random_uniform([4])  # identical except its seed2
    z = df.random_uniform([4], seed=1)
    w = df.random_uniform([4], seed=1)  # identical ops, seeds included: still two draws
    chain = df.tanh(x * 2.0 + 1.0)  # an elementwise chain the fusion pass may take
    config = df.ConfigProto(use_compiled_kernels=compiled)
    with df.Session(config=config) as sess:
        x1, y1, c1, z1, w1 = sess.run([x, y, chain, z, w])
        z2, w2 = sess.run([z, w])
        c2, x2 = sess.run([chain, x])
    assert not np.array_equal(x1, y1)
    np.testing.assert_array_equal(z1, w1)
    assert not np.array_equal(z1, z2) and np.array_equal(z2, w2)
    np.testing.assert_allclose(c1, np.tanh(x1 * 2 + 1), rtol=1e-5)
    # The third run draws x's third value, shared by the chain and the fetch of x.
    np.testing.assert_allclose(c2, np.tanh(x2 * 2 + 1), rtol=1e-5)
    assert not np.array_equal(x1, x2)


def test_random_op_in_a_loop_draws_every_iteration(graph):
    df.set_random_seed(8)

    def body(i, acc):
        return i + 1, df.concat([acc, df.random_uniform([1])], 0)
    _, draws = df.while_loop(lambda i, a: i < 5, body,
                             (0, df.zeros([0])),
                             shape_invariants=(df.TensorShape([]), df.TensorShape([None])))
    with df.Session() as sess:
        d = sess.run(draws)
    assert d.shape == (5,) and len(np.unique(d)) == 5


def test_dropout(graph):
    df.set_random_seed(3)
    x = df.ones([100, 100])
    d1 = df.nn.dropout(x, keep_prob=0.8)
    d2 = df.nn.dropout(x, rate=0.25)
    d3 = df.nn.dropout(x, rate=0.5, noise_shape=[100, 1])
    p = df.placeholder(df.float32, [])
    d4 = df.nn.dropout(x, keep_prob=p)
    assert df.nn.dropout(x, rate=0.0) is x
    with df.Session() as sess:
        a, b, c = sess.run([d1, d2, d3])
        e = sess.run(d4, {p: 0.5})
    assert set(np.unique(a)) == {0.0, np.float32(1 / 0.8)}
    assert abs((a == 0).mean() - 0.2) < 0.02
    assert set(np.unique(b)) == {0.0, np.float32(1 / 0.75)}
    assert abs((b == 0).mean() - 0.25) < 0.02
    assert all(len(np.unique(row)) == 1 for row in c)  # one draw per row
    assert set(np.unique(e)) == {0.0, 2.0}
    with pytest.raises(ValueError, match="keep_prob"):
        df.nn.dropout(x, keep_prob=1.5)
    with pytest.raises(ValueError, match="rate"):
        df.nn.dropout(x, rate=1.0)
    with pytest.raises(ValueError, match="exactly one"):
        df.nn.dropout(x)


def test_dropout_gradient_is_the_mask_times_the_scale(graph):
    df.set_random_seed(1)
    x = df.placeholder(df.float64, [50])
    y = df.nn.dropout(x, rate=0.3)
    (g,) = df.gradients(df.reduce_sum(y * 3.0), [x])
    with df.Session() as sess:
        yv, gv = sess.run([y, g], {x: np.ones(50)})
    np.testing.assert_allclose(gv, 3.0 * yv)  # y = mask / 0.7 for x = 1


def test_random_ops_have_no_gradient_to_their_shape_or_bounds(graph):
    lo = df.placeholder(df.float32, [])
    u = df.random_uniform([3], lo, 5.0)
    mean = df.placeholder(df.float32, [])
    z = df.random_normal([3], mean, 2.0)
    g_lo, g_mean = df.gradients([df.reduce_sum(u), df.reduce_sum(z)], [lo, mean])
    with df.Session() as sess:
        gl, gm = sess.run([g_lo, g_mean], {lo: 1.0, mean: 0.0})
    # u = r * (5 - lo) + lo: d/dlo = sum(1 - r); z = r * 2 + mean: d/dmean = 3.
    assert 0 < gl < 3 and gm == 3.0


def test_errors_name_the_op(graph):
    with pytest.raises(ValueError, match="maxval"):
        df.random_uniform([2], dtype=df.int32)
    with pytest.raises(TypeError, match="int32"):
        df.random_normal([2], dtype=df.int32)
    shape = df.placeholder(df.int32, [None])
    u = df.random_uniform(shape, 3, 3, dtype=df.int32, name="bad")
    r = df.random_normal(shape)
    with df.Session() as sess:
        with pytest.raises(df.errors.InvalidArgumentError, match="minval < maxval") as e:
            sess.run(u, {shape: [2]})
        assert e.value.op.name == "bad"
        with pytest.raises(df.errors.InvalidArgumentError, match="non-negative"):
            sess.run(r, {shape: [-1]})


def test_concurrent_runs_take_distinct_executions_of_the_stream(graph):
    import threading
    u = df.random_uniform([4], seed=12)
    with df.Session() as sess:
        results, lock = [], threading.Lock()

        def worker():
            for _ in range(25):
                value = sess.run(u)
                with lock:
                    results.append(value.tobytes())
        threads = [threading.Thread(target=worker) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    want = {_philox(DEFAULT_GRAPH_SEED, 12, n).random(4, dtype=np.float32).tobytes()
            for n in range(100)}
    assert len(results) == 100 and set(results) == want


def test_parallel_loop_iterations_draw_each_execution_once(graph):
    def body(i, acc):
        return i + 1, acc + df.reduce_sum(df.random_uniform([3], dtype=df.float64, seed=2))
    _, total = df.while_loop(lambda i, a: i < 20, body, (0, df.constant(0.0, df.float64)),
                             parallel_iterations=10)
    with df.Session() as sess:
        got = sess.run(total)
    want = sum(_philox(DEFAULT_GRAPH_SEED, 2, n).random(3).sum() for n in range(20))
    assert got == pytest.approx(want, rel=1e-12)


def test_process_mode_continues_streams_across_worker_reforks(graph):
    df.set_random_seed(1)
    with df.device("/cpu:0"):
        u = df.random_uniform([3])
    with df.device("/cpu:1"):
        w = u * 2.0
    config = df.ConfigProto(partition_mode="processes", device_count={"CPU": 2})
    with df.Session(config=config) as sess:
        # Each new fetch set forks new workers; the streams go on where they were.
        got = [sess.run(u), sess.run(w) / 2.0, sess.run(u), sess.run([u, w])[0]]
    with df.Session() as sess:
        want = [sess.run(u) for _ in range(4)]
    np.testing.assert_allclose(got, want, rtol=1e-6)
