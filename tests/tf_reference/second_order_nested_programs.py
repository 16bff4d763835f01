"""Second-order gradients through nested while loops and through conds inside loops,
run by both TensorFlow (control flow v2, the only TF that differentiates a loop twice)
and dataflow.

Each program is ``build(tf, *inputs) -> list of tensors``; ``tf`` is
``tensorflow.compat.v1`` or ``dataflow``, the inputs float64 placeholders fed
``INPUTS[name]``. ``generate_second_order_nested.py`` records TF's values in
``expected_second_order_nested.json``; ``tests/test_second_order_nested_reference.py``
compares. Every program fetches first gradients and second-order gradients (of
``sum |grad|^2``, or a Hessian-vector product).
"""
from __future__ import annotations

import numpy as np


def _grad_norm_grads(tf, loss, xs):
    """First gradients and d/dxs of sum_x |d loss/dx|^2 (Hessian times gradient)."""
    grads = tf.gradients(loss, xs)
    norm = tf.add_n([tf.reduce_sum(g * g) for g in grads])
    return grads + tf.gradients(norm, xs)


def nested_power(tf, x, w):
    """v = x; outer i < 3: inner j < i + 1: v = v * w (y = x w^6): d/dw, d2/dw2, d2/dxdw."""
    def outer(i, v):
        _, v = tf.while_loop(lambda j, u: j < i + 1, lambda j, u: (j + 1, u * w), (0, v))
        return i + 1, v
    _, y = tf.while_loop(lambda i, v: i < 3, outer, (0, x))
    (gw,) = tf.gradients(y, w)
    return [y, gw] + tf.gradients(gw, [x, w])


def nested_sin(tf, x, a):
    """Inner trip count depends on the outer iteration; a nonlinear inner body."""
    def outer(i, v):
        _, v = tf.while_loop(lambda j, u: j < i + 1,
                             lambda j, u: (j + 1, tf.sin(u * a) + u), (0, v))
        return i + 1, v * a
    _, y = tf.while_loop(lambda i, v: i < 3, outer, (0, x))
    return _grad_norm_grads(tf, tf.reduce_sum(y * y), [x, a])


def cond_in_loop(tf, x, a):
    """A cond in the body whose branches alternate across iterations."""
    _, y = tf.while_loop(
        lambda i, v: i < 4,
        lambda i, v: (i + 1, tf.cond(tf.equal(i % 2, 0), lambda: tf.tanh(v * a),
                                     lambda: v * v * a)), (0, x))
    return _grad_norm_grads(tf, tf.reduce_sum(y), [x, a])


def cond_on_data(tf, x, a):
    """The branch taken depends on the loop state (data), not the counter."""
    _, y = tf.while_loop(
        lambda i, v: i < 4,
        lambda i, v: (i + 1, tf.cond(tf.reduce_sum(v) > 0.0, lambda: tf.sin(v) * a,
                                     lambda: v * a + 0.5)), (0, x))
    return _grad_norm_grads(tf, tf.reduce_sum(y * y), [x, a])


def cond_in_nested_loop(tf, x, a):
    """A cond in the inner loop whose predicate mixes both loops' counters."""
    def outer(i, v):
        _, v = tf.while_loop(
            lambda j, u: j < 2,
            lambda j, u: (j + 1, tf.cond(tf.equal(j, i % 2), lambda: tf.sin(u) * a,
                                         lambda: u * a)), (0, v))
        return i + 1, v
    _, y = tf.while_loop(lambda i, v: i < 3, outer, (0, x))
    return _grad_norm_grads(tf, tf.reduce_sum(y), [x, a])


def loop_in_cond_in_loop(tf, x, a):
    """An inner loop inside one branch of a cond inside the outer loop."""
    def body(i, v):
        def inner():
            _, u = tf.while_loop(lambda j, u: j < i + 1,
                                 lambda j, u: (j + 1, tf.sin(u) * a), (0, v))
            return u
        return i + 1, tf.cond(i < 2, inner, lambda: v * a)
    _, y = tf.while_loop(lambda i, v: i < 4, body, (0, x))
    return _grad_norm_grads(tf, tf.reduce_sum(y), [x, a])


def scan_in_map_fn(tf, x, a):
    """map_fn over rows of a scan over each row."""
    ys = tf.map_fn(lambda row: tf.scan(lambda acc, e: tf.tanh(acc * a + e), row), x)
    return _grad_norm_grads(tf, tf.reduce_sum(ys * ys), [x, a])


def tensor_array_nested(tf, x, a):
    """A TensorArray written by the outer loop, read by the inner loop."""
    n, m = 3, 2
    out = tf.TensorArray(tf.float64, size=n)

    def outer(i, o):
        row = tf.TensorArray(tf.float64, size=m).unstack(x[i])

        def inner(j, acc):
            return j + 1, tf.tanh(acc * a + row.read(j))
        _, acc = tf.while_loop(lambda j, acc: j < m, inner,
                               (0, tf.constant(0.0, tf.float64)))
        return i + 1, o.write(i, acc)
    _, out = tf.while_loop(lambda i, o: i < n, outer, (0, out))
    stacked = out.stack()
    return _grad_norm_grads(tf, tf.reduce_sum(stacked * stacked), [x, a])


def rnn_refine_hvp(tf, x, w, u):
    """A tanh RNN whose every step refines its state in an inner loop with a cond; the
    Hessian-vector product of its loss along ``u``."""
    def step(t, h):
        def refine(k, hh):
            z = tf.matmul(hh, w) + x[t]
            return k + 1, tf.cond(tf.equal(k, 0), lambda: tf.tanh(z),
                                  lambda: 0.5 * hh + 0.5 * tf.sin(z))
        _, h = tf.while_loop(lambda k, hh: k < 2, refine, (0, h))
        return t + 1, h
    _, h = tf.while_loop(lambda t, h: t < 3, step, (0, tf.zeros_like(x[0:1])))
    loss = tf.reduce_sum(h * h)
    (gw,) = tf.gradients(loss, w)
    return [gw] + tf.gradients(tf.reduce_sum(gw * u), w)


def _inputs():
    rng = np.random.default_rng(20261124)  # fixed: the fixture's inputs
    return {
        "nested_power": [np.array(1.5), np.array(1.1)],
        "nested_sin": [rng.standard_normal(2) * 0.5, np.array(0.8)],
        "cond_in_loop": [np.array([0.9, 1.2]), np.array(0.7)],
        "cond_on_data": [np.array([0.3, -0.5]), np.array(0.7)],
        "cond_in_nested_loop": [rng.standard_normal(2) * 0.5, np.array(0.7)],
        "loop_in_cond_in_loop": [rng.standard_normal(2) * 0.5, np.array(0.7)],
        "scan_in_map_fn": [rng.standard_normal((2, 3)) * 0.5, np.array(0.7)],
        "tensor_array_nested": [rng.standard_normal((3, 2)) * 0.5, np.array(0.7)],
        "rnn_refine_hvp": [rng.standard_normal((3, 2)) * 0.5,
                           rng.standard_normal((2, 2)) * 0.5, rng.standard_normal((2, 2))],
    }


PROGRAMS = {"nested_power": nested_power, "nested_sin": nested_sin,
            "cond_in_loop": cond_in_loop, "cond_on_data": cond_on_data,
            "cond_in_nested_loop": cond_in_nested_loop,
            "loop_in_cond_in_loop": loop_in_cond_in_loop, "scan_in_map_fn": scan_in_map_fn,
            "tensor_array_nested": tensor_array_nested, "rnn_refine_hvp": rnn_refine_hvp}
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
