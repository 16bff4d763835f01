"""Second-order gradients through while loops (see dataflow/spec/SECOND_ORDER.md).

Every case is checked against central differences of the first gradient
(``check_gradients`` of a function that itself calls ``df.gradients``) and, where one
exists, against a closed form.
"""
import numpy as np
import pytest

import dataflow as df

from .op_harness import check_gradients, fresh_rng


def _gradient_norm(build):
    """``xs -> sum_x |d build / d x|^2``: differentiating it takes second derivatives of
    ``build`` (its Hessian times the gradient)."""
    def norm(*xs):
        grads = df.gradients(build(*xs), list(xs))
        return df.add_n([df.reduce_sum(g * g) for g in grads])
    return norm


@pytest.mark.parametrize("n", [0, 1, 2, 5])
def test_power_loop_second_derivatives_closed_form(n):
    """``v = x; n times: v = v * w`` gives y = x w^n: d2y/dw2 = n(n-1) x w^(n-2),
    d2y/dx dw = n w^(n-1)."""
    with df.Graph().as_default():
        x = df.placeholder(df.float64, [])
        w = df.placeholder(df.float64, [])
        _, y = df.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v * w), (0, x))
        (gw,) = df.gradients(y, w)
        hx, hw = df.gradients(gw, [x, w])
        with df.Session() as sess:
            got = sess.run([gw, hx, hw] if n else [gw], {x: 1.5, w: 1.3})
    assert got[0] == pytest.approx(n * 1.3 ** (n - 1) * 1.5 if n else 0.0)
    if n:
        assert got[1] == pytest.approx(n * 1.3 ** (n - 1))
        assert got[2] == pytest.approx(n * (n - 1) * 1.5 * 1.3 ** (n - 2) if n > 1 else 0.0)


@pytest.mark.parametrize("n", [1, 3, 4])
def test_x_multiplied_in_a_loop_second_derivative(n):
    """``v = x; n times: v = v * x`` gives x^(n+1): d2/dx2 = (n+1) n x^(n-1)."""
    with df.Graph().as_default():
        x = df.placeholder(df.float64, [])
        _, y = df.while_loop(lambda i, v: i < n, lambda i, v: (i + 1, v * x), (0, x))
        (g,) = df.gradients(y, x)
        (h,) = df.gradients(g, x)
        with df.Session() as sess:
            got_g, got_h = sess.run([g, h], {x: 1.5})
    assert got_g == pytest.approx((n + 1) * 1.5 ** n)
    assert got_h == pytest.approx((n + 1) * n * 1.5 ** (n - 1))


def test_third_derivative_through_a_loop():
    """Differentiating twice more: d3/dx3 of x^4 (built as a loop) is 24 x."""
    with df.Graph().as_default():
        x = df.placeholder(df.float64, [])
        _, y = df.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * x), (0, x))
        (g,) = df.gradients(y, x)
        (h,) = df.gradients(g, x)
        (t,) = df.gradients(h, x)
        with df.Session() as sess:
            assert sess.run(t, {x: 0.7}) == pytest.approx(24 * 0.7)


def test_tanh_rnn_hessian_vector_product_matches_finite_differences():
    def loss(h0, w, b):
        _, h = df.while_loop(lambda i, h: i < 3,
                             lambda i, h: (i + 1, df.tanh(df.matmul(h, w) + b)), (0, h0))
        return df.reduce_sum(h * h)
    rng, _ = fresh_rng()
    values = [rng.standard_normal((2, 3)), rng.standard_normal((3, 3)) * 0.5,
              rng.standard_normal((3,))]
    check_gradients(_gradient_norm(loss), values)
    check_gradients(_gradient_norm(loss), values, partial=True)


def test_loop_with_nonlinear_state_matches_finite_differences():
    def build(x, a):
        _, v = df.while_loop(lambda i, v: i < 3,
                             lambda i, v: (i + 1, v * a + df.square(v)), (0, x))
        return df.reduce_sum(v)
    check_gradients(_gradient_norm(build), [np.array([0.3, -0.2]), np.array(0.5)])


def _sequence(rng, *shape):
    return rng.standard_normal(shape)


def test_tensor_array_second_derivative_outside_loops():
    """``y = a * sum(sin(read(write(0, x))))``: d2y/dx2 = -a sin x, d2y/dx da = cos x."""
    with df.Graph().as_default():
        x = df.placeholder(df.float64, [2])
        a = df.placeholder(df.float64, [])
        ta = df.TensorArray(df.float64, size=1).write(0, x)
        (g,) = df.gradients(df.reduce_sum(df.sin(ta.read(0)) * a), x)
        hx, ha = df.gradients(g, [x, a])
        with df.Session() as sess:
            got_hx, got_ha = sess.run([hx, ha], {x: [0.3, 0.5], a: 2.0})
    np.testing.assert_allclose(got_hx, -2.0 * np.sin([0.3, 0.5]))
    assert got_ha == pytest.approx(np.sum(np.cos([0.3, 0.5])))


def test_tensor_array_in_a_while_loop_matches_finite_differences():
    def build(x, a):
        elems = df.TensorArray(df.float64, size=3).unstack(x)
        out = df.TensorArray(df.float64, size=3)
        _, out = df.while_loop(
            lambda i, o: i < 3,
            lambda i, o: (i + 1, o.write(i, df.sin(elems.read(i) * a))), (0, out))
        return df.reduce_sum(out.stack())
    rng, _ = fresh_rng()
    check_gradients(_gradient_norm(build), [_sequence(rng, 3, 2), np.array(0.9)])


