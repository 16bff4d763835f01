"""The array and NN lowerings of the loop compiler (dataflow/loopc/lowering_array.py)
against the NumPy reference kernels, on random shapes and dtypes.

Each test builds one while loop whose body applies the ops under test to loop-invariant
inputs (each result is a loop variable, so an Exit), runs it with ``compile_loops="eager"``
(and asserts that the frame did compile), and compares with the same ops outside any loop
run by the NumPy kernels (``use_compiled_kernels=False``): bit for bit, except the softmax
family, which is within the compiled kernels' documented bounds (their module docstring:
2e-6 relative for float32, 1e-13 for float64).
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dataflow as df
from dataflow.loopc.lowering_array import float_to_int_bounds
from tests.graph_gen import quiet_numpy

EAGER = df.ConfigProto(compile_loops="eager")
REFERENCE = df.ConfigProto(use_compiled_kernels=False, compile_loops=False)
SOFTMAX_RTOL = {"float32": 2e-6, "float64": 1e-13}
FRAME = "while/while_context"


def _loop_of(ops_of, inputs):
    """``(loop outputs, reference outputs)`` by name: ``ops_of(*inputs)`` inside a while
    loop of two iterations, and once outside it."""
    first = ops_of(*inputs)
    names = sorted(first)

    def body(i, *vals):
        outs = ops_of(*inputs)
        return (i + 1,) + tuple(outs[n] for n in names)
    loop = df.while_loop(lambda i, *v: i < 2, body, (0,) + tuple(first[n] for n in names))
    return dict(zip(names, loop[1:])), first


def _within_one_ulp(got, want, name):
    """Equal but for at most 1 ulp (NaNs and infinities where the other has them)."""
    assert np.array_equal(np.isnan(got), np.isnan(want)), name
    finite = np.isfinite(want)
    np.testing.assert_array_equal(got[~finite & ~np.isnan(want)],
                                  want[~finite & ~np.isnan(want)], err_msg=name)
    ints = np.int32 if got.dtype == np.float32 else np.int64
    steps = np.abs(got[finite].view(ints).astype(np.int64) -
                   want[finite].view(ints).astype(np.int64))
    assert steps.size == 0 or steps.max() <= 1, (name, got, want)


def _compare(graph, loop_outs, reference, feeds, approximate=(), one_ulp=()):
    names = sorted(loop_outs)
    with quiet_numpy():
        with df.Session(graph=graph, config=EAGER) as sess:
            md = df.RunMetadata()
            got_all = sess.run([loop_outs[n] for n in names], feeds, run_metadata=md)
        with df.Session(graph=graph, config=REFERENCE) as sess:
            want_all = sess.run([reference[n] for n in names], feeds)
    assert md.compiled_frames == [FRAME], md.interpreted_frames
    for name, got, want in zip(names, got_all, want_all):
        got, want = np.asarray(got), np.asarray(want)
        assert got.dtype == want.dtype and got.shape == want.shape, (name, got, want)
        if name in one_ulp:
            _within_one_ulp(got, want, name)
        elif name in approximate:
            tol = SOFTMAX_RTOL[want.dtype.name]
            scale = np.max(np.abs(want), initial=1.0)
            np.testing.assert_allclose(got, want, rtol=tol, atol=8 * tol * scale,
                                       err_msg=name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name, strict=True)


float_dtypes = st.sampled_from([np.float32, np.float64])


@settings(max_examples=10, deadline=None)
@given(shape=st.sampled_from([[1], [7], [3, 4], [2, 40], [2, 3, 5]]), dtype=float_dtypes,
       seed=st.integers(0, 2**31 - 1))
def test_softmax_and_cross_entropies_match_the_numpy_kernels(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    xv = (rng.standard_normal(shape) * 4).astype(dtype)
    yv = rng.random(shape).astype(dtype)
    yv /= yv.sum(axis=-1, keepdims=True)
    lv = rng.integers(0, shape[-1], shape[:-1]).astype(np.int64 if seed % 2 else np.int32)
    g = df.Graph()
    with g.as_default():
        x, y = df.placeholder(dtype, shape), df.placeholder(dtype, shape)
        lab = df.placeholder(lv.dtype, shape[:-1])

        def ops_of(x, y, lab):
            loss, backprop = g.create_op("SoftmaxCrossEntropyWithLogits", [x, y]).outputs
            sloss, sbackprop = g.create_op("SparseSoftmaxCrossEntropyWithLogits",
                                           [x, lab]).outputs
            return {"softmax": df.nn.softmax(x), "log_softmax": df.nn.log_softmax(x),
                    "xent_loss": loss, "xent_backprop": backprop,
                    "sparse_loss": sloss, "sparse_backprop": sbackprop}
        outs, ref = _loop_of(ops_of, (x, y, lab))
    _compare(g, outs, ref, {x: xv, y: yv, lab: lv}, approximate=set(outs))


def test_a_label_out_of_range_raises_the_kernels_error():
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [2, 3])
        lab = df.placeholder(df.int32, [2])
        loss = df.while_loop(lambda i, s: i < 2, lambda i, s: (i + 1, s + df.reduce_sum(
            df.nn.sparse_softmax_cross_entropy_with_logits(labels=lab, logits=x))),
            (0, 0.0))[1]
    feeds = {x: np.zeros((2, 3), np.float32), lab: np.array([1, 3], np.int32)}
    messages = []
    for config in (EAGER, df.ConfigProto(compile_loops=False)):
        with df.Session(graph=g, config=config) as sess:
            with pytest.raises(df.errors.InvalidArgumentError) as info:
                sess.run(loss, feeds)
        messages.append(str(info.value))
    assert messages[0] == messages[1] and "outside the valid range" in messages[0]
    feeds[lab] = np.array([1, 2], np.int32)
    with df.Session(graph=g, config=EAGER) as sess:
        md = df.RunMetadata()
        assert np.isclose(sess.run(loss, feeds, run_metadata=md), 4 * np.log(3), rtol=1e-6)
    assert md.compiled_frames == [FRAME]


@settings(max_examples=10, deadline=None)
@given(shape=st.sampled_from([[4], [3, 5], [2, 3, 4], [1, 6, 2, 3]]),
       dtype=st.sampled_from([np.float32, np.float64, np.int32, np.int64]),
       seed=st.integers(0, 2**31 - 1))
def test_transpose_slice_and_strided_slice_match_the_numpy_kernels(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    xv = (rng.standard_normal(shape) * 10).astype(dtype)
    rank = len(shape)
    perm = [int(p) for p in rng.permutation(rank)]
    begin = [int(rng.integers(0, d + 1)) for d in shape]
    size = [int(rng.integers(0, d - b + 1)) if rng.random() < 0.7 else -1
            for b, d in zip(begin, shape)]
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(dtype, shape)
        i0 = df.placeholder(df.int32, [])
        bt = df.placeholder(df.int32, [rank])
        st_ = df.placeholder(df.int64, [rank])
        # Static and run-time indices of every kind: ints (negative too), slices with
        # steps (negative too), an ellipsis and new axes.
        keys = {"first": (0,), "last": (-1,), "steps": (slice(None, None, -1),),
                "stride2": (slice(1, None, 2), Ellipsis),
                "newaxis": (None, Ellipsis, slice(0, 2)),
                "inner": (Ellipsis, -1) if rank > 1 else (slice(None),)}

        def ops_of(x, i0, bt, st_):
            out = {"transpose": df.transpose(x, perm), "reverse": df.transpose(x),
                   "slice": df.slice(x, bt, st_),
                   "tensor_int": x[i0], "tensor_slice": x[i0:, ...],
                   "tensor_step": x[::i0 - 2]}
            for name, key in keys.items():
                out["key_" + name] = x[key]
            if rank > 1:
                out["mixed"] = x[-1, None, i0 - 1:]
            return out
        outs, ref = _loop_of(ops_of, (x, i0, bt, st_))
    feeds = {x: xv, i0: min(1, shape[0] - 1), bt: np.array(begin, np.int32),
             st_: np.array(size, np.int64)}
    _compare(g, outs, ref, feeds)


def _error_or_value(fetch, feeds, config, graph):
    with df.Session(graph=graph, config=config) as sess:
        try:
            return sess.run(fetch, feeds)
        except df.errors.OpError as exc:
            return type(exc), str(exc)
        except (ValueError, IndexError) as exc:
            return type(exc), str(exc)


def test_slices_out_of_range_raise_as_interpreted():
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [3, 4])
        i = df.placeholder(df.int32, [])
        b = df.placeholder(df.int32, [2])
        picked = df.while_loop(lambda k, s: k < 2, lambda k, s: (k + 1, s + x[i]),
                               (0, df.zeros([4])))[1]
        sliced = df.while_loop(lambda k, s: k < 2, lambda k, s: (
            k + 1, s + df.reduce_sum(df.slice(x, b, [2, 2]))), (0, 0.0))[1]
    xv = np.arange(12, dtype=np.float32).reshape(3, 4)
    for fetch, feeds in ((picked, {x: xv, i: 3}), (picked, {x: xv, i: -4}),
                         (sliced, {x: xv, b: [2, 0]}), (sliced, {x: xv, b: [0, 3]})):
        feeds = {**feeds, i: feeds.get(i, 0), b: feeds.get(b, [0, 0])}
        compiled = _error_or_value(fetch, feeds, EAGER, g)
        interpreted = _error_or_value(fetch, feeds, df.ConfigProto(compile_loops=False), g)
        assert isinstance(compiled, tuple) and compiled == interpreted, (compiled, interpreted)
    np.testing.assert_array_equal(_error_or_value(picked, {x: xv, i: -1, b: [0, 0]}, EAGER, g),
                                  2 * xv[-1])


@settings(max_examples=10, deadline=None)
@given(shape=st.sampled_from([[], [1], [6], [3, 4]]), dtype=float_dtypes,
       seed=st.integers(0, 2**31 - 1))
def test_pow_and_float_floor_division_match_the_numpy_kernels(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    xv = (rng.standard_normal(shape) * 6).astype(dtype)
    yv = (rng.standard_normal(shape) * 3).astype(dtype)
    # Exact multiples, zeros and negative zeros, infinities and NaNs: the edge cases of
    # npy_divmod (sign of a zero result, division by zero).
    specials = np.array([0.0, -0.0, 3.0, -3.0, np.inf, -np.inf, np.nan, 1.5], dtype)
    if shape:
        flat_x, flat_y = xv.reshape(-1), yv.reshape(-1)
        k = min(flat_x.size, 3)
        flat_x[:k] = rng.choice(specials, k)
        flat_y[:k] = rng.choice(specials, k)
    g = df.Graph()
    with g.as_default():
        x, y = df.placeholder(dtype, shape), df.placeholder(dtype, shape)
        pos = df.placeholder(dtype, shape)

        def ops_of(x, y, pos):
            return {"floordiv": g.create_op("FloorDiv", [x, y]).outputs[0],
                    "floormod": g.create_op("FloorMod", [x, y]).outputs[0],
                    "pow": df.pow(pos, y), "pow_neg_base": df.pow(x, df.floor(y)),
                    "floordiv_scalar": g.create_op("FloorDiv", [x, df.constant(
                        -0.75, dtype)]).outputs[0]}
        outs, ref = _loop_of(ops_of, (x, y, pos))
    # Pow is libm's pow in compiled code; NumPy's power loop may be its own SIMD code
    # (AVX-512), 1 ulp away from libm's on about 5% (float64) to 20% (float32) of inputs.
    _compare(g, outs, ref, {x: xv, y: yv, pos: np.abs(xv) + 0.25},
             one_ulp={"pow", "pow_neg_base"})


@settings(max_examples=10, deadline=None)
@given(shape=st.sampled_from([[], [5], [2, 3]]),
       dtype=st.sampled_from([np.int8, np.int16, np.int32, np.int64, np.uint8]),
       seed=st.integers(0, 2**31 - 1))
def test_integer_pow_and_floor_division_match_the_numpy_kernels(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    xv = rng.integers(-9 if dtype != np.uint8 else 0, 10, shape).astype(dtype)
    ev = rng.integers(0, 12, shape).astype(dtype)    # wraps around for the small types
    dv = (rng.integers(1, 5, shape) * (1 if dtype == np.uint8 else -1) ** ev).astype(dtype)
    g = df.Graph()
    with g.as_default():
        x, e, d = (df.placeholder(dtype, shape) for _ in range(3))

        def ops_of(x, e, d):
            return {"pow": df.pow(x, e),
                    "floordiv": g.create_op("FloorDiv", [x, d]).outputs[0],
                    "floormod": g.create_op("FloorMod", [x, d]).outputs[0]}
        outs, ref = _loop_of(ops_of, (x, e, d))
    _compare(g, outs, ref, {x: xv, e: ev, d: dv})


def test_integer_pow_to_a_negative_power_raises_as_interpreted():
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.int32, [3])
        out = df.while_loop(lambda k, s: k < 2, lambda k, s: (k + 1, s + df.pow(x, x)),
                            (0, df.zeros([3], df.int32)))[1]
    feeds = {x: np.array([2, -1, 3], np.int32)}
    compiled = _error_or_value(out, feeds, EAGER, g)
    assert isinstance(compiled, tuple)
    assert compiled == _error_or_value(out, feeds, df.ConfigProto(compile_loops=False), g)


INT_DTYPES = [np.int8, np.int16, np.int32, np.int64, np.uint8]


@settings(max_examples=12, deadline=None)
@given(src=float_dtypes, dst=st.sampled_from(INT_DTYPES + [np.bool_, np.float32, np.float64]),
       shape=st.sampled_from([[], [4], [2, 5]]), seed=st.integers(0, 2**31 - 1))
def test_casts_match_the_numpy_kernel_truncating_toward_zero(src, dst, shape, seed):
    rng = np.random.default_rng(seed)
    xv = (rng.standard_normal(shape) * 40).astype(src)
    if np.dtype(dst).kind == "u":
        xv = np.abs(xv)
    if np.dtype(dst).kind in "iu":
        # In range only (a draw beyond 3.2 sigma left int8's): out-of-range casts hand the
        # frame back by design, tested below.
        info = np.iinfo(dst)
        xv = np.clip(xv, max(info.min + 1, -1e6), min(info.max - 1, 1e6)).astype(src)
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(src, shape)
        outs, ref = _loop_of(lambda x: {"cast": df.cast(x, dst), "neg": df.cast(-x * 0.5, dst)
                                        if np.dtype(dst).kind != "u" else df.cast(x * 0.5, dst)},
                             (x,))
    _compare(g, outs, ref, {x: xv})


@pytest.mark.parametrize("dst", INT_DTYPES)
def test_float_to_int_casts_out_of_range_give_the_interpreters_values(dst):
    """Out-of-range floats and NaN: C leaves the cast undefined, so the compiled loop
    hands the frame back and the values are whatever the interpreter's NumPy gives."""
    lo, hi = float_to_int_bounds(dst)
    info = np.iinfo(dst)
    # Exact (Python int) comparisons: lo and hi truncate outside the type, the floats
    # just inside them truncate into it.
    assert int(lo) < info.min <= int(np.nextafter(lo, np.inf))
    assert int(np.nextafter(hi, -np.inf)) <= info.max < int(hi)
    values = np.array([np.nan, lo, hi, 3.75, -2.5 if info.min < 0 else 2.5], np.float64)
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float64, [5])
        out = df.while_loop(lambda k, s: k < 2, lambda k, s: (k + 1, df.cast(x, dst)),
                            (0, df.cast(x, dst)))[1]
    with quiet_numpy():
        for feed in (values, values[3:]):
            with df.Session(graph=g, config=EAGER) as sess:
                md = df.RunMetadata()
                got = sess.run(out, {x: np.resize(feed, 5)}, run_metadata=md)
            want = df.Session(graph=g, config=REFERENCE).run(out, {x: np.resize(feed, 5)})
            np.testing.assert_array_equal(got, want, strict=True)
            in_range = feed is not values
            # In range the compiled code ran the cast; out of range it handed it back.
            assert (md.compiled_frames == [FRAME]) == in_range, (md.compiled_frames,
                                                                 md.interpreted_frames)
            np.testing.assert_array_equal(got[:2], np.resize(feed, 5)[:2].astype(dst))


