"""TensorArray programs that run unchanged on TensorFlow and on dataflow.

Same conventions as ``programs.py``: each ``prog_xxx(tf)`` returns
``(fetches, feeds)`` and :func:`programs.run_program` runs it. They are ported
from TF's ``tensor_array_ops_test.py`` (graph mode, control flow v1): reads,
writes, stack/unstack, gather/scatter, concat/split, dynamic size, zero-fill of
unwritten indices, every run-time error class, and gradients -- plain, through
``while_loop`` (nested too) and ``cond``, with ``grad_ys`` and with two
``gradients`` calls on one array.

``generate_tensor_array.py`` records the outcomes under TensorFlow in
``expected_tensor_array.json``; ``tests/test_tensor_array_reference.py`` replays
them against dataflow.
"""
from __future__ import annotations

import numpy as np

try:  # imported as ``tests.tf_reference.tensor_array_programs`` by pytest ...
    from .grad_programs import fetchable
    from .programs import run_program
except ImportError:  # ... and as a sibling module by the generator
    from grad_programs import fetchable
    from programs import run_program

__all__ = ["PROGRAMS", "run_program"]


def c32(tf, value):
    return tf.constant(np.asarray(value, dtype=np.float32))


def c64(tf, value):
    return tf.constant(np.asarray(value, dtype=np.float64))


# -- reads and writes --------------------------------------------------------------------------
def prog_ta_write_read(tf):
    """Elements of different shapes (infer_shape=False), read back."""
    ta = tf.TensorArray(tf.float32, size=3, infer_shape=False)
    w = ta.write(0, [[4.0, 5.0]]).write(1, [[1.0]]).write(2, -3.0)
    return [w.read(0), w.read(1), w.read(2)], {}


def prog_ta_write_stack(tf):
    ta = tf.TensorArray(tf.float32, size=3)
    w = ta.write(0, [[4.0, 5.0]]).write(1, [[6.0, 7.0]]).write(2, [[8.0, 9.0]])
    return w.stack(), {}


def prog_ta_unstack_read(tf):
    ta = tf.TensorArray(tf.int32, size=3)
    w = ta.unstack(tf.constant([[1, 2], [3, 4], [5, 6]]))
    return [w.read(0), w.read(1), w.read(2), w.size()], {}


def prog_ta_concat(tf):
    ta = tf.TensorArray(tf.float32, size=3, infer_shape=False)
    w = ta.write(0, [[4.0, 5.0], [104.0, 105.0], [204.0, 205.0]])
    w = w.write(1, [[6.0, 7.0], [106.0, 107.0]]).write(2, [[8.0, 9.0]])
    return w.concat(), {}


def prog_ta_split_read(tf):
    ta = tf.TensorArray(tf.float32, size=3, infer_shape=False)
    w = ta.split([1.0, 2.0, 3.0], [0, 1, 2])
    return [w.read(0), w.read(1), w.read(2)], {}


def prog_ta_scatter_gather(tf):
    ta = tf.TensorArray(tf.float32, size=5, element_shape=[2])
    w = ta.scatter([1, 4], [[1.0, 2.0], [3.0, 4.0]])
    return [w.gather([4, 1]), w.read(0)], {}


def prog_ta_dynamic_size_loop(tf):
    """A dynamically sized array grown by a while loop, stacked and sized."""
    n = tf.placeholder(tf.int32, [])
    ta = tf.TensorArray(tf.float32, size=0, dynamic_size=True)

    def body(i, t):
        return i + 1, t.write(i, tf.cast(i * i, tf.float32) * tf.ones([2]))

    _, ta = tf.while_loop(lambda i, t: i < n, body, [0, ta])
    return [ta.stack(), ta.size()], [{n: 4}, {n: 1}]


def prog_ta_clear_after_read_false(tf):
    ta = tf.TensorArray(tf.float32, size=2, clear_after_read=False)
    w = ta.write(0, [1.0, 2.0]).write(1, [3.0, 4.0])
    r0 = w.read(0)
    with tf.control_dependencies([r0]):
        r0_again = w.read(0)
    with tf.control_dependencies([r0_again]):
        s = w.stack()
    with tf.control_dependencies([s]):
        s_again = w.stack()
    return [r0, r0_again, s, s_again], {}


def prog_ta_identity_orders_reads(tf):
    ta = tf.TensorArray(tf.float32, size=2, clear_after_read=False)
    w = ta.write(0, 3.0).write(1, 4.0).identity()
    return [w.read(1), w.stack(), w.size()], {}


