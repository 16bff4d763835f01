"""Finite-difference gradient checker for the autodiff tests.

``check_gradients(build, values)`` builds ``y = build(*xs)`` on float64
placeholders fed with ``values``, asks ``df.gradients`` for the gradients of
``sum(y * w)`` (``w`` a random ``grad_ys``), and compares them with central
differences of the same scalar computed from forward runs only. Placeholders
can have fully known static shapes, unknown dimensions (``partial=True``) or an
unknown rank (``partial="unknown_rank"``), so the run-time shape paths of the
gradient functions are exercised too.
"""
from __future__ import annotations

import numpy as np

import dataflow as df

EPS = 1e-6
RTOL = 1e-5
ATOL = 1e-6


def fresh_rng():
    """A generator seeded from fresh entropy; the seed is returned for failure messages."""
    seed = int(np.random.SeedSequence().entropy % (2 ** 32))
    return np.random.default_rng(seed), seed


def numeric_gradient(fn, value):
    """Central differences of the scalar ``fn(value)`` with respect to each element."""
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
    values = iter(sess.run([t for t in tensors if t is not None], feed))
    return [None if t is None else next(values) for t in tensors]


def _weighted_sum_fn(sess, y, w, xs, values, i):
    """``v -> sum(y * w)`` with input ``i`` fed ``v`` and the others their values."""
    def f(v):
        feed = dict(zip(xs, values))
        feed[xs[i]] = v
        return float(np.sum(np.asarray(sess.run(y, feed)) * w))
    return f


def check_gradients(build, values, partial=False, rng=None, seed=None,
                    none_means_zero=False):
    """Assert that ``df.gradients`` of ``build(*xs)`` matches finite differences.

    ``values`` are the float64 inputs; returns the analytic gradients. With
    ``none_means_zero`` a missing (None) gradient passes where the finite
    differences are zero (second derivatives of piecewise-linear ops).
    """
    if rng is None:
        rng, seed = fresh_rng()
    values = [np.asarray(v, dtype=np.float64) for v in values]
    with df.Graph().as_default():
        xs = [_placeholder(v, partial) for v in values]
        y = build(*xs)
        gy = df.placeholder(df.float64, shape=y.shape)
        grads = df.gradients(y, xs, grad_ys=gy)
        _assert_static_shapes(xs, grads, partial)
        with df.Session() as sess:
            feed = dict(zip(xs, values))
            w = rng.standard_normal(np.shape(sess.run(y, feed)))
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
