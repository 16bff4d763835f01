"""``partition_mode="processes"``: each device's partition in its own OS process.

The partitioning scenarios run in processes mode and are compared with the threads mode
and the single-device run; then what only processes have: values crossing pipes and
shared memory, variables living in their device's process, errors and cancellation
crossing process boundaries, a killed worker, and nothing left behind (processes,
/dev/shm segments) after a session closes.
"""
from __future__ import annotations

import gc
import os
import random
import signal
import threading
import time

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dataflow as df
from dataflow.runtime.multiprocess import exceptions, pipes, segments
from dataflow.runtime.multiprocess.runner import ProcessRunner
from dataflow.runtime.partitioned import PartitionedPlan
from tests.graph_gen import programs, quiet_numpy
from tests.test_differential import NOT_COMPUTED, SETTINGS, assert_same_tokens, spec_tokens
from tests.test_partition import (failing_on_b, gradient_of_loop_on_b, loop_body_on_b,
                                  nested_three_devices, variable_updated_from_a)

A, B, C = "/cpu:0", "/cpu:1", "/cpu:2"
DA, DB, DC = "/device:CPU:0", "/device:CPU:1", "/device:CPU:2"


def processes(**kw):
    return df.ConfigProto(partition_mode="processes", device_count={"CPU": 3}, **kw)


def run_modes(build, feeds=None):
    """``build()``'s fetches run three ways: every device cleared (one executor), the
    threads mode and the processes mode. Returns the three results."""
    results = []
    for mode in ("single", "threads", "processes"):
        g = df.Graph()
        with g.as_default():
            fetches = build()
        if mode == "single":
            for op in g.get_operations():
                op._set_device("")
        feed = {g.get_tensor_by_name(k): v for k, v in (feeds or {}).items()}
        config = df.ConfigProto(partition_mode="threads" if mode == "single" else mode,
                                device_count={"CPU": 3})
        with df.Session(graph=g, config=config) as sess:
            results.append(sess.run(fetches, feed))
            if mode == "processes":
                assert len(sess._driver.partitioned.mode_state._runner.pids()) >= 2
    return results


def assert_all_same(results, rtol=1e-6):
    first = results[0]
    for other in results[1:]:
        for x, y in zip(np.atleast_1d(np.asarray(first, dtype=object)).ravel(),
                        np.atleast_1d(np.asarray(other, dtype=object)).ravel()):
            np.testing.assert_allclose(np.asarray(x, dtype=float),
                                       np.asarray(y, dtype=float), rtol=rtol)


def alive(pid) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().split(") ")[1][0] != "Z"
    except FileNotFoundError:
        return False


# -- the partitioning scenarios, in processes -----------------------------------------------
@pytest.mark.parametrize("n", [0, 1, 7])
def test_loop_with_body_on_b_matches_threads_and_single_device(n):
    results = run_modes(lambda: loop_body_on_b(n), {"x:0": 0.5})
    assert_all_same(results)
    assert results[2][0] == n


def test_nested_loops_over_three_devices():
    assert_all_same(run_modes(nested_three_devices))


def test_cond_split_across_devices_takes_either_branch():
    def build():
        x = df.placeholder(df.float32, [], name="x")
        with df.device(A):
            p = x > 0.0
            x = x * 1.0
        with df.device(A):
            return df.cond(p, lambda: _on(B, lambda: x * 10.0),
                           lambda: _on(C, lambda: x - 100.0))

    for value in (2.0, -2.0):
        single, threads, procs = run_modes(build, {"x:0": value})
        assert single == threads == procs == (20.0 if value > 0 else -102.0)


def _on(device, fn):
    with df.device(device):
        return fn()


@pytest.mark.parametrize("parallel_iterations", [1, 10])
def test_parallel_iterations_and_loop_invariants_on_two_devices(parallel_iterations):
    def build():
        x = df.placeholder(df.float32, [], name="x")
        with df.device(A):
            def body(i, a, b):
                with df.device(B):
                    a2 = a + df.cast(i, df.float32) * x
                with df.device(C):
                    b2 = b + df.cast(i * i, df.float32) * x
                return i + 1, a2, b2
            return df.while_loop(lambda i, a, b: i < 25, body, (0, 0.0, 0.0),
                                 parallel_iterations=parallel_iterations)
    assert_all_same(run_modes(build, {"x:0": 1.5}))


def test_gradients_of_a_partitioned_loop():
    assert_all_same(run_modes(gradient_of_loop_on_b, {"w:0": np.array([0.7, -1.1, 0.4])}),
                    rtol=1e-12)


