"""Shared helpers of the op tests: build an op on constants or placeholders and run it,
check gradients against finite differences, and float tolerances derived from the
computation.

Float results computed in another order than the reference (a dot product, a sum, a
reduction) are compared with a bound from the rounding analysis of summation (Higham,
*Accuracy and Stability of Numerical Algorithms*, 2nd ed., section 3.1): a sum of ``k``
terms computed in floating point in any order is within ``gamma_k * sum(|terms|)`` of
the exact sum, ``gamma_k = k*u / (1 - k*u)`` with ``u`` half the machine epsilon, so
two such sums are within twice that of each other. A fixed ``atol`` fails on large or
long sums and hides errors on small ones.

Gradients: ``check_gradients(build, values)`` builds ``y = build(*xs)`` on float64
placeholders fed with ``values``, asks ``df.gradients`` for the gradients of
``sum(y * w)`` (``w`` a random ``grad_ys``), and compares them with central
differences of the same scalar computed from forward runs only. Placeholders can have
fully known static shapes, unknown dimensions (``partial=True``) or an unknown rank
(``partial="unknown_rank"``), so the run-time shape paths of the gradient functions
are exercised too.

Random values come from generators seeded through ``tests/conftest.py``: a failing run
replays with the seed it prints.
"""
from __future__ import annotations

import numpy as np

import dataflow as df

# How an input reaches the op: a constant, or a placeholder with a full, partly
# unknown or unknown static shape (so shape inference is tested at every precision).
MODES = ["constant", "placeholder", "partial", "unknown"]

# A run that hangs (a broken loop) fails after this long instead of blocking the suite.
NO_HANG = df.RunOptions(timeout_in_ms=10_000)

# Finite differences: step, and how close the analytic gradient must be.
EPS = 1e-6
RTOL = 1e-5
ATOL = 1e-6


# -- building and running ------------------------------------------------------------------------

def run(fetches, feed_dict=None, initialize_variables=False):
    """Run ``fetches`` once in a fresh Session on the default graph (with a hang guard),
    after the variable initializers when ``initialize_variables``.

    >>> with df.Graph().as_default():
    ...     float(run(df.constant(2.0) * 3.0))
    6.0
    """
    with df.Session() as sess:
        if initialize_variables:
            sess.run(df.global_variables_initializer())
        return sess.run(fetches, feed_dict, options=NO_HANG)


def make_input(value, mode):
    """A tensor for ``value`` (constant or placeholder per ``mode``) and its feed."""
    value = np.asarray(value)
    dtype = df.as_dtype(value.dtype)
    if mode == "constant":
        return df.constant(value, dtype=dtype), {}
    shape = {"placeholder": value.shape, "partial": [None] * value.ndim,
             "unknown": None}[mode]
    p = df.placeholder(dtype, shape=shape)
    return p, {p: value}


def run_op(build, values, input_modes):
    """Build ``build(*inputs)`` in a fresh graph and run it; returns (tensor(s), result).

    >>> out, value = run_op(lambda a: a * 2.0, [np.float32(3)], ["placeholder"])
    >>> out.op.type, float(value)
    ('Mul', 6.0)
    """
    with df.Graph().as_default():
        tensors, feed = [], {}
        for value, mode in zip(values, input_modes):
            t, f = make_input(value, mode)
            tensors.append(t)
            feed.update(f)
        out = build(*tensors)
        with df.Session() as sess:
            return out, sess.run(out, feed_dict=feed, options=NO_HANG)


def ops_of_type(graph, op_type):
    """The operations of ``graph`` whose type is ``op_type``, in creation order."""
    return [op for op in graph.get_operations() if op.type == op_type]


# -- float tolerances ---------------------------------------------------------------------------

# Elementwise results of one rounding step (or a few): a few units in the last place.
ELEMENTWISE_TOLERANCE = {np.dtype(np.float32): {"rtol": 2e-5, "atol": 1e-5},
                         np.dtype(np.float64): {"rtol": 1e-10, "atol": 1e-10}}


def tolerance(dtype):
    """``assert_allclose`` tolerances for elementwise results of ``dtype`` (exact for
    integers and bools)."""
    return ELEMENTWISE_TOLERANCE.get(np.dtype(dtype), {"rtol": 0, "atol": 0})


