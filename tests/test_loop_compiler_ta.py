"""TensorArrays inside compiled loops (dataflow/loopc/lowering_ta.py) against the
interpreter: values, the arrays' state after the loop, and errors.

Each test runs one graph with ``compile_loops="eager"`` and with the loop interpreted
(NumPy kernels), asserts that the frames did run compiled (``RunMetadata``) and that both
give the same values bit for bit (only exact arithmetic in these loops); error cases run
the same graph with a feed that makes a TensorArray kernel raise, and both must raise the
same class with the same message.
"""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dataflow as df
from tests.graph_gen import quiet_numpy

EAGER = df.ConfigProto(compile_loops="eager")
INTERPRETED = df.ConfigProto(use_compiled_kernels=False, compile_loops=False)
FRAME = "while/while_context"


def _run(graph, fetches, feeds, config):
    with quiet_numpy(), df.Session(graph=graph, config=config) as sess:
        md = df.RunMetadata()
        return sess.run(fetches, feeds, run_metadata=md), md


def _same(got, want):
    for g, w in zip(got, want):
        g, w = np.asarray(g), np.asarray(w)
        assert g.dtype == w.dtype and g.shape == w.shape, (g, w)
        np.testing.assert_array_equal(g, w, strict=True)


def _outcome(graph, fetch, feeds, config):
    try:
        return _run(graph, fetch, feeds, config)[0]
    except df.errors.OpError as exc:
        return type(exc), str(exc)


elements = st.sampled_from([[], [3], [2, 3]])
dtypes = st.sampled_from([np.float32, np.float64, np.int32, np.int64])


@settings(max_examples=8, deadline=None)
@given(shape=elements, dtype=dtypes, steps=st.integers(1, 7), dynamic=st.booleans(),
       seed=st.integers(0, 2**31 - 1))
def test_read_write_size_in_a_loop_match_the_interpreter(shape, dtype, steps, dynamic, seed):
    """dynamic_rnn's pattern: an unstacked input array read per step, an output array
    written per step (dynamically sized or not, sized in the loop), stacked after it.
    One iteration at a time: the interpreter may otherwise run a later iteration's write
    before an earlier iteration's size (TF1 does too)."""
    rng = np.random.default_rng(seed)
    xv = (rng.standard_normal([steps] + shape) * 8).astype(dtype)
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(dtype, [steps] + shape)
        inputs = df.TensorArray(dtype, size=steps).unstack(x)
        outputs = df.TensorArray(dtype, size=0 if dynamic else steps, dynamic_size=dynamic)

        def body(t, acc, out, sizes):
            acc = acc * 2 + inputs.read(t)
            out = out.write(t, acc)
            return t + 1, acc, out, sizes + out.size()
        _, acc, out, sizes = df.while_loop(
            lambda t, *_: t < steps, body,
            (0, df.zeros(shape, dtype), outputs, 0), parallel_iterations=1)
        fetches = [acc, out.stack(), sizes, out.size()]
    got, md = _run(g, fetches, {x: xv}, EAGER)
    want, _ = _run(g, fetches, {x: xv}, INTERPRETED)
    assert md.compiled_frames == [FRAME], md.interpreted_frames
    _same(got, want)


@settings(max_examples=6, deadline=None)
@given(shape=elements, dtype=st.sampled_from([np.float32, np.float64]),
       steps=st.integers(1, 5), seed=st.integers(0, 2**31 - 1))
def test_gradient_arrays_made_in_the_gradient_loop_match_the_interpreter(shape, dtype, steps,
                                                                        seed):
    """The gradient loop makes both gradient arrays (TensorArrayGradV3 inside the frame):
    the read's gradient writes into one, the write's gradient reads from the other."""
    rng = np.random.default_rng(seed)
    xv = rng.standard_normal([steps] + shape).astype(dtype)
    wv = rng.standard_normal([steps] + shape).astype(dtype)
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(dtype, [steps] + shape)
        w = df.constant(wv)
        inputs = df.TensorArray(dtype, size=steps).unstack(x)
        outputs = df.TensorArray(dtype, size=steps)

        def body(t, h, out):
            h = h * 0.5 + inputs.read(t)
            return t + 1, h, out.write(t, h * h)
        _, h, out = df.while_loop(lambda t, *_: t < steps, body,
                                  (0, df.zeros(shape, dtype), outputs))
        y = df.reduce_sum(out.stack() * w) + df.reduce_sum(h)
        fetches = [y] + df.gradients(y, [x])
    got, md = _run(g, fetches, {x: xv}, EAGER)
    want, _ = _run(g, fetches, {x: xv}, INTERPRETED)
    assert md.compiled_frames == ["gradients/while_context", FRAME], md.interpreted_frames
    _same(got, want)


