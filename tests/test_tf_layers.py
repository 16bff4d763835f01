"""tf.layers: values, gradients and moving averages against TF's (tf_reference/layers.json,
from generate_layers.py) and NumPy; names are checked by test_tf_names.py."""
from __future__ import annotations

import json
import pathlib

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dataflow as df

from .tf_reference import layer_programs

EXPECTED = json.loads((pathlib.Path(__file__).parent / "tf_reference" /
                       "layers.json").read_text())


@pytest.mark.parametrize("name", sorted(layer_programs.PROGRAMS))
def test_values_match_tensorflow(name):
    assert sorted(EXPECTED) == sorted(layer_programs.PROGRAMS)
    with df.Graph().as_default():
        got = layer_programs.PROGRAMS[name](df)
    want = EXPECTED[name]
    assert sorted(got) == sorted(want)
    for key in want:
        np.testing.assert_allclose(got[key], np.array(want[key], np.float32), rtol=2e-5,
                                   atol=2e-5, err_msg=f"{name}: {key}")


@settings(max_examples=20, deadline=None)
@given(batch=st.integers(1, 5), n_in=st.integers(1, 5), units=st.integers(1, 4),
       rank3=st.booleans(), seed=st.integers(0, 100))
def test_dense_matches_numpy(batch, n_in, units, rank3, seed):
    rng = np.random.default_rng(seed)
    shape = (batch, 2, n_in) if rank3 else (batch, n_in)
    x = rng.standard_normal(shape)
    k = rng.standard_normal((n_in, units))
    with df.Graph().as_default():
        xt = df.placeholder(df.float64, [None] + list(shape[1:]))
        y = df.layers.dense(xt, units, activation=df.tanh,
                            kernel_initializer=df.constant_initializer(k),
                            bias_initializer=df.constant_initializer(0.5))
        assert y.shape.as_list() == [None] + list(shape[1:-1]) + [units]
        assert df.trainable_variables()[0].dtype is df.float64  # the inputs' dtype
        with df.Session() as sess:
            sess.run(df.global_variables_initializer())
            got = sess.run(y, {xt: x})
    np.testing.assert_allclose(got, np.tanh(x @ k + 0.5), rtol=1e-12)


def test_reuse_and_layer_objects_share_variables(graph):
    x = df.placeholder(df.float32, [None, 3])
    a = df.layers.dense(x, 2, name="fc")
    b = df.layers.dense(x, 2, name="fc", reuse=True)
    layer = df.layers.Dense(2)
    c, d = layer(x), layer(x)
    assert len(df.trainable_variables()) == 4
    assert layer.kernel.name == "dense/kernel:0" and layer.trainable_weights == [
        layer.kernel, layer.bias]
    with pytest.raises(ValueError, match="fc/kernel already exists"):
        df.layers.dense(x, 2, name="fc")
    with pytest.raises(ValueError, match="last dimension"):
        df.layers.dense(df.placeholder(df.float32, [None, None]), 2)
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        av, bv, cv, dv = sess.run([a, b, c, d], {x: np.ones((1, 3))})
    np.testing.assert_array_equal(av, bv)
    np.testing.assert_array_equal(cv, dv)


def test_dropout_layer_follows_training(graph):
    df.set_random_seed(1)
    x = df.ones([200, 50])
    training = df.placeholder(df.bool, [])
    y = df.layers.dropout(x, rate=0.4, training=training)
    z = df.layers.dropout(x, rate=0.4)  # training defaults to False: the identity
    w = df.layers.dropout(x, rate=0.4, training=True)
    with df.Session() as sess:
        on, off, zv, wv = sess.run([y, y, z, w], {training: True})[0], \
            sess.run(y, {training: False}), sess.run(z), sess.run(w)
    assert abs((on == 0).mean() - 0.4) < 0.02 and set(np.unique(on)) == {0.0,
                                                                          np.float32(1 / 0.6)}
    np.testing.assert_array_equal(off, 1.0)
    np.testing.assert_array_equal(zv, 1.0)
    assert abs((wv == 0).mean() - 0.4) < 0.02


@settings(max_examples=15, deadline=None)
@given(shape=st.sampled_from([(8, 3), (4, 2, 3), (2, 3, 3, 4)]), momentum=st.floats(0.1, 0.99),
       seed=st.integers(0, 100))
def test_batch_normalization_matches_numpy(shape, momentum, seed):
    x = np.random.default_rng(seed).standard_normal(shape) * 3 + 1
    axes = tuple(range(len(shape) - 1))
    n = int(np.prod(shape[:-1]))
    with df.Graph().as_default():
        xt = df.constant(x)
        y = df.layers.batch_normalization(xt, momentum=momentum, training=True)
        updates = df.get_collection(df.GraphKeys.UPDATE_OPS)
        infer = df.layers.batch_normalization(xt, training=False, name="batch_normalization",
                                              reuse=True)
        with df.Session() as sess:
            sess.run(df.global_variables_initializer())
            got, _ = sess.run([y, updates])
            got_infer = sess.run(infer)
    mean, var = x.mean(axes), x.var(axes)
    np.testing.assert_allclose(got, (x - mean) / np.sqrt(var + 1e-3), rtol=1e-9, atol=1e-12)
    moving_var_sample = var * n / (n - 1) if len(shape) == 4 else var  # TF's fused kernel
    mm = mean * (1 - momentum)
    mv = 1 - (1 - moving_var_sample) * (1 - momentum)
    np.testing.assert_allclose(got_infer, (x - mm) / np.sqrt(mv + 1e-3), rtol=1e-9)


