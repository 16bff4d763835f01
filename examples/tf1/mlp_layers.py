"""A multilayer perceptron with dropout, built with ``tf.layers``, on the 8x8 digits.

Two ``tf.layers.dense`` ReLU layers with ``tf.layers.dropout`` between them (active
only when the ``training`` placeholder is true), trained with Adam on
``tf.losses.sparse_softmax_cross_entropy``; the test accuracy comes from
``tf.metrics.accuracy`` (local variables). It saves a checkpoint, restores it in a new
Session and prints the same test accuracy. Only the import line differs from
TensorFlow 1.x code::

    python examples/tf1/mlp_layers.py              # 600 steps
    python examples/tf1/mlp_layers.py --steps 100  # a quick run
"""
import argparse
import os
import tempfile

import numpy as np
from sklearn.datasets import load_digits
from sklearn.model_selection import train_test_split

import dataflow as tf

BATCH_SIZE = 100


def load_data(seed=0):
    """Train and test images (``[n, 64]`` floats in [0, 1]) and integer labels."""
    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)
    return train_test_split(x, digits.target.astype(np.int64), test_size=0.25,
                            random_state=seed, stratify=digits.target)


def batches(n, batch_size, seed):
    """Index arrays of shuffled mini-batches, epoch after epoch."""
    rng = np.random.RandomState(seed)
    while True:
        order = rng.permutation(n)
        for start in range(0, n - batch_size + 1, batch_size):
            yield order[start:start + batch_size]


def build_model(learning_rate=1e-3, rate=0.3):
    x = tf.placeholder(tf.float32, [None, 64], name="x")
    labels = tf.placeholder(tf.int64, [None], name="labels")
    training = tf.placeholder_with_default(False, [], name="training")
    h = tf.layers.dense(x, 128, activation=tf.nn.relu)
    h = tf.layers.dropout(h, rate=rate, training=training)
    h = tf.layers.dense(h, 64, activation=tf.nn.relu)
    h = tf.layers.dropout(h, rate=rate, training=training)
    logits = tf.layers.dense(h, 10, name="logits")
    loss = tf.losses.sparse_softmax_cross_entropy(labels=labels, logits=logits)
    global_step = tf.train.get_or_create_global_step()
    train_op = tf.train.AdamOptimizer(learning_rate).minimize(loss, global_step=global_step)
    with tf.variable_scope("eval"):
        accuracy, update_accuracy = tf.metrics.accuracy(labels, tf.argmax(logits, 1))
    return {"x": x, "labels": labels, "training": training, "loss": loss,
            "train_op": train_op, "accuracy": accuracy, "update_accuracy": update_accuracy}


def evaluate(sess, model, feed):
    """tf.metrics.accuracy over ``feed``: reset its counters, update, read."""
    sess.run(tf.local_variables_initializer())
    sess.run(model["update_accuracy"], feed)
    return sess.run(model["accuracy"])

def main(steps=600, seed=0, checkpoint_dir=None, verbose=True):
    tf.reset_default_graph()
    tf.set_random_seed(seed)
    x_train, x_test, y_train, y_test = load_data()
    model = build_model()
    saver = tf.train.Saver()
    checkpoint_dir = checkpoint_dir or tempfile.mkdtemp()
    test_feed = {model["x"]: x_test, model["labels"]: y_test}
    losses = []
    with tf.Session() as sess:
        sess.run(tf.global_variables_initializer())
        for step, idx in zip(range(steps), batches(len(x_train), BATCH_SIZE, seed)):
            loss, _ = sess.run([model["loss"], model["train_op"]],
                               {model["x"]: x_train[idx], model["labels"]: y_train[idx],
                                model["training"]: True})
            losses.append(float(loss))
            if verbose and step % 100 == 0:
                print(f"step {step:5d}  loss {loss:.4f}")
        accuracy = evaluate(sess, model, test_feed)
        path = saver.save(sess, os.path.join(checkpoint_dir, "mlp.ckpt"),
                          global_step=steps)
    with tf.Session() as sess:
        saver.restore(sess, path)
        restored = evaluate(sess, model, test_feed)
    if verbose:
        print(f"test accuracy {accuracy:.4f}; restored from {path}: {restored:.4f}")
    return {"test_accuracy": float(accuracy), "restored_accuracy": float(restored),
            "losses": losses}


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=600)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    main(steps=args.steps, seed=args.seed)
