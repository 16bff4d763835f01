"""The eight imperative programs in TensorFlow 2 (eager, Keras' Adam); ``COMPILE`` is
``tf.function`` (AutoGraph). DropBlock draws from ``tf.random.Generator``, TF2's advice
for random numbers that agree between eager and ``tf.function``."""
import random

import numpy as np
import tensorflow as tf
from sklearn.metrics import f1_score

from examples.imperative import common, dropblock, faster_rcnn, music_transformer, skip_step

COMPILE = tf.function


def _xent(labels, logits):
    return tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))


def _var(value, name):
    return tf.Variable(value, name=name)


def _train(model, tape, loss):
    grads = tape.gradient(loss, model.variables)
    model.optimizer.apply_gradients(zip(grads, model.variables))


def _loop(model, wrap, batches):
    step = wrap(model.step) if wrap else model.step
    return [float(step(*[tf.constant(b) for b in batch])) for batch in batches]


class MLP:
    def __init__(self, seed=0, hidden=128, learning_rate=0.01):
        rng = np.random.default_rng(seed)
        self.variables = [_var(common.glorot(rng, (64, hidden)), "w1"),
                          _var(np.zeros(hidden, np.float32), "b1"),
                          _var(common.glorot(rng, (hidden, 10)), "w2"),
                          _var(np.zeros(10, np.float32), "b2")]
        self.optimizer = tf.keras.optimizers.Adam(learning_rate)

    def __call__(self, x):
        w1, b1, w2, b2 = self.variables
        return tf.matmul(tf.nn.relu(tf.matmul(x, w1) + b1), w2) + b2

    def step(self, x, y):
        with tf.GradientTape() as tape:
            loss = _xent(y, self(x))
        _train(self, tape, loss)
        return loss


def run_mlp_adam(steps, wrap=None, seed=0):
    model = MLP(seed)
    return _loop(model, wrap, common.digit_batches(steps, seed=seed)), {}


class SDPointNet:
    POINTS = (None, "conv1", "conv2")

    def __init__(self, seed=0, learning_rate=0.02):
        rng = np.random.default_rng(seed)
        self.variables = [_var(common.he_normal(rng, (3, 3, 1, 16)), "k1"),
                          _var(common.he_normal(rng, (3, 3, 16, 32)), "k2"),
                          _var(common.glorot(rng, (32, 10)), "w"),
                          _var(np.zeros(10, np.float32), "b")]
        self.optimizer = tf.keras.optimizers.Adam(learning_rate)
        self.random = random.Random(seed)
        self.points_taken = []

    def __call__(self, images, point=None):
        k1, k2, w, b = self.variables
        h = tf.nn.relu(tf.nn.conv2d(images, k1, 1, "SAME"))
        if point == "conv1":
            h = tf.nn.avg_pool2d(h, 2, 2, "VALID")
        h = tf.nn.relu(tf.nn.conv2d(h, k2, 1, "SAME"))
        if point == "conv2":
            h = tf.nn.avg_pool2d(h, 2, 2, "VALID")
        return tf.matmul(tf.reduce_mean(h, axis=[1, 2]), w) + b

    def step(self, images, labels):
        point = self.random.choice(self.POINTS)
        self.points_taken.append(point)
        with tf.GradientTape() as tape:
            loss = _xent(labels, self(images, point))
        _train(self, tape, loss)
        return loss


def run_sdpoint(steps, wrap=None, seed=0):
    model = SDPointNet(seed)
    losses = _loop(model, wrap, common.digit_images(steps, seed=seed))
    return losses, {"points_taken": model.points_taken}


class DropBlock:
    def __init__(self, block_size=3, keep_prob=1.0, seed=0):
        self.block_size = block_size
        self.keep_prob = keep_prob
        self.generator = tf.random.Generator.from_seed(seed)

    def __call__(self, x):
        if self.keep_prob == 1.0:
            return x
        size = x.shape[1]
        gamma = ((1.0 - self.keep_prob) / self.block_size ** 2
                 * size ** 2 / (size - self.block_size + 1) ** 2)
        centres = tf.cast(self.generator.uniform(x.shape) < gamma, tf.float32)
        keep = 1.0 - tf.nn.max_pool2d(centres, self.block_size, 1, "SAME")
        return x * keep * (float(np.prod(keep.shape)) / tf.reduce_sum(keep))


