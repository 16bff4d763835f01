"""Array ops against NumPy: reshaping, joining, filling, shape queries, gather, one_hot,
where, expand_dims/squeeze/tile and ``tensor[...]`` indexing.

Inputs reach each op as constants or through placeholders with full, partial or
unknown static shapes; every result is checked for value, dtype and agreement
with the static shape inferred when the graph was built.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import dataflow as df

from .op_harness import MODES, run_op

SETTINGS = settings(max_examples=30, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])

DTYPES = [np.float32, np.float64, np.int32, np.int64, np.bool_]
FULL_MODES = {"constant", "placeholder"}
SHAPES = hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4)
NONSCALAR_SHAPES = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)


# -- helpers -----------------------------------------------------------------------------------

def arrays(dtype, shape):
    """Arrays of ``dtype``/``shape`` with small values (bool: any)."""
    dtype = np.dtype(dtype)
    if dtype.kind == "f":
        # Normal floats: sessions read subnormal inputs as zero (flush_denormals, on by default).
        elements = st.floats(-100, 100, width=dtype.itemsize * 8, allow_subnormal=False)
    elif dtype.kind == "b":
        elements = st.booleans()
    else:
        elements = st.integers(-100, 100)
    return hnp.arrays(dtype, shape, elements=elements)




def assert_result(tensor, actual, expected, static_known, dtype=None):
    """Exact value, dtype and shape of ``actual``, and its static shape on ``tensor``."""
    expected = np.asarray(expected)
    dtype = np.dtype(dtype or expected.dtype)
    assert isinstance(actual, (np.ndarray, np.generic)), type(actual)
    assert actual.dtype == dtype, (actual.dtype, dtype)
    assert tensor.dtype.as_numpy_dtype == dtype.type
    assert np.shape(actual) == expected.shape
    assert tensor.shape.is_compatible_with(np.shape(actual)), (tensor.shape, np.shape(actual))
    if static_known:
        assert tensor.shape.as_list() == list(expected.shape), tensor.shape
    np.testing.assert_array_equal(actual, expected)


def modes(n):
    return st.lists(st.sampled_from(MODES), min_size=n, max_size=n)


def all_full(input_modes):
    return all(m in FULL_MODES for m in input_modes)


# -- reshape and transpose ---------------------------------------------------------------------

def factorize(n):
    out, p = [], 2
    while n > 1:
        while n % p == 0:
            out.append(p)
            n //= p
        p += 1
    return out


@st.composite
def reshape_targets(draw, shape):
    """A shape with as many elements as ``shape``, possibly with one ``-1``."""
    rank = draw(st.integers(0 if np.prod(shape) == 1 else 1, 3))
    dims = [1] * rank
    for f in factorize(int(np.prod(shape))):
        dims[draw(st.integers(0, rank - 1))] *= f
    if rank and draw(st.booleans()):
        dims[draw(st.integers(0, rank - 1))] = -1
    return dims


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(DTYPES), shape=SHAPES, mode=st.sampled_from(MODES),
       shape_as=st.sampled_from(["list", "constant", "placeholder"]))
def test_reshape(data, dtype, shape, mode, shape_as):
    x = data.draw(arrays(dtype, shape))
    target = data.draw(reshape_targets(shape))
    if shape_as == "list":
        t, out = run_op(lambda a: df.reshape(a, target), [x], [mode])
    else:
        target_arr = np.array(target, np.int32)
        t, out = run_op(df.reshape, [x, target_arr],
                        [mode, "constant" if shape_as == "constant" else "placeholder"])
    # A constant target fixes the result's shape; -1 is resolved once the input size is known.
    known = shape_as != "placeholder" and (mode in FULL_MODES or -1 not in target)
    assert_result(t, out, x.reshape(target), known)
    if shape_as == "placeholder":
        assert t.shape.ndims == len(target)


def test_reshape_rejects_wrong_element_count_at_build_time():
    with df.Graph().as_default():
        x = df.placeholder(df.float32, [2, 3])
        with pytest.raises(ValueError):
            df.reshape(x, [4, 2])
        with pytest.raises(ValueError):
            df.reshape(x, [4, -1])
        with pytest.raises(ValueError):
            df.reshape(x, [-1, -1])


def test_reshape_partial_shape_keeps_known_dims():
    with df.Graph().as_default():
        x = df.placeholder(df.float32, [None, 3])
        assert df.reshape(x, [-1, 3]).shape.as_list() == [None, 3]
        assert df.reshape(x, [-1]).shape.as_list() == [None]
        assert df.reshape(x, [3, 2, -1]).shape.as_list() == [3, 2, None]


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(DTYPES), shape=SHAPES, mode=st.sampled_from(MODES),
       give_perm=st.booleans())
def test_transpose(data, dtype, shape, mode, give_perm):
    x = data.draw(arrays(dtype, shape))
    perm = data.draw(st.permutations(range(len(shape)))) if give_perm else None
    t, out = run_op(lambda a: df.transpose(a, perm), [x], [mode])
    # With an explicit perm even an unknown-rank input gets a result of known rank.
    assert_result(t, out, np.transpose(x, perm), mode in FULL_MODES)
    if give_perm:
        assert t.shape.ndims == len(shape)


def test_transpose_rejects_bad_permutations():
    with df.Graph().as_default():
        x = df.placeholder(df.float32, [2, 3])
        for perm in ([0], [0, 0], [1, 2]):
            with pytest.raises(ValueError):
                df.transpose(x, perm)


# -- concat and stack --------------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(DTYPES), shape=NONSCALAR_SHAPES,
       n=st.integers(1, 3))
def test_concat(data, dtype, shape, n):
    rank = len(shape)
    axis = data.draw(st.integers(-rank, rank - 1))
    pieces = []
    for _ in range(n):
        piece_shape = list(shape)
        piece_shape[axis] = data.draw(st.integers(1, 3))
        pieces.append(data.draw(arrays(dtype, tuple(piece_shape))))
    input_modes = data.draw(modes(n))
    t, out = run_op(lambda *ts: df.concat(list(ts), axis), pieces, input_modes)
    assert_result(t, out, np.concatenate(pieces, axis=axis), all_full(input_modes))


def test_concat_rejects_mismatched_shapes_ranks_and_dtypes():
    with df.Graph().as_default():
        a = df.placeholder(df.float32, [2, 3])
        with pytest.raises(ValueError):
            df.concat([a, df.placeholder(df.float32, [2, 4])], 0)
        with pytest.raises(ValueError):
            df.concat([a, df.placeholder(df.float32, [2])], 0)
        with pytest.raises(ValueError):
            df.concat([a, a], 2)
        with pytest.raises(TypeError):
            df.concat([a, df.placeholder(df.int32, [2, 3])], 0)


def test_concat_partial_shapes():
    with df.Graph().as_default():
        a = df.placeholder(df.float32, [None, 3])
        b = df.placeholder(df.float32, [2, None])
        assert df.concat([a, b], 0).shape.as_list() == [None, 3]
        assert df.concat([a, b], 1).shape.as_list() == [2, None]
        assert df.concat([b, b], 0).shape.as_list() == [4, None]


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(DTYPES), shape=SHAPES, n=st.integers(1, 3))
def test_stack(data, dtype, shape, n):
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    pieces = [data.draw(arrays(dtype, shape)) for _ in range(n)]
    input_modes = data.draw(modes(n))
    t, out = run_op(lambda *ts: df.stack(list(ts), axis=axis), pieces, input_modes)
    assert_result(t, out, np.stack(pieces, axis=axis), all_full(input_modes))


def test_stack_of_python_values_and_tensors():
    with df.Graph().as_default():
        x = df.placeholder(df.float32, [])
        s = df.stack([x, 2, 3.5])
        assert s.dtype == df.float32 and s.shape.as_list() == [3]
        with df.Session() as sess:
            np.testing.assert_array_equal(sess.run(s, {x: 1.0}), [1.0, 2.0, 3.5])
        # convert_to_tensor packs nested lists that contain tensors, as TF does.
        packed = df.convert_to_tensor([[x, 1.0], [2.0, x]])
        assert packed.shape.as_list() == [2, 2]
        with df.Session() as sess:
            np.testing.assert_array_equal(sess.run(packed, {x: 5.0}), [[5, 1], [2, 5]])


def test_stack_rejects_different_shapes():
    with df.Graph().as_default():
        with pytest.raises(ValueError):
            df.stack([df.zeros([2]), df.zeros([3])])


# -- creation ops ------------------------------------------------------------------------------

@pytest.mark.parametrize("fn,ref", [(df.zeros, np.zeros), (df.ones, np.ones)])
@SETTINGS
@given(shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3),
       dtype=st.sampled_from(DTYPES + [None]), shape_as=st.sampled_from(["list", "tensor"]))
def test_zeros_and_ones(fn, ref, shape, dtype, shape_as):
    want = np.float32 if dtype is None else dtype  # float32 by default, as TF
    with df.Graph().as_default():
        if shape_as == "tensor":
            shape_arg = df.placeholder(df.int32, [len(shape)])
            feed = {shape_arg: np.array(shape, np.int32)}
        else:
            shape_arg, feed = list(shape), {}
        t = fn(shape_arg) if dtype is None else fn(shape_arg, dtype=dtype)
        with df.Session() as sess:
            out = sess.run(t, feed)
    assert_result(t, out, ref(shape, want), shape_as == "list")


def test_zeros_with_tensor_dims_in_a_list():
    with df.Graph().as_default():
        n = df.placeholder(df.int32, [])
        t = df.zeros([n, 2], df.int64)
        assert t.dtype == df.int64 and t.shape.as_list() == [None, 2]
        with df.Session() as sess:
            assert_result(t, sess.run(t, {n: 3}), np.zeros((3, 2), np.int64), False)


def test_shape_of_another_tensor_gives_static_shapes():
    """``zeros(shape(y))``, ``fill(shape(y), v)``, ``reshape(x, shape(y))`` take y's static
    shape, as TF's constant_value_as_shape does."""
    with df.Graph().as_default():
        y = df.placeholder(df.float32, [None, 3])
        x = df.placeholder(df.float32, [None])
        outs = [df.zeros(df.shape(y)), df.fill(df.shape(y), 2.0), df.reshape(x, df.shape(y))]
        for t in outs:
            assert t.shape.as_list() == [None, 3]
        assert df.zeros(df.shape(df.placeholder(df.float32))).shape.ndims is None
        y_val = np.ones((2, 3), np.float32)
        with df.Session() as sess:
            z, f, r = sess.run(outs, {y: y_val, x: np.arange(6, dtype=np.float32)})
    np.testing.assert_array_equal(z, np.zeros((2, 3)))
    np.testing.assert_array_equal(f, np.full((2, 3), 2.0))
    np.testing.assert_array_equal(r, np.arange(6).reshape(2, 3))


