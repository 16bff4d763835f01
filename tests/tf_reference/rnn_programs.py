"""dynamic_rnn / bidirectional_dynamic_rnn / cell programs run on TensorFlow and on dataflow.

Ported from TF's ``rnn_test.py`` and ``rnn_cell_test.py`` (graph mode, control flow
v1). Each ``prog_xxx(tf, cells)`` gets the framework and its cell module (in TF 2.21
``tensorflow.python.ops.rnn_cell_impl``: ``tf.compat.v1.nn.rnn_cell`` fails under
Keras 3; in dataflow ``df.nn.rnn_cell``) and returns ``(fetches, feeds)``.

:func:`run_rnn_program` builds a program, records its trainable variables' names and
shapes (which must be TF1's, so checkpoints line up), sets every variable to the
same deterministic values in both frameworks (the initializers' random draws differ),
and runs the fetches. ``generate_tensor_array.py`` records the outcomes in
``expected_rnn.json``; ``tests/test_rnn.py`` replays them.
"""
from __future__ import annotations

import numpy as np

try:  # imported as ``tests.tf_reference.rnn_programs`` by pytest ...
    from .programs import encode, is_dataflow
except ImportError:  # ... and as a sibling module by the generator
    from programs import encode, is_dataflow

__all__ = ["PROGRAMS", "run_program", "cell_module"]

INPUTS = np.sin(np.arange(3 * 5 * 4).reshape(3, 5, 4) * 0.37).astype(np.float32)


def cell_module(tf):
    if is_dataflow(tf):
        return tf.nn.rnn_cell
    from tensorflow.python.ops import rnn_cell_impl
    return rnn_cell_impl


def _numpy_dtype(v):
    return np.dtype(v.dtype.name.replace("_ref", ""))


def _variable_values(variables):
    """Deterministic values for the variables, in the order of their sorted names."""
    values = {}
    for k, v in enumerate(sorted(variables, key=lambda v: v.name)):
        rng = np.random.default_rng(100 + k)
        shape = [int(d) for d in v.shape]
        values[v.name] = rng.uniform(-0.6, 0.6, shape).astype(_numpy_dtype(v))
    return values


def run_program(tf, program):
    """Build ``program``, set its variables, run it; the outcome as JSON (see module doc)."""
    graph = tf.Graph()
    with graph.as_default():
        try:
            fetches, feeds = program(tf, cell_module(tf))
        except Exception as e:  # noqa: BLE001 - the class name is the recorded result
            return {"build_error": type(e).__name__}
        variables = tf.trainable_variables()
        values = _variable_values(variables)
        assigns = [v.assign(values[v.name]) for v in variables]
        init = tf.global_variables_initializer()
        runs = []
        with tf.Session(graph=graph) as sess:
            sess.run(init)
            sess.run(assigns)
            for feed in (feeds if isinstance(feeds, list) else [feeds]):
                try:
                    runs.append(encode(sess.run(fetches, feed_dict=feed)))
                except Exception as e:  # noqa: BLE001
                    runs.append({"error": type(e).__name__})
    return {"runs": runs,
            "variables": [[v.name, [int(d) for d in v.shape]] for v in variables]}


def _inputs(tf, dtype=None, batch_major=True):
    x = INPUTS if batch_major else INPUTS.transpose(1, 0, 2)
    return tf.constant(x.astype(dtype or np.float32))


# -- cells in dynamic_rnn ---------------------------------------------------------------------
def prog_rnn_basic_rnn_cell(tf, cells):
    out, state = tf.nn.dynamic_rnn(cells.BasicRNNCell(6), _inputs(tf), dtype=tf.float32)
    return [out, state], {}


def prog_rnn_basic_lstm_time_major_lengths(tf, cells):
    lengths = tf.placeholder(tf.int32, [3])
    out, state = tf.nn.dynamic_rnn(cells.BasicLSTMCell(5, forget_bias=0.5),
                                   _inputs(tf, batch_major=False), sequence_length=lengths,
                                   dtype=tf.float32, time_major=True)
    return [out, state], [{lengths: [5, 3, 1]}, {lengths: [2, 0, 4]}]


def prog_rnn_lstm_cell_peepholes_projection(tf, cells):
    lengths = tf.constant([4, 5, 2])
    cell = cells.LSTMCell(6, use_peepholes=True, cell_clip=0.8, num_proj=3, proj_clip=0.5,
                          forget_bias=1.0)
    out, state = tf.nn.dynamic_rnn(cell, _inputs(tf), sequence_length=lengths,
                                   dtype=tf.float32)
    return [out, state], {}


def prog_rnn_gru_lengths_and_initial_state(tf, cells):
    lengths = tf.placeholder(tf.int64, [3])
    h0 = tf.constant(np.linspace(-0.5, 0.5, 12).reshape(3, 4).astype(np.float32))
    out, state = tf.nn.dynamic_rnn(cells.GRUCell(4), _inputs(tf), sequence_length=lengths,
                                   initial_state=h0, parallel_iterations=1, swap_memory=True)
    return [out, state], [{lengths: [5, 5, 5]}, {lengths: [1, 0, 3]}]


def prog_rnn_multi_rnn_cell(tf, cells):
    cell = cells.MultiRNNCell([cells.BasicLSTMCell(4), cells.GRUCell(3),
                               cells.BasicRNNCell(2)])
    out, state = tf.nn.dynamic_rnn(cell, _inputs(tf), sequence_length=[5, 1, 3],
                                   dtype=tf.float32)
    return {"out": out, "state": state}, {}