class DropBlockNet(SDPointNet):
    def __init__(self, seed=0, learning_rate=0.02):
        super().__init__(seed, learning_rate)
        self.drop1, self.drop2 = DropBlock(seed=seed + 1), DropBlock(seed=seed + 2)

    def __call__(self, images):
        k1, k2, w, b = self.variables
        h = self.drop1(tf.nn.relu(tf.nn.conv2d(images, k1, 1, "SAME")))
        h = self.drop2(tf.nn.relu(tf.nn.conv2d(h, k2, 1, "SAME")))
        return tf.matmul(tf.reduce_mean(h, axis=[1, 2]), w) + b

    def step(self, images, labels):
        with tf.GradientTape() as tape:
            loss = _xent(labels, self(images))
        _train(self, tape, loss)
        return loss


def run_dropblock(steps, wrap=None, seed=0):
    model = DropBlockNet(seed)
    step = wrap(model.step) if wrap else model.step
    losses = []
    for i, (x, y) in enumerate(common.digit_images(steps, seed=seed)):
        model.drop1.keep_prob = model.drop2.keep_prob = dropblock.keep_prob_schedule(i, steps)
        losses.append(float(step(tf.constant(x), tf.constant(y))))
    return losses, {"keep_prob": model.drop1.keep_prob}


def _layer_norm(x, gain, bias, eps=1e-5):
    mean, variance = tf.nn.moments(x, axes=[-1], keepdims=True)
    return (x - mean) / tf.sqrt(variance + eps) * gain + bias


class _Attention:
    """The dense and attention pieces shared by the two Transformer programs."""

    def dense(self, x, w, b=None):
        y = tf.matmul(tf.reshape(x, [-1, x.shape[-1]]), self.params[w])
        if b is not None:
            y = y + self.params[b]
        return tf.reshape(y, [-1, x.shape[1], self.params[w].shape[-1]])

    def attend(self, h, mask=0.0):
        q, k, v = self.dense(h, "wq"), self.dense(h, "wk"), self.dense(h, "wv")
        scores = tf.reduce_sum(tf.expand_dims(q, 2) * tf.expand_dims(k, 1), axis=-1)
        weights = tf.nn.softmax(scores / np.sqrt(self.dim).astype(np.float32) + mask)
        context = tf.reduce_sum(tf.expand_dims(weights, -1) * tf.expand_dims(v, 1), axis=2)
        return self.dense(context, "wo")


class BertClassifier(_Attention):
    def __init__(self, seed=0, dim=32, learning_rate=0.005):
        from examples.imperative.bert_cls import TOKENS, WIDTH
        self.tokens, self.width = TOKENS, WIDTH
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
        self.params = {k: _var(val, k) for k, val in v.items()}
        self.variables = list(self.params.values())
        self.optimizer = tf.keras.optimizers.Adam(learning_rate)
        self.f1_scores = []

    def __call__(self, pixels):
        p = self.params
        tokens = self.dense(tf.reshape(pixels, [-1, self.tokens, self.width]), "embed")
        cls = tf.tile(p["cls"], [pixels.shape[0], 1, 1])
        h = tf.concat([cls, tokens], axis=1) + p["position"]
        h = _layer_norm(h + self.attend(h), p["ln1_g"], p["ln1_b"])
        ff = self.dense(tf.nn.relu(self.dense(h, "ff1", "ff1_b")), "ff2", "ff2_b")
        h = _layer_norm(h + ff, p["ln2_g"], p["ln2_b"])
        return tf.matmul(h[:, 0], p["out"]) + p["out_b"]

    def step(self, pixels, labels):
        with tf.GradientTape() as tape:
            logits = self(pixels)
            loss = _xent(labels, logits)
        _train(self, tape, loss)
        predictions = tf.argmax(logits, axis=1)
        self.f1_scores.append(f1_score(labels.numpy(), predictions.numpy(), average="macro"))
        return loss


