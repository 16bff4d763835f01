"""argmax/argmin, slice, split, unstack, pad, gather_nd, scatter_nd, boolean_mask, reverse,
range, linspace, cumsum, top_k and in_top_k against NumPy, with inputs as constants or
placeholders of full, partial or unknown static shape; their build-time and run-time
errors; and the gradients of the differentiable ones against finite differences.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import dataflow as df

from .op_harness import MODES, check_gradients, fresh_rng, run_op

SETTINGS = settings(max_examples=25, deadline=None,
                    suppress_health_check=[HealthCheck.too_slow])
NUMERIC = [np.float32, np.float64, np.int32, np.int64]
SHAPES = hnp.array_shapes(min_dims=1, max_dims=3, min_side=1, max_side=4)


def arrays(dtype, shape, unique=False):
    dtype = np.dtype(dtype)
    # Normal floats: sessions read subnormal inputs as zero (flush_denormals, on by default).
    elements = st.floats(-50, 50, width=dtype.itemsize * 8,
                         allow_subnormal=False) if dtype.kind == "f" \
        else st.integers(-50, 50)
    return hnp.arrays(dtype, shape, elements=elements, unique=unique)


def check(tensor, actual, expected, full_static):
    """Value, dtype and shape equal NumPy's; the static shape agrees (and is exact when
    every input's shape was known)."""
    expected = np.asarray(expected)
    assert np.asarray(actual).dtype == expected.dtype, (np.asarray(actual).dtype, expected.dtype)
    assert tensor.dtype.as_numpy_dtype == expected.dtype.type
    np.testing.assert_array_equal(actual, expected)
    assert np.shape(actual) == expected.shape
    assert tensor.shape.is_compatible_with(expected.shape), (tensor.shape, expected.shape)
    if full_static:
        assert tensor.shape.as_list() == list(expected.shape)


def full(mode):
    return mode in ("constant", "placeholder")


# -- argmax / argmin -----------------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(NUMERIC), mode=st.sampled_from(MODES),
       fn=st.sampled_from(["argmax", "argmin"]), out=st.sampled_from([df.int32, df.int64]))
def test_argmax_argmin(data, dtype, mode, fn, out):
    x = data.draw(arrays(dtype, SHAPES))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    t, got = run_op(lambda a: getattr(df, fn)(a, axis=axis, output_type=out), [x], [mode])
    check(t, got, getattr(np, fn)(x, axis=axis).astype(out.as_numpy_dtype), full(mode))


def test_argmax_defaults_axis_0_and_dimension_alias(graph):
    x = df.constant([[1, 9], [8, 2]])
    assert df.argmax(x).dtype is df.int64
    with df.Session() as sess:
        np.testing.assert_array_equal(sess.run(df.argmax(x)), [1, 0])
        np.testing.assert_array_equal(sess.run(df.argmin(x, dimension=1)), [0, 1])
    with pytest.raises(ValueError):
        df.argmax(x, axis=2)
    with pytest.raises(ValueError):
        df.argmax(x, axis=0, dimension=1)


# -- slice -----------------------------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), dtype=st.sampled_from(NUMERIC + [np.bool_]),
       mode=st.sampled_from(MODES))
def test_slice(data, dtype, mode):
    x = data.draw(arrays(np.int32, SHAPES)).astype(dtype)
    begin = [data.draw(st.integers(0, d)) for d in x.shape]
    size = [data.draw(st.sampled_from([-1, *range(0, d - b + 1)])) for b, d in zip(begin, x.shape)]
    t, got = run_op(lambda a: df.slice(a, begin, size), [x], [mode])
    key = tuple(slice(b, None if s == -1 else b + s) for b, s in zip(begin, size))
    check(t, got, x[key], full(mode))


def test_slice_errors(graph):
    x = df.constant(np.zeros((3, 4)))
    with pytest.raises(ValueError):
        df.slice(x, [0], [1])             # wrong length
    p = df.placeholder(df.float64, [None, None])
    s = df.slice(p, [0, 2], [2, 3])
    with df.Session() as sess, pytest.raises(df.errors.InvalidArgumentError, match="Slice"):
        sess.run(s, {p: np.zeros((3, 4))})


def test_slice_with_tensor_begin(graph):
    i = df.placeholder(df.int32, [])
    x = df.constant(np.arange(10))
    s = df.slice(x, [i], [3])
    assert s.shape.as_list() == [3]
    with df.Session() as sess:
        np.testing.assert_array_equal(sess.run(s, {i: 4}), [4, 5, 6])


