"""``ConfigProto(flush_denormals=...)``: subnormal floats flushed to zero (FTZ and DAZ) on
every thread that runs a kernel, IEEE subnormals kept with ``False``.

References: NumPy computing the same values in IEEE mode, with the subnormal results
set to signed zeros (what FTZ gives) and subnormal inputs read as zeros (DAZ). Every
test checks both settings, so a flush that does not happen (or happens where it must
not) fails. Subnormals are counted by bit pattern (float_env.count_subnormals), which a
thread's DAZ mode cannot hide.
"""
from __future__ import annotations

import platform
import re
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import dataflow as df
from dataflow.util import float_env
from dataflow.util.float_env import count_subnormals

F32_TINY = np.finfo(np.float32).tiny

# This suite runs on x86-64 (and aarch64): the mode must be settable there.
SETTABLE = platform.machine().lower() in ("x86_64", "amd64", "aarch64", "arm64")


def flushed(values):
    """IEEE ``values`` as FTZ gives them: subnormals become zeros of the same sign
    (computed on the bit patterns, so the calling thread's mode does not matter)."""
    v = np.array(values, copy=True)
    info = np.finfo(v.dtype)
    bits = v.view(f"u{v.dtype.itemsize}")
    sign = bits.dtype.type(1) << bits.dtype.type(info.bits - 1)
    exponent = bits & (((1 << info.nexp) - 1) << info.nmant)
    bits[exponent == 0] &= sign          # a subnormal (or zero) keeps only its sign
    return v


def same_bits(actual, expected):
    """Equal bit for bit (so +0 differs from -0 and a subnormal from zero)."""
    a, e = np.asarray(actual), np.asarray(expected)
    assert a.dtype == e.dtype and a.shape == e.shape
    np.testing.assert_array_equal(a.view(f"u{a.dtype.itemsize}"), e.view(f"u{e.dtype.itemsize}"))


def tiny_factors(rng, n):
    """Normal float32 values whose pairwise products are mostly subnormal (~1e-40)
    and some normal ones (~1e-30), with both signs."""
    scale = np.where(rng.random(n) < 0.8, 1e-20, 1e-15)
    sign = np.where(rng.random(n) < 0.5, -1.0, 1.0)
    return (rng.uniform(0.5, 1.5, n) * scale * sign).astype(np.float32)


@pytest.fixture(autouse=True)
def ieee_caller():
    """Each test starts and must end with this thread in IEEE mode."""
    float_env.flush_denormals_on_this_thread(False)
    yield
    assert not float_env.thread_flushes(), "a run left the calling thread flushing"


def session(flush, **kw):
    return df.Session(config=df.ConfigProto(flush_denormals=flush, **kw))


# -- the float_env mechanism -------------------------------------------------------------------

def test_the_mode_can_be_set_on_this_machine():
    assert float_env.supported() == SETTABLE


def test_the_thread_mode_flushes_products_and_inputs_and_comes_back():
    x = np.array([1e-20, -3e-20, 1e-18], np.float32)
    y = np.array([1e-20, 3e-20, 1e-18], np.float32)
    ieee = x * y                                   # 1e-40, -9e-40 (subnormal), 1e-36
    assert count_subnormals(ieee) == 2
    assert float_env.flush_denormals_on_this_thread(True) is False
    try:
        assert float_env.thread_flushes()
        same_bits(x * y, flushed(ieee))
        sub = np.array([1e-39, -1e-39], np.float32)       # subnormal inputs (DAZ)
        same_bits(sub * np.float32(100.0), np.array([0.0, -0.0], np.float32))
    finally:
        assert float_env.flush_denormals_on_this_thread(False) is True
    same_bits(x * y, ieee)
    assert count_subnormals(np.array([1e-39], np.float32) * np.float32(1.0)) == 1


