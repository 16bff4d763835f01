"""The eight imperative programs' steps written by hand as TF1 graphs run by a Session.

What a TF1 programmer writes for each: the model's forward code is reused where it is
mode-agnostic (the same ``tf.*`` calls build graph ops when the default graph is not
eager), and the step becomes placeholders, one training op and ``sess.run``; the
Python-side parts of each step move as a TF1 program would move them:

* ``sdpoint``: one training op per downsampling point, Python picks which to run;
* ``dropblock``: ``keep_prob`` is a placeholder, DropBlock is a ``tf.cond`` on it;
* ``bert_cls``: the predictions are fetched and scored by scikit-learn after the run;
* ``faster_rcnn``: proposal selection moves into the graph (``top_k``, a count of
  scores above 0.5) and the RoI loop becomes a ``tf.while_loop`` with that count;
* ``rnn_varlen``: the time loop is a ``tf.while_loop`` over a fed-length sequence;
* ``music_transformer``: the running loss is a graph variable updated by the step;
* ``skip_step``: the update is a ``tf.cond`` on the gradient norm; Python prints the
  fetched values when the step was skipped.

Every program has a graph version. ``GRAPH_VERSIONS[name](steps, wrap=None, seed=0)``
returns the per-step losses, which equal the eager program's to float tolerance
(tests/test_imperative_examples.py); ``wrap`` wraps the per-step callable, as for the
eager programs.
"""
import random

import numpy as np

import dataflow as tf

try:
    from . import (
        bert_cls,
        common,
        dropblock,
        faster_rcnn,
        mlp_adam,
        music_transformer,
        rnn_varlen,
        sdpoint,
        skip_step,
    )
except ImportError:  # run as a script
    import bert_cls
    import common
    import dropblock
    import faster_rcnn
    import mlp_adam
    import music_transformer
    import rnn_varlen
    import sdpoint
    import skip_step


def _xent(labels, logits):
    return tf.reduce_mean(
        tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels, logits=logits))


def _session(graph):
    """A Session on ``graph`` with its variables initialised."""
    sess = tf.Session(graph=graph)
    with graph.as_default():
        sess.run(tf.global_variables_initializer())
    return sess


def _train_op(model, loss):
    return model.optimizer.apply_gradients(
        zip(tf.gradients(loss, model.variables), model.variables))


def _loop(wrap, model, batches, verbose=False):
    """Run ``model.step`` (wrapped by ``wrap``) over ``batches``, then close the model's
    Session: an unclosed one would keep its resources, and the BLAS pool flushing
    subnormals for the rest of the process (dataflow/runtime/denormals.py)."""
    step = wrap(model.step) if wrap else model.step
    losses = []
    try:
        for i, batch in enumerate(batches):
            losses.append(float(step(*batch)))
            if verbose and i % 10 == 0:
                print(f"step {i:4d}  loss {losses[-1]:.4f}")
    finally:
        model.sess.close()
    return losses


# -- 1. MLP ---------------------------------------------------------------------------------
class MLPGraph:
    def __init__(self, seed=0, batch_size=64):
        self.graph = tf.Graph()
        with self.graph.as_default():
            model = mlp_adam.MLP(seed)
            self.x = tf.placeholder(tf.float32, [batch_size, 64])
            self.y = tf.placeholder(tf.int32, [batch_size])
            self.loss = _xent(self.y, model(self.x))
            self.train = _train_op(model, self.loss)
        self.sess = _session(self.graph)

    def step(self, x, y):
        return self.sess.run([self.loss, self.train], {self.x: x, self.y: y})[0]


def run_mlp_adam(steps=mlp_adam.STEPS, wrap=None, seed=0, verbose=False):
    return _loop(wrap, MLPGraph(seed),
                 common.digit_batches(steps, seed=seed), verbose)