# -- split / unstack -------------------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), mode=st.sampled_from(MODES), dtype=st.sampled_from(NUMERIC))
def test_split_even_and_sizes(data, mode, dtype):
    x = data.draw(arrays(dtype, SHAPES))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    d = x.shape[axis]
    if data.draw(st.booleans()):
        n = data.draw(st.sampled_from([k for k in range(1, d + 1) if d % k == 0]))
        expected = np.split(x, n, axis=axis)
        arg = n
    else:
        cuts = sorted(data.draw(st.lists(st.integers(0, d), max_size=3)))
        sizes = list(np.diff([0, *cuts, d]))
        expected = np.split(x, np.cumsum(sizes)[:-1], axis=axis)
        if data.draw(st.booleans()):
            sizes[data.draw(st.integers(0, len(sizes) - 1))] = -1
        arg = sizes
    ts, got = run_op(lambda a: df.split(a, arg, axis=axis), [x], [mode])
    assert len(ts) == len(expected)
    for t, g, e in zip(ts, got, expected):
        check(t, g, e, full(mode))


def test_split_errors(graph):
    x = df.constant(np.zeros((4, 6)))
    with pytest.raises(ValueError, match="evenly divisible"):
        df.split(x, 4, axis=1)
    with pytest.raises(ValueError):
        df.split(x, [1, 2], axis=1)   # sizes do not add up to 6
    p = df.placeholder(df.float64, [None, None])
    parts = df.split(p, 4, axis=1)
    with df.Session() as sess, pytest.raises(df.errors.InvalidArgumentError):
        sess.run(parts, {p: np.zeros((2, 6))})


@SETTINGS
@given(data=st.data(), mode=st.sampled_from(["constant", "placeholder", "partial"]))
def test_unstack(data, mode):
    x = data.draw(arrays(np.float32, SHAPES))
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    num = x.shape[axis] if mode != "constant" else None
    ts, got = run_op(lambda a: df.unstack(a, num=num, axis=axis), [x], [mode])
    expected = [np.take(x, i, axis=axis) for i in range(x.shape[axis])]
    assert len(ts) == len(expected)
    for t, g, e in zip(ts, got, expected):
        check(t, g, e, full(mode))


def test_unstack_needs_num(graph):
    with pytest.raises(ValueError, match="Cannot infer num"):
        df.unstack(df.placeholder(df.float32, [None, 2]))


# -- pad -------------------------------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), mode=st.sampled_from(MODES),
       pad_mode=st.sampled_from(["CONSTANT", "reflect", "SYMMETRIC"]),
       dtype=st.sampled_from(NUMERIC))
def test_pad(data, mode, pad_mode, dtype):
    x = data.draw(arrays(dtype, SHAPES))
    limit = {"CONSTANT": 3, "reflect": 0, "SYMMETRIC": 0}[pad_mode]
    paddings = [[data.draw(st.integers(0, max(limit, d - (pad_mode == "reflect"))))
                 for _ in range(2)] for d in x.shape]
    value = 7 if pad_mode == "CONSTANT" else 0
    t, got = run_op(lambda a: df.pad(a, paddings, pad_mode, constant_values=value), [x], [mode])
    np_mode = {"CONSTANT": "constant", "reflect": "reflect", "SYMMETRIC": "symmetric"}[pad_mode]
    kwargs = {"constant_values": value} if np_mode == "constant" else {}
    check(t, got, np.pad(x, paddings, mode=np_mode, **kwargs), full(mode))


def test_pad_errors(graph):
    x = df.constant(np.zeros((2, 3)))
    with pytest.raises(ValueError):
        df.pad(x, [[0, 0]])                       # one row for a rank-2 tensor
    with pytest.raises(ValueError, match="Unknown padding mode"):
        df.pad(x, [[0, 0], [0, 0]], "WRAP")
    p = df.placeholder(df.float64, [None, None])
    y = df.pad(p, [[0, 0], [3, 0]], "SYMMETRIC")
    with df.Session() as sess, pytest.raises(df.errors.InvalidArgumentError):
        sess.run(y, {p: np.zeros((2, 2))})


