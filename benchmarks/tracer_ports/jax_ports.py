"""The eight imperative programs in JAX, written as eager JAX code is: parameters and
the optimizer state (``jax.example_libraries.optimizers.adam``) go in and out of the
step, random keys are split by the loop; the Python side of each step stays in it.
``COMPILE`` is ``jax.jit``."""
import random

import jax
import jax.numpy as jnp
import numpy as np
from jax import lax
from jax.example_libraries import optimizers
from sklearn.metrics import f1_score

from examples.imperative import common, dropblock, faster_rcnn, music_transformer, skip_step

COMPILE = jax.jit


def _xent(labels, logits):
    logp = jax.nn.log_softmax(logits)
    return -jnp.mean(jnp.take_along_axis(logp, labels[:, None].astype(jnp.int32), axis=1))


def _conv(x, k):
    return lax.conv_general_dilated(x, k, (1, 1), "SAME",
                                    dimension_numbers=("NHWC", "HWIO", "NHWC"))


def _avg_pool2(x):
    return lax.reduce_window(x, 0.0, lax.add, (1, 2, 2, 1), (1, 2, 2, 1), "VALID") / 4.0


class _Program:
    """Adam over ``self.params`` (a list or dict of arrays); ``step`` returns
    ``(opt_state, loss)``."""

    def init_optimizer(self, learning_rate):
        self.opt_init, self.opt_update, self.get_params = optimizers.adam(learning_rate)
        return self.opt_init(self.params)

    def update(self, i, state, loss_fn):
        loss, grads = jax.value_and_grad(loss_fn)(self.get_params(state))
        return self.opt_update(i, grads, state), loss


def _loop(model, state, wrap, batches):
    step = wrap(model.step) if wrap else model.step
    losses = []
    for i, batch in enumerate(batches):
        state, loss = step(state, i, *[jnp.asarray(b) for b in batch])
        losses.append(float(loss))
    return losses


class MLP(_Program):
    def __init__(self, seed=0, hidden=128):
        rng = np.random.default_rng(seed)
        self.params = [jnp.asarray(common.glorot(rng, (64, hidden))),
                       jnp.zeros(hidden), jnp.asarray(common.glorot(rng, (hidden, 10))),
                       jnp.zeros(10)]

    @staticmethod
    def forward(params, x):
        w1, b1, w2, b2 = params
        return jax.nn.relu(x @ w1 + b1) @ w2 + b2

    def step(self, state, i, x, y):
        return self.update(i, state, lambda p: _xent(y, self.forward(p, x)))


def run_mlp_adam(steps, wrap=None, seed=0):
    model = MLP(seed)
    state = model.init_optimizer(0.01)
    return _loop(model, state, wrap, common.digit_batches(steps, seed=seed)), {}


class SDPointNet(_Program):
    POINTS = (None, "conv1", "conv2")

    def __init__(self, seed=0):
        rng = np.random.default_rng(seed)
        self.params = [jnp.asarray(common.he_normal(rng, (3, 3, 1, 16))),
                       jnp.asarray(common.he_normal(rng, (3, 3, 16, 32))),
                       jnp.asarray(common.glorot(rng, (32, 10))), jnp.zeros(10)]
        self.random = random.Random(seed)
        self.points_taken = []

    @staticmethod
    def forward(params, images, point=None):
        k1, k2, w, b = params
        h = jax.nn.relu(_conv(images, k1))
        if point == "conv1":
            h = _avg_pool2(h)
        h = jax.nn.relu(_conv(h, k2))
        if point == "conv2":
            h = _avg_pool2(h)
        return jnp.mean(h, axis=(1, 2)) @ w + b

    def step(self, state, i, images, labels):
        point = self.random.choice(self.POINTS)
        self.points_taken.append(point)
        return self.update(i, state, lambda p: _xent(labels, self.forward(p, images, point)))


def run_sdpoint(steps, wrap=None, seed=0):
    model = SDPointNet(seed)
    state = model.init_optimizer(0.02)
    losses = _loop(model, state, wrap, common.digit_images(steps, seed=seed))
    return losses, {"points_taken": model.points_taken}


class DropBlockNet(SDPointNet):
    def __init__(self, seed=0, block_size=3):
        super().__init__(seed)
        self.block_size = block_size
        self.keep_prob = 1.0

    def dropblock(self, x, key):
        if self.keep_prob == 1.0:
            return x
        size, b = x.shape[1], self.block_size
        gamma = (1.0 - self.keep_prob) / b ** 2 * size ** 2 / (size - b + 1) ** 2
        centres = (jax.random.uniform(key, x.shape) < gamma).astype(jnp.float32)
        keep = 1.0 - lax.reduce_window(centres, -jnp.inf, lax.max, (1, b, b, 1),
                                       (1, 1, 1, 1), "SAME")
        return x * keep * (keep.size / jnp.sum(keep))

    def forward(self, params, images, key):
        k1, k2, w, b = params
        key1, key2 = jax.random.split(key)
        h = self.dropblock(jax.nn.relu(_conv(images, k1)), key1)
        h = self.dropblock(jax.nn.relu(_conv(h, k2)), key2)
        return jnp.mean(h, axis=(1, 2)) @ w + b

    def step(self, state, i, key, images, labels):
        return self.update(i, state, lambda p: _xent(labels, self.forward(p, images, key)))


