"""``df.gradients`` on whole graphs: composites, cond, second order, stopping, sources.

Expected values come from central finite differences of forward runs
(:mod:`tests.op_harness`) or from closed forms computed with NumPy.
"""
from __future__ import annotations

import numpy as np
import pytest

import dataflow as df

from . import op_harness
from .op_harness import check_gradients, fresh_rng

PARTIAL = [False, True, "unknown_rank"]


def run(fetches, feed=None):
    return op_harness.run(fetches, feed, initialize_variables=True)


# -- composite graphs ----------------------------------------------------------------------------

def _one_hot_rows(rng, n, k):
    return np.eye(k)[rng.integers(0, k, size=n)]


@pytest.mark.parametrize("partial", PARTIAL)
def test_mlp_layer(partial):
    # Batch 5, 3 features, 4 hidden (tanh), 2 classes, mean softmax cross-entropy.
    rng, seed = fresh_rng()
    labels = _one_hot_rows(rng, 5, 2)

    def mlp(x, w1, b1, w2, b2):
        h = df.tanh(df.matmul(x, w1) + b1)
        logits = df.matmul(h, w2) + b2
        xent = df.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits)
        return df.reduce_mean(xent)
    values = [rng.standard_normal(s) for s in [(5, 3), (3, 4), (4,), (4, 2), (2,)]]
    check_gradients(mlp, values, partial=partial, rng=rng, seed=seed)


def _bias_away_from_zero(pre):
    """A bias per column putting every ``pre + bias`` far from relu's kink at 0: the
    midpoint of the widest gap between the column's negated values."""
    biases = []
    for col in -np.sort(pre, axis=0).T:
        points = np.sort(col)
        gaps = np.diff(points)
        k = int(np.argmax(gaps))
        biases.append((points[k] + points[k + 1]) / 2)
    return np.array(biases)


@pytest.mark.parametrize("partial", PARTIAL)
def test_relu_sigmoid_mlp_with_squared_error(partial):
    rng, seed = fresh_rng()
    target = rng.standard_normal((4, 1))

    def net(x, w1, b1, w2):
        h = df.nn.relu(df.matmul(x, w1) + b1)
        y = df.sigmoid(df.matmul(h, w2, transpose_b=True))
        return df.reduce_mean(df.square(y - target))
    x, w1, w2 = (rng.standard_normal(s) for s in [(4, 3), (3, 5), (1, 5)])
    b1 = _bias_away_from_zero(x @ w1)
    check_gradients(net, [x, w1, b1, w2], partial=partial, rng=rng, seed=seed)


def test_softmax_xent_of_matmul_closed_form(graph):
    # d/dW mean(xent(labels, x W)) = x^T (softmax(x W) - labels) / n.
    rng, _ = fresh_rng()
    x_val, w_val = rng.standard_normal((6, 3)), rng.standard_normal((3, 4))
    labels = _one_hot_rows(rng, 6, 4)
    x = df.placeholder(df.float64, [None, 3])
    w = df.placeholder(df.float64, [3, 4])
    loss = df.reduce_mean(df.nn.softmax_cross_entropy_with_logits(
        labels=labels, logits=df.matmul(x, w)))
    gw, = df.gradients(loss, [w])
    z = x_val @ w_val
    p = np.exp(z - z.max(axis=1, keepdims=True))
    p /= p.sum(axis=1, keepdims=True)
    np.testing.assert_allclose(run(gw, {x: x_val, w: w_val}), x_val.T @ (p - labels) / 6,
                               rtol=1e-10)


def test_shared_input_gradients_are_summed(graph):
    x = df.placeholder(df.float64, [3])
    y = x * x + 3.0 * x + df.sin(x)
    g, = df.gradients(y, [x])
    v = np.array([0.5, -1.0, 2.0])
    np.testing.assert_allclose(run(g, {x: v}), 2 * v + 3 + np.cos(v))


# -- cond ----------------------------------------------------------------------------------------

@pytest.mark.parametrize("taken", [True, False])
@pytest.mark.parametrize("partial", PARTIAL)
def test_cond_gradient(taken, partial):
    # y is captured by the true branch only: when the false branch runs its gradient
    # is zero, not missing.
    rng, seed = fresh_rng()
    positive = rng.uniform(0.5, 2.0, 3)
    x = positive if taken else -positive
    y = rng.standard_normal(3)

    def build(x, y):
        return df.cond(df.reduce_sum(x) > 0.0, lambda: df.sin(x) * y, lambda: df.square(x))
    check_gradients(build, [x, y], partial=partial, rng=rng, seed=seed)


@pytest.mark.parametrize("outer,inner", [(True, True), (True, False), (False, True),
                                         (False, False)])
