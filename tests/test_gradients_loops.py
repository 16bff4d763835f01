"""Gradients through while loops: closed forms and finite differences.

The gradient of a while loop is a while loop running the same number of
iterations backwards, reading forward values back from stacks.
"""
import numpy as np
import pytest

import dataflow as df
from dataflow.kernels.numpy_cpu import data_flow

from .op_harness import check_gradients, ops_of_type


@pytest.mark.parametrize("n", [0, 1, 5])
def test_power_loop_closed_form(n):
    """``while i < n: x = x * w`` gives dy/dw = n w^(n-1) x0 and dy/dx0 = w^n."""
    with df.Graph().as_default():
        x0 = df.placeholder(df.float64, [])
        w = df.placeholder(df.float64, [])
        _, y = df.while_loop(lambda i, x: i < n, lambda i, x: (i + 1, x * w), (0, x0))
        gx, gw = df.gradients(y, [x0, w])
        with df.Session() as sess:
            got_x, got_w = sess.run([gx, gw], {x0: 1.7, w: 1.3})
    assert got_x == pytest.approx(1.3 ** n)
    assert got_w == pytest.approx(n * 1.3 ** (n - 1) * 1.7 if n else 0.0)


def test_loop_with_tensor_state_matches_finite_differences():
    def build(h0, w, b):
        _, h = df.while_loop(lambda i, h: i < 3,
                             lambda i, h: (i + 1, df.tanh(df.matmul(h, w) + b)), (0, h0))
        return h
    rng = np.random.default_rng(0)
    check_gradients(build, [rng.standard_normal((2, 3)), rng.standard_normal((3, 3)) * 0.5,
                            rng.standard_normal((3,))])


def test_nested_loops_three_deep_with_captures_at_each_level():
    def build(x, a, b, c):
        def level1(i, v):
            def level2(j, u):
                def level3(k, t):
                    return k + 1, t * c + df.sin(t)
                _, u = df.while_loop(lambda k, t: k < 2, level3, (0, u * b))
                return j + 1, u
            _, v = df.while_loop(lambda j, u: j < 2, level2, (0, v + a))
            return i + 1, v
        _, out = df.while_loop(lambda i, v: i < 2, level1, (0, x))
        return out
    check_gradients(build, [np.array([0.3, -0.2]), np.array(0.1), np.array(0.9),
                            np.array(0.8)])


def test_inner_trip_count_depends_on_outer_iteration():
    """Each run of the inner loop has its own trip count; the backprop loops replay them."""
    def build(x, w):
        def outer(i, v):
            _, v = df.while_loop(lambda j, u: j < i, lambda j, u: (j + 1, u * w), (0, v))
            return i + 1, v
        _, out = df.while_loop(lambda i, v: i < 4, outer, (0, x))
        return out
    check_gradients(build, [np.array(1.5), np.array(1.1)])
    # out = x * w^(0+1+2+3)
    gx, gw = _unit_gradients(build, [1.5, 1.1])
    assert gx == pytest.approx(1.1 ** 6)
    assert gw == pytest.approx(6 * 1.5 * 1.1 ** 5)


def _unit_gradients(build, values):
    """``df.gradients`` of ``build(*xs)`` with respect to scalar float64 inputs."""
    with df.Graph().as_default():
        xs = [df.placeholder(df.float64, []) for _ in values]
        grads = df.gradients(build(*xs), xs)
        with df.Session() as sess:
            return sess.run(grads, dict(zip(xs, values)))


def test_cond_in_while():
    def build(x, w):
        def body(i, v):
            v = df.cond(df.equal(i % 2, 0), lambda: v * w, lambda: df.sin(v) + w)
            return i + 1, v
        _, out = df.while_loop(lambda i, v: i < 5, body, (0, x))
        return out
    check_gradients(build, [np.array([0.4, -0.7]), np.array(1.2)])


@pytest.mark.parametrize("taken", [True, False])
def test_while_in_cond(taken):
    def build(x, w):
        loop = lambda: df.while_loop(lambda i, v: i < 3,  # noqa: E731
                                     lambda i, v: (i + 1, v * w), (0, x))[1]
        return df.cond(df.constant(taken), loop, lambda: x * 2.0)
    check_gradients(build, [np.array(0.5), np.array(1.5)], none_means_zero=True)
    if taken:
        gx, gw = _unit_gradients(build, [0.5, 1.5])
        assert (gx, gw) == (pytest.approx(1.5 ** 3), pytest.approx(3 * 0.5 * 1.5 ** 2))
    else:
        assert _unit_gradients(build, [0.5, 1.5])[0] == pytest.approx(2.0)


