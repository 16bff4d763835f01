"""A small convolutional network on the 8x8 digits, written as a TF1 program.

The TF1 "Deep MNIST" recipe scaled to 8x8 images: two 3x3 ``tf.nn.conv2d`` + ReLU +
2x2 ``tf.nn.max_pool`` blocks (16 and 32 channels, weights from
``tf.truncated_normal(stddev=0.1)``, biases 0.1), a 128-unit dense ReLU layer with
``tf.nn.dropout(keep_prob)``, and softmax logits, trained with Adam. It saves a
checkpoint, restores it in a new Session and prints the same test accuracy. Only the
import line differs from TensorFlow 1.x code::

    python examples/tf1/convnet.py              # 500 steps
    python examples/tf1/convnet.py --steps 100  # a quick run
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


def weight_variable(shape):
    return tf.Variable(tf.truncated_normal(shape, stddev=0.1), name="weights")


def bias_variable(shape):
    return tf.Variable(tf.constant(0.1, shape=shape), name="biases")


def conv2d(x, W):
    return tf.nn.conv2d(x, W, strides=[1, 1, 1, 1], padding="SAME")


def max_pool_2x2(x):
    return tf.nn.max_pool(x, ksize=[1, 2, 2, 1], strides=[1, 2, 2, 1], padding="SAME")


def build_model(learning_rate=1e-3):
    x = tf.placeholder(tf.float32, [None, 64], name="x")
    labels = tf.placeholder(tf.int64, [None], name="labels")
    keep_prob = tf.placeholder_with_default(1.0, [], name="keep_prob")
    images = tf.reshape(x, [-1, 8, 8, 1])
    with tf.name_scope("conv1"):
        h = tf.nn.relu(conv2d(images, weight_variable([3, 3, 1, 16])) + bias_variable([16]))
        h = max_pool_2x2(h)                                     # [batch, 4, 4, 16]
    with tf.name_scope("conv2"):
        h = tf.nn.relu(conv2d(h, weight_variable([3, 3, 16, 32])) + bias_variable([32]))
        h = max_pool_2x2(h)                                     # [batch, 2, 2, 32]
    with tf.name_scope("fc1"):
        flat = tf.reshape(h, [-1, 2 * 2 * 32])
        h = tf.nn.relu(tf.matmul(flat, weight_variable([128, 128])) + bias_variable([128]))
        h = tf.nn.dropout(h, keep_prob=keep_prob)
    with tf.name_scope("fc2"):
        logits = tf.matmul(h, weight_variable([128, 10])) + bias_variable([10])
    loss = tf.reduce_mean(tf.nn.sparse_softmax_cross_entropy_with_logits(labels=labels,
                                                                        logits=logits))
    train_op = tf.train.AdamOptimizer(learning_rate).minimize(loss)
    correct = tf.equal(tf.argmax(logits, 1), labels)
    accuracy = tf.reduce_mean(tf.cast(correct, tf.float32))
    return {"x": x, "labels": labels, "keep_prob": keep_prob, "loss": loss,
            "train_op": train_op, "accuracy": accuracy}

def main(steps=500, seed=0, checkpoint_dir=None, verbose=True):
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
                                model["keep_prob"]: 0.75})
            losses.append(float(loss))
            if verbose and step % 100 == 0:
                print(f"step {step:5d}  loss {loss:.4f}")
        accuracy = sess.run(model["accuracy"], test_feed)
        path = saver.save(sess, os.path.join(checkpoint_dir, "convnet.ckpt"),
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
    parser.add_argument("--steps", type=int, default=500)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args()
    main(steps=args.steps, seed=args.seed)
