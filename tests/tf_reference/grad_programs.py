"""Gradient programs that run unchanged on TensorFlow and on dataflow.

Same conventions as ``programs.py`` (each ``prog_xxx(tf)`` returns
``(fetches, feeds)`` and :func:`programs.run_program` runs it), but every
program here takes ``tf.gradients`` -- through cond, while_loop (nested,
with invariants, maximum_iterations, parallel_iterations), stop_gradient,
grad_ys and variables -- or runs a few optimizer steps.

Inputs are fixed float64 (or float32) values. A gradient that is ``None``
cannot be fetched, so :func:`fetchable` replaces it by the int32 marker
constant ``NONE_MARKER``, so the "no path" answer is compared too.

``generate_grads.py`` records the outcomes under TensorFlow in
``expected_grads.json``; ``tests/test_tf_reference_grads.py`` replays them
against dataflow.
"""
from __future__ import annotations

import numpy as np

try:  # imported as ``tests.tf_reference.grad_programs`` by pytest ...
    from .programs import is_dataflow, run_program
except ImportError:  # ... and as a sibling module by generate_grads.py
    from programs import is_dataflow, run_program

__all__ = ["NONE_MARKER", "PROGRAMS", "run_program"]


def variable(tf, value, dtype=None, name=None):
    """A resource variable in TF (graph mode defaults to ref variables), a Variable in dataflow."""
    if is_dataflow(tf):
        return tf.Variable(value, dtype=dtype, name=name)
    return tf.Variable(value, dtype=dtype, name=name, use_resource=True)


NONE_MARKER = -999


def fetchable(tf, grads):
    """The gradient list with each ``None`` replaced by the int32 constant NONE_MARKER."""
    return [tf.constant(NONE_MARKER) if g is None else g for g in grads]


def dense(tf, grads):
    """Gradients as dense tensors: TF returns IndexedSlices for a gather's gradient,
    dataflow (which has no IndexedSlices) a dense tensor; both densify the same."""
    return [g if g is None else tf.convert_to_tensor(g) for g in grads]


def c64(tf, value):
    return tf.constant(np.asarray(value, dtype=np.float64))


def ph64(tf, shape=()):
    return tf.placeholder(tf.float64, shape)


# -- cond ------------------------------------------------------------------------------------
def prog_grad_cond_taken_untaken(tf):
    """Gradients through a cond for both predicate values; ``y`` is used in one branch only."""
    p = tf.placeholder(tf.bool, [])
    x = ph64(tf)
    y = ph64(tf)
    r = tf.cond(p, lambda: x * x * y, lambda: tf.sin(x) + 2.0 * x)
    return fetchable(tf, tf.gradients(r, [x, y])), [
        {p: True, x: 1.5, y: -0.75}, {p: False, x: 1.5, y: -0.75}]


def prog_grad_cond_branch_local_tensor(tf):
    """A tensor computed inside one branch only, from a source used nowhere else."""
    p = tf.placeholder(tf.bool, [])
    x = c64(tf, [0.5, -1.0, 2.0])
    w = c64(tf, [0.3, 0.2, -0.1])

    def taken():
        local = tf.exp(w) * x
        return tf.reduce_sum(local * local)

    r = tf.cond(p, taken, lambda: tf.reduce_sum(tf.square(x)))
    return fetchable(tf, tf.gradients(r, [x, w])), [{p: True}, {p: False}]


def prog_grad_cond_nested(tf):
    """Nested conds, each branch a different function of x."""
    a = tf.placeholder(tf.bool, [])
    b = tf.placeholder(tf.bool, [])
    x = ph64(tf)

    def inner(s):
        return tf.cond(b, lambda: tf.tanh(x * s), lambda: x * x * s)

    r = tf.cond(a, lambda: inner(2.0), lambda: inner(-3.0) + tf.exp(x))
    feeds = [{a: va, b: vb, x: 0.7} for va in (True, False) for vb in (True, False)]
    return tf.gradients(r, x), feeds


def prog_grad_cond_unrelated_source(tf):
    """A source with no path to ys has gradient None; a float32 cond."""
    p = tf.placeholder(tf.bool, [])
    x = tf.constant([1.0, 2.0])
    unrelated = tf.constant(3.0)
    r = tf.cond(p, lambda: tf.reduce_sum(x * x), lambda: tf.reduce_sum(tf.sqrt(x)))
    return fetchable(tf, tf.gradients(r, [x, unrelated])), [{p: True}, {p: False}]