# -- gather_nd / scatter_nd ------------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), mode=st.sampled_from(MODES), dtype=st.sampled_from(NUMERIC))
def test_gather_nd(data, mode, dtype):
    x = data.draw(arrays(dtype, SHAPES))
    k = data.draw(st.integers(1, x.ndim))
    batch = data.draw(hnp.array_shapes(min_dims=0, max_dims=2, min_side=1, max_side=3))
    idx = np.stack([data.draw(hnp.arrays(np.int32, batch, elements=st.integers(0, d - 1)))
                    for d in x.shape[:k]], axis=-1)
    t, got = run_op(lambda a, i: df.gather_nd(a, i), [x, idx], [mode, mode])
    check(t, got, x[tuple(idx[..., j] for j in range(k))], full(mode))


@SETTINGS
@given(data=st.data(), mode=st.sampled_from(MODES), dtype=st.sampled_from(NUMERIC))
def test_scatter_nd_sums_repeats(data, mode, dtype):
    shape = data.draw(SHAPES)
    k = data.draw(st.integers(1, len(shape)))
    n = data.draw(st.integers(1, 5))
    idx = np.stack([data.draw(hnp.arrays(np.int64, (n,), elements=st.integers(0, d - 1)))
                    for d in shape[:k]], axis=-1)
    updates = data.draw(arrays(dtype, (n, *shape[k:])))
    t, got = run_op(lambda i, u: df.scatter_nd(i, u, list(shape)), [idx, updates], [mode, mode])
    expected = np.zeros(shape, dtype)
    np.add.at(expected, tuple(idx[:, j] for j in range(k)), updates)
    check(t, got, expected, True)


def test_gather_nd_scatter_nd_out_of_range(graph):
    x = df.constant(np.zeros((2, 3)))
    i = df.placeholder(df.int32, [None, 2])
    g = df.gather_nd(x, i)
    s = df.scatter_nd(i, df.constant([1.0]), [2, 3])
    with df.Session() as sess:
        with pytest.raises(df.errors.InvalidArgumentError, match="GatherNd"):
            sess.run(g, {i: [[1, 3]]})
        with pytest.raises(df.errors.InvalidArgumentError, match="ScatterNd"):
            sess.run(s, {i: [[2, 0]]})
    with pytest.raises(ValueError):
        df.gather_nd(x, [[0, 0, 0]])


# -- boolean_mask ----------------------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), mode=st.sampled_from(["constant", "placeholder", "partial"]))
def test_boolean_mask(data, mode):
    x = data.draw(arrays(np.float64, SHAPES))
    axis = data.draw(st.integers(0, x.ndim - 1))
    k = data.draw(st.integers(1, x.ndim - axis))
    mask = data.draw(hnp.arrays(np.bool_, x.shape[axis:axis + k]))
    t, got = run_op(lambda a, m: df.boolean_mask(a, m, axis=axis), [x, mask], [mode, mode])
    flat = x.reshape(x.shape[:axis] + (-1,) + x.shape[axis + k:])
    expected = np.compress(mask.ravel(), flat, axis=axis)
    np.testing.assert_array_equal(got, expected)
    assert t.shape.is_compatible_with(expected.shape)


def test_boolean_mask_errors_and_gradient(graph):
    with pytest.raises(ValueError, match="scalar"):
        df.boolean_mask(df.constant([1.0]), True)
    with pytest.raises(ValueError):
        df.boolean_mask(df.constant([[1.0, 2.0]]), [True, False])
    x = df.constant([[1.0, 2.0], [3.0, 4.0]])
    y = df.reduce_sum(df.boolean_mask(x, [False, True]) * 3.0)
    with df.Session() as sess:
        np.testing.assert_array_equal(sess.run(df.gradients(y, [x])[0]), [[0, 0], [3, 3]])


# -- reverse / range / linspace / cumsum -----------------------------------------------------------

@SETTINGS
@given(data=st.data(), mode=st.sampled_from(MODES), dtype=st.sampled_from(NUMERIC))
def test_reverse(data, mode, dtype):
    x = data.draw(arrays(dtype, SHAPES))
    axes = data.draw(st.lists(st.integers(0, x.ndim - 1), unique=True))
    axes = [a - x.ndim if data.draw(st.booleans()) else a for a in axes]
    t, got = run_op(lambda a: df.reverse(a, axes), [x], [mode])
    check(t, got, np.flip(x, axis=tuple(axes)) if axes else x, full(mode))


@SETTINGS
@given(start=st.integers(-20, 20), limit=st.integers(-20, 20),
       delta=st.integers(-5, 5).filter(bool), as_float=st.booleans())