def gamma(k, dtype):
    """Higham's ``gamma_k = k*u / (1 - k*u)``: the relative error bound of ``k`` rounded
    float operations in ``dtype`` (``u`` = eps / 2)."""
    u = float(np.finfo(dtype).eps) / 2
    return k * u / (1 - k * u)


def sum_bound(magnitude, k, dtype):
    """How far two ``dtype`` sums of the same ``k`` terms, added in different orders, may
    be apart elementwise: ``2 * gamma_k * magnitude``, ``magnitude`` the sum of the
    terms' absolute values, plus the smallest normal number (for underflow); zero for
    integer dtypes.

    >>> float(sum_bound(np.float64(10.0), 4, np.float32))  # 4 float32 terms of |sum| 10
    4.768...e-06
    """
    magnitude = np.asarray(magnitude, np.float64)
    if np.dtype(dtype).kind != "f":
        return np.zeros_like(magnitude)  # integer sums are exact (or wrap alike)
    return 2 * gamma(max(int(k), 1), dtype) * magnitude + float(np.finfo(dtype).tiny)


def matmul_bound(a, b, dtype, transpose_a=False, transpose_b=False):
    """``sum_bound`` of the product ``op(a) @ op(b)``: every element is a dot product of
    ``k`` terms ``a_ik * b_kj``, with magnitude ``(|a| @ |b|)_ij``."""
    a = np.abs(np.asarray(a, np.float64))
    b = np.abs(np.asarray(b, np.float64))
    a, b = (a.T if transpose_a else a), (b.T if transpose_b else b)
    return sum_bound(a @ b, a.shape[-1], dtype)


def reduction_bound(op_type, x, axis, keepdims, dtype):
    """Bound on the difference of two ``dtype`` results of reduction ``op_type`` over
    ``axis`` computed in different orders: Sum and Mean by ``sum_bound`` (Mean adds the
    division's rounding), Prod relatively (``k`` multiplications), Max and Min exactly."""
    x64 = np.asarray(x, np.float64)
    axes = None if axis is None else tuple(np.atleast_1d(axis).tolist())
    k = x64.size // max(np.sum(np.abs(x64), axis=axes, keepdims=keepdims).size, 1)
    if op_type in ("Sum", "Mean"):
        magnitude = np.sum(np.abs(x64), axis=axes, keepdims=keepdims)
        if op_type == "Sum":
            return sum_bound(magnitude, k, dtype)
        return sum_bound(magnitude / max(k, 1), k + 1, dtype)
    if op_type == "Prod":
        return sum_bound(np.abs(np.prod(x64, axis=axes, keepdims=keepdims)), k, dtype)
    return np.zeros_like(np.sum(x64, axis=axes, keepdims=keepdims))


def assert_within(got, want, bound, err_msg=""):
    """``|got - want| <= bound`` elementwise (NaNs in the same places); the message names
    the worst element and its bound."""
    got64 = np.asarray(got, np.float64)
    want64 = np.asarray(want, np.float64)
    assert got64.shape == want64.shape, (got64.shape, want64.shape, err_msg)
    both_nan = np.isnan(got64) & np.isnan(want64)
    with np.errstate(invalid="ignore"):
        diff = np.where(both_nan | (got64 == want64), 0.0, np.abs(got64 - want64))
    excess = diff - np.broadcast_to(bound, diff.shape)
    if np.any(~(excess <= 0)):
        worst = np.unravel_index(np.nanargmax(np.where(np.isnan(excess), np.inf, excess)),
                                 diff.shape) if diff.ndim else ()
        raise AssertionError(
            f"{err_msg} at {worst}: got {got64[worst]!r}, want {want64[worst]!r}, "
            f"|diff| {diff[worst]:.3g} > bound {np.broadcast_to(bound, diff.shape)[worst]:.3g}")


# -- gradients against finite differences -------------------------------------------------------

def fresh_rng():
    """A generator and its seed, drawn from NumPy's global generator (seeded per test by
    ``tests/conftest.py``, so the whole draw replays from the printed seed); the seed
    goes into failure messages."""
    seed = int(np.random.randint(0, 2 ** 32, dtype=np.uint64))
    return np.random.default_rng(seed), seed