# -- while_loop ------------------------------------------------------------------------------
def prog_grad_while_trip_counts(tf):
    """x <- x * a + sin(x) run n times, n = 0, 1, 5; gradients w.r.t. x0 and a."""
    n = tf.placeholder(tf.int32, [])
    x0 = ph64(tf)
    a = ph64(tf)
    _, x = tf.while_loop(lambda i, x: i < n, lambda i, x: (i + 1, x * a + tf.sin(x)), [0, x0])
    return [x] + tf.gradients(x, [x0, a]), [
        {n: 0, x0: 0.4, a: 1.1}, {n: 1, x0: 0.4, a: 1.1}, {n: 5, x0: 0.4, a: 1.1}]


def prog_grad_while_vector_state(tf):
    """Tensor-valued loop state, elementwise with a captured vector; loss a reduce_sum."""
    v0 = c64(tf, [0.1, -0.2, 0.3, 0.5])
    w = c64(tf, [1.0, 0.5, -0.7, 0.9])

    def body(i, v):
        return i + 1, tf.sin(v * w) + v * 0.5

    _, v = tf.while_loop(lambda i, v: i < 4, body, [0, v0])
    loss = tf.reduce_sum(v * v)
    return [loss] + tf.gradients(loss, [v0, w]), {}


def prog_grad_while_rnn(tf):
    """h <- tanh(h W + x_t U + b) over a fed sequence, matmul + tanh; grads of all params."""
    rng = np.random.RandomState(0)
    xs = c64(tf, rng.randn(5, 2, 3) * 0.5)       # time, batch, input
    W = c64(tf, rng.randn(4, 4) * 0.4)
    U = c64(tf, rng.randn(3, 4) * 0.4)
    b = c64(tf, rng.randn(4) * 0.1)
    h0 = c64(tf, rng.randn(2, 4) * 0.2)

    def body(t, h):
        return t + 1, tf.tanh(tf.matmul(h, W) + tf.matmul(tf.gather(xs, t), U) + b)

    _, h = tf.while_loop(lambda t, h: t < 5, body, [0, h0])
    loss = tf.reduce_sum(tf.square(h)) + tf.reduce_mean(h)
    return [loss] + dense(tf, tf.gradients(loss, [W, U, b, h0, xs])), {}


def prog_grad_while_loop_invariant(tf):
    """A loop-invariant captured tensor used several times per iteration."""
    c = ph64(tf)
    k = ph64(tf)

    def body(i, acc):
        return i + 1, acc * c + tf.square(c) * k

    _, acc = tf.while_loop(lambda i, a: i < 4, body, [0, tf.constant(1.0, tf.float64)])
    return [acc] + tf.gradients(acc, [c, k]), [{c: 0.9, k: -0.5}, {c: -1.3, k: 2.0}]


def prog_grad_while_ignored_loop_var(tf):
    """One loop var passed through untouched, one replaced by a value that ignores it."""
    n = tf.placeholder(tf.int32, [])
    x0 = ph64(tf)
    y0 = ph64(tf)
    z0 = ph64(tf)

    def body(i, x, y, z):
        return i + 1, x * 1.5 + 1.0, y, tf.constant(2.0, tf.float64) * x

    _, x, y, z = tf.while_loop(lambda i, x, y, z: i < n, body, [0, x0, y0, z0])
    loss = x + 3.0 * y + 5.0 * z
    return [loss] + tf.gradients(loss, [x0, y0, z0]), [
        {n: 0, x0: 0.5, y0: 2.0, z0: -1.0}, {n: 3, x0: 0.5, y0: 2.0, z0: -1.0}]


def prog_grad_while_maximum_iterations(tf):
    """maximum_iterations cutting the loop short (fed), at 0, and not binding."""
    m = tf.placeholder(tf.int32, [])
    x0 = ph64(tf)
    _, x = tf.while_loop(lambda i, x: i < 6, lambda i, x: (i + 1, x * x * 0.5 + x),
                         (0, x0), maximum_iterations=m)
    return [x] + tf.gradients(x, x0), [{m: 2, x0: 0.3}, {m: 0, x0: 0.3}, {m: 20, x0: 0.3}]


