"""Hard case 8: a step that prints tensors and returns early on a condition.

A guarded training step, as large-scale training loops use against corrupted data: the
step computes the gradients, and when their global norm is above a limit it prints the
offending tensors and returns at once, without applying the update. Every tenth batch
of this digits stream is corrupted (a glitch scales its pixels by 30), so the guard
fires now and then.

    python examples/imperative/skip_step.py --steps 100
"""
import numpy as np

import dataflow as tf

try:
    from . import common
except ImportError:  # run as a script
    import common

STEPS = 60
CORRUPT_EVERY, GLITCH = 10, 30.0


class GuardedMLP:
    """64-64-10 ReLU network trained with Adam; ``step`` skips updates whose gradient
    norm exceeds ``max_norm`` (counted in ``self.skipped``)."""

    def __init__(self, seed=0, hidden=64, learning_rate=0.01, max_norm=5.0):
        rng = np.random.default_rng(seed)
        self.w1 = tf.Variable(common.glorot(rng, (64, hidden)), name="w1")
        self.b1 = tf.Variable(np.zeros(hidden, np.float32), name="b1")
        self.w2 = tf.Variable(common.glorot(rng, (hidden, 10)), name="w2")
        self.b2 = tf.Variable(np.zeros(10, np.float32), name="b2")
        self.variables = [self.w1, self.b1, self.w2, self.b2]
        self.optimizer = tf.train.AdamOptimizer(learning_rate)
        self.max_norm = max_norm
        self.skipped = 0

    def step(self, x, y):
        with tf.GradientTape() as tape:
            h = tf.nn.relu(tf.matmul(x, self.w1) + self.b1)
            logits = tf.matmul(h, self.w2) + self.b2
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=y, logits=logits))
        grads = tape.gradient(loss, self.variables)
        norm = tf.global_norm(grads)
        if norm > self.max_norm:
            print("skipping update: gradient norm", norm, "loss", loss)
            self.skipped += 1
            return loss
        self.optimizer.apply_gradients(zip(grads, self.variables))
        return loss


def glitched(batches):
    """The batches with every CORRUPT_EVERY-th one (from the 5th) scaled by GLITCH."""
    for i, (x, y) in enumerate(batches):
        yield (x * GLITCH if i % CORRUPT_EVERY == 5 else x), y


def make_model(seed=0):
    """A fresh model (its variables made in eager mode)."""
    with tf.eager_mode():
        return GuardedMLP(seed)


def observations(model):
    """What the program's Python side recorded, beside the losses (compared across
    ways of running it by the benchmarks)."""
    return {"skipped": model.skipped}


def run(steps=STEPS, wrap=None, seed=0, verbose=False, model=None):
    """Train for ``steps`` batches of 64 digits; returns the per-step losses (skipped
    steps' losses included; the count is ``model.skipped``)."""
    with tf.eager_mode():
        model = make_model(seed) if model is None else model
        step = wrap(model.step) if wrap else model.step
        losses = []
        for i, (x, y) in enumerate(glitched(common.digit_batches(steps, seed=seed))):
            loss = step(tf.constant(x), tf.constant(y))
            losses.append(float(loss))
            if verbose and i % 10 == 0:
                print(f"step {i:4d}  loss {losses[-1]:.4f}  skipped {model.skipped}")
    return losses


if __name__ == "__main__":
    common.main(run, STEPS, __doc__)
