"""Math ops against NumPy: elementwise, comparisons, logic, reductions, matmul, cast.

Every test builds its own graph. Inputs reach the op as constants or through
placeholders whose static shape is full, partly unknown or of unknown rank, so
both the kernels and the build-time shape inference are exercised. Each result
is checked for value, dtype and agreement with the op's static shape.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import dataflow as df

from .op_harness import (MODES, assert_within, matmul_bound, reduction_bound, run_op,
                         tolerance)

SETTINGS = settings(max_examples=30, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

FLOATS = [np.float32, np.float64]
INTS = [np.int32, np.int64]
NUMERIC = FLOATS + INTS
# How an input reaches the op; the first two give a fully known static shape.
FULL_MODES = {"constant", "placeholder"}

SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4)
BROADCAST_PAIRS = hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3,
                                                    min_side=1, max_side=4)


# -- helpers -----------------------------------------------------------------------------------

def elements(dtype, lo=-10, hi=10):
    """Element strategy for ``dtype`` in ``[lo, hi]`` (bounds must be exact in float32)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        # Normal floats: sessions read subnormal inputs as zero (flush_denormals, on by default).
        return st.floats(lo, hi, width=dtype.itemsize * 8, allow_nan=False,
                         allow_infinity=False, allow_subnormal=False)
    if dtype.kind == "b":
        return st.booleans()
    return st.integers(int(np.ceil(lo)), int(np.floor(hi)))


def arrays(dtype, shape, lo=-10, hi=10):
    """NumPy arrays of ``dtype`` and ``shape`` with elements in ``[lo, hi]``."""
    return hnp.arrays(dtype, shape, elements=elements(dtype, lo, hi))


def nonzero_arrays(dtype, shape):
    """Arrays whose elements are at least 0.5 away from zero (safe divisors)."""
    return hnp.arrays(dtype, shape, elements=elements(dtype, -10, 10).filter(
        lambda v: abs(v) >= 0.5))


def modes(n):
    """``n`` independent input modes."""
    return st.lists(st.sampled_from(MODES), min_size=n, max_size=n)


def assert_result(tensor, actual, expected, dtype, static_known, bound=None, **tol):
    """Check value, dtype (NumPy value, ``dtype`` and the tensor agree) and static shape;
    floats within ``bound`` elementwise when given (sums computed in another order),
    else within ``tol`` or the elementwise tolerance of ``dtype``."""
    expected = np.asarray(expected)
    assert isinstance(actual, (np.ndarray, np.generic)), type(actual)
    assert actual.dtype == np.dtype(dtype), (actual.dtype, dtype)
    assert tensor.dtype.as_numpy_dtype == np.dtype(dtype).type
    assert np.shape(actual) == expected.shape
    assert tensor.shape.is_compatible_with(np.shape(actual)), (tensor.shape, np.shape(actual))
    if static_known:
        assert tensor.shape.is_fully_defined(), tensor.shape
        assert tensor.shape.as_list() == list(expected.shape)
    if bound is not None and np.dtype(dtype).kind == "f":
        assert_within(actual, expected, bound)
        return
    np.testing.assert_allclose(actual, expected.astype(dtype), **(tol or tolerance(dtype)))


def static_known(input_modes):
    return all(m in FULL_MODES for m in input_modes)


def sigmoid_ref(x):
    return 1.0 / (1.0 + np.exp(-np.asarray(x, np.float64)))


# -- unary elementwise -------------------------------------------------------------------------

# name -> (wrapper, reference, (lo, hi) domain)
UNARY_FLOAT = {
    "negative": (df.negative, np.negative, (-10, 10)),
    "square": (df.square, np.square, (-10, 10)),
    "sqrt": (df.sqrt, np.sqrt, (0, 100)),
    "rsqrt": (df.rsqrt, lambda x: 1 / np.sqrt(x), (0.125, 100)),
    "exp": (df.exp, np.exp, (-10, 10)),
    "log": (df.log, np.log, (0.125, 100)),
    "log1p": (df.log1p, np.log1p, (-0.5, 100)),
    "tanh": (df.tanh, np.tanh, (-10, 10)),
    "sigmoid": (df.sigmoid, sigmoid_ref, (-20, 20)),
    "abs": (df.abs, np.abs, (-10, 10)),
    "sign": (df.sign, np.sign, (-10, 10)),
    "reciprocal": (df.reciprocal, lambda x: 1 / x, (0.125, 10)),
    "floor": (df.floor, np.floor, (-10, 10)),
    "ceil": (df.ceil, np.ceil, (-10, 10)),
    "round": (df.round, np.round, (-10, 10)),  # half to even, as TF
    "sin": (df.sin, np.sin, (-10, 10)),
    "cos": (df.cos, np.cos, (-10, 10)),
}
UNARY_INT = {
    "negative": (df.negative, np.negative),
    "square": (df.square, np.square),
    "abs": (df.abs, np.abs),
    "sign": (df.sign, np.sign),
    "round": (df.round, lambda x: x),
}


