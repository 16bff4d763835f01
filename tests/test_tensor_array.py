"""TensorArray: gradients against finite differences, error messages, shapes, devices.

The TF-recorded comparisons live in ``test_tensor_array_reference.py``; these tests
check what fixtures cannot: gradients on random inputs (``grad_check``), that
run-time errors name the op, build-time ``ValueError`` s, static shapes, one array
per step, and an array used on two devices.
"""
import numpy as np
import pytest

import dataflow as df
from tests.op_harness import check_gradients


# -- gradients against finite differences ------------------------------------------------------
def _rnn_through_arrays(x, w, h0):
    """``h_t = tanh(x_t + h_{t-1} w)`` over the rows of ``x``, outputs in a TensorArray."""
    n = 4
    inputs = df.TensorArray(df.float64, size=n).unstack(x)
    outputs = df.TensorArray(df.float64, size=n)

    def body(t, h, out):
        h = df.tanh(inputs.read(t) + df.matmul(h, w))
        return t + 1, h, out.write(t, h)

    _, h, outputs = df.while_loop(lambda t, h, o: t < n, body, [0, h0, outputs])
    return df.concat([df.reshape(outputs.stack(), [-1]), df.reshape(h, [-1])], 0)


def test_gradient_of_rnn_through_tensor_arrays():
    rng = np.random.default_rng(0)
    check_gradients(_rnn_through_arrays,
                    [rng.standard_normal((4, 1, 3)), 0.5 * rng.standard_normal((3, 3)),
                     rng.standard_normal((1, 3))])


def test_gradient_through_nested_loops_and_cond():
    """An outer loop writes one element per step; each element comes from an inner loop
    and a cond on the step's parity."""
    def build(x):
        ta = df.TensorArray(df.float64, size=3)

        def outer(i, v, t):
            _, u = df.while_loop(lambda j, u: j < i + 1, lambda j, u: (j + 1, df.sin(u) * x),
                                 [0, v])
            u = df.cond(df.equal(i % 2, 0), lambda: u * u, lambda: u + x)
            return i + 1, u, t.write(i, u)

        _, _, ta = df.while_loop(lambda i, v, t: i < 3, outer, [0, x, ta])
        return ta.stack()

    check_gradients(build, [np.array([0.4, -0.9])])


def test_gradient_of_split_concat_gather_scatter():
    def build(x):
        parts = df.TensorArray(df.float64, size=2, infer_shape=False).split(x * x, [1, 3])
        joined = df.TensorArray(df.float64, size=2, infer_shape=False)
        joined = joined.write(0, df.exp(parts.read(1))).write(1, parts.read(0) * 3.0)
        rows = df.TensorArray(df.float64, size=4, element_shape=[2])
        rows = rows.scatter([2, 0], df.reshape(joined.concat(), [2, 2]))
        return rows.gather([0, 1, 2])

    check_gradients(build, [np.array([0.3, -0.2, 0.5, 1.1])])


def test_gradient_with_partial_shapes_and_dynamic_size():
    """Element shape unknown while building; the array grows in the loop."""
    def build(x):
        ta = df.TensorArray(df.float64, size=0, dynamic_size=True)

        def body(i, v, t):
            v = df.tanh(v * 1.5) + x
            return i + 1, v, t.write(i, v)

        _, _, ta = df.while_loop(lambda i, v, t: i < 3, body, [0, x, ta])
        return ta.stack()

    check_gradients(build, [np.array([0.2, -0.4, 0.8])], partial=True)


def test_reads_of_one_index_add_up_in_the_gradient():
    x = df.placeholder(df.float64, [2])
    ta = df.TensorArray(df.float64, size=1, clear_after_read=False).write(0, x)
    y = df.reduce_sum(ta.read(0) * 2.0) + df.reduce_sum(ta.read(0) * ta.stack()[0])
    g, = df.gradients(y, [x])
    v = np.array([1.0, -3.0])
    np.testing.assert_allclose(df.Session().run(g, {x: v}), 2.0 + 2.0 * v)


