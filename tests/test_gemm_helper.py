"""The own GEMM on two cores (dataflow/kernels/numba_cpu/_gemm_par.py): a helper thread
takes chunks of a product's output; the result stays the FMA chain over k bit for bit
whoever computes a chunk, callers never wait for a helper that does not come, the helper
takes only products of its own float mode, and compiled loops use it only when kernels
may use two threads."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dataflow as df
from dataflow.kernels.numba_cpu import _gemm_par as gp
from dataflow.kernels.numba_cpu._gemm_jit import fma_reference
from dataflow.kernels.numba_cpu.gemm import own_gemm_enabled
from dataflow.loopc import runner
from dataflow.runtime.thread_limits import kernel_threads, thread_limit
from dataflow.util import float_env
from tests.op_harness import fresh_rng


@pytest.fixture(scope="module")
def helper():
    h = gp.GemmHelper()
    yield h
    h.stop()


def _awake(h, flush):
    """Wake ``h`` in mode ``flush`` and wait until it spins in that mode."""
    h.wake(flush)
    deadline = time.monotonic() + 30     # the first wake compiles worker_loop
    while not (h.ctl[gp.ACTIVE] and h._mode is flush):
        assert time.monotonic() < deadline, "the helper never started spinning"
        time.sleep(0.001)
        h.wake(flush)


def _product(rng, m, k, n, ta, tb):
    big = rng.standard_normal((m, k)).astype(np.float32)
    other = rng.standard_normal((k, n)).astype(np.float32)
    a = np.ascontiguousarray(big.T) if ta else big
    b = np.ascontiguousarray(other.T) if tb else other
    return big, other, a, b


@settings(max_examples=25, deadline=None)
@given(m=st.integers(1, 300), k=st.integers(1, 300), n=st.integers(1, 300),
       ta=st.booleans(), tb=st.booleans(), seed=st.integers(0, 2**31 - 1))
def test_shared_products_are_the_fma_chain_bit_for_bit(helper, m, k, n, ta, tb, seed):
    rng = np.random.default_rng(seed)
    big, other, a, b = _product(rng, m, k, n, ta, tb)
    before = float_env.flush_denormals_on_this_thread(True)
    try:
        _awake(helper, True)
        want = fma_reference(big, other)
        for _ in range(3):
            out = np.full((m, n), np.nan, np.float32)
            gp.matmul_into_par(a, b, ta, tb, out, helper.ctl)
            np.testing.assert_array_equal(out, want)
    finally:
        float_env.flush_denormals_on_this_thread(before)


def test_the_helper_computes_chunks_of_the_rnn_products(helper):
    rng, seed = fresh_rng()
    before = float_env.flush_denormals_on_this_thread(True)
    try:
        cases = [_product(rng, 32, 256, 256, False, False), _product(rng, 32, 256, 256, False, True),
                 _product(rng, 256, 32, 256, True, False)]
        wants = [fma_reference(big, other) for big, other, _, _ in cases]
        start = helper.ctl[gp.HELPER_CHUNKS]
        deadline = time.monotonic() + 30
        while helper.ctl[gp.HELPER_CHUNKS] == start:
            assert time.monotonic() < deadline, "the helper took no chunk in 30 s"
            _awake(helper, True)
            for (_, _, a, b), (ta, tb), want in zip(cases, [(False, False), (False, True),
                                                            (True, False)], wants):
                out = np.empty_like(want)
                gp.matmul_into_par(a, b, ta, tb, out, helper.ctl)
                np.testing.assert_array_equal(out, want, err_msg=f"seed {seed}")
    finally:
        float_env.flush_denormals_on_this_thread(before)


def test_concurrent_callers_share_one_block_safely(helper):
    """Callers that lose the block's lock run their product alone; none sees another's
    chunks."""
    rng, seed = fresh_rng()
    before = float_env.flush_denormals_on_this_thread(True)
    _awake(helper, True)
    errors = []

    def caller(index):
        float_env.flush_denormals_on_this_thread(True)
        local = np.random.default_rng(seed + index)
        big, other, a, b = _product(local, 32 + index, 256, 256, False, index % 2 == 1)
        want = fma_reference(big, other)
        out = np.empty_like(want)
        for _ in range(150):
            helper.wake(True)
            gp.matmul_into_par(a, b, False, index % 2 == 1, out, helper.ctl)
            if not np.array_equal(out, want):
                errors.append(index)
                return

    try:
        threads = [threading.Thread(target=caller, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        assert not any(t.is_alive() for t in threads), "a caller hung"
        assert errors == [], f"wrong products from callers {errors} (seed {seed})"
        assert helper.ctl[gp.LOCK] == 0
    finally:
        float_env.flush_denormals_on_this_thread(before)


def test_the_helper_takes_no_product_of_another_float_mode(helper):
    """A helper flushing subnormals leaves a caller that keeps them to do its product
    alone: the subnormal results survive, bit for bit."""
    tiny = np.full((32, 64), 1e-20, np.float32)
    b = np.full((64, 256), 1e-21, np.float32)       # 64 * 1e-41: subnormal sums
    _awake(helper, True)
    before = float_env.flush_denormals_on_this_thread(False)
    try:
        want = fma_reference(tiny, b)
        assert float_env.count_subnormals(want) == want.size
        start = helper.ctl[gp.HELPER_CHUNKS]
        for _ in range(200):
            _awake(helper, True)                   # spinning, in flush mode
            out = np.empty_like(want)
            gp.matmul_into_par(tiny, b, False, False, out, helper.ctl)
            np.testing.assert_array_equal(out, want)
        assert helper.ctl[gp.HELPER_CHUNKS] == start
        float_env.flush_denormals_on_this_thread(True)
        flushed = np.empty_like(want)
        gp.matmul_into_par(tiny, b, False, False, flushed, helper.ctl)
        assert not flushed.any()                   # every subnormal flushed to zero
    finally:
        float_env.flush_denormals_on_this_thread(before)


def test_a_block_whose_helper_never_comes_costs_no_wait():
    """After a fork, or with the helper descheduled, a block may say "active" with nobody
    serving it: the caller claims every chunk itself."""
    rng, seed = fresh_rng()
    ctl = gp.idle_control()
    ctl[gp.ACTIVE] = 1
    big, other, a, b = _product(rng, 32, 256, 256, False, False)
    out = np.empty((32, 256), np.float32)
    gp.matmul_into_par(a, b, False, False, out, ctl)
    np.testing.assert_array_equal(out, fma_reference(big, other), err_msg=f"seed {seed}")
    assert ctl[gp.LOCK] == 0 and ctl[gp.HELPER_CHUNKS] == 0
    assert ctl[gp.WORD] & 0xFFFF == 256 // 32       # every chunk claimed, by the caller


def test_an_idle_helper_goes_back_to_sleep():
    h = gp.GemmHelper()
    _awake(h, False)
    deadline = time.monotonic() + 10
    while h.ctl[gp.ACTIVE]:                        # ~1 ms of cycles without a product
        assert time.monotonic() < deadline, "the helper kept spinning with nothing to do"
        time.sleep(0.001)
    _awake(h, False)                               # and wakes again
    h.stop()
    assert h.ctl[gp.ACTIVE] == 0


def test_compiled_loops_use_the_helper_only_when_kernels_may_use_two_threads():
    with thread_limit(1)():
        assert kernel_threads() == 1
        assert runner.gemm_helper_block() is runner._IDLE_BLOCK
    with thread_limit(2)():
        assert kernel_threads() == 2
        block = runner.gemm_helper_block()
        if own_gemm_enabled():
            assert block is gp.shared_helper().ctl
        else:
            assert block is runner._IDLE_BLOCK
    assert runner._IDLE_BLOCK.sum() == 0           # nobody ever writes the idle block


def test_a_two_thread_session_gives_the_one_thread_bits():
    """The compare suite's RNN gradient shapes in compiled loops: a session that lets
    kernels use two threads (the helper shares the products) and one that keeps them
    on one thread give the same bits."""
    rng, seed = fresh_rng()
    steps, batch, hidden = 20, 32, 256
    w = (rng.standard_normal((hidden, hidden)) / np.sqrt(hidden)).astype(np.float32)
    x = rng.standard_normal((batch, hidden)).astype(np.float32)
    g = df.Graph()
    with g.as_default():
        wt, xt = df.Variable(w), df.placeholder(df.float32, [batch, hidden])
        _, h = df.while_loop(lambda i, h: i < steps,
                             lambda i, h: (i + 1, df.tanh(df.matmul(h, wt) + xt)),
                             (0, df.zeros([batch, hidden])))
        grad = df.gradients(df.reduce_sum(h), [wt])[0]
        init = df.global_variables_initializer()
    results = []
    for threads in (1, 2):
        config = df.ConfigProto(compile_loops="eager", intra_op_parallelism_threads=threads)
        with df.Session(graph=g, config=config) as sess:
            sess.run(init)
            md = df.RunMetadata()
            results.append(sess.run([h, grad], {xt: x}, run_metadata=md))
            assert len(md.compiled_frames) == 2, md.interpreted_frames
    for one, two in zip(*results):
        np.testing.assert_array_equal(two, one, err_msg=f"seed {seed}")