@pytest.mark.parametrize("fn,ref", [(df.zeros_like, np.zeros_like), (df.ones_like, np.ones_like)])
@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(DTYPES), shape=SHAPES, mode=st.sampled_from(MODES),
       out_dtype=st.sampled_from(DTYPES + [None]))
def test_zeros_like_and_ones_like(fn, ref, data, dtype, shape, mode, out_dtype):
    x = data.draw(arrays(dtype, shape))
    t, out = run_op(lambda a: fn(a, dtype=out_dtype), [x], [mode])
    want = out_dtype or dtype
    assert_result(t, out, ref(x, dtype=want), mode in FULL_MODES)


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(DTYPES),
       shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3),
       dims_as=st.sampled_from(["list", "placeholder"]))
def test_fill(data, dtype, shape, dims_as):
    value = data.draw(arrays(dtype, ()))
    with df.Graph().as_default():
        if dims_as == "list":
            dims, feed = list(shape), {}
        else:
            dims = df.placeholder(df.int32, [len(shape)])
            feed = {dims: np.array(shape, np.int32)}
        t = df.fill(dims, df.constant(value))
        with df.Session() as sess:
            out = sess.run(t, feed)
    assert_result(t, out, np.full(shape, value, dtype), dims_as == "list")
    assert t.shape.ndims == len(shape)


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(DTYPES), shape=SHAPES, mode=st.sampled_from(MODES))
def test_identity(data, dtype, shape, mode):
    x = data.draw(arrays(dtype, shape))
    t, out = run_op(df.identity, [x], [mode])
    assert t.op.type == "Identity"
    assert_result(t, out, x, mode in FULL_MODES)