def prog_grad_while_parallel_iterations(tf):
    """parallel_iterations 1 and 10 give the same gradients."""
    x0 = c64(tf, [0.5, -0.25])
    s = c64(tf, 0.8)

    def build(parallel):
        def body(i, x, acc):
            xi = tf.cos(x) * s + tf.cast(i, tf.float64) * 0.1
            return i + 1, xi, acc + tf.reduce_sum(xi * xi)
        _, _, acc = tf.while_loop(lambda i, x, a: i < 12, body,
                                  [0, x0, tf.constant(0.0, tf.float64)],
                                  parallel_iterations=parallel)
        return [acc] + tf.gradients(acc, [x0, s])

    return [build(1), build(10)], {}


def prog_grad_while_float32(tf):
    """A float32 loop: x <- x * w + b, gradients w.r.t. w, b, x0."""
    x0 = tf.constant([1.0, -2.0, 0.5])
    w = tf.constant(0.9)
    b = tf.constant([0.1, 0.2, 0.3])
    _, x = tf.while_loop(lambda i, x: i < 6, lambda i, x: (i + 1, tf.tanh(x * w + b)), [0, x0])
    loss = tf.reduce_sum(x)
    return [loss] + tf.gradients(loss, [x0, w, b]), {}


# -- nested loops ----------------------------------------------------------------------------
def prog_grad_nested_while_two_deep(tf):
    """The inner loop runs i times (i = outer counter); gradient w.r.t. x0 and a scale."""
    x0 = ph64(tf)
    s = ph64(tf)

    def outer(i, x):
        _, x = tf.while_loop(lambda j, y: j < i, lambda j, y: (j + 1, tf.sin(y) * s + y),
                             [0, x])
        return i + 1, x * 0.9

    _, x = tf.while_loop(lambda i, x: i < 4, outer, [0, x0])
    return [x] + tf.gradients(x, [x0, s]), [{x0: 0.3, s: 0.5}, {x0: -1.2, s: 1.1}]


def prog_grad_nested_while_three_deep(tf):
    """Three nested loops; trip counts depend on outer counters; a captured scale."""
    x0 = ph64(tf)
    s = ph64(tf)

    def level1(i, x):
        def level2(j, x):
            _, x = tf.while_loop(lambda k, y: k < j + 1,
                                 lambda k, y: (k + 1, y * s + tf.cast(k, tf.float64) * 0.01),
                                 [0, x])
            return j + 1, tf.tanh(x)
        _, x = tf.while_loop(lambda j, y: j < i + 1, level2, [0, x])
        return i + 1, x + 0.1

    _, x = tf.while_loop(lambda i, x: i < 3, level1, [0, x0])
    return [x] + tf.gradients(x, [x0, s]), [{x0: 0.4, s: 1.2}, {x0: -0.8, s: 0.7}]


def prog_grad_nested_while_vector_state(tf):
    """Nested loops on a vector with a matmul in the inner body."""
    v0 = c64(tf, [[0.2, -0.1, 0.4]])
    M = c64(tf, [[0.5, -0.3, 0.1], [0.2, 0.4, -0.6], [0.3, 0.1, 0.2]])

    def outer(i, v):
        _, v = tf.while_loop(lambda j, u: j < 2, lambda j, u: (j + 1, tf.tanh(tf.matmul(u, M))),
                             [0, v])
        return i + 1, v + v0

    _, v = tf.while_loop(lambda i, v: i < 3, outer, [0, v0])
    loss = tf.reduce_sum(v * c64(tf, [[1.0, 2.0, 3.0]]))
    return [loss] + tf.gradients(loss, [v0, M]), {}


# -- mixed control flow ----------------------------------------------------------------------
def prog_grad_cond_in_while(tf):
    """A cond on the loop counter inside the body; a captured tensor in one branch only."""
    x0 = ph64(tf)
    k = ph64(tf)

    def body(i, x):
        even = tf.equal(tf.floormod(i, 2), 0)
        return i + 1, tf.cond(even, lambda: x * k + 0.5, lambda: tf.sin(x))

    _, x = tf.while_loop(lambda i, x: i < 5, body, [0, x0])
    return [x] + tf.gradients(x, [x0, k]), [{x0: 0.6, k: 1.3}, {x0: -0.2, k: 0.4}]


def prog_grad_cond_on_state_in_while(tf):
    """The cond predicate depends on the loop state (different branch per iteration)."""
    x0 = ph64(tf)

    def body(i, x):
        return i + 1, tf.cond(x > 1.0, lambda: x * 0.5, lambda: x * x + 0.7)

    _, x = tf.while_loop(lambda i, x: i < 6, body, [0, x0])
    return [x] + tf.gradients(x, x0), [{x0: 0.3}, {x0: 3.0}]