# -- 2. SDPoint -----------------------------------------------------------------------------
class SDPointGraph:
    def __init__(self, seed=0, batch_size=32):
        self.graph = tf.Graph()
        with self.graph.as_default():
            model = sdpoint.SDPointNet(seed)
            self.x = tf.placeholder(tf.float32, [batch_size, 8, 8, 1])
            self.y = tf.placeholder(tf.int32, [batch_size])
            self.fetches = {}
            for point in sdpoint.POINTS:   # one graph path per downsampling point
                loss = _xent(self.y, model(self.x, point))
                self.fetches[point] = [loss, _train_op(model, loss)]
        self.sess = _session(self.graph)
        self.random = random.Random(seed)
        self.points_taken = []

    def step(self, images, labels):
        point = self.random.choice(sdpoint.POINTS)
        self.points_taken.append(point)
        return self.sess.run(self.fetches[point], {self.x: images, self.y: labels})[0]


def run_sdpoint(steps=sdpoint.STEPS, wrap=None, seed=0, verbose=False):
    return _loop(wrap, SDPointGraph(seed),
                 common.digit_images(steps, seed=seed), verbose)


# -- 3. DropBlock ---------------------------------------------------------------------------
def _dropblock_graph(layer, x, keep_prob):
    """DropBlock with a fed ``keep_prob``: a ``tf.cond`` skips it while it is 1, so the
    random op runs (and draws) only on the steps where eager DropBlock runs it."""
    size = x.shape[1]

    def drop():
        gamma = ((1.0 - keep_prob) / layer.block_size ** 2
                 * size ** 2 / (size - layer.block_size + 1) ** 2)
        with tf.name_scope(layer.name):
            noise = tf.random_uniform(x.shape.as_list(), seed=layer.seed)
        centres = tf.cast(noise < gamma, tf.float32)
        keep = 1.0 - tf.nn.max_pool(centres, [1, layer.block_size, layer.block_size, 1],
                                    [1, 1, 1, 1], "SAME")
        return x * keep * (float(np.prod(keep.shape.as_list())) / tf.reduce_sum(keep))
    return tf.cond(keep_prob < 1.0, drop, lambda: x)


class DropBlockGraph:
    def __init__(self, seed=0, batch_size=32):
        self.graph = tf.Graph()
        with self.graph.as_default():
            tf.set_random_seed(seed)
            m = dropblock.DropBlockNet(seed)
            self.x = tf.placeholder(tf.float32, [batch_size, 8, 8, 1])
            self.y = tf.placeholder(tf.int32, [batch_size])
            self.keep_prob = tf.placeholder(tf.float32, [])
            h = tf.nn.relu(tf.nn.conv2d(self.x, m.k1, [1, 1, 1, 1], "SAME"))
            h = _dropblock_graph(m.drop1, h, self.keep_prob)
            h = tf.nn.relu(tf.nn.conv2d(h, m.k2, [1, 1, 1, 1], "SAME"))
            h = _dropblock_graph(m.drop2, h, self.keep_prob)
            logits = tf.matmul(tf.reduce_mean(h, axis=[1, 2]), m.w) + m.b
            self.loss = _xent(self.y, logits)
            self.train = _train_op(m, self.loss)
        self.sess = _session(self.graph)

    def step(self, images, labels, keep_prob):
        return self.sess.run([self.loss, self.train], {
            self.x: images, self.y: labels, self.keep_prob: keep_prob})[0]


def run_dropblock(steps=dropblock.STEPS, wrap=None, seed=0, verbose=False):
    batches = ((x, y, dropblock.keep_prob_schedule(i, steps))
               for i, (x, y) in enumerate(common.digit_images(steps, seed=seed)))
    return _loop(wrap, DropBlockGraph(seed), batches, verbose)


# -- 4. BERT-CLS ----------------------------------------------------------------------------
class BertGraph:
    def __init__(self, seed=0, batch_size=64):
        from sklearn.metrics import f1_score
        self.f1_score = f1_score
        self.graph = tf.Graph()
        with self.graph.as_default():
            model = bert_cls.BertClassifier(seed)
            self.x = tf.placeholder(tf.float32, [batch_size, 64])
            self.y = tf.placeholder(tf.int32, [batch_size])
            logits = model(self.x)
            self.loss = _xent(self.y, logits)
            self.predictions = tf.argmax(logits, axis=1)
            self.train = _train_op(model, self.loss)
        self.sess = _session(self.graph)
        self.f1_scores = []

    def step(self, x, y):
        loss, predictions, _ = self.sess.run([self.loss, self.predictions, self.train],
                                             {self.x: x, self.y: y})
        self.f1_scores.append(self.f1_score(y, predictions, average="macro"))
        return loss


