"""get_variable / variable_scope / collections / assign / initialization queries, with
TF1's names, reuse rules and error messages."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dataflow as df


def test_names_follow_variable_scopes_not_name_scopes(graph):
    with df.variable_scope("layer1"):
        w = df.get_variable("w", [3, 2])
        with df.name_scope("inner"):
            b = df.get_variable("b", [2], initializer=df.zeros_initializer())
            y = df.matmul(df.ones([1, 3]), w) + b
        with df.variable_scope("sub"):
            c = df.get_variable("c", [])
    assert (w.name, b.name, c.name) == ("layer1/w:0", "layer1/b:0", "layer1/sub/c:0")
    assert y.name == "layer1/inner/add:0"
    assert w.shape == [3, 2] and w.dtype is df.float32 and w.trainable
    # The initializer's ops live under the variable's Initializer scope, as TF's.
    assert graph.get_operation_by_name("layer1/w/Initializer/random_uniform/RandomUniform")


def test_reentering_a_scope_shares_names_but_opens_a_new_name_scope(graph):
    with df.variable_scope("a"):
        v = df.get_variable("v", [1])
        x = df.constant(1.0, name="x")
    with df.variable_scope("a", reuse=True):
        assert df.get_variable("v") is v
        x2 = df.constant(1.0, name="x")
    with df.variable_scope("a") as scope:
        with pytest.raises(ValueError, match="Variable a/v already exists, disallowed"):
            df.get_variable("v", [1])
        scope.reuse_variables()
        assert df.get_variable("v", [1]) is v
    assert (x.name, x2.name) == ("a/x:0", "a_1/x:0")


def test_reuse_true_needs_an_existing_variable_and_matching_shape_and_dtype(graph):
    with df.variable_scope("s"):
        v = df.get_variable("v", [2, 2])
    with df.variable_scope("s", reuse=True):
        with pytest.raises(ValueError, match="Variable s/u does not exist"):
            df.get_variable("u", [1])
        with pytest.raises(ValueError, match=r"Trying to share variable s/v, but specified "
                                             r"shape \(3, 2\)"):
            df.get_variable("v", [3, 2])
        with pytest.raises(ValueError, match="specified dtype float64"):
            df.get_variable("v", [2, 2], dtype=df.float64)
        with df.variable_scope("child"):  # reuse is inherited
            with pytest.raises(ValueError, match="does not exist"):
                df.get_variable("w", [1])
    with df.variable_scope("s", reuse=False):  # False inherits, so still no sharing here
        with pytest.raises(ValueError, match="already exists"):
            df.get_variable("v", [2, 2])
    assert v.name == "s/v:0"


def test_auto_reuse_creates_once(graph):
    def layer():
        with df.variable_scope("shared", reuse=df.AUTO_REUSE):
            return df.get_variable("w", [4])
    assert layer() is layer()
    assert [v.name for v in df.global_variables()] == ["shared/w:0"]


def test_default_names_are_made_unique_and_reset_when_the_parent_closes(graph):
    names = []
    for _ in range(2):
        with df.variable_scope(None, default_name="dense"):
            names.append(df.get_variable("k", [1]).name)
    with df.variable_scope("outer"):
        with df.variable_scope(None, default_name="dense"):
            names.append(df.get_variable("k", [1]).name)
    with df.variable_scope("outer", reuse=True):
        with df.variable_scope(None, default_name="dense"):  # numbering starts again
            names.append(df.get_variable("k", [1]).name)
    assert names == ["dense/k:0", "dense_1/k:0", "outer/dense/k:0", "outer/dense/k:0"]
    with pytest.raises(ValueError, match="reuse=True cannot be used without"):
        with df.variable_scope(None, default_name="x", reuse=True):
            pass


def test_scope_objects_reenter_by_name_with_their_defaults(graph):
    with df.variable_scope("model", initializer=df.constant_initializer(0.5)) as model:
        pass
    with df.variable_scope("elsewhere"):
        with df.variable_scope(model):
            w = df.get_variable("w", [2])
            assert df.get_variable_scope().name == "model"
    assert w.name == "model/w:0"
    with df.variable_scope(model, reuse=True):
        assert df.get_variable("w") is w
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(w), [0.5, 0.5])


def test_scope_defaults_initializer_dtype_regularizer(graph):
    def l2(v):
        return df.reduce_sum(df.square(v)) * 0.1
    with df.variable_scope("d", initializer=df.ones_initializer(), dtype=df.float64,
                           regularizer=l2):
        a = df.get_variable("a", [2])
        b = df.get_variable("b", [3], initializer=df.constant_initializer(2.0))
        c = df.get_variable("c", [2], regularizer=lambda v: None)  # None: not collected
    assert a.dtype is df.float64 and b.dtype is df.float64
    losses = df.get_collection(df.GraphKeys.REGULARIZATION_LOSSES)
    assert len(losses) == 2 and losses[0].name.startswith("d/a/Regularizer/")
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        assert sess.run(losses) == pytest.approx([0.2, 1.2])
        np.testing.assert_array_equal(sess.run(c), [1.0, 1.0])


def test_initializer_values_and_defaults(graph):
    i = df.get_variable("i", [3], dtype=df.int32)  # ints default to zeros
    f = df.get_variable("f", initializer=np.arange(6, dtype=np.float32).reshape(2, 3))
    t = df.get_variable("t", initializer=df.constant([1.0, 2.0]))
    with pytest.raises(ValueError, match="If initializer is a constant, do not specify shape"):
        df.get_variable("bad", [2], initializer=np.zeros(2, np.float32))
    with pytest.raises(ValueError, match="must be fully defined"):
        df.get_variable("bad2", [None, 2])
    with pytest.raises(ValueError, match="don't match"):
        df.get_variable("bad3", initializer=np.zeros(2, np.float32), dtype=df.float64)
    assert f.shape == [2, 3] and t.shape == [2]
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        np.testing.assert_array_equal(sess.run(i), [0, 0, 0])
        np.testing.assert_array_equal(sess.run(f), np.arange(6).reshape(2, 3))
        np.testing.assert_array_equal(sess.run(t), [1.0, 2.0])


def test_collections_trainable_and_local(graph):
    w = df.get_variable("w", [1])
    frozen = df.get_variable("frozen", [1], trainable=False)
    loc = df.get_local_variable("count", [], initializer=df.zeros_initializer())
    mine = df.get_variable("mine", [1], collections=["mine"])
    assert df.global_variables() == [w, frozen]
    assert df.trainable_variables() == [w, mine]
    assert df.local_variables() == [loc] and not loc.trainable
    assert df.get_collection("mine") == [mine]
    df.add_to_collection(df.GraphKeys.LOSSES, 1)
    df.add_to_collections([df.GraphKeys.UPDATE_OPS, "x"], 2)
    df.get_collection_ref("x").append(3)
    assert df.get_collection(df.GraphKeys.LOSSES) == [1]
    assert df.get_collection("x") == [2, 3] and df.get_collection(df.GraphKeys.UPDATE_OPS) == [2]
    assert df.get_collection(df.GraphKeys.GLOBAL_VARIABLES, scope="fro") == [frozen]
    assert df.GraphKeys.GLOBAL_VARIABLES == "variables"
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        assert list(sess.run(df.report_uninitialized_variables())) == [b"count"]  # not "mine"
        sess.run(df.local_variables_initializer())
        assert sess.run(loc) == 0.0
        assert list(sess.run(df.report_uninitialized_variables([w, mine]))) == [b"mine"]
        assert sess.run(df.report_uninitialized_variables([])).shape == (0,)


def test_is_variable_initialized_and_uninitialized_reads(graph):
    with df.variable_scope("net"):
        w = df.get_variable("weights", [2], initializer=df.ones_initializer())
    y = w * 2.0
    flag = df.is_variable_initialized(w)
    with df.Session() as sess:
        assert not sess.run(flag)
        with pytest.raises(df.errors.FailedPreconditionError,
                           match="uninitialized value net/weights") as e:
            sess.run(y)
        assert e.value.op.type == "ReadVariableOp"
        sess.run(w.initializer)
        assert sess.run(flag)
        np.testing.assert_array_equal(sess.run(y), [2.0, 2.0])


def test_initialized_value_initializes_from_another_variable(graph):
    w = df.Variable([1.0, 2.0], name="w")
    w2 = df.Variable(w.initialized_value() * 3.0, name="w2")
    with df.Session() as sess:
        sess.run(w2.initializer)  # w itself is not initialized: its initial value is used
        np.testing.assert_array_equal(sess.run(w2), [3.0, 6.0])
        sess.run(w.initializer)
        sess.run(w.assign([5.0, 5.0]))
        sess.run(w2.initializer)  # now w's current value
        np.testing.assert_array_equal(sess.run(w2), [15.0, 15.0])


@settings(max_examples=20, deadline=None)
@given(rows=st.integers(1, 4), cols=st.integers(1, 4))
def test_assign_validate_shape(rows, cols):
    with df.Graph().as_default():
        v = df.Variable(np.zeros((2, 2), np.float32), name="v")
        free = df.Variable(np.zeros((2, 2), np.float32), validate_shape=False)
        value = np.arange(rows * cols, dtype=np.float32).reshape(rows, cols)
        if (rows, cols) != (2, 2):
            with pytest.raises(ValueError, match="incompatible"):
                df.assign(v, value)
        grow = df.assign(v, value, validate_shape=False)
        add = df.assign_add(free, np.ones((2, 2), np.float32))
        sub = df.assign_sub(free, np.full((2, 2), 3.0, np.float32))
        with df.Session() as sess:
            sess.run(df.global_variables_initializer())
            np.testing.assert_array_equal(sess.run(grow), value)
            np.testing.assert_array_equal(sess.run(v), value)
            sess.run(add)
            np.testing.assert_array_equal(sess.run(sub), np.full((2, 2), -2.0))


def test_fed_wrong_shape_assign_fails_at_run_time(graph):
    v = df.Variable(np.zeros(3, np.float32), name="v")
    p = df.placeholder(df.float32, [None])
    a = df.assign(v, p)
    with df.Session() as sess:
        sess.run(v.initializer)
        with pytest.raises(df.errors.InvalidArgumentError, match="variable v"):
            sess.run(a, {p: np.zeros(4, np.float32)})


def test_get_variable_in_a_loop_body_is_made_outside_it(graph):
    def body(i, acc):
        with df.variable_scope("step", reuse=df.AUTO_REUSE):
            w = df.get_variable("w", [], initializer=df.constant_initializer(2.0))
        return i + 1, acc * w
    _, out = df.while_loop(lambda i, a: i < 3, body, (0, 1.0))
    (g,) = df.gradients(out, [df.global_variables()[0]])
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        assert sess.run(out) == 8.0
        assert sess.run(g) == 12.0  # d(w^3)/dw at 2


def test_constraints_project_variables_after_each_optimizer_update(graph):
    with df.variable_scope("c", constraint=lambda v: df.maximum(v, 0.0)):
        w = df.get_variable("w", initializer=np.array([1.0, -1.0], np.float32))
    free = df.get_variable("free", initializer=np.array([1.0, -1.0], np.float32),
                           constraint=lambda v: df.minimum(v, 0.5))
    assert w.constraint is not None and free.constraint is not None
    with pytest.raises(ValueError, match="callable"):
        df.Variable(1.0, constraint=3)
    loss = df.reduce_sum(w * np.array([1.0, -1.0], np.float32)) + df.reduce_sum(free)
    train = df.train.GradientDescentOptimizer(1.0).minimize(loss)
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        sess.run(train)
        # w - grad = [0, 0] -> clipped at 0; free - 1 = [0, -2] -> min(., 0.5)
        np.testing.assert_array_equal(sess.run(w), [0.0, 0.0])
        np.testing.assert_array_equal(sess.run(free), [0.0, -2.0])
        sess.run(train)
        np.testing.assert_array_equal(sess.run(w), [0.0, 1.0])
        np.testing.assert_array_equal(sess.run(free), [-1.0, -3.0])
