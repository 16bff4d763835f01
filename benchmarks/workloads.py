"""The benchmark workloads, each as a dataflow graph and a plain Python/NumPy baseline.

Each ``make_*`` function returns ``(ours, baseline, iterations)``: two zero-argument
callables computing the same result, and the loop trip count used to report
per-iteration times. Both are shared by the pytest-benchmark file and the table
script, so the figures in RESULTS.md come from the same code as the tests.
"""
from __future__ import annotations

import pathlib
import types

import numpy as np

import dataflow as df


def make_scalar_loop(n=100_000, config=None):
    """``i = 0; while i < n: i = i + 1``."""
    g = df.Graph()
    with g.as_default():
        result = df.while_loop(lambda i: i < n, lambda i: i + 1, [0])
    sess = df.Session(graph=g, config=config)

    def ours():
        return sess.run(result)

    def baseline():
        i = 0
        while i < n:
            i = i + 1
        return i

    return ours, baseline, n


def rnn_data(batch=32, hidden=256, seed=0):
    """``(W, x, h0)`` of the RNN workloads, float32."""
    rng = np.random.default_rng(seed)
    w = (rng.standard_normal((hidden, hidden)) / np.sqrt(hidden)).astype(np.float32)
    x = rng.standard_normal((batch, hidden)).astype(np.float32)
    return w, x, np.zeros((batch, hidden), np.float32)


def make_rnn_loop(steps=1000, batch=32, hidden=256, seed=0, config=None):
    """``h = tanh(h @ W + x)`` for ``steps`` steps, float32."""
    w, x, h0 = rnn_data(batch, hidden, seed)
    g = df.Graph()
    with g.as_default():
        wt, xt = df.constant(w), df.placeholder(df.float32, [batch, hidden])
        _, h = df.while_loop(lambda i, h: i < steps,
                             lambda i, h: (i + 1, df.tanh(df.matmul(h, wt) + xt)),
                             (0, df.constant(h0)))
    sess = df.Session(graph=g, config=config)

    def ours():
        return sess.run(h, feed_dict={xt: x})

    def baseline():
        hh = h0
        for _ in range(steps):
            hh = np.tanh(hh @ w + x)
        return hh

    return ours, baseline, steps


def make_cond_in_while(n=10_000, config=None):
    """A loop whose body branches on the parity of the counter."""
    g = df.Graph()
    with g.as_default():
        def body(i, acc):
            acc = df.cond(df.equal(i % 2, 0), lambda: acc + 3, lambda: acc - 1)
            return i + 1, acc
        _, result = df.while_loop(lambda i, acc: i < n, body, (0, 0))
    sess = df.Session(graph=g, config=config)

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


def make_rnn_grad(steps=1000, batch=32, hidden=256, seed=0, config=None):
    """Forward and backward of ``h = tanh(h @ W + x)``: the gradient of ``sum(h_T)`` w.r.t. W.

    The baseline is the same computation written by hand in NumPy (forward keeping
    every h, then the reverse sweep).
    """
    w, x, h0 = rnn_data(batch, hidden, seed)
    g = df.Graph()
    with g.as_default():
        wt = df.placeholder(df.float32, [hidden, hidden])
        xt = df.placeholder(df.float32, [batch, hidden])
        _, h = df.while_loop(lambda i, h: i < steps,
                             lambda i, h: (i + 1, df.tanh(df.matmul(h, wt) + xt)),
                             (0, df.constant(h0)))
        (grad_w,) = df.gradients(df.reduce_sum(h), [wt])
    sess = df.Session(graph=g, config=config)
    feed = {wt: w, xt: x}

    def ours():
        return sess.run(grad_w, feed_dict=feed)

    def baseline():
        hs = [h0]
        for _ in range(steps):
            hs.append(np.tanh(hs[-1] @ w + x))
        dw = np.zeros_like(w)
        dh = np.ones_like(h0)
        for t in range(steps, 0, -1):
            dz = dh * (1 - hs[t] * hs[t])
            dw += hs[t - 1].T @ dz
            dh = dz @ w.T
        return dw

    return ours, baseline, steps, g


