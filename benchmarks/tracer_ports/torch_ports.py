"""The eight imperative programs in PyTorch (eager autograd, ``torch.optim.Adam``);
``COMPILE`` is ``torch.compile`` (default mode), with Inductor's ``fallback_random`` on
so that compiled random draws are eager's (otherwise DropBlock would differ by design,
not by a bug). Images stay NHWC in the data and are permuted to NCHW in the step."""
import random

import numpy as np
import torch
import torch.nn.functional as F
from sklearn.metrics import f1_score

from examples.imperative import common, dropblock, faster_rcnn, music_transformer, skip_step


def COMPILE(step):
    import torch._inductor.config as inductor_config
    inductor_config.fallback_random = True
    return torch.compile(step)


def _param(value):
    return torch.tensor(np.asarray(value), requires_grad=True)


def _hwio_to_oihw(kernel):
    return np.ascontiguousarray(kernel.transpose(3, 2, 0, 1))


class _Program:
    def init_optimizer(self, learning_rate):
        self.optimizer = torch.optim.Adam(self.parameters, lr=learning_rate)

    def train(self, loss):
        self.optimizer.zero_grad()
        loss.backward()
        self.optimizer.step()


def _loop(model, wrap, batches):
    step = wrap(model.step) if wrap else model.step
    return [float(step(*[torch.from_numpy(np.asarray(b)) for b in batch]))
            for batch in batches]


class MLP(_Program):
    def __init__(self, seed=0, hidden=128, learning_rate=0.01):
        rng = np.random.default_rng(seed)
        self.parameters = [_param(common.glorot(rng, (64, hidden))),
                           _param(np.zeros(hidden, np.float32)),
                           _param(common.glorot(rng, (hidden, 10))),
                           _param(np.zeros(10, np.float32))]
        self.init_optimizer(learning_rate)

    def __call__(self, x):
        w1, b1, w2, b2 = self.parameters
        return F.relu(x @ w1 + b1) @ w2 + b2

    def step(self, x, y):
        loss = F.cross_entropy(self(x), y.long())
        self.train(loss)
        return loss.detach()


def run_mlp_adam(steps, wrap=None, seed=0):
    return _loop(MLP(seed), wrap, common.digit_batches(steps, seed=seed)), {}


class SDPointNet(_Program):
    POINTS = (None, "conv1", "conv2")

    def __init__(self, seed=0, learning_rate=0.02):
        rng = np.random.default_rng(seed)
        self.parameters = [_param(_hwio_to_oihw(common.he_normal(rng, (3, 3, 1, 16)))),
                           _param(_hwio_to_oihw(common.he_normal(rng, (3, 3, 16, 32)))),
                           _param(common.glorot(rng, (32, 10))),
                           _param(np.zeros(10, np.float32))]
        self.init_optimizer(learning_rate)
        self.random = random.Random(seed)
        self.points_taken = []

    def __call__(self, images, point=None):
        k1, k2, w, b = self.parameters
        h = F.relu(F.conv2d(images.permute(0, 3, 1, 2), k1, padding="same"))
        if point == "conv1":
            h = F.avg_pool2d(h, 2)
        h = F.relu(F.conv2d(h, k2, padding="same"))
        if point == "conv2":
            h = F.avg_pool2d(h, 2)
        return h.mean(dim=(2, 3)) @ w + b

    def step(self, images, labels):
        point = self.random.choice(self.POINTS)
        self.points_taken.append(point)
        loss = F.cross_entropy(self(images, point), labels.long())
        self.train(loss)
        return loss.detach()


def run_sdpoint(steps, wrap=None, seed=0):
    model = SDPointNet(seed)
    losses = _loop(model, wrap, common.digit_images(steps, seed=seed))
    return losses, {"points_taken": model.points_taken}