# -- shape queries -----------------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(DTYPES),
       shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=4),
       mode=st.sampled_from(MODES), out_type=st.sampled_from([df.int32, df.int64]))
def test_shape_size_rank(data, dtype, shape, mode, out_type):
    x = data.draw(arrays(dtype, shape))
    known_rank = mode != "unknown"
    t, out = run_op(lambda a: df.shape(a, out_type=out_type), [x], [mode])
    assert_result(t, out, np.array(shape, out_type.as_numpy_dtype), known_rank)
    t, out = run_op(lambda a: df.size(a, out_type=out_type), [x], [mode])
    assert_result(t, out, np.array(int(np.prod(shape)), out_type.as_numpy_dtype), True)
    t, out = run_op(df.rank, [x], [mode])
    assert_result(t, out, np.int32(len(shape)), True)


def test_shape_of_partly_known_tensor_is_dynamic():
    with df.Graph().as_default():
        x = df.placeholder(df.float32, [None, 3])
        s = df.shape(x)
        assert s.dtype == df.int32 and s.shape.as_list() == [2]
        with df.Session() as sess:
            np.testing.assert_array_equal(sess.run(s, {x: np.zeros((5, 3))}), [5, 3])
            assert sess.run(df.shape(x)[0], {x: np.zeros((7, 3))}) == 7