@pytest.mark.parametrize("name", sorted(UNARY_FLOAT))
@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(FLOATS), shape=SHAPES, mode=st.sampled_from(MODES))
def test_unary_float_ops_match_numpy(name, data, dtype, shape, mode):
    """Float unary ops keep the input dtype and shape and match NumPy."""
    fn, ref, (lo, hi) = UNARY_FLOAT[name]
    x = data.draw(arrays(dtype, shape, lo, hi))
    t, out = run_op(fn, [x], [mode])
    assert_result(t, out, ref(x.astype(np.float64)), dtype, mode in FULL_MODES)


@pytest.mark.parametrize("name", sorted(UNARY_INT))
@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(INTS), shape=SHAPES, mode=st.sampled_from(MODES))
def test_unary_int_ops_match_numpy(name, data, dtype, shape, mode):
    """Integer unary ops keep the integer dtype (no promotion to float)."""
    fn, ref = UNARY_INT[name]
    x = data.draw(arrays(dtype, shape, -100, 100))
    t, out = run_op(fn, [x], [mode])
    assert_result(t, out, ref(x), dtype, mode in FULL_MODES)


@pytest.mark.parametrize("fn", [df.sqrt, df.exp, df.log, df.tanh, df.sigmoid, df.floor,
                                df.ceil, df.reciprocal])
def test_float_only_unary_ops_reject_integers(fn):
    """TF defines these ops for floating-point types only: TypeError at build time."""
    with df.Graph().as_default():
        with pytest.raises(TypeError):
            fn(df.constant([1, 2]))


@pytest.mark.parametrize("fn", [df.negative, df.square, df.abs, df.sign])
def test_numeric_unary_ops_reject_bool(fn):
    with df.Graph().as_default():
        with pytest.raises(TypeError):
            fn(df.constant([True, False]))


# -- binary elementwise ------------------------------------------------------------------------

BINARY = {
    "add": (df.add, np.add),
    "subtract": (df.subtract, np.subtract),
    "multiply": (df.multiply, np.multiply),
    "maximum": (df.maximum, np.maximum),
    "minimum": (df.minimum, np.minimum),
    "squared_difference": (df.squared_difference, lambda x, y: np.square(x - y)),
    "operator +": (lambda x, y: x + y, np.add),
    "operator -": (lambda x, y: x - y, np.subtract),
    "operator *": (lambda x, y: x * y, np.multiply),
}


@pytest.mark.parametrize("name", sorted(BINARY))
@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(NUMERIC), shapes=BROADCAST_PAIRS,
       input_modes=modes(2))
def test_binary_ops_broadcast_like_numpy(name, data, dtype, shapes, input_modes):
    """Binary arithmetic broadcasts as NumPy does and keeps the operands' dtype."""
    fn, ref = BINARY[name]
    x = data.draw(arrays(dtype, shapes.input_shapes[0]))
    y = data.draw(arrays(dtype, shapes.input_shapes[1]))
    t, out = run_op(fn, [x, y], input_modes)
    assert_result(t, out, ref(x, y), dtype, static_known(input_modes))


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(FLOATS), shapes=BROADCAST_PAIRS,
       input_modes=modes(2), use_operator=st.booleans())
def test_divide_floats(data, dtype, shapes, input_modes, use_operator):
    x = data.draw(arrays(dtype, shapes.input_shapes[0]))
    y = data.draw(nonzero_arrays(dtype, shapes.input_shapes[1]))
    fn = (lambda a, b: a / b) if use_operator else df.divide
    t, out = run_op(fn, [x, y], input_modes)
    assert_result(t, out, x.astype(np.float64) / y, dtype, static_known(input_modes))


def test_realdiv_is_float_only_while_divide_accepts_integers():
    """TF's RealDiv has no integer kernels; ``divide``/``/`` cast integers first."""
    with df.Graph().as_default():
        with pytest.raises(TypeError):
            df.realdiv(df.constant([7]), df.constant([2]))
        half = df.realdiv(df.constant([7.0]), df.constant([2.0]))
        truediv = df.constant([7]) / 2
        assert truediv.op.type == "RealDiv" and truediv.dtype == df.float64
        with df.Session() as sess:
            np.testing.assert_array_equal(sess.run([half, truediv]), [[3.5], [3.5]])


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(INTS + [np.int16]), shapes=BROADCAST_PAIRS,
       input_modes=modes(2), use_operator=st.booleans())
