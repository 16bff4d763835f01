"""Second-order gradients through nested while loops and through conds inside loops
(see dataflow/spec/SECOND_ORDER.md, "Nested loops" and "Conds inside loops").

Every case is checked against central differences of the first gradient
(``check_gradients`` of a function that itself calls ``df.gradients``), with static
and with partly unknown shapes, and where one exists against a closed form.
"""
import numpy as np
import pytest

import dataflow as df

from .op_harness import check_gradients, fresh_rng, numeric_gradient


def _gradient_norm(build):
    """``xs -> sum_x |d build / d x|^2``: differentiating it takes second derivatives of
    ``build`` (its Hessian times the gradient)."""
    def norm(*xs):
        grads = df.gradients(build(*xs), list(xs))
        return df.add_n([df.reduce_sum(g * g) for g in grads])
    return norm


def _nested_power(x, w, outer_trips, inner_trips):
    """``v = x``; outer loop ``i < outer_trips``, inner ``j < inner_trips(i)``: v *= w."""
    def outer(i, v):
        _, v = df.while_loop(lambda j, u: j < inner_trips(i), lambda j, u: (j + 1, u * w),
                             (0, v))
        return i + 1, v
    _, y = df.while_loop(lambda i, v: i < outer_trips, outer, (0, x))
    return y


@pytest.mark.parametrize("outer_trips,inner_trips,power", [
    (2, lambda i: 3, 6), (3, lambda i: i + 1, 6), (3, lambda i: 2 - i, 3), (1, lambda i: 0, 0)])
def test_nested_power_loop_closed_form(outer_trips, inner_trips, power):
    """y = x w^K, K multiplications in all (the inner trip count may depend on the outer
    iteration, and be 0): d2y/dw2 = K(K-1) x w^(K-2), d2y/dx dw = K w^(K-1)."""
    x0, w0 = 1.5, 1.2
    with df.Graph().as_default():
        x = df.placeholder(df.float64, [])
        w = df.placeholder(df.float64, [])
        y = _nested_power(x, w, outer_trips, inner_trips)
        (gw,) = df.gradients(y, w)
        hx, hw = df.gradients(gw, [x, w])
        fetches = [y, gw] + [h for h in (hx, hw) if h is not None]
        with df.Session() as sess:
            got = sess.run(fetches, {x: x0, w: w0})
    k = power
    assert got[0] == pytest.approx(x0 * w0 ** k)
    assert got[1] == pytest.approx(k * x0 * w0 ** (k - 1) if k else 0.0)
    if k:
        assert got[2] == pytest.approx(k * w0 ** (k - 1))
        assert got[3] == pytest.approx(k * (k - 1) * x0 * w0 ** (k - 2) if k > 1 else 0.0)


def test_x_multiplied_in_nested_loops_third_derivative():
    """x multiplied by itself 4 times in a 2x2 nest is x^5: d2 = 20 x^3, d3 = 60 x^2."""
    with df.Graph().as_default():
        x = df.placeholder(df.float64, [])
        y = _nested_power(x, x, 2, lambda i: 2)
        (g,) = df.gradients(y, x)
        (h,) = df.gradients(g, x)
        (t,) = df.gradients(h, x)
        with df.Session() as sess:
            got = sess.run([g, h, t], {x: 0.9})
    assert got == pytest.approx([5 * 0.9 ** 4, 20 * 0.9 ** 3, 60 * 0.9 ** 2])


