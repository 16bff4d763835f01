"""Executor properties that results alone do not show: the parallel_iterations bound,
frames freed when they finish, large kernels on worker threads, no stale state."""
import threading

import numpy as np
import pytest

import dataflow as df
from dataflow.runtime.executor import Executor
from dataflow.framework.op_registry import register_op
from dataflow.ops import shape_fns
from dataflow.kernels.registry import register_kernel
from dataflow.runtime.feeds import convert_feeds, feed_templates


def _executor_for(sess, fetches, feed_dict=None):
    """Run ``fetches`` through a fresh Executor on the session's plan; return both."""
    tensors = list(fetches)
    feed_tensors, feed_values = convert_feeds(sess.graph, feed_dict)
    plan = sess._plans.get(sess.graph, tensors, [], feed_tensors)
    ex = Executor(plan, sess._pool.get(), feed_templates(plan, feed_values))
    return ex, ex.run()


def _independent_body_loop(n, parallel_iterations):
    """A loop whose iterations only depend on the counter: they can overlap."""
    x = df.placeholder(df.float32, [])
    _, acc = df.while_loop(
        lambda i, a: i < n,
        lambda i, a: (i + 1, a + df.square(df.cast(i, df.float32) * x)),
        (0, 0.0), parallel_iterations=parallel_iterations)
    return x, acc


@pytest.mark.parametrize("p", [1, 2, 10])
def test_parallel_iterations_bounds_iterations_in_flight(p):
    with df.Graph().as_default():
        x, acc = _independent_body_loop(30, p)
        sess = df.Session()
        ex, (value,) = _executor_for(sess, [acc], {x: 1.0})
    assert value == pytest.approx(sum(float(i) ** 2 for i in range(30)))
    assert 1 <= ex.peak_iterations <= p


def test_parallel_iterations_allows_overlap():
    # The interpreter's frames (a compiled frame runs its iterations in order, one at a
    # time, and never overlaps them).
    with df.Graph().as_default():
        x, acc = _independent_body_loop(30, 10)
        sess = df.Session(config=df.ConfigProto(compile_loops=False))
        ex, _ = _executor_for(sess, [acc], {x: 1.0})
    assert ex.peak_iterations > 1  # iterations really overlapped


def test_frames_and_iterations_are_freed():
    with df.Graph().as_default():
        def outer(i, t):
            inner = df.while_loop(lambda j, s: j < i, lambda j, s: (j + 1, s + j), (0, t))
            return i + 1, inner[1]
        out = df.while_loop(lambda i, t: i < 5, outer, (0, 0))
        ex, (i, total) = _executor_for(df.Session(), list(out))
    assert (i, total) == (5, sum(j for i_ in range(5) for j in range(i_)))
    root = ex.root_iteration
    assert not root.children  # every loop frame finished and was dropped
    assert root.outstanding_frames == 0


_THREADS = []


@register_op("TestRecordThread")
def _record_infer(op):
    return shape_fns.unchanged(op)


@register_kernel("TestRecordThread")
def _record_kernel(ctx):
    def record(x):
        _THREADS.append(threading.get_ident())
        return x @ x
    return record


def test_large_independent_kernels_run_on_worker_threads():
    """Independent large kernels leave the scheduler thread, so both cores can work."""
    _THREADS.clear()
    with df.Graph().as_default() as g:
        a = df.placeholder(df.float32, [None, None])
        outs = [g.create_op("TestRecordThread", [a + float(k)]).outputs[0] for k in range(4)]
        total = df.add_n(outs)
        # 4.8 MB inputs: above the size at which the executor hands work to a worker
        m = np.random.default_rng(0).standard_normal((1100, 1100)).astype(np.float32)
        ex, (value,) = _executor_for(df.Session(), [total], {a: m})
    expected = sum((m + k) @ (m + k) for k in range(4))
    np.testing.assert_allclose(value, expected, rtol=1e-3)
    assert ex.offloaded >= 1
    assert any(t != threading.get_ident() for t in _THREADS)


def test_worker_pool_does_not_change_results():
    with df.Graph().as_default():
        a = df.placeholder(df.float64, [None, None])
        branches = [df.reduce_sum(df.tanh(a * float(k)) @ a, axis=0) for k in range(6)]
        out = df.add_n(branches)
        m = np.random.default_rng(1).standard_normal((800, 800))
        serial = df.Session(config=df.ConfigProto(inter_op_parallelism_threads=1))
        parallel = df.Session()
        first = parallel.run(out, {a: m})
        for _ in range(3):
            np.testing.assert_array_equal(parallel.run(out, {a: m}), first)
        np.testing.assert_array_equal(serial.run(out, {a: m}), first)


def test_only_kernels_that_may_be_large_and_overlap_go_to_worker_threads():
    from dataflow.runtime.plan import build_plan
    with df.Graph().as_default() as g:
        x = df.placeholder(df.float32, [None, None])
        a, b = df.exp(x), df.tanh(x)               # independent, of any size
        shape, size = df.shape(x), df.size(x)      # read shapes only: never worth a worker
        tiny = df.placeholder(df.float32, [3]) * 2.0               # statically small
        plan = build_plan(g, [a, b, shape, size, tiny], [], [x, tiny.op.inputs[0]],
                          lambda op: None, fuse_elementwise=False)
    heavy = {op.name: h for op, h in zip(plan.ops, plan.heavy)}
    assert heavy[a.op.name] and heavy[b.op.name]
    assert not heavy[shape.op.name] and not heavy[size.op.name] and not heavy[tiny.op.name]
