"""map_fn / scan / foldl / foldr programs that run unchanged on TensorFlow and on dataflow.

Same conventions as ``programs.py``. Ported from TF's ``functional_ops_test.py`` and
``map_fn_test.py`` (graph mode, control flow v1): simple and nested structures,
``dtype``, ``initializer``, ``reverse``, ``parallel_iterations``, ``back_prop=False``,
shapes only known when running, and gradients through each of them.

``generate_tensor_array.py`` records the outcomes under TensorFlow in
``expected_functional.json``; ``tests/test_functional_ops.py`` replays them.
"""
from __future__ import annotations

import collections

import numpy as np

try:  # imported as ``tests.tf_reference.functional_programs`` by pytest ...
    from .grad_programs import fetchable
    from .programs import run_program
except ImportError:  # ... and as a sibling module by the generator
    from grad_programs import fetchable
    from programs import run_program

__all__ = ["PROGRAMS", "run_program"]

Pair = collections.namedtuple("Pair", "a b")


def c64(tf, value):
    return tf.constant(np.asarray(value, dtype=np.float64))


# -- map_fn -------------------------------------------------------------------------------------
def prog_map_fn_simple(tf):
    elems = tf.constant([1, 2, 3, 4, 5, 6])
    v = tf.constant(3)
    return tf.map_fn(lambda x: x * x + v, elems), {}


def prog_map_fn_unknown_length(tf):
    x = tf.placeholder(tf.float32, [None, 2])
    r = tf.map_fn(lambda row: tf.reduce_sum(row) * 2.0, x)
    return r, [{x: [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]}, {x: [[7.0, 8.0]]}]


def prog_map_fn_multi_input_single_output(tf):
    elems = (tf.constant([1.0, 2.0, 3.0]), tf.constant([-1.0, 1.0, -1.0]))
    return tf.map_fn(lambda x: x[0] * x[1] + x[1], elems, dtype=tf.float32), {}


def prog_map_fn_single_input_multi_output(tf):
    elems = tf.constant([1.0, 2.0, 3.0])
    r = tf.map_fn(lambda x: ((x + 3) * 2, -(x + 3) * 2), elems, dtype=(tf.float32, tf.float32))
    return r, {}


def prog_map_fn_nested_dict_namedtuple(tf):
    elems = {"p": Pair(tf.constant([1.0, 2.0]), tf.constant([[1, 2], [3, 4]])),
             "q": tf.constant([10.0, 20.0])}

    def fn(e):
        return {"s": e["p"].a + e["q"], "n": tf.reduce_sum(e["p"].b)}

    return tf.map_fn(fn, elems, dtype={"s": tf.float32, "n": tf.int32}), {}


def prog_map_fn_matrix_rows(tf):
    x = tf.constant(np.arange(12, dtype=np.float32).reshape(4, 3))
    w = tf.constant(np.linspace(-1, 1, 6, dtype=np.float32).reshape(3, 2))
    r = tf.map_fn(lambda row: tf.matmul(tf.reshape(row, [1, 3]), w)[0], x,
                  parallel_iterations=1)
    return r, {}


def prog_map_fn_back_prop_false_is_constant(tf):
    x = c64(tf, [1.0, 2.0])
    r = tf.map_fn(lambda v: v * v, x, back_prop=False)
    y = tf.reduce_sum(r) + tf.reduce_sum(x)
    return fetchable(tf, tf.gradients(y, [x])), {}


def prog_map_fn_grad(tf):
    x = c64(tf, [[1.0, 2.0], [3.0, -1.0], [0.5, 0.25]])
    w = c64(tf, [0.5, -2.0])
    r = tf.map_fn(lambda row: tf.tanh(row * w) + tf.reduce_sum(row * row), x)
    return tf.gradients(tf.reduce_sum(r * c64(tf, [[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]])),
                        [x, w]), {}


def prog_map_fn_grad_nested(tf):
    a = c64(tf, [1.0, 2.0, 3.0])
    b = c64(tf, [[1.0, 0.5], [2.0, -1.0], [0.0, 3.0]])

    def fn(e):
        return e[0] * tf.reduce_sum(e[1]), tf.sin(e[1]) * e[0]

    r1, r2 = tf.map_fn(fn, (a, b), dtype=(tf.float64, tf.float64))
    y = tf.reduce_sum(r1 * r1) + tf.reduce_sum(r2)
    return tf.gradients(y, [a, b]), {}


# -- scan -----------------------------------------------------------------------------------------
def prog_scan_simple(tf):
    elems = tf.constant([1.0, 2.0, 3.0, 4.0, 5.0, 6.0])
    return tf.scan(lambda a, x: a * x, elems), {}


def prog_scan_initializer_and_reverse(tf):
    elems = tf.constant([1.0, 2.0, 3.0, 4.0])
    v = tf.constant(2.0)
    forward = tf.scan(lambda a, x: a * v + x, elems, initializer=tf.constant(1.0))
    backward = tf.scan(lambda a, x: a * v + x, elems, initializer=tf.constant(1.0),
                       reverse=True)
    backward_no_init = tf.scan(lambda a, x: a - x, elems, reverse=True)
    return [forward, backward, backward_no_init], {}