@pytest.mark.parametrize("dtype", [np.float16, np.float32, np.float64])
def test_count_subnormals_reads_bit_patterns(dtype):
    rng = np.random.default_rng(0)
    tiny = np.finfo(dtype).tiny
    v = (rng.uniform(-2, 2, 1000) * np.where(rng.random(1000) < 0.5, tiny, 1.0)).astype(dtype)
    v[:5] = [0.0, -0.0, np.inf, np.nan, tiny]
    expected = int(np.count_nonzero((v != 0) & (np.abs(v) < tiny)))
    assert expected > 100
    assert count_subnormals(v) == expected
    float_env.flush_denormals_on_this_thread(True)
    try:                       # DAZ would make a float comparison see zeros
        assert count_subnormals(v) == expected
    finally:
        float_env.flush_denormals_on_this_thread(False)
    assert count_subnormals(np.arange(3)) == 0


def test_a_running_pool_thread_keeps_its_mode_unless_work_is_wrapped():
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(float_env.thread_flushes).result() is False   # thread started
        float_env.flush_denormals_on_this_thread(True)
        try:
            plain = pool.submit(float_env.thread_flushes).result()
            wrapped = pool.submit(float_env.in_callers_mode(float_env.thread_flushes)).result()
        finally:
            float_env.flush_denormals_on_this_thread(False)
        back = pool.submit(float_env.in_callers_mode(float_env.thread_flushes)).result()
    assert (plain, wrapped, back) == (False, True, False)


def test_the_aarch64_module_compiles_to_fpcr_accesses():
    import llvmlite.binding as llvm
    llvm.initialize_all_targets()
    llvm.initialize_all_asmprinters()
    machine = llvm.Target.from_triple("aarch64-unknown-linux-gnu").create_target_machine()
    module = llvm.parse_assembly(float_env._ir("aarch64"))
    module.verify()
    asm = machine.emit_assembly(module).lower()
    assert re.search(r"mrs\s+x\d+, fpcr", asm) and re.search(r"msr\s+fpcr, x\d+", asm)


def blas_pair(n=256):
    """A matmul every element of which is a sum of subnormal products (~2.6e-40)."""
    a = np.full((n, n), 1e-21, np.float32)
    return a, a.copy()


def matmul_of(a, b):
    """``(ap, bp, ap @ bp)``: float32 placeholders of ``a``'s and ``b``'s shapes and their
    MatMul, in the default graph."""
    ap, bp = df.placeholder(df.float32, a.shape), df.placeholder(df.float32, b.shape)
    return ap, bp, df.matmul(ap, bp)


def test_blas_worker_threads_are_set_and_read_back():
    a, b = blas_pair()
    with threadpool_limits(limits=2, user_api="blas"):     # a worker thread besides us
        ieee = a @ b
        assert count_subnormals(ieee) == ieee.size
        float_env.flush_denormals_on_this_thread(True)
        try:
            pools = len(float_env.set_blas_threads_flush(True, force=True))  # NumPy's...
            assert pools >= 1
            same_bits(a @ b, np.zeros_like(ieee))
            assert float_env.set_blas_threads_flush(True, force=True) == [True] * pools
        finally:
            float_env.flush_denormals_on_this_thread(False)
            assert float_env.set_blas_threads_flush(False, force=True) == [True] * pools
        assert float_env.set_blas_threads_flush(False, force=True) == [False] * pools
        same_bits(a @ b, ieee)


# -- sessions ----------------------------------------------------------------------------------

def elementwise_case(rng, n, **kw):
    x, y = tiny_factors(rng, n), tiny_factors(rng, n)
    with df.Graph().as_default():
        xp, yp = df.placeholder(df.float32, [n]), df.placeholder(df.float32, [n])
        out = xp * yp * np.float32(1.0)     # two ops: fused where fusion is on
        results = {}
        for flush in (True, False):
            with session(flush, **kw) as sess:
                results[flush] = sess.run(out, {xp: x, yp: y})
    ieee = x * y * np.float32(1.0)
    assert count_subnormals(ieee) > n // 2
    return results, ieee