def run_bert_cls(steps, wrap=None, seed=0):
    model = BertClassifier(seed)
    losses = _loop(model, wrap, common.digit_batches(steps, seed=seed))
    return losses, {"f1_scores": model.f1_scores}


class MiniRCNN:
    def __init__(self, seed=0, hidden=64, learning_rate=0.01):
        R, S = faster_rcnn.REGIONS, faster_rcnn.REGION_SIZE
        rng = np.random.default_rng(seed)
        self.variables = [_var(common.glorot(rng, (64, hidden)), "backbone"),
                          _var(np.zeros(hidden, np.float32), "backbone_b"),
                          _var(common.glorot(rng, (hidden, R)), "rpn"),
                          _var(np.zeros(R, np.float32), "rpn_b"),
                          _var(common.glorot(rng, (S + hidden, hidden)), "roi"),
                          _var(np.zeros(hidden, np.float32), "roi_b"),
                          _var(common.glorot(rng, (hidden, 10)), "cls"),
                          _var(np.zeros(10, np.float32), "cls_b")]
        self.optimizer = tf.keras.optimizers.Adam(learning_rate)
        self.proposal_counts = []

    def propose(self, scores):
        mean = tf.reduce_mean(scores, axis=0).numpy()
        order = np.argsort(-mean, kind="stable")
        count = int(np.clip((mean > 0.5).sum(), 1, faster_rcnn.MAX_PROPOSALS))
        return [int(r) for r in order[:count]]

    def step(self, pixels, labels, objectness):
        backbone, backbone_b, rpn, rpn_b, roi, roi_b, cls, cls_b = self.variables
        S = faster_rcnn.REGION_SIZE
        with tf.GradientTape() as tape:
            features = tf.nn.relu(tf.matmul(pixels, backbone) + backbone_b)
            rpn_logits = tf.matmul(features, rpn) + rpn_b
            rpn_loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(
                labels=objectness, logits=rpn_logits))
            proposals = self.propose(tf.sigmoid(rpn_logits))
            self.proposal_counts.append(len(proposals))
            roi_loss = 0.0
            for region in proposals:
                crop = pixels[:, region * S:(region + 1) * S]
                h = tf.nn.relu(tf.matmul(tf.concat([crop, features], axis=1), roi) + roi_b)
                roi_loss += _xent(labels, tf.matmul(h, cls) + cls_b)
            loss = rpn_loss + roi_loss / len(proposals)
        _train(self, tape, loss)
        return loss


def run_faster_rcnn(steps, wrap=None, seed=0):
    model = MiniRCNN(seed)
    batches = ((x, y, faster_rcnn.region_objectness(x))
               for x, y in common.digit_batches(steps, seed=seed))
    return _loop(model, wrap, batches), {"proposal_counts": model.proposal_counts}


class AddingRNN:
    def __init__(self, seed=0, hidden=32, learning_rate=0.01):
        rng = np.random.default_rng(seed)
        self.hidden = hidden
        self.variables = [_var(common.glorot(rng, (2, hidden)), "wx"),
                          _var(np.eye(hidden, dtype=np.float32) * 0.9
                               + common.glorot(rng, (hidden, hidden)) * 0.1, "wh"),
                          _var(np.zeros(hidden, np.float32), "b"),
                          _var(common.glorot(rng, (hidden, 1)), "wo"),
                          _var(np.zeros(1, np.float32), "bo")]
        self.optimizer = tf.keras.optimizers.Adam(learning_rate)
        self.lengths = []

    def __call__(self, sequences):
        wx, wh, b, wo, bo = self.variables
        h = tf.zeros([sequences.shape[0], self.hidden])
        for t in range(sequences.shape[1]):
            h = tf.tanh(tf.matmul(sequences[:, t], wx) + tf.matmul(h, wh) + b)
        return tf.matmul(h, wo) + bo

    def step(self, sequences, targets):
        self.lengths.append(sequences.shape[1])
        with tf.GradientTape() as tape:
            loss = tf.reduce_mean(tf.square(self(sequences) - targets))
        _train(self, tape, loss)
        return loss