def test_range(start, limit, delta, as_float):
    if (delta > 0 and start > limit) or (delta < 0 and start < limit):
        with df.Graph().as_default(), pytest.raises(ValueError):
            df.range(start, limit, delta)
        return
    if as_float:
        start, limit, delta = start / 2, limit / 2, delta / 4
    with df.Graph().as_default():
        t = df.range(start, limit, delta)
        p = df.placeholder(t.dtype, [])
        t2 = df.range(p, limit, delta)
        with df.Session() as sess:
            got, got2 = sess.run([t, t2], {p: start})
    expected = np.arange(start, limit, delta, dtype=np.float32 if as_float else np.int32)
    assert t.dtype is (df.float32 if as_float else df.int32)
    np.testing.assert_allclose(got, expected, rtol=1e-6)
    np.testing.assert_allclose(got2, expected, rtol=1e-6)
    assert t.shape.as_list() == [len(expected)] and t2.shape.as_list() == [None]


def test_range_forms_and_errors(graph):
    assert df.range(5).dtype is df.int32
    assert df.range(5, dtype=df.float64).dtype is df.float64
    assert df.range(df.constant(2, dtype=df.int64), 5).dtype is df.int64
    with pytest.raises(ValueError, match="delta != 0"):
        df.range(0, 5, 0)
    d = df.placeholder(df.int32, [])
    r = df.range(0, 5, d)
    with df.Session() as sess:
        np.testing.assert_array_equal(sess.run(df.range(4)), [0, 1, 2, 3])
        with pytest.raises(df.errors.InvalidArgumentError, match="delta"):
            sess.run(r, {d: 0})


# Normal floats only: a Session reads subnormal inputs as zero (flush_denormals, the
# default, as TF1 does; tests/test_denormals.py covers that). ``width=32``: a float64
# draw such as 1e-40 is normal but becomes a float32 subnormal when cast.
@SETTINGS
@given(start=st.floats(-10, 10, allow_subnormal=False, width=32),
       stop=st.floats(-10, 10, allow_subnormal=False, width=32), num=st.integers(1, 20),
       dtype=st.sampled_from([np.float32, np.float64]))
def test_linspace(start, stop, num, dtype):
    with df.Graph().as_default():
        t = df.linspace(dtype(start), dtype(stop), num)
        with df.Session() as sess:
            got = sess.run(t)
    assert got.dtype == dtype and t.shape.as_list() == [num]
    np.testing.assert_allclose(got, np.linspace(start, stop, num).astype(dtype),
                               rtol=1e-6, atol=1e-5)
    assert got[0] == dtype(start)


def test_linspace_needs_positive_num(graph):
    with pytest.raises(ValueError, match="num > 0"):
        df.linspace(0.0, 1.0, 0)


def _np_cumsum(x, axis, exclusive, reverse):
    y = np.flip(x, axis) if reverse else x
    c = np.cumsum(y, axis=axis, dtype=x.dtype)
    if exclusive:
        c = c - y
    return np.flip(c, axis) if reverse else c


@SETTINGS
@given(data=st.data(), mode=st.sampled_from(MODES), dtype=st.sampled_from(NUMERIC),
       exclusive=st.booleans(), reverse=st.booleans())
def test_cumsum(data, mode, dtype, exclusive, reverse):
    x = data.draw(arrays(np.int32, SHAPES)).astype(dtype)
    axis = data.draw(st.integers(-x.ndim, x.ndim - 1))
    t, got = run_op(lambda a: df.cumsum(a, axis, exclusive=exclusive, reverse=reverse), [x],
                    [mode])
    check(t, got, _np_cumsum(x, axis, exclusive, reverse), full(mode))


# -- top_k / in_top_k ------------------------------------------------------------------------------

@SETTINGS
@given(data=st.data(), mode=st.sampled_from(MODES), dtype=st.sampled_from(NUMERIC))
def test_top_k_ties_keep_index_order(data, mode, dtype):
    x = data.draw(hnp.arrays(dtype, data.draw(SHAPES), elements=st.integers(-3, 3)))
    k = data.draw(st.integers(0, x.shape[-1]))
    (tv, ti), (v, i) = run_op(lambda a: df.nn.top_k(a, k=k), [x], [mode])
    order = np.argsort(-x.astype(np.float64), axis=-1, kind="stable")[..., :k]
    check(ti, i, order.astype(np.int32), full(mode))
    check(tv, v, np.take_along_axis(x, order, axis=-1), full(mode))


