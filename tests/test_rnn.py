"""dynamic_rnn, bidirectional_dynamic_rnn and the rnn_cell cells against TensorFlow 1.x.

The programs of ``tests/tf_reference/rnn_programs.py`` (ported from TF's ``rnn_test.py``
and ``rnn_cell_test.py``) run here with ``tf = dataflow``. Each must make the
variables TF1 made (same names, so checkpoints line up, and shapes) and, with the
same variable values, give TF's outputs, states and gradients (``expected_rnn.json``,
recorded by ``generate_tensor_array.py``). Gradients are also checked against finite
differences, and the copy-through of finished sequences against a NumPy LSTM.
"""
import pathlib

import numpy as np
import pytest

import dataflow as df
from dataflow.util import nest
from tests.op_harness import check_gradients, numeric_gradient
from tests.tf_reference import rnn_programs
from tests.tf_reference.compare import Fixture

FIXTURE = Fixture("expected_rnn.json", rnn_programs.PROGRAMS, "rnn_programs.py",
                  "generate_tensor_array.py",
                  {"float64": {"rtol": 1e-9, "atol": 1e-12}, "float32": {"rtol": 2e-5, "atol": 2e-6}})


def test_every_program_has_a_fixture():
    FIXTURE.assert_covers_programs()


@pytest.mark.parametrize("name", FIXTURE.names)
def test_rnn_matches_tensorflow(name):
    outcome = rnn_programs.run_program(df, FIXTURE.programs[name])
    assert outcome.get("variables") == FIXTURE.expected[name].get("variables"), \
        f"{name}: variables {outcome.get('variables')} != TF's"
    FIXTURE.assert_matches(name, outcome)


def _numpy_lstm(x, lengths, kernel, bias, forget_bias=1.0):
    """BasicLSTMCell over batch-major ``x`` with TF's copy-through, in NumPy."""
    batch, steps, _ = x.shape
    n = bias.shape[0] // 4
    c, h = np.zeros((batch, n)), np.zeros((batch, n))
    outputs = np.zeros((batch, steps, n))
    sig = lambda v: 1.0 / (1.0 + np.exp(-v))  # noqa: E731
    for t in range(steps):
        gates = np.concatenate([x[:, t], h], 1) @ kernel + bias
        i, j, f, o = np.split(gates, 4, axis=1)
        new_c = c * sig(f + forget_bias) + sig(i) * np.tanh(j)
        new_h = np.tanh(new_c) * sig(o)
        live = (t < lengths)[:, None]
        c, h = np.where(live, new_c, c), np.where(live, new_h, h)
        outputs[:, t] = np.where(live, new_h, 0.0)
    return outputs, c, h