def numeric_gradient(fn, value):
    """Central differences of the scalar ``fn(value)`` with respect to each element.

    >>> numeric_gradient(lambda v: float(np.sum(v ** 2)), np.array([1.0, -2.0])).round(6)
    array([ 2., -4.])
    """
    value = np.asarray(value, dtype=np.float64)
    grad = np.zeros_like(value)
    for idx in np.ndindex(value.shape):
        plus, minus = value.copy(), value.copy()
        plus[idx] += EPS
        minus[idx] -= EPS
        grad[idx] = (fn(plus) - fn(minus)) / (2 * EPS)
    return grad


def _placeholder(value, partial):
    """``partial``: False (full static shape), True (rank only) or "unknown_rank" (nothing)."""
    if partial == "unknown_rank":
        shape = None
    else:
        shape = [None] * np.ndim(value) if partial else np.shape(value)
    return df.placeholder(df.float64, shape=shape)


def _assert_static_shapes(xs, grads, partial):
    """A gradient's static shape is compatible with its source's, and as fully known."""
    for i, (x, g) in enumerate(zip(xs, grads)):
        if g is not None:
            assert g.shape.is_compatible_with(x.shape), f"input {i}: {g.shape} vs {x.shape}"
            if not partial:
                assert g.shape == x.shape, f"input {i}: static {g.shape} vs {x.shape}"


def _run_some(sess, tensors, feed):
    """``sess.run`` of a list that may hold None (kept as None)."""
    values = iter(sess.run([t for t in tensors if t is not None], feed, options=NO_HANG))
    return [None if t is None else next(values) for t in tensors]


def _weighted_sum_fn(sess, y, w, xs, values, i):
    """``v -> sum(y * w)`` with input ``i`` fed ``v`` and the others their values."""
    def f(v):
        feed = dict(zip(xs, values))
        feed[xs[i]] = v
        return float(np.sum(np.asarray(sess.run(y, feed, options=NO_HANG)) * w))
    return f


def check_gradients(build, values, partial=False, rng=None, seed=None,
                    none_means_zero=False):
    """Assert that ``df.gradients`` of ``build(*xs)`` matches finite differences.

    ``values`` are the float64 inputs; returns the analytic gradients. With
    ``none_means_zero`` a missing (None) gradient passes where the finite
    differences are zero (second derivatives of piecewise-linear ops).

    >>> [g] = check_gradients(lambda x: x * x, [np.array([1.0, 3.0])])  # 2x * grad_ys
    >>> g.shape, g.dtype
    ((2,), dtype('float64'))
    """
    if rng is None:
        rng, seed = fresh_rng()
    values = [np.asarray(v, dtype=np.float64) for v in values]
    with df.Graph().as_default():
        xs = [_placeholder(v, partial) for v in values]
        y = build(*xs)
        gy = df.placeholder(df.float64, shape=y.shape)
        # A sparse gradient (IndexedSlices, of a gather) is checked as the dense one.
        grads = [df.convert_to_tensor(g) if isinstance(g, df.IndexedSlices) else g
                 for g in df.gradients(y, xs, grad_ys=gy)]
        _assert_static_shapes(xs, grads, partial)
        with df.Session() as sess:
            feed = dict(zip(xs, values))
            w = rng.standard_normal(np.shape(sess.run(y, feed, options=NO_HANG)))
            analytic = _run_some(sess, grads, {**feed, gy: w})
            for i, (v, g) in enumerate(zip(values, analytic)):
                expected = numeric_gradient(_weighted_sum_fn(sess, y, w, xs, values, i), v)
                where = f"gradient of input {i} (seed {seed}, inputs {values})"
                if g is None:
                    assert none_means_zero, f"no {where}"
                    np.testing.assert_allclose(expected, 0.0, atol=ATOL, err_msg=where)
                    continue
                assert np.shape(g) == v.shape, f"shape {np.shape(g)} != {v.shape}: {where}"
                assert np.asarray(g).dtype == np.float64, f"dtype {np.asarray(g).dtype}: {where}"
                np.testing.assert_allclose(g, expected, rtol=RTOL, atol=ATOL, err_msg=where)
    return analytic