@pytest.mark.parametrize("first_branch", [True, False])
def test_cond_in_a_loop_closed_form(first_branch):
    """Four iterations, a cond multiplying by w (true) or by w^2 (false), the branch
    switching between iterations: y = x w^K with K = 1 + 2 + 1 + 2 (or 2 + 1 + 2 + 1)."""
    x0, w0 = 1.3, 0.9
    with df.Graph().as_default():
        x = df.placeholder(df.float64, [])
        w = df.placeholder(df.float64, [])
        even = df.constant(first_branch)
        _, y = df.while_loop(
            lambda i, v: i < 4,
            lambda i, v: (i + 1, df.cond(df.equal(df.equal(i % 2, 0), even),
                                         lambda: v * w, lambda: v * w * w)), (0, x))
        (gw,) = df.gradients(y, w)
        hx, hw = df.gradients(gw, [x, w])
        with df.Session() as sess:
            got = sess.run([gw, hx, hw], {x: x0, w: w0})
    k = 6
    assert got == pytest.approx([k * x0 * w0 ** (k - 1), k * w0 ** (k - 1),
                                 k * (k - 1) * x0 * w0 ** (k - 2)])


def test_cond_in_a_loop_third_derivative():
    """x^7 built as v*x twice then v*x*x twice in a cond: d3/dx3 = 210 x^4."""
    with df.Graph().as_default():
        x = df.placeholder(df.float64, [])
        _, y = df.while_loop(
            lambda i, v: i < 4,
            lambda i, v: (i + 1, df.cond(i < 2, lambda: v * x, lambda: v * x * x)), (0, x))
        (g,) = df.gradients(y, x)
        (h,) = df.gradients(g, x)
        (t,) = df.gradients(h, x)
        with df.Session() as sess:
            assert sess.run(t, {x: 0.9}) == pytest.approx(210 * 0.9 ** 4)


# -- finite differences of first gradients ----------------------------------------------
def nested_dependent_trip_count(x, a):
    def outer(i, v):
        _, v = df.while_loop(lambda j, u: j < i + 1,
                             lambda j, u: (j + 1, df.sin(u * a) + u), (0, v))
        return i + 1, v
    _, y = df.while_loop(lambda i, v: i < 3, outer, (0, x))
    return df.reduce_sum(y * y)


def three_levels(x, a):
    def level1(i, v):
        def level2(j, u):
            _, u = df.while_loop(lambda k, t: k < j + 1,
                                 lambda k, t: (k + 1, df.sin(t * a)), (0, u))
            return j + 1, u * a
        _, v = df.while_loop(lambda j, u: j < i + 1, level2, (0, v))
        return i + 1, v
    _, y = df.while_loop(lambda i, v: i < 2, level1, (0, x))
    return df.reduce_sum(y * y)


def nested_two_loop_variables(x, a):
    def outer(i, v, s):
        _, v, s = df.while_loop(
            lambda j, u, t: j < i + 2,
            lambda j, u, t: (j + 1, df.tanh(u * a) + 0.1 * t, t + df.reduce_sum(u * u)),
            (0, v, s))
        return i + 1, v, s
    _, y, s = df.while_loop(lambda i, v, s: i < 2, outer,
                            (0, x, df.constant(0.0, df.float64)))
    return df.reduce_sum(y) * s


def cond_alternating(x, a):
    _, y = df.while_loop(
        lambda i, v: i < 4,
        lambda i, v: (i + 1, df.cond(df.equal(i % 2, 0), lambda: df.tanh(v * a),
                                     lambda: v * v * a)), (0, x))
    return df.reduce_sum(y)


def cond_on_data(x, a):
    _, y = df.while_loop(
        lambda i, v: i < 4,
        lambda i, v: (i + 1, df.cond(df.reduce_sum(v) > 0.0, lambda: df.sin(v) * a,
                                     lambda: v * a + 0.5)), (0, x))
    return df.reduce_sum(y * y)


def cond_passing_a_value_through(x, a):
    _, y = df.while_loop(
        lambda i, v: i < 4,
        lambda i, v: (i + 1, df.cond(i < 2, lambda: v, lambda: df.sin(v) * a)), (0, x))
    return df.reduce_sum(y * y)


def cond_in_a_cond_in_a_loop(x, a):
    def body(i, v):
        return i + 1, df.cond(i < 2, lambda: df.cond(df.equal(i, 0), lambda: v * a,
                                                     lambda: df.sin(v)),
                              lambda: v * v * a)
    _, y = df.while_loop(lambda i, v: i < 4, body, (0, x))
    return df.reduce_sum(y)


