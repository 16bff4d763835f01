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


def check_gradients(build, values, partial=False, rng=None, seed=None):
    """Assert that ``df.gradients`` of ``build(*xs)`` matches finite differences.

    ``values`` are the float64 inputs; returns the analytic gradients.
    """
    if rng is None:
        rng, seed = fresh_rng()
    values = [np.asarray(v, dtype=np.float64) for v in values]
    with df.Graph().as_default():
        xs = [_placeholder(v, partial) for v in values]
        y = build(*xs)
        gy = df.placeholder(df.float64, shape=y.shape)
        grads = df.gradients(y, xs, grad_ys=gy)
        for i, (x, g) in enumerate(zip(xs, grads)):
            # The static shape of a gradient is at least as known as its source's.
            if g is not None:
                assert g.shape.is_compatible_with(x.shape), f"input {i}: {g.shape} vs {x.shape}"
                if not partial:
                    assert g.shape == x.shape, f"input {i}: static {g.shape} vs {x.shape}"
        with df.Session() as sess:
            feed = dict(zip(xs, values))
            y0 = np.asarray(sess.run(y, feed))
            w = rng.standard_normal(y0.shape)
            feed[gy] = w
            analytic = sess.run([g for g in grads if g is not None], feed)
            analytic = iter(analytic)
            analytic = [None if g is None else next(analytic) for g in grads]

            def scalar(i):
                def f(v):
                    run_feed = dict(zip(xs, values))
                    run_feed[xs[i]] = v
                    return float(np.sum(np.asarray(sess.run(y, run_feed)) * w))
                return f

            for i, (v, g) in enumerate(zip(values, analytic)):
                assert g is not None, f"no gradient for input {i} (seed {seed})"
                assert np.shape(g) == v.shape, \
                    f"input {i}: gradient shape {np.shape(g)} != {v.shape} (seed {seed})"
                assert np.asarray(g).dtype == np.float64, f"input {i}: dtype {np.asarray(g).dtype}"
                expected = numeric_gradient(scalar(i), v)
                np.testing.assert_allclose(
                    g, expected, rtol=RTOL, atol=ATOL,
                    err_msg=f"gradient of input {i} (seed {seed}, inputs {values})")
    return analytic
