"""The graph-building API: Tensor and Operation objects, Python operators, naming and
name scopes, control dependencies, devices, default graphs, dtypes, TensorShape and
constant conversion."""
from __future__ import annotations

import numpy as np
import pytest

import dataflow as df

from .op_harness import run


# -- Tensor ------------------------------------------------------------------------------------

def test_tensor_properties(graph):
    x = df.placeholder(df.float32, shape=[None, 3], name="x")
    assert x.name == "x:0"
    assert x.op.name == "x" and x.op.type == "Placeholder"
    assert x.value_index == 0
    assert x.dtype == df.float32 and x.dtype is df.float32
    assert isinstance(x.shape, df.TensorShape)
    assert x.shape.as_list() == [None, 3]
    assert x.get_shape() == x.shape
    assert x.shape.ndims == 2 and not x.shape.is_fully_defined()
    assert x.graph is graph
    assert x.device == ""
    y = x * 2.0
    assert y.op.inputs[0] is x
    assert y.op in x.consumers()


def test_placeholder_shapes(graph):
    assert df.placeholder(df.float32).shape.ndims is None
    assert df.placeholder(df.float32, shape=[]).shape.as_list() == []
    assert df.placeholder(df.int32, shape=(2, None)).shape.as_list() == [2, None]
    assert df.placeholder(df.int32, shape=df.TensorShape([4])).shape.as_list() == [4]


def test_set_shape_refines_and_rejects(graph):
    x = df.placeholder(df.float32, shape=[None, 3])
    x.set_shape([5, None])
    assert x.shape.as_list() == [5, 3]
    with pytest.raises(ValueError):
        x.set_shape([4, 3])


def test_tensor_is_hashable_by_identity_and_not_a_python_bool(graph):
    x = df.constant(1.0)
    y = df.constant(1.0)
    assert x == x and x != y and hash(x) != hash(y)
    assert {x: 1, y: 2}[x] == 1
    with pytest.raises(TypeError):
        bool(x)
    with pytest.raises(TypeError):
        iter(df.constant([1, 2]))
    with pytest.raises(TypeError):
        len(df.constant([1, 2]))