def make_cond_in_while_grad(n=10_000, config=None):
    """The cond-in-while loop with its gradient: d(acc)/d(w) where the branches use w."""
    g = df.Graph()
    with g.as_default():
        w = df.placeholder(df.float64, [])

        def body(i, acc):
            acc = df.cond(df.equal(i % 2, 0), lambda: acc + w, lambda: acc * 0.5)
            return i + 1, acc
        _, result = df.while_loop(lambda i, acc: i < n, body, (0, df.constant(0.0, df.float64)))
        (grad_w,) = df.gradients(result, [w])
    sess = df.Session(graph=g, config=config)

    def ours():
        return sess.run(grad_w, feed_dict={w: 1.5})

    def baseline():
        # d acc / d w by forward-mode: the same recurrence on the derivative.
        i, d = 0, 0.0
        while i < n:
            d = d + 1.0 if i % 2 == 0 else d * 0.5
            i += 1
        return d

    return ours, baseline, n


def mlp_data(seed=0):
    """Data, one-hot labels and initial weights of the digits-shaped 64-64-64-10 MLP
    (1797 x 64, synthetic values: the step's cost does not depend on them)."""
    rng = np.random.default_rng(seed)
    n, sizes = 1797, (64, 64, 64, 10)
    data = rng.random((n, 64)).astype(np.float32)
    labels = np.eye(10, dtype=np.float32)[rng.integers(0, 10, n)]
    init = [(rng.standard_normal((a, b)) * 0.1).astype(np.float32)
            for a, b in zip(sizes[:-1], sizes[1:])]
    return data, labels, init


def make_mlp_adam_step(seed=0, config=None):
    """One full-batch Adam step of the 64-64-64-10 sigmoid MLP on the digits data shape
    (1797 x 64, synthetic values: the step's cost does not depend on them)."""
    data, labels, init = mlp_data(seed)
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [None, 64])
        y = df.placeholder(df.float32, [None, 10])
        h = x
        for k, w0 in enumerate(init):
            w = df.Variable(w0)
            b = df.Variable(np.zeros(w0.shape[1], np.float32))
            h = df.matmul(h, w) + b
            if k < len(init) - 1:
                h = df.sigmoid(h)
        loss = df.reduce_mean(df.nn.softmax_cross_entropy_with_logits(labels=y, logits=h))
        step = df.train.AdamOptimizer(0.001).minimize(loss)
        init_op = df.global_variables_initializer()
    sess = df.Session(graph=g, config=config)
    sess.run(init_op)
    feed = {x: data, y: labels}
    adam = _NumpyAdamMLP(init, data, labels)

    def ours():
        return sess.run(step, feed_dict=feed)

    def baseline():
        return adam.step()

    return ours, baseline, 1


class _NumpyAdamMLP:
    """The same MLP step written by hand in NumPy (forward, backward, Adam)."""

    def __init__(self, init, data, labels, lr=0.001, b1=0.9, b2=0.999, eps=1e-8):
        self.ws = [w.copy() for w in init]
        self.bs = [np.zeros(w.shape[1], np.float32) for w in init]
        self.params = self.ws + self.bs
        self.m = [np.zeros_like(p) for p in self.params]
        self.v = [np.zeros_like(p) for p in self.params]
        self.x, self.y, self.t = data, labels, 0
        self.lr, self.b1, self.b2, self.eps = lr, b1, b2, eps

    def grads(self):
        acts = [self.x]
        for k, (w, b) in enumerate(zip(self.ws, self.bs)):
            z = acts[-1] @ w + b
            acts.append(1 / (1 + np.exp(-z)) if k < len(self.ws) - 1 else z)
        z = acts[-1] - acts[-1].max(axis=1, keepdims=True)
        p = np.exp(z)
        p /= p.sum(axis=1, keepdims=True)
        dz = (p - self.y) / len(self.x)
        gw, gb = [None] * len(self.ws), [None] * len(self.ws)
        for k in range(len(self.ws) - 1, -1, -1):
            gw[k] = acts[k].T @ dz
            gb[k] = dz.sum(axis=0)
            if k:
                da = dz @ self.ws[k].T
                dz = da * acts[k] * (1 - acts[k])
        return gw + gb

    def step(self):
        self.t += 1
        lr_t = self.lr * np.sqrt(1 - self.b2 ** self.t) / (1 - self.b1 ** self.t)
        for p, g, m, v in zip(self.params, self.grads(), self.m, self.v):
            m *= self.b1
            m += (1 - self.b1) * g
            v *= self.b2
            v += (1 - self.b2) * g * g
            p -= lr_t * m / (np.sqrt(v) + self.eps)


