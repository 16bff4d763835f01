"""Initializers: exact values from the documented Philox stream, TF1's scale formulas
(checked against statistics of TF's own draws in tf_reference/init_stats.json), the
orthogonal initializer and the Qr op it uses (values and gradient)."""
from __future__ import annotations

import json
import math
import pathlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dataflow as df
from dataflow.framework.random_seed import DEFAULT_GRAPH_SEED
from dataflow.ops.init_ops import compute_fans

from .op_harness import check_gradients

STATS = json.loads((pathlib.Path(__file__).parent / "tf_reference" /
                    "init_stats.json").read_text())


def _run(tensor):
    with df.Session() as sess:
        return sess.run(tensor)


def _philox_uniform(seed, shape, dtype=np.float32):
    gen = np.random.Generator(np.random.Philox(counter=np.zeros(4, np.uint64),
                                               key=np.array([DEFAULT_GRAPH_SEED, seed],
                                                            np.uint64)))
    return gen.random(tuple(shape), dtype=dtype)


@settings(max_examples=30, deadline=None)
@given(shape=st.lists(st.integers(1, 5), min_size=1, max_size=4),
       seed=st.integers(1, 10 ** 6),
       kind=st.sampled_from(["glorot", "he", "lecun", "fan_out3"]))
def test_uniform_variance_scaling_values(shape, seed, kind):
    fan_in, fan_out = compute_fans(shape)
    init, scale = {
        "glorot": (df.glorot_uniform_initializer(seed=seed), 2.0 / (fan_in + fan_out)),
        "he": (df.initializers.he_uniform(seed=seed), 2.0 / fan_in),
        "lecun": (df.initializers.lecun_uniform(seed=seed), 1.0 / fan_in),
        "fan_out3": (df.variance_scaling_initializer(3.0, "fan_out", "uniform", seed=seed),
                     3.0 / fan_out),
    }[kind]
    with df.Graph().as_default():
        got = _run(init(shape))
    limit = np.float32(math.sqrt(3.0 * scale))
    want = _philox_uniform(seed, shape) * (limit - -limit) + -limit
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)


def test_fans():
    assert compute_fans([]) == (1, 1)
    assert compute_fans([7]) == (7, 7)
    assert compute_fans([3, 4]) == (3, 4)
    assert compute_fans([3, 3, 16, 32]) == (144, 288)


@pytest.mark.parametrize("name", sorted(k for k in STATS if "expr" in STATS[k]))
def test_distribution_matches_tf_statistics(name, graph):
    cfg = STATS[name]
    df.set_random_seed(1)
    init = eval(cfg["expr"], {"tf": df})  # noqa: S307 - the fixture's fixed expressions
    value = _run(init(cfg["shape"]))
    assert value.shape == tuple(cfg["shape"]) and value.dtype == np.float32
    assert value.std() == pytest.approx(cfg["std"], rel=0.02)
    assert abs(value.mean() - cfg["mean"]) < 0.02 * cfg["std"] + 1e-3
    # The largest draw: a uniform's limit, a truncated normal's two standard deviations.
    if "untruncated" not in name and name != "random_normal":  # bounded draws only
        assert np.abs(value).max() == pytest.approx(cfg["max_abs"], rel=0.02)


@pytest.mark.parametrize("shape", [[6, 4], [4, 6], [3, 3, 4, 8], [5, 5]])
def test_orthogonal(shape, graph):
    value = _run(df.orthogonal_initializer(gain=2.0, seed=3)(shape))
    assert value.shape == tuple(shape)
    flat = value.reshape(-1, shape[-1])
    gram = flat.T @ flat if flat.shape[0] >= flat.shape[1] else flat @ flat.T
    np.testing.assert_allclose(gram, 4.0 * np.eye(len(gram)), atol=1e-5)
    key = f"orthogonal_{'x'.join(map(str, shape))}"
    if key in STATS:
        assert np.diag(gram).mean() == pytest.approx(STATS[key]["gram_diag"], rel=1e-5)
    with pytest.raises(ValueError, match="two-dimensional"):
        df.orthogonal_initializer()([4])


def test_constant_zeros_ones(graph):
    assert _run(df.constant_initializer([1, 2])([2, 2])).tolist() == [[1, 2], [2, 2]]
    assert _run(df.constant_initializer(3)([2], dtype=df.int32)).tolist() == [3, 3]
    assert _run(df.constant_initializer([[1, 2], [3, 4]])([4])).tolist() == [1, 2, 3, 4]
    with pytest.raises(ValueError, match="Too many elements"):
        df.constant_initializer([1, 2, 3])([2])
    with pytest.raises(TypeError, match="shape"):
        df.constant_initializer([1, 2], verify_shape=True)([2, 1])
    z = df.zeros_initializer()([2, 3], dtype=df.int64)
    assert z.dtype is df.int64 and _run(z).tolist() == [[0] * 3] * 2
    assert _run(df.ones_initializer(dtype=df.float64)([2])).dtype == np.float64
    assert df.initializers.zeros is df.zeros_initializer


def test_invalid_arguments():
    with pytest.raises(ValueError, match="scale"):
        df.variance_scaling_initializer(0.0)
    with pytest.raises(ValueError, match="mode"):
        df.variance_scaling_initializer(mode="fan")
    with pytest.raises(ValueError, match="distribution"):
        df.variance_scaling_initializer(distribution="cauchy")
    with pytest.raises(ValueError, match="floating"):
        df.random_normal_initializer(dtype=df.int32)


def test_config_round_trip():
    init = df.variance_scaling_initializer(2.0, "fan_out", "uniform", seed=4)
    again = type(init).from_config(init.get_config())
    assert again.get_config() == init.get_config()


def test_get_variable_uses_the_initializer_with_its_shape_and_dtype(graph):
    w = df.get_variable("w", [3, 4], dtype=df.float64,
                        initializer=df.random_uniform_initializer(-1.0, 1.0, seed=5))
    with df.Session() as sess:
        sess.run(w.initializer)
        got = sess.run(w)
    want = _philox_uniform(5, [3, 4], np.float64) * 2.0 - 1.0
    assert got.dtype == np.float64
    np.testing.assert_allclose(got, want)


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 6), n=st.integers(1, 6), seed=st.integers(0, 1000))
def test_qr_reconstructs(m, n, seed):
    a = np.random.default_rng(seed).standard_normal((m, n))
    with df.Graph().as_default():
        q, r = df.qr(a)
        assert q.shape == [m, min(m, n)] and r.shape == [min(m, n), n]
        qv, rv = _run([q, r])
    np.testing.assert_allclose(qv @ rv, a, atol=1e-10)
    np.testing.assert_allclose(qv.T @ qv, np.eye(min(m, n)), atol=1e-10)
    np.testing.assert_allclose(np.tril(rv, -1), 0, atol=1e-12)


@settings(max_examples=10, deadline=None)
@given(m=st.integers(2, 5), extra=st.integers(0, 2), seed=st.integers(0, 1000))
def test_qr_gradient(m, extra, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((m + extra, m)) + 2 * np.eye(m + extra, m)
    check_gradients(lambda x: df.qr(x)[0] * 2.0, [a])
    check_gradients(lambda x: df.qr(x)[1], [a])
    check_gradients(lambda x: df.concat([df.qr(x)[0], df.transpose(df.qr(x)[1])], 0), [a])


def test_qr_gradient_of_wide_matrices_is_not_implemented(graph):
    x = df.placeholder(df.float64, [2, 3])
    with pytest.raises(NotImplementedError, match="QrGrad"):
        df.gradients(df.qr(x)[0], [x])
