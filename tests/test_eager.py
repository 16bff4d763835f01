"""Eager mode: ops run when created and return EagerTensors (issue 11, section 1)."""
import pickle
import threading

import numpy as np
import pytest

import dataflow as df
from dataflow.framework import eager as eager_impl


@pytest.fixture
def eager():
    """Each test runs in a fresh eager graph (its own variables and kernel cache)."""
    with eager_impl.EagerGraph().as_default() as g:
        yield g


def test_graph_mode_is_the_default_and_eager_mode_is_scoped():
    assert not df.executing_eagerly()
    with df.eager_mode():
        assert df.executing_eagerly()
        with df.Graph().as_default():        # a graph block inside eager mode builds a graph
            assert not df.executing_eagerly()
            assert isinstance(df.constant(1.0), df.Tensor)
            assert not isinstance(df.constant(1.0), df.EagerTensor)
        assert df.executing_eagerly()
    assert not df.executing_eagerly()


def test_eager_mode_is_per_thread():
    seen = []
    with df.eager_mode():
        t = threading.Thread(target=lambda: seen.append(df.executing_eagerly()))
        t.start()
        t.join()
    assert seen == [False]


def test_ops_run_at_once_and_return_values(eager, rng):
    a_np = rng.standard_normal((3, 4)).astype(np.float32)
    b_np = rng.standard_normal((4, 2)).astype(np.float32)
    a, b = df.constant(a_np), df.constant(b_np)
    y = df.nn.relu(df.matmul(a, b)) + 1.0
    assert isinstance(y, df.EagerTensor)
    np.testing.assert_allclose(y.numpy(), np.maximum(a_np @ b_np, 0) + 1.0, rtol=1e-5,
                               atol=1e-6)
    assert y.shape.as_list() == [3, 2]
    assert y.dtype is df.float32
    assert y.device == "/job:localhost/replica:0/task:0/device:CPU:0"
    assert y.op.type == "AddV2"


def test_python_protocol(eager):
    t = df.constant([[1, 2], [3, 4]])
    assert len(t) == 2
    rows = list(t)
    assert [r.numpy().tolist() for r in rows] == [[1, 2], [3, 4]]
    assert all(isinstance(r, df.EagerTensor) for r in rows)
    s = df.reduce_sum(t)
    assert int(s) == 10 and float(s) == 10.0 and [0, 1, 2][df.constant(1)] == 1
    assert bool(df.constant(True)) and not bool(df.constant(0.0))
    assert "numpy=" in repr(s) and "10" in repr(s)
    assert "10" in str(s) and f"{df.constant(1.25):.1f}" == "1.2"
    np.testing.assert_array_equal(np.asarray(t), [[1, 2], [3, 4]])
    assert np.asarray(t, dtype=np.float64).dtype == np.float64
    assert (-t).numpy().tolist() == [[-1, -2], [-3, -4]]
    assert (t @ t).numpy().tolist() == [[7, 10], [15, 22]]
    assert (2 * t - 1).numpy().tolist() == [[1, 3], [5, 7]]
    assert (t > 2).numpy().tolist() == [[False, False], [True, True]]
    assert t[1, 0].numpy() == 3 and t[:, 1].numpy().tolist() == [2, 4]
    assert (np.float32(2) * df.constant(3.0)).numpy() == 6.0   # NumPy defers to us
    with pytest.raises(TypeError):
        len(s)
    with pytest.raises(TypeError):
        [0, 1][df.constant(1.0)]                 # only integer tensors index
    with pytest.raises(ValueError):
        bool(t)                                  # ambiguous, as NumPy
    restored = pickle.loads(pickle.dumps(t))
    assert restored.numpy().tolist() == [[1, 2], [3, 4]] and restored.dtype is df.int32


def test_numpy_returns_a_copy(eager):
    t = df.constant([1.0, 2.0])
    v = t.numpy()
    v[0] = 9.0
    assert t.numpy().tolist() == [1.0, 2.0]


def test_scikit_learn_accepts_eager_tensors(eager, rng):
    from sklearn.linear_model import LinearRegression
    from sklearn.metrics import f1_score
    x_np = rng.standard_normal((20, 3))
    x = df.constant(x_np)
    y = df.matmul(x, df.constant([[1.0], [-2.0], [0.5]], dtype=df.float64))[:, 0] + 3.0
    model = LinearRegression().fit(x, y)
    np.testing.assert_allclose(model.coef_, [1.0, -2.0, 0.5], atol=1e-9)
    pred = df.cast(df.constant(x_np[:, 0]) > 0, df.int32)
    assert f1_score(pred, pred) == 1.0