@settings(max_examples=8, deadline=None)
@given(rows=st.integers(1, 5), cols=st.integers(1, 40),
       dtype=st.sampled_from([np.float32, np.float64, np.int32]),
       seed=st.integers(0, 2**31 - 1))
def test_sum_to_shape_and_broadcast_to_match_the_numpy_kernels(rows, cols, dtype, seed):
    """The gradient ops of broadcasting (SumToShape sums a gradient back to an input's
    shape, BroadcastTo spreads one out), on the shapes a loop's broadcasts give."""
    rng = np.random.default_rng(seed)
    gv = (rng.standard_normal((rows, cols)) * 5).astype(dtype)
    vv = (rng.standard_normal(cols) * 5).astype(dtype)
    g = df.Graph()
    with g.as_default():
        gr, v = df.placeholder(dtype, [rows, cols]), df.placeholder(dtype, [cols])

        def ops_of(gr, v):
            def op(t, *inputs):
                return g.create_op(t, list(inputs)).outputs[0]
            return {"to_row": op("SumToShape", gr, df.constant([cols])),
                    "to_scalar": op("SumToShape", gr, df.constant([], df.int32)),
                    "same": op("SumToShape", gr, df.shape(gr)),
                    "spread": op("BroadcastTo", v, df.constant([rows, cols])),
                    "spread_scalar": op("BroadcastTo", v[0], df.constant([rows]))}
        outs, ref = _loop_of(ops_of, (gr, v))
    _compare(g, outs, ref, {gr: gv, v: vv})


@settings(max_examples=8, deadline=None)
@given(shape=st.sampled_from([[], [3], [2, 5]]), dtype=st.sampled_from([np.float32, np.int64]),
       seed=st.integers(0, 2**31 - 1))
def test_expand_dims_size_and_fill_match_the_numpy_kernels(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    xv = (rng.standard_normal(shape) * 5).astype(dtype)
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(dtype, shape)
        n = df.placeholder(df.int32, [])

        def ops_of(x, n):
            out = {"first": df.expand_dims(x, 0), "last": df.expand_dims(x, -1),
                   "size": df.size(x), "fill": df.fill(df.stack([n, 2]), df.reshape(x, [-1])[0]),
                   "fill_scalar": df.fill(df.constant([], df.int32), df.constant(3.5))}
            return out
        outs, ref = _loop_of(ops_of, (x, n))
    _compare(g, outs, ref, {x: xv, n: 3})
