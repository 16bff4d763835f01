"""The Numba CPU kernels (dataflow/kernels/numba_cpu) against the NumPy reference kernels.

Each test builds one op on placeholders, takes the registered (Numba) kernel and the
NumPy reference kernel of that node, and compares them on the same values: equal
bit for bit for arithmetic, within kernels.approx's bounds for exp/log/tanh/sigmoid,
within summation rounding for sums. Sizes straddle each kernel's threshold so both
the NumPy path and the compiled path run. Op/dtype pairs are fixed lists, not drawn,
to bound the number of Numba compilations on a cold cache.
"""
from __future__ import annotations

import os
import subprocess
import sys
import threading

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dataflow as df
from dataflow.kernels import registry
from dataflow.kernels.numba_cpu import _dispatch, elementwise
from dataflow.kernels.registry import KernelContext, find_kernel

pytestmark = pytest.mark.skipif(not _dispatch.ENABLED, reason="DATAFLOW_NUMBA_KERNELS=0")

SETTINGS = settings(max_examples=6, deadline=None, derandomize=True,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
F32, F64 = np.float32, np.float64
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def reference_kernel(ctx):
    """The NumPy reference kernel of ``ctx.op``, from the registry's reference lookup."""
    factory = registry.reference_kernel(ctx.op)
    assert not getattr(factory, "numba_cpu", False)
    return factory(ctx)


def _id(v):
    return getattr(v, "__name__", str(v))


def kernels(build, dtypes):
    """(numba kernel, NumPy reference kernel) of the op ``build`` makes on placeholders."""
    with df.Graph().as_default():
        ps = [df.placeholder(d) for d in dtypes]
        out = build(*ps)
        op = (out[0] if isinstance(out, (tuple, list)) else out).op
        ctx = KernelContext(op=op)
        ours = find_kernel(op, "CPU")
        assert getattr(ours, "numba_cpu", False), f"{op.type} has no Numba kernel"
        return ours(ctx), reference_kernel(ctx)


def assert_same(got, want, rtol=0.0, atol=0.0):
    """Same type, dtype and shape; values equal (NaNs in the same places) or close."""
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want):
            assert_same(g, w, rtol, atol)
        return
    assert type(got) is type(want), (type(got), type(want))
    assert got.dtype == want.dtype and np.shape(got) == np.shape(want)
    if rtol == 0 and atol == 0:
        np.testing.assert_array_equal(got, want)
    else:
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, equal_nan=True)


def values(data, dtype, shape, lo=-1e3, hi=1e3, specials=True):
    """Random values of ``shape`` with NaN, +-inf and +-0 sprinkled in."""
    rng = np.random.default_rng(data.draw(st.integers(0, 2**32 - 1), label="seed"))
    x = rng.uniform(lo, hi, shape).astype(dtype)
    if specials and x.size:
        flat = x.reshape(-1)
        k = rng.integers(0, flat.size, 8)
        flat[k] = np.array([np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, hi],
                           dtype=dtype)[:k.size]
    return x


