"""Compiled loops that write into buffers they own: a gradient loop's accumulator
(``total = total + v``) summed in place. Checked against the interpreter bit for bit, and
for what must not happen: the caller's starting buffer, or a value something else still
reads, written over."""
from __future__ import annotations

import re

import numpy as np

import dataflow as df
from dataflow.kernels.numba_cpu.gemm import own_gemm_applies
from dataflow.loopc import codegen, frames
from tests.op_harness import fresh_rng

EAGER = df.ConfigProto(compile_loops="eager")
OFF = df.ConfigProto(compile_loops=False)


def _sources(fetches, feeds):
    loops = frames.recognize(fetches, [], list(feeds))
    return {name: codegen.generate(loop).source for name, loop in loops.items()
            if not loop.parent and loop.reason is None}


def _run_both(graph, fetches, feeds):
    with df.Session(graph=graph, config=EAGER) as sess:
        md = df.RunMetadata()
        compiled = sess.run(fetches, feeds, run_metadata=md)
        again = sess.run(fetches, feeds)
    with df.Session(graph=graph, config=OFF) as sess:
        interpreted = sess.run(fetches, feeds)
    return md, compiled, again, interpreted


def _max_cell_rnn_gradient(rng, batch, hidden, steps):
    """``(graph, [dW, dx], feeds)`` of ``sum(h_T)`` for ``h = max(h @ W + x, 0)`` run
    ``steps`` times (W scaled by 1/sqrt(hidden) so h stays of order one)."""
    g = df.Graph()
    with g.as_default():
        w = df.placeholder(df.float32, [hidden, hidden])
        x = df.placeholder(df.float32, [batch, hidden])
        _, h = df.while_loop(lambda i, h: i < steps,
                             lambda i, h: (i + 1, df.maximum(df.matmul(h, w) + x, 0.0)),
                             (0, df.zeros([batch, hidden], df.float32)))
        grads = df.gradients(df.reduce_sum(h), [w, x])
    feeds = {w: (rng.standard_normal((hidden, hidden)) / np.sqrt(hidden)).astype(np.float32),
             x: rng.standard_normal((batch, hidden)).astype(np.float32)}
    return g, grads, feeds


def test_the_rnn_gradient_accumulates_in_place_and_equals_the_interpreter():
    # A cell without transcendentals (those are within ulp bounds, not bit for bit).
    rng, seed = fresh_rng()
    g, grads, feeds = _max_cell_rnn_gradient(rng, batch=4, hidden=16, steps=7)
    source = _sources(grads, feeds)["gradients/while_context"]
    assert source.count("acc_add(") == 2, source      # dW and dx
    md, compiled, again, interpreted = _run_both(g, grads, feeds)
    assert md.compiled_frames == ["gradients/while_context", "while/while_context"], \
        md.interpreted_frames
    for c, a, i in zip(compiled, again, interpreted):
        np.testing.assert_array_equal(c, i, err_msg=f"seed {seed}")
        np.testing.assert_array_equal(a, i, err_msg=f"seed {seed}")


def _sum_loop(start, extra_use):
    """``total += v[i]`` over the rows of ``v``; with ``extra_use`` the body also reads
    ``total`` elsewhere (its old buffer is then not the Add's alone)."""
    g = df.Graph()
    with g.as_default():
        v = df.placeholder(df.float64, [5, 3, 4])
        t0 = df.placeholder(df.float64, [3, 4]) if start is None else df.constant(start)

        def body(i, total, side):
            row = df.gather(v, i)
            if extra_use:
                side = side + total * 2.0
            return i + 1, total + row, side
        _, total, side = df.while_loop(lambda i, t, s: i < 5, body,
                                       (0, t0, df.zeros([3, 4], df.float64)))
    return g, v, t0, total, side


def test_the_callers_starting_buffer_is_left_as_it_was():
    rng, seed = fresh_rng()
    g, v, t0, total, _ = _sum_loop(None, extra_use=False)
    start = rng.standard_normal((3, 4))
    kept = start.copy()
    feeds = {v: rng.standard_normal((5, 3, 4)), t0: start}
    assert "acc_add(" in _sources([total], feeds)["while/while_context"]
    md, compiled, again, interpreted = _run_both(g, total, feeds)
    assert md.compiled_frames == ["while/while_context"], md.interpreted_frames
    np.testing.assert_array_equal(start, kept, err_msg=f"seed {seed}")
    np.testing.assert_array_equal(compiled, interpreted, err_msg=f"seed {seed}")
    np.testing.assert_array_equal(again, interpreted, err_msg=f"seed {seed}")