class DropBlock:
    def __init__(self, block_size=3, keep_prob=1.0, seed=0):
        self.block_size = block_size
        self.keep_prob = keep_prob
        self.generator = torch.Generator().manual_seed(seed)

    def __call__(self, x):
        if self.keep_prob == 1.0:
            return x
        size = x.shape[2]
        gamma = ((1.0 - self.keep_prob) / self.block_size ** 2
                 * size ** 2 / (size - self.block_size + 1) ** 2)
        centres = (torch.rand(x.shape, generator=self.generator) < gamma).float()
        keep = 1.0 - F.max_pool2d(centres, self.block_size, 1, self.block_size // 2)
        return x * keep * (keep.numel() / keep.sum())


class DropBlockNet(SDPointNet):
    def __init__(self, seed=0, learning_rate=0.02):
        super().__init__(seed, learning_rate)
        self.drop1, self.drop2 = DropBlock(seed=seed + 1), DropBlock(seed=seed + 2)

    def __call__(self, images):
        k1, k2, w, b = self.parameters
        h = self.drop1(F.relu(F.conv2d(images.permute(0, 3, 1, 2), k1, padding="same")))
        h = self.drop2(F.relu(F.conv2d(h, k2, padding="same")))
        return h.mean(dim=(2, 3)) @ w + b

    def step(self, images, labels):
        loss = F.cross_entropy(self(images), labels.long())
        self.train(loss)
        return loss.detach()


def run_dropblock(steps, wrap=None, seed=0):
    model = DropBlockNet(seed)
    step = wrap(model.step) if wrap else model.step
    losses = []
    for i, (x, y) in enumerate(common.digit_images(steps, seed=seed)):
        model.drop1.keep_prob = model.drop2.keep_prob = dropblock.keep_prob_schedule(i, steps)
        losses.append(float(step(torch.from_numpy(x), torch.from_numpy(y))))
    return losses, {"keep_prob": model.drop1.keep_prob}


def _attend(p, h, dim, mask=0.0):
    q, k, v = h @ p["wq"], h @ p["wk"], h @ p["wv"]
    scores = (q[:, :, None, :] * k[:, None, :, :]).sum(-1)
    weights = torch.softmax(scores / float(np.sqrt(dim)) + mask, dim=-1)
    return (weights[..., None] * v[:, None, :, :]).sum(2) @ p["wo"]


def _layer_norm(x, gain, bias, eps=1e-5):
    mean = x.mean(-1, keepdim=True)
    variance = ((x - mean) ** 2).mean(-1, keepdim=True)
    return (x - mean) / torch.sqrt(variance + eps) * gain + bias


class BertClassifier(_Program):
    def __init__(self, seed=0, dim=32, learning_rate=0.005):
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
        self.params = {k: _param(val) for k, val in v.items()}
        self.parameters = list(self.params.values())
        self.init_optimizer(learning_rate)
        self.f1_scores = []

    def __call__(self, pixels):
        p = self.params
        tokens = pixels.reshape(-1, self.tokens, self.width) @ p["embed"]
        h = torch.cat([p["cls"].expand(pixels.shape[0], 1, self.dim), tokens], 1)
        h = h + p["position"]
        h = _layer_norm(h + _attend(p, h, self.dim), p["ln1_g"], p["ln1_b"])
        ff = F.relu(h @ p["ff1"] + p["ff1_b"]) @ p["ff2"] + p["ff2_b"]
        h = _layer_norm(h + ff, p["ln2_g"], p["ln2_b"])
        return h[:, 0] @ p["out"] + p["out_b"]

    def step(self, pixels, labels):
        logits = self(pixels)
        loss = F.cross_entropy(logits, labels.long())
        self.train(loss)
        predictions = logits.argmax(dim=1)
        self.f1_scores.append(f1_score(labels.numpy(), predictions.numpy(), average="macro"))
        return loss.detach()


def run_bert_cls(steps, wrap=None, seed=0):
    model = BertClassifier(seed)
    losses = _loop(model, wrap, common.digit_batches(steps, seed=seed))
    return losses, {"f1_scores": model.f1_scores}


class MiniRCNN(_Program):
    def __init__(self, seed=0, hidden=64, learning_rate=0.01):
        R, S = faster_rcnn.REGIONS, faster_rcnn.REGION_SIZE
        rng = np.random.default_rng(seed)
        self.parameters = [_param(common.glorot(rng, (64, hidden))),
                           _param(np.zeros(hidden, np.float32)),
                           _param(common.glorot(rng, (hidden, R))),
                           _param(np.zeros(R, np.float32)),
                           _param(common.glorot(rng, (S + hidden, hidden))),
                           _param(np.zeros(hidden, np.float32)),
                           _param(common.glorot(rng, (hidden, 10))),
                           _param(np.zeros(10, np.float32))]
        self.init_optimizer(learning_rate)
        self.proposal_counts = []

    def propose(self, scores):
        mean = scores.mean(0).detach().numpy()
        order = np.argsort(-mean, kind="stable")
        count = int(np.clip((mean > 0.5).sum(), 1, faster_rcnn.MAX_PROPOSALS))
        return [int(r) for r in order[:count]]

    def step(self, pixels, labels, objectness):
        backbone, backbone_b, rpn, rpn_b, roi, roi_b, cls, cls_b = self.parameters
        S = faster_rcnn.REGION_SIZE
        features = F.relu(pixels @ backbone + backbone_b)
        rpn_logits = features @ rpn + rpn_b
        rpn_loss = F.binary_cross_entropy_with_logits(rpn_logits, objectness)
        proposals = self.propose(torch.sigmoid(rpn_logits))
        self.proposal_counts.append(len(proposals))
        roi_loss = 0.0
        for region in proposals:
            crop = pixels[:, region * S:(region + 1) * S]
            h = F.relu(torch.cat([crop, features], 1) @ roi + roi_b)
            roi_loss += F.cross_entropy(h @ cls + cls_b, labels.long())
        loss = rpn_loss + roi_loss / len(proposals)
        self.train(loss)
        return loss.detach()


def run_faster_rcnn(steps, wrap=None, seed=0):
    model = MiniRCNN(seed)
    batches = ((x, y, faster_rcnn.region_objectness(x))
               for x, y in common.digit_batches(steps, seed=seed))
    return _loop(model, wrap, batches), {"proposal_counts": model.proposal_counts}


class AddingRNN(_Program):
    def __init__(self, seed=0, hidden=32, learning_rate=0.01):
        rng = np.random.default_rng(seed)
        self.hidden = hidden
        self.parameters = [_param(common.glorot(rng, (2, hidden))),
                           _param(np.eye(hidden, dtype=np.float32) * 0.9
                                  + common.glorot(rng, (hidden, hidden)) * 0.1),
                           _param(np.zeros(hidden, np.float32)),
                           _param(common.glorot(rng, (hidden, 1))),
                           _param(np.zeros(1, np.float32))]
        self.init_optimizer(learning_rate)
        self.lengths = []

    def __call__(self, sequences):
        wx, wh, b, wo, bo = self.parameters
        h = torch.zeros(sequences.shape[0], self.hidden)
        for t in range(sequences.shape[1]):
            h = torch.tanh(sequences[:, t] @ wx + h @ wh + b)
        return h @ wo + bo

    def step(self, sequences, targets):
        self.lengths.append(sequences.shape[1])
        loss = ((self(sequences) - targets) ** 2).mean()
        self.train(loss)
        return loss.detach()


def run_rnn_varlen(steps, wrap=None, seed=0):
    model = AddingRNN(seed)
    losses = _loop(model, wrap, common.adding_problem(steps, seed=seed))
    return losses, {"lengths": [int(n) for n in model.lengths]}


class MusicTransformer(_Program):
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
        self.params = {k: _param(val) for k, val in v.items()}
        self.parameters = list(self.params.values())
        self.init_optimizer(learning_rate)
        self.causal_mask = torch.from_numpy(np.triu(np.full((L, L), -1e9, np.float32), 1))
        self.smoothed_loss = None

    def __call__(self, tokens):
        p = self.params
        h = p["embed"][tokens.long()] + p["position"]
        h = h + _attend(p, h, self.dim, self.causal_mask)
        h = h + F.relu(h @ p["ff1"] + p["ff1_b"]) @ p["ff2"] + p["ff2_b"]
        return h @ p["out"] + p["out_b"]

    def step(self, sequences):
        logits = self(sequences[:, :-1])
        loss = F.cross_entropy(logits.reshape(-1, logits.shape[-1]),
                               sequences[:, 1:].reshape(-1).long())
        self.train(loss)
        a = music_transformer.SMOOTHING
        if self.smoothed_loss is None:
            self.smoothed_loss = loss.detach()
        else:
            self.smoothed_loss = a * self.smoothed_loss + (1 - a) * loss.detach()
        return loss.detach()


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
        loss = F.cross_entropy(self(x), y.long())
        self.optimizer.zero_grad()
        loss.backward()
        norm = torch.sqrt(sum((p.grad ** 2).sum() for p in self.parameters))
        if norm > self.max_norm:
            print("skipping update: gradient norm", norm, "loss", loss.detach())
            self.skipped += 1
            return loss.detach()
        self.optimizer.step()
        return loss.detach()


def run_skip_step(steps, wrap=None, seed=0):
    model = GuardedMLP(seed)
    losses = _loop(model, wrap, skip_step.glitched(common.digit_batches(steps, seed=seed)))
    return losses, {"skipped": model.skipped}


PORTS = {"mlp_adam": run_mlp_adam, "sdpoint": run_sdpoint, "dropblock": run_dropblock,
         "bert_cls": run_bert_cls, "faster_rcnn": run_faster_rcnn,
         "rnn_varlen": run_rnn_varlen, "music_transformer": run_music_transformer,
         "skip_step": run_skip_step}