# -- convolution: the examples/tf1/convnet.py training step and one conv2d layer -----------
EXAMPLES_TF1 = pathlib.Path(__file__).resolve().parents[1] / "examples" / "tf1"
CONV_SHAPES = {"x": (64, 8, 8, 16), "w": (3, 3, 16, 32)}   # a SAME 3x3 conv, 16 -> 32
CONVNET_BATCH = 64


def load_tf1_example(name, import_line=None):
    """``examples/tf1/<name>.py`` as a module; ``import_line`` replaces its
    ``import dataflow as tf`` (``"import tensorflow.compat.v1 as tf"`` runs the same
    program on TensorFlow)."""
    path = EXAMPLES_TF1 / f"{name}.py"
    source = path.read_text()
    if import_line is not None:
        source = source.replace("import dataflow as tf\n", import_line + "\n")
    module = types.ModuleType(f"tf1_{name}")
    module.__file__ = str(path)
    exec(compile(source, str(path), "exec"), module.__dict__)
    return module


def conv_data(seed=0):
    """Input, filter and output gradient of the benchmarked conv2d layer (float32)."""
    rng = np.random.default_rng(seed)
    x = rng.standard_normal(CONV_SHAPES["x"]).astype(np.float32)
    w = rng.standard_normal(CONV_SHAPES["w"]).astype(np.float32) * 0.1
    dy = rng.standard_normal(CONV_SHAPES["x"][:3] + CONV_SHAPES["w"][3:]).astype(np.float32)
    return x, w, dy


def convnet_batch(seed=0):
    """A digits-shaped batch for the convnet step (synthetic: the cost does not depend on
    the values)."""
    rng = np.random.default_rng(seed)
    return (rng.random((CONVNET_BATCH, 64)).astype(np.float32),
            rng.integers(0, 10, CONVNET_BATCH).astype(np.int64))


def make_convnet_step(program, session_factory, keep_prob=0.75):
    """One Adam step (with dropout) of ``program`` (examples/tf1/convnet.py, loaded for
    dataflow or TF) on :func:`convnet_batch`; ``session_factory(graph)`` opens the session."""
    tf = program.tf
    g = tf.Graph()
    with g.as_default():
        model = program.build_model()
        init = tf.global_variables_initializer()
    sess = session_factory(g)
    sess.run(init)
    x, labels = convnet_batch()
    feed = {model["x"]: x, model["labels"]: labels, model["keep_prob"]: keep_prob}
    return lambda: sess.run(model["train_op"], feed)


def make_conv2d(tf, session_factory, backward=False):
    """conv2d of :func:`conv_data` (SAME, stride 1): the forward op, or with ``backward``
    both backprops (``gradients(y, [x, w], grad_ys=dy)``), written with ``tf``'s TF1 API."""
    x, w, dy = conv_data()
    g = tf.Graph()
    with g.as_default():
        px = tf.placeholder(tf.float32, x.shape)
        pw = tf.placeholder(tf.float32, w.shape)
        y = tf.nn.conv2d(px, pw, strides=[1, 1, 1, 1], padding="SAME")
        out = tf.gradients(y, [px, pw], grad_ys=tf.constant(dy)) if backward else y
    sess = session_factory(g)
    feed = {px: x, pw: w}
    return lambda: sess.run(out, feed)


def numpy_conv2d_forward():
    """The conv2d forward by hand in NumPy: 3x3 windows of the padded input, one tensordot."""
    x, w, _ = conv_data()
    kh, kw = w.shape[:2]

    def run():
        padded = np.pad(x, [(0, 0), (kh // 2, kh // 2), (kw // 2, kw // 2), (0, 0)])
        windows = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw), axis=(1, 2))
        return np.tensordot(windows, w, axes=([3, 4, 5], [2, 0, 1]))
    return run
