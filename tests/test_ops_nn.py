"""``df.nn`` ops against closed forms: relu, elu, softplus, softmax, log_softmax and
softmax cross-entropy (value, dtype and static shape)."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import dataflow as df

from .op_harness import MODES, run_op, tolerance

SETTINGS = settings(max_examples=30, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

FLOATS = [np.float32, np.float64]
FULL_MODES = {"constant", "placeholder"}
SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4)
NONSCALAR_SHAPES = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)


def arrays(dtype, shape, lo=-20, hi=20):
    """Arrays of ``dtype`` and ``shape`` with elements in ``[lo, hi]``."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        # Normal floats: sessions read subnormal inputs as zero (flush_denormals, on by default).
        elements = st.floats(lo, hi, width=dtype.itemsize * 8, allow_subnormal=False)
    else:
        elements = st.integers(lo, hi)
    return hnp.arrays(dtype, shape, elements=elements)




def assert_result(tensor, actual, expected, dtype, static_known):
    """Value (dtype-appropriate tolerance), dtype and static shape of one result."""
    expected = np.asarray(expected)
    assert isinstance(actual, (np.ndarray, np.generic)), type(actual)
    assert actual.dtype == np.dtype(dtype)
    assert tensor.dtype.as_numpy_dtype == np.dtype(dtype).type
    assert np.shape(actual) == expected.shape
    assert tensor.shape.is_compatible_with(np.shape(actual))
    if static_known:
        assert tensor.shape.as_list() == list(expected.shape)
    np.testing.assert_allclose(actual, expected, **tolerance(dtype))


def log_softmax_ref(x):
    """Closed form in float64: ``x - max - log(sum(exp(x - max)))`` over the last axis."""
    x = np.asarray(x, np.float64)
    z = x - x.max(axis=-1, keepdims=True)
    return z - np.log(np.exp(z).sum(axis=-1, keepdims=True))


# -- activations -------------------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(FLOATS + [np.int32, np.int64]), shape=SHAPES,
       mode=st.sampled_from(MODES))
def test_relu(data, dtype, shape, mode):
    x = data.draw(arrays(dtype, shape))
    t, out = run_op(df.nn.relu, [x], [mode])
    assert_result(t, out, np.maximum(x, 0), dtype, mode in FULL_MODES)


def test_activations_reject_unsupported_dtypes():
    with df.Graph().as_default():
        with pytest.raises(TypeError):
            df.nn.relu(df.constant([True, False]))
        for fn in (df.nn.elu, df.nn.softplus, df.nn.sigmoid, df.nn.tanh):
            with pytest.raises(TypeError):
                fn(df.constant([1, 2]))


@pytest.mark.parametrize("fn,ref", [
    (df.nn.elu, lambda x: np.where(x > 0, x, np.expm1(np.minimum(x, 0)))),
    (df.nn.softplus, lambda x: np.log1p(np.exp(-np.abs(x))) + np.maximum(x, 0)),
    (df.nn.sigmoid, lambda x: 1 / (1 + np.exp(-x))),
    (df.nn.tanh, np.tanh),
])
@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(FLOATS), shape=SHAPES, mode=st.sampled_from(MODES))
def test_float_activations(fn, ref, data, dtype, shape, mode):
    x = data.draw(arrays(dtype, shape))
    t, out = run_op(fn, [x], [mode])
    assert_result(t, out, ref(x.astype(np.float64)), dtype, mode in FULL_MODES)


# -- softmax -----------------------------------------------------------------------------------

@pytest.mark.parametrize("fn,ref", [(df.nn.softmax, lambda x: np.exp(log_softmax_ref(x))),
                                    (df.nn.log_softmax, log_softmax_ref)])
@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(FLOATS), shape=NONSCALAR_SHAPES,
       mode=st.sampled_from(MODES))
def test_softmax_over_last_axis(fn, ref, data, dtype, shape, mode):
    # Wide logits check the max-subtraction that keeps exp from overflowing.
    x = data.draw(arrays(dtype, shape, -80, 80))
    t, out = run_op(fn, [x], [mode])
    assert_result(t, out, ref(x), dtype, mode in FULL_MODES)


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(FLOATS), shape=NONSCALAR_SHAPES)
def test_softmax_rows_are_distributions(data, dtype, shape):
    x = data.draw(arrays(dtype, shape))
    _, out = run_op(df.nn.softmax, [x], ["placeholder"])
    assert np.all(out >= 0)
    np.testing.assert_allclose(out.sum(axis=-1), 1, rtol=1e-5)