@pytest.mark.parametrize("n,kw", [
    (100, {}),                                                # NumPy kernels (small)
    (1 << 15, dict(fuse_elementwise=False)),                  # Numba compiled kernels
    (1 << 15, {}),                                            # a fused Numba loop
    (1 << 19, {}),                                            # fused, split over threads
    (1 << 15, dict(use_compiled_kernels=False, fuse_elementwise=False)),
], ids=["numpy", "numba", "fused", "fused-split", "reference"])
def test_elementwise_subnormals_flush_with_it_on_and_stay_with_it_off(n, kw):
    results, ieee = elementwise_case(np.random.default_rng(n), n, **kw)
    same_bits(results[True], flushed(ieee))
    same_bits(results[False], ieee)


def test_subnormal_inputs_read_as_zero_with_it_on():
    x = np.array([1e-38, -5e-39, 2e-39, 1.0], np.float32)   # three subnormal inputs
    with df.Graph().as_default():
        xp = df.placeholder(df.float32, [4])
        out = xp * np.float32(4.0)                          # 4e-38: normal in IEEE
        with session(True) as sess:
            same_bits(sess.run(out, {xp: x}), np.array([0.0, -0.0, 0.0, 4.0], np.float32))
        with session(False) as sess:
            same_bits(sess.run(out, {xp: x}), x * np.float32(4.0))


def test_matmul_on_several_blas_threads_flushes_and_the_pool_comes_back():
    a, b = blas_pair()
    with threadpool_limits(limits=2, user_api="blas"):
        ieee = a @ b
        with df.Graph().as_default():
            ap, bp, out = matmul_of(a, b)
            with session(True) as sess:
                same_bits(sess.run(out, {ap: a, bp: b}), np.zeros_like(ieee))
                same_bits(sess.run(out, {ap: a, bp: b}), np.zeros_like(ieee))
            same_bits(a @ b, ieee)    # NumPy after the session: IEEE on every thread
            with session(False) as sess:
                same_bits(sess.run(out, {ap: a, bp: b}), ieee)


def start_pool_threads_in_mode(sess, flush):
    """Start the session's worker threads from a thread in mode ``flush``: they keep it
    (a thread starts in its creator's mode), so only a step that hands its own mode over
    with each kernel runs them right."""
    before = float_env.flush_denormals_on_this_thread(flush)
    try:
        pool = sess._pool.get()
        started = [pool.submit(time.sleep, 0.05) for _ in range(2)]
        assert [pool.submit(float_env.thread_flushes).result() for _ in range(2)] == [flush] * 2
        for f in started:
            f.result()
    finally:
        float_env.flush_denormals_on_this_thread(before)


def test_kernels_on_the_worker_pool_run_in_the_step_mode():
    n = 1_500_000                       # 6 MB inputs: large enough for a worker thread
    rng = np.random.default_rng(3)
    x, y = tiny_factors(rng, n), tiny_factors(rng, n)
    with df.Graph().as_default():
        xp, yp = df.placeholder(df.float32, [n]), df.placeholder(df.float32, [n])
        outs = [xp * yp, yp * xp * np.float32(1.0)]     # independent: two may overlap
        for flush in (True, False):
            md = df.RunMetadata()
            with session(flush, fuse_elementwise=False) as sess:
                start_pool_threads_in_mode(sess, not flush)
                got = sess.run(outs, {xp: x, yp: y},
                               options=df.RunOptions(trace_level=df.RunOptions.FULL_TRACE),
                               run_metadata=md)
            threads = {s.thread_id for d in md.step_stats.dev_stats for s in d.node_stats
                       if s.node_name.startswith("mul")}
            assert len(threads - {threading.get_ident()}) >= 1    # one ran on a worker
            ieee = x * y
            same_bits(got[0], flushed(ieee) if flush else ieee)
            same_bits(got[1], flushed(ieee) if flush else ieee)


def test_a_while_loop_underflowing_flushes_to_zero_with_it_on():
    with df.Graph().as_default():
        _, v = df.while_loop(lambda i, v: i < 9, lambda i, v: (i + 1, v * np.float32(1e-5)),
                             (0, df.constant(np.float32(1.0))))
        expected = np.float32(1.0)
        for _ in range(9):
            expected = expected * np.float32(1e-5)          # 1e-40 after 8, 1e-45 after 9
        assert count_subnormals(np.array([expected])) == 1
        with session(True) as sess:
            assert sess.run(v) == 0.0
        with session(False) as sess:
            same_bits(np.array(sess.run(v)), np.array(expected))