def test_nested_cond_gradient(outer, inner):
    rng, seed = fresh_rng()
    a = rng.uniform(0.5, 2.0, 2) * (1 if outer else -1)
    b = rng.uniform(0.5, 2.0, 2) * (1 if inner else -1)
    c = rng.standard_normal(2)

    def build(a, b, c):
        def true_fn():
            return df.cond(df.reduce_sum(b) > 0.0, lambda: a * b * c, lambda: df.exp(b) + a)
        return df.cond(df.reduce_sum(a) > 0.0, true_fn, lambda: df.tanh(a) * c)
    check_gradients(build, [a, b, c], rng=rng, seed=seed)


def test_cond_gradient_of_tensor_used_outside_and_inside(graph):
    x = df.placeholder(df.float64, [])
    pred = df.placeholder(df.bool, [])
    y = df.cond(pred, lambda: x * x, lambda: x) + 2.0 * x
    g, = df.gradients(y, [x])
    assert run(g, {x: 3.0, pred: True}) == pytest.approx(2 * 3.0 + 2.0)
    assert run(g, {x: 3.0, pred: False}) == pytest.approx(1.0 + 2.0)


def test_cond_with_multiple_outputs(graph):
    x = df.placeholder(df.float64, [2])
    pred = df.placeholder(df.bool, [])
    u, v = df.cond(pred, lambda: (x * 2.0, df.square(x)), lambda: (x, x * 3.0))
    g, = df.gradients(df.reduce_sum(u) + df.reduce_sum(v), [x])
    value = np.array([1.5, -0.5])
    np.testing.assert_allclose(run(g, {x: value, pred: True}), 2.0 + 2 * value)
    np.testing.assert_allclose(run(g, {x: value, pred: False}), [4.0, 4.0])


# -- second order --------------------------------------------------------------------------------

def _second_derivative(fn, x_val):
    x = df.placeholder(df.float64, [None])
    dy, = df.gradients(fn(x), [x])
    d2y, = df.gradients(dy, [x])
    return run([dy, d2y], {x: x_val})


def test_second_derivative_of_cube(graph):
    v = np.array([-1.5, 0.5, 2.0])
    dy, d2y = _second_derivative(lambda x: x ** 3.0, np.abs(v))
    np.testing.assert_allclose(dy, 3 * np.abs(v) ** 2)
    np.testing.assert_allclose(d2y, 6 * np.abs(v))


def test_second_derivative_of_cube_by_multiplication(graph):
    v = np.array([-1.5, 0.5, 2.0])
    dy, d2y = _second_derivative(lambda x: x * x * x, v)
    np.testing.assert_allclose(dy, 3 * v ** 2)
    np.testing.assert_allclose(d2y, 6 * v)


@pytest.mark.parametrize("fn,d1,d2", [
    (df.tanh, lambda v: 1 - np.tanh(v) ** 2,
     lambda v: -2 * np.tanh(v) * (1 - np.tanh(v) ** 2)),
    (df.sigmoid, lambda v: np.exp(-v) / (1 + np.exp(-v)) ** 2,
     lambda v: np.exp(-v) * (np.exp(-v) - 1) / (1 + np.exp(-v)) ** 3),
    (df.exp, np.exp, np.exp),
    (df.sin, np.cos, lambda v: -np.sin(v)),
    (df.log, lambda v: 1 / v, lambda v: -1 / v ** 2),
    (df.sqrt, lambda v: 0.5 / np.sqrt(v), lambda v: -0.25 * v ** -1.5),
    (df.reciprocal, lambda v: -1 / v ** 2, lambda v: 2 / v ** 3),
], ids=["Tanh", "Sigmoid", "Exp", "Sin", "Log", "Sqrt", "Reciprocal"])
def test_second_derivative_closed_form(graph, fn, d1, d2):
    v = np.array([0.3, 0.9, 1.7])
    dy, d2y = _second_derivative(fn, v)
    np.testing.assert_allclose(dy, d1(v), rtol=1e-10)
    np.testing.assert_allclose(d2y, d2(v), rtol=1e-10)


def test_second_order_through_broadcasting(graph):
    # f = sum((x + b)^3) with b broadcast over rows; d/db sum(df/dx) = sum_rows 6 (x + b).
    x = df.placeholder(df.float64, [None, 3])
    b = df.placeholder(df.float64, [3])
    gx, = df.gradients(df.reduce_sum((x + b) ** 3.0), [x])
    gb, = df.gradients(df.reduce_sum(gx), [b])
    x_val, b_val = np.arange(6.0).reshape(2, 3) / 3, np.array([0.5, 1.0, 1.5])
    np.testing.assert_allclose(run(gb, {x: x_val, b: b_val}),
                               (6 * (x_val + b_val)).sum(axis=0))


