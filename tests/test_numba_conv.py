"""The Numba convolution and pooling kernels (dataflow/kernels/numba_cpu/conv.py) against
the NumPy reference kernels of the same nodes, on drawn geometries (SAME/VALID, strides,
dilations, window sizes up to the input's) and both float dtypes: equal up to summation
order for convolutions, average pools and the max pool's gradient (ties included: both
route each window to its first maximum; only the order of the sums differs), exactly for
max pools."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dataflow as df
from dataflow.kernels.numba_cpu import _conv_jit as jit
from dataflow.kernels.numba_cpu import _dispatch, conv
from dataflow.kernels.numba_cpu._dispatch import reference_kernel
from dataflow.kernels.registry import KernelContext, find_kernel

pytestmark = pytest.mark.skipif(not _dispatch.ENABLED, reason="DATAFLOW_NUMBA_KERNELS=0")

SETTINGS = settings(max_examples=15, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])


def kernel_pair(op):
    ctx = KernelContext(op=op)
    ours = find_kernel(op, "CPU")
    assert getattr(ours, "numba_cpu", False), f"{op.type} has no Numba kernel"
    return ours(ctx), reference_kernel(ctx)


def compare(op, *values, exact=False):
    """Both kernels on the same values, made read-only as fed and constant values are."""
    for v in values:
        v.setflags(write=False)
    ours, ref = kernel_pair(op)
    got, want = ours(*values), ref(*values)
    assert type(got) is type(want) and got.dtype == want.dtype and got.shape == want.shape
    tol = 0 if exact else (2e-5 if want.dtype == np.float32 else 1e-12)
    np.testing.assert_allclose(got, want, rtol=tol, atol=tol * 10)


@st.composite
def case(draw, pool=False):
    n, h, w, c = (draw(st.integers(1, 3)), draw(st.integers(1, 9)), draw(st.integers(1, 9)),
                  draw(st.integers(1, 5)))
    kh, kw = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    dil = (1, 1) if pool else (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    padding = draw(st.sampled_from(["SAME", "VALID"]))
    if padding == "VALID":
        h, w = max(h, (kh - 1) * dil[0] + 1), max(w, (kw - 1) * dil[1] + 1)
    strides = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    return (n, h, w, c), (kh, kw), dil, padding, strides, dtype


@SETTINGS
@given(cs=case(), m=st.integers(1, 20), seed=st.integers(0, 2 ** 31))
def test_conv2d_and_backprops(cs, m, seed):
    shape, (kh, kw), dil, padding, strides, dtype = cs
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal((kh, kw, shape[3], m)).astype(dtype)
    with df.Graph().as_default():
        px, pw = df.placeholder(dtype, shape), df.placeholder(dtype, w.shape)
        y = df.nn.conv2d(px, pw, [1, *strides, 1], padding, dilations=[1, *dil, 1])
        gx, gw = df.gradients(y, [px, pw])
        dy = rng.standard_normal(y.shape.as_list()).astype(dtype)
        compare(y.op, x, w)
        compare(gx.op, np.array(shape, np.int32), w, dy)
        compare(gw.op, x, np.array(w.shape, np.int32), dy)


@SETTINGS
@given(hw=st.tuples(st.integers(7, 9), st.integers(7, 9)), c=st.integers(5, 12),
       k=st.tuples(st.integers(1, 4), st.integers(1, 4)),
       strides=st.tuples(st.integers(1, 2), st.integers(1, 2)),
       dil=st.tuples(st.integers(1, 2), st.integers(1, 2)),
       padding=st.sampled_from(["SAME", "VALID"]), seed=st.integers(0, 2 ** 31))
def test_backprop_input_gathers_patch_gradients(hw, c, k, strides, dil, padding, seed):
    """The compiled col2im path (more than FEW_CHANNELS channels, outputs above
    CONV_MIN_SIZE): every input position sums the patch entries that read it."""
    rng = np.random.default_rng(seed)
    shape, m = (4, *hw, c), 64
    w = rng.standard_normal((*k, c, m)).astype(np.float32)
    with df.Graph().as_default():
        px = df.placeholder(df.float32, shape)
        y = df.nn.conv2d(px, df.constant(w), [1, *strides, 1], padding,
                         dilations=[1, *dil, 1])
        (gx,) = df.gradients(y, [px])
        dy = rng.standard_normal(y.shape.as_list()).astype(np.float32)
        assert dy.size >= conv.CONV_MIN_SIZE and c > conv.FEW_CHANNELS
        compare(gx.op, np.array(shape, np.int32), w, dy)


@SETTINGS
@given(cs=case(), m=st.integers(1, 3), seed=st.integers(0, 2 ** 31))
def test_depthwise_and_backprops(cs, m, seed):
    shape, (kh, kw), dil, padding, strides, dtype = cs
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(shape).astype(dtype)
    w = rng.standard_normal((kh, kw, shape[3], m)).astype(dtype)
    with df.Graph().as_default():
        px, pw = df.placeholder(dtype, shape), df.placeholder(dtype, w.shape)
        y = df.nn.depthwise_conv2d_native(px, pw, [1, *strides, 1], padding,
                                          dilations=[1, *dil, 1])
        gx, gw = df.gradients(y, [px, pw])
        dy = rng.standard_normal(y.shape.as_list()).astype(dtype)
        compare(y.op, x, w)
        compare(gx.op, np.array(shape, np.int64), w, dy)
        compare(gw.op, x, np.array(w.shape, np.int32), dy)


@SETTINGS
@given(cs=case(pool=True), seed=st.integers(0, 2 ** 31))
def test_pools_and_gradients(cs, seed):
    shape, (kh, kw), _, padding, strides, dtype = cs
    rng = np.random.default_rng(seed)
    x = rng.integers(-2, 3, shape).astype(dtype)   # many ties
    with df.Graph().as_default():
        px = df.placeholder(dtype, shape)
        args = ([1, kh, kw, 1], [1, *strides, 1], padding)
        mp, ap = df.nn.max_pool(px, *args), df.nn.avg_pool(px, *args)
        gm, ga = df.gradients(mp, px)[0], df.gradients(ap, px)[0]
        dy = rng.standard_normal(mp.shape.as_list()).astype(dtype)
        compare(mp.op, x, exact=True)
        compare(ap.op, x)
        compare(gm.op, x, kernel_pair(mp.op)[1](x), dy)   # sums of routed gradients
        compare(ga.op, np.array(shape, np.int32), dy)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
@pytest.mark.parametrize("padding", ["SAME", "VALID"])
@pytest.mark.parametrize("shape", [(64, 8, 8, 16), (3, 4, 6, 5), (2, 5, 7, 3)])
def test_tiling_2x2_max_pools_match_the_general_loops(dtype, padding, shape):
    """The 2x2 stride-2 loops (windows tiling an even input; odd sizes take the general
    loop) against the reference kernels, ties included, and against the general
    compiled loops with NaNs in the input."""
    rng = np.random.default_rng(3)
    x = rng.integers(-2, 3, shape).astype(dtype)   # many ties
    with df.Graph().as_default():
        px = df.placeholder(dtype, shape)
        mp = df.nn.max_pool(px, [1, 2, 2, 1], [1, 2, 2, 1], padding)
        gm = df.gradients(mp, px)[0]
        dy = rng.standard_normal(mp.shape.as_list()).astype(dtype)
        dy.reshape(-1)[::7] = np.inf                # no NaN from a zeroed inf
        compare(mp.op, x.copy(), exact=True)
        compare(gm.op, x.copy(), kernel_pair(mp.op)[1](x), dy.copy(), exact=True)
    n, h, w, c = shape
    if h % 2 or w % 2:
        return
    x = rng.standard_normal(shape).astype(dtype)
    x.reshape(-1)[rng.integers(0, x.size, x.size // 5)] = np.nan
    g = (2, 2, 2, 2, 1, 1, 0, 0, h // 2, w // 2)
    want_y, got_y = (np.empty((n, h // 2, w // 2, c), dtype) for _ in range(2))
    jit.max_pool(x, want_y, g)
    jit.max_pool_2x2(x, got_y)
    np.testing.assert_array_equal(got_y, want_y)
    want, got = np.zeros(shape, dtype), np.full(shape, np.nan, dtype)
    jit.max_pool_grad(x, dy, want, g)
    jit.max_pool_grad_2x2(x, dy, got)
    np.testing.assert_array_equal(got, want)


def test_sessions_with_and_without_compiled_kernels_agree():
    rng = np.random.default_rng(0)
    x = rng.uniform(0, 1, (64, 8, 8, 1)).astype(np.float32)
    with df.Graph().as_default():
        px = df.placeholder(df.float32, [None, 8, 8, 1])
        w1 = df.constant(rng.standard_normal((3, 3, 1, 16)).astype(np.float32))
        w2 = df.constant(rng.standard_normal((3, 3, 16, 32)).astype(np.float32))
        h = df.nn.max_pool(df.nn.relu(df.nn.conv2d(px, w1, [1, 1, 1, 1], "SAME")),
                           [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
        h = df.nn.avg_pool(df.nn.conv2d(h, w2, [1, 1, 1, 1], "SAME"), [1, 2, 2, 1],
                           [1, 2, 2, 1], "VALID")
        loss = df.reduce_sum(h * h)
        fetches = [loss, df.gradients(loss, [px, w1, w2])]
        with df.Session() as s:
            compiled = s.run(fetches, {px: x})
        with df.Session(config=df.ConfigProto(use_compiled_kernels=False)) as s:
            reference = s.run(fetches, {px: x})
    np.testing.assert_allclose(compiled[0], reference[0], rtol=1e-5)
    for a, b in zip(compiled[1], reference[1]):
        np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-4 * np.abs(b).max())
