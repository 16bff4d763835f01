"""The own float32 GEMM (dataflow/kernels/numba_cpu/gemm.py, _gemm_jit.py): its result is the
FMA chain over k in order, bit for bit, for every transpose case, layout and edge tile;
the interpreter's MatMul (and its ``out=`` form) runs it in its range and NumPy's BLAS
outside it."""
from __future__ import annotations

import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dataflow as df
from dataflow.kernels import registry
from dataflow.kernels.numba_cpu import _gemm_jit, _gemm_par
from dataflow.kernels.numba_cpu.gemm import own_gemm_applies, own_gemm_enabled
from dataflow.loopc import codegen, frames
from tests.op_harness import fresh_rng

_LAYOUTS = ("C", "F", "strided", "misaligned")


def _laid_out(x, layout):
    """``x`` (float32, 2-D) as a C-ordered, Fortran-ordered, every-other-column strided, or
    byte-misaligned (a row stride that is not a whole number of elements) array."""
    if layout == "C":
        return np.ascontiguousarray(x)
    if layout == "F":
        return np.asfortranarray(x)
    if layout == "strided":
        wide = np.zeros((x.shape[0], 2 * x.shape[1]), x.dtype)
        wide[:, ::2] = x
        return wide[:, ::2]
    rows, cols = x.shape
    row_bytes = 4 * cols + 2
    buf = np.zeros(row_bytes * rows + 4, np.uint8)
    view = np.ndarray(x.shape, np.float32, buffer=buf, strides=(row_bytes, 4))
    view[...] = x
    return view


def _operands(rng, m, k, n, ta, tb, layout_a, layout_b):
    """``(A, B, a, b)``: the product's operands ``A (m, k)``, ``B (k, n)`` and the arrays
    passed with the transpose flags (``a = A^T`` stored when ``ta``...)."""
    big = rng.standard_normal((m, k)).astype(np.float32)
    other = rng.standard_normal((k, n)).astype(np.float32)
    a = _laid_out(big.T if ta else big, layout_a)
    b = _laid_out(other.T if tb else other, layout_b)
    return big, other, a, b


@settings(max_examples=60, deadline=None)
@given(m=st.integers(1, 300), k=st.integers(1, 300), n=st.integers(1, 300),
       ta=st.booleans(), tb=st.booleans(), layout_a=st.sampled_from(_LAYOUTS),
       layout_b=st.sampled_from(_LAYOUTS), seed=st.integers(0, 2**31 - 1))
def test_every_route_gives_the_fma_chain_bit_for_bit(m, k, n, ta, tb, layout_a, layout_b,
                                                      seed):
    rng = np.random.default_rng(seed)
    big, other, a, b = _operands(rng, m, k, n, ta, tb, layout_a, layout_b)
    want = _gemm_jit.fma_reference(big, other)
    out = np.full((m, n), np.nan, np.float32)
    _gemm_par.matmul_into(a, b, ta, tb, out)
    np.testing.assert_array_equal(out, want)
    np.testing.assert_array_equal(_gemm_par.matmul(a, b, ta, tb), want)
    exact = big.astype(np.float64) @ other.astype(np.float64)
    np.testing.assert_allclose(out, exact, rtol=1e-4, atol=1e-4 * np.sqrt(k))


@pytest.mark.parametrize("m, k, n", [(32, 256, 256), (256, 32, 256), (33, 17, 65),
                                     (8, 1, 31), (1, 300, 1), (4, 64, 64)])
def test_the_transpose_cases_of_one_product_agree_bit_for_bit(m, k, n):
    rng, seed = fresh_rng()
    big = rng.standard_normal((m, k)).astype(np.float32)
    other = rng.standard_normal((k, n)).astype(np.float32)
    want = _gemm_jit.fma_reference(big, other)
    for ta in (False, True):
        for tb in (False, True):
            a = np.ascontiguousarray(big.T) if ta else big
            b = np.ascontiguousarray(other.T) if tb else other
            np.testing.assert_array_equal(_gemm_par.matmul(a, b, ta, tb), want,
                                          err_msg=f"ta={ta} tb={tb} seed {seed}")


def test_an_empty_inner_dimension_gives_zeros_and_empty_outputs_stay_empty():
    out = np.full((3, 4), np.nan, np.float32)
    _gemm_par.matmul_into(np.ones((3, 0), np.float32), np.ones((0, 4), np.float32),
                          False, False, out)
    np.testing.assert_array_equal(out, np.zeros((3, 4), np.float32))
    assert _gemm_par.matmul(np.ones((0, 5), np.float32), np.ones((5, 4), np.float32),
                            False, False).shape == (0, 4)


