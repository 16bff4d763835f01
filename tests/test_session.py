"""Behaviour of ``df.Session``: fetch structures, pruning, feeds, the plan cache,
default sessions, timeouts, kernel failures and device configuration.

Where TF1's behaviour is the reference, the test says what TF does.
"""
import collections
import time

import numpy as np
import pytest

import dataflow as df

pytestmark = pytest.mark.usefixtures("graph")

Pair = collections.namedtuple("Pair", "left right")


def counting_variable(name="count"):
    """A variable and an op that adds one to it: shows whether a subgraph ran."""
    v = df.Variable(0, name=name)
    return v, v.assign_add(1)


# -- fetch structures ------------------------------------------------------------------------
def test_fetch_tensor_returns_numpy_value():
    with df.Session() as sess:
        value = sess.run(df.constant([[1, 2], [3, 4]]) * 2)
    assert isinstance(value, np.ndarray) and value.dtype == np.int32
    np.testing.assert_array_equal(value, [[2, 4], [6, 8]])


def test_fetch_operation_returns_none():
    v, inc = counting_variable()
    with df.Session() as sess:
        assert sess.run(df.global_variables_initializer()) is None
        assert sess.run(inc.op) is None
        assert sess.run(v) == 1


def test_fetch_by_tensor_and_operation_name():
    a = df.constant(4.0, name="a")
    df.identity(a * 2.0, name="doubled")
    df.no_op(name="nothing")
    with df.Session() as sess:
        assert sess.run("a:0") == 4.0
        assert sess.run("doubled:0") == 8.0
        assert sess.run("nothing") is None
        assert sess.run(["a:0", "doubled:0"]) == [4.0, 8.0]


def test_fetch_nested_structures():
    a = df.constant(1)
    b = a + 1
    noop = df.no_op()
    fetches = {"list": [a, (b, a)], "pair": Pair(b, [a]), "op": noop, "dict": {"x": {"y": b}}}
    with df.Session() as sess:
        result = sess.run(fetches)
    assert result == {"list": [1, (2, 1)], "pair": Pair(2, [1]), "op": None,
                      "dict": {"x": {"y": 2}}}
    assert isinstance(result["list"][1], tuple) and isinstance(result["pair"], Pair)


def test_fetch_the_same_tensor_twice():
    a = df.constant(3)
    with df.Session() as sess:
        assert sess.run([a, a, (a,)]) == [3, 3, (3,)]


def test_fetch_variable():
    v = df.Variable([1.0, 2.0], name="vec")
    with df.Session() as sess:
        sess.run(v.initializer)
        np.testing.assert_array_equal(sess.run(v), [1.0, 2.0])
        np.testing.assert_array_equal(sess.run({"v": [v]})["v"][0], [1.0, 2.0])


def test_fetch_of_invalid_type_or_unknown_name():
    # TF: TypeError for a fetch of the wrong type, ValueError for an unknown name.
    with df.Session() as sess:
        with pytest.raises(TypeError):
            sess.run(3)
        with pytest.raises(ValueError):
            sess.run("missing:0")


def test_fetched_arrays_are_independent_copies():
    v = df.Variable([1.0, 2.0])
    c = df.constant([5.0, 6.0])
    with df.Session() as sess:
        sess.run(v.initializer)
        got_v, got_c = sess.run([v, c])
        got_v[0] = 100.0
        got_c[0] = 100.0
        np.testing.assert_array_equal(sess.run(v), [1.0, 2.0])
        np.testing.assert_array_equal(sess.run(c), [5.0, 6.0])


# -- pruning ---------------------------------------------------------------------------------
def test_only_the_needed_subgraph_runs():
    x = df.placeholder(df.float32, [])
    failing = df.Assert(df.constant(False), [x], name="always_fails")
    v, inc = counting_variable()
    y = x * 2.0
    with df.Session() as sess:
        sess.run(v.initializer)
        assert sess.run(y, {x: 3.0}) == 6.0   # neither the Assert nor the increment runs
        assert sess.run(v) == 0
        with pytest.raises(df.errors.InvalidArgumentError):
            sess.run(failing, {x: 3.0})


def test_unfed_placeholder_not_needed_is_not_required():
    unused = df.placeholder(df.float32, [], name="unused")  # noqa: F841 - must be pruned
    with df.Session() as sess:
        assert sess.run(df.constant(2) + 3) == 5


def test_feeding_an_intermediate_tensor_cuts_its_inputs():
    x = df.placeholder(df.float32, [], name="x")
    check = df.Assert(x > 100.0, [x], name="too_small")
    with df.control_dependencies([check]):
        mid = df.identity(x * 2.0, name="mid")
    out = mid + 1.0
    with df.Session() as sess:
        # x is not fed and the Assert would fail, but feeding mid prunes both away.
        assert sess.run(out, {mid: 5.0}) == 6.0
        assert sess.run(out, {"mid:0": 7.0}) == 8.0