def test_divide_integers_is_true_division(data, dtype, shapes, input_modes, use_operator):
    """TF's truediv casts int32/int64 to float64 (int8/int16 to float32) before dividing."""
    x = data.draw(arrays(dtype, shapes.input_shapes[0], -100, 100))
    y = data.draw(nonzero_arrays(dtype, shapes.input_shapes[1]))
    fn = (lambda a, b: a / b) if use_operator else df.divide
    t, out = run_op(fn, [x, y], input_modes)
    want = np.float32 if dtype == np.int16 else np.float64
    assert_result(t, out, x.astype(np.float64) / y, want, static_known(input_modes))


@pytest.mark.parametrize("name", ["floordiv", "floormod"])
@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(NUMERIC), shapes=BROADCAST_PAIRS,
       input_modes=modes(2), use_operator=st.booleans())
def test_floordiv_and_floormod_round_toward_minus_infinity(name, data, dtype, shapes,
                                                           input_modes, use_operator):
    """floordiv/floormod follow Python's (and NumPy's) floor semantics, for negatives too."""
    x = data.draw(arrays(dtype, shapes.input_shapes[0], -100, 100))
    y = data.draw(nonzero_arrays(dtype, shapes.input_shapes[1]))
    if name == "floordiv":
        fn = (lambda a, b: a // b) if use_operator else df.floordiv
        ref = np.floor_divide
    else:
        fn = (lambda a, b: a % b) if use_operator else df.floormod
        ref = np.mod
    t, out = run_op(fn, [x, y], input_modes)
    assert_result(t, out, ref(x, y), dtype, static_known(input_modes))


def test_floordiv_floormod_closed_form_on_negative_integers():
    with df.Graph().as_default():
        x = df.constant([7, -7, 7, -7])
        y = df.constant([2, 2, -2, -2])
        with df.Session() as sess:
            q, r = sess.run([x // y, x % y])
    np.testing.assert_array_equal(q, [3, -4, -4, 3])
    np.testing.assert_array_equal(r, [1, 1, -1, -1])


@pytest.mark.parametrize("fn", [df.floordiv, df.floormod])
@pytest.mark.parametrize("shape", [[], [3]])
def test_integer_division_by_zero_raises(fn, shape):
    """As TF's CPU kernels: integer division by zero is an InvalidArgumentError."""
    with df.Graph().as_default():
        x = df.placeholder(df.int32, shape)
        y = fn(x, df.zeros(shape, df.int32), name="div0")
        with df.Session() as sess:
            with pytest.raises(df.errors.InvalidArgumentError) as info:
                sess.run(y, {x: np.ones(shape, np.int32)})
    assert info.value.op.name == "div0"


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(FLOATS), shapes=BROADCAST_PAIRS,
       input_modes=modes(2), use_operator=st.booleans())
def test_pow_floats(data, dtype, shapes, input_modes, use_operator):
    x = data.draw(arrays(dtype, shapes.input_shapes[0], 0.125, 4))
    y = data.draw(arrays(dtype, shapes.input_shapes[1], -3, 3))
    fn = (lambda a, b: a ** b) if use_operator else df.pow
    t, out = run_op(fn, [x, y], input_modes)
    assert_result(t, out, np.power(x.astype(np.float64), y), dtype, static_known(input_modes),
                  rtol=1e-4 if dtype == np.float32 else 1e-10)


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(INTS), shapes=BROADCAST_PAIRS,
       input_modes=modes(2))
def test_pow_integers(data, dtype, shapes, input_modes):
    x = data.draw(arrays(dtype, shapes.input_shapes[0], -5, 5))
    y = data.draw(arrays(dtype, shapes.input_shapes[1], 0, 5))
    t, out = run_op(df.pow, [x, y], input_modes)
    assert_result(t, out, np.power(x, y), dtype, static_known(input_modes))


def test_pow_integer_negative_exponent_raises():
    with df.Graph().as_default():
        y = df.pow(df.constant(2), df.placeholder(df.int32, []), name="ipow")
        with df.Session() as sess:
            with pytest.raises(df.errors.InvalidArgumentError) as info:
                sess.run(y, {y.op.inputs[1]: -1})
    assert info.value.op.name == "ipow"


@pytest.mark.parametrize("fn", [df.add, df.subtract, df.multiply, df.maximum, df.minimum,
                                df.pow, df.floordiv, df.floormod, df.divide])
def test_arithmetic_rejects_bool(fn):
    with df.Graph().as_default():
        with pytest.raises(TypeError):
            fn(df.constant([True]), df.constant([False]))


@pytest.mark.parametrize("fn,ref", [(df.maximum, np.maximum), (df.minimum, np.minimum)])
@pytest.mark.parametrize("dtype", FLOATS)
def test_maximum_minimum_propagate_nan_like_numpy(fn, ref, dtype):
    """Scalars take a Python-operator fast path; it must agree with NumPy on NaN too."""
    pairs = [(np.nan, 1.0), (1.0, np.nan), (np.nan, np.nan), (-0.0, 0.0), (2.0, -3.0),
             (-np.inf, 1.0)]
    with df.Graph().as_default():
        x, y = df.placeholder(dtype, []), df.placeholder(dtype, [])
        xs, ys = df.placeholder(dtype, [len(pairs)]), df.placeholder(dtype, [len(pairs)])
        scalar_t, vector_t = fn(x, y), fn(xs, ys)
        with df.Session() as sess:
            scalars = [sess.run(scalar_t, {x: a, y: b}) for a, b in pairs]
            vector = sess.run(vector_t, {xs: [a for a, _ in pairs], ys: [b for _, b in pairs]})
    expected = ref(np.array([a for a, _ in pairs], dtype), np.array([b for _, b in pairs], dtype))
    for out in scalars:
        assert isinstance(out, np.generic) and out.dtype == dtype
    np.testing.assert_array_equal(np.array(scalars, dtype), expected)
    np.testing.assert_array_equal(vector, expected)


# -- comparisons and logic ---------------------------------------------------------------------

COMPARISONS = {
    "less": (df.less, np.less, lambda x, y: x < y),
    "less_equal": (df.less_equal, np.less_equal, lambda x, y: x <= y),
    "greater": (df.greater, np.greater, lambda x, y: x > y),
    "greater_equal": (df.greater_equal, np.greater_equal, lambda x, y: x >= y),
    "equal": (df.equal, np.equal, None),
    "not_equal": (df.not_equal, np.not_equal, None),
}


@pytest.mark.parametrize("name", sorted(COMPARISONS))
@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(NUMERIC), shapes=BROADCAST_PAIRS,
       input_modes=modes(2), use_operator=st.booleans())