# -- gather ------------------------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(DTYPES), shape=NONSCALAR_SHAPES,
       index_shape=hnp.array_shapes(min_dims=0, max_dims=2, min_side=0, max_side=3),
       index_dtype=st.sampled_from([np.int32, np.int64]), input_modes=modes(2))
def test_gather(data, dtype, shape, index_shape, index_dtype, input_modes):
    params = data.draw(arrays(dtype, shape))
    axis = data.draw(st.integers(-len(shape), len(shape) - 1))
    indices = data.draw(hnp.arrays(index_dtype, index_shape,
                                   elements=st.integers(0, shape[axis] - 1)))
    # The axis must be known at build time, so the params' rank must be too.
    input_modes[0] = "partial" if input_modes[0] == "unknown" else input_modes[0]
    t, out = run_op(lambda p, i: df.gather(p, i, axis=axis), [params, indices], input_modes)
    assert_result(t, out, np.take(params, indices, axis=axis), all_full(input_modes))


@pytest.mark.parametrize("bad", [3, -1, 10])
def test_gather_out_of_range_raises_invalid_argument_naming_the_node(bad):
    with df.Graph().as_default():
        params = df.constant([1.0, 2.0, 3.0])
        idx = df.placeholder(df.int32, [None])
        out = df.gather(params, idx, name="my_gather")
        with df.Session() as sess:
            with pytest.raises(df.errors.InvalidArgumentError) as info:
                sess.run(out, {idx: [0, bad]})
    assert info.value.op is out.op
    assert "my_gather" in str(info.value)
    assert str(bad) in str(info.value)


def test_gather_rejects_float_indices_and_bad_axis():
    with df.Graph().as_default():
        with pytest.raises(TypeError):
            df.gather(df.constant([1, 2]), df.constant([0.0]))
        with pytest.raises(ValueError):
            df.gather(df.constant([1, 2]), [0], axis=1)


# -- one_hot -----------------------------------------------------------------------------------

def one_hot_reference(indices, depth, axis, on, off, dtype):
    """Closed form: ``on`` where the index equals the class, ``off`` elsewhere (an index
    outside ``[0, depth)`` matches no class, giving an all-``off`` row)."""
    indices = np.asarray(indices)
    out = np.full(indices.shape + (depth,), off, dtype)
    for pos in np.ndindex(indices.shape):
        if 0 <= indices[pos] < depth:
            out[pos + (indices[pos],)] = on
    return np.moveaxis(out, -1, axis) if axis != -1 else out


