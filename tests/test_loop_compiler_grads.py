"""The gradient ops' lowerings (StridedSliceGrad, GatherGrad, SumToShape to a row or a
column) against the NumPy reference kernels, on random shapes and dtypes, and whole
gradient loops that need them (LSTM-style gate slices, a gather in a loop) compiled
against the interpreter. Same harness as tests/test_loop_compiler_array.py: each op in a
two-iteration while loop compiled eagerly (the frame must compile), compared bit for bit
with the op run once outside any loop by the NumPy kernels.
"""
from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import dataflow as df
from dataflow.ops import grad_ops
from tests.test_loop_compiler_array import EAGER, REFERENCE, _compare, _loop_of

dtypes = st.sampled_from([np.float32, np.float64, np.int32, np.int64])


@settings(max_examples=10, deadline=None)
@given(shape=st.sampled_from([[5], [3, 4], [2, 3, 4]]), dtype=dtypes,
       seed=st.integers(0, 2**31 - 1))
def test_strided_slice_grad_matches_the_numpy_kernel(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    xv = (rng.standard_normal(shape) * 10).astype(dtype)
    rank = len(shape)
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(dtype, shape)
        i0 = df.placeholder(df.int32, [])
        keys = {"first": (0,), "last": (-1,), "steps": (slice(None, None, -1),),
                "stride2": (slice(1, None, 2), Ellipsis),
                "inner": (Ellipsis, slice(1, 3)) if rank > 1 else (slice(1, 4),)}

        def ops_of(x, i0):
            sliced = {name: x[key] for name, key in keys.items()}
            sliced["tensor_int"] = x[i0]
            sliced["tensor_slice"] = x[i0:, ...]
            if rank > 1:
                sliced["mixed"] = x[-1, i0 - 1:]
            return {name: grad_ops.strided_slice_grad(y * 3, df.shape(x), y.op.get_attr("spec"),
                                                      y.op.inputs[1:])
                    for name, y in sliced.items()}
        outs, ref = _loop_of(ops_of, (x, i0))
    _compare(g, outs, ref, {x: xv, i0: min(1, shape[0] - 1)})


@settings(max_examples=10, deadline=None)
@given(params=st.sampled_from([[4], [5, 3], [3, 2, 2]]), index_shape=st.sampled_from(
    [[], [3], [2, 3]]), dtype=dtypes, seed=st.integers(0, 2**31 - 1))
def test_gather_grad_matches_the_numpy_kernel(params, index_shape, dtype, seed):
    """Repeated and negative indices (np.add.at adds them up in order)."""
    rng = np.random.default_rng(seed)
    idx = rng.integers(-params[0], params[0], index_shape).astype(np.int32)
    gv = (rng.standard_normal(index_shape + params[1:]) * 10).astype(dtype)
    g = df.Graph()
    with g.as_default():
        grad = df.placeholder(dtype, index_shape + params[1:])
        indices = df.placeholder(df.int32, index_shape)

        def ops_of(grad, indices):
            return {"gather_grad": grad_ops.gather_grad(grad, indices, params, 0)}
        outs, ref = _loop_of(ops_of, (grad, indices))
    _compare(g, outs, ref, {grad: gv, indices: idx})


@settings(max_examples=10, deadline=None)
@given(rows=st.integers(1, 6), cols=st.integers(1, 6), target=st.sampled_from(
    ["same", "row", "column"]), dtype=st.sampled_from([np.float32, np.float64]),
    seed=st.integers(0, 2**31 - 1))
def test_sum_to_a_row_or_a_column_matches_the_numpy_kernel(rows, cols, target, dtype, seed):
    rng = np.random.default_rng(seed)
    gv = rng.standard_normal([rows, cols]).astype(dtype)
    shape = {"same": [rows, cols], "row": [1, cols], "column": [rows, 1]}[target]
    g = df.Graph()
    with g.as_default():
        grad = df.placeholder(dtype, [None, None])
        to = df.placeholder(df.int32, [2])

        def ops_of(grad, to):
            return {"summed": grad_ops.sum_to_shape(grad, to)}
        outs, ref = _loop_of(ops_of, (grad, to))
    _compare(g, outs, ref, {grad: gv, to: np.array(shape, np.int32)})


def _both(graph, fetches, feeds):
    runs = []
    for config in (EAGER, REFERENCE):
        with df.Session(graph=graph, config=config) as sess:
            md = df.RunMetadata()
            runs.append((sess.run(fetches, feeds, run_metadata=md), md))
    return runs


def test_gate_slices_and_gathers_in_a_gradient_loop_compile_and_match():
    """An LSTM-like step (gates as column slices of one matmul, a gathered row added):
    the gradient loop holds StridedSliceGrad, GatherGrad and SumToShape to a row."""
    rng = np.random.default_rng(7)
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float64, [3, 4])
        idx = df.placeholder(df.int32, [2])
        w = df.constant(rng.standard_normal([4, 8]))

        def body(t, h):
            z = df.matmul(h, w)
            i, f = z[:, :4], z[:, 4:]
            picked = df.gather(h, idx)[0:1]
            return t + 1, i * f * 0.25 + picked
        _, h = df.while_loop(lambda t, h: t < 3, body, (0, x))
        y = df.reduce_sum(h * h)
        fetches = [y] + df.gradients(y, [x])
    feeds = {x: rng.standard_normal([3, 4]), idx: np.array([2, 0], np.int32)}
    (got, md), (want, _) = _both(g, fetches, feeds)
    assert md.compiled_frames == ["gradients/while_context", "while/while_context"], \
        md.interpreted_frames
    for a, b in zip(got, want):
        np.testing.assert_array_equal(a, b, strict=True)
    feeds[idx] = np.array([2, 3], np.int32)   # out of range: the interpreter's error
    messages = []
    for config in (EAGER, REFERENCE):
        with df.Session(graph=g, config=config) as sess:
            try:
                sess.run(fetches, feeds)
            except df.errors.InvalidArgumentError as exc:
                messages.append(str(exc))
    assert len(messages) == 2 and messages[0] == messages[1]