def test_comparisons_broadcast_and_return_bool(name, data, dtype, shapes, input_modes,
                                               use_operator):
    fn, ref, operator_fn = COMPARISONS[name]
    if use_operator and operator_fn is not None:
        fn = operator_fn
    # A narrow range makes ties (the interesting case for <= and ==) common.
    x = data.draw(arrays(dtype, shapes.input_shapes[0], -2, 2))
    y = data.draw(arrays(dtype, shapes.input_shapes[1], -2, 2))
    t, out = run_op(fn, [x, y], input_modes)
    assert_result(t, out, ref(x, y), np.bool_, static_known(input_modes))


@pytest.mark.parametrize("fn,ref", [(df.equal, np.equal), (df.not_equal, np.not_equal)])
@SETTINGS
@given(data=st.data(), shapes=BROADCAST_PAIRS, input_modes=modes(2))
def test_equality_on_bool(fn, ref, data, shapes, input_modes):
    x = data.draw(arrays(np.bool_, shapes.input_shapes[0]))
    y = data.draw(arrays(np.bool_, shapes.input_shapes[1]))
    t, out = run_op(fn, [x, y], input_modes)
    assert_result(t, out, ref(x, y), np.bool_, static_known(input_modes))


LOGICAL_BINARY = {
    "logical_and": (df.logical_and, np.logical_and),
    "logical_or": (df.logical_or, np.logical_or),
    "operator &": (lambda x, y: x & y, np.logical_and),
    "operator |": (lambda x, y: x | y, np.logical_or),
}


@pytest.mark.parametrize("name", sorted(LOGICAL_BINARY))
@SETTINGS
@given(data=st.data(), shapes=BROADCAST_PAIRS, input_modes=modes(2))
def test_logical_binary_ops(name, data, shapes, input_modes):
    fn, ref = LOGICAL_BINARY[name]
    x = data.draw(arrays(np.bool_, shapes.input_shapes[0]))
    y = data.draw(arrays(np.bool_, shapes.input_shapes[1]))
    t, out = run_op(fn, [x, y], input_modes)
    assert_result(t, out, ref(x, y), np.bool_, static_known(input_modes))