def run_bert_cls(steps=bert_cls.STEPS, wrap=None, seed=0, verbose=False):
    return _loop(wrap, BertGraph(seed),
                 common.digit_batches(steps, seed=seed), verbose)


# -- 5. Faster R-CNN ------------------------------------------------------------------------
class RCNNGraph:
    """Proposals selected in the graph and the RoI head in a ``tf.while_loop`` whose trip
    count is the number of proposals."""

    def __init__(self, seed=0, batch_size=64):
        R, S = faster_rcnn.REGIONS, faster_rcnn.REGION_SIZE
        self.graph = tf.Graph()
        with self.graph.as_default():
            m = faster_rcnn.MiniRCNN(seed)
            self.x = tf.placeholder(tf.float32, [batch_size, 64])
            self.y = tf.placeholder(tf.int32, [batch_size])
            self.objectness = tf.placeholder(tf.float32, [batch_size, R])
            features = tf.nn.relu(tf.matmul(self.x, m.backbone) + m.backbone_b)
            rpn_logits = tf.matmul(features, m.rpn) + m.rpn_b
            rpn_loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(
                labels=self.objectness, logits=rpn_logits))
            mean = tf.reduce_mean(tf.sigmoid(rpn_logits), axis=0)
            order = tf.nn.top_k(mean, R).indices
            self.count = tf.clip_by_value(
                tf.reduce_sum(tf.cast(mean > 0.5, tf.int32)), 1, faster_rcnn.MAX_PROPOSALS)
            regions = tf.transpose(tf.reshape(self.x, [batch_size, R, S]), [1, 0, 2])

            def roi_step(k, total):
                crop = tf.gather(regions, order[k])
                h = tf.nn.relu(tf.matmul(tf.concat([crop, features], axis=1), m.roi)
                               + m.roi_b)
                return k + 1, total + _xent(self.y, tf.matmul(h, m.cls) + m.cls_b)
            _, roi_loss = tf.while_loop(lambda k, total: k < self.count, roi_step,
                                        [tf.constant(0), tf.constant(0.0)])
            self.loss = rpn_loss + roi_loss / tf.cast(self.count, tf.float32)
            self.train = _train_op(m, self.loss)
        self.sess = _session(self.graph)
        self.proposal_counts = []

    def step(self, x, y, objectness):
        loss, count, _ = self.sess.run([self.loss, self.count, self.train], {
            self.x: x, self.y: y, self.objectness: objectness})
        self.proposal_counts.append(int(count))
        return loss


def run_faster_rcnn(steps=faster_rcnn.STEPS, wrap=None, seed=0, verbose=False):
    batches = ((x, y, faster_rcnn.region_objectness(x))
               for x, y in common.digit_batches(steps, seed=seed))
    return _loop(wrap, RCNNGraph(seed), batches, verbose)


# -- 6. RNN over varying lengths ------------------------------------------------------------
class RNNGraph:
    """The recurrence as a ``tf.while_loop`` over the fed sequence's length."""

    def __init__(self, seed=0, batch_size=32):
        self.graph = tf.Graph()
        with self.graph.as_default():
            m = rnn_varlen.AddingRNN(seed)
            self.x = tf.placeholder(tf.float32, [batch_size, None, 2])
            self.target = tf.placeholder(tf.float32, [batch_size, 1])
            steps_first = tf.transpose(self.x, [1, 0, 2])
            length = tf.shape(steps_first)[0]

            def cell(t, h):
                x_t = tf.gather(steps_first, t)
                return t + 1, tf.tanh(tf.matmul(x_t, m.wx) + tf.matmul(h, m.wh) + m.b)
            _, h = tf.while_loop(lambda t, h: t < length, cell,
                                 [tf.constant(0), tf.zeros([batch_size, m.hidden])])
            prediction = tf.matmul(h, m.wo) + m.bo
            self.loss = tf.reduce_mean(tf.square(prediction - self.target))
            self.train = _train_op(m, self.loss)
        self.sess = _session(self.graph)

    def step(self, x, target):
        return self.sess.run([self.loss, self.train], {self.x: x, self.target: target})[0]