@settings(max_examples=8, **SETTINGS)
@given(program=programs(max_statements=6), seed=st.integers(0, 2**32 - 1))
def test_random_programs_on_random_devices_agree_with_the_spec(program, seed):
    graph, fetches, feeds = program.build()
    expected = spec_tokens(graph, fetches, feeds, 0)
    rng = random.Random(seed)
    for op in graph.get_operations():
        op._set_device(rng.choice([A, B, C]))
    config = processes(fold_constants=program.fold_constants)
    with quiet_numpy(), df.Session(graph=graph, config=config) as sess:
        try:
            actual = sess.run_tokens(fetches, feeds,
                                     options=df.RunOptions(timeout_in_ms=30_000))
        except df.errors.InternalError as e:
            assert "without computing fetch" in str(e), e
            actual = NOT_COMPUTED
    assert_same_tokens(expected, actual, fetches)


# -- values crossing processes ----------------------------------------------------------------
def test_a_100_mb_array_crosses_through_shared_memory_and_comes_back():
    n = 25_000_000   # float32: 100 MB, fed to A, sent to B, fetched from B
    g = df.Graph()
    with g.as_default():
        with df.device(A):
            x = df.placeholder(df.float32, [n], name="x")
            y = df.identity(x)
        with df.device(B):
            z = df.identity(y, name="z")
    value = np.ones(n, np.float32)
    value[::4096] = np.arange(len(value[::4096]), dtype=np.float32)
    with df.Session(graph=g, config=processes()) as sess:
        first = sess.run(z, {x: value})
        again = sess.run(z, {x: value})     # the sender's segment is reused
        prefix = sess._driver.partitioned.mode_state._runner.prefix
    for out in (first, again):
        assert out.dtype == np.float32 and out.shape == (n,)
        assert np.array_equal(out, value)
    assert segments.segments_with_prefix(prefix) == []


def test_transport_keeps_types_dead_bits_and_drops_values_of_finished_steps():
    a, b = pipes.Endpoint.mesh([DA, DB], prefix=f"dftest{os.getpid()}")
    try:
        ra, rb = a.rendezvous(1), b.rendezvous(1)
        values = [np.float32(1.5), np.int64(-3), np.bool_(True), 2.5, None,
                  np.arange(6, dtype=np.int32).reshape(2, 3),
                  np.linspace(0, 1, 1 << 16)]       # 512 KB: a shared-memory segment
        for k, v in enumerate(values):
            ra.send((DA, DB, f"t{k}", (("f", k),)), v, False)
        ra.send((DA, DB, "dead", ()), None, True)
        for k, v in enumerate(values):
            got, dead = rb.recv((DA, DB, f"t{k}", (("f", k),)), timeout=10)
            assert not dead and type(got) is type(v)
            np.testing.assert_array_equal(got, v)
            if isinstance(v, np.ndarray):
                assert got.dtype == v.dtype
        assert rb.recv((DA, DB, "dead", ()), timeout=10) == (None, True)
        # a value of step 1 that nobody took is dropped when the step is over
        ra.send((DA, DB, "late", ()), 1.0, False)
        b.pump(1.0)
        b.close_step(1)
        rb2 = b.rendezvous(2)
        a.rendezvous(2).send((DA, DB, "late", ()), 2.0, False)
        assert rb2.recv((DA, DB, "late", ()), timeout=10) == (2.0, False)
        with pytest.raises(df.errors.CancelledError):
            b.rendezvous(1).recv((DA, DB, "late", ()), timeout=10)
    finally:
        a.shutdown()
        b.shutdown()
    assert segments.segments_with_prefix(f"dftest{os.getpid()}") == []


def test_large_arrays_travel_in_a_reused_segment_not_through_the_pipe():
    prefix = f"dftest{os.getpid()}s"
    a, b = pipes.Endpoint.mesh([DA, DB], prefix=prefix)
    sent = []
    post = a._post
    a._post = lambda peer, msg: (sent.append(msg), post(peer, msg))[1]
    try:
        value = np.arange(1 << 20, dtype=np.float64)       # 8 MB
        for k in range(3):
            rv_a, rv_b = a.rendezvous(k + 1), b.rendezvous(k + 1)
            rv_a.send((DA, DB, "big", ()), value * k, False)
            got, dead = rv_b.recv((DA, DB, "big", ()), timeout=10)
            assert not dead and np.array_equal(got, value * k)
            assert not got.flags.writeable                 # a view of the segment
            del got                                        # hands the segment back
            b.close_step(k + 1)
            b.flush_released()
            a.pump(1.0)
        assert [m[0] for m in sent] == [pipes._SEGMENT] * 3
        assert len({m[3][0] for m in sent}) == 1          # one segment, reused
        assert len(segments.segments_with_prefix(prefix)) == 1
    finally:
        a.shutdown()
        b.shutdown()
    assert segments.segments_with_prefix(prefix) == []