def test_batch_normalization_trains_through_update_ops(graph):
    x = df.placeholder(df.float32, [None, 4])
    training = df.placeholder(df.bool, [])
    h = df.layers.batch_normalization(df.layers.dense(x, 4), training=training)
    loss = df.reduce_mean(df.square(h - 1.0))
    with df.control_dependencies(df.get_collection(df.GraphKeys.UPDATE_OPS)):
        train = df.train.GradientDescentOptimizer(0.1).minimize(loss)
    data = np.random.default_rng(0).standard_normal((16, 4)).astype(np.float32) + 3
    mm = [v for v in df.global_variables() if "moving_mean" in v.name][0]
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        sess.run(train, {x: data, training: True})
        moved = sess.run(mm)
        sess.run(loss, {x: data, training: False})  # inference: the averages stay
        assert np.array_equal(sess.run(mm), moved) and np.abs(moved).sum() > 0


def test_flatten_of_unknown_dimensions(graph):
    x = df.placeholder(df.float32, [None, None, 3])
    f = df.layers.flatten(x)
    assert f.shape.as_list() == [None, None]
    with df.Session() as sess:
        got = sess.run(f, {x: np.arange(24, dtype=np.float32).reshape(2, 4, 3)})
    np.testing.assert_array_equal(got, np.arange(24).reshape(2, 12))


def test_readme_example_runs():
    import contextlib
    import io
    import re
    text = (pathlib.Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = text.split("## Variables, initializers, random numbers, layers and "
                         "checkpoints", 1)[1]
    block = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    out = io.StringIO()
    with df.Graph().as_default(), contextlib.redirect_stdout(out):
        exec(compile(block, "README-tf1", "exec"), {})
    assert out.getvalue().strip() == str(['mlp/dense/kernel:0', 'mlp/dense/bias:0',
                                          'mlp/batch_normalization/gamma:0'])


@settings(max_examples=15, deadline=None)
@given(size=st.integers(3, 6), k=st.integers(1, 3), stride=st.integers(1, 2),
       same=st.booleans(), seed=st.integers(0, 100))
def test_conv2d_and_pooling_layers_match_numpy(size, k, stride, same, seed):
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((2, size, size, 2))
    kern = rng.standard_normal((k, k, 2, 3))
    pad = "same" if same else "valid"
    with df.Graph().as_default():
        xt = df.placeholder(df.float64, [None, size, size, 2])
        y = df.layers.conv2d(xt, 3, k, strides=stride, padding=pad,
                             kernel_initializer=df.constant_initializer(kern),
                             bias_initializer=df.constant_initializer(0.25))
        p = df.layers.max_pooling2d(y, 2, 1, padding="same")
        with df.Session() as sess:
            sess.run(df.global_variables_initializer())
            got, pooled = sess.run([y, p], {xt: x})
    lo = max((-(-size // stride) - 1) * stride + k - size, 0) // 2 if same else 0
    padded = np.pad(x, [(0, 0), (lo, k + size), (lo, k + size), (0, 0)])
    n = -(-size // stride) if same else (size - k) // stride + 1
    want = np.stack([np.stack([np.einsum("bhwc,hwco->bo",
                                         padded[:, i * stride:i * stride + k,
                                                j * stride:j * stride + k], kern)
                               for j in range(n)], 1) for i in range(n)], 1) + 0.25
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-10)
    edge = np.pad(got, [(0, 0), (0, 1), (0, 1), (0, 0)], constant_values=-np.inf)
    want_pool = np.max([edge[:, a:a + n, b:b + n] for a in (0, 1) for b in (0, 1)], 0)
    np.testing.assert_allclose(pooled, want_pool)


def test_conv2d_layer_errors(graph):
    with pytest.raises(ValueError, match="expected ndim=4"):
        df.layers.conv2d(df.placeholder(df.float32, [None, 8, 8]), 2, 3)
    with pytest.raises(ValueError, match="padding"):
        df.layers.conv2d(df.placeholder(df.float32, [None, 8, 8, 1]), 2, 3, padding="full")
    with pytest.raises(ValueError, match="kernel_size"):
        df.layers.Conv2D(2, (1, 2, 3))
    with pytest.raises(ValueError, match="channel dimension"):
        df.layers.conv2d(df.placeholder(df.float32, [None, 8, 8, None]), 2, 3)
