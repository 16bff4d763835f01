"""Hard case 5: ``.numpy()`` of a tensor decides a Python loop's trip count (Faster R-CNN).

A two-stage detector in miniature: a region proposal network scores the eight row
regions of each digit for "ink"; the regions whose mean objectness passes 0.5 become
proposals, and a Python ``for`` loop runs the RoI head once per proposal. How many
proposals there are -- the loop's trip count -- is read from the proposal scores'
NumPy value in the middle of the step, and changes as the RPN learns.

    python examples/imperative/faster_rcnn.py --steps 100
"""
import numpy as np

import dataflow as tf

try:
    from . import common
except ImportError:  # run as a script
    import common

STEPS = 60
REGIONS, REGION_SIZE = 8, 8      # the rows of an 8x8 digit
MAX_PROPOSALS = 6
INK = 0.3                        # a region is an object if its mean intensity is above


class MiniRCNN:
    """A shared backbone, an RPN head (objectness per region) and an RoI head that
    classifies the digit from one proposed region plus the backbone's features."""

    def __init__(self, seed=0, hidden=64, learning_rate=0.01):
        rng = np.random.default_rng(seed)
        self.backbone = tf.Variable(common.glorot(rng, (64, hidden)), name="backbone")
        self.backbone_b = tf.Variable(np.zeros(hidden, np.float32), name="backbone_b")
        self.rpn = tf.Variable(common.glorot(rng, (hidden, REGIONS)), name="rpn")
        self.rpn_b = tf.Variable(np.zeros(REGIONS, np.float32), name="rpn_b")
        self.roi = tf.Variable(common.glorot(rng, (REGION_SIZE + hidden, hidden)),
                               name="roi")
        self.roi_b = tf.Variable(np.zeros(hidden, np.float32), name="roi_b")
        self.cls = tf.Variable(common.glorot(rng, (hidden, 10)), name="cls")
        self.cls_b = tf.Variable(np.zeros(10, np.float32), name="cls_b")
        self.variables = [self.backbone, self.backbone_b, self.rpn, self.rpn_b,
                          self.roi, self.roi_b, self.cls, self.cls_b]
        self.optimizer = tf.train.AdamOptimizer(learning_rate)
        self.proposal_counts = []

    def propose(self, scores):
        """Regions by decreasing mean objectness whose mean passes 0.5 (at least one,
        at most MAX_PROPOSALS), as Python ints: host-side NMS-free proposal selection."""
        mean = tf.reduce_mean(scores, axis=0).numpy()
        order = np.argsort(-mean, kind="stable")
        count = int(np.clip((mean > 0.5).sum(), 1, MAX_PROPOSALS))
        return [int(r) for r in order[:count]]

    def step(self, pixels, labels, objectness):
        with tf.GradientTape() as tape:
            features = tf.nn.relu(tf.matmul(pixels, self.backbone) + self.backbone_b)
            rpn_logits = tf.matmul(features, self.rpn) + self.rpn_b
            rpn_loss = tf.reduce_mean(tf.nn.sigmoid_cross_entropy_with_logits(
                labels=objectness, logits=rpn_logits))
            proposals = self.propose(tf.sigmoid(rpn_logits))
            self.proposal_counts.append(len(proposals))
            roi_loss = 0.0
            for region in proposals:
                crop = pixels[:, region * REGION_SIZE:(region + 1) * REGION_SIZE]
                h = tf.nn.relu(tf.matmul(tf.concat([crop, features], axis=1), self.roi)
                               + self.roi_b)
                logits = tf.matmul(h, self.cls) + self.cls_b
                roi_loss += tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(
                    labels=labels, logits=logits))
            loss = rpn_loss + roi_loss / len(proposals)
        grads = tape.gradient(loss, self.variables)
        self.optimizer.apply_gradients(zip(grads, self.variables))
        return loss


def region_objectness(pixels):
    """RPN targets: 1.0 for each row region whose mean intensity is above INK."""
    rows = pixels.reshape(len(pixels), REGIONS, REGION_SIZE)
    return (rows.mean(axis=2) > INK).astype(np.float32)


def make_model(seed=0):
    """A fresh model (its variables made in eager mode)."""
    with tf.eager_mode():
        return MiniRCNN(seed)


def observations(model):
    """What the program's Python side recorded, beside the losses (compared across
    ways of running it by the benchmarks)."""
    return {"proposal_counts": model.proposal_counts}


def run(steps=STEPS, wrap=None, seed=0, verbose=False, model=None):
    """Train for ``steps`` batches of 64 digits; returns the per-step losses (the
    per-step proposal counts are in ``model.proposal_counts``)."""
    with tf.eager_mode():
        model = make_model(seed) if model is None else model
        step = wrap(model.step) if wrap else model.step
        losses = []
        for i, (x, y) in enumerate(common.digit_batches(steps, seed=seed)):
            loss = step(tf.constant(x), tf.constant(y), tf.constant(region_objectness(x)))
            losses.append(float(loss))
            if verbose and i % 10 == 0:
                print(f"step {i:4d}  proposals {model.proposal_counts[-1]}  "
                      f"loss {losses[-1]:.4f}")
    return losses


if __name__ == "__main__":
    common.main(run, STEPS, __doc__)