# -- zero-fill of unwritten indices -----------------------------------------------------------
def prog_ta_unwritten_read_known_shape(tf):
    def written():
        return tf.TensorArray(tf.float32, size=3, element_shape=[1, 2]).write(
            1, [[1.0, 2.0]])
    return [written().read(0), written().stack()], {}


def prog_ta_unwritten_read_inferred_shape(tf):
    """The element shape inferred from a write fills the unwritten indices with zeros."""
    ta = tf.TensorArray(tf.float32, size=3)
    w = ta.write(2, [5.0, 6.0, 7.0])
    return w.stack(), {}


def prog_ta_unwritten_read_unknown_shape(tf):
    ta = tf.TensorArray(tf.float32, size=3, infer_shape=False)
    w = ta.write(0, [5.0])
    return w.read(1), {}


def prog_ta_stack_empty_known_shape(tf):
    ta = tf.TensorArray(tf.float32, size=0, element_shape=[2, 3])
    return ta.stack(), {}


def prog_ta_stack_empty_unknown_shape(tf):
    ta = tf.TensorArray(tf.float32, size=0)
    return ta.stack(), {}


# -- errors -------------------------------------------------------------------------------------
def prog_ta_error_double_write(tf):
    i = tf.placeholder(tf.int32, [])
    ta = tf.TensorArray(tf.float32, size=3)
    w = ta.write(i, 1.0).write(1, 2.0)
    return w.read(1), [{i: 1}, {i: 0}]


def prog_ta_error_read_twice(tf):
    """With clear_after_read (the default) an index is read once; stack reads too."""
    ta = tf.TensorArray(tf.float32, size=2)
    w = ta.write(0, 1.0).write(1, 2.0)
    r = w.read(0)
    with tf.control_dependencies([r]):
        again = w.read(0)
    return again, {}


def prog_ta_error_stack_after_read(tf):
    ta = tf.TensorArray(tf.float32, size=2)
    w = ta.write(0, 1.0).write(1, 2.0)
    r = w.read(1)
    with tf.control_dependencies([r]):
        s = w.stack()
    return s, {}


def prog_ta_error_write_after_read(tf):
    ta = tf.TensorArray(tf.float32, size=2, element_shape=[])
    r = ta.read(0)
    with tf.control_dependencies([r]):
        w = ta.write(0, 1.0)
    return w.flow, {}


def prog_ta_error_out_of_range(tf):
    i = tf.placeholder(tf.int32, [])
    ta = tf.TensorArray(tf.float32, size=3, element_shape=[])
    return {"read": ta.read(i)}, [{i: 2}, {i: 3}, {i: -1}]


def prog_ta_error_write_out_of_range(tf):
    i = tf.placeholder(tf.int32, [])
    ta = tf.TensorArray(tf.float32, size=3)
    return ta.write(i, 1.0).flow, [{i: 2}, {i: 3}, {i: -1}]


def prog_ta_error_run_time_shape_mismatch(tf):
    """Shapes only known when running: the kernel rejects the second write."""
    x = tf.placeholder(tf.float32, [None])
    ta = tf.TensorArray(tf.float32, size=2)
    w = ta.write(0, [1.0, 2.0]).write(1, x)
    return w.stack(), [{x: [3.0, 4.0]}, {x: [3.0, 4.0, 5.0]}]


def prog_ta_error_build_time_shape_mismatch(tf):
    ta = tf.TensorArray(tf.float32, size=2)
    w = ta.write(0, [1.0, 2.0]).write(1, [1.0, 2.0, 3.0])
    return w.stack(), {}


def prog_ta_error_element_shape_mismatch(tf):
    ta = tf.TensorArray(tf.float32, size=2, element_shape=[3])
    return ta.write(0, [1.0, 2.0]).flow, {}


def prog_ta_error_inconsistent_gather(tf):
    ta = tf.TensorArray(tf.float32, size=2, infer_shape=False)
    w = ta.write(0, [1.0]).write(1, [1.0, 2.0])
    return w.stack(), {}


def prog_ta_error_concat_scalars(tf):
    ta = tf.TensorArray(tf.float32, size=2, infer_shape=False)
    w = ta.write(0, 1.0).write(1, 2.0)
    return w.concat(), {}