@SETTINGS
@given(data=st.data(), index_shape=hnp.array_shapes(min_dims=0, max_dims=2, min_side=1,
                                                    max_side=3),
       depth=st.integers(1, 4), index_dtype=st.sampled_from([np.int32, np.int64]),
       mode=st.sampled_from(["constant", "placeholder", "partial"]),
       dtype=st.sampled_from([None, np.float32, np.float64, np.int32, np.int64]),
       custom_values=st.booleans())
def test_one_hot(data, index_shape, depth, index_dtype, mode, dtype, custom_values):
    # Indices outside [0, depth) are included on purpose: they give all-off rows.
    indices = data.draw(hnp.arrays(index_dtype, index_shape, elements=st.integers(-2, depth + 1)))
    axis = data.draw(st.sampled_from([-1] + list(range(len(index_shape) + 1))))
    on, off = (5, -3) if custom_values else (None, None)
    t, out = run_op(lambda i: df.one_hot(i, depth, on_value=on, off_value=off, axis=axis,
                                         dtype=dtype), [indices], [mode])
    # TF: dtype defaults to on_value's dtype (int32 for Python ints), else float32.
    want = dtype or (np.int32 if custom_values else np.float32)
    expected = one_hot_reference(indices, depth, axis, 1 if on is None else on,
                                 0 if off is None else off, want)
    assert_result(t, out, expected, mode in FULL_MODES)


def test_one_hot_out_of_range_index_gives_all_off_row():
    with df.Graph().as_default():
        t = df.one_hot([0, 3, -1, 2], 3)
        with df.Session() as sess:
            out = sess.run(t)
    np.testing.assert_array_equal(out, [[1, 0, 0], [0, 0, 0], [0, 0, 0], [0, 0, 1]])
    assert out.dtype == np.float32


def test_one_hot_rejects_float_indices_and_mixed_value_dtypes():
    with df.Graph().as_default():
        with pytest.raises(TypeError):
            df.one_hot(df.constant([0.0]), 3)
        with pytest.raises(TypeError):
            df.one_hot([0], 3, on_value=1.0, off_value=0)


# -- where -------------------------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(DTYPES),
       shapes=hnp.mutually_broadcastable_shapes(num_shapes=3, min_dims=0, max_dims=3,
                                                min_side=1, max_side=3),
       input_modes=modes(3))
def test_where_selects_with_broadcasting(data, dtype, shapes, input_modes):
    cond_shape, x_shape, y_shape = shapes.input_shapes
    cond = data.draw(arrays(np.bool_, cond_shape))
    x = data.draw(arrays(dtype, x_shape))
    y = data.draw(arrays(dtype, y_shape))
    t, out = run_op(df.where, [cond, x, y], input_modes)
    assert_result(t, out, np.where(cond, x, y), all_full(input_modes))


@SETTINGS
@given(data=st.data(), shape=hnp.array_shapes(min_dims=0, max_dims=3, min_side=0, max_side=3),
       mode=st.sampled_from(MODES))
def test_where_with_condition_only_gives_int64_coordinates(data, shape, mode):
    cond = data.draw(arrays(np.bool_, shape))
    t, out = run_op(df.where, [cond], [mode])
    assert_result(t, out, np.argwhere(cond), False, dtype=np.int64)
    if mode != "unknown":
        assert t.shape.as_list() == [None, len(shape)]


def test_where_rejects_non_bool_condition_and_mixed_branches():
    with df.Graph().as_default():
        with pytest.raises(TypeError):
            df.where(df.constant([1, 0]), df.constant([1, 2]), df.constant([3, 4]))
        with pytest.raises(TypeError):
            df.where(df.constant([True]), df.constant([1]), df.constant([1.0]))
        with pytest.raises(ValueError):
            df.where(df.constant([True]), df.constant([1]))
        with pytest.raises(ValueError):
            df.where(df.constant([True, False]), df.zeros([3]), df.zeros([3]))


def test_where_python_scalar_branches_adopt_the_tensor_dtype():
    with df.Graph().as_default():
        x = df.placeholder(df.float32, [3])
        t = df.where(x > 0, x, 0)
        assert t.dtype == df.float32
        with df.Session() as sess:
            out = sess.run(t, {x: [-1, 2, -3]})
    np.testing.assert_array_equal(out, [0, 2, 0])


