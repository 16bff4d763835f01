"""``df.train``: optimizers checked step by step against NumPy re-implementations of
TF1's update formulas (gradients in closed form, not from dataflow), the
Optimizer API (var_list, None gradients, global_step, slots), and the digits MLP
example."""
from __future__ import annotations

import importlib.util
import pathlib

import numpy as np
import pytest

import dataflow as df

STEPS = 6

# The least-squares problem loss = 0.5 * sum((A w + b - y)^2), with w (3x1) and a
# broadcast bias b (shape [1]); its gradients are A^T r and sum(r), r = A w + b - y.
A = np.array([[1.0, 2.0, 0.5], [0.0, -1.0, 3.0], [2.0, 0.5, -1.0], [-1.5, 1.0, 1.0]])
Y = np.array([[1.0], [-2.0], [0.5], [3.0]])
W0 = np.array([[0.5], [-0.25], [1.0]])
B0 = np.array([0.3])


def numpy_grads(w, b):
    """Closed-form gradients of the least-squares loss at ``(w, b)``."""
    r = A @ w + b - Y
    return [A.T @ r, np.array([r.sum()])]


def numpy_loss(w, b):
    return 0.5 * float(np.sum((A @ w + b - Y) ** 2))


def build_problem(dtype=df.float64):
    """The least-squares loss in the default graph; returns ``(loss, [w, b])``."""
    np_dtype = dtype.as_numpy_dtype
    w = df.Variable(W0.astype(np_dtype), name="w")
    b = df.Variable(B0.astype(np_dtype), name="b")
    pred = df.matmul(df.constant(A.astype(np_dtype)), w) + b
    loss = 0.5 * df.reduce_sum(df.square(pred - Y.astype(np_dtype)))
    return loss, [w, b]


def run_steps(train_op, variables, steps=STEPS, feeds=None):
    """Run ``train_op`` ``steps`` times; return the variables' values after each step."""
    history = []
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        for i in range(steps):
            assert sess.run(train_op, feeds[i] if feeds else None) is None
            history.append(sess.run(variables))
    return history


# -- NumPy re-implementations of TF1's update rules -----------------------------------------
def numpy_sgd(lrs):
    params = [W0.copy(), B0.copy()]
    history = []
    for lr in lrs:
        grads = numpy_grads(*params)
        params = [p - lr * g for p, g in zip(params, grads)]
        history.append(params)
    return history


def numpy_momentum(lr, momentum, nesterov, steps=STEPS):
    params = [W0.copy(), B0.copy()]
    accums = [np.zeros_like(p) for p in params]
    history = []
    for _ in range(steps):
        grads = numpy_grads(*params)
        accums = [momentum * a + g for a, g in zip(accums, grads)]
        if nesterov:
            params = [p - lr * (g + momentum * a) for p, g, a in zip(params, grads, accums)]
        else:
            params = [p - lr * a for p, a in zip(params, accums)]
        history.append(params)
    return history


def numpy_adam(lr, beta1, beta2, epsilon, steps=STEPS):
    """Returns ``(history of params, final m, final v)``."""
    params = [W0.copy(), B0.copy()]
    ms = [np.zeros_like(p) for p in params]
    vs = [np.zeros_like(p) for p in params]
    history = []
    # As TF, the beta powers are float32 variables (a Python number's dtype), updated
    # by float32 multiplication and cast to the parameters' dtype where they are used.
    beta1_power, beta2_power = np.float32(beta1), np.float32(beta2)
    for t in range(1, steps + 1):
        grads = numpy_grads(*params)
        b1p, b2p = np.float64(beta1_power), np.float64(beta2_power)
        lr_t = lr * np.sqrt(1 - b2p) / (1 - b1p)
        beta1_power = beta1_power * np.float32(beta1)
        beta2_power = beta2_power * np.float32(beta2)
        ms = [beta1 * m + (1 - beta1) * g for m, g in zip(ms, grads)]
        vs = [beta2 * v + (1 - beta2) * g * g for v, g in zip(vs, grads)]
        params = [p - lr_t * m / (np.sqrt(v) + epsilon) for p, m, v in zip(params, ms, vs)]
        history.append(params)
    return history, ms, vs


def assert_histories_close(got, want, rtol=1e-10, atol=1e-12):
    assert len(got) == len(want)
    for step, (g_params, w_params) in enumerate(zip(got, want)):
        for g, w in zip(g_params, w_params):
            np.testing.assert_allclose(g, w, rtol=rtol, atol=atol,
                                       err_msg=f"after step {step + 1}")


# -- updates match TF1's formulas -------------------------------------------------------------
def test_gradient_descent_matches_numpy(graph):
    loss, variables = build_problem()
    train_op = df.train.GradientDescentOptimizer(0.05).minimize(loss)
    assert isinstance(train_op, df.Operation)
    assert_histories_close(run_steps(train_op, variables), numpy_sgd([0.05] * STEPS))