def test_the_range_rule():
    # the RNN's three products (B=32, H=256) are in it; large and 1-row-wide ones not
    assert own_gemm_applies(32, 256, 256, False)          # h @ W
    assert own_gemm_applies(32, 256, 256, True)           # dz @ W^T
    assert own_gemm_applies(256, 256, 32, False)          # h^T @ dz
    assert not own_gemm_applies(1024, 1024, 1024, False)
    assert not own_gemm_applies(256, 256, 256, False)     # tall with a long k
    assert not own_gemm_applies(4, 256, 256, True)        # B^T with few rows
    assert not own_gemm_applies(1, 512, 512, False)
    assert own_gemm_applies(1, 256, 256, False)
    assert not own_gemm_applies(0, 4, 4, False)


def _matmul_node(a_shape, b_shape, ta=False, tb=False, dtype=df.float32):
    g = df.Graph()
    with g.as_default():
        a = df.placeholder(dtype, a_shape)
        b = df.placeholder(dtype, b_shape)
        y = df.matmul(a, b, transpose_a=ta, transpose_b=tb)
    return g, a, b, y


@pytest.mark.parametrize("ta, tb", [(False, False), (False, True), (True, False)])
def test_the_interpreter_runs_the_own_gemm_in_its_range(ta, tb):
    rng, seed = fresh_rng()
    m, k, n = 32, 96, 80
    big, other, a, b = _operands(rng, m, k, n, ta, tb, "C", "C")
    g, pa, pb, y = _matmul_node(a.shape, b.shape, ta, tb)
    with df.Session(graph=g) as sess:
        got = sess.run(y, {pa: a, pb: b})
    want = _gemm_jit.fma_reference(big, other) if own_gemm_enabled() else \
        (a.T if ta else a) @ (b.T if tb else b)
    np.testing.assert_array_equal(got, want, err_msg=f"seed {seed}")


def test_an_equal_float32_dtype_that_is_another_object_takes_the_own_gemm_too():
    """Arrays returned by Numba's disk-cached functions (and unpickled ones) carry a
    float32 dtype object of their own. Routing them by dtype identity sent them to
    OpenBLAS, and a compiled loop loaded from the disk cache then changed the
    interpreter's next product in the last bits."""
    rng, seed = fresh_rng()
    big, other, a, b = _operands(rng, 32, 64, 48, False, False, "C", "C")
    alien = pickle.loads(pickle.dumps(np.dtype(np.float32)))
    assert alien is not np.dtype(np.float32)
    a_alien, b_alien = a.view(alien), b.view(alien)
    g, pa, pb, y = _matmul_node(a.shape, b.shape)
    with df.Session(graph=g) as sess:
        want = sess.run(y, {pa: a, pb: b})
        got = sess.run(y, {pa: a_alien, pb: b_alien})
    np.testing.assert_array_equal(got, want, err_msg=f"seed {seed}")
    if own_gemm_enabled():
        np.testing.assert_array_equal(got, _gemm_jit.fma_reference(big, other))
    factory = registry.find_kernel(y.op, "CPU")
    out_factory, _ = registry.out_variant(factory)
    out = np.empty((32, 48), alien)
    out_factory(registry.KernelContext(op=y.op))(a_alien, b_alien, out)
    np.testing.assert_array_equal(out, want, err_msg=f"seed {seed}")


@pytest.mark.parametrize("m, k, n, tb", [(600, 8, 8, False), (4, 64, 64, True)])
def test_the_interpreter_keeps_numpy_blas_outside_the_range(m, k, n, tb):
    rng, seed = fresh_rng()
    assert not own_gemm_applies(m, n, k, tb)
    _, _, a, b = _operands(rng, m, k, n, False, tb, "C", "C")
    g, pa, pb, y = _matmul_node(a.shape, b.shape, tb=tb)
    with df.Session(graph=g) as sess:
        got = sess.run(y, {pa: a, pb: b})
    np.testing.assert_array_equal(got, a @ (b.T if tb else b), err_msg=f"seed {seed}")


def test_the_out_variant_writes_the_kernels_bits_into_any_layout():
    rng, seed = fresh_rng()
    big, other, a, b = _operands(rng, 32, 64, 48, False, True, "C", "C")
    g, _, _, y = _matmul_node(a.shape, b.shape, tb=True)
    factory = registry.find_kernel(y.op, "CPU")
    out_factory, alias_safe = registry.out_variant(factory)
    assert not alias_safe
    ctx = registry.KernelContext(op=y.op)
    kernel, kernel_out = factory(ctx), out_factory(ctx)
    want = kernel(a, b)
    out = np.full((32, 48), np.nan, np.float32)
    kernel_out(a, b, out)
    np.testing.assert_array_equal(out, want, err_msg=f"seed {seed}")
    if own_gemm_enabled():
        np.testing.assert_array_equal(want, _gemm_jit.fma_reference(big, other))
    column_major = np.asfortranarray(np.full((32, 48), np.nan, np.float32))
    kernel_out(a, b, column_major)            # not C-contiguous: the same bits, copied
    np.testing.assert_array_equal(column_major, want, err_msg=f"seed {seed}")
    tall = rng.standard_normal((600, 64)).astype(np.float32)   # outside the range
    assert not own_gemm_applies(600, 48, 64, True)
    into = np.zeros((600, 48), np.float32)
    kernel_out(tall, b, into)                 # NumPy's matmul(out=)
    np.testing.assert_array_equal(into, tall @ b.T, err_msg=f"seed {seed}")