def test_fetching_a_fed_tensor_returns_the_fed_value():
    a = df.constant(1.0)
    b = a + 1.0
    with df.Session() as sess:
        assert sess.run([a, b], {a: 10.0}) == [10.0, 11.0]
        assert sess.run(b, {b: 42.0}) == 42.0


# -- feed conversion -------------------------------------------------------------------------
def test_int_feed_into_float_placeholder():
    x = df.placeholder(df.float32, [2])
    with df.Session() as sess:
        value = sess.run(x * 1.5, {x: [1, 2]})
    assert value.dtype == np.float32
    np.testing.assert_array_equal(value, [1.5, 3.0])


def test_fractional_float_into_int32_is_rejected():
    i = df.placeholder(df.int32, [], name="i")
    with df.Session() as sess:
        with pytest.raises(df.errors.InvalidArgumentError):
            sess.run(i, {i: 1.5})
        assert sess.run(i, {i: 2.0}) == 2   # a whole-valued float is not a loss


@pytest.mark.parametrize("value", [2 ** 40, np.int64(2 ** 31), np.array(-2 ** 40)])
def test_value_overflowing_int32_is_rejected(value):
    i = df.placeholder(df.int32, [], name="i")
    with df.Session() as sess:
        with pytest.raises(df.errors.InvalidArgumentError):
            sess.run(i, {i: value})
        assert sess.run(i, {i: np.int64(5)}) == 5


def test_wrong_feed_shape_is_rejected():
    x = df.placeholder(df.float32, [2], name="x")
    with df.Session() as sess:
        with pytest.raises(df.errors.InvalidArgumentError) as info:
            sess.run(x, {x: [1.0, 2.0, 3.0]})
    # TF raises ValueError here; InvalidArgumentError is also a ValueError.
    assert isinstance(info.value, ValueError)


def test_partially_known_shape_accepts_any_size_in_unknown_dims():
    x = df.placeholder(df.float32, [None, 2])
    with df.Session() as sess:
        assert sess.run(df.reduce_sum(x), {x: np.ones((5, 2))}) == 10.0
        with pytest.raises(ValueError):
            sess.run(x, {x: np.ones((5, 3))})


def test_missing_placeholder_feed_names_the_placeholder():
    x = df.placeholder(df.float32, [], name="needed_input")
    y = x + 1.0
    with df.Session() as sess:
        with pytest.raises(df.errors.InvalidArgumentError) as info:
            sess.run(y)
    assert "needed_input" in str(info.value)
    assert info.value.op is x.op


def test_feed_key_must_be_in_the_graph_and_value_not_a_tensor():
    # TF: TypeError for both.
    x = df.placeholder(df.float32, [])
    with df.Session() as sess:
        with pytest.raises(TypeError):
            sess.run(x, {"nope:0": 1.0})
        with pytest.raises(TypeError):
            sess.run(x, {x: df.constant(1.0)})


def test_placeholder_with_default():
    x = df.placeholder_with_default(df.constant(3.0), [])
    y = x * 2.0
    with df.Session() as sess:
        assert sess.run(y) == 6.0
        assert sess.run(y, {x: 5.0}) == 10.0


# -- the plan cache --------------------------------------------------------------------------
def test_same_fetches_twice_give_the_same_result():
    x = df.placeholder(df.float32, [])
    y = df.while_loop(lambda i, a: i < 4, lambda i, a: (i + 1, a * x), [0, 1.0])[1]
    with df.Session() as sess:
        assert sess.run(y, {x: 2.0}) == 16.0
        assert sess.run(y, {x: 2.0}) == 16.0
        assert sess.run(y, {x: 3.0}) == 81.0


def test_graph_changes_between_runs_are_seen():
    x = df.placeholder(df.float32, [])
    y = x + 1.0
    with df.Session() as sess:
        assert sess.run(y, {x: 1.0}) == 2.0
        z = y * 3.0                          # a new op after the first run
        assert sess.run(z, {x: 1.0}) == 6.0
        y.op.update_input(1, df.constant(10.0))  # rewire an existing op
        assert sess.run(y, {x: 1.0}) == 11.0
        assert sess.run(z, {x: 1.0}) == 33.0


def test_variables_persist_across_runs_but_not_sessions():
    v, inc = counting_variable()
    with df.Session() as sess:
        sess.run(v.initializer)
        sess.run(inc)
        sess.run(inc)
        assert sess.run(v) == 2
    with df.Session() as sess:
        with pytest.raises(df.errors.FailedPreconditionError):
            sess.run(v)


