"""What makes compiled loops fast, checked for behaviour: MatMul through the interpreter's
kernels (the own float32 GEMM or NumPy's own BLAS: same bits, any layout, subnormals
flushed by the pool the runtime sets), the scalar code that needs no helper calls, and
stacks that grow and hand back views."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from numba import njit

import dataflow as df
from dataflow.kernels.numba_cpu._gemm_jit import fma_reference
from dataflow.kernels.numba_cpu.gemm import own_gemm_applies, own_gemm_enabled
from dataflow.loopc import codegen, frames, nbhelpers
from dataflow.util import float_env

EAGER = df.ConfigProto(compile_loops="eager")
OFF = df.ConfigProto(compile_loops=False)


@njit
def _gemm(a, b, ta, tb):
    return nbhelpers.gemm(a, b, ta, tb)


def _layouts(x):
    """``x`` as C-ordered, Fortran-ordered and strided (every other column) arrays."""
    wide = np.zeros((x.shape[0], 2 * x.shape[1]), x.dtype)
    wide[:, ::2] = x
    return [np.ascontiguousarray(x), np.asfortranarray(x), wide[:, ::2]]


def test_gemm_calls_the_blas_numpy_links():
    # NumPy's wheels bundle OpenBLAS; any NumPy built with a CBLAS exports cblas_?gemm.
    found = nbhelpers.numpy_blas()
    assert set(found) == {"float32", "float64"}
    assert all("gemm" in name for name, _ in found.values())


@settings(max_examples=12, deadline=None)
@given(m=st.integers(0, 9), k=st.integers(0, 40), n=st.integers(0, 9),
       dtype=st.sampled_from([np.float32, np.float64]), ta=st.booleans(), tb=st.booleans(),
       seed=st.integers(0, 2**31 - 1))
def test_gemm_equals_numpy_matmul_for_every_layout(m, k, n, dtype, ta, tb, seed):
    rng = np.random.default_rng(seed)
    a = rng.standard_normal((k, m) if ta else (m, k)).astype(dtype)
    b = rng.standard_normal((n, k) if tb else (k, n)).astype(dtype)
    for la in _layouts(a):
        for lb in _layouts(b):
            got = _gemm(la, lb, ta, tb)
            # NumPy's own result depends on the operands' layouts (OpenBLAS's small-matrix
            # kernels accumulate in another order for Fortran-ordered operands on some
            # CPUs: seen on an Intel Xeon with the Haswell kernels, m=2 k=16 n=2 float64),
            # so the reference is NumPy's matmul of the same arrays the interpreter holds.
            want = (la.T if ta else la) @ (lb.T if tb else lb)
            assert got.shape == want.shape and got.dtype == want.dtype
            if dtype == np.float32 and own_gemm_enabled() and own_gemm_applies(m, n, k, tb):
                # the interpreter's MatMul runs the own GEMM here: its defined FMA chain
                # over k, whatever the layouts
                want = fma_reference(np.ascontiguousarray(la.T if ta else la),
                                     np.ascontiguousarray(lb.T if tb else lb))
                np.testing.assert_array_equal(got, want)
            elif min(m, n) >= 2:
                # the same cblas_?gemm NumPy calls for matrices: the same bits
                np.testing.assert_array_equal(got, want)
            else:
                # NumPy uses a dot/gemv kernel for vectors (other summation order)
                np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


def test_gemm_of_mismatched_inner_dimensions_falls_back():
    with pytest.raises(nbhelpers.Fallback):
        _gemm(np.ones((2, 3)), np.ones((4, 2)), False, False)


def _rnn(steps, batch, hidden, dtype=df.float32):
    g = df.Graph()
    with g.as_default():
        w = df.placeholder(dtype, [hidden, hidden])
        x = df.placeholder(dtype, [batch, hidden])
        h0 = df.placeholder(dtype, [batch, hidden])
        _, h = df.while_loop(lambda i, h: i < steps,
                             lambda i, h: (i + 1, df.matmul(h, w) + x), (0, h0))
        grads = df.gradients(df.reduce_sum(h), [w, x])
    return g, (w, x, h0), h, grads


def test_compiled_matmul_loop_and_its_gradient_equal_the_interpreter_bit_for_bit():
    rng = np.random.default_rng(7)
    g, (w, x, h0), h, grads = _rnn(5, 4, 16, df.float64)
    feeds = {w: rng.standard_normal((16, 16)) / 4, x: rng.standard_normal((4, 16)),
             h0: rng.standard_normal((4, 16))}
    with df.Session(graph=g, config=EAGER) as sess:
        md = df.RunMetadata()
        compiled = sess.run([h] + list(grads), feeds, run_metadata=md)
    assert md.compiled_frames == ["gradients/while_context", "while/while_context"], \
        md.interpreted_frames
    with df.Session(graph=g, config=OFF) as sess:
        interpreted = sess.run([h] + list(grads), feeds)
    for c, i in zip(compiled, interpreted):
        np.testing.assert_array_equal(c, i)


@pytest.mark.parametrize("flush", [True, False])
def test_compiled_matmul_runs_in_the_sessions_denormal_mode(flush):
    """The product of 1e-21-sized float32 matrices is subnormal: a flushing session's
    compiled loop gets zeros (its BLAS threads included: 256 x 256 is a threaded GEMM),
    an IEEE one keeps them (as does a flushing one where the CPU's mode cannot be set)."""
    g = df.Graph()
    with g.as_default():
        a = df.placeholder(df.float32, [256, 256])
        _, out = df.while_loop(lambda i, p: i < 2,
                               lambda i, p: (i + 1, df.matmul(a, a)),
                               (0, df.zeros([256, 256], df.float32)))
    feed = {a: np.full((256, 256), 1e-21, np.float32)}
    config = df.ConfigProto(compile_loops="eager", flush_denormals=flush)
    with df.Session(graph=g, config=config) as sess:
        md = df.RunMetadata()
        value = sess.run(out, feed, run_metadata=md)
    assert md.compiled_frames == ["while/while_context"], md.interpreted_frames
    if flush and float_env.supported():
        assert float_env.count_subnormals(value) == 0
        assert not value.any()
    else:
        assert float_env.count_subnormals(value) == value.size


# -- scalar code without helper calls --------------------------------------------------------

def _frame_source(graph, fetches, feeds):
    loops = frames.recognize(fetches, [], list(feeds))
    return {name: codegen.generate(loop).source for name, loop in loops.items()
            if not loop.parent and loop.reason is None}


def test_scalar_loops_are_generated_without_helper_calls():
    g = df.Graph()
    with g.as_default():
        w = df.placeholder(df.float64, [])

        def body(i, acc):
            acc = df.cond(df.equal(i % 2, 0), lambda: acc + w, lambda: acc * 0.5)
            return i + 1, acc
        _, result = df.while_loop(lambda i, acc: i < 100, body,
                                  (0, df.constant(0.0, df.float64)))
        (grad_w,) = df.gradients(result, [w])
    sources = _frame_source(g, [grad_w], {w: 1.5})
    assert sorted(sources) == ["gradients/while_context", "while/while_context"]
    for text in sources.values():
        for helper in ("cst(", "truth(", "check_divisor("):
            assert helper not in text, text
    with df.Session(graph=g, config=EAGER) as sess:
        got = sess.run(grad_w, {w: 1.5})
    with df.Session(graph=g, config=OFF) as sess:
        want = sess.run(grad_w, {w: 1.5})
    assert got == want


def test_a_scalar_division_by_zero_in_a_compiled_loop_raises_the_interpreters_error():
    g = df.Graph()
    with g.as_default():
        d = df.placeholder(df.int32, [])
        _, r = df.while_loop(lambda i, r: i < 3, lambda i, r: (i + 1, r + i // d), (0, 0))
    assert "check_divisor(" not in "".join(_frame_source(g, [r], {d: 1}).values())
    with df.Session(graph=g, config=EAGER) as sess:
        assert sess.run(r, {d: 1}) == 3
        with pytest.raises(df.errors.InvalidArgumentError):
            sess.run(r, {d: 0})


@pytest.mark.parametrize("text, want", [
    ("cst((a + b), 'int32')", "np.int32((a + b))"),
    ("cst(cst(a, 'int64') * cst(b, 'int64'), 'int64')", "np.int64(np.int64(a) * np.int64(b))"),
    ("cst((a < b), 'bool')", "((a < b) != 0)"),
    ("stack_push(s, n, cst(v, 'float32'))", "stack_push(s, n, np.float32(v))"),
    ("cst(ew2('Maximum', f(a, ')'), b), 'float64')", "np.float64(ew2('Maximum', f(a, ')'), b))"),
    ("cst(x, dt)", "cst(x, dt)"),            # not a dtype literal: left alone
    ("recast(x, 'int32')", "recast(x, 'int32')"),
])
def test_scalar_casts_rewrite_only_cst_calls(text, want):
    assert codegen._scalar_casts(text) == want


# -- stacks ---------------------------------------------------------------------------------

@njit
def _push_all(values):
    buf = np.empty((0,) + values.shape[1:], values.dtype)
    for n in range(values.shape[0]):
        buf = nbhelpers.stack_push(buf, n, values[n])
    return buf


@njit
def _push_all_scalars(values):
    buf = np.empty(0, values.dtype)
    for n in range(values.shape[0]):
        buf = nbhelpers.stack_push(buf, n, values[n])
    return buf


@pytest.mark.parametrize("count", [0, 1, 16, 17, 100])
def test_stacks_grow_by_doubling_and_keep_every_entry(count):
    rng = np.random.default_rng(count)
    values = rng.standard_normal((count, 3, 2))
    buf = _push_all(values)
    assert buf.shape[0] >= count and buf.shape[1:] == (3, 2)
    np.testing.assert_array_equal(buf[:count], values)
    scalars = rng.integers(-9, 9, count).astype(np.int32)
    sbuf = _push_all_scalars(scalars)
    np.testing.assert_array_equal(sbuf[:count], scalars)
    assert sbuf.dtype == np.int32


def test_a_push_of_another_shape_falls_back():
    @njit
    def two(a, b):
        buf = nbhelpers.stack_push(np.empty((0, 2)), 0, a)
        return nbhelpers.stack_push(buf, 1, b)
    assert two(np.ones(2), np.ones(2)).shape[1:] == (2,)
    with pytest.raises(nbhelpers.Fallback):
        two(np.ones(2), np.ones(3))


def _runners(sess):
    """The FrameRunners of ``sess``'s cached plans."""
    out = []
    for plan in sess._plans.values():
        for frame_plan in plan.frames.values():
            if getattr(frame_plan, "compiled", None) is not None:
                out.append(frame_plan.compiled)
    return out


def test_push_buffers_are_reused_only_when_nothing_holds_them():
    rng = np.random.default_rng(11)
    g, (w, x, h0), h, grads = _rnn(20, 3, 8, df.float64)

    def feeds():
        return {w: rng.standard_normal((8, 8)) / 3, x: rng.standard_normal((3, 8)),
                h0: rng.standard_normal((3, 8))}
    with df.Session(graph=g, config=EAGER) as sess, \
            df.Session(graph=g, config=OFF) as ref:
        first = feeds()
        np.testing.assert_array_equal(sess.run(grads[0], first), ref.run(grads[0], first))
        (forward,) = [r for r in _runners(sess) if r.spare]
        buffers = {k: id(b) for k, b in forward.spare.items()}
        held = {k: b[:20].copy() for k, b in forward.spare.items()}
        views = {k: b[:20] for k, b in forward.spare.items()}    # someone holds entries
        second = feeds()
        np.testing.assert_array_equal(sess.run(grads[0], second), ref.run(grads[0], second))
        for k, view in views.items():        # not written over: a new buffer was used
            np.testing.assert_array_equal(view, held[k])
            assert id(forward.spare[k]) != buffers[k]
        del views, view
        buffers = {k: id(b) for k, b in forward.spare.items()}
        third = feeds()
        np.testing.assert_array_equal(sess.run(grads[0], third), ref.run(grads[0], third))
        assert {k: id(b) for k, b in forward.spare.items()} == buffers   # reused