def case_in_a_loop(x, a):
    def body(i, v):
        return i + 1, df.case([(df.equal(i, 0), lambda: v * a),
                               (df.equal(i, 1), lambda: df.sin(v))], default=lambda: v * v)
    _, y = df.while_loop(lambda i, v: i < 3, body, (0, x))
    return df.reduce_sum(y)


def cond_in_a_nested_loop(x, a):
    def outer(i, v):
        _, v = df.while_loop(
            lambda j, u: j < 2,
            lambda j, u: (j + 1, df.cond(df.equal(j, i % 2), lambda: df.sin(u) * a,
                                         lambda: u * a)), (0, v))
        return i + 1, v
    _, y = df.while_loop(lambda i, v: i < 3, outer, (0, x))
    return df.reduce_sum(y)


def outer_counter_in_an_inner_cond(x, a):
    def outer(i, v):
        _, v = df.while_loop(
            lambda j, u: j < 2,
            lambda j, u: (j + 1, df.cond(i > 0, lambda: u * a, lambda: df.tanh(u + a))),
            (0, v))
        return i + 1, v
    _, y = df.while_loop(lambda i, v: i < 2, outer, (0, x))
    return df.reduce_sum(y * y)


def loop_in_a_cond_in_a_loop(x, a):
    def body(i, v):
        def inner():
            _, u = df.while_loop(lambda j, u: j < i + 1,
                                 lambda j, u: (j + 1, df.sin(u) * a), (0, v))
            return u
        return i + 1, df.cond(i < 2, inner, lambda: v * a)
    _, y = df.while_loop(lambda i, v: i < 4, body, (0, x))
    return df.reduce_sum(y)


def loop_in_a_cond(x, a):
    def inner():
        _, u = df.while_loop(lambda j, u: j < 3, lambda j, u: (j + 1, df.sin(u) * a), (0, x))
        return u
    return df.reduce_sum(df.square(df.cond(a > 0.0, inner, lambda: x * a)))


def scan_in_map_fn(x, a):
    ys = df.map_fn(lambda row: df.scan(lambda acc, e: df.tanh(acc * a + e), row), x)
    return df.reduce_sum(ys * ys)


def map_fn_in_scan(x, a):
    ys = df.scan(lambda acc, e: acc + df.map_fn(lambda t: df.sin(t * a) * t, e), x)
    return df.reduce_sum(ys * ys)


def tensor_array_in_nested_loops(x, a):
    n, m = 3, 2
    out = df.TensorArray(df.float64, size=n)

    def outer(i, o):
        row = df.TensorArray(df.float64, size=m).unstack(x[i])

        def inner(j, acc):
            return j + 1, df.tanh(acc * a + row.read(j))
        _, acc = df.while_loop(lambda j, acc: j < m, inner,
                               (0, df.constant(0.0, df.float64)))
        return i + 1, o.write(i, acc)
    _, out = df.while_loop(lambda i, o: i < n, outer, (0, out))
    return df.reduce_sum(out.stack() ** 2)


def tensor_array_and_cond_in_a_loop(x, a):
    n = 4
    elems = df.TensorArray(df.float64, size=n).unstack(x)
    out = df.TensorArray(df.float64, size=n)

    def body(i, o):
        e = elems.read(i)
        return i + 1, o.write(i, df.cond(i < 2, lambda: df.sin(e * a), lambda: e * e * a))
    _, out = df.while_loop(lambda i, o: i < n, body, (0, out))
    return df.reduce_sum(out.stack() ** 2)


def tensor_array_written_in_a_cond(x, a):
    n = 4
    elems = df.TensorArray(df.float64, size=n).unstack(x)
    out = df.TensorArray(df.float64, size=n)

    def body(i, o):
        e = elems.read(i)
        return i + 1, df.cond(i < 2, lambda: o.write(i, df.sin(e * a)),
                              lambda: o.write(i, e * e * a))
    _, out = df.while_loop(lambda i, o: i < n, body, (0, out))
    return df.reduce_sum(out.stack() ** 2)