# -- expand_dims, squeeze, tile ----------------------------------------------------------------

@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(DTYPES), shape=SHAPES,
       mode=st.sampled_from(MODES))
def test_expand_dims(data, dtype, shape, mode):
    x = data.draw(arrays(dtype, shape))
    axis = data.draw(st.integers(-len(shape) - 1, len(shape)))
    t, out = run_op(lambda a: df.expand_dims(a, axis), [x], [mode])
    assert_result(t, out, np.expand_dims(x, axis), mode in FULL_MODES)


@pytest.mark.parametrize("axis", [3, -4])
def test_expand_dims_out_of_range_axis_raises(axis):
    with df.Graph().as_default():
        with pytest.raises(ValueError):
            df.expand_dims(df.placeholder(df.float32, [2, 3]), axis)


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(DTYPES),
       shape=hnp.array_shapes(min_dims=0, max_dims=4, min_side=1, max_side=2),
       mode=st.sampled_from(MODES), axis_form=st.sampled_from(["none", "empty", "some"]))
def test_squeeze(data, dtype, shape, mode, axis_form):
    x = data.draw(arrays(dtype, shape))
    ones = [i for i, d in enumerate(shape) if d == 1]
    if axis_form == "none":
        axis, np_axis = None, None
    elif axis_form == "empty":
        axis, np_axis = [], None  # TF: an empty list squeezes every size-1 dimension
    else:
        # At least one axis: an empty list would mean "all of them".
        chosen = data.draw(st.lists(st.sampled_from(ones), min_size=1, unique=True)) \
            if ones else None
        axis = chosen and [a - len(shape) if data.draw(st.booleans()) else a for a in chosen]
        np_axis = chosen and tuple(chosen)
    t, out = run_op(lambda a: df.squeeze(a, axis), [x], [mode])
    assert_result(t, out, np.squeeze(x, axis=np_axis), mode in FULL_MODES)


def test_squeeze_rejects_non_unit_and_out_of_range_axes():
    with df.Graph().as_default():
        x = df.placeholder(df.float32, [1, 3])
        with pytest.raises(ValueError):
            df.squeeze(x, [1])
        with pytest.raises(ValueError):
            df.squeeze(x, [2])
        assert df.squeeze(x, -2).shape.as_list() == [3]


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(DTYPES), shape=SHAPES, mode=st.sampled_from(MODES))
def test_tile(data, dtype, shape, mode):
    x = data.draw(arrays(dtype, shape))
    multiples = data.draw(st.lists(st.integers(0, 3), min_size=len(shape), max_size=len(shape)))
    t, out = run_op(lambda a: df.tile(a, multiples), [x], [mode])
    assert_result(t, out, np.tile(x, multiples) if shape else x, mode in FULL_MODES)


def test_tile_rejects_wrong_number_of_multiples():
    with df.Graph().as_default():
        with pytest.raises(ValueError):
            df.tile(df.placeholder(df.float32, [2, 3]), [2])


# -- indexing ----------------------------------------------------------------------------------

def index_items(dim):
    """An int index or a slice (bounds may overshoot, as Python allows) for one dimension."""
    bound = st.none() | st.integers(-dim - 2, dim + 2)
    step = st.none() | st.integers(-3, 3).filter(bool)
    return st.integers(-dim, dim - 1) | st.builds(slice, bound, bound, step)


@st.composite
def index_keys(draw, shape):
    """A basic-indexing key for ``shape``: items for some leading dimensions, optionally an
    ellipsis followed by items for some trailing ones, and newaxis entries anywhere."""
    rank = len(shape)
    n_left = draw(st.integers(0, rank))
    use_ellipsis = draw(st.booleans())
    n_right = draw(st.integers(0, rank - n_left)) if use_ellipsis else 0
    key = [draw(index_items(d)) for d in shape[:n_left]]
    if use_ellipsis:
        key.append(Ellipsis)
    key += [draw(index_items(d)) for d in shape[rank - n_right:]]
    for _ in range(draw(st.integers(0, 2))):
        key.insert(draw(st.integers(0, len(key))), None)
    return tuple(key)


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(DTYPES), shape=SHAPES,
       mode=st.sampled_from(["constant", "placeholder", "partial"]))