def prog_ta_error_split_lengths(tf):
    lengths = tf.placeholder(tf.int64, [None])
    ta = tf.TensorArray(tf.float32, size=2, infer_shape=False)
    w = ta.split([1.0, 2.0, 3.0], lengths)
    return w.read(1), [{lengths: [1, 2]}, {lengths: [1, 1]}, {lengths: [1, 1, 1]}]


def prog_ta_error_scatter_out_of_range(tf):
    ta = tf.TensorArray(tf.float32, size=2)
    return ta.scatter([0, 2], [1.0, 2.0]).flow, {}


def prog_ta_error_read_after_close(tf):
    ta = tf.TensorArray(tf.float32, size=1)
    w = ta.write(0, 1.0)
    c = w.close()
    with tf.control_dependencies([c]):
        r = w.read(0)
    return r, {}


# -- gradients ----------------------------------------------------------------------------------
def prog_ta_grad_write_read(tf):
    """Three reads (one index read twice with clear_after_read=False), explicit grad_ys."""
    v0, v1 = c32(tf, [-1.0, 1.0]), c32(tf, [-10.0, 10.0])
    ta = tf.TensorArray(tf.float32, size=2, clear_after_read=False)
    w = ta.write(0, v0).write(1, v1)
    r0, r1, r0_2 = w.read(0), w.read(1), w.read(0)
    grads = tf.gradients([r0, r0_2, r1], [v0, v1],
                         grad_ys=[c32(tf, [2.0, 3.0]), c32(tf, [1.0, -1.0]),
                                  c32(tf, [-2.0, -10.0])])
    return fetchable(tf, grads), {}


def prog_ta_grad_stack_unstack(tf):
    x = c64(tf, [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])
    ta = tf.TensorArray(tf.float64, size=3).unstack(x * x)
    y = ta.stack() * c64(tf, [[1.0], [2.0], [3.0]])
    return tf.gradients(tf.reduce_sum(y), [x]), {}


def prog_ta_grad_unread_element(tf):
    """An element never read gets a zero gradient (the gradient array reads zeros)."""
    a, b = c64(tf, [1.0, 2.0]), c64(tf, [3.0, 4.0])
    w = tf.TensorArray(tf.float64, size=2).write(0, a * 2.0).write(1, b * 3.0)
    r = w.read(0)
    y = tf.reduce_sum(r * r)
    return fetchable(tf, tf.gradients(y, [a, b])), {}


def prog_ta_grad_split_concat(tf):
    x = c64(tf, [1.0, 2.0, 3.0, 4.0, 5.0])
    ta = tf.TensorArray(tf.float64, size=3, infer_shape=False).split(tf.exp(x), [2, 1, 2])
    parts = [ta.read(0) * 2.0, ta.read(1) * 3.0, ta.read(2) * 4.0]
    y = tf.reduce_sum(tf.concat(parts, 0))
    ta2 = tf.TensorArray(tf.float64, size=2, infer_shape=False)
    ta2 = ta2.write(0, x[:2] * x[:2]).write(1, tf.sin(x[2:]))
    z = tf.reduce_sum(ta2.concat() * c64(tf, [1.0, 2.0, 3.0, 4.0, 5.0]))
    return [tf.gradients(y, [x])[0], tf.gradients(z, [x])[0]], {}