def tensor_array_read_in_a_cond(x, a):
    n = 4
    elems = df.TensorArray(df.float64, size=n).unstack(x)

    def body(i, v):
        return i + 1, df.cond(i < 2, lambda: v + df.sin(elems.read(i) * a), lambda: v * a)
    _, y = df.while_loop(lambda i, v: i < n, body, (0, df.zeros_like(x[0])))
    return df.reduce_sum(y ** 2)


def rnn_with_a_refining_inner_loop(x, w):
    def step(t, h):
        def refine(k, hh):
            z = df.matmul(hh, w) + x[t]
            return k + 1, df.cond(df.equal(k, 0), lambda: df.tanh(z),
                                  lambda: 0.5 * hh + 0.5 * df.sin(z))
        _, h = df.while_loop(lambda k, hh: k < 2, refine, (0, h))
        return t + 1, h
    _, h = df.while_loop(lambda t, h: t < 3, step, (0, df.zeros_like(x[0:1])))
    return df.reduce_sum(h * h)


_VECTOR_PROGRAMS = [nested_dependent_trip_count, three_levels, nested_two_loop_variables,
                    cond_alternating, cond_passing_a_value_through, cond_in_a_cond_in_a_loop,
                    case_in_a_loop, cond_in_a_nested_loop, outer_counter_in_an_inner_cond,
                    loop_in_a_cond_in_a_loop, loop_in_a_cond]


@pytest.mark.parametrize("partial", [False, True])
@pytest.mark.parametrize("build", _VECTOR_PROGRAMS, ids=lambda f: f.__name__)
def test_vector_programs_match_finite_differences(build, partial):
    rng, _ = fresh_rng()
    values = [rng.standard_normal(2) * 0.5, np.array(rng.uniform(0.5, 0.9))]
    check_gradients(_gradient_norm(build), values, partial=partial, rng=rng)


@pytest.mark.parametrize("partial", [False, True])
def test_cond_on_data_matches_finite_differences(partial):
    """The branch depends on the loop state; the inputs keep every iteration's sum away
    from 0, so finite differences do not cross a branch switch."""
    check_gradients(_gradient_norm(cond_on_data), [np.array([0.3, -0.5]), np.array(0.7)],
                    partial=partial)


@pytest.mark.parametrize("partial", [False, True])
@pytest.mark.parametrize("build,shape", [
    (scan_in_map_fn, (2, 3)), (map_fn_in_scan, (3, 2)), (tensor_array_in_nested_loops, (3, 2)),
    (tensor_array_and_cond_in_a_loop, (4, 2)), (tensor_array_written_in_a_cond, (4, 2)),
    (tensor_array_read_in_a_cond, (4, 2)), (rnn_with_a_refining_inner_loop, (3, 2))],
    ids=lambda v: getattr(v, "__name__", str(v)))
def test_functional_and_tensor_array_programs_match_finite_differences(build, shape, partial):
    rng, _ = fresh_rng()
    second = (rng.standard_normal((2, 2)) * 0.5 if build is rnn_with_a_refining_inner_loop
              else np.array(rng.uniform(0.5, 0.9)))
    check_gradients(_gradient_norm(build), [rng.standard_normal(shape) * 0.5, second],
                    partial=partial, rng=rng)


# -- full Hessians and Hessian-vector products -------------------------------------------
@pytest.mark.parametrize("build", [nested_dependent_trip_count, cond_alternating,
                                   cond_in_a_nested_loop, loop_in_a_cond_in_a_loop],
                         ids=lambda f: f.__name__)