def test_getitem_matches_numpy_basic_indexing(data, dtype, shape, mode):
    x = data.draw(arrays(dtype, shape))
    key = data.draw(index_keys(shape))
    t, out = run_op(lambda a: a[key], [x], [mode])
    assert t.op.type == "StridedSlice"
    assert_result(t, out, x[key], mode in FULL_MODES)


@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(DTYPES), shape=NONSCALAR_SHAPES,
       index_dtype=st.sampled_from([df.int32, df.int64]))
def test_getitem_with_scalar_int_tensor(data, dtype, shape, index_dtype):
    x = data.draw(arrays(dtype, shape))
    i = data.draw(st.integers(-shape[0], shape[0] - 1))
    lo = data.draw(st.integers(0, shape[0]))
    with df.Graph().as_default():
        xt = df.constant(x)
        it = df.placeholder(index_dtype, [])
        lo_t = df.placeholder(df.int32, [])
        picked, sliced = xt[it], xt[lo_t:]
        assert picked.shape.as_list() == list(shape[1:])
        assert sliced.shape.as_list() == [None] + list(shape[1:])
        with df.Session() as sess:
            out_picked, out_sliced = sess.run([picked, sliced], {it: i, lo_t: lo})
    assert_result(picked, out_picked, x[i], True)
    assert_result(sliced, out_sliced, x[lo:], False)


def test_getitem_forms_from_the_tf_docs():
    x_val = np.arange(24, dtype=np.float32).reshape(2, 3, 4)
    with df.Graph().as_default():
        x = df.placeholder(df.float32, [None, 3, 4])
        keys = [(1,), (slice(0, 1),), (slice(None), 1), (Ellipsis, 0), (None,),
                (slice(None, None, -1), Ellipsis, None)]
        tensors = [x[1], x[0:1], x[:, 1], x[..., 0], x[None], x[::-1, ..., None]]
        assert x[:, 1].shape.as_list() == [None, 4]
        assert x[..., 0].shape.as_list() == [None, 3]
        assert x[None].shape.as_list() == [1, None, 3, 4]
        with df.Session() as sess:
            outs = sess.run(tensors, {x: x_val})
    for key, out in zip(keys, outs):
        np.testing.assert_array_equal(out, x_val[key])


def test_getitem_rejects_bad_indices():
    with df.Graph().as_default():
        x = df.placeholder(df.float32, [2, 3])
        with pytest.raises(ValueError):
            x[0, 0, 0]
        with pytest.raises(ValueError):
            x[5]
        with pytest.raises(ValueError):
            x[..., ...]
        with pytest.raises(TypeError):
            x[0.5]
        with pytest.raises(TypeError):
            x[df.constant(1.0)]


def test_getitem_out_of_range_tensor_index_raises_at_run_time():
    with df.Graph().as_default():
        x = df.constant([1, 2, 3])
        i = df.placeholder(df.int32, [])
        y = x[i]
        with df.Session() as sess:
            assert sess.run(y, {i: 2}) == 3
            with pytest.raises(df.errors.InvalidArgumentError):
                sess.run(y, {i: 3})


def test_a_slice_with_constant_tensor_bounds_has_a_static_shape():
    """``x[:, a:b]`` with ``a``, ``b`` constant tensors: the length is known at build time
    (as TF's shape function gives it); a bound fed at run time leaves it unknown."""
    x = df.placeholder(df.float32, [4, 17])
    a, b = df.constant(2), df.constant(-1)
    assert x[:, a:b].shape.as_list() == [4, 14]
    assert x[:, a:].shape.as_list() == [4, 15]
    assert x[:, ::df.constant(3)].shape.as_list() == [4, 6]
    fed = df.placeholder(df.int32, [])
    assert x[:, fed:b].shape.as_list() == [4, None]
    with df.Session() as sess:
        value = np.arange(68, dtype=np.float32).reshape(4, 17)
        got = sess.run(x[:, a:b], {x: value})
    np.testing.assert_array_equal(got, value[:, 2:-1])
