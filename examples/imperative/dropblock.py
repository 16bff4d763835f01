"""Hard case 3: object mutation -- ``self.keep_prob`` changed on a schedule (DropBlock).

DropBlock (Ghiasi et al., 2018) drops contiguous blocks of a convolutional feature map;
its ``keep_prob`` starts at 1 (DropBlock off) and is lowered linearly during training by
a scheduler that mutates the layer's attribute between steps, as the reference
implementation's ``LinearScheduler`` does. The step reads the attribute every call, so a
tracer that froze it at trace time would silently keep training without DropBlock.

    python examples/imperative/dropblock.py --steps 100
"""
import numpy as np

import dataflow as tf

try:
    from . import common
except ImportError:  # run as a script
    import common

STEPS = 60


class DropBlock:
    """Drops ``block_size`` x ``block_size`` blocks of an NHWC feature map with the rate
    that keeps ``keep_prob`` of it on average; the identity while ``keep_prob`` is 1."""

    def __init__(self, name, block_size=3, keep_prob=1.0, seed=0):
        self.name = name
        self.block_size = block_size
        self.keep_prob = keep_prob
        self.seed = seed

    def __call__(self, x):
        if self.keep_prob == 1.0:
            return x
        size = x.shape[1]
        gamma = ((1.0 - self.keep_prob) / self.block_size ** 2
                 * size ** 2 / (size - self.block_size + 1) ** 2)
        with tf.name_scope(self.name):
            noise = tf.random_uniform(x.shape.as_list(), seed=self.seed)
        centres = tf.cast(noise < gamma, tf.float32)
        blocks = tf.nn.max_pool(centres, [1, self.block_size, self.block_size, 1],
                                [1, 1, 1, 1], "SAME")
        keep = 1.0 - blocks
        # rescale so that the expected activation is unchanged
        return x * keep * (float(np.prod(keep.shape.as_list())) / tf.reduce_sum(keep))


class DropBlockNet:
    """conv3x3(16) - DropBlock - conv3x3(32) - DropBlock - global average - dense(10)."""

    def __init__(self, seed=0, learning_rate=0.02):
        rng = np.random.default_rng(seed)
        self.k1 = tf.Variable(common.he_normal(rng, (3, 3, 1, 16)), name="k1")
        self.k2 = tf.Variable(common.he_normal(rng, (3, 3, 16, 32)), name="k2")
        self.w = tf.Variable(common.glorot(rng, (32, 10)), name="w")
        self.b = tf.Variable(np.zeros(10, np.float32), name="b")
        self.variables = [self.k1, self.k2, self.w, self.b]
        self.drop1 = DropBlock("dropblock1", seed=seed + 1)
        self.drop2 = DropBlock("dropblock2", seed=seed + 2)
        self.optimizer = tf.train.AdamOptimizer(learning_rate)

    @property
    def keep_prob(self):
        return self.drop1.keep_prob

    @keep_prob.setter
    def keep_prob(self, value):
        self.drop1.keep_prob = self.drop2.keep_prob = value

    def __call__(self, images):
        h = self.drop1(tf.nn.relu(tf.nn.conv2d(images, self.k1, [1, 1, 1, 1], "SAME")))
        h = self.drop2(tf.nn.relu(tf.nn.conv2d(h, self.k2, [1, 1, 1, 1], "SAME")))
        return tf.matmul(tf.reduce_mean(h, axis=[1, 2]), self.w) + self.b

    def step(self, images, labels):
        with tf.GradientTape() as tape:
            logits = self(images)
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        grads = tape.gradient(loss, self.variables)
        self.optimizer.apply_gradients(zip(grads, self.variables))
        return loss


def keep_prob_schedule(step, steps, final=0.8):
    """1.0 for the first fifth of training, then linearly down to ``final`` at the
    half-way point, then flat (DropBlock's recommended warm-up)."""
    start, end = steps // 5, steps // 2
    if step < start:
        return 1.0
    return max(final, 1.0 - (1.0 - final) * (step - start) / max(1, end - start))


def make_model(seed=0):
    """A fresh model (its variables made in eager mode)."""
    with tf.eager_mode():
        return DropBlockNet(seed)


def observations(model):
    """What the program's Python side recorded, beside the losses (compared across
    ways of running it by the benchmarks)."""
    return {"keep_prob": model.keep_prob}


def run(steps=STEPS, wrap=None, seed=0, verbose=False, model=None):
    """Train for ``steps`` batches of 32 digits, lowering ``model.keep_prob`` on the
    schedule before each step; returns the per-step losses."""
    with tf.eager_mode():
        tf.set_random_seed(seed)
        model = make_model(seed) if model is None else model
        step = wrap(model.step) if wrap else model.step
        losses = []
        for i, (x, y) in enumerate(common.digit_images(steps, seed=seed)):
            model.keep_prob = keep_prob_schedule(i, steps)
            loss = step(tf.constant(x), tf.constant(y))
            losses.append(float(loss))
            if verbose and i % 10 == 0:
                print(f"step {i:4d}  keep_prob {model.keep_prob:.3f}  loss {losses[-1]:.4f}")
    return losses


if __name__ == "__main__":
    common.main(run, STEPS, __doc__)