def test_variables_work_eagerly(eager):
    v = df.Variable([1.0, 2.0], name="v")
    assert v.numpy().tolist() == [1.0, 2.0]
    out = v.assign_add([1.0, 1.0])
    assert out.numpy().tolist() == [2.0, 3.0] and v.numpy().tolist() == [2.0, 3.0]
    v.assign([5.0, 6.0])
    v.assign_sub([1.0, 1.0])
    assert (v * 2.0).numpy().tolist() == [8.0, 10.0]
    w = df.Variable(0.0, name="v")          # a second variable of that name is another one
    assert w.name == "v_1:0"
    w.assign_add(1.0)
    assert float(w) == 1.0 and v.numpy().tolist() == [4.0, 5.0]
    with pytest.raises(ValueError):
        v.assign([1.0, 2.0, 3.0])


def test_get_variable_and_initializers_eagerly(eager):
    df.set_random_seed(1)
    with df.variable_scope("layer"):
        w = df.get_variable("w", [3, 2], initializer=df.glorot_uniform_initializer())
        b = df.get_variable("b", [2], initializer=df.zeros_initializer())
    assert w.name == "layer/w:0" and w.numpy().shape == (3, 2)
    assert np.all(np.abs(w.numpy()) <= np.sqrt(6 / 5)) and b.numpy().tolist() == [0.0, 0.0]


def test_errors_are_dataflow_errors(eager):
    with pytest.raises(df.errors.InvalidArgumentError):
        df.matmul(df.ones([2, 3]), df.ones([2, 3]))
    for _ in range(2):                     # the cached signature reports the same class
        with pytest.raises(df.errors.InvalidArgumentError) as info:
            df.matmul(df.ones([2, 3]), df.ones([4, 3]))
        assert info.value.op.type == "MatMul"
    with pytest.raises(df.errors.InvalidArgumentError):
        df.gather(df.constant([1.0, 2.0]), 5)
    with pytest.raises(TypeError):           # build-time dtype errors are TypeErrors, as
        df.add(df.constant(1), df.constant(1.0))   # in graph mode
    with pytest.raises(df.errors.InvalidArgumentError):
        df.Assert(df.constant(False), ["no"])
    with pytest.raises(ValueError):
        df.reshape(df.ones([2, 3]), [4])


def test_graph_tensors_cannot_enter_eager_ops():
    with df.Graph().as_default():
        p = df.placeholder(df.float32)
    with df.eager_mode():
        with pytest.raises(ValueError, match="belongs to a graph"):
            df.add(p, df.constant(1.0))


def test_kernel_cache_is_per_signature(eager):
    a, b = df.constant(1.0), df.constant(2.0)
    for _ in range(3):
        a + b
    keys = [k for k in eager._kernels if k[0] == "AddV2"]
    assert keys == [("AddV2", id(df.float32), id(df.float32))]
    df.constant(1) + df.constant(2)
    assert len([k for k in eager._kernels if k[0] == "AddV2"]) == 2


def test_executed_ops_drop_their_inputs_when_nothing_records(eager):
    y = df.constant(1.0) + 2.0
    assert y.op.inputs == ()


def test_random_ops_advance_eagerly(eager):
    df.set_random_seed(3)
    a = df.random_normal([4], seed=1).numpy()
    b = df.random_normal([4], seed=1).numpy()
    assert not np.array_equal(a, b)


def test_the_eager_benchmark_runs():
    from benchmarks import eager as bench
    rows = bench.measure(calls=5, samples=3, mlp_steps=5)
    names = [name for name, _, _ in rows]
    assert names[0] == "x + y, scalar" and len(rows) == 7
    assert all(median >= best > 0 for _, (median, best), _ in rows)
    assert "eager median" in bench.format_rows(rows)