def test_results_without_subnormals_do_not_change():
    rng = np.random.default_rng(5)
    w = (rng.standard_normal((64, 64)) / 8).astype(np.float32)
    x = rng.standard_normal((16, 64)).astype(np.float32)
    with df.Graph().as_default():
        wp, xp = df.placeholder(df.float32, w.shape), df.placeholder(df.float32, x.shape)
        _, h = df.while_loop(lambda i, h: i < 5,
                             lambda i, h: (i + 1, df.tanh(df.matmul(h, wp) + xp)),
                             (0, df.zeros([16, 64], df.float32)))
        loss = df.reduce_sum(h * h)
        (gw,) = df.gradients(loss, [wp])
        results = {}
        for flush in (True, False):
            with session(flush) as sess:
                results[flush] = sess.run([h, gw], {wp: w, xp: x})
    for on, off in zip(results[True], results[False]):
        assert count_subnormals(off) == 0
        same_bits(on, off)


def test_the_calling_thread_gets_its_own_mode_back():
    with df.Graph().as_default():
        x = df.placeholder(df.float32, [3])
        out = x * np.float32(1e-20)
        bad = df.gather(x, [7])                                  # out of range: raises
        feed = {x: np.full(3, 1e-20, np.float32)}
        with session(True) as sess:
            assert count_subnormals(sess.run(out, feed)) == 0
            assert not float_env.thread_flushes()
            with pytest.raises(df.errors.InvalidArgumentError):
                sess.run(bad, feed)
            assert not float_env.thread_flushes()
        float_env.flush_denormals_on_this_thread(True)    # a caller that flushes itself
        try:
            with session(False) as sess:
                assert count_subnormals(sess.run(out, feed)) == 3
                assert float_env.thread_flushes()
        finally:
            float_env.flush_denormals_on_this_thread(False)


def two_device_graph(n):
    """``x * y`` on /cpu:0 and ``x * y * 1`` on /cpu:1 (an explicit transfer between)."""
    xp, yp = df.placeholder(df.float32, [n]), df.placeholder(df.float32, [n])
    with df.device("/cpu:0"):
        a = xp * yp
    with df.device("/cpu:1"):
        b = xp * yp * np.float32(1.0)
        c = a * np.float32(1.0)                 # reads the value made on /cpu:0
    return (xp, yp), [a, b, c]


@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_partition_modes_flush_on_every_partition(mode):
    n = 1 << 15
    rng = np.random.default_rng(7)
    x, y = tiny_factors(rng, n), tiny_factors(rng, n)
    ieee = x * y
    with df.Graph().as_default():
        (xp, yp), fetches = two_device_graph(n)
        for flush in (True, False):
            with session(flush, partition_mode=mode, device_count={"CPU": 2}) as sess:
                got = sess.run(fetches, {xp: x, yp: y})
            expected = flushed(ieee) if flush else ieee
            for v in got:
                same_bits(v, expected)


def test_no_kernel_uses_numbas_threading_layer():
    """Numba's parallel workers would not follow the calling thread's mode; the contract
    relies on every compiled kernel running on the thread that calls it."""
    root = Path(df.__file__).parent / "kernels"
    offenders = [str(p) for p in root.rglob("*.py")
                 if re.search(r"\bprange\b|jit\([^)]*parallel\s*=\s*True", p.read_text())]
    assert offenders == []


def test_the_mpi_scenario_has_subnormals_to_flush():
    """tests/mpi/scenarios.py's "subnormals" runs on three MPI ranks in test_mpi_mode and
    must equal this single-process run: here, the values IEEE makes subnormal are 0."""
    from tests.mpi.scenarios import SCENARIOS
    a, b = SCENARIOS["subnormals"](df.Session)
    x = np.array([1e-20, -2e-20, 1e-18, 3.0], np.float32)
    ieee_a = x * x
    ieee_b = ieee_a * np.float32(1.0) + x * np.float32(1e-20)
    assert count_subnormals(ieee_a) == 2 and count_subnormals(ieee_b) == 2
    same_bits(a, flushed(ieee_a))
    same_bits(b, flushed(ieee_a) * np.float32(1.0) + flushed(x * np.float32(1e-20)))