def run_rnn_varlen(steps, wrap=None, seed=0):
    model = AddingRNN(seed)
    losses = _loop(model, wrap, common.adding_problem(steps, seed=seed))
    return losses, {"lengths": model.lengths}


class MusicTransformer(_Attention):
    def __init__(self, seed=0, dim=32, learning_rate=0.01):
        V, L = music_transformer.VOCAB, music_transformer.LENGTH
        rng = np.random.default_rng(seed)
        self.dim = dim
        v = {"embed": 0.1 * rng.standard_normal((V, dim)).astype(np.float32),
             "position": 0.1 * rng.standard_normal((L, dim)).astype(np.float32),
             "wq": common.glorot(rng, (dim, dim)), "wk": common.glorot(rng, (dim, dim)),
             "wv": common.glorot(rng, (dim, dim)), "wo": common.glorot(rng, (dim, dim)),
             "ff1": common.glorot(rng, (dim, 2 * dim)),
             "ff1_b": np.zeros(2 * dim, np.float32),
             "ff2": common.glorot(rng, (2 * dim, dim)), "ff2_b": np.zeros(dim, np.float32),
             "out": common.glorot(rng, (dim, V)), "out_b": np.zeros(V, np.float32)}
        self.params = {k: _var(val, k) for k, val in v.items()}
        self.variables = list(self.params.values())
        self.optimizer = tf.keras.optimizers.Adam(learning_rate)
        self.causal_mask = np.triu(np.full((L, L), -1e9, np.float32), k=1)
        self.smoothed_loss = None

    def __call__(self, tokens):
        p = self.params
        h = tf.nn.embedding_lookup(p["embed"], tokens) + p["position"]
        h = h + self.attend(h, self.causal_mask)
        return self.dense(h + self.dense(tf.nn.relu(self.dense(h, "ff1", "ff1_b")), "ff2",
                                         "ff2_b"), "out", "out_b")

    def step(self, sequences):
        with tf.GradientTape() as tape:
            loss = _xent(sequences[:, 1:], self(sequences[:, :-1]))
        _train(self, tape, loss)
        a = music_transformer.SMOOTHING
        if self.smoothed_loss is None:
            self.smoothed_loss = loss
        else:
            self.smoothed_loss = a * self.smoothed_loss + (1 - a) * loss
        return loss


def run_music_transformer(steps, wrap=None, seed=0):
    model = MusicTransformer(seed)
    batches = ((t,) for t in common.music_sequences(
        steps, length=music_transformer.LENGTH + 1, vocab=music_transformer.VOCAB,
        seed=seed))
    losses = _loop(model, wrap, batches)
    return losses, {"smoothed_loss": float(model.smoothed_loss)}


class GuardedMLP(MLP):
    def __init__(self, seed=0, hidden=64, learning_rate=0.01, max_norm=5.0):
        super().__init__(seed, hidden, learning_rate)
        self.max_norm = max_norm
        self.skipped = 0

    def step(self, x, y):
        with tf.GradientTape() as tape:
            loss = _xent(y, self(x))
        grads = tape.gradient(loss, self.variables)
        norm = tf.linalg.global_norm(grads)
        if norm > self.max_norm:
            print("skipping update: gradient norm", norm, "loss", loss)
            self.skipped += 1
            return loss
        self.optimizer.apply_gradients(zip(grads, self.variables))
        return loss


def run_skip_step(steps, wrap=None, seed=0):
    model = GuardedMLP(seed)
    losses = _loop(model, wrap, skip_step.glitched(common.digit_batches(steps, seed=seed)))
    return losses, {"skipped": model.skipped}


PORTS = {"mlp_adam": run_mlp_adam, "sdpoint": run_sdpoint, "dropblock": run_dropblock,
         "bert_cls": run_bert_cls, "faster_rcnn": run_faster_rcnn,
         "rnn_varlen": run_rnn_varlen, "music_transformer": run_music_transformer,
         "skip_step": run_skip_step}
