"""The run-time error classes of ``df.errors`` as the runtime raises them.

Each is an :class:`df.errors.OpError` with ``.op`` set and the node name and
op type in its message. Graph look-ups follow TF: a missing name is a
KeyError, a malformed one a ValueError.
"""
import pytest

import dataflow as df

pytestmark = pytest.mark.usefixtures("graph")
from dataflow.ops import control_flow_ops as cf


def raised_by(fetch, feed_dict=None, config=None, options=None):
    """The OpError raised by running ``fetch`` in a fresh session."""
    with df.Session(config=config) as sess:
        with pytest.raises(df.errors.OpError) as info:
            sess.run(fetch, feed_dict, options=options)
    return info.value


def assert_names_node(err, op):
    """``err`` carries ``op`` and names it and its type."""
    assert err.op is op
    assert op.name in str(err)
    assert op.type in str(err)


def test_all_runtime_errors_are_op_errors():
    for cls in (df.errors.InvalidArgumentError, df.errors.NotFoundError,
                df.errors.FailedPreconditionError, df.errors.DeadlineExceededError,
                df.errors.InternalError):
        assert issubclass(cls, df.errors.OpError)
    assert issubclass(df.errors.InvalidArgumentError, ValueError)


def test_invalid_argument_from_failed_assert():
    check = df.Assert(df.constant(False), [df.constant(1)], name="must_hold")
    err = raised_by(check)
    assert type(err) is df.errors.InvalidArgumentError
    assert_names_node(err, check)


def test_invalid_argument_from_dead_fetch():
    p = df.placeholder(df.bool, [])
    out_false, _ = cf.switch(df.constant(1), p, name="the_switch")
    err = raised_by(out_false, {p: True})
    assert type(err) is df.errors.InvalidArgumentError
    assert_names_node(err, out_false.op)


def test_invalid_argument_from_kernel_value_error():
    x = df.placeholder(df.int32, [None])
    g = df.gather(x, 5, name="out_of_range_gather")
    err = raised_by(g, {x: [1, 2]})
    assert type(err) is df.errors.InvalidArgumentError
    assert_names_node(err, g.op)


def test_failed_precondition_for_uninitialized_variable():
    v = df.Variable(1.0, name="never_initialized")
    read = v.read_value()
    err = raised_by(read)
    assert type(err) is df.errors.FailedPreconditionError
    assert_names_node(err, read.op)
    assert "never_initialized" in str(err)


def test_deadline_exceeded_for_infinite_loop():
    r = df.while_loop(lambda i: df.constant(True), lambda i: i + 1, [0])
    err = raised_by(r, options=df.RunOptions(timeout_in_ms=100))
    assert type(err) is df.errors.DeadlineExceededError
    assert err.op is not None
    assert err.op.name in str(err) and err.op.type in str(err)


def test_not_found_for_missing_kernel_on_declared_device():
    # A device type no kernel package registers: device_count simulates it.
    with df.device("/device:XPU:0"):
        y = df.constant(1.0) + 1.0
    err = raised_by(y, config=df.ConfigProto(device_count={"XPU": 1}))
    assert type(err) is df.errors.NotFoundError
    assert_names_node(err, y.op)


def test_soft_placement_falls_back_to_cpu_kernel():
    with df.device("/gpu:0"):
        y = df.constant(1.0) + 1.0
    config = df.ConfigProto(device_count={"GPU": 1}, allow_soft_placement=True)
    with df.Session(config=config) as sess:
        assert sess.run(y) == 2.0


def test_internal_error_when_a_fetch_never_gets_a_value():
    # A NextIteration outside any loop sends its value to "iteration 1" of the root
    # frame, so the Add in iteration 0 never receives both inputs: malformed control flow.
    c = df.constant(1)
    nxt = cf.next_iteration(df.identity(c))
    out = df.add(nxt, df.identity(c), name="starved")
    err = raised_by(out, options=df.RunOptions(timeout_in_ms=5000))
    assert type(err) is df.errors.InternalError
    assert_names_node(err, out.op)


def test_invalid_argument_for_missing_feed_and_device():
    x = df.placeholder(df.float32, [], name="unfed")
    err = raised_by(x + 1.0)
    assert type(err) is df.errors.InvalidArgumentError
    assert_names_node(err, x.op)
    with df.device("/cpu:3"):
        y = df.constant(1.0) * 2.0
    err = raised_by(y, config=df.ConfigProto(device_count={"CPU": 2}))
    assert type(err) is df.errors.InvalidArgumentError
    assert_names_node(err, y.op)


def test_cpu_devices_named_by_the_graph_are_created_unless_device_count_limits_them():
    # Unlike TF1's default of one CPU, a Session simulates every /cpu:N the graph names
    # (the runtime's design: simulated devices, one executor each once partitioning
    # lands). An explicit device_count is a limit, as in TF: /cpu:3 with two CPUs is an
    # InvalidArgumentError ("Cannot assign a device for operation") naming the op.
    with df.device("/cpu:3"):
        y = df.constant(1.0) * 2.0
    with df.Session() as sess:
        assert sess.run(y) == 2.0
        assert "/device:CPU:3" in sess.list_devices()
    err = raised_by(y, config=df.ConfigProto(device_count={"CPU": 2}))
    assert type(err) is df.errors.InvalidArgumentError
    assert_names_node(err, y.op)


def test_error_op_is_set_when_constructed_from_node_def():
    op = df.constant(1, name="some_node").op
    err = df.errors.InternalError(op, None, "boom")
    assert err.op is op and err.node_def is op
    assert "some_node" in str(err) and "Const" in str(err)


# -- graph look-ups (TF: KeyError for missing names, ValueError for malformed ones) ----------
def test_get_tensor_by_name_of_missing_name_raises_key_error(graph):
    df.constant(1, name="x")
    with pytest.raises(KeyError):
        graph.get_tensor_by_name("nope:0")
    with pytest.raises(KeyError):
        graph.get_tensor_by_name("x:5")  # the op exists but has one output
    assert graph.get_tensor_by_name("x:0").op.name == "x"


def test_get_tensor_by_name_of_malformed_name_raises_value_error(graph):
    df.constant(1, name="x")
    with pytest.raises(ValueError):
        graph.get_tensor_by_name("x")       # an operation name, not a tensor name
    with pytest.raises(ValueError):
        graph.get_tensor_by_name("x:0:1")   # TF: "looks like a Tensor name, but is not valid"


def test_get_operation_by_name(graph):
    df.constant(1, name="x")
    assert graph.get_operation_by_name("x").type == "Const"
    with pytest.raises(KeyError):
        graph.get_operation_by_name("nope")
    with pytest.raises(ValueError):
        graph.get_operation_by_name("x:0")  # TF: "appears to refer to a Tensor"
