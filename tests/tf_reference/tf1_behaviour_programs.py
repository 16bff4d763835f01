"""TF1 behaviours that once differed here, as programs run unchanged on TensorFlow and dataflow.

Same conventions as ``programs.py`` (each ``prog_xxx(tf)`` returns ``(fetches, feeds)``,
:func:`programs.run_program` runs it): ops without data inputs in an untaken cond branch
(an unfed placeholder there is no error), gradients of and with respect to integer
tensors, ``gradients`` called inside a while loop's body, the ``IndexedSlices`` gradient
of ``gather`` and the sparse updates of TF1's optimizers, and the structures
``Session.run`` returns.

``generate_tf1_behaviours.py`` records the outcomes under TensorFlow (graph mode, control
flow v1) in ``expected_tf1_behaviours.json``; ``tests/test_tf1_behaviours.py`` replays
them against dataflow.
"""
from __future__ import annotations

import collections

import numpy as np

try:  # imported as ``tests.tf_reference.tf1_behaviour_programs`` by pytest ...
    from .grad_programs import fetchable, variable
    from .programs import run_program
except ImportError:  # ... and as a sibling module by the generator
    from grad_programs import fetchable, variable
    from programs import run_program

__all__ = ["PROGRAMS", "run_program"]

Pair = collections.namedtuple("Pair", "first second")


def c64(tf, value):
    return tf.constant(np.asarray(value, dtype=np.float64))


# -- 1. ops without data inputs in a cond branch ---------------------------------------------
def prog_cond_unfed_placeholder_in_untaken_branch(tf):
    """A placeholder made inside a branch need only be fed when that branch runs."""
    p = tf.placeholder(tf.bool, [])
    x = tf.placeholder(tf.float32, [])

    def uses_own_placeholder():
        q = tf.placeholder(tf.float32, [], name="q")
        return q * 2.0 + x

    r = tf.cond(p, uses_own_placeholder, lambda: x - 1.0)
    return r, [{p: False, x: 3.0}, {p: True, x: 3.0}]


def prog_cond_untaken_constants_and_reads(tf):
    """Constants and variable reads of the untaken branch do not run; an uninitialized
    variable read in that branch is no error."""
    p = tf.placeholder(tf.bool, [])
    v = variable(tf, [1.0, 2.0], name="v")
    never = variable(tf, [5.0, 6.0], name="never_initialized")

    def read_never():
        return never.read_value() + tf.constant([10.0, 20.0])

    r = tf.cond(p, lambda: v.read_value() * tf.constant(3.0), read_never)
    return r, [{p: True}, {p: False}]


def prog_cond_nested_unfed_placeholder(tf):
    """In nested conds an inner branch's placeholder follows the inner predicate."""
    a = tf.placeholder(tf.bool, [])
    b = tf.placeholder(tf.bool, [])

    def inner():
        return tf.cond(b, lambda: tf.placeholder(tf.float32, [], name="inner_q") + 1.0,
                       lambda: tf.constant(7.0))

    r = tf.cond(a, inner, lambda: tf.constant(-1.0))
    return r, [{a: False, b: True}, {a: True, b: False}, {a: True, b: True}]


# -- 2. gradients of and with respect to integer tensors -------------------------------------
def prog_grad_integer_ys_member(tf):
    """An integer loop counter among ``ys`` contributes nothing (no error)."""
    x0 = c64(tf, 0.5)
    i, x = tf.while_loop(lambda i, x: i < 3, lambda i, x: (i + 1, x * 1.5 + 1.0), [0, x0])
    return fetchable(tf, tf.gradients([i, x], [x0])), {}


def prog_grad_integer_xs_is_none(tf):
    """With respect to an integer tensor the gradient is None, even on a path via cast."""
    n = tf.placeholder(tf.int32, [])
    x = c64(tf, 2.0)
    y = tf.cast(n, tf.float64) * x * x
    return fetchable(tf, tf.gradients(y, [n, x])), {n: 3}


def prog_grad_integer_of_itself(tf):
    """``gradients(i, i)`` of an integer tensor is its grad_ys (ones by default)."""
    i = tf.placeholder(tf.int32, [3])
    j = tf.placeholder(tf.int64, [])
    return [tf.gradients(i, i), tf.gradients(j, j, grad_ys=tf.constant(5, tf.int64)),
            tf.gradients([i, i * 2], i)], {i: [1, 2, 3], j: 4}


def prog_grad_integer_ys_only(tf):
    """Only integer ys: every float source gets None."""
    x = c64(tf, 1.5)
    k = tf.cast(x, tf.int32) + 1
    return fetchable(tf, tf.gradients(k, [x])), {}


# -- 3. gradients inside a while loop's body -------------------------------------------------
def prog_grad_inside_while_body(tf):
    """Each outer iteration differentiates an inner loop (x^n by repeated multiplication)
    built in its body and accumulates the derivative n * x^(n-1)."""
    x = tf.placeholder(tf.float64, [])

    def outer_body(k, acc):
        xk = x * tf.cast(k + 1, tf.float64)
        _, p = tf.while_loop(lambda j, p: j < 3, lambda j, p: (j + 1, p * xk),
                             [0, tf.constant(1.0, tf.float64)])
        g, = tf.gradients(p, xk)
        return k + 1, acc + g

    _, total = tf.while_loop(lambda k, a: k < 2, outer_body, [0, tf.constant(0.0, tf.float64)])
    return total, [{x: 0.5}, {x: -1.25}]


def prog_grad_inside_while_body_of_body_value(tf):
    """The gradient of a value computed in the body, through an inner loop and a cond."""
    x = tf.placeholder(tf.float64, [])

    def outer_body(k, acc):
        s = tf.sin(x + tf.cast(k, tf.float64))
        _, q = tf.while_loop(lambda j, q: j < 2, lambda j, q: (j + 1, q * s + s),
                             [0, tf.constant(0.5, tf.float64)])
        q = tf.cond(q > 0.0, lambda: q * q, lambda: -q)
        g, = tf.gradients(q, s)
        return k + 1, acc + g

    _, total = tf.while_loop(lambda k, a: k < 3, outer_body, [0, tf.constant(0.0, tf.float64)])
    return total, [{x: 0.3}, {x: 2.0}]


PROGRAMS = {name[len("prog_"):]: fn for name, fn in sorted(globals().items())
            if name.startswith("prog_")}