def prog_grad_while_in_cond(tf):
    """A loop on each branch of a cond; only the taken one contributes."""
    p = tf.placeholder(tf.bool, [])
    x = ph64(tf)
    a = ph64(tf)

    def looped():
        return tf.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, y * a + 1.0), [0, x])[1]

    def other():
        return tf.while_loop(lambda i, y: i < 2, lambda i, y: (i + 1, tf.exp(y * 0.5)), [0, x])[1]

    r = tf.cond(p, looped, other)
    return [r] + fetchable(tf, tf.gradients(r, [x, a])), [
        {p: True, x: 0.5, a: 1.5}, {p: False, x: 0.5, a: 1.5}]


def prog_grad_cond_in_while_in_cond(tf):
    """A cond inside a loop inside a cond branch."""
    p = tf.placeholder(tf.bool, [])
    x = ph64(tf)

    def branch():
        def body(i, y):
            return i + 1, tf.cond(i < 2, lambda: y * 3.0, lambda: tf.square(y))
        return tf.while_loop(lambda i, y: i < 4, body, [0, x])[1]

    r = tf.cond(p, branch, lambda: x * 10.0)
    return [r] + tf.gradients(r, x), [{p: True, x: 0.9}, {p: False, x: 0.9}]


def prog_grad_cond_branch_returns_source(tf):
    """A branch returns an outside tensor unchanged; a tuple cond with one output unused."""
    p = tf.placeholder(tf.bool, [])
    x = ph64(tf)
    y = ph64(tf)
    r = tf.cond(p, lambda: x, lambda: x * y)
    first, _ = tf.cond(p, lambda: (x * 3.0, y), lambda: (y * y, x))
    return fetchable(tf, tf.gradients(r, [x, y]) + tf.gradients(first, [x, y])), [
        {p: True, x: 2.0, y: -0.5}, {p: False, x: 2.0, y: -0.5}]


def prog_grad_while_unused_exit(tf):
    """The loss uses one loop output; the other loop variable still carries gradient."""
    x0 = ph64(tf)
    y0 = ph64(tf)
    _, x, _ = tf.while_loop(lambda i, x, y: i < 4,
                            lambda i, x, y: (i + 1, x * y + 0.1, y * 1.1), [0, x0, y0])
    return [x] + tf.gradients(x, [x0, y0]), {x0: 0.5, y0: 0.9}


def prog_grad_nested_while_captures_outer_state(tf):
    """The inner body captures the outer loop variable (an invariant of the inner loop)."""
    x0 = ph64(tf)

    def outer(i, x, acc):
        _, inner = tf.while_loop(lambda j, a: j < i + 1,
                                 lambda j, a: (j + 1, a + tf.sin(x) * tf.cast(j + 1, tf.float64)),
                                 [0, tf.constant(0.0, tf.float64)])
        return i + 1, x * 0.8 + 0.2, acc + inner * x

    _, _, acc = tf.while_loop(lambda i, x, a: i < 3, outer,
                              [0, x0, tf.constant(0.0, tf.float64)])
    return [acc] + tf.gradients(acc, x0), [{x0: 0.7}, {x0: -1.4}]


def prog_grad_nested_maximum_iterations(tf):
    """Inner loop bounded by maximum_iterations = outer counter + 1; outer by a fed value."""
    x0 = ph64(tf)
    m = tf.placeholder(tf.int32, [])

    def outer(i, x):
        _, x = tf.while_loop(lambda j, y: j < 100, lambda j, y: (j + 1, y * 1.2 - 0.1),
                             (0, x), maximum_iterations=i + 1)
        return i + 1, tf.tanh(x)

    _, x = tf.while_loop(lambda i, x: i < 10, outer, (0, x0), maximum_iterations=m)
    return [x] + tf.gradients(x, x0), [{x0: 0.3, m: 3}, {x0: 0.3, m: 0}]


def prog_grad_nested_while_parallel_iterations(tf):
    """Nested loops with parallel_iterations 1 and 10 on each level."""
    x0 = c64(tf, [0.3, -0.6])
    w = c64(tf, [1.1, 0.7])

    def build(parallel):
        def outer(i, x):
            _, x = tf.while_loop(lambda j, y: j < i, lambda j, y: (j + 1, tf.sin(y * w)),
                                 [0, x], parallel_iterations=parallel)
            return i + 1, x + 0.05
        _, x = tf.while_loop(lambda i, x: i < 4, outer, [0, x0], parallel_iterations=parallel)
        loss = tf.reduce_sum(x * x)
        return [loss] + tf.gradients(loss, [x0, w])

    return [build(1), build(10)], {}