def test_second_order_of_softmax_cross_entropy(graph):
    # g = dL/dz = p - labels; d/dz sum(g * v) = (v - sum(v p)) p  (row-wise).
    rng, _ = fresh_rng()
    z_val, v_val = rng.standard_normal((2, 3)), rng.standard_normal((2, 3))
    labels = np.array([[0.2, 0.3, 0.5], [1.0, 0.0, 0.0]])
    z = df.placeholder(df.float64, [2, 3])
    loss = df.reduce_sum(df.nn.softmax_cross_entropy_with_logits(labels=labels, logits=z))
    g, = df.gradients(loss, [z])
    h, = df.gradients(df.reduce_sum(g * v_val), [z])
    p = np.exp(z_val) / np.exp(z_val).sum(axis=1, keepdims=True)
    expected = (v_val - (v_val * p).sum(axis=1, keepdims=True)) * p
    np.testing.assert_allclose(run(h, {z: z_val}), expected, rtol=1e-9, atol=1e-12)


def test_second_order_of_matmul_and_mean(graph):
    # f = mean((x w)^2) over an n x 1 output: df/dw = 2 x^T x w / n, d/dw sum(df/dw)
    # = 2 x^T x 1 / n.
    x_val = np.array([[1.0, 2.0], [0.5, -1.0], [3.0, 0.0]])
    x = df.placeholder(df.float64, [None, 2])
    w = df.placeholder(df.float64, [2, 1])
    gw, = df.gradients(df.reduce_mean(df.square(df.matmul(x, w))), [w])
    hw, = df.gradients(df.reduce_sum(gw), [w])
    gw_val, hw_val = run([gw, hw], {x: x_val, w: [[0.5], [-1.0]]})
    np.testing.assert_allclose(gw_val, 2 * x_val.T @ x_val @ [[0.5], [-1.0]] / 3)
    np.testing.assert_allclose(hw_val, 2 * x_val.T @ x_val @ np.ones((2, 1)) / 3)


# -- stopping, grad_ys, sources ------------------------------------------------------------------

def test_stop_gradient(graph):
    x = df.placeholder(df.float64, [2])
    g, = df.gradients(x * df.stop_gradient(x), [x])
    np.testing.assert_allclose(run(g, {x: [1.5, -2.0]}), [1.5, -2.0])


def test_stop_gradients_argument(graph):
    # TF's docstring example: a = 0, b = 2a; d(a + b)/d[a, b] with both stopped is [1, 1].
    a = df.constant(0.0, dtype=df.float64)
    b = 2.0 * a
    ga, gb = df.gradients(a + b, [a, b], stop_gradients=[a, b])
    assert run([ga, gb]) == [1.0, 1.0]
    ga_full, = df.gradients(a + b, [a])
    assert run(ga_full) == 3.0


def test_stop_gradients_cuts_an_inner_tensor(graph):
    x = df.placeholder(df.float64, [])
    h = df.square(x)
    g, = df.gradients(h * x, [x], stop_gradients=[h])
    assert run(g, {x: 3.0}) == pytest.approx(9.0)


def test_grad_ys(graph):
    x = df.placeholder(df.float64, [3])
    y = df.sin(x)
    w = np.array([2.0, -1.0, 0.5])
    g, = df.gradients(y, [x], grad_ys=df.constant(w))
    v = np.array([0.1, 0.2, 0.3])
    np.testing.assert_allclose(run(g, {x: v}), w * np.cos(v))


def test_grad_ys_for_several_ys(graph):
    x = df.placeholder(df.float64, [])
    # float64 values: a Python float is a float32 grad_ys, a TypeError for float64 ys (TF).
    g, = df.gradients([x * 2.0, x * x], [x], grad_ys=[np.float64(3.0), np.float64(0.5)])
    assert run(g, {x: 4.0}) == pytest.approx(3.0 * 2 + 0.5 * 2 * 4.0)


def test_none_where_there_is_no_path(graph):
    x = df.placeholder(df.float64, [])
    z = df.placeholder(df.float64, [])
    gx, gz = df.gradients(x * 2.0, [x, z])
    assert gz is None
    assert run(gx, {x: 1.0}) == 2.0


def test_variable_as_source_gets_the_gradient_of_all_its_reads(graph):
    v = df.Variable([1.0, -2.0], dtype=df.float64)
    y = df.reduce_sum(v * v) + df.reduce_sum(3.0 * v.read_value())
    g, = df.gradients(y, [v])
    np.testing.assert_allclose(run(g), 2 * np.array([1.0, -2.0]) + 3.0)