def test_segment_pool_reuses_the_smallest_fitting_segment_and_keeps_four():
    prefix = f"dftest{os.getpid()}p"
    pool = segments.SegmentPool(prefix, 0)
    try:
        mib = 1 << 20
        written = [pool.write(np.ones(k * mib // 8)) for k in range(1, 7)]   # 1..6 MiB
        assert [size for _, size in written] == [k * mib for k in range(1, 7)]
        for name, _ in written:
            pool.release(name)
        kept = sorted(segments.segments_with_prefix(prefix))
        assert kept == sorted(name for name, _ in written[2:])   # the four largest
        name, size = pool.write(np.arange(mib // 8 * 3, dtype=np.float64))  # 3 MiB
        assert (name, size) == written[2]                         # reused, not created
        assert sorted(segments.segments_with_prefix(prefix)) == kept
    finally:
        pool.shutdown()
    assert segments.segments_with_prefix(prefix) == []


def test_cancel_wakes_a_waiting_recv():
    a, b = pipes.Endpoint.mesh([DA, DB], prefix=f"dftest{os.getpid()}c")
    try:
        rb = b.rendezvous(1)
        err = df.errors.CancelledError(None, None, "stop")
        threading.Timer(0.05, rb.cancel, (err,)).start()
        with pytest.raises(df.errors.CancelledError, match="stop"):
            rb.recv((DA, DB, "never", ()), timeout=10)
    finally:
        a.shutdown()
        b.shutdown()


# -- variables ---------------------------------------------------------------------------------
def test_variables_live_in_their_devices_process_across_runs_and_new_plans():
    g, v, update, init = variable_updated_from_a()
    with df.Session(graph=g, config=processes()) as sess:
        sess.run(init)
        sess.run(update)
        assert sess.run(update) == 10.0
        assert sess.run(v) == 10.0          # a plan on B alone also runs in B's process
        pids = sess._driver.partitioned.mode_state._runner.pids()
        with g.as_default():               # the graph grows: the workers are forked
            with df.device(A):             # again and B's variable moves to the new one
                doubled = df.constant(1.0) * 2.0
            with df.device(B):
                again = v.assign_add(doubled)
        assert sess.run(again) == 12.0
        assert sess.run(v) == 12.0
        assert not set(sess._driver.partitioned.mode_state._runner.pids()) & set(pids)
    with df.Session(graph=g, config=df.ConfigProto(device_count={"CPU": 3})) as sess:
        sess.run(init)
        sess.run(update)
        assert sess.run(update) == 10.0   # the threads mode agrees


def test_a_variable_handle_crossing_processes_is_a_clear_error():
    g = df.Graph()
    with g.as_default():
        with df.device(B):
            v = df.Variable(1.0, name="v")
        with df.device(A):
            r = v.read_value() * 2.0
    with df.Session(graph=g, config=processes()) as sess:
        sess.run(v.initializer)
        with pytest.raises(df.errors.InvalidArgumentError, match="variable 'v'"):
            sess.run(r)


# -- failures ----------------------------------------------------------------------------------
def test_an_op_failing_on_b_cancels_every_process_and_names_the_node():
    g = df.Graph()
    with g.as_default():
        fetches = failing_on_b()
    x = g.get_tensor_by_name("x:0")
    opts = df.RunOptions(timeout_in_ms=20_000)
    with df.Session(graph=g, config=processes()) as sess:
        with pytest.raises(df.errors.InvalidArgumentError) as info:
            sess.run(fetches, {x: 1.0}, options=opts)
        assert info.value.op.name.endswith("too_big") and info.value.op.type == "Assert"
        assert "too_big" in str(info.value) and "Assert" in str(info.value)
        i, a, c = sess.run(fetches, {x: 0.1}, options=opts)   # nothing stale
        assert i == 20 and a == pytest.approx(2.0) and c == pytest.approx(1.5 ** 20)


def test_deadline_cancels_every_process_and_the_next_run_is_clean():
    g = df.Graph()
    with g.as_default():
        fetches = loop_body_on_b(10**9)
        short = loop_body_on_b(3)
    x = g.get_tensor_by_name("x:0")
    x1 = g.get_tensor_by_name("x_1:0")
    with df.Session(graph=g, config=processes()) as sess:
        with pytest.raises(df.errors.DeadlineExceededError):
            sess.run(fetches, {x: 0.0}, options=df.RunOptions(timeout_in_ms=300))
        assert sess.run(short, {x1: 0.5})[0] == 3


def test_a_killed_worker_raises_instead_of_hanging_and_leaves_nothing_behind():
    g = df.Graph()
    with g.as_default():
        fetches = loop_body_on_b(10**9)
        short = loop_body_on_b(4)
    x = g.get_tensor_by_name("x:0")
    x1 = g.get_tensor_by_name("x_1:0")
    with df.Session(graph=g, config=processes()) as sess:
        assert sess.run(short, {x1: 0.5})[0] == 4
        runner = sess._driver.partitioned.mode_state._runner
        pids = []
        stepped = runner._step

        def kill_b_once_the_long_step_runs():
            while runner._step == stepped:   # a new plan: the workers are forked first
                time.sleep(0.01)
            time.sleep(0.2)
            pids.extend(runner.pids())
            os.kill(runner._workers[DB].process.pid, signal.SIGKILL)

        killer = threading.Thread(target=kill_b_once_the_long_step_runs)
        killer.start()
        started = time.monotonic()
        with pytest.raises(df.errors.AbortedError, match="CPU:1"):
            sess.run(fetches, {x: 0.0}, options=df.RunOptions(timeout_in_ms=60_000))
        killer.join()
        assert time.monotonic() - started < 30
        assert sess.run(short, {x1: 0.5})[0] == 4       # fresh workers
        new_pids = runner.pids()
        prefix = runner.prefix
    assert not any(alive(p) for p in pids + new_pids)
    assert segments.segments_with_prefix(prefix) == []


def test_closing_the_session_stops_the_workers_and_removes_segments():
    g = df.Graph()
    with g.as_default():
        with df.device(A):
            x = df.placeholder(df.float64, [1 << 19], name="x")   # 4 MB: a segment
            y = df.identity(x)
        with df.device(B):
            z = df.identity(y)
    sess = df.Session(graph=g, config=processes())
    value = np.linspace(0.0, 1.0, 1 << 19)
    assert np.array_equal(sess.run(z, {x: value}), value)
    runner = sess._driver.partitioned.mode_state._runner
    pids, prefix = runner.pids(), runner.prefix
    assert all(alive(p) for p in pids)
    sess.close()
    assert not any(alive(p) for p in pids)
    assert segments.segments_with_prefix(prefix) == []


def test_a_session_dropped_without_close_stops_its_workers():
    g = df.Graph()
    with g.as_default():
        with df.device(A):
            a = df.constant(2.0) * 3.0
        with df.device(B):
            b = a + 1.0
    sess = df.Session(graph=g, config=processes())
    assert sess.run(b) == 7.0
    pids = sess._driver.partitioned.mode_state._runner.pids()
    del sess
    gc.collect()
    assert pids and not any(alive(p) for p in pids)


def test_segments_of_a_killed_session_process_are_swept_by_the_next_one(monkeypatch):
    dead = 1
    while os.path.exists(f"/proc/{dead}") or os.path.exists(f"/dev/shm/dataflow{dead}x1_0_1"):
        dead += 7919
    orphan = f"/dev/shm/dataflow{dead}x1_0_1"
    mine = f"/dev/shm/dataflow{os.getpid()}x999_0_1"
    for path in (orphan, mine):
        open(path, "wb").close()
    monkeypatch.setattr(segments, "_swept", False)
    try:
        ProcessRunner([DA], {}).close()
        assert not os.path.exists(orphan)    # its process is gone
        assert os.path.exists(mine)          # a live process's segments stay
    finally:
        for path in (orphan, mine):
            if os.path.exists(path):
                os.unlink(path)


def test_exceptions_cross_processes_with_their_type_and_node():
    g = df.Graph()
    with g.as_default():
        op = df.no_op(name="somewhere")
    packed = exceptions.pack_exception(df.errors.OutOfRangeError(None, op, "empty"))
    exc = exceptions.unpack_exception(packed, g.get_operation_by_name)
    assert type(exc) is df.errors.OutOfRangeError and exc.op is op
    assert str(exc) == str(df.errors.OutOfRangeError(None, op, "empty"))
    remote = exceptions.unpack_exception(packed, lambda name: None)
    assert remote.op.name == "somewhere" and remote.op.type == "NoOp"
    plain = exceptions.unpack_exception(exceptions.pack_exception(KeyError("k")))
    assert isinstance(plain, KeyError)


def test_processes_mode_runs_a_graph_on_one_device_in_a_worker():
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [], name="x")
        y = df.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * x), (0, 1.0))
    with df.Session(graph=g, config=processes()) as sess:
        assert sess.run(y, {x: 2.0})[1] == 8.0
        assert any(isinstance(p, PartitionedPlan) for p in sess._plans.values())
        assert len(sess._driver.partitioned.mode_state._runner.pids()) == 1