def test_a_read_only_start_is_summed_into_a_copy():
    rng, seed = fresh_rng()
    start = rng.standard_normal((3, 4))
    g, v, _, total, _ = _sum_loop(start, extra_use=False)   # a constant: read-only
    feeds = {v: rng.standard_normal((5, 3, 4))}
    md, compiled, again, interpreted = _run_both(g, total, feeds)
    assert md.compiled_frames == ["while/while_context"], md.interpreted_frames
    np.testing.assert_array_equal(compiled, interpreted, err_msg=f"seed {seed}")
    np.testing.assert_array_equal(again, interpreted, err_msg=f"seed {seed}")


def test_a_total_read_elsewhere_in_the_body_is_not_summed_in_place():
    rng, seed = fresh_rng()
    g, v, t0, total, side = _sum_loop(None, extra_use=True)
    feeds = {v: rng.standard_normal((5, 3, 4)), t0: rng.standard_normal((3, 4))}
    source = _sources([total, side], feeds)["while/while_context"]
    assert source.count("acc_add(") == 1, source      # `side` only, not `total`
    md, compiled, _, interpreted = _run_both(g, [total, side], feeds)
    assert md.compiled_frames == ["while/while_context"], md.interpreted_frames
    for c, i in zip(compiled, interpreted):
        np.testing.assert_array_equal(c, i, err_msg=f"seed {seed}")


def test_a_sum_that_broadcasts_is_added_out_of_place():
    """A loop variable of unknown shape that starts as [1, 4] and grows to [3, 4] on
    its first Add: the shapes differ, so the sum is a new array (as the Add computes
    it), and the loop goes on in place once they agree."""
    rng, seed = fresh_rng()
    g = df.Graph()
    with g.as_default():
        v = df.placeholder(df.float64, [5, 3, 4])
        t0 = df.placeholder(df.float64, [None, 4])
        _, total = df.while_loop(lambda i, t: i < 5,
                                 lambda i, t: (i + 1, t + df.gather(v, i)), (0, t0),
                                 shape_invariants=[df.TensorShape([]),
                                                   df.TensorShape([None, 4])])
    feeds = {v: rng.standard_normal((5, 3, 4)), t0: rng.standard_normal((1, 4))}
    assert "acc_add(" in _sources([total], feeds)["while/while_context"]
    md, compiled, _, interpreted = _run_both(g, total, feeds)
    assert md.compiled_frames == ["while/while_context"], md.interpreted_frames
    assert compiled.shape == (3, 4)
    np.testing.assert_array_equal(compiled, interpreted, err_msg=f"seed {seed}")


# -- elementwise loops and inlining ------------------------------------------------------------

def test_a_chain_of_elementwise_ops_is_one_loop_with_the_interpreters_bits():
    """``(h @ w + x) * 0.5 - x`` after the GEMM: one flat loop (nothing in between is an
    array of its own), the same bits as the interpreter's NumPy kernels."""
    rng, seed = fresh_rng()
    g = df.Graph()
    with g.as_default():
        w = df.placeholder(df.float64, [8, 8])
        x = df.placeholder(df.float64, [3, 8])
        _, h = df.while_loop(lambda i, h: i < 6,
                             lambda i, h: (i + 1, (df.matmul(h, w) + x) * 0.5 - x),
                             (0, df.ones([3, 8], df.float64)))
    feeds = {w: rng.standard_normal((8, 8)), x: rng.standard_normal((3, 8))}
    source = _sources([h], feeds)["while/while_context"]
    assert source.count("for ") == 1 and "_f[" in source, source
    md, compiled, again, interpreted = _run_both(g, h, feeds)
    assert md.compiled_frames == ["while/while_context"], md.interpreted_frames
    np.testing.assert_array_equal(compiled, interpreted, err_msg=f"seed {seed}")
    np.testing.assert_array_equal(again, interpreted, err_msg=f"seed {seed}")


def test_an_elementwise_loop_with_operands_that_broadcast_takes_the_array_expression():
    """``h + b`` with ``b`` of shape [1, 4] and ``h`` of [3, 4]: same rank, other shapes,
    so the run-time test sends it to the broadcasting expression."""
    rng, seed = fresh_rng()
    g = df.Graph()
    with g.as_default():
        b = df.placeholder(df.float32, [None, 4])
        h0 = df.placeholder(df.float32, [3, 4])
        _, h = df.while_loop(lambda i, h: i < 4,
                             lambda i, h: (i + 1, df.tanh(h * 0.5 + b)), (0, h0))
    feeds = {b: rng.standard_normal((1, 4)).astype(np.float32),
             h0: rng.standard_normal((3, 4)).astype(np.float32)}
    assert "_f[" in _sources([h], feeds)["while/while_context"]
    md, compiled, _, interpreted = _run_both(g, h, feeds)
    assert md.compiled_frames == ["while/while_context"], md.interpreted_frames
    # tanh is the approximation of dataflow.kernels.approx (a few ulp) in both paths
    np.testing.assert_allclose(compiled, interpreted, rtol=4e-6, atol=1e-7,
                               err_msg=f"seed {seed}")
    with df.Session(graph=g, config=EAGER) as sess:
        feeds[b] = np.tile(feeds[b], (3, 1))            # now the loop path
        looped = sess.run(h, feeds)
    with df.Session(graph=g, config=OFF) as sess:
        np.testing.assert_allclose(looped, sess.run(h, feeds), rtol=4e-6, atol=1e-7,
                                   err_msg=f"seed {seed}")


