"""Train an MLP on scikit-learn's bundled 8x8 digits with dataflow's TF1 API.

A 64-64-64-10 network (two sigmoid hidden layers, softmax cross-entropy),
trained with ``df.train.AdamOptimizer`` on mini-batches fed through placeholders::

    python examples/digits_mlp.py            # default: 40 epochs
    python examples/digits_mlp.py 10         # a shorter run

Needs scikit-learn (``pip install -e .[examples]``); the data ship with it, so
nothing is downloaded.
"""
import itertools
import sys
import time

import numpy as np

import dataflow as tf  # the TF1 graph API: `import dataflow as tf` works for supported ops

LAYER_SIZES = (64, 64, 64, 10)   # input, two sigmoid hidden layers, logits


def load_data(test_fraction=0.2, seed=0):
    """Digits as float32 features in [0, 1] and one-hot labels, split into train and test.

    >>> x_train, y_train, x_test, y_test = load_data()
    >>> x_train.shape, y_train.shape
    ((1437, 64), (1437, 10))
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.data / 16.0).astype(np.float32)       # pixel intensities are 0..16
    y = np.eye(10, dtype=np.float32)[digits.target]
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=test_fraction, random_state=seed, stratify=digits.target)
    return x_train, y_train, x_test, y_test


def dense(inputs, n_in, n_out, rng, name):
    """A fully connected layer ``inputs @ W + b`` with Glorot-uniform ``W`` and zero ``b``.

    >>> h = dense(x, 64, 10, np.random.default_rng(0), "out")
    """
    limit = np.sqrt(6.0 / (n_in + n_out))
    with tf.name_scope(name):
        w = tf.Variable(rng.uniform(-limit, limit, (n_in, n_out)).astype(np.float32),
                        name="weights")
        b = tf.Variable(np.zeros(n_out, np.float32), name="biases")
        return tf.matmul(inputs, w) + b


def build_model(learning_rate=0.01, seed=0):
    """Placeholders, logits, loss and Adam's training op of the MLP, in the default graph.

    >>> model = build_model()
    >>> sorted(model)
    ['labels', 'logits', 'loss', 'train_op', 'x']
    """
    rng = np.random.default_rng(seed)
    x = tf.placeholder(tf.float32, shape=[None, LAYER_SIZES[0]], name="x")
    labels = tf.placeholder(tf.float32, shape=[None, LAYER_SIZES[-1]], name="labels")
    h = x
    for i, (n_in, n_out) in enumerate(itertools.pairwise(LAYER_SIZES[:-1])):
        h = tf.sigmoid(dense(h, n_in, n_out, rng, f"hidden{i + 1}"))
    logits = dense(h, LAYER_SIZES[-2], LAYER_SIZES[-1], rng, "output")
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    train_op = tf.train.AdamOptimizer(learning_rate).minimize(loss)
    return {"x": x, "labels": labels, "logits": logits, "loss": loss, "train_op": train_op}


def run_epoch(sess, model, x, y, batch_size, rng):
    """One pass over ``(x, y)`` in shuffled mini-batches."""
    order = rng.permutation(len(x))
    for start in range(0, len(x), batch_size):
        batch = order[start:start + batch_size]
        sess.run(model["train_op"], {model["x"]: x[batch], model["labels"]: y[batch]})


def evaluate(sess, model, x, y):
    """``(loss, accuracy)`` of the model on the whole of ``(x, y)``."""
    loss, logits = sess.run([model["loss"], model["logits"]],
                            {model["x"]: x, model["labels"]: y})
    # Accuracy in NumPy: the runtime has no ArgMax op.
    accuracy = np.mean(np.argmax(logits, axis=1) == np.argmax(y, axis=1))
    return float(loss), float(accuracy)


def main(epochs=40, batch_size=32, learning_rate=0.01, seed=0, verbose=True):
    """Train for ``epochs`` and return the final accuracies and the training time.

    >>> result = main(epochs=5, verbose=False)
    >>> sorted(result)
    ['seconds', 'test_accuracy', 'train_accuracy']
    """
    x_train, y_train, x_test, y_test = load_data(seed=seed)
    graph = tf.Graph()
    with graph.as_default():
        model = build_model(learning_rate, seed)
        init = tf.global_variables_initializer()   # after minimize: covers Adam's slots
    rng = np.random.default_rng(seed)
    with tf.Session(graph=graph) as sess:
        sess.run(init)
        start = time.perf_counter()
        for epoch in range(1, epochs + 1):
            run_epoch(sess, model, x_train, y_train, batch_size, rng)
            loss, accuracy = evaluate(sess, model, x_train, y_train)
            if verbose:
                print(f"epoch {epoch:3d}  loss {loss:.4f}  train accuracy {accuracy:.4f}")
        seconds = time.perf_counter() - start
        _, train_accuracy = evaluate(sess, model, x_train, y_train)
        _, test_accuracy = evaluate(sess, model, x_test, y_test)
    if verbose:
        print(f"final train accuracy {train_accuracy:.4f}, test accuracy {test_accuracy:.4f} "
              f"({epochs} epochs in {seconds:.1f} s)")
    return {"train_accuracy": train_accuracy, "test_accuracy": test_accuracy,
            "seconds": seconds}


if __name__ == "__main__":
    main(epochs=int(sys.argv[1]) if len(sys.argv) > 1 else 40)