def prog_grad_while_in_cond_in_while(tf):
    """A loop in a cond branch inside an outer loop body."""
    x0 = ph64(tf)

    def body(i, x):
        def looped():
            return tf.while_loop(lambda j, y: j < i, lambda j, y: (j + 1, y * 0.9 + 0.05),
                                 [0, x])[1]
        return i + 1, tf.cond(i > 1, looped, lambda: tf.exp(x * 0.3))

    _, x = tf.while_loop(lambda i, x: i < 5, body, [0, x0])
    return [x] + tf.gradients(x, x0), [{x0: 0.4}, {x0: -0.9}]


# -- stop_gradient, grad_ys, stop_gradients ------------------------------------------------
def prog_grad_stop_gradient(tf):
    """stop_gradient blocks one path, inside and outside a loop."""
    x = ph64(tf)
    y = x * x + tf.stop_gradient(x * x * x)
    _, z = tf.while_loop(lambda i, z: i < 3,
                         lambda i, z: (i + 1, z * tf.stop_gradient(z) + z), [0, x])
    only_stopped = tf.stop_gradient(x) * 2.0
    return fetchable(tf, tf.gradients([y, z], x) + tf.gradients(only_stopped, x)), {x: 0.7}


def prog_grad_grad_ys(tf):
    """grad_ys weights for two ys, one a vector going through a loop."""
    x = c64(tf, [1.0, 2.0, -1.0])
    y1 = x * x
    _, y2 = tf.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 1.5 + tf.sin(v)), [0, x])
    gy1 = c64(tf, [0.5, -1.0, 2.0])
    gy2 = c64(tf, [3.0, 0.25, -0.5])
    return [tf.gradients([y1, y2], x, grad_ys=[gy1, gy2]),
            tf.gradients(y2, x, grad_ys=gy2)], {}


def prog_grad_stop_gradients_argument(tf):
    """The stop_gradients argument treats an intermediate as a constant."""
    x = ph64(tf)
    a = x * 3.0
    b = a * a + x
    return fetchable(tf, tf.gradients(b, [x, a], stop_gradients=[a]) + tf.gradients(b, x)), \
        {x: 0.5}


def prog_grad_op_gradients(tf):
    """Gradients of common ops: matmul, softmax xent, reductions, gather, concat, where."""
    rng = np.random.RandomState(1)
    a = c64(tf, rng.randn(3, 4))
    w = c64(tf, rng.randn(4, 5))
    labels = c64(tf, np.eye(5)[[0, 3, 4]])
    logits = tf.matmul(a, w)
    xent = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=labels,
                                                                        logits=logits))
    g = tf.reduce_sum(tf.gather(a, [2, 0, 2]) * 2.0)
    cat = tf.reduce_max(tf.concat([a, tf.transpose(w)], 0), axis=1)
    sel = tf.where(a > 0.0, a * a, -a)
    loss = xent + g + tf.reduce_sum(cat) + tf.reduce_mean(sel) + tf.reduce_sum(tf.sigmoid(w))
    return [loss] + tf.gradients(loss, [a, w]), {}


# -- variables and optimizers ----------------------------------------------------------------
def prog_grad_variable(tf):
    """Gradient w.r.t. a variable read several times, inside and outside a loop."""
    v = variable(tf, np.array([0.5, -1.5], dtype=np.float64))
    x = c64(tf, [2.0, 3.0])
    _, acc = tf.while_loop(lambda i, a: i < 3,
                           lambda i, a: (i + 1, a * v.read_value() + x), [0, x])
    loss = tf.reduce_sum(acc) + tf.reduce_sum(tf.square(v.read_value()))
    return [loss] + tf.gradients(loss, v), {}


def _quadratic_loss(tf):
    w = variable(tf, np.array([[0.5, -0.3], [0.2, 0.8]], dtype=np.float64), name="w")
    b = variable(tf, np.array([0.1, -0.1], dtype=np.float64), name="b")
    xs = c64(tf, [[1.0, 2.0], [-1.0, 0.5], [0.3, -0.7]])
    ys = c64(tf, [[0.0, 1.0], [1.0, 0.0], [0.5, 0.5]])
    pred = tf.tanh(tf.matmul(xs, w) + b)
    return w, b, tf.reduce_mean(tf.square(pred - ys))