def test_a_value_read_twice_is_computed_once_and_not_inlined():
    rng, seed = fresh_rng()
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float64, [2, 5])
        _, h = df.while_loop(lambda i, h: i < 3,
                             lambda i, h: (i + 1, (lambda s: s * s + s)(h - x)), (0, x))
    feeds = {x: rng.standard_normal((2, 5))}
    source = _sources([h], feeds)["while/while_context"]
    assert source.count("for ") == 2, source     # h - x, then s * s + s over it
    md, compiled, _, interpreted = _run_both(g, h, feeds)
    assert md.compiled_frames == ["while/while_context"], md.interpreted_frames
    np.testing.assert_array_equal(compiled, interpreted, err_msg=f"seed {seed}")


def test_a_variable_read_is_not_inlined_past_its_assignment():
    """``y = v * 2`` read after ``v`` is assigned in the same iteration must see the
    value read before the assignment."""
    rng, seed = fresh_rng()
    start = rng.standard_normal((2, 3))
    g = df.Graph()
    with g.as_default():
        v = df.Variable(start, name="v")
        init = df.global_variables_initializer()

        def body(i, acc):
            read = v.read_value()
            doubled = read * 2.0              # only consumer: the Mul after the assign
            assign = v.assign(read + 1.0)
            with df.control_dependencies([assign]):
                return i + 1, acc + doubled * 1.0
        _, total = df.while_loop(lambda i, a: i < 3, body,
                                 (0, df.zeros([2, 3], df.float64)))
    results = []
    for config in (EAGER, OFF):
        with df.Session(graph=g, config=config) as sess:
            sess.run(init)
            md = df.RunMetadata()
            results.append(sess.run(total, run_metadata=md))
            if config is EAGER:
                assert md.compiled_frames == ["while/while_context"], md.interpreted_frames
    np.testing.assert_array_equal(results[0], results[1], err_msg=f"seed {seed}")
    np.testing.assert_allclose(results[0], 2 * (3 * start + 3), err_msg=f"seed {seed}")


def test_the_benchmark_sized_rnn_gradient_equals_the_interpreter_bit_for_bit():
    # The compare suite's rnn_grad shapes (B=32, H=256, float32), whose three products
    # per step (h @ W, h^T dz, dz W^T) take OpenBLAS's large-matrix and threaded paths
    # that the small test above never reaches; a max cell, as transcendentals are only
    # within ulp bounds. The compiled frame passes the interpreter's transposes as flags,
    # and its gemm picks the interpreter's kernel for them: the own float32 GEMM for all
    # three products where it is on (AVX-512 hosts), NumPy's cblas_sgemm elsewhere.
    rng, seed = fresh_rng()
    g, grads, feeds = _max_cell_rnn_gradient(rng, batch=32, hidden=256, steps=12)
    source = _sources(grads, feeds)["gradients/while_context"]
    # dz W^T: W's transpose copied once before the loop (W is invariant), W and the flag
    # kept for the BLAS path; h^T dz with h's transpose as a flag: the interpreter's calls
    packed = re.search(r"(\w+) = gemm_pack_b\((\w+)\)", source)
    assert packed, source
    assert re.search(rf"gemm_packed\(\w+, {packed[2]}, {packed[1]}, False, par\)", source), source
    assert re.search(r"gemm_par\(\w+, \w+, True, False, par\)", source), source
    assert source.index(packed[0]) < source.index("while True:")
    assert all(own_gemm_applies(m, n, k, tb) for m, n, k, tb in
               ((32, 256, 256, False), (32, 256, 256, True), (256, 256, 32, False)))
    md, compiled, again, interpreted = _run_both(g, grads, feeds)
    assert md.compiled_frames == ["gradients/while_context", "while/while_context"], \
        md.interpreted_frames
    assert np.abs(compiled[0]).max() > 0 and np.isfinite(compiled[0]).all()
    for c, a, i in zip(compiled, again, interpreted):
        np.testing.assert_array_equal(c, i, err_msg=f"seed {seed}")
        np.testing.assert_array_equal(a, i, err_msg=f"seed {seed}")
