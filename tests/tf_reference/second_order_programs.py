"""Second-order gradient programs through while loops, run by both TensorFlow (with
control flow v2, the only TF that differentiates a loop twice) and dataflow.

Each program is ``build(tf, *inputs) -> list of tensors``; ``tf`` is
``tensorflow.compat.v1`` or ``dataflow``, the inputs float64 placeholders fed
``INPUTS[name]``. ``generate_second_order.py`` records TF's values in
``expected_second_order.json``; ``tests/test_second_order_reference.py`` compares.
"""
from __future__ import annotations

import numpy as np


def _grad_norm_grads(tf, loss, xs):
    """d/dxs of sum_x |d loss/dx|^2 (Hessian times gradient)."""
    grads = tf.gradients(loss, xs)
    norm = tf.add_n([tf.reduce_sum(g * g) for g in grads])
    return grads + tf.gradients(norm, xs)


def power(tf, x, w):
    """v = x; 4 times v = v * w: first and second derivatives in x and w."""
    _, y = tf.while_loop(lambda i, v: i < 4, lambda i, v: (i + 1, v * w), (0, x))
    (gw,) = tf.gradients(y, w)
    return [y, gw] + tf.gradients(gw, [x, w])


def self_power(tf, x):
    """v = x; 3 times v = v * x (x^4): d/dx, d2/dx2, d3/dx3."""
    _, y = tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * x), (0, x))
    (g,) = tf.gradients(y, x)
    (h,) = tf.gradients(g, x)
    return [g, h] + tf.gradients(h, x)


def tanh_rnn_hvp(tf, h0, w, b, uw, ub):
    """Hessian-vector product of a 3-step tanh RNN's loss along (uw, ub)."""
    _, h = tf.while_loop(lambda i, h: i < 3,
                         lambda i, h: (i + 1, tf.tanh(tf.matmul(h, w) + b)), (0, h0))
    loss = tf.reduce_sum(h * h)
    gw, gb = tf.gradients(loss, [w, b])
    return [gw, gb] + tf.gradients(tf.reduce_sum(gw * uw) + tf.reduce_sum(gb * ub), [w, b])


def scan_penalty(tf, x, a):
    ys = tf.scan(lambda acc, e: tf.tanh(acc * a + e), x, initializer=tf.zeros_like(x[0]))
    return _grad_norm_grads(tf, tf.reduce_sum(ys * ys), [x, a])


def map_fn_penalty(tf, x, a):
    ys = tf.map_fn(lambda e: tf.sin(e * a) * e, x)
    return _grad_norm_grads(tf, tf.reduce_sum(ys), [x, a])


def tensor_array_loop(tf, x, a):
    elems = tf.TensorArray(tf.float64, size=3).unstack(x)
    out = tf.TensorArray(tf.float64, size=3)
    _, out = tf.while_loop(lambda i, o: i < 3,
                           lambda i, o: (i + 1, o.write(i, tf.sin(elems.read(i) * a))),
                           (0, out))
    stacked = out.stack()
    return _grad_norm_grads(tf, tf.reduce_sum(stacked * stacked), [x, a])


def _inputs():
    rng = np.random.default_rng(20261123)  # fixed: the fixture's inputs
    return {
        "power": [np.array(1.5), np.array(1.3)],
        "self_power": [np.array(0.7)],
        "tanh_rnn_hvp": [rng.standard_normal((2, 3)), rng.standard_normal((3, 3)) * 0.5,
                         rng.standard_normal(3), rng.standard_normal((3, 3)),
                         rng.standard_normal(3)],
        "scan_penalty": [rng.standard_normal((4, 2)), np.array(0.7)],
        "map_fn_penalty": [rng.standard_normal((3, 2)), np.array(0.7)],
        "tensor_array_loop": [rng.standard_normal((3, 2)), np.array(0.9)],
    }


PROGRAMS = {"power": power, "self_power": self_power, "tanh_rnn_hvp": tanh_rnn_hvp,
            "scan_penalty": scan_penalty, "map_fn_penalty": map_fn_penalty,
            "tensor_array_loop": tensor_array_loop}
INPUTS = _inputs()


def run_program(tf, name):
    """Build program ``name`` in a fresh graph of ``tf`` and run it: the fetched values
    as nested lists."""
    values = INPUTS[name]
    with tf.Graph().as_default():
        xs = [tf.placeholder(tf.float64, shape=np.shape(v)) for v in values]
        fetches = PROGRAMS[name](tf, *xs)
        with tf.Session() as sess:
            got = sess.run(fetches, dict(zip(xs, values)))
    return [np.asarray(v, dtype=np.float64).tolist() for v in got]