# -- default sessions ------------------------------------------------------------------------
def test_with_session_is_default_and_closes():
    a = df.constant(5)
    with df.Session() as sess:
        assert df.get_default_session() is sess
        assert a.eval() == 5
    assert df.get_default_session() is None
    with pytest.raises(RuntimeError):
        sess.run(a)


def test_as_default_and_eval_and_operation_run():
    v, inc = counting_variable()
    x = df.placeholder(df.int32, [])
    sess = df.Session()
    try:
        with sess.as_default():
            v.initializer.run()
            inc.op.run()
            assert v.eval() == 1
            assert (x * 3).eval(feed_dict={x: 4}) == 12
        assert df.get_default_session() is None
        assert (x * 2).eval(feed_dict={x: 4}, session=sess) == 8
    finally:
        sess.close()


def test_eval_without_default_session_raises():
    with pytest.raises(ValueError):
        df.constant(1).eval()


def test_interactive_session_installs_itself():
    sess = df.InteractiveSession()
    try:
        assert df.get_default_session() is sess
        assert (df.constant(2) * 21).eval() == 42
    finally:
        sess.close()
    assert df.get_default_session() is None


def test_session_on_explicit_graph():
    other = df.Graph()
    with other.as_default():
        c = df.constant(9, name="c")
    with df.Session(graph=other) as sess:
        assert sess.graph is other
        assert sess.run(c) == 9
        assert sess.run("c:0") == 9


# -- timeouts and failures -------------------------------------------------------------------
def test_timeout_on_infinite_loop_then_session_still_usable():
    r = df.while_loop(lambda i: df.constant(True), lambda i: i + 1, [0])
    ok = df.constant(3) + 1
    with df.Session() as sess:
        start = time.monotonic()
        with pytest.raises(df.errors.DeadlineExceededError):
            sess.run(r, options=df.RunOptions(timeout_in_ms=200))
        assert time.monotonic() - start < 5.0
        assert sess.run(ok) == 4
        with pytest.raises(df.errors.DeadlineExceededError):
            sess.run(r, options=df.RunOptions(timeout_in_ms=100))


def test_kernel_python_exception_becomes_op_error():
    x = df.placeholder(df.float32, None)
    y = df.reshape(x, [3], name="bad_reshape")
    with df.Session() as sess:
        with pytest.raises(df.errors.OpError) as info:
            sess.run(y, {x: [1.0, 2.0]})
        err = info.value
        assert err.op is y.op
        assert "bad_reshape" in str(err) and "Reshape" in str(err)
        assert isinstance(err.__cause__, ValueError)
        assert not isinstance(err.__cause__, df.errors.OpError)
        np.testing.assert_array_equal(sess.run(y, {x: [1.0, 2.0, 3.0]}), [1.0, 2.0, 3.0])


def test_failed_run_leaves_session_usable():
    x = df.placeholder(df.float32, [])
    check = df.Assert(x > 0.0, [x])
    with df.control_dependencies([check]):
        y = df.sqrt(x)
    with df.Session() as sess:
        with pytest.raises(df.errors.InvalidArgumentError):
            sess.run(y, {x: -1.0})
        assert sess.run(y, {x: 4.0}) == 2.0


def test_run_metadata_reports_the_pruned_plan():
    a = df.constant(1.0)
    b = a + 1.0
    big = b
    for _ in range(20):
        big = big * 1.0
    small_meta, big_meta = df.RunMetadata(), df.RunMetadata()
    trace = df.RunOptions(trace_level=df.RunOptions.FULL_TRACE)
    with df.Session() as sess:
        sess.run(b, run_metadata=small_meta, options=trace)
        sess.run(big, run_metadata=big_meta, options=trace)

    def nodes(meta):
        return [n.node_name for d in meta.step_stats.dev_stats for n in d.node_stats]
    assert 0 < len(nodes(small_meta)) < len(nodes(big_meta))
    assert set(nodes(small_meta)) < set(nodes(big_meta))


# -- devices ---------------------------------------------------------------------------------
def test_config_with_two_cpus_and_soft_placement():
    with df.device("/cpu:1"):
        a = df.constant(1) + 1
    with df.device("/cpu:7"):
        b = df.constant(1) + 2
    config = df.ConfigProto(device_count={"CPU": 2}, allow_soft_placement=True)
    with df.Session(config=config) as sess:
        assert "/device:CPU:1" in sess.list_devices()
        assert sess.run([a, b]) == [2, 3]


def test_undeclared_device_without_soft_placement_raises():
    with df.device("/cpu:7"):
        b = df.constant(1) + 2
    with df.device("/cpu:1"):
        a = df.constant(1) + 1
    with df.Session(config=df.ConfigProto(device_count={"CPU": 2})) as sess:
        assert sess.run(a) == 2
        with pytest.raises(df.errors.InvalidArgumentError) as info:
            sess.run(b)
        assert info.value.op is b.op