def prog_ta_grad_scatter_gather(tf):
    x = c64(tf, [[1.0, 2.0], [3.0, 4.0]])
    ta = tf.TensorArray(tf.float64, size=4, element_shape=[2])
    ta = ta.scatter([3, 0], tf.tanh(x))
    g = ta.gather([0, 3, 1])
    y = tf.reduce_sum(g * c64(tf, [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
    return tf.gradients(y, [x]), {}


def prog_ta_grad_while_loop(tf):
    """dynamic_rnn's pattern: inputs unstacked into one array, outputs written to another,
    a captured weight; gradients for the inputs, the initial state and the weight."""
    x = c64(tf, np.linspace(-1.0, 1.0, 12).reshape(4, 3))
    w = c64(tf, [[0.5, -0.2, 0.1], [0.3, 0.4, -0.6], [0.0, 0.2, 0.7]])
    h0 = c64(tf, [0.1, -0.1, 0.2])
    inputs = tf.TensorArray(tf.float64, size=4).unstack(x)
    outputs = tf.TensorArray(tf.float64, size=4)

    def body(t, h, out):
        h = tf.tanh(inputs.read(t) + tf.reshape(tf.matmul(tf.reshape(h, [1, 3]), w), [3]))
        return t + 1, h, out.write(t, h)

    _, h, outputs = tf.while_loop(lambda t, h, o: t < 4, body, [0, h0, outputs])
    y = tf.reduce_sum(outputs.stack() * c64(tf, np.arange(12.0).reshape(4, 3))) + \
        tf.reduce_sum(h)
    return tf.gradients(y, [x, w, h0]), {}


def prog_ta_grad_dynamic_size_while(tf):
    """A dynamically sized array written in a loop, then read back in a second loop."""
    x = c64(tf, [0.5, -1.5])
    ta = tf.TensorArray(tf.float64, size=0, dynamic_size=True, element_shape=[2])

    def body(i, v, t):
        v = v * tf.sin(v) + 1.0
        return i + 1, v, t.write(i, v)

    _, _, ta = tf.while_loop(lambda i, v, t: i < 3, body, [0, x, ta])

    def reader(i, acc):
        return i + 1, acc + ta.read(i) * tf.cast(i + 1, tf.float64)

    _, acc = tf.while_loop(lambda i, a: i < 3, reader, [0, tf.zeros([2], tf.float64)])
    return tf.gradients(tf.reduce_sum(acc * acc), [x]), {}


def prog_ta_grad_nested_while(tf):
    """An inner loop accumulates into the array; the outer loop writes one row per step."""
    x = c64(tf, [0.3, 0.7])
    ta = tf.TensorArray(tf.float64, size=3)

    def outer(i, v, t):
        def inner(j, u):
            return j + 1, u * x + tf.cos(u)
        _, u = tf.while_loop(lambda j, u: j < i + 1, inner, [0, v])
        return i + 1, u, t.write(i, u * tf.cast(i + 1, tf.float64))

    _, _, ta = tf.while_loop(lambda i, v, t: i < 3, outer, [0, x, ta])
    y = tf.reduce_sum(ta.stack() ** 2)
    return tf.gradients(y, [x]), {}


def prog_ta_grad_array_in_nested_loop(tf):
    """Each outer iteration makes its own array inside the loop body."""
    x = c64(tf, [1.0, 2.0, 3.0])

    def outer(i, acc):
        ta = tf.TensorArray(tf.float64, size=3).unstack(x * tf.cast(i + 1, tf.float64))

        def inner(j, s):
            return j + 1, s + tf.sin(ta.read(j))
        _, s = tf.while_loop(lambda j, s: j < 3, inner, [0, tf.constant(0.0, tf.float64)])
        return i + 1, acc + s

    _, acc = tf.while_loop(lambda i, a: i < 2, outer, [0, tf.constant(0.0, tf.float64)])
    return tf.gradients(acc, [x]), {}


def prog_ta_grad_cond(tf):
    """A write in each branch of a cond, the array passed through it."""
    p = tf.placeholder(tf.bool, [])
    x = c64(tf, [1.0, -2.0])
    ta = tf.TensorArray(tf.float64, size=2).write(0, x * x)
    ta = tf.cond(p, lambda: ta.write(1, tf.sin(x)), lambda: ta.write(1, x * 3.0))
    y = tf.reduce_sum(ta.stack() * c64(tf, [[1.0, 2.0], [3.0, 4.0]]))
    return tf.gradients(y, [x]), [{p: True}, {p: False}]


def prog_ta_grad_cond_in_while(tf):
    x = c64(tf, [0.5, 1.5])
    ta = tf.TensorArray(tf.float64, size=4)

    def body(i, v, t):
        v = tf.cond(tf.equal(i % 2, 0), lambda: v * x, lambda: tf.sin(v) + x)
        return i + 1, v, t.write(i, v)

    _, _, ta = tf.while_loop(lambda i, v, t: i < 4, body, [0, x, ta])
    return tf.gradients(tf.reduce_sum(ta.stack()), [x]), {}


def prog_ta_grad_two_gradient_calls(tf):
    """Two gradients calls on one array use two gradient arrays (one per source)."""
    x = c64(tf, [1.0, 2.0])
    ta = tf.TensorArray(tf.float64, size=2).write(0, x * x).write(1, x * 5.0)
    s = ta.stack()
    g1 = tf.gradients(tf.reduce_sum(s), [x])[0]
    g2 = tf.gradients(tf.reduce_sum(s * s), [x])[0]
    return [g1, g2], {}


def prog_ta_grad_grad_ys(tf):
    """grad_ys given by the caller, on a read."""
    x = c64(tf, [1.0, 2.0])
    ta = tf.TensorArray(tf.float64, size=1).write(0, tf.exp(x))
    r = ta.read(0)
    return tf.gradients(r, [x], grad_ys=c64(tf, [3.0, -1.0])), {}


def prog_ta_grad_scan_like_float32(tf):
    """float32 cumulative product written per step, with a weight, in float32."""
    x = c32(tf, [1.5, 0.5, 2.0, -1.0])
    w = c32(tf, 0.8)
    elems = tf.TensorArray(tf.float32, size=4).unstack(x)
    out = tf.TensorArray(tf.float32, size=4)

    def body(i, acc, o):
        acc = acc * elems.read(i) * w + 1.0
        return i + 1, acc, o.write(i, acc)

    _, _, out = tf.while_loop(lambda i, a, o: i < 4, body, [0, tf.constant(1.0), out])
    y = tf.reduce_sum(out.stack())
    return [y] + tf.gradients(y, [x, w]), {}


# -- more of tensor_array_ops_test.py -----------------------------------------------------------
def prog_ta_eval_empty_with_default(tf):
    """An unstack that never runs still gives the empty array its element shape."""
    ta = tf.TensorArray(tf.float32, size=0, dynamic_size=False, infer_shape=True)
    ta.unstack(tf.zeros([0, 3, 5]))
    return [ta.size(), ta.stack(), ta.concat()], {}


def prog_ta_unpack_dynamic_gradient(tf):
    x = tf.placeholder(tf.float64, [None])
    ta = tf.TensorArray(tf.float64, size=0, dynamic_size=True).unstack(x * x)
    s = ta.stack()
    return [s, ta.size()] + tf.gradients(tf.reduce_sum(s * 2.0), [x]), \
        [{x: [1.0, 2.0, 3.0]}, {x: [-1.5]}]


def prog_ta_split_dynamic_gradient(tf):
    x = tf.placeholder(tf.float64, [None])
    lengths = tf.placeholder(tf.int64, [None])
    ta = tf.TensorArray(tf.float64, size=0, dynamic_size=True, infer_shape=False)
    ta = ta.split(tf.exp(x), lengths)
    c = ta.concat()
    return [c, ta.size()] + tf.gradients(tf.reduce_sum(c * c), [x]), \
        [{x: [1.0, 2.0, 3.0], lengths: [1, 2]}, {x: [0.5, 0.25], lengths: [0, 2, 0]}]


def prog_ta_gradient_not_all_components_read(tf):
    x = c64(tf, [2.0, 3.0])
    w = tf.TensorArray(tf.float64, size=2).unstack(x)
    return tf.gradients(w.read(0), [x]), {}


def prog_ta_grad_serial_two_loops(tf):
    """One loop fills an array, a second loop reads it; both are differentiated."""
    num_steps = 20
    x = c64(tf, 1.01)
    acc = tf.TensorArray(tf.float64, size=num_steps, clear_after_read=False,
                         element_shape=[])

    def fill(i, acc, v):
        v = v * x
        return i + 1, acc.write(i, v), v

    _, acc, _ = tf.while_loop(lambda i, a, v: i < num_steps, fill,
                              [0, acc, tf.constant(1.0, tf.float64)])

    def reduce(i, total):
        return i + 1, total + acc.read(i) * acc.read(num_steps - 1 - i)

    _, total = tf.while_loop(lambda i, t: i < num_steps, reduce,
                             [0, tf.constant(0.0, tf.float64)])
    return [total] + tf.gradients(total, [x]), {}


def prog_ta_write_in_loop_read_outside(tf):
    """A loop writes every other index; the rest read as zeros of the known shape."""
    ta = tf.TensorArray(tf.float32, size=6, element_shape=[2])

    def body(i, t):
        return i + 2, t.write(i, tf.fill([2], tf.cast(i, tf.float32)))

    _, ta = tf.while_loop(lambda i, t: i < 6, body, [0, ta])
    return ta.stack(), {}


def prog_ta_size_and_close(tf):
    n = tf.placeholder(tf.int32, [])
    ta = tf.TensorArray(tf.float32, size=n, dynamic_size=True)
    w = ta.write(4, 1.0)
    size = w.size()
    with tf.control_dependencies([size]):
        close = w.close()
    with tf.control_dependencies([close]):
        done = tf.constant(1)
    return [size, done], [{n: 2}, {n: 9}]


PROGRAMS = {name: fn for name, fn in list(globals().items())
            if name.startswith("prog_") and callable(fn)}