def test_top_k_returns_values_and_indices_by_name(graph):
    r = df.nn.top_k(df.constant([[1.0, 3.0, 2.0]]), k=2)
    assert r.values is r[0] and r.indices is r[1] and r.indices.dtype is df.int32


def test_top_k_errors(graph):
    with pytest.raises(ValueError, match="at least k columns"):
        df.nn.top_k(df.constant([1.0, 2.0]), k=3)
    with pytest.raises(ValueError):
        df.nn.top_k(df.constant(1.0))
    p = df.placeholder(df.float32, [None])
    with df.Session() as sess, pytest.raises(df.errors.InvalidArgumentError):
        sess.run(df.nn.top_k(p, 2), {p: [1.0]})


@SETTINGS
@given(data=st.data(), k=st.integers(0, 5))
def test_in_top_k(data, k):
    p = data.draw(hnp.arrays(np.float32, data.draw(st.tuples(st.integers(1, 5),
                                                               st.integers(1, 5))),
                             elements=st.sampled_from([0.0, 1.0, 2.0, 3.0, np.inf])))
    t = data.draw(hnp.arrays(np.int32, (p.shape[0],), elements=st.integers(-1, p.shape[1])))
    _, got = run_op(lambda a, b: df.nn.in_top_k(a, b, k), [p, t], ["placeholder", "partial"])
    expected = []
    for row, target in zip(p, t):
        ok = 0 <= target < len(row) and np.isfinite(row).all()
        expected.append(bool(ok and (row > row[target]).sum() < k))
    np.testing.assert_array_equal(got, expected)
    assert got.dtype == np.bool_


# -- gradients -------------------------------------------------------------------------------------

PARTIAL = [False, True]


def _gen(rng, shape):
    return rng.uniform(-2, 2, size=shape)


@pytest.mark.parametrize("partial", PARTIAL)
@pytest.mark.parametrize("case", [
    ("slice", (3, 4), lambda x: df.slice(x, [1, 0], [2, -1])),
    ("split", (2, 6), lambda x: df.concat(df.split(x, [1, -1, 3], axis=1)[::2], 1) * 2.0),
    ("split_even", (4, 2), lambda x: df.split(x, 2)[1] ** 2.0),
    ("unstack", (3, 2), lambda x: df.unstack(x, num=3)[2] * df.unstack(x, num=3)[0]),
    ("pad_constant", (2, 3), lambda x: df.pad(x, [[1, 0], [2, 1]], constant_values=3.0)),
    ("pad_reflect", (3, 4), lambda x: df.pad(x, [[2, 1], [3, 2]], "REFLECT") ** 2.0),
    ("pad_symmetric", (3, 2), lambda x: df.pad(x, [[3, 2], [1, 2]], "SYMMETRIC") ** 2.0),
    ("gather_nd", (3, 4), lambda x: df.gather_nd(x, [[2, 1], [0, 3], [2, 1]])),
    ("gather_nd_rows", (3, 4), lambda x: df.gather_nd(x, [[2], [2]])),
    ("scatter_nd", (3, 2), lambda u: df.scatter_nd([[1], [0], [1]], u, [4, 2])),
    ("reverse", (2, 3), lambda x: df.reverse(x, [0, -1]) * df.range(6.0, dtype=df.float64)[:3]),
    ("cumsum", (3, 4), lambda x: df.cumsum(x, axis=1)),
    ("cumsum_exclusive_reverse", (3, 4),
     lambda x: df.cumsum(x, axis=0, exclusive=True, reverse=True)),
    ("top_k", (3, 5), lambda x: df.nn.top_k(x, k=2)[0]),
    ("boolean_mask", (3, 2), lambda x: df.boolean_mask(x, [True, False, True])),
], ids=lambda c: c[0] if isinstance(c, tuple) else str(c))
def test_gradients(case, partial):
    _, shape, build = case
    rng, seed = fresh_rng()
    # Distinct values keep top_k away from ties.
    x = rng.permutation(np.prod(shape)).reshape(shape) * 0.3 + rng.uniform(0, 0.1, shape)
    check_gradients(build, [x], partial=partial, rng=rng, seed=seed)


@pytest.mark.parametrize("mode", ["REFLECT", "SYMMETRIC"])
def test_mirror_pad_second_order(mode):
    rng, seed = fresh_rng()

    def first(x):
        return df.gradients(df.reduce_sum(df.pad(x, [[1, 2]], mode) ** 3.0), [x])[0]
    check_gradients(first, [_gen(rng, (4,))], rng=rng, seed=seed)