def test_learning_rate_can_be_a_fed_tensor(graph):
    loss, variables = build_problem()
    lr = df.placeholder(df.float64, shape=[])
    train_op = df.train.GradientDescentOptimizer(lr).minimize(loss)
    lrs = [0.05, 0.01, 0.08, 0.02, 0.04, 0.03]
    got = run_steps(train_op, variables, feeds=[{lr: v} for v in lrs])
    assert_histories_close(got, numpy_sgd(lrs))


@pytest.mark.parametrize("nesterov", [False, True])
def test_momentum_matches_numpy(graph, nesterov):
    loss, variables = build_problem()
    opt = df.train.MomentumOptimizer(0.02, momentum=0.9, use_nesterov=nesterov)
    train_op = opt.minimize(loss)
    assert opt.get_slot_names() == ["momentum"]
    assert opt.get_slot(variables[0], "momentum").name == "w/Momentum:0"
    assert_histories_close(run_steps(train_op, variables),
                           numpy_momentum(0.02, 0.9, nesterov))


@pytest.mark.parametrize("lr, beta1, beta2, epsilon", [
    (0.001, 0.9, 0.999, 1e-8),    # TF1's defaults
    (0.1, 0.8, 0.95, 1e-3),       # large enough that every term matters
])
def test_adam_matches_numpy(graph, lr, beta1, beta2, epsilon):
    loss, variables = build_problem()
    opt = df.train.AdamOptimizer(lr, beta1=beta1, beta2=beta2, epsilon=epsilon)
    train_op = opt.minimize(loss)
    w = variables[0]
    m, v = opt.get_slot(w, "m"), opt.get_slot(w, "v")
    beta1_power, beta2_power = opt._get_beta_accumulators()
    assert [m.name, v.name] == ["w/Adam:0", "w/Adam_1:0"]   # TF1's slot names
    want, want_m, want_v = numpy_adam(lr, beta1, beta2, epsilon)
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        np.testing.assert_allclose(sess.run([beta1_power, beta2_power]), [beta1, beta2])
        got = []
        for _ in range(STEPS):
            sess.run(train_op)
            got.append(sess.run(variables))
        got_m, got_v, powers = sess.run([m, v, [beta1_power, beta2_power]])
    assert_histories_close(got, want)
    np.testing.assert_allclose(got_m, want_m[0], rtol=1e-10)
    np.testing.assert_allclose(got_v, want_v[0], rtol=1e-10)
    # The powers start at beta and advance once per step: beta^(t+1) after t steps.
    np.testing.assert_allclose(powers, [beta1 ** (STEPS + 1), beta2 ** (STEPS + 1)],
                               rtol=1e-6)


def test_adam_float32_matches_numpy(graph):
    # float32 variables: the beta powers are float32 too, as in TF.
    loss, variables = build_problem(df.float32)
    opt = df.train.AdamOptimizer(0.05)
    train_op = opt.minimize(loss)
    assert all(p.dtype is df.float32 for p in opt._get_beta_accumulators())
    want, _, _ = numpy_adam(0.05, 0.9, 0.999, 1e-8)
    assert_histories_close(run_steps(train_op, variables), want, rtol=1e-4, atol=1e-5)


def test_apply_gradients_uses_the_given_gradients(graph):
    # Gradients edited between compute and apply (here doubled) are what gets applied.
    loss, variables = build_problem()
    opt = df.train.GradientDescentOptimizer(0.025)
    grads_and_vars = opt.compute_gradients(loss)
    assert [v for _, v in grads_and_vars] == variables
    train_op = opt.apply_gradients([(2.0 * g, v) for g, v in grads_and_vars])
    assert_histories_close(run_steps(train_op, variables), numpy_sgd([0.05] * STEPS))


@pytest.mark.parametrize("gate", [df.train.Optimizer.GATE_NONE, df.train.Optimizer.GATE_OP,
                                  df.train.Optimizer.GATE_GRAPH])
def test_compute_gradients_values(graph, gate):
    loss, _ = build_problem()
    grads_and_vars = df.train.AdamOptimizer().compute_gradients(loss, gate_gradients=gate)
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        got = sess.run([g for g, _ in grads_and_vars])
    for g, want in zip(got, numpy_grads(W0, B0)):
        np.testing.assert_allclose(g, want, rtol=1e-12)


# -- the Optimizer API ------------------------------------------------------------------------
@pytest.mark.parametrize("make_optimizer", [
    lambda: df.train.GradientDescentOptimizer(0.05),
    lambda: df.train.MomentumOptimizer(0.01, 0.9),
    lambda: df.train.MomentumOptimizer(0.01, 0.9, use_nesterov=True),
    lambda: df.train.AdamOptimizer(0.1),
], ids=["sgd", "momentum", "nesterov", "adam"])
def test_minimize_decreases_a_convex_loss(graph, make_optimizer):
    loss, _ = build_problem()
    train_op = make_optimizer().minimize(loss)
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        start = sess.run(loss)
        for _ in range(100):
            sess.run(train_op)
        end = sess.run(loss)
    # The least-squares minimum, from the normal equations of [A 1] [w; b] = y.
    design = np.hstack([A, np.ones((4, 1))])
    best = numpy_loss(*np.split(np.linalg.lstsq(design, Y, rcond=None)[0], [3]))
    assert start == pytest.approx(numpy_loss(W0, B0))
    assert end < start
    assert end - best < 0.1 * (start - best)


