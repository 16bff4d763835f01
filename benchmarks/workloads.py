"""The benchmark workloads, each as a dataflow graph and a plain Python/NumPy baseline.

Each ``make_*`` function returns ``(ours, baseline, iterations)``: two zero-argument
callables computing the same result, and the loop trip count used to report
per-iteration times. Both are shared by the pytest-benchmark file and the table
script, so the figures in RESULTS.md come from the same code as the tests.
"""
from __future__ import annotations

import numpy as np

import dataflow as df


def make_scalar_loop(n=100_000):
    """``i = 0; while i < n: i = i + 1``."""
    g = df.Graph()
    with g.as_default():
        result = df.while_loop(lambda i: i < n, lambda i: i + 1, [0])
    sess = df.Session(graph=g)

    def ours():
        return sess.run(result)

    def baseline():
        i = 0
        while i < n:
            i = i + 1
        return i

    return ours, baseline, n


def make_rnn_loop(steps=1000, batch=32, hidden=256, seed=0):
    """``h = tanh(h @ W + x)`` for ``steps`` steps, float32."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((hidden, hidden)) / np.sqrt(hidden)).astype(np.float32)
    x = rng.standard_normal((batch, hidden)).astype(np.float32)
    h0 = np.zeros((batch, hidden), np.float32)
    g = df.Graph()
    with g.as_default():
        wt, xt = df.constant(w), df.placeholder(df.float32, [batch, hidden])
        _, h = df.while_loop(lambda i, h: i < steps,
                             lambda i, h: (i + 1, df.tanh(df.matmul(h, wt) + xt)),
                             (0, df.constant(h0)))
    sess = df.Session(graph=g)

    def ours():
        return sess.run(h, feed_dict={xt: x})

    def baseline():
        hh = h0
        for _ in range(steps):
            hh = np.tanh(hh @ w + x)
        return hh

    return ours, baseline, steps


def make_cond_in_while(n=10_000):
    """A loop whose body branches on the parity of the counter."""
    g = df.Graph()
    with g.as_default():
        def body(i, acc):
            acc = df.cond(df.equal(i % 2, 0), lambda: acc + 3, lambda: acc - 1)
            return i + 1, acc
        _, result = df.while_loop(lambda i, acc: i < n, body, (0, 0))
    sess = df.Session(graph=g)

    def ours():
        return sess.run(result)

    def baseline():
        i = acc = 0
        while i < n:
            acc = acc + 3 if i % 2 == 0 else acc - 1
            i += 1
        return acc

    return ours, baseline, n


def make_small_run():
    """``sess.run`` of an already-planned small graph with one feed: the fixed overhead."""
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [])
        y = x * 2.0 + 1.0
    sess = df.Session(graph=g)
    feed = {x: np.float32(3.0)}

    def ours():
        return sess.run(y, feed_dict=feed)

    def baseline():
        return np.float32(3.0) * 2.0 + 1.0

    return ours, baseline, 1
