"""Hard case 6: a Python ``for`` loop over the time steps of an RNN, sequence lengths
varying from batch to batch.

An Elman RNN learns the adding problem (sum the two marked values of a sequence). The
batches are bucketed by length, so each step unrolls the recurrence a different number
of times: the trip count is the length of the input, a plain Python ``range``.

    python examples/imperative/rnn_varlen.py --steps 200
"""
import numpy as np

import dataflow as tf

try:
    from . import common
except ImportError:  # run as a script
    import common

STEPS = 60


class AddingRNN:
    """``h_t = tanh(x_t Wx + h_{t-1} Wh + b)``, prediction ``h_T Wo + bo``, MSE loss."""

    def __init__(self, seed=0, hidden=32, learning_rate=0.01):
        rng = np.random.default_rng(seed)
        self.hidden = hidden
        self.wx = tf.Variable(common.glorot(rng, (2, hidden)), name="wx")
        self.wh = tf.Variable(np.eye(hidden, dtype=np.float32) * 0.9
                              + common.glorot(rng, (hidden, hidden)) * 0.1, name="wh")
        self.b = tf.Variable(np.zeros(hidden, np.float32), name="b")
        self.wo = tf.Variable(common.glorot(rng, (hidden, 1)), name="wo")
        self.bo = tf.Variable(np.zeros(1, np.float32), name="bo")
        self.variables = [self.wx, self.wh, self.b, self.wo, self.bo]
        self.optimizer = tf.train.AdamOptimizer(learning_rate)
        self.lengths = []

    def __call__(self, sequences):
        h = tf.zeros([sequences.shape[0], self.hidden])
        for t in range(sequences.shape[1]):
            h = tf.tanh(tf.matmul(sequences[:, t], self.wx) + tf.matmul(h, self.wh) + self.b)
        return tf.matmul(h, self.wo) + self.bo

    def step(self, sequences, targets):
        self.lengths.append(sequences.shape[1])
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(self(sequences) - targets))
        grads = tape.gradient(loss, self.variables)
        self.optimizer.apply_gradients(zip(grads, self.variables))
        return loss


def make_model(seed=0):
    """A fresh model (its variables made in eager mode)."""
    with tf.eager_mode():
        return AddingRNN(seed)


def observations(model):
    """What the program's Python side recorded, beside the losses (compared across
    ways of running it by the benchmarks)."""
    return {"lengths": model.lengths}


def run(steps=STEPS, wrap=None, seed=0, verbose=False, model=None):
    """Train for ``steps`` batches of 32 sequences of 8 to 24 steps; returns the per-step
    losses (the lengths seen are in ``model.lengths``)."""
    with tf.eager_mode():
        model = make_model(seed) if model is None else model
        step = wrap(model.step) if wrap else model.step
        losses = []
        for i, (x, target) in enumerate(common.adding_problem(steps, seed=seed)):
            loss = step(tf.constant(x), tf.constant(target))
            losses.append(float(loss))
            if verbose and i % 10 == 0:
                print(f"step {i:4d}  length {x.shape[1]:3d}  loss {losses[-1]:.4f}")
    return losses


if __name__ == "__main__":
    common.main(run, STEPS, __doc__)