def test_full_hessian_matches_finite_differences_and_is_symmetric(build):
    """Every second derivative of a program of z = (x0, x1, a): row k of the Hessian is
    the gradient of dy/dz_k, against central differences of the first gradient."""
    rng, seed = fresh_rng()
    z0 = np.concatenate([rng.standard_normal(2) * 0.5, [rng.uniform(0.5, 0.9)]])
    with df.Graph().as_default():
        z = df.placeholder(df.float64, [3])
        y = build(z[0:2], z[2])
        (g,) = df.gradients(y, z)
        rows = [df.gradients(g[k], z)[0] for k in range(3)]
        with df.Session() as sess:
            hessian = np.array(sess.run(rows, {z: z0}))
            numeric = np.array([numeric_gradient(lambda v, k=k: sess.run(g, {z: v})[k], z0)
                                for k in range(3)])
    np.testing.assert_allclose(hessian, numeric, rtol=1e-6, atol=1e-7,
                               err_msg=f"seed {seed}")
    np.testing.assert_allclose(hessian, hessian.T, rtol=1e-12, atol=1e-12)


def test_hessian_vector_product_of_a_nested_rnn_with_variables():
    """A tanh RNN whose steps refine the state in an inner loop with a cond: the
    Hessian-vector product of its loss in the weights along a random direction u,
    against central differences of the first gradient along u."""
    rng, seed = fresh_rng()
    with df.Graph().as_default():
        x = df.constant(rng.standard_normal((4, 1, 3)) * 0.5)
        w = df.Variable(rng.standard_normal((3, 3)) * 0.5)
        b = df.Variable(rng.standard_normal(3) * 0.1)

        def step(t, h):
            def refine(k, hh):
                z = df.matmul(hh, w) + x[t] + b
                return k + 1, df.cond(k < t % 2 + 1, lambda: df.tanh(z),
                                      lambda: hh + 0.1 * df.sin(z))
            _, h = df.while_loop(lambda k, hh: k < 2, refine, (0, h))
            return t + 1, h
        _, h = df.while_loop(lambda t, h: t < 4, step, (0, df.zeros([1, 3], df.float64)))
        loss = df.reduce_sum(h * h)
        variables = [w, b]
        grads = df.gradients(loss, variables)
        directions = [rng.standard_normal(v.shape.as_list()) for v in variables]
        hvp = df.gradients(df.add_n([df.reduce_sum(g * u) for g, u in zip(grads, directions)]),
                           variables)
        eps = 1e-5
        with df.Session() as sess:
            sess.run(df.global_variables_initializer())
            start = sess.run(variables)
            got = sess.run(hvp)

            def grads_at(s):
                for v, value, u in zip(variables, start, directions):
                    v.load(value + s * u, sess)
                return sess.run(grads)
            plus, minus = grads_at(eps), grads_at(-eps)
    for name, h, p, m in zip("wb", got, plus, minus):
        np.testing.assert_allclose(h, (p - m) / (2 * eps), rtol=1e-5, atol=1e-6,
                                   err_msg=f"{name} (seed {seed})")


@pytest.mark.parametrize("parallel_iterations", [1, 10])
@pytest.mark.parametrize("swap_memory", [False, True])
def test_nested_loop_options(parallel_iterations, swap_memory):
    """Both loops with the given options; a cond in the inner body."""
    def build(x, a):
        def outer(i, v):
            _, v = df.while_loop(
                lambda j, u: j < i + 1,
                lambda j, u: (j + 1, df.cond(j < 1, lambda: df.sin(u * a), lambda: u * a)),
                (0, v), parallel_iterations=parallel_iterations, swap_memory=swap_memory)
            return i + 1, v
        _, y = df.while_loop(lambda i, v: i < 3, outer, (0, x),
                             parallel_iterations=parallel_iterations, swap_memory=swap_memory)
        return df.reduce_sum(y * y)
    rng, _ = fresh_rng()
    check_gradients(_gradient_norm(build), [rng.standard_normal(2) * 0.5, np.array(0.8)],
                    rng=rng)


