"""examples/digits_rnn.py: an RNN built with while_loop, trained through the loop.

CI-sized runs (a few seconds): a subset of the training set, a few epochs.
"""
import importlib.util
import pathlib

import numpy as np
import pytest

import dataflow as df

EXAMPLE = pathlib.Path(__file__).resolve().parent.parent / "examples" / "digits_rnn.py"


@pytest.fixture(scope="module")
def digits_rnn():
    """The example loaded as a module (examples/ is not a package).

    It needs scikit-learn, which the ``test`` extras install.
    """
    spec = importlib.util.spec_from_file_location("examples_digits_rnn", EXAMPLE)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def short_run(digits_rnn):
    """One quick training run shared by the tests below."""
    return digits_rnn.main(epochs=3, train_size=400, seed=0, verbose=False)


def test_short_run_learns_the_digits(short_run):
    # The full run (examples/digits_rnn.py, 30 epochs) reaches over 90% test
    # accuracy; 3 epochs on 400 images already get well past chance (10%).
    assert short_run["train_accuracy"] >= 0.75
    assert short_run["test_accuracy"] >= 0.7


def test_training_loss_decreases(short_run):
    losses = short_run["losses"]
    assert len(losses) == 4            # before training, then after each epoch
    assert np.all(np.isfinite(losses))
    # The run is deterministic (fixed seed), and every epoch lowers the loss.
    assert np.all(np.diff(losses) < 0)
    assert losses[-1] < 0.5 * losses[0]


def test_recurrent_weights_get_gradients_through_the_loop(digits_rnn):
    """Wx, Wh and b are used only inside the while loop: their gradients come
    from the backprop loop, and one Adam step moves every one of them."""
    x_train, y_train, _, _ = digits_rnn.load_data()
    feed_x, feed_y = x_train[:16], y_train[:16]
    with df.Graph().as_default():
        model = digits_rnn.build_model(seed=0)
        variables = {v.op.name: v for v in df.trainable_variables()}
        recurrent = [variables[name] for name in
                     ("rnn/input_weights", "rnn/recurrent_weights", "rnn/biases")]
        grads = df.gradients(model["loss"], recurrent)
        with df.Session() as sess:
            sess.run(df.global_variables_initializer())
            feed = {model["x"]: feed_x, model["labels"]: feed_y}
            before = sess.run(recurrent)
            grad_values = sess.run(grads, feed)
            sess.run(model["train_op"], feed)
            after = sess.run(recurrent)
    for g, b, a in zip(grad_values, before, after):
        assert g.shape == b.shape and np.all(np.isfinite(g))
        assert np.any(g != 0)
        assert np.any(a != b)


def test_loop_matches_the_unrolled_recurrence(digits_rnn):
    """The while loop's final state and its gradients equal those of the same
    recurrence unrolled in Python (no loop): the loop and its backprop loop add
    nothing and lose nothing."""
    rng = np.random.default_rng(0)
    x_value = rng.random((5, 8, 8)).astype(np.float32)

    def run(final_state):
        with df.Graph().as_default():
            x = df.placeholder(df.float32, [None, 8, 8])
            wx, wh, b = digits_rnn.rnn_cell_variables(np.random.default_rng(1))
            h = final_state(x, wx, wh, b)
            grads = df.gradients(df.reduce_sum(h * h), [wx, wh, b, x])
            with df.Session() as sess:
                sess.run(df.global_variables_initializer())
                return sess.run([h] + grads, {x: x_value})

    def unrolled(x, wx, wh, b):
        h = df.zeros_like(df.matmul(x[:, 0, :], wx))
        for t in range(digits_rnn.N_STEPS):
            h = df.tanh(df.matmul(x[:, t, :], wx) + df.matmul(h, wh) + b)
        return h

    for got, want in zip(run(digits_rnn.final_state), run(unrolled)):
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