def run_dropblock(steps, wrap=None, seed=0):
    model = DropBlockNet(seed)
    state = model.init_optimizer(0.02)
    step = wrap(model.step) if wrap else model.step
    key = jax.random.PRNGKey(seed)
    losses = []
    for i, (x, y) in enumerate(common.digit_images(steps, seed=seed)):
        model.keep_prob = dropblock.keep_prob_schedule(i, steps)
        key, sub = jax.random.split(key)
        state, loss = step(state, i, sub, jnp.asarray(x), jnp.asarray(y))
        losses.append(float(loss))
    return losses, {"keep_prob": model.keep_prob}


def _layer_norm(x, gain, bias, eps=1e-5):
    mean = jnp.mean(x, axis=-1, keepdims=True)
    variance = jnp.mean(jnp.square(x - mean), axis=-1, keepdims=True)
    return (x - mean) / jnp.sqrt(variance + eps) * gain + bias


def _attend(p, h, dim, mask=0.0):
    q, k, v = h @ p["wq"], h @ p["wk"], h @ p["wv"]
    scores = jnp.sum(q[:, :, None, :] * k[:, None, :, :], axis=-1)
    weights = jax.nn.softmax(scores / np.sqrt(dim).astype(np.float32) + mask, axis=-1)
    return jnp.sum(weights[..., None] * v[:, None, :, :], axis=2) @ p["wo"]


class BertClassifier(_Program):
    def __init__(self, seed=0, dim=32):
        from examples.imperative.bert_cls import TOKENS, WIDTH
        self.tokens, self.width, self.dim = TOKENS, WIDTH, dim
        rng = np.random.default_rng(seed)
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
        self.params = {k: jnp.asarray(val) for k, val in v.items()}
        self.f1_scores = []

    def forward(self, p, pixels):
        tokens = pixels.reshape(-1, self.tokens, self.width) @ p["embed"]
        cls = jnp.tile(p["cls"], (pixels.shape[0], 1, 1))
        h = jnp.concatenate([cls, tokens], axis=1) + p["position"]
        h = _layer_norm(h + _attend(p, h, self.dim), p["ln1_g"], p["ln1_b"])
        ff = jax.nn.relu(h @ p["ff1"] + p["ff1_b"]) @ p["ff2"] + p["ff2_b"]
        h = _layer_norm(h + ff, p["ln2_g"], p["ln2_b"])
        return h[:, 0] @ p["out"] + p["out_b"]

    def step(self, state, i, pixels, labels):
        def loss_fn(p):
            logits = self.forward(p, pixels)
            return _xent(labels, logits), logits
        (loss, logits), grads = jax.value_and_grad(loss_fn, has_aux=True)(
            self.get_params(state))
        state = self.opt_update(i, grads, state)
        predictions = jnp.argmax(logits, axis=1)
        self.f1_scores.append(f1_score(np.asarray(labels), np.asarray(predictions),
                                       average="macro"))
        return state, loss


def run_bert_cls(steps, wrap=None, seed=0):
    model = BertClassifier(seed)
    state = model.init_optimizer(0.005)
    losses = _loop(model, state, wrap, common.digit_batches(steps, seed=seed))
    return losses, {"f1_scores": model.f1_scores}


class MiniRCNN(_Program):
    def __init__(self, seed=0, hidden=64):
        R, S = faster_rcnn.REGIONS, faster_rcnn.REGION_SIZE
        rng = np.random.default_rng(seed)
        self.params = [jnp.asarray(common.glorot(rng, (64, hidden))), jnp.zeros(hidden),
                       jnp.asarray(common.glorot(rng, (hidden, R))), jnp.zeros(R),
                       jnp.asarray(common.glorot(rng, (S + hidden, hidden))),
                       jnp.zeros(hidden), jnp.asarray(common.glorot(rng, (hidden, 10))),
                       jnp.zeros(10)]
        self.proposal_counts = []

    @staticmethod
    def features(p, pixels):
        return jax.nn.relu(pixels @ p[0] + p[1])

    def propose(self, scores):
        mean = np.asarray(jnp.mean(scores, axis=0))
        order = np.argsort(-mean, kind="stable")
        count = int(np.clip((mean > 0.5).sum(), 1, faster_rcnn.MAX_PROPOSALS))
        return [int(r) for r in order[:count]]

    def loss(self, p, pixels, labels, objectness, proposals):
        S = faster_rcnn.REGION_SIZE
        features = self.features(p, pixels)
        rpn_logits = features @ p[2] + p[3]
        rpn_loss = jnp.mean(jnp.maximum(rpn_logits, 0) - rpn_logits * objectness
                            + jnp.log1p(jnp.exp(-jnp.abs(rpn_logits))))
        roi_loss = 0.0
        for region in proposals:
            crop = pixels[:, region * S:(region + 1) * S]
            h = jax.nn.relu(jnp.concatenate([crop, features], axis=1) @ p[4] + p[5])
            roi_loss += _xent(labels, h @ p[6] + p[7])
        return rpn_loss + roi_loss / len(proposals)

    def step(self, state, i, pixels, labels, objectness):
        # The proposals are Python ints: chosen from a forward pass outside the
        # differentiated function (a gradient tracer has no NumPy value).
        params = self.get_params(state)
        scores = jax.nn.sigmoid(self.features(params, pixels) @ params[2] + params[3])
        proposals = self.propose(scores)
        self.proposal_counts.append(len(proposals))
        return self.update(i, state, lambda p: self.loss(p, pixels, labels, objectness,
                                                         proposals))