def test_variable_in_mlp_training_step_gradients(graph):
    w = df.Variable(np.array([[0.5], [-0.5]]))
    x = df.placeholder(df.float64, [None, 2])
    loss = df.reduce_mean(df.square(df.matmul(x, w) - 1.0))
    gw, = df.gradients(loss, [w])
    x_val = np.array([[1.0, 2.0], [3.0, -1.0]])
    err = x_val @ [[0.5], [-0.5]] - 1.0
    np.testing.assert_allclose(run(gw, {x: x_val}), 2 * x_val.T @ err / 2)


def test_integer_tensors_get_none(graph):
    i = df.placeholder(df.int32, [])
    x = df.placeholder(df.float64, [])
    y = df.cast(i, df.float64) * x + df.cast(i * 2, df.float64)
    gi, gx = df.gradients(y, [i, x])
    assert gi is None
    assert run(gx, {i: 3, x: 1.0}) == 3.0


def test_integer_target_has_no_gradient_path(graph):
    # As TF: integers are not backpropagatable, so no gradient reaches i through i * 2.
    i = df.placeholder(df.int32, [])
    assert df.gradients(i * 2, [i]) == [None]


def test_float32_gradients_keep_their_dtype(graph):
    x = df.placeholder(df.float32, [None, 2])
    w = df.placeholder(df.float32, [2, 2])
    loss = df.reduce_mean(df.nn.softmax_cross_entropy_with_logits(
        labels=[[1.0, 0.0]], logits=df.matmul(x, w)))
    gx, gw = df.gradients(loss, [x, w])
    assert gx.dtype is df.float32 and gw.dtype is df.float32
    gx_val, gw_val = run([gx, gw], {x: np.ones((1, 2), np.float32),
                                    w: np.eye(2, dtype=np.float32)})
    assert gx_val.dtype == np.float32 and gw_val.dtype == np.float32


def test_scalar_gradients_are_numpy_scalars(graph):
    x = df.placeholder(df.float64, [])
    g, = df.gradients(df.reduce_sum(df.stack([x, x * x])), [x])
    value = run(g, {x: 2.0})
    assert isinstance(value, np.float64) and value == 5.0


# -- while loops (their gradients are tested in test_gradients_loops.py) ---------------

def test_gradient_beside_a_while_loop_still_works(graph):
    x = df.placeholder(df.float64, [])
    _, looped = df.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a + 1.0),
                              (0, df.constant(0.0, dtype=df.float64)))
    g, = df.gradients(x * x + looped, [x])
    assert run(g, {x: 2.5}) == pytest.approx(5.0)


# -- broadcasting gradients without run-time reductions ----------------------------------------

def _ops(tensors, op_type):
    """The ops of ``op_type`` the tensors depend on (a walk up their inputs)."""
    seen, todo = set(), [t.op for t in tensors]
    while todo:
        op = todo.pop()
        if op not in seen:
            seen.add(op)
            todo.extend(t.op for t in op.inputs)
    return [op for op in seen if op.type == op_type]


def test_bias_add_gradient_sums_only_the_bias(graph):
    # (?, 4) + (4,): the matrix side cannot have been broadcast whatever the batch size,
    # so only the bias gradient is reduced, to a constant shape (as TF1's shape()).
    x = df.placeholder(df.float64, [None, 4])
    b = df.constant(np.arange(4.0))
    gx, gb = df.gradients(df.reduce_sum((x + b) * 2.0), [x, b])
    (reduction,) = _ops([gx, gb], "SumToShape")
    assert reduction.inputs[1].op.type == "Const"
    gx_v, gb_v = run([gx, gb], {x: np.ones((3, 4))})
    np.testing.assert_array_equal(gx_v, np.full((3, 4), 2.0))
    np.testing.assert_array_equal(gb_v, np.full(4, 6.0))


def test_unknown_dims_that_may_broadcast_keep_their_reductions(graph):
    x = df.placeholder(df.float64, [None, None])
    y = df.placeholder(df.float64, [None, 5])
    gx, gy = df.gradients(df.reduce_sum(x * y), [x, y])
    assert len(_ops([gx, gy], "SumToShape")) == 2
    xv, yv = np.arange(3.0).reshape(3, 1), np.arange(5.0).reshape(1, 5)
    gx_v, gy_v = run([gx, gy], {x: xv, y: yv})
    np.testing.assert_array_equal(gx_v, np.full((3, 1), yv.sum()))
    np.testing.assert_array_equal(gy_v, np.full((1, 5), xv.sum()))


def test_shape_of_a_fully_defined_tensor_is_a_constant(graph):
    x = df.placeholder(df.float32, [2, 3])
    assert df.shape(x).op.type == "Const" and df.size(x).op.type == "Const"
    assert run(df.shape(x), {x: np.zeros((2, 3), np.float32)}).tolist() == [2, 3]
    assert df.shape(df.placeholder(df.float32, [None, 3])).op.type == "Shape"