def test_gradient_of_loop_invariant_used_in_nested_loops():
    def build(x, w):
        def outer(i, v):
            _, v = df.while_loop(lambda j, u: j < 3, lambda j, u: (j + 1, u + w * w), (0, v))
            return i + 1, v * w
        _, out = df.while_loop(lambda i, v: i < 2, outer, (0, x))
        return out
    check_gradients(build, [np.array(0.7), np.array(0.9)])


def test_parallel_iterations_do_not_change_gradients():
    results = []
    for p in (1, 10):
        with df.Graph().as_default():
            x = df.placeholder(df.float64, [3])
            w = df.placeholder(df.float64, [3])
            _, y = df.while_loop(lambda i, v: i < 6,
                                 lambda i, v: (i + 1, df.tanh(v * w + df.cast(i, df.float64))),
                                 (0, x), parallel_iterations=p)
            g = df.gradients(df.reduce_sum(y), [x, w])
            with df.Session() as sess:
                results.append(sess.run(g, {x: [0.1, 0.2, 0.3], w: [1.1, -0.4, 0.8]}))
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)


def test_body_that_ignores_a_loop_variable():
    """v does not depend on its previous value: its gradient after iteration 0 is zero."""
    def build(x, w):
        _, v, s = df.while_loop(lambda i, v, s: i < 3,
                                lambda i, v, s: (i + 1, w * 2.0, s + v), (0, x, x * 0.0))
        return v + s
    check_gradients(build, [np.array(0.6), np.array(1.4)])


def test_stack_pushes_once_per_iteration_and_is_empty_after_backprop(monkeypatch):
    stacks = []
    original = data_flow.StackResource.__init__

    def recording_init(self, name, max_size):
        original(self, name, max_size)
        stacks.append(self)

    monkeypatch.setattr(data_flow.StackResource, "__init__", recording_init)
    t = 7
    with df.Graph().as_default() as g:
        x = df.placeholder(df.float64, [])
        w = df.placeholder(df.float64, [])
        _, y = df.while_loop(lambda i, v: i < t, lambda i, v: (i + 1, df.sin(v) * w), (0, x))
        grads = df.gradients(y, [x, w])
        n_stacks = len(ops_of_type(g, "Stack"))
        with df.Session() as sess:
            sess.run(grads, {x: 0.3, w: 0.9})
    assert n_stacks >= 1
    assert len(stacks) == n_stacks
    for s in stacks:
        assert s.pushes == t and s.pops == t and not s.entries


def test_constants_and_invariants_are_not_stacked():
    with df.Graph().as_default() as g:
        x = df.placeholder(df.float64, [])
        w = df.placeholder(df.float64, [])
        _, y = df.while_loop(lambda i, v: i < 4, lambda i, v: (i + 1, v * w * 3.0), (0, x))
        df.gradients(y, [x, w])
        pushed = [op.inputs[1] for op in ops_of_type(g, "StackPush")]
    # Only per-iteration values are saved: never the invariant w or the constant 3.0.
    assert pushed
    assert all(t.op.type not in ("Const", "Enter", "Placeholder") for t in pushed)


def test_shapes_needed_by_backprop_are_computed_in_the_forward_loop():
    """Backprop of sum and broadcasting needs only shapes: those are stacked, not v."""
    with df.Graph().as_default() as g:
        x = df.placeholder(df.float64, [None])
        _, v, s = df.while_loop(lambda i, v, s: i < 3,
                                lambda i, v, s: (i + 1, v + 1.0, s + df.reduce_sum(v)),
                                (0, x, df.constant(0.0, df.float64)))
        (gx,) = df.gradients(s, [x])
        pushed = [op.inputs[1] for op in ops_of_type(g, "StackPush")]
        with df.Session() as sess:
            got = sess.run(gx, {x: [1.0, 2.0]})
    np.testing.assert_allclose(got, [3.0, 3.0])
    assert pushed and all(t.dtype.is_integer for t in pushed)