def test_the_rnn_gradient_makes_subnormals_only_with_it_off():
    """The compare suite's RNN gradient (smaller): its backward sweep decays towards
    zero, and the kernels' outputs hold subnormals unless they are flushed."""
    from benchmarks.denormals import rnn_grad_graph, subnormals_per_step
    graph, grad_w, feed = rnn_grad_graph(400, batch=8, hidden=64)
    assert subnormals_per_step(graph, grad_w, feed, flush=True) == 0
    assert subnormals_per_step(graph, grad_w, feed, flush=False) > 10_000


def test_the_blas_pool_is_set_once_per_session_not_twice_per_step(monkeypatch):
    # Waking every BLAS thread costs about 20 ms per library on a loaded machine: the
    # pool keeps a flushing session's mode between its steps and is put back to IEEE
    # when the session closes (not after every run).
    from dataflow.runtime import denormals
    calls = []
    real = float_env.set_blas_threads_flush
    monkeypatch.setattr(float_env, "set_blas_threads_flush",
                        lambda enabled, force=False: calls.append(enabled) or real(enabled, force))
    monkeypatch.setattr(denormals, "_pool", denormals._BlasPool())   # mode not known yet
    a, b = blas_pair()
    with df.Graph().as_default():
        ap, bp, out = matmul_of(a, b)
        with session(True) as sess:
            for _ in range(5):
                same_bits(sess.run(out, {ap: a, bp: b}), np.zeros_like(a @ b))
            assert calls == [True]
        assert calls == [True, False]


def test_a_flushing_session_under_a_one_thread_limit_wakes_no_blas_worker(monkeypatch):
    # A worker woken to set its mode spins for milliseconds afterwards, taking a core
    # from the caller: under a one-thread limit no BLAS call reaches the workers, so
    # neither the session's first step nor its close wakes them; raising the limit
    # later sets them at the next step, and closing puts every thread set back.
    from dataflow.runtime import denormals
    reached = []
    real = float_env._OpenBLAS.on_every_thread
    monkeypatch.setattr(float_env._OpenBLAS, "on_every_thread",
                        lambda lib, job, n: reached.append(n) or real(lib, job, n))
    monkeypatch.setattr(denormals, "_pool", denormals._BlasPool())
    for lib in float_env._openblas_libraries():
        monkeypatch.setattr(lib, "known", None)
    a, b = blas_pair()
    with threadpool_limits(limits=2, user_api="blas"):
        ieee = a @ b
    with df.Graph().as_default():
        ap, bp, out = matmul_of(a, b)
        with threadpool_limits(limits=1, user_api="blas"):
            with session(True) as sess:
                for _ in range(3):
                    same_bits(sess.run(out, {ap: a, bp: b}), np.zeros_like(ieee))
        assert reached and set(reached) == {1}        # the caller's share only
        reached.clear()
        with threadpool_limits(limits=2, user_api="blas"):
            with session(True) as sess:
                same_bits(sess.run(out, {ap: a, bp: b}), np.zeros_like(ieee))
                assert reached and set(reached) == {2}    # the worker now runs BLAS too
            same_bits(a @ b, ieee)                        # and is back to IEEE


def test_a_pool_set_before_a_library_lookup_is_cleared_under_a_one_thread_limit():
    # The libraries are looked up again after new imports: what their threads were set
    # to is carried over, so clearing under a one-thread limit still reaches the worker
    # that an earlier set made flush.
    a, b = blas_pair()
    with threadpool_limits(limits=2, user_api="blas"):
        ieee = a @ b
        float_env.set_blas_threads_flush(True)
    float_env._blas_libs[0] = -1          # as after an import: the next use looks again
    with threadpool_limits(limits=1, user_api="blas"):
        float_env.set_blas_threads_flush(False)
    with threadpool_limits(limits=2, user_api="blas"):
        same_bits(a @ b, ieee)