def prog_rnn_unknown_batch_and_time(tf, cells):
    x = tf.placeholder(tf.float32, [None, None, 4])
    out, state = tf.nn.dynamic_rnn(cells.BasicLSTMCell(3), x, dtype=tf.float32,
                                   scope="encoder")
    return [out, state], [{x: INPUTS}, {x: INPUTS[:2, :2]}]


def prog_rnn_bidirectional(tf, cells):
    lengths = tf.placeholder(tf.int32, [3])
    (fw, bw), (s_fw, s_bw) = tf.nn.bidirectional_dynamic_rnn(
        cells.LSTMCell(3), cells.GRUCell(2), _inputs(tf), sequence_length=lengths,
        dtype=tf.float32)
    return [fw, bw, s_fw, s_bw], [{lengths: [5, 2, 4]}, {lengths: [1, 5, 0]}]


def prog_rnn_bidirectional_time_major_no_lengths(tf, cells):
    (fw, bw), states = tf.nn.bidirectional_dynamic_rnn(
        cells.BasicRNNCell(3), cells.BasicRNNCell(3), _inputs(tf, batch_major=False),
        dtype=tf.float32, time_major=True, scope="birnn")
    return [fw, bw, states], {}


def prog_rnn_cell_shared_by_two_calls(tf, cells):
    """One cell object run twice: its variables are made once (the first scope's names)."""
    cell = cells.GRUCell(3)
    out1, _ = tf.nn.dynamic_rnn(cell, _inputs(tf), dtype=tf.float32, scope="first")
    out2, _ = tf.nn.dynamic_rnn(cell, _inputs(tf) * 2.0, dtype=tf.float32, scope="second")
    return [out1, out2], {}


def prog_rnn_errors(tf, cells):
    """No initial_state and no dtype: a ValueError while building."""
    return tf.nn.dynamic_rnn(cells.BasicRNNCell(2), _inputs(tf))[0], {}


def prog_rnn_sequence_length_wrong_size(tf, cells):
    lengths = tf.placeholder(tf.int32, [None])
    out, _ = tf.nn.dynamic_rnn(cells.BasicRNNCell(2), _inputs(tf), sequence_length=lengths,
                               dtype=tf.float32)
    return out, [{lengths: [1, 2, 3]}, {lengths: [1, 2]}]


def prog_rnn_custom_cell_subclass(tf, cells):
    """A user's cell: RNNCell's build/call/add_variable protocol (TF1's layer cells)."""
    class ScaledTanhCell(cells.RNNCell):
        @property
        def state_size(self):
            return 3

        @property
        def output_size(self):
            return 3

        def build(self, inputs_shape):
            self._w = self.add_variable("w", [int(inputs_shape[-1]) + 3, 3])
            self.built = True

        def call(self, inputs, state):
            h = tf.tanh(tf.matmul(tf.concat([inputs, state], 1), self._w)) * 0.5 + state
            return h, h

    out, state = tf.nn.dynamic_rnn(ScaledTanhCell(), _inputs(tf), sequence_length=[5, 2, 3],
                                   dtype=tf.float32)
    return [out, state], {}


# -- gradients ----------------------------------------------------------------------------------
def _grads(tf, loss, xs):
    return tf.gradients(loss, xs)


def prog_rnn_grad_lstm_lengths(tf, cells):
    x = _inputs(tf, np.float64)
    cell = cells.BasicLSTMCell(4, dtype=tf.float64)
    out, state = tf.nn.dynamic_rnn(cell, x, sequence_length=[5, 2, 0], dtype=tf.float64)
    loss = tf.reduce_sum(out * out) + tf.reduce_sum(state.c * 0.5) + tf.reduce_sum(state.h)
    variables = sorted(tf.trainable_variables(), key=lambda v: v.name)
    return _grads(tf, loss, [x] + variables), {}


def prog_rnn_grad_gru_multi(tf, cells):
    x = _inputs(tf, np.float64)
    cell = cells.MultiRNNCell([cells.GRUCell(3, dtype=tf.float64),
                               cells.LSTMCell(2, use_peepholes=True, dtype=tf.float64)])
    out, state = tf.nn.dynamic_rnn(cell, x, sequence_length=[3, 5, 4], dtype=tf.float64)
    loss = tf.reduce_sum(tf.tanh(out)) + tf.reduce_sum(state[1].h) * tf.reduce_sum(state[0])
    variables = sorted(tf.trainable_variables(), key=lambda v: v.name)
    return _grads(tf, loss, [x] + variables), {}


def prog_rnn_grad_bidirectional(tf, cells):
    x = _inputs(tf, np.float64)
    (fw, bw), _ = tf.nn.bidirectional_dynamic_rnn(
        cells.BasicRNNCell(3, dtype=tf.float64), cells.BasicLSTMCell(2, dtype=tf.float64), x,
        sequence_length=[4, 5, 1], dtype=tf.float64)
    loss = tf.reduce_sum(fw * fw) + tf.reduce_sum(bw * tf.constant([1.0, -2.0], tf.float64))
    variables = sorted(tf.trainable_variables(), key=lambda v: v.name)
    return _grads(tf, loss, [x] + variables), {}


PROGRAMS = {name: fn for name, fn in list(globals().items())
            if name.startswith("prog_") and callable(fn)}