def sizes(threshold):
    """Shapes below and above ``threshold`` elements, 1-D to 3-D."""
    small = st.sampled_from([(3,), (5, 7), (2, 3, 4)])
    big_rows = st.integers(threshold // 64 + 1, threshold // 64 + 40)
    big = st.one_of(big_rows.map(lambda r: (r, 64)), big_rows.map(lambda r: (r * 64,)),
                    big_rows.map(lambda r: (2, r, 32)))
    return st.one_of(small, big)


# -- elementwise ---------------------------------------------------------------------------

EXACT_UNARY = [("Neg", lambda x: -x, F32), ("Square", df.square, F32),
               ("Sqrt", df.sqrt, F32), ("Rsqrt", df.rsqrt, F64),
               ("Reciprocal", df.reciprocal, F32), ("Abs", df.abs, F64),
               ("Relu", df.nn.relu, F32)]
APPROX_UNARY = [("Exp", df.exp, F32), ("Exp", df.exp, F64), ("Log", df.log, F32),
                ("Log", df.log, F64), ("Tanh", df.tanh, F32), ("Tanh", df.tanh, F64),
                ("Sigmoid", df.sigmoid, F32), ("Sigmoid", df.sigmoid, F64)]
# |ours - NumPy| <= rtol |NumPy| + atol: the approx.py bound plus NumPy's own error.
APPROX_TOL = {F32: {"rtol": 6e-7, "atol": 4 * 2.0**-149}, F64: {"rtol": 2e-15, "atol": 1e-322}}


def _threshold(name):
    return elementwise._min_size(name)


@pytest.mark.parametrize("name, build, dtype", EXACT_UNARY, ids=_id)
@SETTINGS
@given(data=st.data())
def test_exact_unary_ops_equal_numpy(name, build, dtype, data):
    ours, ref = kernels(build, [dtype])
    x = values(data, dtype, data.draw(sizes(_threshold(name)), label="shape"), -1e30, 1e30)
    with np.errstate(all="ignore"):
        assert_same(ours(x), ref(x))
        assert_same(ours(dtype(x.flat[0])), ref(dtype(x.flat[0])))   # NumPy scalars


@pytest.mark.parametrize("name, build, dtype", APPROX_UNARY, ids=_id)
@SETTINGS
@given(data=st.data())
def test_approx_unary_ops_within_bound(name, build, dtype, data):
    ours, ref = kernels(build, [dtype])
    lo = 1e-3 if name == "Log" else -80.0
    x = values(data, dtype, data.draw(sizes(_threshold(name)), label="shape"), lo, 80.0)
    with np.errstate(all="ignore"):
        got, want = ours(x), ref(x)
    assert_same(got, want, **APPROX_TOL[dtype])
    assert np.array_equal(np.isnan(got), np.isnan(want))


SPECIALS = [np.nan, np.inf, -np.inf, 0.0, -0.0, 1e-45, -1e-45, 1e-310, 3e38, -3e38, 1e300,
            -1e300, 88.7, 88.8, -88.8, -104.0, 709.0, 711.0, -746.0, 20.0, -20.0, 1.0]


@pytest.mark.parametrize("name, build, dtype", EXACT_UNARY + APPROX_UNARY,
                         ids=_id)
def test_unary_special_values(name, build, dtype):
    ours, ref = kernels(build, [dtype])
    with np.errstate(all="ignore"):
        x = np.resize(np.array(SPECIALS).astype(dtype), 20000)
        got, want = ours(x), ref(x)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    tol = APPROX_TOL[dtype] if (name, build, dtype) in APPROX_UNARY else {"rtol": 0, "atol": 0}
    assert_same(got, want, **tol)


EXACT_BINARY = [("AddV2", lambda x, y: x + y, F32), ("Sub", lambda x, y: x - y, F32),
                ("Mul", lambda x, y: x * y, F32), ("RealDiv", lambda x, y: x / y, F32),
                ("Maximum", df.maximum, F32), ("Minimum", df.minimum, F32),
                ("SquaredDifference", df.squared_difference, F32),
                ("TanhGrad", lambda y, dy: df.gradients(df.tanh(y), y, dy)[0], F32),
                ("SigmoidGrad", lambda y, dy: df.gradients(df.sigmoid(y), y, dy)[0], F32),
                ("ReluGrad", lambda x, dy: df.gradients(df.nn.relu(x), x, dy)[0], F32),
                ("Sub", lambda x, y: x - y, F64)]


def _grad_kernels(name, build, dtype):
    """Activation gradients are built through df.gradients: find the grad op itself."""
    with df.Graph().as_default() as g:
        a, b = df.placeholder(dtype), df.placeholder(dtype)
        build(a, b)
        op = next(o for o in g.get_operations() if o.type == name)
        ctx = KernelContext(op=op)
        return find_kernel(op, "CPU")(ctx), reference_kernel(ctx)


@pytest.mark.parametrize("name, build, dtype", EXACT_BINARY, ids=_id)
@SETTINGS
@given(data=st.data())
def test_binary_ops_equal_numpy_same_shape(name, build, dtype, data):
    ours, ref = _grad_kernels(name, build, dtype)
    shape = data.draw(sizes(_threshold(name)), label="shape")
    x, y = values(data, dtype, shape, -1e3, 1e3), values(data, dtype, shape, -1e3, 1e3)
    with np.errstate(all="ignore"):
        assert_same(ours(x, y), ref(x, y))


# (x shape, y shape): every compiled broadcast pattern, both orders, and two that fall
# back to NumPy (an outer broadcast; a higher-rank size-1 operand).
BROADCASTS = [((90, 64), ()), ((90, 64), (1,)), ((90, 64), (64,)), ((90, 64), (1, 64)),
              ((3, 30, 64), (64,)), ((90, 64), (90, 1)), ((3, 30, 64), (3, 30, 1)),
              ((90, 1), (1, 64)), ((5760,), (1, 1))]


@pytest.mark.parametrize("xs, ys", BROADCASTS)
@pytest.mark.parametrize("name, build, dtype", [
    ("Sub", lambda x, y: x - y, F32), ("RealDiv", lambda x, y: x / y, F64)],
    ids=["Sub", "RealDiv"])
def test_binary_broadcasts_equal_numpy(xs, ys, name, build, dtype):
    ours, ref = kernels(build, [dtype, dtype])
    rng = np.random.default_rng(0)
    x = (rng.standard_normal(xs) * 10).astype(dtype)
    y = (rng.standard_normal(ys) * 10).astype(dtype)
    y = y[()] if y.ndim == 0 else y      # a NumPy scalar, as the executor passes it
    y.flat[0] = 0.0
    with np.errstate(all="ignore"):
        assert_same(ours(x, y), ref(x, y))
        assert_same(ours(y, x), ref(y, x))


def test_non_contiguous_input_uses_numpy_and_matches():
    ours, ref = kernels(lambda x: df.tanh(x) * 2.0, [F32])  # the Mul
    x = np.random.default_rng(1).standard_normal((200, 300)).astype(F32).T
    assert_same(ours(x, F32(2)), ref(x, F32(2)))


@SETTINGS
@given(data=st.data())
def test_select_equals_numpy(data):
    ours, ref = kernels(lambda c, x, y: df.where(c, x, y), [df.bool, F32, F32])
    shape = data.draw(sizes(_dispatch.SELECT_MIN_SIZE), label="shape")
    x, y = values(data, F32, shape), values(data, F32, shape)
    c = np.random.default_rng(0).random(shape) < 0.5
    assert_same(ours(c, x, y), ref(c, x, y))


# -- reductions ----------------------------------------------------------------------------

REDUCTIONS = [("Sum", df.reduce_sum, F32), ("Mean", df.reduce_mean, F32),
              ("Max", df.reduce_max, F32), ("Sum", df.reduce_sum, F64)]
AXES = [None, 0, 1, -1, (0, 1), (1, 2), (0, 2), 2]


@pytest.mark.parametrize("name, reduce, dtype", REDUCTIONS, ids=_id)
@SETTINGS
@given(data=st.data())
def test_reductions_match_numpy(name, reduce, dtype, data):
    axis = data.draw(st.sampled_from(AXES), label="axis")
    keep = data.draw(st.booleans(), label="keep_dims")
    shape = data.draw(st.sampled_from([(2, 3, 4), (1, 1, 1), (3, 40, 20), (50, 2, 33),
                                       (2, 3000, 3), (1, 1, 5000)]), label="shape")
    ours, ref = kernels(lambda x: reduce(x, axis=axis, keepdims=keep), [dtype])
    x = values(data, dtype, shape, -10, 10, specials=data.draw(st.booleans(), label="nan"))
    got, want = ours(x), ref(x)
    if name == "Max":
        assert_same(got, want)
        return
    # Sums: summation order differs from NumPy's pairwise sum. Bound the difference by
    # the sum of magnitudes along the same axes times a few units of rounding.
    scale = np.sum(np.abs(x).astype(F64), axis=axis, keepdims=keep)
    if name == "Mean":
        scale = scale / (x.size / max(np.size(scale), 1))
    eps = np.finfo(dtype).eps
    assert type(got) is type(want) and got.dtype == want.dtype
    assert np.shape(got) == np.shape(want)
    diff = np.abs(got.astype(F64) - want)
    ok = (diff <= 8 * eps * scale + 1e-30) | (np.isnan(got) & np.isnan(want)) | (got == want)
    assert np.all(ok), (got, want)


SUM_TO_SHAPE = [((1797, 64), (64,)), ((40, 30), (1, 30)), ((2, 30, 40), (40,)),
                ((3, 40, 20), (3, 1, 1)), ((50, 33), ()), ((3, 40, 20), (40, 1)),
                ((3, 40, 20), (3, 40, 20)), ((2, 3), (3,))]


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("grad_shape, shape", SUM_TO_SHAPE, ids=str)
def test_sum_to_shape_matches_numpy(grad_shape, shape, dtype):
    from dataflow.ops import grad_ops
    ours, ref = kernels(lambda g, s: grad_ops.sum_to_shape(g, s), [dtype, df.int32])
    g = np.random.default_rng(3).uniform(-10, 10, grad_shape).astype(dtype)
    target = np.array(shape, np.int32)
    got, want = ours(g, target), ref(g, target)
    assert type(got) is type(want) and got.dtype == want.dtype
    assert np.shape(got) == np.shape(want) == shape
    # Summation order differs from NumPy's pairwise sum: a few units of rounding.
    scale = ref(np.abs(g).astype(F64), target)
    np.testing.assert_array_less(np.abs(got.astype(F64) - want),
                                 8 * np.finfo(dtype).eps * scale + 1e-30)


# -- softmax and cross-entropy ---------------------------------------------------------------

NN_TOL = {F32: {"rtol": 2e-6, "atol": 1e-7}, F64: {"rtol": 1e-13, "atol": 1e-15}}


@pytest.mark.parametrize("build", [df.nn.softmax, df.nn.log_softmax], ids=["softmax", "log"])
@SETTINGS
@given(data=st.data())
def test_softmax_matches_numpy(build, data):
    ours, ref = kernels(build, [F32])
    shape = data.draw(st.sampled_from([(1,), (3, 5), (200, 10), (4, 3, 50), (2, 3000)]))
    x = values(data, F32, shape, -30, 30, specials=False)
    tol = dict(NN_TOL[F32])
    if build is df.nn.log_softmax:
        # log(sum(exp(x - max))) takes the log of a sum >= 1 whose terms the kernel adds
        # in a different order from NumPy's pairwise sum: the two sums differ by a few
        # ulps of their value, and the log turns that into an *absolute* difference of a
        # few ulps of 1.0 (one ulp is 1.19e-7), which no relative bound covers for the
        # entries near 0. Eight ulps of 1.0 bounds the rounding of sums up to 3000 terms.
        tol["atol"] = 8 * float(np.finfo(np.float32).eps)
    assert_same(ours(x), ref(x), **tol)
    x.flat[0] = np.nan
    with np.errstate(all="ignore"):
        assert_same(ours(x), ref(x), **tol)


@pytest.mark.parametrize("dtype", [F32, F64])
@SETTINGS
@given(data=st.data())
def test_softmax_xent_matches_numpy(dtype, data):
    ours, ref = kernels(lambda z, y: df.nn.softmax_cross_entropy_with_logits(labels=y, logits=z),
                        [dtype, dtype])
    shape = data.draw(st.sampled_from([(10,), (3, 5), (200, 10), (4, 3, 50), (2, 3000)]))
    z = values(data, dtype, shape, -30, 30, specials=False)
    y = np.random.default_rng(0).random(shape).astype(dtype)
    y /= y.sum(axis=-1, keepdims=True)
    assert_same(ours(z, y), ref(z, y), **NN_TOL[dtype])


@pytest.mark.parametrize("shape", [(1797, 10), (30, 100)], ids=["short-rows", "long-rows"])
def test_softmax_xent_both_row_kernels_match_numpy(shape):
    ours, ref = kernels(lambda z, y: df.nn.softmax_cross_entropy_with_logits(labels=y, logits=z),
                        [F32, F32])
    rng = np.random.default_rng(1)
    z = (rng.standard_normal(shape) * 5).astype(F32)
    y = np.eye(shape[1], dtype=F32)[rng.integers(0, shape[1], shape[0])]
    # A loss near 0 is z_y - logsumexp(z): absolute rounding of a few ulps of |z|.
    tol = dict(rtol=2e-6, atol=8 * np.finfo(F32).eps * np.abs(z).max())
    assert_same(ours(z, y), ref(z, y), **tol)
    z[0, 0], z[1, :] = np.nan, -np.inf
    with np.errstate(all="ignore"):
        assert_same(ours(z, y), ref(z, y), **tol)


@pytest.mark.parametrize("label_dtype", [np.int32, np.int64])
@pytest.mark.parametrize("dtype, shape", [(F32, (64, 10)), (F64, (30, 100)), (F32, (4, 3, 7))])
def test_sparse_softmax_xent_matches_numpy(dtype, shape, label_dtype):
    ours, ref = kernels(lambda z, y: df.nn.sparse_softmax_cross_entropy_with_logits(
        labels=y, logits=z), [dtype, label_dtype])
    rng = np.random.default_rng(2)
    z = (rng.standard_normal(shape) * 5).astype(dtype)
    y = rng.integers(0, shape[-1], shape[:-1]).astype(label_dtype)
    # A loss near 0 is logsumexp(z) - z_y: absolute rounding of a few ulps of |z|.
    tol = dict(rtol=NN_TOL[dtype]["rtol"], atol=8 * np.finfo(dtype).eps * np.abs(z).max())
    assert_same(ours(z, y), ref(z, y), **tol)
    flat = z.reshape(-1, shape[-1])
    flat[0, 0], flat[1, :] = np.nan, -np.inf
    with np.errstate(all="ignore"):
        assert_same(ours(z, y), ref(z, y), **tol)


def test_sparse_softmax_xent_label_out_of_range_raises_numpys_error():
    ours, _ = kernels(lambda z, y: df.nn.sparse_softmax_cross_entropy_with_logits(
        labels=y, logits=z), [F32, np.int64])
    z = np.zeros((40, 10), F32)
    y = np.zeros(40, np.int64)
    y[7] = 10
    with pytest.raises(df.errors.InvalidArgumentError, match="label value of 10 which is "
                       r"outside the valid range of \[0, 10\)"):
        ours(z, y)


def test_softmax_inf_and_nan_rows_match_numpy():
    ours, ref = kernels(df.nn.softmax, [F32])
    x = np.zeros((4, 40), F32)
    x[0, 3], x[1, 5], x[2, :] = np.nan, np.inf, -np.inf
    with np.errstate(all="ignore"):
        assert_same(ours(x), ref(x), **NN_TOL[F32])


# -- gather, one_hot -------------------------------------------------------------------------

@pytest.mark.parametrize("index_dtype", [np.int32, np.int64])
@SETTINGS
@given(data=st.data())
def test_gather_equals_numpy(index_dtype, data):
    axis = data.draw(st.sampled_from([0, 1, -1]), label="axis")
    ours, ref = kernels(lambda p, i: df.gather(p, i, axis=axis), [F32, index_dtype])
    shape = data.draw(st.sampled_from([(3, 4), (50, 200), (20, 30, 40)]), label="shape")
    p = values(data, F32, shape)
    n = shape[axis]
    idx = np.random.default_rng(0).integers(0, n, data.draw(
        st.sampled_from([(5,), (40,), (6, 7)]), label="indices")).astype(index_dtype)
    assert_same(ours(p, idx), ref(p, idx))


def test_gather_out_of_range_raises_like_numpy():
    ours, ref = kernels(lambda p, i: df.gather(p, i), [F32, np.int32])
    p = np.ones((100, 100), F32)
    idx = np.array([1, 2, 100, -1] * 20, np.int32)
    with pytest.raises(df.errors.InvalidArgumentError, match=r"indices = 100 is not in \[0, 100\)"):
        ours(p, idx)
    with pytest.raises(df.errors.InvalidArgumentError, match=r"indices = 100 is not in \[0, 100\)"):
        ref(p, idx)


@pytest.mark.parametrize("n", [7, 5000])
def test_one_hot_equals_numpy(n):
    ours, ref = kernels(lambda i: df.one_hot(i, 10, on_value=2.0, off_value=-1.0), [np.int64])
    idx = np.random.default_rng(0).integers(-2, 12, (n, 1)).astype(np.int64)
    assert_same(ours(idx), ref(idx))


# -- through a Session, threads, laziness, the disk cache -----------------------------------

def test_mlp_step_in_a_session_matches_numpy():
    rng = np.random.default_rng(0)
    xv = rng.standard_normal((300, 64)).astype(F32)
    yv = np.eye(10, dtype=F32)[rng.integers(0, 10, 300)]
    w1, w2 = (rng.standard_normal((64, 32)) * 0.3).astype(F32), \
        (rng.standard_normal((32, 10)) * 0.3).astype(F32)
    b1 = rng.standard_normal(32).astype(F32)
    with df.Graph().as_default():
        x, y = df.placeholder(F32, [None, 64]), df.placeholder(F32, [None, 10])
        W1, W2, B1 = df.constant(w1), df.constant(w2), df.constant(b1)
        h = df.tanh(df.matmul(x, W1) + B1)
        loss = df.reduce_mean(df.nn.softmax_cross_entropy_with_logits(
            labels=y, logits=df.matmul(h, W2)))
        grads = df.gradients(loss, [W1, B1, W2])
        with df.Session() as sess:
            got_loss, got = sess.run(loss, {x: xv, y: yv}), sess.run(grads, {x: xv, y: yv})
    hv = np.tanh(xv @ w1 + b1)
    z = hv @ w2
    z = z - z.max(axis=1, keepdims=True)
    p = np.exp(z) / np.exp(z).sum(axis=1, keepdims=True)
    want_loss = np.mean(-np.sum(yv * np.log(p), axis=1))
    dz = (p - yv) / len(xv)
    dh = dz @ w2.T * (1 - hv * hv)
    want = [xv.T @ dh, dh.sum(axis=0), hv.T @ dz]
    np.testing.assert_allclose(got_loss, want_loss, rtol=1e-5)
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)


