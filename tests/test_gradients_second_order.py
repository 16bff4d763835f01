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
