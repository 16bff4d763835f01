"""Hard case 7: the loss stored on ``self`` and used in a later step (Music Transformer).

A small decoder-only Transformer learns next-note prediction on synthetic melodies
(a motif repeated and transposed). Like the Music Transformer training script, the
model keeps a running (exponentially smoothed) loss on itself: each step combines its
new loss *tensor* with the tensor the previous step stored on ``self``, so a value made
inside one step lives on into the next.

    python examples/imperative/music_transformer.py --steps 100
"""
import numpy as np

import dataflow as tf

try:
    from . import common
except ImportError:  # run as a script
    import common

STEPS = 60
VOCAB, LENGTH = 24, 16       # pitches; tokens per training sequence (plus one target)
SMOOTHING = 0.9


class MusicTransformer:
    """Token and position embeddings, one causal single-head self-attention block with a
    feed-forward layer, a projection to the vocabulary."""

    def __init__(self, seed=0, dim=32, learning_rate=0.01):
        rng = np.random.default_rng(seed)
        self.dim = dim
        v = {"embed": 0.1 * rng.standard_normal((VOCAB, dim)).astype(np.float32),
             "position": 0.1 * rng.standard_normal((LENGTH, dim)).astype(np.float32),
             "wq": common.glorot(rng, (dim, dim)), "wk": common.glorot(rng, (dim, dim)),
             "wv": common.glorot(rng, (dim, dim)), "wo": common.glorot(rng, (dim, dim)),
             "ff1": common.glorot(rng, (dim, 2 * dim)),
             "ff1_b": np.zeros(2 * dim, np.float32),
             "ff2": common.glorot(rng, (2 * dim, dim)), "ff2_b": np.zeros(dim, np.float32),
             "out": common.glorot(rng, (dim, VOCAB)), "out_b": np.zeros(VOCAB, np.float32)}
        self.params = {k: tf.Variable(val, name=k) for k, val in v.items()}
        self.variables = list(self.params.values())
        self.optimizer = tf.train.AdamOptimizer(learning_rate)
        # -inf above the diagonal: position i attends to positions <= i only
        self.causal_mask = np.triu(np.full((LENGTH, LENGTH), -1e9, np.float32), k=1)
        self.smoothed_loss = None

    def dense(self, x, w, b=None):
        """``x @ W (+ b)`` over the last axis of a [B, T, d] tensor."""
        y = tf.matmul(tf.reshape(x, [-1, x.shape[-1]]), self.params[w])
        if b is not None:
            y = y + self.params[b]
        return tf.reshape(y, [-1, x.shape[1], self.params[w].shape[-1]])

    def __call__(self, tokens):
        p = self.params
        h = tf.nn.embedding_lookup(p["embed"], tokens) + p["position"]
        q, k, v = self.dense(h, "wq"), self.dense(h, "wk"), self.dense(h, "wv")
        scores = tf.reduce_sum(tf.expand_dims(q, 2) * tf.expand_dims(k, 1), axis=-1)
        scores = scores / np.sqrt(self.dim).astype(np.float32) + self.causal_mask
        weights = tf.nn.softmax(scores)
        h = h + self.dense(tf.reduce_sum(tf.expand_dims(weights, -1) * tf.expand_dims(v, 1),
                                         axis=2), "wo")
        h = h + self.dense(tf.nn.relu(self.dense(h, "ff1", "ff1_b")), "ff2", "ff2_b")
        return self.dense(h, "out", "out_b")

    def step(self, sequences):
        inputs, targets = sequences[:, :-1], sequences[:, 1:]
        with tf.GradientTape() as tape:
            logits = self(inputs)
            loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                labels=targets, logits=logits))
        grads = tape.gradient(loss, self.variables)
        self.optimizer.apply_gradients(zip(grads, self.variables))
        if self.smoothed_loss is None:
            self.smoothed_loss = loss
        else:
            self.smoothed_loss = SMOOTHING * self.smoothed_loss + (1 - SMOOTHING) * loss
        return loss


def make_model(seed=0):
    """A fresh model (its variables made in eager mode)."""
    with tf.eager_mode():
        return MusicTransformer(seed)


def observations(model):
    """What the program's Python side recorded, beside the losses (compared across
    ways of running it by the benchmarks)."""
    return {"smoothed_loss": float(model.smoothed_loss)}


def run(steps=STEPS, wrap=None, seed=0, verbose=False, model=None):
    """Train for ``steps`` batches of 16 melodies; returns the per-step losses (the
    running loss is ``model.smoothed_loss``, a tensor)."""
    with tf.eager_mode():
        model = make_model(seed) if model is None else model
        step = wrap(model.step) if wrap else model.step
        losses = []
        for i, tokens in enumerate(common.music_sequences(steps, length=LENGTH + 1,
                                                          vocab=VOCAB, seed=seed)):
            loss = step(tf.constant(tokens))
            losses.append(float(loss))
            if verbose and i % 10 == 0:
                print(f"step {i:4d}  loss {losses[-1]:.4f}  "
                      f"smoothed {float(model.smoothed_loss):.4f}")
    return losses


if __name__ == "__main__":
    common.main(run, STEPS, __doc__)