@pytest.mark.parametrize("fn", [df.logical_not, lambda x: ~x])
@SETTINGS
@given(data=st.data(), shape=SHAPES, mode=st.sampled_from(MODES))
def test_logical_not(fn, data, shape, mode):
    x = data.draw(arrays(np.bool_, shape))
    t, out = run_op(fn, [x], [mode])
    assert_result(t, out, np.logical_not(x), np.bool_, mode in FULL_MODES)


@pytest.mark.parametrize("fn", [df.logical_and, df.logical_or])
def test_logical_binary_ops_reject_non_bool(fn):
    with df.Graph().as_default():
        with pytest.raises(TypeError):
            fn(df.constant([1, 2]), df.constant([3, 0]))


def test_logical_not_rejects_non_bool():
    with df.Graph().as_default():
        with pytest.raises(TypeError):
            df.logical_not(df.constant([1, 0]))


# -- reductions --------------------------------------------------------------------------------

@st.composite
def reduction_axes(draw, rank):
    """``None``, an int, or a list of distinct axes, each possibly negative."""
    if rank == 0:
        return draw(st.sampled_from([None, []]))
    axis = st.integers(-rank, rank - 1)
    kind = draw(st.sampled_from(["none", "int", "list"]))
    if kind == "none":
        return None
    if kind == "int":
        return draw(axis)
    axes = draw(st.lists(axis, max_size=rank, unique_by=lambda a: a % rank))
    return axes


def numpy_axis(axis):
    return tuple(axis) if isinstance(axis, list) else axis


def reduce_count(shape, axis):
    """How many elements each output element of a reduction over ``axis`` combines."""
    if axis is None:
        return int(np.prod(shape))
    axes = [axis] if isinstance(axis, int) else axis
    return int(np.prod([shape[a] for a in axes]))


def int_mean(x, axis, keepdims):
    """TF's integer mean: the integer sum divided by the count, truncated toward zero."""
    total = np.sum(x, axis=numpy_axis(axis), keepdims=keepdims, dtype=np.int64)
    return np.trunc(total / reduce_count(x.shape, axis)).astype(x.dtype)


REDUCTIONS = {
    "reduce_sum": (df.reduce_sum,
                   lambda x, a, k: np.sum(x, axis=numpy_axis(a), keepdims=k, dtype=x.dtype)),
    "reduce_max": (df.reduce_max, lambda x, a, k: np.max(x, axis=numpy_axis(a), keepdims=k)),
    "reduce_min": (df.reduce_min, lambda x, a, k: np.min(x, axis=numpy_axis(a), keepdims=k)),
    "reduce_prod": (df.reduce_prod,
                    lambda x, a, k: np.prod(x, axis=numpy_axis(a), keepdims=k, dtype=x.dtype)),
    "reduce_mean": (df.reduce_mean, lambda x, a, k: (
        int_mean(x, a, k) if x.dtype.kind == "i"
        else np.mean(x, axis=numpy_axis(a), keepdims=k, dtype=np.float64))),
}


@pytest.mark.parametrize("name", sorted(REDUCTIONS))
@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(NUMERIC),
       shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=3),
       mode=st.sampled_from(MODES), keepdims=st.booleans())
def test_reductions_match_numpy(name, data, dtype, shape, mode, keepdims):
    """Reductions over axis=None/int/list/negative, with and without keepdims."""
    fn, ref = REDUCTIONS[name]
    # Small values keep products of up to 27 elements inside int32.
    x = data.draw(arrays(dtype, shape, -2, 2) if name == "reduce_prod"
                  else arrays(dtype, shape, -50, 50))
    if name == "reduce_prod" and x.dtype.kind == "f":
        # Nonzero factors of magnitude >= 0.5 keep every partial product (at most 27
        # factors) far above the smallest normal float: with denormals flushed (the
        # default, as in TF) an underflowing partial product becomes 0 while NumPy's
        # reference keeps it subnormal ([1.18e-38, 0.75, 2.0] gave 0 vs 1.76e-38), and
        # the multiplication order differs. Flushing itself is tested in test_denormals.
        small = (x != 0) & (np.abs(x) < 0.5)
        x = np.where(small, x + np.copysign(np.asarray(0.5, x.dtype), x), x).astype(x.dtype)
    axis = data.draw(reduction_axes(len(shape)))
    t, out = run_op(lambda a: fn(a, axis=axis, keepdims=keepdims), [x], [mode])
    # The static shape is known whenever the rank is (axes are attributes).
    known = mode in FULL_MODES
    op_type = {"reduce_sum": "Sum", "reduce_mean": "Mean", "reduce_prod": "Prod"}.get(name)
    bound = reduction_bound(op_type, x, axis, keepdims, dtype) if op_type else None
    assert_result(t, out, ref(x, axis, keepdims), dtype, known, bound=bound)
    if mode == "partial":
        assert t.shape.ndims == np.ndim(out)