def run_faster_rcnn(steps, wrap=None, seed=0):
    model = MiniRCNN(seed)
    state = model.init_optimizer(0.01)
    batches = ((x, y, faster_rcnn.region_objectness(x))
               for x, y in common.digit_batches(steps, seed=seed))
    return _loop(model, state, wrap, batches), {"proposal_counts": model.proposal_counts}


class AddingRNN(_Program):
    def __init__(self, seed=0, hidden=32):
        rng = np.random.default_rng(seed)
        self.hidden = hidden
        self.params = [jnp.asarray(common.glorot(rng, (2, hidden))),
                       jnp.asarray(np.eye(hidden, dtype=np.float32) * 0.9
                                   + common.glorot(rng, (hidden, hidden)) * 0.1),
                       jnp.zeros(hidden), jnp.asarray(common.glorot(rng, (hidden, 1))),
                       jnp.zeros(1)]
        self.lengths = []

    def forward(self, p, sequences):
        wx, wh, b, wo, bo = p
        h = jnp.zeros((sequences.shape[0], self.hidden))
        for t in range(sequences.shape[1]):
            h = jnp.tanh(sequences[:, t] @ wx + h @ wh + b)
        return h @ wo + bo

    def step(self, state, i, sequences, targets):
        self.lengths.append(sequences.shape[1])
        return self.update(i, state, lambda p: jnp.mean(
            jnp.square(self.forward(p, sequences) - targets)))


def run_rnn_varlen(steps, wrap=None, seed=0):
    model = AddingRNN(seed)
    state = model.init_optimizer(0.01)
    losses = _loop(model, state, wrap, common.adding_problem(steps, seed=seed))
    return losses, {"lengths": model.lengths}


class MusicTransformer(_Program):
    def __init__(self, seed=0, dim=32):
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
        self.params = {k: jnp.asarray(val) for k, val in v.items()}
        self.causal_mask = np.triu(np.full((L, L), -1e9, np.float32), k=1)
        self.smoothed_loss = None

    def forward(self, p, tokens):
        h = p["embed"][tokens] + p["position"]
        h = h + _attend(p, h, self.dim, self.causal_mask)
        h = h + jax.nn.relu(h @ p["ff1"] + p["ff1_b"]) @ p["ff2"] + p["ff2_b"]
        return h @ p["out"] + p["out_b"]

    def step(self, state, i, sequences):
        def loss_fn(p):
            logits = self.forward(p, sequences[:, :-1])
            return _xent(sequences[:, 1:].reshape(-1), logits.reshape(-1, logits.shape[-1]))
        state, loss = self.update(i, state, loss_fn)
        a = music_transformer.SMOOTHING
        if self.smoothed_loss is None:
            self.smoothed_loss = loss
        else:
            self.smoothed_loss = a * self.smoothed_loss + (1 - a) * loss
        return state, loss


def run_music_transformer(steps, wrap=None, seed=0):
    model = MusicTransformer(seed)
    state = model.init_optimizer(0.01)
    batches = ((t,) for t in common.music_sequences(
        steps, length=music_transformer.LENGTH + 1, vocab=music_transformer.VOCAB,
        seed=seed))
    losses = _loop(model, state, wrap, batches)
    return losses, {"smoothed_loss": float(model.smoothed_loss)}


class GuardedMLP(MLP):
    def __init__(self, seed=0, hidden=64, max_norm=5.0):
        super().__init__(seed, hidden)
        self.max_norm = max_norm
        self.skipped = 0

    def step(self, state, i, x, y):
        loss, grads = jax.value_and_grad(lambda p: _xent(y, self.forward(p, x)))(
            self.get_params(state))
        norm = optimizers.l2_norm(grads)
        if norm > self.max_norm:
            print("skipping update: gradient norm", norm, "loss", loss)
            self.skipped += 1
            return state, loss
        return self.opt_update(i, grads, state), loss


def run_skip_step(steps, wrap=None, seed=0):
    model = GuardedMLP(seed)
    state = model.init_optimizer(0.01)
    losses = _loop(model, state, wrap,
                   skip_step.glitched(common.digit_batches(steps, seed=seed)))
    return losses, {"skipped": model.skipped}


PORTS = {"mlp_adam": run_mlp_adam, "sdpoint": run_sdpoint, "dropblock": run_dropblock,
         "bert_cls": run_bert_cls, "faster_rcnn": run_faster_rcnn,
         "rnn_varlen": run_rnn_varlen, "music_transformer": run_music_transformer,
         "skip_step": run_skip_step}