def test_hessian_taken_inside_a_loop_body():
    """``gradients`` twice inside an outer loop's body (a Newton-like step on an inner
    loop's output): the outer loop's result equals the same steps done one by one."""
    rng, _ = fresh_rng()
    x0 = rng.standard_normal(2) * 0.5

    def hessian_step(v):
        _, u = df.while_loop(lambda j, u: j < 2,
                             lambda j, u: (j + 1, df.sin(u * 0.8) * u), (0, v))
        (gv,) = df.gradients(df.reduce_sum(u), v)
        (hv,) = df.gradients(df.reduce_sum(gv * gv), v)
        return v - 0.1 * hv
    with df.Graph().as_default():
        v = df.placeholder(df.float64, [2])
        one_step = hessian_step(v)
        x = df.placeholder(df.float64, [2])
        _, y = df.while_loop(lambda i, w: i < 2, lambda i, w: (i + 1, hessian_step(w)), (0, x),
                             back_prop=False)
        with df.Session() as sess:
            want = x0
            for _ in range(2):
                want = sess.run(one_step, {v: want})
            got = sess.run(y, {x: x0})
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-14)
    # And the single step's Hessian part against finite differences.
    check_gradients(lambda w: df.reduce_sum(hessian_step(w)), [x0], rng=rng)


@pytest.mark.parametrize("outer_trips", [1, 2])
def test_gradient_taken_in_a_loop_body_differentiated_twice_from_outside(outer_trips):
    """The body of loop L differentiates an inner loop (the gradient loop nests in L's
    frame); differentiating L's result twice from outside takes the second derivative
    of that gradient loop inside L's gradient loop: against central differences."""
    def build(x, a):
        def body(i, v):
            _, u = df.while_loop(lambda j, u: j < 2, lambda j, u: (j + 1, df.sin(u * a)),
                                 (0, v))
            (gv,) = df.gradients(df.reduce_sum(u * u), v)
            return i + 1, v + 0.3 * gv
        _, y = df.while_loop(lambda i, v: i < outer_trips, body, (0, x))
        return df.reduce_sum(y * y)
    rng, _ = fresh_rng()
    values = [rng.standard_normal(2) * 0.5, np.array(rng.uniform(0.5, 0.9))]
    check_gradients(build, values, rng=rng)
    check_gradients(_gradient_norm(build), values, rng=rng)


def test_gradient_penalty_training_step_through_nested_loops_and_a_cond():
    """``loss + 0.5 |d loss / d inputs|^2`` of the refining RNN (an inner loop with a
    cond in every step): the optimizer's step moves the weights by -lr times the
    penalised loss's gradient, whose directional derivative matches central differences
    of the penalised loss."""
    rng, seed = fresh_rng()
    with df.Graph().as_default():
        x = df.constant(rng.standard_normal((3, 1, 2)) * 0.5)
        w = df.Variable(rng.standard_normal((2, 2)) * 0.5)

        def step(t, h):
            def refine(k, hh):
                z = df.matmul(hh, w) + x[t]
                return k + 1, df.cond(df.equal(k, t % 2), lambda: df.tanh(z),
                                      lambda: 0.5 * hh + 0.5 * df.sin(z))
            _, h = df.while_loop(lambda k, hh: k < 2, refine, (0, h))
            return t + 1, h
        _, h = df.while_loop(lambda t, h: t < 3, step, (0, df.zeros([1, 2], df.float64)))
        task = df.reduce_sum(df.square(h - 0.3))
        (dx,) = df.gradients(task, x)
        penalised = task + 0.5 * df.reduce_sum(dx * dx)
        (grad,) = df.gradients(penalised, [w])
        train = df.train.GradientDescentOptimizer(0.02).minimize(penalised)
        direction = rng.standard_normal((2, 2))
        eps = 1e-5
        with df.Session() as sess:
            sess.run(df.global_variables_initializer())
            start, got = sess.run([w, grad])

            def loss_at(s):
                w.load(start + s * direction, sess)
                return sess.run(penalised)
            numeric = (loss_at(eps) - loss_at(-eps)) / (2 * eps)
            assert float(np.sum(got * direction)) == pytest.approx(numeric, rel=1e-5, abs=1e-7), \
                f"seed {seed}"
            w.load(start, sess)
            sess.run(train)
            np.testing.assert_allclose(sess.run(w), start - 0.02 * got, rtol=1e-12, atol=1e-14)