def test_enable_eager_execution_makes_the_whole_program_eager():
    import subprocess
    import sys
    code = (
        "import threading, dataflow as df\n"
        "df.enable_eager_execution()\n"
        "seen = []\n"
        "t = threading.Thread(target=lambda: seen.append(df.executing_eagerly()))\n"
        "t.start(); t.join()\n"
        "df.reset_default_graph()\n"
        "v = df.Variable(2.0)\n"
        "print(df.executing_eagerly(), seen[0], float(v * 3.0))\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True, cwd=str(__import__("pathlib").Path(__file__).parent.parent))
    assert out.stdout.split() == ["True", "True", "6.0"]


def test_enable_eager_execution_refuses_a_started_graph():
    g = df.Graph()
    from dataflow.framework import graph as graph_module
    saved = graph_module._global_default_graph[0]
    graph_module._global_default_graph[0] = g
    try:
        with g.as_default():
            df.constant(1.0)
        with pytest.raises(ValueError, match="startup"):
            df.enable_eager_execution()
    finally:
        graph_module._global_default_graph[0] = saved


@pytest.mark.parametrize("fn", [
    lambda a, b: a + b, lambda a, b: a - b, lambda a, b: a * b, lambda a, b: a / b,
    lambda a, b: a ** b, lambda a, b: a < b, lambda a, b: a >= b, lambda a, b: b.__radd__(a),
    lambda a, b: b.__rsub__(a), lambda a, b: b.__rtruediv__(a), lambda a, b: a // b,
    lambda a, b: a % b], ids=["add", "sub", "mul", "div", "pow", "lt", "ge", "radd", "rsub",
                              "rtruediv", "floordiv", "mod"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64])
def test_operators_build_what_the_graph_builds(fn, dtype, rng):
    """The operators that skip their wrapper in eager mode give the graph's op type,
    node name, dtype and value."""
    a_np = rng.uniform(1, 3, 5).astype(dtype)
    b_np = rng.uniform(1, 3, 5).astype(dtype)
    with df.Graph().as_default():
        out = fn(df.constant(a_np), df.constant(b_np))
        with df.Session() as sess:
            want = sess.run(out)
    with df.eager_mode():
        got = fn(df.constant(a_np), df.constant(b_np))
    assert (got.op.type, got.op.name) == (out.op.type, out.op.name.split("/")[-1])
    assert got.dtype is out.dtype
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


def test_a_long_eager_loop_collects_no_names_and_no_kernels(eager):
    """Eager name scopes are not made unique, so steps of a training loop (which open
    name scopes) leave nothing behind; layers and variables still get unique names."""
    x = df.constant(np.ones((2, 3), np.float32))
    h1 = df.layers.dense(x, 4)
    h2 = df.layers.dense(x, 4)
    names = [v.name for v in df.trainable_variables()]
    assert names == ["dense/kernel:0", "dense/bias:0", "dense_1/kernel:0", "dense_1/bias:0"]
    assert h1.shape.as_list() == h2.shape.as_list() == [2, 4]
    w = df.Variable(np.ones((3, 1), np.float32), name="w")
    opt = df.train.AdamOptimizer(0.1)

    def step():
        with df.GradientTape() as tape:
            loss = df.reduce_mean(df.square(df.matmul(x, w)))
        opt.apply_gradients(zip(tape.gradient(loss, [w]), [w]))

    step()
    sizes = (len(eager._names_in_use), len(eager._kernels))
    for _ in range(5):
        step()
    assert (len(eager._names_in_use), len(eager._kernels)) == sizes


@pytest.mark.parametrize("fn", [
    lambda a: a + 2, lambda a: 2 + a, lambda a: a - 1.5, lambda a: 3 - a, lambda a: a * 2,
    lambda a: a / 4, lambda a: 4 / a, lambda a: a ** 2, lambda a: 2 ** a, lambda a: a < 2,
    lambda a: a >= 1.5, lambda a: a + True],
    ids=["add", "radd", "sub", "rsub", "mul", "div", "rdiv", "pow", "rpow", "lt", "ge",
         "bool"])
@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.float64])
def test_operators_with_python_numbers_build_what_the_graph_builds(fn, dtype, rng):
    a_np = rng.uniform(1, 3, 4).astype(dtype)
    with df.Graph().as_default():
        try:
            out = fn(df.constant(a_np))
        except TypeError:                      # e.g. 1.5 into int32: the same error eagerly
            with df.eager_mode(), pytest.raises(TypeError):
                fn(df.constant(a_np))
            return
        want = df.Session().run(out)
    with df.eager_mode():
        got = fn(df.constant(a_np))
    assert (got.op.type, got.op.name, got.dtype) == (out.op.type, out.op.name, out.dtype)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-6)


def test_python_number_constants_keep_their_sign_and_checks(eager):
    assert np.signbit(df.constant(-0.0).numpy()) and not np.signbit(df.constant(0.0).numpy())
    assert np.isnan(df.constant(float("nan")).numpy())
    assert df.constant(1, dtype=df.float64).dtype is df.float64
    assert df.constant(True).dtype is df.bool and df.constant(1).dtype is df.int32
    with pytest.raises(TypeError):
        df.constant(1.5, dtype=df.int32)
    with pytest.raises(TypeError):
        df.constant(2 ** 40, dtype=df.int32)


@pytest.mark.parametrize("dtype", [df.int32, df.int64])
def test_short_integer_lists_convert_as_the_general_path_does(dtype):
    """Shape and axis lists of Python ints take a fast path in convert_value: the same
    arrays and the same errors as NumPy's checked conversion."""
    from dataflow.framework.convert import convert_value
    info = np.iinfo(dtype.as_numpy_dtype)
    for value in ([], [3], (4, -1, 8), [info.min, 0, info.max], list(range(16)),
                  [True, 2], [np.int64(5), 6], list(range(17))):
        got = convert_value(value, dtype)
        want = np.asarray(value).astype(dtype.as_numpy_dtype)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_array_equal(got, want)
    for bad in ([info.max + 1], (info.min - 1, 0), [1.5, 2]):
        with pytest.raises(TypeError):
            convert_value(bad, dtype)