def test_float64_products_keep_numpy_blas():
    rng, seed = fresh_rng()
    a, b = rng.standard_normal((32, 64)), rng.standard_normal((64, 48))
    g, pa, pb, y = _matmul_node(a.shape, b.shape, dtype=df.float64)
    with df.Session(graph=g) as sess:
        np.testing.assert_array_equal(sess.run(y, {pa: a, pb: b}), a @ b,
                                      err_msg=f"seed {seed}")


def _nested_nt_loop(batch, hidden):
    """An outer loop of 2 around an inner loop of 3 steps ``h = max(h W^T + x, 0)`` (no
    transcendental, which is only within ulp bounds compiled): W is an invariant of both
    frames, so the inner frame's ``W^T`` is copied once per inner run."""
    g = df.Graph()
    with g.as_default():
        w = df.placeholder(df.float32, [hidden, hidden])
        x = df.placeholder(df.float32, [batch, hidden])

        def inner(h):
            _, out = df.while_loop(
                lambda i, h: i < 3,
                lambda i, h: (i + 1, df.maximum(df.matmul(h, w, transpose_b=True) + x, 0.0)),
                (0, h))
            return out
        _, h = df.while_loop(lambda j, h: j < 2, lambda j, h: (j + 1, inner(h) * 0.5),
                             (0, df.zeros([batch, hidden], df.float32) + x))
    return g, w, x, h


@pytest.mark.parametrize("batch", [32, 4])     # the own GEMM on a packed W^T; OpenBLAS
def test_a_loop_invariant_transposed_operand_keeps_the_interpreters_bits(batch):
    rng, seed = fresh_rng()
    hidden = 48
    g, w, x, h = _nested_nt_loop(batch, hidden)
    feeds = {w: (rng.standard_normal((hidden, hidden)) / 8).astype(np.float32),
             x: rng.standard_normal((batch, hidden)).astype(np.float32)}
    loops = frames.recognize([h], [], list(feeds))
    source = next(codegen.generate(loop).source for loop in loops.values() if not loop.parent)
    assert source.count("gemm_pack_b(") == 1 and "gemm_packed(" in source, source
    with df.Session(graph=g, config=df.ConfigProto(compile_loops="eager")) as sess:
        md = df.RunMetadata()
        compiled = sess.run(h, feeds, run_metadata=md)
    assert "while/while_context" in md.compiled_frames, md.interpreted_frames
    with df.Session(graph=g, config=df.ConfigProto(compile_loops=False)) as sess:
        interpreted = sess.run(h, feeds)
    assert np.abs(interpreted).max() > 0
    results = [compiled, interpreted]
    np.testing.assert_array_equal(results[0], results[1], err_msg=f"seed {seed}")
    assert own_gemm_applies(batch, hidden, hidden, True) == (batch == 32)


def test_in_range_products_do_not_count_as_blas_work():
    """A step whose float32 products all take the own GEMM (static shapes in its range)
    does not wake OpenBLAS's pool to set its float mode: the woken workers spin for
    ~100 ms afterwards, taking the core a compiled loop's GEMM helper runs on."""
    from dataflow.runtime.denormals import plan_uses_blas
    from dataflow.runtime.device_set import DeviceSet
    from dataflow.runtime.kernel_resolver import KernelResolver
    from dataflow.runtime.plan import build_plan
    with df.Graph().as_default() as g:
        h = df.placeholder(df.float32, [32, 256])
        w = df.placeholder(df.float32, [256, 256])
        tall = df.placeholder(df.float32, [600, 256])
        loose = df.placeholder(df.float32, [None, 256])
        in_range = [df.matmul(h, w), df.matmul(h, w, transpose_b=True),
                    df.matmul(h, h, transpose_a=True)]
        out_of_range = [df.matmul(tall, w), df.matmul(loose, w)]
        doubles = df.matmul(df.cast(h, df.float64), df.cast(w, df.float64))
    kernels = KernelResolver(DeviceSet(g, {}, False), df.ConfigProto(), resources={})

    def uses(t):
        return plan_uses_blas(build_plan(g, [t], [], [h, w, tall, loose], kernels.kernel_for))
    assert [uses(t) for t in in_range] == [not own_gemm_enabled()] * 3
    assert [uses(t) for t in out_of_range] == [True, True]   # unknown rows: may be large
    assert uses(doubles)
