"""Sparse softmax cross-entropy, sigmoid cross-entropy, l2_loss, l2_normalize, moments,
batch_normalization, bias_add, embedding_lookup, the clipping ops, ``df.losses`` and
``df.metrics.accuracy`` against NumPy formulas, with their errors and gradients."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import dataflow as df

from .op_harness import check_gradients, fresh_rng, run_op

SETTINGS = settings(max_examples=20, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
FLOATS = [np.float32, np.float64]


def floats(dtype, shape, lo=-5.0, hi=5.0):
    # Normal floats: sessions read subnormal inputs as zero (flush_denormals, on by default).
    return hnp.arrays(dtype, shape, elements=st.floats(lo, hi, width=np.dtype(dtype).itemsize * 8,
                                                     allow_subnormal=False))


def rtol(dtype):
    return 2e-5 if dtype == np.float32 else 1e-12


def _np_log_softmax(z):
    z = z - z.max(-1, keepdims=True)
    return z - np.log(np.exp(z).sum(-1, keepdims=True))


# -- ops ------------------------------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(FLOATS),
       mode=st.sampled_from(["constant", "placeholder", "partial"]),
       label_dtype=st.sampled_from([np.int32, np.int64]))
def test_sparse_softmax_xent(data, dtype, mode, label_dtype):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
    z = data.draw(floats(dtype, shape))
    y = data.draw(hnp.arrays(label_dtype, shape[:-1], elements=st.integers(0, shape[-1] - 1)))
    t, got = run_op(lambda a, b: df.nn.sparse_softmax_cross_entropy_with_logits(
        labels=b, logits=a), [z, y], [mode, mode])
    expected = -np.take_along_axis(_np_log_softmax(z.astype(np.float64)), y[..., None].astype(
        np.int64), -1)[..., 0]
    assert np.asarray(got).dtype == dtype and np.shape(got) == y.shape
    assert t.shape.is_compatible_with(y.shape)
    np.testing.assert_allclose(got, expected, rtol=rtol(dtype), atol=1e-6)


def test_sparse_softmax_xent_errors(graph):
    z = df.placeholder(df.float32, [None, 3])
    y = df.placeholder(df.int32, [None])
    loss = df.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=z)
    with df.Session() as sess, pytest.raises(df.errors.InvalidArgumentError,
                                             match="label value of 3"):
        sess.run(loss, {z: np.zeros((2, 3)), y: [0, 3]})
    with pytest.raises(ValueError, match="Rank mismatch"):
        df.nn.sparse_softmax_cross_entropy_with_logits(labels=[[0]], logits=[[1.0, 2.0]])
    with pytest.raises(TypeError):
        df.nn.sparse_softmax_cross_entropy_with_logits(labels=[0.0], logits=[[1.0, 2.0]])
    with pytest.raises(ValueError):
        df.nn.sparse_softmax_cross_entropy_with_logits([0], [[1.0, 2.0]])


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(FLOATS))
def test_composed_nn_functions(data, dtype):
    shape = data.draw(hnp.array_shapes(min_dims=2, max_dims=3, min_side=1, max_side=4))
    x = data.draw(floats(dtype, shape, -30, 30))
    z = data.draw(floats(dtype, shape, 0, 1))
    b = data.draw(floats(dtype, shape[-1:]))
    axis = data.draw(st.integers(0, len(shape) - 1))
    with df.Graph().as_default():
        px = df.placeholder(dtype, [None] * len(shape))
        ops = [df.nn.sigmoid_cross_entropy_with_logits(labels=z, logits=px), df.nn.l2_loss(px),
               df.nn.l2_normalize(px, axis), *df.nn.moments(px, [axis]),
               df.nn.bias_add(px, b)]
        with df.Session() as sess:
            got = sess.run(ops, {px: x})
    x64 = x.astype(np.float64)
    expected = [np.maximum(x64, 0) - x64 * z + np.log1p(np.exp(-np.abs(x64))),
                0.5 * np.sum(x64 ** 2),
                x64 / np.sqrt(np.maximum(np.sum(x64 ** 2, axis, keepdims=True), 1e-12)),
                x64.mean(axis), x64.var(axis), x64 + b]
    for g, e in zip(got, expected):
        assert np.asarray(g).dtype == dtype
        np.testing.assert_allclose(g, e, rtol=rtol(dtype) * 10, atol=1e-4 if dtype == np.float32
                                   else 1e-10)


def test_batch_normalization_and_bias_add_nchw(graph):
    rng, _ = fresh_rng()
    x = rng.standard_normal((2, 3, 4, 5))
    m, v = x.mean((0, 2, 3)), x.var((0, 2, 3))
    gamma, beta = rng.uniform(0.5, 2, 5), rng.standard_normal(5)
    y = df.nn.batch_normalization(x, x.mean((0, 1, 2)), x.var((0, 1, 2)), beta, gamma, 1e-3)
    c = df.nn.bias_add(x, m, data_format="NCHW")
    with df.Session() as sess:
        y, c = sess.run([y, c])
    np.testing.assert_allclose(y, gamma * (x - x.mean((0, 1, 2))) /
                               np.sqrt(x.var((0, 1, 2)) + 1e-3) + beta, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(c, x + m[:, None, None], rtol=1e-10, atol=1e-12)
    with pytest.raises(ValueError, match="Dimensions must be equal"):
        df.nn.bias_add(x, v)
    with pytest.raises(ValueError, match="at least rank 2"):
        df.nn.bias_add([1.0, 2.0], [1.0, 2.0])


@pytest.mark.parametrize("strategy", ["mod", "div"])
def test_embedding_lookup_sharded(graph, strategy):
    table = np.arange(7 * 2, dtype=np.float64).reshape(7, 2)
    n = 3
    if strategy == "mod":
        shards = [table[i::n] for i in range(n)]
    else:   # TF's div layout: the first 7 % 3 shards get one extra row
        shards = [table[0:3], table[3:5], table[5:7]]
    ids = np.array([[6, 0], [3, 4], [5, 1]])
    out = df.nn.embedding_lookup([df.constant(s) for s in shards], ids,
                                 partition_strategy=strategy)
    clipped = df.nn.embedding_lookup(df.constant(table), ids, max_norm=2.0)
    with df.Session() as sess:
        out, clipped = sess.run([out, clipped])
    np.testing.assert_array_equal(out, table[ids])
    rows = table[ids]
    norms = np.linalg.norm(rows, axis=-1, keepdims=True)
    np.testing.assert_allclose(clipped, rows * 2.0 / np.maximum(norms, 2.0))
    with pytest.raises(ValueError):
        df.nn.embedding_lookup(table, ids, partition_strategy="hash")


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(FLOATS))
def test_clip_ops(data, dtype):
    shape = data.draw(hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4))
    x = data.draw(floats(dtype, shape))
    y = data.draw(floats(dtype, shape[:1]))
    lo, hi = sorted(data.draw(st.lists(st.floats(-3, 3, allow_subnormal=False), min_size=2,
                                        max_size=2)))
    clip = data.draw(st.floats(0.1, 10))
    with df.Graph().as_default():
        clipped, gnorm = df.clip_by_global_norm([x, None, y], clip)
        assert clipped[1] is None
        ops = [df.clip_by_value(x, lo, hi), df.clip_by_norm(x, clip),
               df.clip_by_norm(x, clip, axes=[0]), df.global_norm([x, None, y]),
               ([clipped[0], clipped[2]], gnorm)]
        with df.Session() as sess:
            v, n, n0, g, (cl, norm) = sess.run(ops)
    x64, y64 = x.astype(np.float64), y.astype(np.float64)
    tol = {"rtol": rtol(dtype) * 10, "atol": 1e-5}
    np.testing.assert_allclose(v, np.clip(x64, lo, hi), **tol)
    l2 = np.sqrt(np.sum(x64 ** 2))
    np.testing.assert_allclose(n, x64 * clip / max(l2, clip), **tol)
    l2_0 = np.sqrt(np.sum(x64 ** 2, axis=0, keepdims=True))
    np.testing.assert_allclose(n0, x64 * clip / np.maximum(l2_0, clip), **tol)
    gn = np.sqrt(np.sum(x64 ** 2) + np.sum(y64 ** 2))
    np.testing.assert_allclose([g, norm], [gn, gn], **tol)
    scale = clip / max(gn, clip)
    np.testing.assert_allclose(cl[0], x64 * scale, **tol)
    np.testing.assert_allclose(cl[1], y64 * scale, **tol)


def test_clip_edge_cases(graph):
    zero = df.clip_by_norm(df.zeros([3]), 1.0)
    x = df.constant([3.0, 4.0])
    g = df.gradients(df.reduce_sum(df.clip_by_norm(df.zeros([2]) * x, 1.0)), [x])[0]
    inf = df.clip_by_global_norm([df.constant([np.inf, 1.0])], 1.0)[0][0]
    with df.Session() as sess:
        zero, g, inf = sess.run([zero, g, inf])
    np.testing.assert_array_equal(zero, [0, 0, 0])
    assert np.isfinite(g).all()
    assert np.isnan(inf).all()
    with pytest.raises(TypeError):
        df.global_norm(df.constant([1.0]))
    with pytest.raises(ValueError):
        df.clip_by_value(df.constant([1.0, 2.0]), [[0.0]], 1.0)


# -- losses ----------------------------------------------------------------------------------------

def _reduce(losses, weights, reduction):
    w = np.broadcast_to(weights, losses.shape)
    total = np.sum(losses * w)
    R = df.losses.Reduction
    if reduction == R.NONE:
        return losses * w
    if reduction == R.SUM:
        return total
    denom = {R.MEAN: np.sum(w), R.SUM_BY_NONZERO_WEIGHTS: np.count_nonzero(w),
             R.SUM_OVER_BATCH_SIZE: losses.size}[reduction]
    return 0.0 if denom == 0 else total / denom


@SETTINGS
@given(data=st.data(), reduction=st.sampled_from(df.losses.Reduction.all()),
       which=st.sampled_from(["mse", "softmax", "sparse"]), smoothing=st.sampled_from([0, 0.2]))
def test_losses_against_numpy(data, reduction, which, smoothing):
    n, c = data.draw(st.integers(1, 4)), data.draw(st.integers(2, 4))
    z = data.draw(floats(np.float32, (n, c)))
    y = data.draw(hnp.arrays(np.int32, (n,), elements=st.integers(0, c - 1)))
    weights = data.draw(st.sampled_from([1.0, 0.0, "vector"]))
    if weights == "vector":
        weights = data.draw(hnp.arrays(np.float32, (n,), elements=st.sampled_from([0.0, 0.5, 2.0])))
    onehot = np.eye(c, dtype=np.float32)[y]
    with df.Graph().as_default() as g:
        if which == "mse":
            w = weights if np.ndim(weights) == 0 else weights[:, None]
            loss = df.losses.mean_squared_error(onehot, z, weights=w, reduction=reduction)
            per = (z.astype(np.float64) - onehot) ** 2
        elif which == "softmax":
            w = weights
            loss = df.losses.softmax_cross_entropy(onehot, z, weights=w,
                                                   label_smoothing=smoothing,
                                                   reduction=reduction)
            labels = onehot * (1 - smoothing) + smoothing / c
            per = -np.sum(labels * _np_log_softmax(z.astype(np.float64)), -1)
        else:
            w = weights
            loss = df.losses.sparse_softmax_cross_entropy(y[:, None], z, weights=w,
                                                          reduction=reduction)
            per = -_np_log_softmax(z.astype(np.float64))[np.arange(n), y]
        assert g.get_collection("losses") == [loss]
        with df.Session() as sess:
            got = sess.run(loss)
    np.testing.assert_allclose(got, _reduce(per, w, reduction), rtol=1e-5, atol=1e-6)
    assert np.asarray(got).dtype == np.float32


def test_losses_errors_and_collection(graph):
    with pytest.raises(ValueError, match="labels must not be None"):
        df.losses.mean_squared_error(None, [1.0])
    with pytest.raises(ValueError):
        df.losses.mean_squared_error([1.0, 2.0], [1.0, 2.0, 3.0])
    with pytest.raises(ValueError, match="Invalid Reduction"):
        df.losses.mean_squared_error([1.0], [1.0], reduction="bogus")
    df.losses.mean_squared_error([1.0], [2.0], loss_collection=None)
    assert df.losses.get_losses() == []


# -- metrics ---------------------------------------------------------------------------------------

def test_accuracy_streams_over_batches(graph):
    labels = df.placeholder(df.int64, [None])
    logits = df.placeholder(df.float32, [None, 3])
    weights = df.placeholder(df.float32, [None])
    acc, update = df.metrics.accuracy(labels, df.argmax(logits, 1))
    wacc, wupdate = df.metrics.accuracy(labels, df.argmax(logits, 1), weights=weights,
                                        name="weighted")
    local = graph.get_collection("local_variables")
    assert [v.name for v in local] == ["accuracy/total:0", "accuracy/count:0",
                                       "weighted/total:0", "weighted/count:0"]
    assert not any(v in df.global_variables() for v in local)
    assert not any(v in df.trainable_variables() for v in local)
    rng, _ = fresh_rng()
    correct = total = wcorrect = wtotal = 0.0
    with df.Session() as sess:
        sess.run(df.variables_initializer(local))
        assert sess.run(acc) == 0.0   # no batch yet: 0, not NaN
        for n in (5, 1, 7):
            y = rng.integers(0, 3, n)
            z = rng.standard_normal((n, 3)).astype(np.float32)
            w = rng.choice([0.0, 1.0, 2.0], n).astype(np.float32)
            hit = (z.argmax(1) == y)
            correct, total = correct + hit.sum(), total + n
            wcorrect, wtotal = wcorrect + (hit * w).sum(), wtotal + w.sum()
            got = sess.run(update, {labels: y, logits: z})
            np.testing.assert_allclose(got, correct / total, rtol=1e-6)
            sess.run(wupdate, {labels: y, logits: z, weights: w})
        np.testing.assert_allclose(sess.run(acc), correct / total, rtol=1e-6)
        np.testing.assert_allclose(sess.run(wacc), wcorrect / wtotal if wtotal else 0.0,
                                   rtol=1e-6)
    with pytest.raises(ValueError):
        df.metrics.accuracy(df.constant([1, 2]), df.constant([1, 2, 3]))


# -- gradients -------------------------------------------------------------------------------------

LABELS = np.array([2, 0, 1])


@pytest.mark.parametrize("partial", [False, True])
@pytest.mark.parametrize("case", [
    ("sparse_xent", lambda z: df.nn.sparse_softmax_cross_entropy_with_logits(
        labels=LABELS, logits=z)),
    ("sigmoid_xent", lambda z: df.nn.sigmoid_cross_entropy_with_logits(
        labels=np.full((3, 4), 0.3), logits=z)),
    ("l2_loss", df.nn.l2_loss),
    ("l2_normalize", lambda z: df.nn.l2_normalize(z, axis=1)),
    ("moments", lambda z: df.add_n(list(df.nn.moments(z, [0])))),
    ("batch_norm", lambda z: df.nn.batch_normalization(
        z, *df.nn.moments(z, [0]), offset=np.arange(4.0), scale=np.linspace(1, 2, 4),
        variance_epsilon=1e-3)),
    ("bias_add", lambda z: df.nn.bias_add(z, df.reduce_sum(z, 0))),
    ("embedding_mod", lambda z: df.nn.embedding_lookup([z[:2], z[2:]], [[2, 0], [1, 1]])),
    ("clip_by_value", lambda z: df.clip_by_value(z, -1.0, 1.0)),
    ("clip_by_norm", lambda z: df.clip_by_norm(z, 1.0, axes=[1])),
    ("clip_by_global_norm", lambda z: df.clip_by_global_norm([z, z * 2.0], 2.0)[0][1]),
    ("losses_sparse", lambda z: df.losses.sparse_softmax_cross_entropy(
        LABELS, z, weights=[1.0, 0.0, 2.0])),
    ("losses_softmax", lambda z: df.losses.softmax_cross_entropy(
        np.eye(4)[[1, 3, 0]], z, label_smoothing=0.1)),
], ids=lambda c: c[0])
def test_gradients(case, partial):
    rng, seed = fresh_rng()
    # Away from the clipping kinks at +-1 and from ties.
    x = rng.choice([-1, 1], (3, 4)) * rng.uniform(0.2, 0.8, (3, 4)) + \
        rng.choice([-1.0, 0.0, 1.0], (3, 4))
    check_gradients(case[1], [x], partial=partial, rng=rng, seed=seed)


def test_sparse_xent_second_order():
    rng, seed = fresh_rng()

    def first(z):
        loss = df.nn.sparse_softmax_cross_entropy_with_logits(labels=LABELS, logits=z)
        return df.gradients(df.reduce_sum(loss * loss), [z])[0]
    check_gradients(first, [rng.standard_normal((3, 4))], rng=rng, seed=seed)


def test_mean_squared_error_gradient_is_float32(graph):
    # TF1 computes this loss in float32 whatever the inputs: its gradient is 2 (z - y) / N.
    rng, _ = fresh_rng()
    z = df.constant(rng.standard_normal((3, 4)).astype(np.float32))
    y = rng.standard_normal((3, 4)).astype(np.float32)
    loss = df.losses.mean_squared_error(y, z, weights=[[1.0], [0.0], [2.0]])
    with df.Session() as sess:
        g, zv = sess.run([df.gradients(loss, [z])[0], z])
    w = np.array([[1.0], [0.0], [2.0]])
    np.testing.assert_allclose(g, 2 * (zv - y) * w / 8, rtol=1e-5, atol=1e-7)


def test_l2_loss_is_one_op_as_in_tf1(graph):
    value_x = np.array([[3.0, -4.0], [1e-3, 2.0]], np.float32)
    x = df.constant(value_x)
    loss = df.nn.l2_loss(x)
    assert loss.op.type == "L2Loss" and loss.shape.as_list() == [] and loss.dtype is df.float32
    (grad,) = df.gradients(loss, [x])
    with df.Session() as sess:
        value, g = sess.run([loss, grad])
    assert value == np.float32(np.sum(np.square(value_x)) * np.float32(0.5))
    np.testing.assert_array_equal(g, value_x)
    with pytest.raises(TypeError, match="L2Loss.*floating point"):
        df.nn.l2_loss(df.constant([1, 2]))
