"""Hard case 2: a branch chosen by Python randomness every step (SDPoint).

Stochastic downsampling (Kuen et al., "Stochastic Downsampling for Cost-Adjustable
Inference and Improved Regularization in CNNs"): at each training step a Python random
draw picks the point of the network where the feature map is downsampled (or none), so
consecutive steps run different graphs. A tracer sees a new path the first time each
choice comes up.

    python examples/imperative/sdpoint.py --steps 100
"""
import random

import numpy as np

import dataflow as tf

try:
    from . import common
except ImportError:  # run as a script
    import common

STEPS = 60
POINTS = (None, "conv1", "conv2")   # where to downsample: nowhere, after conv1, after conv2


class SDPointNet:
    """conv3x3(16) - conv3x3(32) - global average - dense(10) on 8x8 digits; at each
    training step ``point`` (drawn from ``random.Random(seed)``) inserts a 2x2 average
    pooling after that layer. ``self.points_taken`` records the draws."""

    def __init__(self, seed=0, learning_rate=0.02):
        rng = np.random.default_rng(seed)
        self.k1 = tf.Variable(common.he_normal(rng, (3, 3, 1, 16)), name="k1")
        self.k2 = tf.Variable(common.he_normal(rng, (3, 3, 16, 32)), name="k2")
        self.w = tf.Variable(common.glorot(rng, (32, 10)), name="w")
        self.b = tf.Variable(np.zeros(10, np.float32), name="b")
        self.variables = [self.k1, self.k2, self.w, self.b]
        self.optimizer = tf.train.AdamOptimizer(learning_rate)
        self.random = random.Random(seed)
        self.points_taken = []

    def __call__(self, images, point=None):
        h = tf.nn.relu(tf.nn.conv2d(images, self.k1, [1, 1, 1, 1], "SAME"))
        if point == "conv1":
            h = tf.nn.avg_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
        h = tf.nn.relu(tf.nn.conv2d(h, self.k2, [1, 1, 1, 1], "SAME"))
        if point == "conv2":
            h = tf.nn.avg_pool(h, [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
        features = tf.reduce_mean(h, axis=[1, 2])
        return tf.matmul(features, self.w) + self.b

    def step(self, images, labels):
        point = self.random.choice(POINTS)
        self.points_taken.append(point)
        with tf.GradientTape() as tape:
            logits = self(images, point)
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        grads = tape.gradient(loss, self.variables)
        self.optimizer.apply_gradients(zip(grads, self.variables))
        return loss


def make_model(seed=0):
    """A fresh model (its variables made in eager mode)."""
    with tf.eager_mode():
        return SDPointNet(seed)


def observations(model):
    """What the program's Python side recorded, beside the losses (compared across
    ways of running it by the benchmarks)."""
    return {"points_taken": model.points_taken}


def run(steps=STEPS, wrap=None, seed=0, verbose=False, model=None):
    """Train for ``steps`` batches of 32 digits; returns the per-step losses."""
    with tf.eager_mode():
        model = make_model(seed) if model is None else model
        step = wrap(model.step) if wrap else model.step
        losses = []
        for i, (x, y) in enumerate(common.digit_images(steps, seed=seed)):
            loss = step(tf.constant(x), tf.constant(y))
            losses.append(float(loss))
            if verbose and i % 10 == 0:
                print(f"step {i:4d}  downsampling point {model.points_taken[-1]}  "
                      f"loss {losses[-1]:.4f}")
    return losses


if __name__ == "__main__":
    common.main(run, STEPS, __doc__)
