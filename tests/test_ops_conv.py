"""conv2d, depthwise_conv2d, max_pool and avg_pool against direct-loop NumPy references
(every output entry summed or reduced over its window, padding handled per entry), their
static shapes and errors, and the gradients of every op (backprops included) against
finite differences."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dataflow as df

from .op_harness import check_gradients, fresh_rng

SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


# -- direct references ---------------------------------------------------------------------------

def _out_and_pad(size, k, s, d, padding):
    eff = (k - 1) * d + 1
    if padding == "SAME":
        out = -(-size // s)
        return out, max((out - 1) * s + eff - size, 0) // 2
    return max((size - eff) // s + 1, 0), 0


def _windows(h, w, kh, kw, strides, dilations, padding):
    """For each output (i, j): the list of (tap i, tap j, input row, input col) in range."""
    oh, pt = _out_and_pad(h, kh, strides[0], dilations[0], padding)
    ow, pl = _out_and_pad(w, kw, strides[1], dilations[1], padding)
    out = {}
    for i in range(oh):
        for j in range(ow):
            taps = []
            for a in range(kh):
                for b in range(kw):
                    r = i * strides[0] + a * dilations[0] - pt
                    c = j * strides[1] + b * dilations[1] - pl
                    if 0 <= r < h and 0 <= c < w:
                        taps.append((a, b, r, c))
            out[i, j] = taps
    return oh, ow, out


def ref_conv2d(x, f, strides, dilations, padding, depthwise=False):
    n, h, w, c = x.shape
    kh, kw, _, m = f.shape
    oh, ow, win = _windows(h, w, kh, kw, strides, dilations, padding)
    out = np.zeros((n, oh, ow, c * m if depthwise else m))
    for (i, j), taps in win.items():
        for a, b, r, cc in taps:
            if depthwise:
                out[:, i, j] += (x[:, r, cc, :, None] * f[a, b]).reshape(n, -1)
            else:
                out[:, i, j] += x[:, r, cc] @ f[a, b]
    return out


def ref_pool(x, k, strides, padding, kind):
    n, h, w, c = x.shape
    oh, ow, win = _windows(h, w, k[0], k[1], strides, (1, 1), padding)
    out = np.zeros((n, oh, ow, c))
    for (i, j), taps in win.items():
        vals = np.stack([x[:, r, cc] for _, _, r, cc in taps])
        out[:, i, j] = vals.max(0) if kind == "max" else vals.mean(0)
    return out


@st.composite
def geometry(draw, depthwise=False, pool=False):
    h, w = draw(st.integers(1, 7)), draw(st.integers(1, 7))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    padding = draw(st.sampled_from(["SAME", "VALID"]))
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dil = (1, 1) if pool else (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    if padding == "VALID" and (h < (kh - 1) * dil[0] + 1 or w < (kw - 1) * dil[1] + 1):
        h, w = h + (kh - 1) * dil[0], w + (kw - 1) * dil[1]
    return h, w, kh, kw, padding, strides, dil


@SETTINGS
@given(g=geometry(), n=st.integers(1, 2), c=st.integers(1, 3), m=st.integers(1, 3),
       dtype=st.sampled_from([np.float32, np.float64]), partial=st.booleans(),
       seed=st.integers(0, 2 ** 31))
def test_conv2d_matches_reference(g, n, c, m, dtype, partial, seed):
    h, w, kh, kw, padding, strides, dil = g
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, h, w, c)).astype(dtype)
    f = rng.standard_normal((kh, kw, c, m)).astype(dtype)
    with df.Graph().as_default():
        px = df.placeholder(dtype, [None, None, None, c] if partial else x.shape)
        y = df.nn.conv2d(px, f, strides=[1, *strides, 1], padding=padding,
                         dilations=[1, *dil, 1])
        with df.Session() as sess:
            got = sess.run(y, {px: x})
    expected = ref_conv2d(x.astype(np.float64), f.astype(np.float64), strides, dil, padding)
    assert got.dtype == dtype and got.shape == expected.shape
    assert y.shape.is_compatible_with(expected.shape)
    if not partial:
        assert y.shape.as_list() == list(expected.shape)
    np.testing.assert_allclose(got, expected, rtol=1e-4 if dtype == np.float32 else 1e-12,
                               atol=1e-4 if dtype == np.float32 else 1e-12)


@SETTINGS
@given(g=geometry(depthwise=True), n=st.integers(1, 2), c=st.integers(1, 3),
       m=st.integers(1, 3), seed=st.integers(0, 2 ** 31))
def test_depthwise_conv2d_matches_reference(g, n, c, m, seed):
    h, w, kh, kw, padding, strides, dil = g
    if max(dil) > 1:
        strides = (1, 1)   # TF1's depthwise_conv2d: a rate needs unit strides
    rng = np.random.default_rng(seed)
    x = rng.standard_normal((n, h, w, c))
    f = rng.standard_normal((kh, kw, c, m))
    with df.Graph().as_default():
        y = df.nn.depthwise_conv2d(x, f, strides=[1, *strides, 1], padding=padding, rate=dil)
        with df.Session() as sess:
            got = sess.run(y)
    expected = ref_conv2d(x, f, strides, dil, padding, depthwise=True)
    assert y.shape.as_list() == list(expected.shape)
    np.testing.assert_allclose(got, expected, rtol=1e-12, atol=1e-12)


@SETTINGS
@given(g=geometry(pool=True), n=st.integers(1, 2), c=st.integers(1, 3),
       kind=st.sampled_from(["max", "avg"]), dtype=st.sampled_from([np.float32, np.float64]),
       seed=st.integers(0, 2 ** 31))
def test_pools_match_reference(g, n, c, kind, dtype, seed):
    h, w, kh, kw, padding, strides, _ = g
    rng = np.random.default_rng(seed)
    x = rng.integers(-3, 3, (n, h, w, c)).astype(dtype)   # ties on purpose
    fn = df.nn.max_pool if kind == "max" else df.nn.avg_pool
    with df.Graph().as_default():
        y = fn(x, ksize=[1, kh, kw, 1], strides=[1, *strides, 1], padding=padding)
        with df.Session() as sess:
            got = sess.run(y)
    expected = ref_pool(x.astype(np.float64), (kh, kw), strides, padding, kind)
    assert got.dtype == dtype and y.shape.as_list() == list(expected.shape)
    np.testing.assert_allclose(got, expected, rtol=1e-6, atol=1e-6)


def test_max_pool_gradient_goes_to_first_maximum(graph):
    x = df.constant(np.array([[5.0, 5.0], [1.0, 5.0]]).reshape(1, 2, 2, 1))
    y = df.nn.max_pool(x, [1, 2, 2, 1], [1, 1, 1, 1], "VALID")
    with df.Session() as sess:
        g = sess.run(df.gradients(y, [x])[0])
    np.testing.assert_array_equal(g.reshape(2, 2), [[1.0, 0.0], [0.0, 0.0]])


def test_conv_errors(graph):
    x = df.placeholder(df.float32, [1, 4, 4, 2])
    w = df.constant(np.zeros((3, 3, 2, 1), np.float32))
    with pytest.raises(ValueError, match="Depth of input"):
        df.nn.conv2d(x, np.zeros((3, 3, 3, 1), np.float32), [1, 1, 1, 1], "SAME")
    with pytest.raises(ValueError, match="negative"):
        df.nn.conv2d(x, np.zeros((5, 1, 2, 1), np.float32), [1, 1, 1, 1], "VALID")
    with pytest.raises(ValueError, match="rank 4"):
        df.nn.conv2d(df.placeholder(df.float32, [4, 4, 2]), w, [1, 1, 1, 1], "SAME")
    with pytest.raises(ValueError, match="batch and depth"):
        df.nn.conv2d(x, w, [2, 1, 1, 1], "SAME")
    with pytest.raises(ValueError, match="SAME"):
        df.nn.conv2d(x, w, [1, 1, 1, 1], "FULL")
    with pytest.raises(ValueError, match="NHWC"):
        df.nn.conv2d(x, w, [1, 1, 1, 1], "SAME", data_format="NCHW")
    with pytest.raises(TypeError):
        df.nn.conv2d(df.placeholder(df.int32, [1, 4, 4, 2]), np.zeros((3, 3, 2, 1), np.int32),
                     [1, 1, 1, 1], "SAME")
    with pytest.raises(ValueError):
        df.nn.max_pool(x, [1, 2, 2, 2], [1, 1, 1, 1], "SAME")
    with pytest.raises(ValueError, match="dilation"):
        df.nn.depthwise_conv2d(x, np.zeros((3, 3, 2, 1), np.float32), [1, 2, 2, 1], "SAME",
                               rate=[2, 2])


# -- gradients -------------------------------------------------------------------------------------

CASES = {
    "conv_same_s1": (lambda x, f: df.nn.conv2d(x, f, [1, 1, 1, 1], "SAME"),
                     (2, 5, 4, 3), (3, 2, 3, 2)),
    "conv_same_s2": (lambda x, f: df.nn.conv2d(x, f, [1, 2, 2, 1], "SAME"),
                     (1, 6, 5, 2), (3, 3, 2, 3)),
    "conv_valid_s2_dil": (lambda x, f: df.nn.conv2d(x, f, [1, 2, 1, 1], "VALID",
                                                    dilations=[1, 1, 2, 1]),
                          (2, 5, 6, 2), (2, 2, 2, 2)),
    "depthwise_same": (lambda x, f: df.nn.depthwise_conv2d(x, f, [1, 2, 2, 1], "SAME"),
                       (2, 5, 5, 2), (3, 3, 2, 2)),
    "depthwise_rate": (lambda x, f: df.nn.depthwise_conv2d(x, f, [1, 1, 1, 1], "VALID",
                                                           rate=[2, 1]),
                       (1, 6, 4, 3), (2, 2, 3, 1)),
}


@pytest.mark.parametrize("partial", [False, True])
@pytest.mark.parametrize("case", sorted(CASES))
def test_conv_gradients(case, partial):
    fn, xs, fs = CASES[case]
    rng, seed = fresh_rng()
    check_gradients(fn, [rng.standard_normal(xs), rng.standard_normal(fs)], partial=partial,
                    rng=rng, seed=seed)


POOLS = {
    "max_same": (lambda x: df.nn.max_pool(x, [1, 3, 2, 1], [1, 2, 2, 1], "SAME"), (2, 5, 4, 2)),
    "max_valid": (lambda x: df.nn.max_pool(x, [1, 2, 2, 1], [1, 1, 2, 1], "VALID"), (1, 4, 5, 3)),
    "avg_same": (lambda x: df.nn.avg_pool(x, [1, 3, 3, 1], [1, 2, 2, 1], "SAME"), (2, 5, 4, 2)),
    "avg_valid": (lambda x: df.nn.avg_pool(x, [1, 2, 3, 1], [1, 2, 1, 1], "VALID"), (1, 5, 5, 1)),
}


@pytest.mark.parametrize("partial", [False, True])
@pytest.mark.parametrize("case", sorted(POOLS))
def test_pool_gradients(case, partial):
    fn, xs = POOLS[case]
    rng, seed = fresh_rng()
    # Distinct values at least 0.2 apart: no ties for the max pool.
    x = (rng.permutation(int(np.prod(xs))) * 0.2).reshape(xs) + rng.uniform(0, 0.05, xs)
    check_gradients(fn, [x], partial=partial, rng=rng, seed=seed)


def _first_gradients(fn):
    def build(*xs):
        grads = df.gradients(df.reduce_sum(fn(*xs) ** 2.0), list(xs))
        return df.concat([df.reshape(g, [-1]) for g in grads], 0)
    return build


@pytest.mark.parametrize("case", ["conv_same_s2", "depthwise_same", "max_same", "avg_same"])
def test_second_order(case):
    rng, seed = fresh_rng()
    if case in CASES:
        fn, xs, fs = CASES[case]
        values = [rng.standard_normal(xs), rng.standard_normal(fs)]
    else:
        fn, xs = POOLS[case]
        values = [(rng.permutation(int(np.prod(xs))) * 0.2).reshape(xs)]
    check_gradients(_first_gradients(fn), values, rng=rng, seed=seed, none_means_zero=True)
