"""GradientTape against df.gradients on the same functions (one gradient registry), nested
tapes for second order, and optimizers training eagerly as they do in a graph."""
import numpy as np
import pytest

import dataflow as df
from dataflow.framework import eager as eager_impl


@pytest.fixture
def eager():
    with eager_impl.EagerGraph().as_default() as g:
        yield g


def _matrix(rng, shape):
    return rng.standard_normal(shape)


# Functions of two float64 inputs x (3, 4) and w (4, 2), each written once and run both ways.
FUNCTIONS = {
    "matmul_tanh": lambda x, w: df.reduce_sum(df.tanh(df.matmul(x, w))),
    "softmax_xent": lambda x, w: df.reduce_mean(df.nn.softmax_cross_entropy_with_logits(
        labels=df.one_hot([0, 1, 1], 2, dtype=df.float64), logits=df.matmul(x, w))),
    "broadcast_mix": lambda x, w: df.reduce_sum(
        x * df.reduce_mean(w, axis=1) + df.exp(-x * x) / (1.0 + df.square(x))),
    "reshape_transpose_concat": lambda x, w: df.reduce_sum(
        df.concat([df.reshape(df.transpose(x), [4, 3]), w], axis=1) ** 2),
    "gather_slice": lambda x, w: df.reduce_sum(df.gather(x, [2, 0, 2])[:, 1:3] * w[1:3, 0]),
    "relu_sigmoid_max": lambda x, w: df.reduce_max(df.nn.relu(x) + df.sigmoid(x), axis=0)
    [1] + df.reduce_prod(w[:2]),
    "where_maximum": lambda x, w: df.reduce_sum(df.where(x > 0.0, x * 3.0, df.maximum(
        x, -0.5))) + df.reduce_sum(df.sqrt(w * w + 1.0)),
    "cond_and_loop": lambda x, w: df.reduce_sum(df.cond(
        df.reduce_sum(x) > 0.0, lambda: x * 2.0, lambda: x * x)) + df.while_loop(
        lambda i, a: i < 3, lambda i, a: (i + 1, a * df.reduce_mean(w)),
        (0, df.constant(1.0, df.float64)))[1],
}


def _graph_gradients(fn, values, second_order=False):
    with df.Graph().as_default():
        x = df.constant(values[0])
        w = df.constant(values[1])
        y = fn(x, w)
        grads = df.gradients(y, [x, w])
        if second_order:
            grads = df.gradients(df.reduce_sum(grads[0] * grads[0]), [x, w])
        with df.Session() as sess:
            # A gather's gradient is an IndexedSlices in both modes (as TF's): compare
            # its dense value.
            return sess.run([df.convert_to_tensor(g) if g is not None else df.constant(0.0)
                             for g in grads])


@pytest.mark.parametrize("name", sorted(FUNCTIONS))
def test_tape_matches_graph_gradients(name, eager, rng):
    fn = FUNCTIONS[name]
    values = [_matrix(rng, (3, 4)), _matrix(rng, (4, 2))]
    expected = _graph_gradients(fn, values)
    x, w = df.constant(values[0]), df.constant(values[1])
    with df.GradientTape() as tape:
        tape.watch([x, w])
        y = fn(x, w)
    got = tape.gradient(y, [x, w])
    for g, e in zip(got, expected):
        np.testing.assert_allclose(df.convert_to_tensor(g).numpy(), e, rtol=1e-9, atol=1e-12)


@pytest.mark.parametrize("name", ["matmul_tanh", "broadcast_mix", "softmax_xent"])
def test_nested_tapes_match_graph_second_order(name, eager, rng):
    fn = FUNCTIONS[name]
    values = [_matrix(rng, (3, 4)), _matrix(rng, (4, 2))]
    expected = _graph_gradients(fn, values, second_order=True)
    x, w = df.constant(values[0]), df.constant(values[1])
    with df.GradientTape(persistent=True) as outer:
        outer.watch([x, w])
        with df.GradientTape() as inner:
            inner.watch([x, w])
            y = fn(x, w)
        gx, _ = inner.gradient(y, [x, w])
        z = df.reduce_sum(gx * gx)
    got = outer.gradient(z, [x, w])
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g.numpy(), e, rtol=1e-8, atol=1e-10)