@pytest.mark.parametrize("fn,ref", [(df.reduce_all, np.all), (df.reduce_any, np.any)])
@SETTINGS
@given(data=st.data(), shape=SHAPES, mode=st.sampled_from(MODES), keepdims=st.booleans())
def test_boolean_reductions(fn, ref, data, shape, mode, keepdims):
    x = data.draw(arrays(np.bool_, shape))
    axis = data.draw(reduction_axes(len(shape)))
    t, out = run_op(lambda a: fn(a, axis=axis, keepdims=keepdims), [x], [mode])
    assert_result(t, out, ref(x, axis=numpy_axis(axis), keepdims=keepdims), np.bool_,
                  mode in FULL_MODES)


def test_integer_reduce_mean_truncates_toward_zero():
    """TF divides the integer sum by the count in C: -3 / 2 is -1, not -2."""
    with df.Graph().as_default():
        x = df.constant([[-1, -2], [1, 2], [3, 4]])
        with df.Session() as sess:
            rows, total = sess.run([df.reduce_mean(x, axis=1), df.reduce_mean(x)])
    np.testing.assert_array_equal(rows, [-1, 1, 3])
    assert rows.dtype == np.int32
    assert total == 1 and total.dtype == np.int32


def test_reduce_axis_forms_and_keepdims_static_shapes():
    with df.Graph().as_default():
        x = df.placeholder(df.float32, [2, 3, 4])
        assert df.reduce_sum(x).shape.as_list() == []
        assert df.reduce_sum(x, axis=1).shape.as_list() == [2, 4]
        assert df.reduce_sum(x, axis=-1).shape.as_list() == [2, 3]
        assert df.reduce_sum(x, axis=[0, -1]).shape.as_list() == [3]
        assert df.reduce_sum(x, axis=[0, 2], keepdims=True).shape.as_list() == [1, 3, 1]
        assert df.reduce_sum(x, keepdims=True).shape.as_list() == [1, 1, 1]
        assert df.reduce_sum(x, reduction_indices=[1]).shape.as_list() == [2, 4]
        assert df.reduce_sum(x, axis=np.int64(0)).shape.as_list() == [3, 4]
        assert df.reduce_sum(x, axis=np.array([0, 1])).shape.as_list() == [4]
        assert df.reduce_sum(x, axis=df.constant([0, 2])).shape.as_list() == [3]
        with pytest.raises(TypeError):  # the axes are a static attribute here
            df.reduce_sum(x, axis=df.placeholder(df.int32, []))


@pytest.mark.parametrize("dtype", [np.float32, np.int32])
def test_reductions_over_zero_size_axes_give_the_identity(dtype):
    """TF fills reductions of nothing with the reducer's identity: 0 for sum, 1 for prod,
    the dtype's lowest value for max and its highest for min (True/False for all/any)."""
    info = np.finfo(dtype) if np.dtype(dtype).kind == "f" else np.iinfo(dtype)
    with df.Graph().as_default():
        x = df.placeholder(dtype, [None, 3])
        b = df.placeholder(df.bool, [None, 3])
        fetches = [df.reduce_sum(x, 0), df.reduce_prod(x, 0), df.reduce_max(x, 0),
                   df.reduce_min(x, 0), df.reduce_all(b, 0), df.reduce_any(b, 0),
                   df.reduce_sum(x)]
        with df.Session() as sess:
            outs = sess.run(fetches, {x: np.zeros((0, 3), dtype), b: np.zeros((0, 3), bool)})
    expected = [np.zeros(3, dtype), np.ones(3, dtype), np.full(3, info.min, dtype),
                np.full(3, info.max, dtype), np.ones(3, bool), np.zeros(3, bool), dtype(0)]
    for out, want in zip(outs, expected):
        assert out.dtype == want.dtype and np.shape(out) == np.shape(want)
        np.testing.assert_array_equal(out, want)


@pytest.mark.parametrize("axis", [3, -4, [0, 3]])
def test_reduce_out_of_range_axis_raises(axis):
    with df.Graph().as_default():
        with pytest.raises(ValueError):
            df.reduce_sum(df.placeholder(df.float32, [2, 3, 4]), axis=axis)


@pytest.mark.parametrize("fn", [df.reduce_sum, df.reduce_mean, df.reduce_prod,
                                df.reduce_max, df.reduce_min])
def test_numeric_reductions_reject_bool(fn):
    with df.Graph().as_default():
        with pytest.raises(TypeError):
            fn(df.constant([True, False]))