# -- errors -------------------------------------------------------------------------------------
@pytest.mark.usefixtures("graph")
def test_run_time_errors_name_the_op():
    i = df.placeholder(df.int32, [])
    ta = df.TensorArray(df.float32, size=2)
    w = ta.write(i, 1.0).write(1, 2.0, name="second_write")
    with pytest.raises(df.errors.InvalidArgumentError,
                       match="already been written to") as info:
        df.Session().run(w.stack(), {i: 1})
    assert info.value.op.type == "TensorArrayWriteV3"
    assert info.value.op.name.startswith("second_write/")
    with pytest.raises(df.errors.InvalidArgumentError, match="not resizeable") as info:
        df.Session().run(w.stack(), {i: 2})
    assert info.value.op.type == "TensorArrayWriteV3"
    assert not info.value.op.name.startswith("second_write/")


@pytest.mark.usefixtures("graph")
def test_read_twice_message_suggests_clear_after_read():
    ta = df.TensorArray(df.float32, size=1).write(0, 1.0)
    r = ta.read(0)
    with df.control_dependencies([r]):
        again = ta.read(0, name="second_read")
    with pytest.raises(df.errors.InvalidArgumentError, match="clear_after_read") as info:
        df.Session().run(again)
    assert info.value.op.name == "second_read"


@pytest.mark.usefixtures("graph")
def test_stack_of_empty_array_with_unknown_shape_is_unimplemented():
    with pytest.raises(df.errors.UnimplementedError, match="size zero") as info:
        df.Session().run(df.TensorArray(df.float32, size=0).stack())
    assert info.value.op.type == "TensorArrayGatherV3"


@pytest.mark.usefixtures("graph")
def test_build_time_mismatches_are_value_errors():
    ta = df.TensorArray(df.float32, size=2, element_shape=[3])
    with pytest.raises(ValueError, match="Inconsistent shapes"):
        ta.write(0, [1.0, 2.0])
    with pytest.raises(ValueError, match="dtype is float32 but Op is trying to write dtype "
                                         "int32"):
        ta.write(0, df.constant([1, 2, 3]))
    with pytest.raises(ValueError, match="Inconsistent shapes"):
        ta.unstack(df.zeros([4, 2]))
    with pytest.raises(ValueError, match="Size must be provided"):
        df.TensorArray(df.float32)


@pytest.mark.usefixtures("graph")
def test_dtype_mismatch_found_when_running_names_the_read():
    ta = df.TensorArray(df.float32, size=1).write(0, 1.0)
    other = df.TensorArray(df.int32, handle=ta.handle, flow=ta.flow)
    r = other.read(0, name="int_read")
    with pytest.raises(df.errors.InvalidArgumentError,
                       match="TensorArray dtype is float32 but Op requested dtype int32") as e:
        df.Session().run(r)
    assert e.value.op.name == "int_read"


# -- shapes, steps, devices ---------------------------------------------------------------------
@pytest.mark.usefixtures("graph")
def test_static_shapes_follow_writes_and_element_shape():
    ta = df.TensorArray(df.float32, size=3)
    assert ta.element_shape.ndims is None
    w = ta.write(0, df.zeros([2, 5]))
    assert w.element_shape == df.TensorShape([2, 5])
    assert ta.element_shape == df.TensorShape([2, 5])  # shared by every copy
    assert w.read(1).shape == df.TensorShape([2, 5])
    assert w.stack().shape == df.TensorShape([3, 2, 5])
    assert w.concat().shape.as_list() == [None, 5]
    _, loop_ta = df.while_loop(lambda i, t: i < 3, lambda i, t: (i + 1, t.write(i, df.ones([4]))),
                               [0, df.TensorArray(df.float32, size=3)])
    assert isinstance(loop_ta, df.TensorArray)
    assert loop_ta.stack().shape == df.TensorShape([3, 4])


@pytest.mark.usefixtures("graph")
def test_each_run_gets_a_fresh_array():
    x = df.placeholder(df.float32, [])
    w = df.TensorArray(df.float32, size=1).write(0, x)
    r = w.read(0)
    sess = df.Session()
    assert sess.run(r, {x: 1.0}) == 1.0
    assert sess.run(r, {x: 2.0}) == 2.0  # not "already written" from the first run