def test_output_gradients_and_several_targets(eager, rng):
    x_np = rng.standard_normal(3)
    x = df.constant(x_np)
    with df.GradientTape() as tape:
        tape.watch(x)
        a, b = x * x, df.sin(x)
    w = rng.standard_normal(3)
    got = tape.gradient([a, b], x, output_gradients=[df.constant(w), df.ones_like(b)])
    np.testing.assert_allclose(got.numpy(), 2 * x_np * w + np.cos(x_np), rtol=1e-12)


def test_variables_are_watched_when_read(eager):
    w = df.Variable([1.0, -2.0])
    frozen = df.Variable(3.0, trainable=False)
    with df.GradientTape() as tape:
        loss = df.reduce_sum(w * w) * frozen
    assert tape.watched_variables() == (w,)
    dw, dfrozen = tape.gradient(loss, [w, frozen])
    assert dw.numpy().tolist() == [6.0, -12.0] and dfrozen is None
    with df.GradientTape(watch_accessed_variables=False) as tape:
        loss = w * 2.0
    assert tape.gradient(loss, w) is None


def test_unconnected_zero_and_stop_recording(eager):
    x, z = df.constant(2.0), df.constant([1.0, 2.0])
    with df.GradientTape(persistent=True) as tape:
        tape.watch([x, z])
        y = x * x
        with tape.stop_recording():
            u = x * 3.0
    assert tape.gradient(u, x) is None
    gx, gz = tape.gradient(y, [x, z], unconnected_gradients="zero")
    assert float(gx) == 4.0 and gz.numpy().tolist() == [0.0, 0.0]
    assert float(tape.gradient(y, x)) == 4.0      # persistent: again


def test_non_persistent_tape_is_used_once(eager):
    x = df.constant(1.0)
    with df.GradientTape() as tape:
        tape.watch(x)
        y = x * x
    tape.gradient(y, x)
    with pytest.raises(RuntimeError):
        tape.gradient(y, x)


def test_nested_source_structure(eager):
    x, y = df.constant(1.0), df.constant(2.0)
    with df.GradientTape() as tape:
        tape.watch({"a": x, "b": [y]})
        out = x * y
    got = tape.gradient(out, {"a": x, "b": [y]})
    assert float(got["a"]) == 2.0 and float(got["b"][0]) == 1.0


def test_tape_in_graph_mode_builds_gradients(graph):
    x = df.placeholder(df.float32, [])
    with df.GradientTape() as tape:
        tape.watch(x)
        y = x * x * x
    g = tape.gradient(y, x)
    with df.Session() as sess:
        assert float(sess.run(g, {x: 2.0})) == 12.0


def test_missing_gradient_is_reported(eager):
    x = df.constant([1.0, 2.0])
    with df.GradientTape() as tape:
        tape.watch(x)
        y = df.cast(df.argmax(x), df.float32) + x
    assert tape.gradient(y, x).numpy().tolist() == [1.0, 1.0]   # argmax: not differentiable


def _train(optimizer_fn, x_np, y_np, w0, b0, steps, eager_mode):
    """Train a 2-layer model; the losses of every step."""
    def model(x, w, b):
        return df.reduce_mean(df.square(df.matmul(df.tanh(df.matmul(x, w)), b) - y_np))

    if eager_mode:
        with eager_impl.EagerGraph().as_default():
            w, b = df.Variable(w0), df.Variable(b0)
            opt = optimizer_fn()
            losses = []
            x = df.constant(x_np)
            for _ in range(steps):
                with df.GradientTape() as tape:
                    loss = model(x, w, b)
                grads = tape.gradient(loss, [w, b])
                opt.apply_gradients(zip(grads, [w, b]))
                losses.append(float(loss))
            return losses, w.numpy()
    with df.Graph().as_default():
        w, b = df.Variable(w0), df.Variable(b0)
        loss = model(df.constant(x_np), w, b)
        train = optimizer_fn().minimize(loss)
        with df.Session() as sess:
            sess.run(df.global_variables_initializer())
            losses = [float(sess.run([loss, train])[0]) for _ in range(steps)]
            return losses, sess.run(w)