@pytest.mark.parametrize("fn", [df.reduce_all, df.reduce_any])
def test_boolean_reductions_reject_numbers(fn):
    with df.Graph().as_default():
        with pytest.raises(TypeError):
            fn(df.constant([1, 0]))


# -- matmul ------------------------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(NUMERIC), dims=st.tuples(*[st.integers(1, 4)] * 3),
       transpose_a=st.booleans(), transpose_b=st.booleans(), input_modes=modes(2),
       use_operator=st.booleans())
def test_matmul_matches_numpy(data, dtype, dims, transpose_a, transpose_b, input_modes,
                              use_operator):
    m, k, n = dims
    a = data.draw(arrays(dtype, (k, m) if transpose_a else (m, k)))
    b = data.draw(arrays(dtype, (n, k) if transpose_b else (k, n)))
    if use_operator and not (transpose_a or transpose_b):
        fn = lambda x, y: x @ y  # noqa: E731
    else:
        def fn(x, y):
            return df.matmul(x, y, transpose_a=transpose_a, transpose_b=transpose_b)
    t, out = run_op(fn, [a, b], input_modes)
    expected = (a.T if transpose_a else a).astype(np.float64) @ (b.T if transpose_b else b)
    assert_result(t, out, expected, dtype, static_known(input_modes),
                  bound=matmul_bound(a, b, dtype, transpose_a, transpose_b))


@pytest.mark.parametrize("shape_a,shape_b,kwargs", [
    ([2, 3], [4, 5], {}),
    ([2, 3], [2, 3], {}),
    ([None, 3], [4, None], {}),
    ([2, 3], [2, 3], {"transpose_a": True, "transpose_b": True}),
    ([3, 2], [3, 4], {"transpose_b": True}),
    ([3], [3, 1], {}),
])
def test_matmul_shape_mismatch_raises_at_build_time(shape_a, shape_b, kwargs):
    with df.Graph().as_default():
        a = df.placeholder(df.float32, shape_a)
        b = df.placeholder(df.float32, shape_b)
        with pytest.raises(ValueError):
            df.matmul(a, b, **kwargs)


def test_matmul_static_shape_with_transposes():
    with df.Graph().as_default():
        a = df.placeholder(df.float32, [None, 3])
        b = df.placeholder(df.float32, [5, 3])
        assert df.matmul(a, b, transpose_b=True).shape.as_list() == [None, 5]
        assert df.matmul(b, a, transpose_b=True).shape.as_list() == [5, None]
        # a^T is [3, ?] and b is [5, 3]: the unknown inner dimension may be 5.
        assert df.matmul(a, b, transpose_a=True).shape.as_list() == [3, 3]


# -- cast --------------------------------------------------------------------------------------

CAST_TARGETS = [np.float32, np.float64, np.int32, np.int64, np.bool_]


def cast_reference(x, target):
    """Closed-form cast: floats to ints truncate toward zero; to bool means ``!= 0``."""
    target = np.dtype(target)
    if target == np.bool_:
        return x != 0
    if target.kind == "i" and x.dtype.kind == "f":
        return np.trunc(x).astype(target)
    y = x.astype(target)
    if target.kind == "f":
        # Sessions flush denormals (on by default, as TF does): a normal float64 that is
        # subnormal in float32 (e.g. 3.5e-44) casts to zero.
        y = np.where(np.abs(y) < np.finfo(target).tiny, np.copysign(0, y), y).astype(target)
    return y


@SETTINGS
@given(data=st.data(), src=st.sampled_from(NUMERIC + [np.bool_]),
       dst=st.sampled_from(CAST_TARGETS), shape=SHAPES, mode=st.sampled_from(MODES))
def test_cast_matches_closed_form(data, src, dst, shape, mode):
    x = data.draw(arrays(src, shape, -100, 100))
    t, out = run_op(lambda a: df.cast(a, dst), [x], [mode])
    assert_result(t, out, cast_reference(x, dst), dst, mode in FULL_MODES, rtol=0, atol=0)


def test_cast_float_to_int_truncates_toward_zero():
    with df.Graph().as_default():
        x = df.constant([-2.7, -1.5, -0.5, 0.5, 1.5, 2.7])
        with df.Session() as sess:
            out = sess.run(df.cast(x, df.int32))
    np.testing.assert_array_equal(out, [-2, -1, 0, 0, 1, 2])
    assert out.dtype == np.int32


@pytest.mark.parametrize("dtype_arg,expected", [
    (float, df.float32), (int, df.int32), (bool, df.bool), (np.int64, df.int64),
    (np.float64, df.float64), (np.dtype("int32"), df.int32), ("float64", df.float64),
    (df.int32, df.int32)])
