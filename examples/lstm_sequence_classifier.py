"""Train an LSTM sequence classifier with ``df.nn.dynamic_rnn`` on variable-length sequences.

The data are generated: each sequence has 4 to 20 steps of one value each, and its
label says whether the values add up to more than zero. Sequences are padded to 20
steps with large random values, so a model that read past a sequence's end would be
misled: ``dynamic_rnn(..., sequence_length=lengths)`` stops each sequence at its
length (its state is copied through the padding, its outputs there are zeros), and
the classifier reads the final state ``h``. ``AdamOptimizer`` trains the
``BasicLSTMCell`` through the while loop that ``dynamic_rnn`` builds::

    python examples/lstm_sequence_classifier.py        # default: 8 epochs
    python examples/lstm_sequence_classifier.py 4      # a shorter run

Nothing is downloaded; it prints the loss and accuracy per epoch and the final test
accuracy (about 98 % after 8 epochs, in well under a minute).
"""
import sys
import time

import numpy as np

import dataflow as tf  # the TF1 graph API: `import dataflow as tf` works for supported ops

MAX_STEPS = 20
MIN_STEPS = 4
N_HIDDEN = 24


def make_data(n, rng):
    """``n`` padded sequences ``(n, 20, 1)``, their lengths and their labels (0 or 1).

    >>> x, lengths, labels = make_data(5, np.random.default_rng(0))
    >>> x.shape, lengths.shape, labels.shape
    ((5, 20, 1), (5,), (5,))
    """
    lengths = rng.integers(MIN_STEPS, MAX_STEPS + 1, size=n)
    values = rng.standard_normal((n, MAX_STEPS)).astype(np.float32)
    steps = np.arange(MAX_STEPS)[None, :]
    padding = rng.uniform(-3.0, 3.0, (n, MAX_STEPS)).astype(np.float32)
    x = np.where(steps < lengths[:, None], values, padding)
    labels = (np.sum(np.where(steps < lengths[:, None], values, 0.0), axis=1) > 0)
    return x[:, :, None], lengths.astype(np.int32), labels.astype(np.int64)


def build_model(learning_rate=0.01):
    """Placeholders, logits, loss and Adam's training op, in the default graph.

    >>> sorted(build_model())
    ['labels', 'lengths', 'logits', 'loss', 'train_op', 'x']
    """
    x = tf.placeholder(tf.float32, [None, MAX_STEPS, 1], name="x")
    lengths = tf.placeholder(tf.int32, [None], name="lengths")
    labels = tf.placeholder(tf.float32, [None, 2], name="labels")
    cell = tf.nn.rnn_cell.BasicLSTMCell(N_HIDDEN)
    # Variables: rnn/basic_lstm_cell/kernel and rnn/basic_lstm_cell/bias, as in TF1.
    _, state = tf.nn.dynamic_rnn(cell, x, sequence_length=lengths, dtype=tf.float32)
    with tf.name_scope("output"):
        rng = np.random.default_rng(0)
        limit = np.sqrt(6.0 / (N_HIDDEN + 2))
        w = tf.Variable(rng.uniform(-limit, limit, (N_HIDDEN, 2)).astype(np.float32),
                        name="weights")
        b = tf.Variable(np.zeros(2, np.float32), name="biases")
        logits = tf.matmul(state.h, w) + b
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits_v2(labels=labels,
                                                                      logits=logits))
    train_op = tf.train.AdamOptimizer(learning_rate).minimize(loss)
    return {"x": x, "lengths": lengths, "labels": labels, "logits": logits, "loss": loss,
            "train_op": train_op}


def _feed(model, x, lengths, labels):
    return {model["x"]: x, model["lengths"]: lengths,
            model["labels"]: np.eye(2, dtype=np.float32)[labels]}


def evaluate(sess, model, data):
    """``(loss, accuracy)`` on ``data = (x, lengths, labels)``."""
    loss, logits = sess.run([model["loss"], model["logits"]], _feed(model, *data))
    return float(loss), float(np.mean(np.argmax(logits, axis=1) == data[2]))


def main(epochs=8, train_size=3000, test_size=1000, batch_size=50, learning_rate=0.01,
         seed=0, verbose=True):
    """Train for ``epochs``; returns the final accuracies, the losses and the time.

    >>> result = main(epochs=1, train_size=200, verbose=False)
    >>> sorted(result)
    ['losses', 'seconds', 'test_accuracy', 'train_accuracy']
    """
    rng = np.random.default_rng(seed)
    train, test = make_data(train_size, rng), make_data(test_size, rng)
    graph = tf.Graph()
    with graph.as_default():
        model = build_model(learning_rate)
        init = tf.global_variables_initializer()   # after minimize: covers Adam's slots
    with tf.Session(graph=graph) as sess:
        sess.run(init)
        losses = [evaluate(sess, model, train)[0]]
        start = time.perf_counter()
        for epoch in range(1, epochs + 1):
            order = rng.permutation(train_size)
            for s in range(0, train_size, batch_size):
                batch = order[s:s + batch_size]
                sess.run(model["train_op"], _feed(model, *(a[batch] for a in train)))
            loss, accuracy = evaluate(sess, model, train)
            losses.append(loss)
            if verbose:
                print(f"epoch {epoch:3d}  loss {loss:.4f}  train accuracy {accuracy:.4f}")
        seconds = time.perf_counter() - start
        _, train_accuracy = evaluate(sess, model, train)
        _, test_accuracy = evaluate(sess, model, test)
    if verbose:
        print(f"final train accuracy {train_accuracy:.4f}, test accuracy {test_accuracy:.4f} "
              f"({epochs} epochs in {seconds:.1f} s)")
    return {"train_accuracy": train_accuracy, "test_accuracy": test_accuracy,
            "losses": losses, "seconds": seconds}


if __name__ == "__main__":
    main(epochs=int(sys.argv[1]) if len(sys.argv) > 1 else 8)