def prog_scan_structured(tf):
    """Fibonacci with a tuple accumulator; a multi-input scan with a list of elems."""
    fib = tf.scan(lambda a, _: (a[1], a[0] + a[1]), tf.constant([0, 0, 0, 0, 0]),
                  initializer=(tf.constant(0), tf.constant(1)))
    elems = [tf.constant([1.0, 2.0, 3.0]), tf.constant([[1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])]
    multi = tf.scan(lambda a, x: [a[0] + x[0], a[1] * x[1]], elems)
    return {"fib": fib, "multi": multi}, {}


def prog_scan_shape_grows_known_only_when_running(tf):
    x = tf.placeholder(tf.float32, [None, 2])
    r = tf.scan(lambda a, row: a + row * 2.0, x, initializer=tf.zeros([2]))
    return r, [{x: [[1.0, 2.0], [3.0, 4.0]]}, {x: np.ones((5, 2), np.float32)}]


def prog_scan_grad(tf):
    x = c64(tf, [1.5, -0.5, 2.0, 0.25])
    w = c64(tf, 0.7)
    r = tf.scan(lambda a, e: tf.tanh(a * w + e), x, initializer=c64(tf, 0.1))
    y = tf.reduce_sum(r * c64(tf, [1.0, -2.0, 3.0, 0.5]))
    return tf.gradients(y, [x, w]), {}


def prog_scan_grad_reverse_structured(tf):
    x = c64(tf, [[1.0, 2.0], [0.5, -1.0], [2.0, 0.1]])

    def fn(a, e):
        return (a[0] * e + a[1], tf.sin(a[1]) + e)

    r0, r1 = tf.scan(fn, x, initializer=(c64(tf, [1.0, 1.0]), c64(tf, [0.0, 0.5])),
                     reverse=True)
    y = tf.reduce_sum(r0 * r0) + tf.reduce_sum(r1)
    return tf.gradients(y, [x]), {}


# -- foldl / foldr -------------------------------------------------------------------------------
def prog_fold_simple(tf):
    elems = tf.constant([1, 2, 3, 4, 5, 6])
    return [tf.foldl(lambda a, x: a + x, elems), tf.foldr(lambda a, x: a + x, elems),
            tf.foldl(lambda a, x: 2 * a + x, elems, initializer=10),
            tf.foldr(lambda a, x: 2 * a + x, elems, initializer=10)], {}


def prog_fold_order(tf):
    """foldl visits elems from the first, foldr from the last."""
    elems = tf.constant([1, 2, 3])
    return [tf.foldl(lambda a, x: a * 10 + x, elems), tf.foldr(lambda a, x: a * 10 + x, elems)], \
        {}


def prog_fold_structured(tf):
    elems = (tf.constant([1.0, 2.0, 3.0]), tf.constant([[1.0, 2.0], [3.0, 4.0], [5.0, 6.0]]))
    r = tf.foldl(lambda a, x: (a[0] + x[0], a[1] * x[1]), elems,
                 initializer=(tf.constant(0.0), tf.ones([2])))
    q = tf.foldr(lambda a, x: {"s": a["s"] - x[0], "v": a["v"] + x[1]}, elems,
                 initializer={"s": tf.constant(100.0), "v": tf.zeros([2])})
    return {"l": r, "r": q}, {}


def prog_fold_grad(tf):
    x = c64(tf, [[1.0, 0.5], [2.0, -1.0], [0.3, 0.7]])
    w = c64(tf, [0.4, -0.6])
    left = tf.foldl(lambda a, e: tf.sin(a) * e + w, x, initializer=c64(tf, [0.1, 0.2]))
    right = tf.foldr(lambda a, e: a * e + tf.cos(a * w), x)
    y = tf.reduce_sum(left * left) + tf.reduce_sum(right)
    return tf.gradients(y, [x, w]), {}


def prog_map_fn_inside_while(tf):
    """map_fn inside a while loop body, differentiated through both."""
    x = c64(tf, [0.5, 1.0, -0.5])

    def body(i, v):
        return i + 1, tf.map_fn(lambda e: tf.sin(e) * 2.0 + e, v)

    _, v = tf.while_loop(lambda i, v: i < 3, body, [0, x])
    return [v] + tf.gradients(tf.reduce_sum(v), [x]), {}


# -- edge cases and errors -------------------------------------------------------------------------
def prog_map_fn_empty(tf):
    return tf.map_fn(lambda x: x * 2.0, tf.zeros([0, 2, 3])), {}


def prog_scan_empty(tf):
    return tf.scan(lambda a, x: a + x, tf.zeros([0, 2, 3]), initializer=tf.ones([2, 3])), {}


def prog_map_fn_dtype_changes(tf):
    elems = tf.constant([1, 2, 3])
    return tf.map_fn(lambda x: tf.cast(x, tf.float32) * 0.5, elems, dtype=tf.float32), {}


def prog_map_fn_wrong_structure(tf):
    return tf.map_fn(lambda x: (x, x), tf.constant([1.0, 2.0]), dtype=tf.float32), {}


def prog_scan_wrong_structure(tf):
    elems = tf.constant([1.0, 2.0])
    return tf.scan(lambda a, x: a[0] + x, elems,
                   initializer=(tf.constant(0.0), tf.constant(1.0))), {}


def prog_map_fn_elems_of_unequal_length(tf):
    elems = (tf.constant([1.0, 2.0]), tf.constant([1.0, 2.0, 3.0]))
    return tf.map_fn(lambda x: x[0] + x[1], elems, dtype=tf.float32), {}


PROGRAMS = {name: fn for name, fn in list(globals().items())
            if name.startswith("prog_") and callable(fn)}