def test_var_list_restricts_updates(graph):
    loss, (w, b) = build_problem()
    train_op = df.train.AdamOptimizer(0.1).minimize(loss, var_list=[b])
    history = run_steps(train_op, [w, b], steps=3)
    np.testing.assert_array_equal(history[-1][0], W0)
    assert not np.allclose(history[-1][1], B0)


def test_none_gradients_are_skipped(graph):
    loss, (w, b) = build_problem()
    unused = df.Variable(np.ones(2), name="unused")
    opt = df.train.MomentumOptimizer(0.02, 0.9)
    grads_and_vars = opt.compute_gradients(loss)
    assert [v for _, v in grads_and_vars] == [w, b, unused]
    assert grads_and_vars[2][0] is None
    train_op = opt.apply_gradients(grads_and_vars)
    assert opt.get_slot(unused, "momentum") is None     # no state for skipped variables
    history = run_steps(train_op, [w, b, unused])
    np.testing.assert_array_equal(history[-1][2], np.ones(2))
    assert_histories_close([h[:2] for h in history], numpy_momentum(0.02, 0.9, False))


def test_all_none_gradients_raise(graph):
    loss, _ = build_problem()
    unused = df.Variable(1.0, name="unused")
    opt = df.train.GradientDescentOptimizer(0.1)
    with pytest.raises(ValueError, match="No gradients provided for any variable"):
        opt.minimize(loss, var_list=[unused])
    with pytest.raises(ValueError, match="No gradients provided for any variable"):
        opt.apply_gradients([(None, unused)])


def test_invalid_arguments_raise(graph):
    loss, (w, _) = build_problem()
    opt = df.train.GradientDescentOptimizer(0.1)
    with pytest.raises(ValueError, match="No variables to optimize"):
        opt.compute_gradients(loss, var_list=[])
    with pytest.raises(ValueError, match="No variables provided"):
        opt.apply_gradients([])
    with pytest.raises(TypeError, match="unsupported type"):
        opt.compute_gradients(loss, var_list=[w.read_value()])
    with pytest.raises(ValueError, match="Invalid type int32"):
        opt.minimize(df.constant(3))


def test_default_var_list_is_the_trainable_variables(graph):
    loss, variables = build_problem()
    frozen = df.Variable(2.0, name="frozen", trainable=False, dtype=df.float64)
    loss = loss * frozen
    opt = df.train.AdamOptimizer()
    assert [v for _, v in opt.compute_gradients(loss)] == variables
    opt.minimize(loss)
    # Slots and beta powers are not trainable, so a second optimizer ignores them.
    assert df.trainable_variables() == variables
    assert {v.name for v in opt.variables()} == {
        "beta1_power:0", "beta2_power:0", "w/Adam:0", "w/Adam_1:0", "b/Adam:0", "b/Adam_1:0"}
    assert set(opt.variables()) <= set(df.global_variables())


def test_global_step_increments(graph):
    loss, _ = build_problem()
    step = df.train.get_or_create_global_step()
    assert df.train.get_or_create_global_step() is step
    assert df.train.get_global_step() is step
    assert step.dtype is df.int64 and not step.trainable
    with pytest.raises(ValueError, match="already exists"):
        df.train.create_global_step()
    train_op = df.train.MomentumOptimizer(0.01, 0.5).minimize(loss, global_step=step)
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        assert df.train.global_step(sess, step) == 0
        for _ in range(3):
            sess.run(train_op)
        assert df.train.global_step(sess, step) == 3


def test_slots_need_an_initializer_built_after_minimize(graph):
    loss, _ = build_problem()
    early_init = df.global_variables_initializer()     # before the slots exist
    train_op = df.train.AdamOptimizer().minimize(loss)
    with df.Session() as sess:
        sess.run(early_init)
        with pytest.raises(df.errors.FailedPreconditionError, match="uninitialized"):
            sess.run(train_op)
        sess.run(df.global_variables_initializer())
        sess.run(train_op)


def test_minimize_inside_control_dependencies_and_name_scope(graph):
    # Slots are made outside the caller's scopes, so their initializers run standalone.
    loss, variables = build_problem()
    gate = df.no_op(name="gate")
    with df.name_scope("training"), df.control_dependencies([gate]):
        opt = df.train.MomentumOptimizer(0.02, 0.9)
        train_op = opt.minimize(loss)
    assert opt.get_slot(variables[0], "momentum").name == "w/Momentum:0"
    assert train_op.name.startswith("training/")
    assert_histories_close(run_steps(train_op, variables), numpy_momentum(0.02, 0.9, False))


# -- the digits example --------------------------------------------------------------------
def load_example(name):
    path = pathlib.Path(__file__).resolve().parents[1] / "examples" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"examples_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_digits_mlp_example_learns():
    result = load_example("digits_mlp").main(epochs=5, verbose=False)
    assert result["train_accuracy"] >= 0.90
    assert result["test_accuracy"] >= 0.85