def _jit_dispatchers():
    """Every compiled kernel of dataflow/kernels/numba_cpu and kernels.approx that Python calls
    (with its disk cache on); scalar helpers only run inside those."""
    from numba.core.dispatcher import Dispatcher

    from dataflow.kernels import approx
    from dataflow.kernels.numba_cpu import (_array_jit, _elementwise_jit, _nn_jit, _reduction_jit,
                                   _training_jit)
    found = [_elementwise_jit.unary_loop("Tanh")]
    found += [_elementwise_jit.binary_loop("AddV2", p) for p in elementwise.PATTERNS]
    for mod in (approx, _array_jit, _elementwise_jit, _nn_jit, _reduction_jit, _training_jit):
        found += [v for v in vars(mod).values() if isinstance(v, Dispatcher)
                  and v.stats.cache_path is not None]
    return found


def test_compiled_kernels_release_the_gil():
    ours, _ = kernels(df.tanh, [F32])
    x = np.ones(100_000, F32)
    results = []
    threads = [threading.Thread(target=lambda: results.append(ours(x))) for _ in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 2
    dispatchers = _jit_dispatchers()
    assert dispatchers
    for d in dispatchers:
        assert d.targetoptions.get("nogil") is True, d.py_func.__qualname__


_PROBE = """
import gc, sys
import dataflow
mods = sorted(m for m in sys.modules if m.startswith("dataflow.kernels.numba_cpu._")
              and m != "dataflow.kernels.numba_cpu._dispatch")
compiled = []
if "numba" in sys.modules:
    from numba.core.dispatcher import Dispatcher
    compiled = [d.py_func.__qualname__ for d in gc.get_objects()
                if isinstance(d, Dispatcher) and d.signatures]
print(mods, compiled)
"""


def test_import_dataflow_compiles_no_kernel():
    out = subprocess.run([sys.executable, "-c", _PROBE], cwd=REPO, capture_output=True,
                         text=True, check=True, env={**os.environ, "PYTHONPATH": REPO})
    assert out.stdout.strip() == "[] []", out.stdout + out.stderr


_CACHE_PROBE = """
import numpy as np
import dataflow as df
from dataflow.kernels.numba_cpu import _elementwise_jit as J
x = df.placeholder(df.float32)
with df.Session() as s:
    s.run(df.tanh(x), {x: np.ones(10000, np.float32)})
st = J.unary_loop("Tanh").stats
print(sum(st.cache_hits.values()), sum(st.cache_misses.values()))
"""


def test_second_process_loads_kernels_from_the_disk_cache():
    env = {**os.environ, "PYTHONPATH": REPO}
    runs = [subprocess.run([sys.executable, "-c", _CACHE_PROBE], cwd=REPO, capture_output=True,
                           text=True, check=True, env=env).stdout.split() for _ in range(2)]
    assert runs[1] == ["1", "0"], runs   # the second process compiles nothing


# -- optimizer ------------------------------------------------------------------------------

@pytest.mark.parametrize("shape", [(10,), (64, 64)])
def test_apply_adam_equals_numpy(shape):
    from dataflow.kernels.resources import VariableCell
    with df.Graph().as_default() as g:
        w = df.Variable(np.zeros(shape, F32))
        df.train.AdamOptimizer(0.01).minimize(df.reduce_sum(w * w))
        op = next(o for o in g.get_operations() if o.type == "ResourceApplyAdam")
    ctx = KernelContext(op=op)
    ours, ref = find_kernel(op, "CPU")(ctx), reference_kernel(ctx)
    rng = np.random.default_rng(0)
    start = [rng.standard_normal(shape).astype(F32) for _ in range(3)]
    start[2] = np.abs(start[2])                                  # v >= 0
    grad = rng.standard_normal(shape).astype(F32)
    scalars = [F32(0.9**3), F32(0.999**3), F32(0.01), F32(0.9), F32(0.999), F32(1e-8)]
    results = []
    for kernel in (ours, ref):
        cells = [VariableCell(n, df.float32, df.TensorShape(shape)) for n in "wmv"]
        for c, s in zip(cells, start):
            c.store(s)
        for _ in range(3):
            kernel(*cells, *scalars, grad)
        results.append([c.read() for c in cells])
    for got, want in zip(*results):
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
        assert not got.flags.writeable


def test_session_without_compiled_kernels_runs_the_numpy_kernels():
    g = df.Graph()
    with g.as_default():
        y = df.tanh(df.placeholder(df.float32, [None]))
    compiled = df.Session(graph=g)
    reference = df.Session(graph=g, config=df.ConfigProto(use_compiled_kernels=False))
    assert reference._kernels.kernel_for(y.op) is np.tanh
    assert compiled._kernels.kernel_for(y.op) is not np.tanh
    x = np.linspace(-3, 3, 20_000, dtype=np.float32)
    np.testing.assert_array_equal(reference.run(y, {y.op.inputs[0]: x}), np.tanh(x))
