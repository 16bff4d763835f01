"""``df.Variable``: creation, initialization, reads, assignments, collections, use as a
tensor, and the lifetime of values across runs and Sessions."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import dataflow as df


def test_variable_properties(graph):
    v = df.Variable(1.0, name="v")
    w = df.Variable(np.zeros((2, 3), np.int64), name="w", trainable=False)
    assert v.name == "v:0" and v.dtype is df.float32 and v.shape.as_list() == []
    assert w.name == "w:0" and w.dtype is df.int64 and w.shape.as_list() == [2, 3]
    assert v.trainable and not w.trainable
    assert v.graph is graph
    assert v.initializer.type == "AssignVariableOp"
    assert df.Variable(1, dtype=df.float64).dtype is df.float64
    assert df.Variable(lambda: [1, 2]).shape.as_list() == [2]  # callable initial values
    with pytest.raises(ValueError):
        df.Variable(None)


def test_variable_names_are_unique_and_scoped(graph):
    a = df.Variable(0.0, name="v")
    b = df.Variable(0.0, name="v")
    c = df.Variable(0.0)
    with df.name_scope("layer"):
        d = df.Variable(0.0, name="w")
    assert [a.name, b.name, c.name, d.name] == ["v:0", "v_1:0", "Variable:0", "layer/w:0"]


def test_collections(graph):
    a = df.Variable(1.0, name="a")
    b = df.Variable(2.0, name="b", trainable=False)
    with df.name_scope("s"):
        c = df.Variable(3.0, name="c")
    assert df.global_variables() == [a, b, c]
    assert df.trainable_variables() == [a, c]
    assert df.trainable_variables(scope="s") == [c]


def test_explicit_collections(graph):
    """``collections=[]`` keeps a variable out of global_variables() (and so out of
    global_variables_initializer()); a trainable one is still listed as trainable."""
    hidden = df.Variable(1.0, collections=[])
    frozen = df.Variable(2.0, collections=[], trainable=False)
    listed = df.Variable(3.0, collections=["variables", "trainable_variables"])
    assert df.global_variables() == [listed]
    assert df.trainable_variables() == [hidden, listed]
    assert frozen not in df.trainable_variables()
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        assert sess.run(listed) == 3.0
        with pytest.raises(df.errors.FailedPreconditionError):
            sess.run(hidden.read_value() + 1.0)


def test_initialize_fetch_and_read(graph):
    v = df.Variable([1.0, 2.0], name="v")
    r = v.read_value()
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        out = sess.run(v)
        assert isinstance(out, np.ndarray) and out.dtype == np.float32
        np.testing.assert_array_equal(out, [1.0, 2.0])
        np.testing.assert_array_equal(sess.run(r), [1.0, 2.0])
        np.testing.assert_array_equal(sess.run(v.value()), [1.0, 2.0])
        np.testing.assert_array_equal(v.eval(session=sess), [1.0, 2.0])
        # A fetched value is a copy: mutating it does not change the variable.
        out[0] = 100.0
        np.testing.assert_array_equal(sess.run(v), [1.0, 2.0])


def test_scalar_variable_fetches_a_numpy_scalar(graph):
    v = df.Variable(3, name="n")
    with df.Session() as sess:
        sess.run(v.initializer)
        out = sess.run(v)
    assert isinstance(out, np.int32) and out == 3


def test_assign_ops_return_the_new_value(graph):
    v = df.Variable(10.0)
    assign, add, sub = v.assign(5.0), v.assign_add(2.0), v.assign_sub(0.5)
    for t in (assign, add, sub):
        assert isinstance(t, df.Tensor) and t.dtype is df.float32 and t.shape.as_list() == []
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        assert sess.run(assign) == 5.0
        assert sess.run(add) == 7.0
        assert sess.run(add) == 9.0
        assert sess.run(sub) == 8.5
        assert sess.run(v) == 8.5


@settings(max_examples=30, deadline=None)
@given(ops=st.lists(st.tuples(st.sampled_from(["assign", "add", "sub"]),
                              st.integers(-100, 100)), max_size=8),
       dtype=st.sampled_from([df.int32, df.int64, df.float32, df.float64]),
       shape=hnp.array_shapes(min_dims=0, max_dims=2, max_side=3))
def test_assignment_sequences_match_a_python_model(ops, dtype, shape):
    """Running a sequence of assign/assign_add/assign_sub gives the running value each time."""
    np_type = dtype.as_numpy_dtype
    with df.Graph().as_default():
        v = df.Variable(np.zeros(shape, np_type))
        delta = df.placeholder(dtype, shape)
        updates = {"assign": v.assign(delta), "add": v.assign_add(delta),
                   "sub": v.assign_sub(delta)}
        model = np.zeros(shape, np_type)
        with df.Session() as sess:
            sess.run(v.initializer)
            for kind, amount in ops:
                value = np.full(shape, amount, np_type)
                model = {"assign": value, "add": model + value, "sub": model - value}[kind]
                out = sess.run(updates[kind], {delta: value})
                assert np.asarray(out).dtype == np_type
                np.testing.assert_array_equal(out, model)
            np.testing.assert_array_equal(sess.run(v), model)


def test_assign_rejects_wrong_shape_and_dtype(graph):
    v = df.Variable(np.zeros((2, 2), np.float32))
    with pytest.raises(ValueError):
        v.assign(np.zeros(3, np.float32))
    with pytest.raises(TypeError):
        v.assign(df.constant(np.zeros((2, 2), np.int32)))
    with pytest.raises(TypeError):
        df.Variable(1).assign(1.5)


def test_variable_in_arithmetic(graph):
    v = df.Variable([[1.0, 2.0], [3.0, 4.0]])
    m = np.array([[1.0, 0.0], [1.0, 1.0]], np.float32)
    val = np.array([[1.0, 2.0], [3.0, 4.0]], np.float32)
    cases = [(v * 2.0, val * 2), (2.0 * v, 2 * val), (v + v, val + val), (v - 1.0, val - 1),
             (1.0 - v, 1 - val), (v / 2.0, val / 2), (v ** 2, val ** 2), (-v, -val),
             (v @ m, val @ m), (m @ v, m @ val), (v[0], val[0]), (v[:, 1], val[:, 1]),
             (v // 2.0, val // 2), (v % 2.0, val % 2), (abs(v), val), (v > 2.0, val > 2),
             (np.float32(3) * v, 3 * val), (df.reduce_sum(v), val.sum()),
             (df.matmul(v, v), val @ val), (df.convert_to_tensor(v), val)]
    with df.Session() as sess:
        sess.run(v.initializer)
        outs = sess.run([t for t, _ in cases])
    for (t, expected), out in zip(cases, outs):
        assert isinstance(t, df.Tensor)
        np.testing.assert_allclose(out, expected, err_msg=t.name)


def test_bool_variable_logical_operators(graph):
    b = df.Variable([True, False])
    with df.Session() as sess:
        sess.run(b.initializer)
        outs = sess.run([b & True, b | True, ~b])
    np.testing.assert_array_equal(outs[0], [True, False])
    np.testing.assert_array_equal(outs[1], [True, True])
    np.testing.assert_array_equal(outs[2], [False, True])


def test_reads_see_assignments_made_earlier_in_the_graph(graph):
    v = df.Variable(1.0)
    doubled = v * 2.0  # reads the variable where it is used, at run time
    with df.Session() as sess:
        sess.run(v.initializer)
        assert sess.run(doubled) == 2.0
        sess.run(v.assign(5.0))
        assert sess.run(doubled) == 10.0


def test_uninitialized_read_raises_failed_precondition_naming_the_node(graph):
    v = df.Variable(1.0, name="weights")
    y = v + 1.0
    with df.Session() as sess:
        with pytest.raises(df.errors.FailedPreconditionError) as info:
            sess.run(y)
        failed = info.value.op
        assert failed.type == "ReadVariableOp" and failed.inputs[0] is v.handle
        assert failed.name in str(info.value)  # the node...
        assert "weights" in str(info.value)  # ...and the variable it reads
        with pytest.raises(df.errors.FailedPreconditionError):
            sess.run(v)
        with pytest.raises(df.errors.FailedPreconditionError):
            sess.run(v.assign_add(1.0))
        sess.run(v.initializer)
        assert sess.run(y) == 2.0


def test_values_persist_across_runs_and_are_separate_per_session(graph):
    v = df.Variable(0)
    inc = v.assign_add(1)
    init = df.global_variables_initializer()
    s1, s2 = df.Session(), df.Session()
    try:
        s1.run(init)
        s2.run(init)
        assert [s1.run(inc) for _ in range(3)] == [1, 2, 3]
        assert s2.run(inc) == 1
        assert s1.run(v) == 3 and s2.run(v) == 1
        s1.run(init)  # re-running the initializer resets the value
        assert s1.run(v) == 0
    finally:
        s1.close()
        s2.close()
    with df.Session() as s3:
        with pytest.raises(df.errors.FailedPreconditionError):
            s3.run(v)


def test_initializer_of_variables_initialized_from_each_other(graph):
    a = df.Variable(2.0)
    b = df.Variable(a.initial_value * 3.0)
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        assert sess.run(b) == 6.0


def test_variables_initializer_subset(graph):
    a = df.Variable(1.0)
    b = df.Variable(2.0)
    with df.Session() as sess:
        sess.run(df.variables_initializer([a]))
        assert sess.run(a) == 1.0
        with pytest.raises(df.errors.FailedPreconditionError):
            sess.run(b)
        assert sess.run(df.global_variables_initializer()) is None
        assert sess.run(b) == 2.0
