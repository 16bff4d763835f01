"""Elementwise GPU kernels against the NumPy reference kernels, under the simulator."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

from dataflow.framework.graph import get_default_graph
from dataflow.kernels.cuda.elementwise import BINARY_OPS, UNARY_OPS

from .util import assert_close, run_on_gpu

def _values(shape, dtype, positive=False, rng=None):
    """Values of ``dtype``; drawn from NumPy's global generator (seeded per test by
    tests/conftest.py) unless ``rng`` is given."""
    rng = rng or np.random.default_rng(np.random.randint(0, 2 ** 32, dtype=np.uint64))
    if dtype == np.bool_:
        return rng.random(shape) < 0.5
    if np.dtype(dtype).kind == "i":
        return rng.integers(-9, 10, shape).astype(dtype)
    x = rng.standard_normal(shape) * 3
    return (np.abs(x) + 0.1 if positive else x).astype(dtype)


def _build(op_type):
    def build(*xs):
        return get_default_graph().create_op(op_type, list(xs)).outputs[0]
    return build


_POSITIVE = {"Sqrt", "Rsqrt", "Log", "Reciprocal"}
UNARY_CASES = [(t, dt) for t, dts in UNARY_OPS.items() for dt in dts]


@pytest.mark.parametrize("op_type,dtype", UNARY_CASES)
def test_unary(op_type, dtype):
    x = _values((3, 17), np.dtype(dtype).type, op_type in _POSITIVE)
    got, ref = run_on_gpu(_build(op_type), x)
    assert_close(got, ref)


def test_unary_special_values():
    x = np.array([0.0, -0.0, -1.0, np.inf, -np.inf, np.nan, 100.0, -100.0], np.float32)
    for op_type in ("Log", "Sqrt", "Exp", "Sigmoid", "Tanh", "Relu", "Abs"):
        got, ref = run_on_gpu(_build(op_type), x)
        assert_close(got, ref)


_shapes = st.lists(st.integers(1, 4), min_size=0, max_size=3).map(tuple)


@st.composite
def broadcast_pair(draw):
    """Two shapes that broadcast: the second drops leading dims and sets some to 1."""
    a = draw(_shapes)
    b = list(a[draw(st.integers(0, len(a))):])
    b = tuple(1 if draw(st.booleans()) else d for d in b)
    return (a, b) if draw(st.booleans()) else (b, a)


BINARY_CASES = [(t, dt) for t, dts in BINARY_OPS.items() for dt in dts]


@settings(max_examples=40, deadline=None)
@given(case=st.sampled_from(BINARY_CASES), shapes=broadcast_pair(), seed=st.integers(0, 99))
def test_binary_broadcasting(case, shapes, seed):
    op_type, dtype = case
    rng = np.random.default_rng(seed)
    dt = np.dtype(dtype).type
    if op_type.endswith("Grad"):  # the activation gradients take one shape
        shapes = (shapes[0], shapes[0])
    a = _values(shapes[0], dt, rng=rng)
    b = _values(shapes[1], dt, op_type == "RealDiv", rng=rng)
    got, ref = run_on_gpu(_build(op_type), a, b)
    assert_close(got, ref)


@pytest.mark.parametrize("op_type", ["AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Less"])
def test_binary_with_a_constant_operand(graph, op_type):
    # A folded constant scalar travels as a kernel argument, on either side.
    import dataflow as df
    x = _values((5, 7), np.float32)
    ph = df.placeholder(df.float32, [5, 7])
    with df.device("/gpu:0"):
        left = _build(op_type)(ph, df.constant(np.float32(1.5)))
        right = _build(op_type)(df.constant(np.float32(1.5)), ph)
    with df.Session() as sess:
        got_l, got_r = sess.run([left, right], {ph: x})
    fn = {"AddV2": np.add, "Sub": np.subtract, "Mul": np.multiply, "RealDiv": np.divide,
          "Maximum": np.maximum, "Less": np.less}[op_type]
    assert_close(got_l, fn(x, np.float32(1.5)))
    assert_close(got_r, fn(np.float32(1.5), x))


@pytest.mark.parametrize("src,dst", [(np.float32, np.int32), (np.int32, np.float64),
                                     (np.float64, np.float32), (np.bool_, np.float32),
                                     (np.int64, np.bool_)])
def test_cast(src, dst):
    import dataflow as df
    x = _values((4, 6), src)
    got, ref = run_on_gpu(lambda t: df.cast(t, dst), x)
    assert_close(got, ref)


def test_select_and_add_n_broadcast():
    import dataflow as df
    c = np.random.random((3, 1)) < 0.5
    x = _values((3, 4), np.float32)
    y = _values((4,), np.float32)
    got, ref = run_on_gpu(lambda c_, x_, y_: df.where(c_, x_, y_), c, x, y)
    assert_close(got, ref)
    got, ref = run_on_gpu(lambda *xs: df.add_n(list(xs)), x, x * 2, x * 3)
    assert_close(got, ref)


def test_scalar_results():
    # Host scalars compute on the host; a 0-d boolean result comes back to host memory
    # (Switch predicates); other 0-d device results are fetched as NumPy scalars.
    from dataflow.kernels.cuda.runtime import is_device_value
    import dataflow as df
    from dataflow.kernels.registry import KernelContext, find_kernel
    with df.Graph().as_default():
        a = df.placeholder(df.float32, [])
        with df.device("/gpu:0"):
            less = a < 2.0
            total = df.reduce_sum(df.fill([3], a)) * 1.0
        ctx = KernelContext(op=less.op, device_type="GPU")
        fn = find_kernel(less.op, "GPU")(ctx)
        from dataflow.kernels.cuda.runtime import to_device
        out = fn(to_device(np.float32(1.0)), np.float32(2.0))
        assert not is_device_value(out) and out == np.bool_(True)
        with df.Session() as sess:
            got = sess.run([less, total], {a: 1.5})
    assert type(got[0]) is np.bool_ and got[0]
    assert type(got[1]) is np.float32 and got[1] == 4.5