def test_scan_second_derivatives_match_finite_differences():
    def build(x, a):
        ys = df.scan(lambda acc, e: df.tanh(acc * a + e), x, initializer=df.zeros_like(x[0]))
        return df.reduce_sum(ys * ys)
    rng, _ = fresh_rng()
    values = [_sequence(rng, 4, 2), np.array(0.7)]
    check_gradients(_gradient_norm(build), values)
    check_gradients(_gradient_norm(build), values, partial=True)


def test_map_fn_second_derivatives_match_finite_differences():
    def build(x, a):
        return df.reduce_sum(df.map_fn(lambda e: df.sin(e * a) * e, x))
    rng, _ = fresh_rng()
    check_gradients(_gradient_norm(build), [_sequence(rng, 3, 2), np.array(0.7)])


def _hvp_against_finite_differences(loss, rng):
    """The Hessian-vector product of ``loss`` in its trainable variables along a random
    direction u, against central differences of the first gradient along u."""
    variables = df.trainable_variables()
    grads = df.gradients(loss, variables)
    directions = [rng.standard_normal(v.shape.as_list()) for v in variables]
    hvp = df.gradients(df.add_n([df.reduce_sum(g * u) for g, u in zip(grads, directions)]),
                       variables)
    eps = 1e-5
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        start = sess.run(variables)
        got = sess.run(hvp)

        def grads_at(step):
            for v, w, u in zip(variables, start, directions):
                v.load(w + step * u, sess)
            return sess.run(grads)
        plus, minus = grads_at(eps), grads_at(-eps)
    for v, h, p, m in zip(variables, got, plus, minus):
        np.testing.assert_allclose(h, (p - m) / (2 * eps), rtol=1e-5, atol=1e-6,
                                   err_msg=v.name)


@pytest.mark.parametrize("cell", ["BasicRNNCell", "GRUCell", "BasicLSTMCell"])
def test_dynamic_rnn_loss_hessian_vector_product(cell):
    rng, _ = fresh_rng()
    with df.Graph().as_default():
        x = df.constant(_sequence(rng, 2, 4, 3))
        rnn_cell = getattr(df.nn.rnn_cell, cell)(5)
        out, _ = df.nn.dynamic_rnn(rnn_cell, x, sequence_length=[4, 2], dtype=df.float64)
        _hvp_against_finite_differences(df.reduce_sum(out * out), rng)


def test_gradient_penalty_training_step_through_an_rnn():
    """A training step on ``loss + 0.5 |d loss / d inputs|^2`` (a gradient penalty) of a
    tanh RNN: the step moves the weights by -lr times the penalised loss's gradient,
    whose directional derivative matches central differences of the penalised loss, and
    the penalised loss goes down."""
    rng, _ = fresh_rng()
    with df.Graph().as_default():
        df.set_random_seed(int(rng.integers(2 ** 31)))  # the cell's initial weights
        x = df.constant(_sequence(rng, 2, 5, 3))
        target = df.constant(_sequence(rng, 2, 4) * 0.5)
        cell = df.nn.rnn_cell.BasicRNNCell(4)
        _, state = df.nn.dynamic_rnn(cell, x, dtype=df.float64)
        task = df.reduce_sum(df.square(state - target))
        (dx,) = df.gradients(task, x)
        penalised = task + 0.5 * df.reduce_sum(dx * dx)
        variables = df.trainable_variables()
        grads = df.gradients(penalised, variables)
        step = df.train.GradientDescentOptimizer(0.02).minimize(penalised)
        directions = [rng.standard_normal(v.shape.as_list()) for v in variables]
        eps = 1e-5
        with df.Session() as sess:
            sess.run(df.global_variables_initializer())
            start, got = sess.run(variables), sess.run(grads)

            def loss_at(s):
                for v, w, u in zip(variables, start, directions):
                    v.load(w + s * u, sess)
                return sess.run(penalised)
            numeric = (loss_at(eps) - loss_at(-eps)) / (2 * eps)
            analytic = sum(float(np.sum(g * u)) for g, u in zip(got, directions))
            assert analytic == pytest.approx(numeric, rel=1e-5, abs=1e-6)
            before = loss_at(0.0)
            sess.run(step)
            for v, w, g in zip(variables, start, got):
                np.testing.assert_allclose(sess.run(v), w - 0.02 * g, rtol=1e-12, atol=1e-12)
            for _ in range(5):
                sess.run(step)
            assert sess.run(penalised) < before


@pytest.mark.parametrize("parallel_iterations", [1, 10])
@pytest.mark.parametrize("swap_memory", [False, True])
def test_loop_options_and_two_outputs(parallel_iterations, swap_memory):
    """Two loop outputs, one a running sum; the target mixes the loop's output with its
    first gradients (partial static shapes)."""
    def build(x, a):
        _, v, s = df.while_loop(
            lambda i, v, s: i < 3,
            lambda i, v, s: (i + 1, df.sin(v * a), s + df.reduce_sum(v * v)),
            (0, x, df.constant(0.0, df.float64)),
            parallel_iterations=parallel_iterations, swap_memory=swap_memory)
        return df.reduce_sum(v) * s

    def target(x, a):
        y = build(x, a)
        gx, ga = df.gradients(y, [x, a])
        return y + df.reduce_sum(gx * gx) + ga * ga
    check_gradients(target, [np.array([0.3, -0.2]), np.array(0.9)], partial=True)


def test_data_dependent_trip_count_with_maximum_iterations():
    def build(x, a):
        _, v = df.while_loop(lambda i, v: df.reduce_sum(v) < 100.0,
                             lambda i, v: (i + 1, v * a + 1.0), (0, x), maximum_iterations=4)
        return df.reduce_sum(v * v)
    check_gradients(_gradient_norm(build), [np.array([0.3, -0.2]), np.array(1.1)])