def test_operators_match_numpy(graph):
    a_val = np.array([[1.5, -2.0], [3.0, 4.0]], np.float32)
    b_val = np.array([[2.0, 0.5], [-1.0, 2.0]], np.float32)
    a = df.placeholder(df.float32, [2, 2])
    b = df.constant(b_val)
    cases = [
        (a + b, a_val + b_val), (a - b, a_val - b_val), (a * b, a_val * b_val),
        (a / b, a_val / b_val), (abs(a) ** b, np.abs(a_val) ** b_val), (-a, -a_val),
        (a @ b, a_val @ b_val), (a < b, a_val < b_val), (a <= b, a_val <= b_val),
        (a > b, a_val > b_val), (a >= b, a_val >= b_val), (a // b, a_val // b_val),
        (a % b, a_val % b_val), (abs(a), np.abs(a_val)),
        (2 - a, 2 - a_val), (1 / b, 1 / b_val), (2 ** b, 2 ** b_val),
        (b_val @ a, b_val @ a_val), (np.float32(2) * a, 2 * a_val),
        (np.float64(0.5) - a, 0.5 - a_val), (np.ones(2, np.float32) + a, 1 + a_val),
        (1 < a, 1 < a_val),
    ]
    results = run([t for t, _ in cases], {a: a_val})
    for (t, expected), out in zip(cases, results):
        assert t.dtype.as_numpy_dtype == np.asarray(expected).dtype.type, t
        np.testing.assert_allclose(out, expected, rtol=1e-6, err_msg=t.name)


def test_logical_operators(graph):
    p = df.constant([True, True, False, False])
    q = df.placeholder(df.bool, [4])
    q_val = np.array([True, False, True, False])
    outs = run([p & q, p | q, ~p, True & q, False | q], {q: q_val})
    np.testing.assert_array_equal(outs[0], [True, False, False, False])
    np.testing.assert_array_equal(outs[1], [True, True, True, False])
    np.testing.assert_array_equal(outs[2], [False, False, True, True])
    np.testing.assert_array_equal(outs[3], q_val)
    np.testing.assert_array_equal(outs[4], q_val)


def test_numpy_scalar_on_the_left_keeps_the_tensor_dtype(graph):
    t = df.constant([1.0, 2.0])
    for expr in (np.float32(2) * t, np.float64(2) * t, np.int64(2) * t, np.float32(2) + t):
        assert isinstance(expr, df.Tensor) and expr.dtype == df.float32
    np.testing.assert_array_equal(run(np.float32(2) * t), [2.0, 4.0])


def test_indexing_forms(graph):
    val = np.arange(12, dtype=np.int64).reshape(3, 4)
    x = df.placeholder(df.int64, [None, 4])
    i = df.placeholder(df.int32, [])
    cases = [(x[1], val[1]), (x[-1], val[-1]), (x[1:3], val[1:3]), (x[:, 1], val[:, 1]),
             (x[..., 0], val[..., 0]), (x[None], val[None]), (x[i], val[2]),
             (x[::2, ::-1], val[::2, ::-1]), (x[1, 2], val[1, 2]), (x[i, -1], val[2, -1])]
    assert x[:, 1].shape.as_list() == [None]
    assert x[None].shape.as_list() == [1, None, 4]
    assert x[i].shape.as_list() == [4]
    outs = run([t for t, _ in cases], {x: val, i: 2})
    for (t, expected), out in zip(cases, outs):
        np.testing.assert_array_equal(out, expected)
        assert t.shape.is_compatible_with(np.shape(out))


# -- Operation ---------------------------------------------------------------------------------

def test_operation_properties(graph):
    a = df.constant(1.0, name="a")
    b = df.placeholder(df.float32, [], name="b")
    c = df.add(a, b, name="c")
    op = c.op
    assert op.name == "c" and op.type == "AddV2"
    assert op.inputs == (a, b)
    assert op.outputs == [c]
    assert op.control_inputs == []
    assert op.device == ""
    assert op.graph is graph
    assert a.op.get_attr("dtype") == df.float32
    assert graph.get_operation_by_name("c") is op
    assert graph.get_tensor_by_name("c:0") is c
    with pytest.raises(ValueError):
        op.get_attr("no_such_attr")


def test_get_attr_of_various_ops(graph):
    x = df.placeholder(df.float32, [None, 3], name="x")
    assert x.op.get_attr("shape").as_list() == [None, 3]
    assert df.cast(x, df.int32).op.get_attr("DstT") == df.int32
    m = df.matmul(x, df.ones([3, 2]), transpose_a=False)
    assert m.op.get_attr("transpose_a") is False and m.op.get_attr("transpose_b") is False
    s = df.reduce_sum(x, axis=1, keepdims=True)
    assert s.op.get_attr("keep_dims") is True and s.op.get_attr("axis") == 1


def test_multi_output_op(graph):
    logits = df.constant([[1.0, 2.0]])
    loss = df.nn.softmax_cross_entropy_with_logits(labels=[[0.0, 1.0]], logits=logits)
    op = loss.op
    assert len(op.outputs) == 2
    assert [t.name for t in op.outputs] == [f"{op.name}:0", f"{op.name}:1"]
    assert op.outputs[1].shape.as_list() == [1, 2]


# -- names -------------------------------------------------------------------------------------

def test_unique_names_get_tf_suffixes(graph):
    x = df.constant(1.0)
    names = [(x + x).op.name, (x + x).op.name, df.add(x, x).op.name]
    assert names == ["add", "add_1", "add_2"]
    assert x.op.name == "Const" and df.constant(2.0).op.name == "Const_1"
    assert (x * x).op.name == "mul" and (x - x).op.name == "sub"
    assert (x / x).op.name == "truediv"
    assert df.identity(x, name="foo").op.name == "foo"
    assert df.identity(x, name="foo").op.name == "foo_1"
    # An explicit name that collides with a generated suffix moves on to the next one.
    assert df.identity(x, name="foo_2").op.name == "foo_2"
    assert df.identity(x, name="foo").op.name == "foo_3"


def test_names_are_unique_per_graph():
    for _ in range(2):
        with df.Graph().as_default():
            assert df.constant(1).op.name == "Const"


def test_invalid_op_name_raises(graph):
    with pytest.raises(ValueError):
        df.identity(df.constant(1), name="bad name!")


def test_name_scopes(graph):
    x = df.placeholder(df.float32, [], name="x")
    with df.name_scope("outer") as scope:
        assert scope == "outer/"
        a = df.identity(x)
        with df.name_scope("inner"):
            b = x + 1.0
            c = df.identity(x, name="named")
    with df.name_scope("outer") as scope2:
        d = df.identity(x)
    with df.name_scope("outer/"):  # a trailing slash re-enters the scope verbatim
        e = df.identity(x)
    assert a.op.name == "outer/Identity"
    assert b.op.name == "outer/inner/add"
    assert b.op.inputs[1].op.name.startswith("outer/inner/")
    assert c.op.name == "outer/inner/named"
    assert scope2 == "outer_1/" and d.op.name == "outer_1/Identity"
    assert e.op.name == "outer/Identity_1"
    assert graph.get_name_scope() == ""


def test_name_scope_none_resets_to_the_top(graph):
    with df.name_scope("outer"):
        with df.name_scope(None):
            assert df.constant(1).op.name == "Const"


# -- control dependencies, group, no_op --------------------------------------------------------

def test_control_dependencies_are_recorded(graph):
    a = df.constant(1.0)
    b = df.constant(2.0)
    with df.control_dependencies([a, b.op]):
        c = df.identity(a)
        with df.control_dependencies([c]):
            d = df.constant(3.0)
        with df.control_dependencies(None):
            e = df.constant(4.0)
    assert c.op.control_inputs == [b.op]  # a is already a data input: no duplicate edge
    assert set(d.op.control_inputs) == {a.op, b.op, c.op}
    assert e.op.control_inputs == []


def test_control_dependencies_order_execution(graph):
    v = df.Variable(0)
    with df.control_dependencies([v.assign(7)]):
        after = v.read_value()
    with df.Session() as sess:
        sess.run(v.initializer)
        assert sess.run(after) == 7


def test_group_and_no_op(graph):
    v = df.Variable(1.0)
    w = df.Variable(2.0)
    inc_v, inc_w = v.assign_add(1.0), w.assign_add(10.0)
    g = df.group(inc_v, inc_w.op, name="both")
    assert g.type == "NoOp" and g.name == "both" and g.outputs == []
    assert set(g.control_inputs) == {inc_v.op, inc_w.op}
    n = df.no_op()
    assert n.type == "NoOp" and n.inputs == () and n.outputs == []
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        assert sess.run(g) is None
        assert sess.run(n) is None
        assert sess.run([v, w]) == [2.0, 12.0]


# -- devices -----------------------------------------------------------------------------------

def test_device_is_recorded_in_canonical_form(graph):
    with df.device("/cpu:1"):
        a = df.constant(1.0)
        with df.device("/device:CPU:0"):
            b = a + 1.0
        c = a * 2.0
    d = df.constant(2.0)
    assert a.op.device == "/device:CPU:1" and a.device == "/device:CPU:1"
    assert b.op.device == "/device:CPU:0"
    assert c.op.device == "/device:CPU:1"
    assert d.op.device == ""
    np.testing.assert_allclose(run([b, c]), [2.0, 2.0])


# -- default graphs ----------------------------------------------------------------------------

def test_graph_as_default_and_get_default_graph():
    g1, g2 = df.Graph(), df.Graph()
    with g1.as_default():
        assert df.get_default_graph() is g1
        with g2.as_default():
            assert df.get_default_graph() is g2
            t = df.constant(1)
        assert df.get_default_graph() is g1
    assert t.graph is g2 and t.op in g2.get_operations()
    assert g1.get_operations() == []


def test_reset_default_graph():
    df.reset_default_graph()
    g = df.get_default_graph()
    df.constant(1.0)
    assert len(g.get_operations()) == 1
    df.reset_default_graph()
    assert df.get_default_graph() is not g
    assert df.get_default_graph().get_operations() == []
    with df.Graph().as_default():
        with pytest.raises(AssertionError):
            df.reset_default_graph()


def test_tensors_from_different_graphs_cannot_be_combined():
    with df.Graph().as_default():
        a = df.constant(1.0)
    with df.Graph().as_default():
        with pytest.raises(ValueError):
            a + df.constant(2.0)


# -- dtypes ------------------------------------------------------------------------------------

@pytest.mark.parametrize("value,expected", [
    (df.float32, df.float32), ("float32", df.float32), ("float", df.float32),
    ("double", df.float64), (np.float32, df.float32), (np.dtype("float64"), df.float64),
    (np.int32, df.int32), (np.int64, df.int64), (np.bool_, df.bool), (bool, df.bool),
    (float, df.float32), (int, df.int32), (np.uint8, df.uint8), (np.int8, df.int8),
    (np.int16, df.int16), (np.float16, df.float16), (str, df.string)])
def test_as_dtype(value, expected):
    assert df.as_dtype(value) is expected


@pytest.mark.parametrize("value", [None, "floaty", np.complex64, object(), [1]])
def test_as_dtype_rejects_unknown(value):
    with pytest.raises(TypeError):
        df.as_dtype(value)


def test_dtype_properties():
    assert df.float32.as_numpy_dtype is np.float32
    assert df.float32.is_floating and not df.float32.is_integer
    assert df.int64.is_integer and df.int64.is_numeric and not df.int64.is_floating
    assert df.bool.is_bool and not df.bool.is_numeric
    assert df.int32.min == -2 ** 31 and df.int32.max == 2 ** 31 - 1
    assert df.float32.max == np.finfo(np.float32).max
    assert df.float32 == np.float32 and df.float32 == "float32" and df.float32 != df.float64
    assert df.float32 != None  # noqa: E711 - comparing with None must not raise
    assert df.float32.name == "float32" and repr(df.int8) == "df.int8"


@pytest.mark.parametrize("dtype_arg,expected", [
    (np.float32, df.float32), (float, df.float32), ("int64", df.int64), (np.bool_, df.bool),
    (int, df.int32), (np.dtype("float64"), df.float64)])
def test_placeholder_constant_and_cast_accept_dtype_likes(graph, dtype_arg, expected):
    p = df.placeholder(dtype_arg, [2])
    c = df.constant([1, 0], dtype=dtype_arg)
    cast = df.cast(df.constant([1.0, 0.0]), dtype_arg)
    assert p.dtype is expected and c.dtype is expected and cast.dtype is expected
    outs = run([p, c, cast], {p: np.array([1, 0], expected.as_numpy_dtype)})
    for out in outs:
        assert out.dtype == expected.as_numpy_dtype
        np.testing.assert_array_equal(out, [1, 0])


# -- constants and conversion ------------------------------------------------------------------

@pytest.mark.parametrize("value,dtype", [
    (1, df.int32), (1.5, df.float32), (True, df.bool), ([1, 2], df.int32),
    ([1.0, 2], df.float32), (2 ** 40, df.int64), (np.float64(1.5), df.float64),
    (np.array([1, 2], np.int16), df.int16), ([], df.float32), ([[True], [False]], df.bool)])
def test_constant_dtype_inference(graph, value, dtype):
    t = df.constant(value)
    assert t.dtype is dtype
    assert t.shape.as_list() == list(np.shape(value))
    out = run(t)
    assert out.dtype == dtype.as_numpy_dtype
    np.testing.assert_array_equal(out, np.asarray(value, dtype.as_numpy_dtype))


def test_constants_round_to_float_dtypes(graph):
    """``constant(0.1)`` is float32(0.1): rounding to a float dtype loses nothing TF cares
    about (it is how every decimal literal becomes float32)."""
    values = [0.1, -1.7, 1e-3, 16777217, 1 / 3]
    t = df.constant(values)
    t64 = df.constant(values, dtype=df.float64)
    assert t.dtype is df.float32
    out, out64 = run([t, t64])
    np.testing.assert_array_equal(out, np.array(values, np.float32))
    np.testing.assert_array_equal(out64, np.array(values, np.float64))
    assert run(df.constant(0.1)) == np.float32(0.1)


def test_constant_rejects_lossy_integer_conversions(graph):
    with pytest.raises(TypeError):
        df.constant(1.5, dtype=df.int32)
    with pytest.raises(TypeError):
        df.constant(2 ** 40, dtype=df.int32)
    with pytest.raises(TypeError):
        df.constant(-1, dtype=df.uint8)
    with pytest.raises(TypeError):
        df.constant("a", dtype=df.float32)
    assert run(df.constant(2.0, dtype=df.int32)) == 2


def test_constant_with_shape(graph):
    np.testing.assert_array_equal(run(df.constant(7, shape=[2, 3])), np.full((2, 3), 7))
    np.testing.assert_array_equal(run(df.constant([1, 2, 3, 4], shape=[2, 2])),
                                  [[1, 2], [3, 4]])
    with pytest.raises(TypeError):
        df.constant([1, 2, 3], shape=[2, 2])


def test_feeding_float64_into_float32_placeholder_rounds(graph):
    x = df.placeholder(df.float32, [2])
    out = run(x * 1.0, {x: np.array([0.1, 1 / 3])})
    assert out.dtype == np.float32
    np.testing.assert_array_equal(out, np.array([0.1, 1 / 3], np.float32))


def test_convert_to_tensor(graph):
    x = df.placeholder(df.float32, [])
    assert df.convert_to_tensor(x) is x
    with pytest.raises(TypeError):
        df.convert_to_tensor(x, dtype=df.int32)
    t = df.convert_to_tensor([1, 2], dtype=df.float64)
    assert t.dtype is df.float64
    assert df.convert_to_tensor(3, preferred_dtype=df.int64).dtype is df.int64
    # The preferred dtype is only a hint: 1.5 cannot be int64, so it stays float32.
    assert df.convert_to_tensor(1.5, preferred_dtype=df.int64).dtype is df.float32
    with pytest.raises(TypeError):
        df.convert_to_tensor(df.no_op())


# -- TensorShape -------------------------------------------------------------------------------

def test_tensor_shape_basics():
    s = df.TensorShape([None, 3])
    assert s.ndims == 2 and s.rank == 2 and len(s) == 2
    assert s.dims == [None, 3] and s.as_list() == [None, 3] and list(s) == [None, 3]
    assert s[1] == 3 and s[0] is None and s[1:].as_list() == [3]
    assert not s.is_fully_defined() and s.num_elements() is None
    assert s.is_compatible_with([5, 3]) and not s.is_compatible_with([5, 4])
    assert not s.is_compatible_with([5, 3, 1])
    assert s.merge_with([5, None]).as_list() == [5, 3]
    with pytest.raises(ValueError):
        s.merge_with([5, 4])
    assert df.TensorShape([2, 3]).num_elements() == 6
    assert df.TensorShape([]).num_elements() == 1
    assert df.TensorShape([2, 3]) == [2, 3] and df.TensorShape([2, 3]) != [3, 2]
    assert str(s) == "(?, 3)"


def test_tensor_shape_unknown_rank():
    u = df.TensorShape(None)
    assert u.ndims is None and u.dims is None and not u.is_fully_defined()
    assert u.is_compatible_with([1, 2, 3]) and u.merge_with([1, 2]).as_list() == [1, 2]
    with pytest.raises(ValueError):
        u.as_list()
    with pytest.raises(ValueError):
        len(u)


def test_tensor_shape_dimension_values():
    assert df.TensorShape([np.int64(2), np.int32(3)]).as_list() == [2, 3]
    assert df.TensorShape([-1, np.int64(-1), 4]).as_list() == [None, None, 4]
    assert isinstance(df.TensorShape([np.int64(2)]).as_list()[0], int)
    with pytest.raises(TypeError):
        df.TensorShape([2.5])
