"""Hard case 1: a plain MLP trained with GradientTape and Adam on the digits.

The baseline of the eight programs: no Python-side control flow at all, so a tracer
should find one trace and run every later step on the graph.

    python examples/imperative/mlp_adam.py --steps 200
"""
import numpy as np

import dataflow as tf

try:
    from . import common
except ImportError:  # run as a script
    import common

STEPS = 60


class MLP:
    """64-128-10 ReLU network; ``step(x, y)`` is one Adam update, returning the loss."""

    def __init__(self, seed=0, hidden=128, learning_rate=0.01):
        rng = np.random.default_rng(seed)
        self.w1 = tf.Variable(common.glorot(rng, (64, hidden)), name="w1")
        self.b1 = tf.Variable(np.zeros(hidden, np.float32), name="b1")
        self.w2 = tf.Variable(common.glorot(rng, (hidden, 10)), name="w2")
        self.b2 = tf.Variable(np.zeros(10, np.float32), name="b2")
        self.variables = [self.w1, self.b1, self.w2, self.b2]
        self.optimizer = tf.train.AdamOptimizer(learning_rate)

    def __call__(self, x):
        h = tf.nn.relu(tf.matmul(x, self.w1) + self.b1)
        return tf.matmul(h, self.w2) + self.b2

    def step(self, x, y):
        with tf.GradientTape() as tape:
            logits = self(x)
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        grads = tape.gradient(loss, self.variables)
        self.optimizer.apply_gradients(zip(grads, self.variables))
        return loss


def make_model(seed=0):
    """A fresh model (its variables made in eager mode)."""
    with tf.eager_mode():
        return MLP(seed)


def observations(model):
    """What the program's Python side recorded, beside the losses (compared across
    ways of running it by the benchmarks)."""
    return {}


def run(steps=STEPS, wrap=None, seed=0, verbose=False, model=None):
    """Train for ``steps`` mini-batches; ``wrap(model.step)`` is what is called each step
    (``df.function`` in the tracer benchmark). Returns the per-step losses."""
    with tf.eager_mode():
        model = make_model(seed) if model is None else model
        step = wrap(model.step) if wrap else model.step
        losses = []
        for i, (x, y) in enumerate(common.digit_batches(steps, seed=seed)):
            loss = step(tf.constant(x), tf.constant(y))
            losses.append(float(loss))
            if verbose and i % 10 == 0:
                print(f"step {i:4d}  loss {losses[-1]:.4f}")
    return losses


if __name__ == "__main__":
    common.main(run, STEPS, __doc__)