def _three_steps(tf, opt, loss, vars_):
    train = opt.minimize(loss)
    with tf.control_dependencies([train]):
        after = [v.read_value() for v in vars_]
    return after, [{}, {}, {}]


def prog_opt_gradient_descent(tf):
    """Three GradientDescent steps on a small tanh regression."""
    w, b, loss = _quadratic_loss(tf)
    return _three_steps(tf, tf.train.GradientDescentOptimizer(0.5), loss, [w, b])


def prog_opt_momentum(tf):
    """Three Momentum steps. (Float64 programs use hyperparameters exact in float32: see
    prog_opt_adam_float64.)"""
    w, b, loss = _quadratic_loss(tf)
    return _three_steps(tf, tf.train.MomentumOptimizer(0.25, 0.875), loss, [w, b])


def prog_opt_momentum_nesterov(tf):
    """Three Nesterov Momentum steps."""
    w, b, loss = _quadratic_loss(tf)
    return _three_steps(tf, tf.train.MomentumOptimizer(0.25, 0.875, use_nesterov=True), loss,
                        [w, b])


def prog_opt_adam(tf):
    """Three Adam steps on float32 variables (default beta1, beta2, epsilon)."""
    w = variable(tf, np.array([[0.5, -0.3], [0.2, 0.8]], dtype=np.float32), name="w")
    b = variable(tf, np.array([0.1, -0.1], dtype=np.float32), name="b")
    xs = tf.constant([[1.0, 2.0], [-1.0, 0.5], [0.3, -0.7]])
    ys = tf.constant([[0.0, 1.0], [1.0, 0.0], [0.5, 0.5]])
    loss = tf.reduce_mean(tf.square(tf.tanh(tf.matmul(xs, w) + b) - ys))
    return _three_steps(tf, tf.train.AdamOptimizer(0.1), loss, [w, b])


def prog_opt_adam_float64(tf):
    """Three Adam steps on float64 variables.

    TF converts Python-number hyperparameters to float32 tensors and then casts them
    to the variable's dtype; dataflow deliberately converts them straight to that dtype.
    The hyperparameters here are float32 values (0.1, 0.9, 0.999, 1e-8 rounded to
    float32), on which both agree. TF also keeps beta1_power and beta2_power as
    float32 variables (their initial values are Python floats).
    """
    def f32(x):
        return float(np.float32(x))

    w, b, loss = _quadratic_loss(tf)
    return _three_steps(tf, tf.train.AdamOptimizer(f32(0.1), beta1=f32(0.9), beta2=f32(0.999),
                                                   epsilon=f32(1e-8)), loss, [w, b])


def prog_opt_adam_through_while(tf):
    """Adam on a loss computed by a while loop (an RNN-like recurrence), float32."""
    w = variable(tf, np.array([[0.4, -0.2], [0.1, 0.3]], dtype=np.float32), name="w")
    h0 = tf.constant([[1.0, -1.0]])

    def body(i, h):
        return i + 1, tf.tanh(tf.matmul(h, w) + 0.1)

    _, h = tf.while_loop(lambda i, h: i < 4, body, [0, h0])
    loss = tf.reduce_sum(tf.square(h - tf.constant([[0.5, 0.5]])))
    return _three_steps(tf, tf.train.AdamOptimizer(0.05), loss, [w])


def prog_grad_variable_read_in_cond(tf):
    """Gradient w.r.t. a variable read inside a cond branch (its handle goes through a
    resource Switch), and read outside the cond and used in a branch."""
    v = variable(tf, np.float64(1.5))
    p = tf.placeholder(tf.bool, [])
    inside = tf.cond(p, lambda: v.read_value() * 2.0, lambda: tf.constant(0.0, tf.float64))
    r = v.read_value()
    outside = tf.cond(p, lambda: r * 2.0, lambda: tf.constant(0.0, tf.float64))
    return fetchable(tf, tf.gradients(inside, v) + tf.gradients(outside, v)), \
        [{p: True}, {p: False}]


def prog_opt_sgd_through_cond(tf):
    """GradientDescent on a loss through a cond that flips branch as the variable moves."""
    v = variable(tf, np.float64(1.2), name="v")
    loss = tf.cond(v.read_value() > 1.0, lambda: tf.square(v.read_value() - 0.5) * 2.0,
                   lambda: tf.cos(v.read_value()))
    return _three_steps(tf, tf.train.GradientDescentOptimizer(0.375), loss, [v])


PROGRAMS = {name: fn for name, fn in list(globals().items())
            if name.startswith("prog_") and callable(fn)}
