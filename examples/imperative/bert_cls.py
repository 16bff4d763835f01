"""Hard case 4: a scikit-learn metric on ``.numpy()`` predictions every step (BERT-CLS).

A one-layer Transformer encoder classifies digits read as sequences of eight row
tokens from a prepended ``[CLS]`` token, as BERT classifies a sentence; every training
step also computes the batch's macro F1 score with scikit-learn on the predictions'
NumPy values and keeps it (the way fine-tuning scripts log a metric per step). The
NumPy round trip in the middle of the step is what a graph cannot hold.

    python examples/imperative/bert_cls.py --steps 100
"""
import numpy as np
from sklearn.metrics import f1_score

import dataflow as tf

try:
    from . import common
except ImportError:  # run as a script
    import common

STEPS = 60
TOKENS, WIDTH = 8, 8      # an 8x8 digit: eight tokens of eight pixels


def layer_norm(x, gain, bias, eps=1e-5):
    mean, variance = tf.nn.moments(x, axes=[-1], keep_dims=True)
    return (x - mean) / tf.sqrt(variance + eps) * gain + bias


class BertClassifier:
    """Token and position embeddings, ``[CLS]``, one single-head self-attention block
    with a feed-forward layer, and a classifier on the ``[CLS]`` output."""

    def __init__(self, seed=0, dim=32, learning_rate=0.005):
        rng = np.random.default_rng(seed)
        self.dim = dim
        v = {"embed": common.glorot(rng, (WIDTH, dim)),
             "position": 0.1 * rng.standard_normal((TOKENS + 1, dim)).astype(np.float32),
             "cls": 0.1 * rng.standard_normal((1, 1, dim)).astype(np.float32),
             "wq": common.glorot(rng, (dim, dim)), "wk": common.glorot(rng, (dim, dim)),
             "wv": common.glorot(rng, (dim, dim)), "wo": common.glorot(rng, (dim, dim)),
             "ln1_g": np.ones(dim, np.float32), "ln1_b": np.zeros(dim, np.float32),
             "ff1": common.glorot(rng, (dim, 2 * dim)),
             "ff1_b": np.zeros(2 * dim, np.float32),
             "ff2": common.glorot(rng, (2 * dim, dim)), "ff2_b": np.zeros(dim, np.float32),
             "ln2_g": np.ones(dim, np.float32), "ln2_b": np.zeros(dim, np.float32),
             "out": common.glorot(rng, (dim, 10)), "out_b": np.zeros(10, np.float32)}
        self.params = {k: tf.Variable(val, name=k) for k, val in v.items()}
        self.variables = list(self.params.values())
        self.optimizer = tf.train.AdamOptimizer(learning_rate)
        self.f1_scores = []

    def dense(self, x, w, b=None):
        """``x @ W (+ b)`` over the last axis of a [B, T, d] tensor."""
        p = self.params
        y = tf.matmul(tf.reshape(x, [-1, x.shape[-1]]), p[w])
        if b is not None:
            y = y + p[b]
        return tf.reshape(y, [-1, x.shape[1], p[w].shape[-1]])

    def attention(self, h):
        q, k, v = self.dense(h, "wq"), self.dense(h, "wk"), self.dense(h, "wv")
        # scores[b, i, j] = q[b, i] . k[b, j] / sqrt(d)
        scores = tf.reduce_sum(tf.expand_dims(q, 2) * tf.expand_dims(k, 1), axis=-1)
        weights = tf.nn.softmax(scores / np.sqrt(self.dim).astype(np.float32))
        context = tf.reduce_sum(tf.expand_dims(weights, -1) * tf.expand_dims(v, 1), axis=2)
        return self.dense(context, "wo")

    def __call__(self, pixels):
        p = self.params
        rows = tf.reshape(pixels, [-1, TOKENS, WIDTH])
        tokens = self.dense(rows, "embed")
        cls = tf.tile(p["cls"], [pixels.shape[0], 1, 1])
        h = tf.concat([cls, tokens], axis=1) + p["position"]
        h = layer_norm(h + self.attention(h), p["ln1_g"], p["ln1_b"])
        ff = self.dense(tf.nn.relu(self.dense(h, "ff1", "ff1_b")), "ff2", "ff2_b")
        h = layer_norm(h + ff, p["ln2_g"], p["ln2_b"])
        return tf.matmul(h[:, 0], p["out"]) + p["out_b"]

    def step(self, pixels, labels):
        with tf.GradientTape() as tape:
            logits = self(pixels)
            loss = tf.reduce_mean(
                tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))
        grads = tape.gradient(loss, self.variables)
        self.optimizer.apply_gradients(zip(grads, self.variables))
        predictions = tf.argmax(logits, axis=1)
        self.f1_scores.append(f1_score(labels.numpy(), predictions.numpy(), average="macro"))
        return loss


def make_model(seed=0):
    """A fresh model (its variables made in eager mode)."""
    with tf.eager_mode():
        return BertClassifier(seed)


def observations(model):
    """What the program's Python side recorded, beside the losses (compared across
    ways of running it by the benchmarks)."""
    return {"f1_scores": model.f1_scores}


def run(steps=STEPS, wrap=None, seed=0, verbose=False, model=None):
    """Fine-tune for ``steps`` batches of 64 digits; returns the per-step losses (the
    per-step F1 scores are in ``model.f1_scores``)."""
    with tf.eager_mode():
        model = make_model(seed) if model is None else model
        step = wrap(model.step) if wrap else model.step
        losses = []
        for i, (x, y) in enumerate(common.digit_batches(steps, seed=seed)):
            loss = step(tf.constant(x), tf.constant(y))
            losses.append(float(loss))
            if verbose and i % 10 == 0:
                print(f"step {i:4d}  loss {losses[-1]:.4f}  F1 {model.f1_scores[-1]:.3f}")
    return losses


if __name__ == "__main__":
    common.main(run, STEPS, __doc__)