@settings(max_examples=6, deadline=None)
@given(shape=elements, dtype=dtypes, seed=st.integers(0, 2**31 - 1))
def test_gather_and_scatter_in_a_loop_match_the_interpreter(shape, dtype, seed):
    """Each step scatters two rows into a dynamically sized array and gathers two
    (reversed) rows of an unstacked one; clear_after_read off, so rows are read twice."""
    rng = np.random.default_rng(seed)
    xv = (rng.standard_normal([6] + shape) * 8).astype(dtype)
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(dtype, [6] + shape)
        source = df.TensorArray(dtype, size=6, clear_after_read=False).unstack(x)
        target = df.TensorArray(dtype, size=0, dynamic_size=True)

        def body(t, acc, out):
            pair = source.gather(df.stack([5 - t, t]))
            out = out.scatter(df.stack([2 * t + 1, 2 * t]), pair)
            return t + 1, acc + df.reduce_sum(pair), out
        _, acc, out = df.while_loop(lambda t, *_: t < 3, body,
                                    (0, df.zeros([], dtype), target))
        fetches = [acc, out.stack(), source.stack()]
    got, md = _run(g, fetches, {x: xv}, EAGER)
    want, _ = _run(g, fetches, {x: xv}, INTERPRETED)
    assert md.compiled_frames == [FRAME], md.interpreted_frames
    _same(got, want)


def _error_case(build, good, bad):
    """``build()`` -> (fetch, placeholder): ``good`` runs compiled and equals the
    interpreter; ``bad`` raises the same error compiled and interpreted."""
    g = df.Graph()
    with g.as_default():
        fetch, p = build()
    got, md = _run(g, fetch, {p: good}, EAGER)
    assert md.compiled_frames == [FRAME], md.interpreted_frames
    want = _run(g, fetch, {p: good}, INTERPRETED)[0]
    _same(got, want) if isinstance(fetch, list) else _same([got], [want])
    compiled = _outcome(g, fetch, {p: bad}, EAGER)
    interpreted = _outcome(g, fetch, {p: bad}, INTERPRETED)
    assert isinstance(interpreted, tuple), interpreted
    assert compiled == interpreted
    return interpreted


def _loop(body, ta, steps=3):
    return df.while_loop(lambda t, *_: t < steps, body, (0, df.zeros([2]), ta))


def test_reading_an_unwritten_element_of_unknown_shape_raises_as_interpreted():
    def build():
        k = df.placeholder(df.int32, [])
        ta = df.TensorArray(df.float32, size=4, element_shape=[None], infer_shape=False)
        ta = ta.write(0, [1.0, 2.0]).write(1, [3.0, 4.0]).write(2, [5.0, 6.0])

        def body(t, acc, ta):   # reads index k (never written when k == 3)
            return t + 1, acc + ta.read(t + k), ta
        return _loop(body, ta, 1)[1], k
    cls, message = _error_case(build, 0, 3)
    assert cls is df.errors.InvalidArgumentError and "not fully defined" in message


@pytest.mark.parametrize("case", ["double_write", "read_twice", "read_out_of_range",
                                  "write_out_of_range", "shape_mismatch"])
def test_tensor_array_errors_in_a_compiled_loop_are_the_interpreters(case):
    def build():
        k = df.placeholder(df.int32, [])
        ta = df.TensorArray(df.float32, size=3, element_shape=[2])
        if case == "double_write":      # k == 0: every step writes index 0
            body = lambda t, acc, ta: (t + 1, acc, ta.write(t * k, acc + 1.0))  # noqa: E731
        elif case == "read_twice":      # k == 0: every step reads index 0
            ta = ta.unstack(np.ones([3, 2], np.float32))
            body = lambda t, acc, ta: (t + 1, acc + ta.read(t * k), ta)  # noqa: E731
        elif case == "read_out_of_range":
            ta = ta.unstack(np.ones([3, 2], np.float32))
            body = lambda t, acc, ta: (t + 1, acc + ta.read(t + k), ta)  # noqa: E731
        elif case == "write_out_of_range":
            body = lambda t, acc, ta: (t + 1, acc, ta.write(t + k, acc))  # noqa: E731
        else:                           # k == 3: a row of 3 into elements of shape [2]
            body = lambda t, acc, ta: (  # noqa: E731
                t + 1, acc, ta.write(t, df.fill(df.stack([k]), 1.0)))
        _, acc, ta = _loop(body, ta)
        return ([acc] if case.startswith("read") else [acc, ta.stack()]), k
    good, bad = {"double_write": (1, 0), "read_twice": (1, 0), "read_out_of_range": (0, 1),
                 "write_out_of_range": (0, 1), "shape_mismatch": (2, 3)}[case]
    cls, message = _error_case(build, good, bad)
    assert cls is df.errors.InvalidArgumentError, message