def test_softmax_rejects_scalars_and_integers():
    with df.Graph().as_default():
        with pytest.raises(ValueError):
            df.nn.softmax(df.constant(1.0))
        with pytest.raises(TypeError):
            df.nn.softmax(df.constant([1, 2]))


def test_softmax_of_huge_logits_is_finite():
    with df.Graph().as_default():
        t = df.nn.softmax(df.constant([1000.0, 1000.0, -1000.0]))
        with df.Session() as sess:
            out = sess.run(t)
    np.testing.assert_allclose(out, [0.5, 0.5, 0.0])


# -- softmax cross-entropy ---------------------------------------------------------------------

@st.composite
def label_distributions(draw, dtype, shape):
    """Rows along the last axis that are probability distributions (one-hot or soft)."""
    if draw(st.booleans()):
        classes = draw(hnp.arrays(np.int64, shape[:-1], elements=st.integers(0, shape[-1] - 1)))
        return np.eye(shape[-1], dtype=dtype)[classes]
    raw = draw(arrays(dtype, shape, 0, 1)).astype(np.float64) + 1e-3
    return (raw / raw.sum(axis=-1, keepdims=True)).astype(dtype)


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(FLOATS),
       shape=hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4),
       input_modes=st.lists(st.sampled_from(MODES), min_size=2, max_size=2))
def test_softmax_cross_entropy_with_logits(data, dtype, shape, input_modes):
    logits = data.draw(arrays(dtype, shape))
    labels = data.draw(label_distributions(dtype, shape))
    t, out = run_op(lambda lab, log: df.nn.softmax_cross_entropy_with_logits(labels=lab,
                                                                             logits=log),
                    [labels, logits], input_modes)
    expected = -np.sum(labels * log_softmax_ref(logits), axis=-1)
    known = all(m in FULL_MODES for m in input_modes)
    assert_result(t, out, expected, dtype, known)
    if "unknown" not in input_modes or input_modes.count("unknown") < 2:
        assert t.shape.ndims == len(shape) - 1


def test_softmax_cross_entropy_closed_form_values():
    """One-hot labels give ``-log softmax(logits)[label]``: log(1 + e) for [1, 2] / class 0."""
    with df.Graph().as_default():
        loss = df.nn.softmax_cross_entropy_with_logits(labels=[[1.0, 0.0], [0.0, 1.0]],
                                                       logits=[[1.0, 2.0], [1.0, 2.0]])
        assert loss.shape.as_list() == [2]
        with df.Session() as sess:
            out = sess.run(loss)
    np.testing.assert_allclose(out, [np.log1p(np.e), np.log1p(np.exp(-1))], rtol=1e-6)


def test_softmax_cross_entropy_mean_loss_of_a_batch():
    with df.Graph().as_default():
        logits = df.placeholder(df.float32, [None, 3])
        labels = df.placeholder(df.float32, [None, 3])
        loss = df.reduce_mean(df.nn.softmax_cross_entropy_with_logits(labels=labels,
                                                                      logits=logits))
        assert loss.shape.as_list() == [] and loss.dtype == df.float32
        z = np.array([[0.0, 0.0, 0.0], [3.0, 0.0, 0.0]], np.float32)
        y = np.array([[1, 0, 0], [1, 0, 0]], np.float32)
        with df.Session() as sess:
            out = sess.run(loss, {logits: z, labels: y})
    expected = (np.log(3) + np.log(np.exp(3) + 2) - 3) / 2
    np.testing.assert_allclose(out, expected, rtol=1e-6)


def test_softmax_cross_entropy_argument_errors():
    with df.Graph().as_default():
        z = df.placeholder(df.float32, [2, 3])
        with pytest.raises(ValueError):
            df.nn.softmax_cross_entropy_with_logits(z, z)  # positional: TF's sentinel error
        with pytest.raises(ValueError):
            df.nn.softmax_cross_entropy_with_logits(labels=df.zeros([2, 4]), logits=z)
        with pytest.raises(TypeError):
            df.nn.softmax_cross_entropy_with_logits(labels=df.zeros([2, 3], df.float64),
                                                    logits=z)
        with pytest.raises(ValueError):
            df.nn.softmax_cross_entropy_with_logits(labels=df.constant(1.0),
                                                    logits=df.constant(1.0))
        with pytest.raises(ValueError):
            df.nn.softmax_cross_entropy_with_logits(logits=z)