@pytest.mark.parametrize("optimizer_fn", [
    lambda: df.train.GradientDescentOptimizer(0.1),
    lambda: df.train.MomentumOptimizer(0.05, 0.9),
    lambda: df.train.AdamOptimizer(0.05)], ids=["sgd", "momentum", "adam"])
def test_optimizers_train_eagerly_as_in_a_graph(optimizer_fn, rng):
    x_np = rng.standard_normal((16, 4)).astype(np.float32)
    y_np = rng.standard_normal((16, 1)).astype(np.float32)
    w0 = rng.standard_normal((4, 8)).astype(np.float32) * 0.5
    b0 = rng.standard_normal((8, 1)).astype(np.float32) * 0.5
    graph_losses, graph_w = _train(optimizer_fn, x_np, y_np, w0, b0, 20, False)
    eager_losses, eager_w = _train(optimizer_fn, x_np, y_np, w0, b0, 20, True)
    assert eager_losses[-1] < eager_losses[0]
    # Fusion in the Session may reorder float32 roundings: allow a few ulps per step.
    np.testing.assert_allclose(eager_losses, graph_losses, rtol=1e-4)
    np.testing.assert_allclose(eager_w, graph_w, rtol=1e-4, atol=1e-5)


def test_minimize_takes_a_loss_function_eagerly(eager):
    w = df.Variable(3.0)
    opt = df.train.GradientDescentOptimizer(0.25)
    for _ in range(3):
        opt.minimize(lambda: df.square(w))
    assert float(w) == pytest.approx(3.0 * 0.5 ** 3)


# Functions where one tensor feeds several consumers, so its gradient is a sum of terms
# whose float32 rounding depends on their order (no transcendental: kernels compute the
# same bits in both modes, fused or not).
SUM_ORDER = {
    "four_consumers": lambda x: df.reduce_sum(x * 1.0 + x * -1.0 + x * 1.0 + x * 1e-7),
    "select_and_square": lambda x: df.reduce_sum(
        df.where(x > 0.0, x * 3.0, -x) + x * x * 0.5 + df.maximum(x, 0.25) * 1e-3),
    "shared_through_matmul": lambda x: df.reduce_sum(
        df.matmul(x, df.transpose(x)) * 1e-4 + x * 7.0 - x * 6.999),
}


@pytest.mark.parametrize("name", sorted(SUM_ORDER))
def test_graph_gradients_sum_terms_in_the_tapes_order(name, eager, rng):
    """df.gradients adds the terms reaching one tensor as the tape does (the latest
    consumer's first), so both give the same bits, not only close values."""
    fn = SUM_ORDER[name]
    value = (rng.standard_normal((4, 4)) * 1e3).astype(np.float32)
    with df.Graph().as_default():
        x = df.constant(value)
        graph_grad = df.gradients(fn(x), [x])[0]
        with df.Session() as sess:
            expected = sess.run(graph_grad)
    x = df.constant(value)
    with df.GradientTape() as tape:
        tape.watch(x)
        y = fn(x)
    np.testing.assert_array_equal(tape.gradient(y, x).numpy(), expected)


def test_graph_gradient_terms_are_added_latest_consumer_first(graph):
    """The order matters on these values: breadth-first from the loss would add the
    terms as ((1e-7 + 1) + 1) - 1 = 1.0; the tape's order, ((1e-7 + 1) - 1) + 1, keeps
    the 1e-7."""
    x = df.constant(np.float32(2.0))
    y = x * 1.0 + x * -1.0 + x * 1.0 + x * 1e-7
    (g,) = df.gradients(y, [x])
    with df.Session() as sess:
        got = sess.run(g)
    a, b, c, d = (np.float32(v) for v in (1.0, -1.0, 1.0, 1e-7))
    assert got == ((d + c) + b) + a == np.float32(1.0000001)
    assert got != ((d + c) + a) + b