def test_cast_accepts_numpy_and_python_types(dtype_arg, expected):
    with df.Graph().as_default():
        t = df.cast(df.constant([1.0, 0.0]), dtype_arg)
        assert t.dtype == expected
        with df.Session() as sess:
            assert sess.run(t).dtype == expected.as_numpy_dtype


def test_cast_to_same_dtype_is_the_input():
    with df.Graph().as_default():
        x = df.constant([1.0])
        assert df.cast(x, df.float32) is x


# -- add_n -------------------------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(NUMERIC), shape=SHAPES, n=st.integers(1, 4),
       mode=st.sampled_from(MODES))
def test_add_n_sums_its_inputs(data, dtype, shape, n, mode):
    xs = [data.draw(arrays(dtype, shape)) for _ in range(n)]
    t, out = run_op(lambda *ts: df.add_n(list(ts)), xs, [mode] * n)
    assert_result(t, out, np.sum(xs, axis=0, dtype=dtype), dtype, mode in FULL_MODES)


def test_add_n_rejects_mixed_dtypes_and_empty_lists():
    with df.Graph().as_default():
        with pytest.raises(TypeError):
            df.add_n([df.constant(1.0), df.constant(1)])
        with pytest.raises(ValueError):
            df.add_n([])


# -- TF dtype and shape rules at build time ----------------------------------------------------

@pytest.mark.parametrize("dtype", [df.float32, df.float64, df.int32, df.int64])
def test_python_scalars_adopt_the_tensor_dtype(dtype):
    """``x + 1``, ``1 + x``, ``x * 2``... keep x's dtype: Python numbers are weakly typed."""
    with df.Graph().as_default():
        x = df.placeholder(dtype, [2])
        results = [x + 1, 1 + x, x - 1, 3 - x, x * 2, 2 * x, x ** 2, df.maximum(x, 0),
                   df.add(1, x), x // 2, x % 3]
        for r in results:
            assert r.dtype == dtype, r
        with df.Session() as sess:
            outs = sess.run(results, {x: np.array([1, 4], dtype.as_numpy_dtype)})
    for out in outs:
        assert out.dtype == dtype.as_numpy_dtype
    np.testing.assert_array_equal(outs[0], [2, 5])
    np.testing.assert_array_equal(outs[3], [2, -1])


def test_python_float_scalar_with_float_tensor_rounds_to_its_dtype():
    with df.Graph().as_default():
        x = df.placeholder(df.float32, [])
        y = x + 0.1
        assert y.dtype == df.float32
        with df.Session() as sess:
            out = sess.run(y, {x: 1.0})
    assert out == np.float32(1.0) + np.float32(0.1)


def test_non_integral_python_float_with_int_tensor_raises():
    with df.Graph().as_default():
        with pytest.raises(TypeError):
            df.constant([1, 2]) + 1.5


@pytest.mark.parametrize("a,b", [(df.float32, df.float64), (df.int32, df.float32),
                                 (df.int32, df.int64), (df.bool, df.int32)])
def test_mismatched_tensor_dtypes_raise_type_error(a, b):
    with df.Graph().as_default():
        x, y = df.placeholder(a, [2]), df.placeholder(b, [2])
        for build in (df.add, df.multiply, df.less, df.equal, df.maximum,
                      lambda p, q: p - q, lambda p, q: df.matmul(p[None], q[:, None])):
            with pytest.raises(TypeError):
                build(x, y)


@pytest.mark.parametrize("shape_a,shape_b", [
    ([2, 3], [4]), ([2, 3], [3, 2]), ([None, 3], [4]), ([5], [2, 4]), ([2, 1, 3], [4, 2])])
def test_incompatible_broadcast_raises_value_error(shape_a, shape_b):
    with df.Graph().as_default():
        x, y = df.placeholder(df.float32, shape_a), df.placeholder(df.float32, shape_b)
        for build in (df.add, df.less, lambda p, q: p * q, df.maximum):
            with pytest.raises(ValueError):
                build(x, y)


@pytest.mark.parametrize("shape_a,shape_b,expected", [
    ([None, 3], [3], [None, 3]), ([None, 1], [1, 4], [None, 4]), ([None], [None], [None]),
    (None, [3], None), ([2, None], [None, 1, 5], [None, 2, 5]), ([], [4, 2], [4, 2])])
def test_broadcast_static_shapes_with_unknown_dims(shape_a, shape_b, expected):
    with df.Graph().as_default():
        x, y = df.placeholder(df.float32, shape_a), df.placeholder(df.float32, shape_b)
        assert (x + y).shape == df.TensorShape(expected)
