"""An LSTM classifier reading the 8x8 digits row by row, written as a TF1 program.

Each image is a sequence of 8 rows of 8 pixels; ``tf.nn.dynamic_rnn`` runs a
``tf.nn.rnn_cell.LSTMCell`` over them, and a ``tf.layers.dense`` layer maps the last
output to the 10 logits; Adam with gradient clipping by global norm trains it. It saves
a checkpoint, restores it in a new Session and prints the same test accuracy. Only the
import line differs from TensorFlow 1.x code::

    python examples/tf1/rnn_classifier.py              # 600 steps
    python examples/tf1/rnn_classifier.py --steps 100  # a quick run
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


def build_model(learning_rate=1e-2, units=32):
    x = tf.placeholder(tf.float32, [None, 64], name="x")
    labels = tf.placeholder(tf.int64, [None], name="labels")
    rows = tf.reshape(x, [-1, 8, 8])                  # [batch, time = 8 rows, 8 pixels]
    cell = tf.nn.rnn_cell.LSTMCell(units)
    outputs, state = tf.nn.dynamic_rnn(cell, rows, dtype=tf.float32)
    logits = tf.layers.dense(state.h, 10, name="logits")
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                        logits=logits))
    optimizer = tf.train.AdamOptimizer(learning_rate)
    grads, variables = zip(*optimizer.compute_gradients(loss))
    grads, _ = tf.clip_by_global_norm(grads, 5.0)
    train_op = optimizer.apply_gradients(zip(grads, variables))
    correct = tf.equal(tf.argmax(logits, 1), labels)
    accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
    return {"x": x, "labels": labels, "loss": loss, "train_op": train_op,
            "accuracy": accuracy}

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
                               {model["x"]: x_train[idx], model["labels"]: y_train[idx]})
            losses.append(float(loss))
            if verbose and step % 100 == 0:
                print(f"step {step:5d}  loss {loss:.4f}")
        accuracy = sess.run(model["accuracy"], test_feed)
        path = saver.save(sess, os.path.join(checkpoint_dir, "rnn.ckpt"),
                          global_step=steps)
    with tf.Session() as sess:
        saver.restore(sess, path)
        restored = sess.run(model["accuracy"], test_feed)
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