@pytest.mark.usefixtures("graph")
def test_copy_through_against_numpy():
    rng = np.random.default_rng(3)
    x = rng.standard_normal((4, 6, 3))
    lengths = np.array([6, 0, 3, 1])
    cell = df.nn.rnn_cell.BasicLSTMCell(5, dtype=df.float64)
    out, state = df.nn.dynamic_rnn(cell, df.constant(x), sequence_length=lengths,
                                   dtype=df.float64)
    kernel, bias = cell.variables
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        got_out, got_state, k, b = sess.run([out, state, kernel, bias])
    want_out, want_c, want_h = _numpy_lstm(x, lengths, k, b)
    np.testing.assert_allclose(got_out, want_out, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got_state.c, want_c, rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(got_state.h, want_h, rtol=1e-12, atol=1e-12)


def _check_rnn_gradients(build, x_value, seed=0):
    """``df.gradients`` of ``sum(build(x) * w)`` for ``x`` and every trainable variable
    against central differences (variables perturbed through assign ops)."""
    rng = np.random.default_rng(seed)
    with df.Graph().as_default():
        x = df.placeholder(df.float64, x_value.shape)
        y = build(x)
        weights = df.constant(rng.standard_normal(y.shape.as_list()))
        loss = df.reduce_sum(y * weights)
        variables = df.trainable_variables()
        grads = df.gradients(loss, [x] + variables)
        setters = [(v, df.placeholder(df.float64, v.shape)) for v in variables]
        assigns = [v.assign(p) for v, p in setters]
        with df.Session() as sess:
            sess.run(df.global_variables_initializer())
            analytic = sess.run(grads, {x: x_value})
            numeric = [numeric_gradient(lambda v: sess.run(loss, {x: v}), x_value)]
            for (v, p), assign in zip(setters, assigns):
                base = sess.run(v)

                def loss_at(value, p=p, assign=assign):
                    sess.run(assign, {p: value})
                    return sess.run(loss, {x: x_value})
                numeric.append(numeric_gradient(loss_at, base))
                sess.run(assign, {p: base})
    assert len(variables) > 0
    for k, (a, n) in enumerate(zip(analytic, numeric)):
        name = "x" if k == 0 else variables[k - 1].name
        np.testing.assert_allclose(a, n, rtol=1e-5, atol=1e-7, err_msg=name)


@pytest.mark.parametrize("make_cell", [
    lambda: df.nn.rnn_cell.BasicLSTMCell(3),
    lambda: df.nn.rnn_cell.GRUCell(3),
    lambda: df.nn.rnn_cell.LSTMCell(3, use_peepholes=True, num_proj=2),
    lambda: df.nn.rnn_cell.MultiRNNCell([df.nn.rnn_cell.BasicRNNCell(2),
                                         df.nn.rnn_cell.GRUCell(3)]),
], ids=["basic_lstm", "gru", "lstm_peephole_proj", "multi"])
def test_dynamic_rnn_gradients_against_finite_differences(make_cell):
    def build(x):
        out, state = df.nn.dynamic_rnn(make_cell(), x, sequence_length=[4, 1, 3],
                                       dtype=df.float64)
        return df.concat([df.reshape(out, [-1])] + [df.reshape(s, [-1])
                                                    for s in nest.flatten(state)], 0)

    _check_rnn_gradients(build, np.random.default_rng(5).standard_normal((3, 4, 2)))


def test_bidirectional_gradients_against_finite_differences():
    def build(x):
        (fw, bw), _ = df.nn.bidirectional_dynamic_rnn(
            df.nn.rnn_cell.GRUCell(2), df.nn.rnn_cell.BasicLSTMCell(2), x,
            sequence_length=[2, 3], dtype=df.float64)
        return df.concat([fw, bw], 2)

    _check_rnn_gradients(build, np.random.default_rng(6).standard_normal((2, 3, 2)))


@pytest.mark.usefixtures("graph")
def test_cell_variables_are_made_outside_the_loop_and_reused():
    cell = df.nn.rnn_cell.BasicRNNCell(4)
    x = df.placeholder(df.float32, [2, 3, 5])
    df.nn.dynamic_rnn(cell, x, dtype=df.float32)
    df.nn.dynamic_rnn(cell, x, dtype=df.float32, scope="again")
    names = [v.name for v in df.trainable_variables()]
    assert names == ["rnn/basic_rnn_cell/kernel:0", "rnn/basic_rnn_cell/bias:0"]
    for v in cell.variables:
        assert v.op._control_flow_context is None
        assert v.initializer._control_flow_context is None
    other = df.nn.rnn_cell.BasicRNNCell(4)
    df.nn.dynamic_rnn(other, x, dtype=df.float32)
    assert [v.name for v in other.variables] == ["rnn/basic_rnn_cell_1/kernel:0",
                                                 "rnn/basic_rnn_cell_1/bias:0"]


@pytest.mark.usefixtures("graph")
def test_dynamic_rnn_build_errors():
    x = df.placeholder(df.float32, [2, 3, 5])
    with pytest.raises(ValueError, match="must give a dtype"):
        df.nn.dynamic_rnn(df.nn.rnn_cell.GRUCell(2), x)
    with pytest.raises(ValueError, match="sequence_length must be a vector"):
        df.nn.dynamic_rnn(df.nn.rnn_cell.GRUCell(2), x, sequence_length=[[1, 2]],
                          dtype=df.float32)
    with pytest.raises(ValueError, match="rank at least 3"):
        df.nn.dynamic_rnn(df.nn.rnn_cell.GRUCell(2), df.placeholder(df.float32, [2, 3]),
                          dtype=df.float32)


@pytest.mark.usefixtures("graph")
def test_reverse_sequence_and_its_gradient():
    from dataflow.ops.sequence_ops import reverse_sequence
    x = df.placeholder(df.float64, [3, 4, 2])
    lengths = np.array([4, 0, 2])
    r = reverse_sequence(x, lengths, seq_axis=1, batch_axis=0)
    value = np.arange(24.0).reshape(3, 4, 2)
    want = value.copy()
    want[0] = value[0, ::-1]
    want[2, :2] = value[2, 1::-1]
    np.testing.assert_array_equal(df.Session().run(r, {x: value}), want)
    check_gradients(lambda v: reverse_sequence(v * v, lengths, seq_axis=1, batch_axis=0),
                    [value / 10.0])
    with pytest.raises(df.errors.InvalidArgumentError, match="seq_lens"):
        df.Session().run(reverse_sequence(x, [5, 1, 1], seq_axis=1, batch_axis=0),
                         {x: value})


def test_readme_rnn_snippet_runs():
    """The README's TensorArray/RNN section: its snippet builds and runs as described."""
    import re
    readme = (pathlib.Path(__file__).resolve().parent.parent / "README.md").read_text()
    section = readme[readme.index("## TensorArray, functional loops and RNNs"):]
    snippet = re.search(r"```python\n(.*?)```", section, re.S).group(1)
    with df.Graph().as_default():
        namespace = {"tf": df}
        exec(compile(snippet, "README-rnn", "exec"), namespace)
        assert [v.name for v in df.trainable_variables()] == [
            "rnn/basic_lstm_cell/kernel:0", "rnn/basic_lstm_cell/bias:0"]
        with df.Session() as sess:
            sess.run(df.global_variables_initializer())
            outputs, cumsum = sess.run(
                [namespace["outputs"], namespace["cumsum"]],
                {namespace["x"]: np.ones((2, 3, 8)), namespace["lengths"]: [3, 1]})
    assert outputs.shape == (2, 3, 32)
    assert np.all(outputs[1, 1:] == 0.0) and np.all(outputs[1, 0] != 0.0)
    np.testing.assert_array_equal(cumsum, [1.0, 3.0, 6.0])


@pytest.mark.usefixtures("graph")
def test_cells_take_the_enclosing_scope_initializer_and_reuse():
    x = df.placeholder(df.float32, [2, 3, 4])
    cell = df.nn.rnn_cell.GRUCell(2)
    with df.variable_scope("model", initializer=df.constant_initializer(0.25)):
        out, _ = df.nn.dynamic_rnn(cell, x, dtype=df.float32)
    with df.variable_scope("model", reuse=True):
        again, _ = df.nn.dynamic_rnn(cell, x, dtype=df.float32)
        with pytest.raises(ValueError, match="does not exist"):
            df.nn.dynamic_rnn(df.nn.rnn_cell.BasicRNNCell(2), x, dtype=df.float32)
    names = [v.name for v in df.trainable_variables()]
    assert names == ["model/rnn/gru_cell/gates/kernel:0", "model/rnn/gru_cell/gates/bias:0",
                     "model/rnn/gru_cell/candidate/kernel:0",
                     "model/rnn/gru_cell/candidate/bias:0"]
    xs = np.random.default_rng(3).standard_normal((2, 3, 4)).astype(np.float32)
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        values = sess.run(df.trainable_variables())
        a, b = sess.run([out, again], {x: xs})
    np.testing.assert_array_equal(values[0], np.full((6, 4), 0.25, np.float32))
    np.testing.assert_array_equal(values[1], np.ones(4, np.float32))   # GRU gate bias
    np.testing.assert_array_equal(values[2], np.full((6, 2), 0.25, np.float32))
    np.testing.assert_array_equal(values[3], np.zeros(2, np.float32))
    np.testing.assert_array_equal(a, b)