@pytest.mark.usefixtures("graph")
def test_array_lives_with_its_first_write_and_is_used_on_two_devices():
    """colocate_with_first_write_call puts the array on /cpu:1; a read placed on /cpu:0
    and the gradient reach it across devices and agree with the single-device run."""
    def build():
        x = df.placeholder(df.float32, [3], name="x")
        ta = df.TensorArray(df.float32, size=2)
        with df.device("/cpu:1"):
            ta = ta.write(0, x * 2.0).write(1, x * x)
        with df.device("/cpu:0"):
            y = df.reduce_sum(ta.stack() * df.constant([[1.0], [3.0]]))
        return x, ta, y, df.gradients(y, [x])[0]

    x, ta, y, g = build()
    assert ta.handle.op.device.endswith("CPU:1")
    value = np.array([1.0, 2.0, -1.0], np.float32)
    config = df.ConfigProto(device_count={"CPU": 2})
    with df.Session(config=config) as sess:
        got = sess.run([y, g], {x: value})
    np.testing.assert_allclose(got[0], np.sum(2 * value + 3 * value ** 2))
    np.testing.assert_allclose(got[1], 2.0 + 6.0 * value)
    ops = df.get_default_graph().get_operations()
    assert all(op.device.endswith("CPU:1") for op in ops if op.type.startswith("TensorArray")
               and op.type != "TensorArrayV3" or op is ta.handle.op)
    assert [op.device for op in ops if op.type == "Mul" and op.name.startswith("mul")][-1] \
        .endswith("CPU:0")


@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_array_made_on_one_device_and_written_from_another(mode):
    """The handle is placed on /cpu:0 (no colocation with the first write); the written
    value comes from /cpu:1. Every access runs where the array lives, in both the
    threaded and the multi-process partitioned runs."""
    with df.Graph().as_default():
        x = df.placeholder(df.float32, [3])
        with df.device("/cpu:0"):
            ta = df.TensorArray(df.float32, size=2, colocate_with_first_write_call=False)
        with df.device("/cpu:1"):
            v = x * 2.0
        ta = ta.write(0, v).write(1, v * v)
        y = df.reduce_sum(ta.stack())
        g, = df.gradients(y, [x])
        value = np.array([1.0, 2.0, -1.0], np.float32)
        config = df.ConfigProto(partition_mode=mode, device_count={"CPU": 2})
        with df.Session(config=config) as sess:
            got_y, got_g = sess.run([y, g], {x: value})
    np.testing.assert_allclose(got_y, np.sum(2 * value + 4 * value ** 2))
    np.testing.assert_allclose(got_g, 2.0 + 8.0 * value)


@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_loop_and_its_gradient_reach_an_array_on_another_device(mode):
    """Every TensorArray op, the gradient loop's included, runs on the array's device
    (/cpu:1), while the loop's arithmetic runs on /cpu:0."""
    with df.Graph().as_default() as g:
        x = df.placeholder(df.float32, [2])
        with df.device("/cpu:1"):
            ta = df.TensorArray(df.float32, size=3, colocate_with_first_write_call=False)
        with df.device("/cpu:0"):
            def body(i, v, t):
                v = v * x + 1.0
                return i + 1, v, t.write(i, v)
            _, _, ta = df.while_loop(lambda i, v, t: i < 3, body, [0, x, ta])
            y = df.reduce_sum(ta.stack() * df.constant([[1.0], [2.0], [3.0]]))
            grad, = df.gradients(y, [x])
        ta_ops = [op for op in g.get_operations() if op.type.startswith("TensorArray")]
        assert {op.type for op in ta_ops} >= {"TensorArrayV3", "TensorArrayGradV3",
                                              "TensorArrayWriteV3", "TensorArrayReadV3",
                                              "TensorArrayGatherV3", "TensorArrayScatterV3"}
        assert all(op.device.endswith("CPU:1") for op in ta_ops), \
            [(op.name, op.device) for op in ta_ops if not op.device.endswith("CPU:1")]
        value = np.array([0.5, -1.5], np.float32)
        config = df.ConfigProto(partition_mode=mode, device_count={"CPU": 2})
        with df.Session(config=config) as sess:
            got_y, got_g = sess.run([y, grad], {x: value})
    v1 = value * value + 1.0
    v2 = v1 * value + 1.0
    v3 = v2 * value + 1.0
    np.testing.assert_allclose(got_y, np.sum(v1 + 2 * v2 + 3 * v3), rtol=1e-6)
    dv1 = 2 * value
    dv2 = dv1 * value + v1
    dv3 = dv2 * value + v2
    np.testing.assert_allclose(got_g, dv1 + 2 * dv2 + 3 * dv3, rtol=1e-6)
