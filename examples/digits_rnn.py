"""Train an RNN, built with ``df.while_loop``, on scikit-learn's 8x8 digits.

Each image is read as a sequence of its 8 rows (8 pixels each). A ``while_loop``
runs the recurrence ``h_{t+1} = tanh(x_t @ Wx + h_t @ Wh + b)`` for t = 0..7,
reading row t with ``x[:, t, :]`` where ``t`` is the loop counter; the logits are
``h_8 @ Wo + bo``. ``df.train.AdamOptimizer`` trains it *through* the loop: the
gradient is a backprop while loop that pops the forward values saved on stacks::

    python examples/digits_rnn.py            # default: 30 epochs
    python examples/digits_rnn.py 10         # a shorter run

Needs scikit-learn (``pip install -e .[examples]``); the data ship with it, so
nothing is downloaded.
"""
import sys
import time

import numpy as np

import dataflow as tf  # the TF1 graph API: `import dataflow as tf` works for supported ops

N_STEPS = 8       # rows per image: the sequence length
N_INPUTS = 8      # pixels per row: the input size at each step
N_HIDDEN = 48
N_CLASSES = 10


def load_data(test_fraction=0.2, seed=0):
    """Digits as float32 sequences ``(n, 8 rows, 8 pixels)`` in [0, 1] and one-hot labels.

    The split is the same as ``examples/digits_mlp.py``'s for the same ``seed``.

    >>> x_train, y_train, x_test, y_test = load_data()
    >>> x_train.shape, y_train.shape
    ((1437, 8, 8), (1437, 10))
    """
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)     # pixel intensities are 0..16
    y = np.eye(N_CLASSES, dtype=np.float32)[digits.target]
    x_train, x_test, y_train, y_test = train_test_split(
        x, y, test_size=test_fraction, random_state=seed, stratify=digits.target)
    return x_train, y_train, x_test, y_test


def glorot(rng, n_in, n_out):
    """A Glorot-uniform ``(n_in, n_out)`` float32 matrix."""
    limit = np.sqrt(6.0 / (n_in + n_out))
    return rng.uniform(-limit, limit, (n_in, n_out)).astype(np.float32)


def orthogonal(rng, n):
    """A random ``(n, n)`` orthogonal float32 matrix.

    An orthogonal recurrent matrix neither shrinks nor blows up ``h`` over the
    8 steps at the start of training, so gradients reach the early rows.
    """
    q, r = np.linalg.qr(rng.standard_normal((n, n)))
    return (q * np.sign(np.diag(r))).astype(np.float32)


def rnn_cell_variables(rng):
    """The recurrent cell's weights ``Wx`` (input), ``Wh`` (recurrent) and bias ``b``."""
    with tf.name_scope("rnn"):
        wx = tf.Variable(glorot(rng, N_INPUTS, N_HIDDEN), name="input_weights")
        wh = tf.Variable(orthogonal(rng, N_HIDDEN), name="recurrent_weights")
        b = tf.Variable(np.zeros(N_HIDDEN, np.float32), name="biases")
    return wx, wh, b


def final_state(x, wx, wh, b):
    """``h_8`` of the recurrence over the rows of ``x`` (``batch x 8 x 8``), as a while loop.

    The loop state is ``(t, h)``; ``x``, ``wx``, ``wh`` and ``b`` are captured by
    the body and enter the loop once, as loop invariants.
    """
    # h_0 = 0 with a dynamic batch dimension: zeros shaped like one step's input
    # projection, so the shape follows whatever batch is fed.
    h0 = tf.zeros_like(tf.matmul(x[:, 0, :], wx))

    def keep_going(t, h):
        return t < N_STEPS

    def step(t, h):
        row = x[:, t, :]                      # batch x 8: row t of every image
        return t + 1, tf.tanh(tf.matmul(row, wx) + tf.matmul(h, wh) + b)

    _, h = tf.while_loop(keep_going, step, (0, h0), name="rnn_loop")
    return h


def build_model(learning_rate=0.005, seed=0):
    """Placeholders, logits, loss and Adam's training op of the RNN, in the default graph.

    >>> model = build_model()
    >>> sorted(model)
    ['labels', 'logits', 'loss', 'train_op', 'x']
    """
    rng = np.random.default_rng(seed)
    x = tf.placeholder(tf.float32, shape=[None, N_STEPS, N_INPUTS], name="x")
    labels = tf.placeholder(tf.float32, shape=[None, N_CLASSES], name="labels")
    h = final_state(x, *rnn_cell_variables(rng))
    with tf.name_scope("output"):
        wo = tf.Variable(glorot(rng, N_HIDDEN, N_CLASSES), name="weights")
        bo = tf.Variable(np.zeros(N_CLASSES, np.float32), name="biases")
        logits = tf.matmul(h, wo) + bo
    loss = tf.reduce_mean(tf.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits))
    # minimize differentiates through the while loop: Wx, Wh and b get their
    # gradients from the backprop loop.
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


def main(epochs=30, batch_size=32, learning_rate=0.005, seed=0, verbose=True,
         train_size=None):
    """Train for ``epochs`` and return the final accuracies, the losses and the time.

    ``train_size`` keeps only the first that many training examples (a quick
    run for tests); the test set is always whole. ``losses`` holds the training
    loss before training and after each epoch.

    >>> result = main(epochs=2, verbose=False)
    >>> sorted(result)
    ['losses', 'seconds', 'test_accuracy', 'train_accuracy']
    """
    x_train, y_train, x_test, y_test = load_data(seed=seed)
    x_train, y_train = x_train[:train_size], y_train[:train_size]
    graph = tf.Graph()
    with graph.as_default():
        model = build_model(learning_rate, seed)
        init = tf.global_variables_initializer()   # after minimize: covers Adam's slots
    rng = np.random.default_rng(seed)
    with tf.Session(graph=graph) as sess:
        sess.run(init)
        losses = [evaluate(sess, model, x_train, y_train)[0]]
        start = time.perf_counter()
        for epoch in range(1, epochs + 1):
            run_epoch(sess, model, x_train, y_train, batch_size, rng)
            loss, accuracy = evaluate(sess, model, x_train, y_train)
            losses.append(loss)
            if verbose:
                print(f"epoch {epoch:3d}  loss {loss:.4f}  train accuracy {accuracy:.4f}")
        seconds = time.perf_counter() - start
        _, train_accuracy = evaluate(sess, model, x_train, y_train)
        _, test_accuracy = evaluate(sess, model, x_test, y_test)
    if verbose:
        print(f"final train accuracy {train_accuracy:.4f}, test accuracy {test_accuracy:.4f} "
              f"({epochs} epochs in {seconds:.1f} s)")
    return {"train_accuracy": train_accuracy, "test_accuracy": test_accuracy,
            "losses": losses, "seconds": seconds}


if __name__ == "__main__":
    main(epochs=int(sys.argv[1]) if len(sys.argv) > 1 else 30)