def run_rnn_varlen(steps=rnn_varlen.STEPS, wrap=None, seed=0, verbose=False):
    return _loop(wrap, RNNGraph(seed),
                 common.adding_problem(steps, seed=seed), verbose)


# -- 7. Music Transformer -------------------------------------------------------------------
class MusicGraph:
    """The running loss is a non-trainable variable that the training op updates."""

    def __init__(self, seed=0, batch_size=16):
        L = music_transformer.LENGTH
        self.graph = tf.Graph()
        with self.graph.as_default():
            model = music_transformer.MusicTransformer(seed)
            self.tokens = tf.placeholder(tf.int32, [batch_size, L + 1])
            self.first = tf.placeholder(tf.bool, [])
            logits = model(self.tokens[:, :-1])
            self.loss = _xent(self.tokens[:, 1:], logits)
            train = _train_op(model, self.loss)
            smoothed = tf.Variable(0.0, trainable=False, name="smoothed_loss")
            a = music_transformer.SMOOTHING
            with tf.control_dependencies([train]):
                self.smoothed = tf.assign(smoothed, tf.where(
                    self.first, self.loss, a * smoothed + (1 - a) * self.loss))
        self.sess = _session(self.graph)
        self.steps = 0

    def step(self, tokens):
        loss, self.smoothed_loss = self.sess.run(
            [self.loss, self.smoothed], {self.tokens: tokens, self.first: self.steps == 0})
        self.steps += 1
        return loss


def run_music_transformer(steps=music_transformer.STEPS, wrap=None, seed=0, verbose=False):
    batches = ((t,) for t in common.music_sequences(
        steps, length=music_transformer.LENGTH + 1, vocab=music_transformer.VOCAB,
        seed=seed))
    return _loop(wrap, MusicGraph(seed), batches, verbose)


# -- 8. Skipped steps -----------------------------------------------------------------------
class SkipStepGraph:
    """The update is a ``tf.cond`` on the gradient norm; Python prints when it skipped."""

    def __init__(self, seed=0, batch_size=64):
        self.graph = tf.Graph()
        with self.graph.as_default():
            m = skip_step.GuardedMLP(seed)
            self.x = tf.placeholder(tf.float32, [batch_size, 64])
            self.y = tf.placeholder(tf.int32, [batch_size])
            h = tf.nn.relu(tf.matmul(self.x, m.w1) + m.b1)
            self.loss = _xent(self.y, tf.matmul(h, m.w2) + m.b2)
            grads = tf.gradients(self.loss, m.variables)
            self.norm = tf.global_norm(grads)
            self.skip = self.norm > m.max_norm
            self.train = tf.cond(self.skip, tf.no_op, lambda: m.optimizer.apply_gradients(
                zip(grads, m.variables)))
        self.sess = _session(self.graph)
        self.skipped = 0

    def step(self, x, y):
        loss, norm, skip, _ = self.sess.run([self.loss, self.norm, self.skip, self.train],
                                            {self.x: x, self.y: y})
        if skip:
            print("skipping update: gradient norm", norm, "loss", loss)
            self.skipped += 1
        return loss


def run_skip_step(steps=skip_step.STEPS, wrap=None, seed=0, verbose=False):
    return _loop(wrap, SkipStepGraph(seed),
                 skip_step.glitched(common.digit_batches(steps, seed=seed)), verbose)


GRAPH_VERSIONS = {
    "mlp_adam": run_mlp_adam, "sdpoint": run_sdpoint, "dropblock": run_dropblock,
    "bert_cls": run_bert_cls, "faster_rcnn": run_faster_rcnn, "rnn_varlen": run_rnn_varlen,
    "music_transformer": run_music_transformer, "skip_step": run_skip_step,
}
