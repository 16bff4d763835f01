"""ConfigProto and RunOptions: every option is spelled out, a misspelt one raises, and
each one has an effect a test can see."""
import re

import numpy as np
import pytest
from threadpoolctl import threadpool_info

import dataflow as df
from dataflow.framework.op_registry import register_op
from dataflow.kernels.registry import register_kernel
from dataflow.ops import shape_fns

TF_PLACEMENT = re.compile(r"^(\S+): \((\w+)\): /job:localhost/replica:0/task:0/device:(\w+):(\d+)$")


# -- unknown keywords ------------------------------------------------------------------------
@pytest.mark.parametrize("cls, typo", [
    (df.ConfigProto, "allow_soft_placment"),
    (df.ConfigProto, "gpu_options"),
    (df.RunOptions, "timeout_in_sec"),
    (df.RunOptions, "output_partition_graphs"),
])
def test_unknown_keyword_raises_type_error_naming_it(cls, typo):
    with pytest.raises(TypeError, match=f"'{typo}'"):
        cls(**{typo: True})


@pytest.mark.parametrize("name", ["inter_op_parallelism_threads",
                                  "intra_op_parallelism_threads"])
@pytest.mark.parametrize("value", [-1, 1.5, "2"])
def test_thread_counts_must_be_counts(name, value):
    with pytest.raises(ValueError, match=name):
        df.ConfigProto(**{name: value})


# -- log_device_placement ------------------------------------------------------------------------
def _placement_lines(text):
    return {m.group(1): (m.group(2), m.group(3), int(m.group(4)))
            for m in map(TF_PLACEMENT.match, text.splitlines()) if m}


def test_log_device_placement_prints_each_node_once_per_plan(capsys):
    with df.Graph().as_default() as g:
        x = df.placeholder(df.float32, [2], name="x")
        with df.device("/cpu:1"):
            y = df.multiply(x, 3.0, name="y")
        z = df.add(y, 1.0, name="z")
        config = df.ConfigProto(log_device_placement=True)
        with df.Session(graph=g, config=config) as sess:
            np.testing.assert_allclose(sess.run(z, {x: [1.0, 2.0]}), [4.0, 7.0])
            first = capsys.readouterr()
            sess.run(z, {x: [1.0, 2.0]})            # the cached plan: nothing printed
            again = capsys.readouterr()
    placed = _placement_lines(first.err)
    # x is fed and the constants are folded: they are not nodes of the step.
    assert placed == {"y": ("Mul", "CPU", 1), "z": ("AddV2", "CPU", 0)}
    assert first.out == "" and again.err == "" and again.out == ""


def test_log_device_placement_shows_the_soft_placed_device(capsys):
    with df.Graph().as_default() as g:
        with df.device("/cpu:7"):
            y = df.constant(2.0, name="c") * 5.0
        config = df.ConfigProto(log_device_placement=True, allow_soft_placement=True,
                                device_count={"CPU": 1})
        with df.Session(graph=g, config=config, devices=["/cpu:0"]) as sess:
            assert sess.run(y) == 10.0
    placed = _placement_lines(capsys.readouterr().err)
    assert placed[y.op.name] == (y.op.type, "CPU", 0)


def test_without_log_device_placement_nothing_is_printed(capsys):
    with df.Graph().as_default() as g:
        y = df.constant(2.0) * 5.0
        with df.Session(graph=g) as sess:
            sess.run(y)
    assert capsys.readouterr().err == ""


# -- intra_op_parallelism_threads ----------------------------------------------------------------
@register_op("TestBlasThreads")
def _blas_threads_infer(op):
    return shape_fns.scalar(df.int32)(op)


@register_kernel("TestBlasThreads")
def _blas_threads_kernel(ctx):
    def blas_threads(x):
        return np.int32(min(lib["num_threads"] for lib in threadpool_info()
                            if lib["user_api"] == "blas"))
    return blas_threads


def _blas_threads_during_a_step(**config):
    with df.Graph().as_default() as g:
        x = df.placeholder(df.float32, [])
        n = g.create_op("TestBlasThreads", [x]).outputs[0]
        with df.Session(graph=g, config=df.ConfigProto(**config)) as sess:
            return int(sess.run(n, {x: 0.0}))


def _blas_threads():
    return min(lib["num_threads"] for lib in threadpool_info() if lib["user_api"] == "blas")


def test_intra_op_parallelism_threads_bounds_blas_during_the_step_only():
    before = _blas_threads()
    assert _blas_threads_during_a_step(intra_op_parallelism_threads=1) == 1
    assert _blas_threads() == before           # restored after the step
    assert _blas_threads_during_a_step() == before   # 0: the library's own count


# -- inter_op_parallelism_threads, trace_level -----------------------------------------------------
@pytest.mark.parametrize("threads, expected", [(0, 2), (1, 1), (3, 3)])
def test_inter_op_parallelism_threads_sizes_the_worker_pool(threads, expected):
    sess = df.Session(graph=df.Graph(),
                      config=df.ConfigProto(inter_op_parallelism_threads=threads))
    assert sess._pool.get()._max_workers == expected
    sess.close()


def test_trace_levels_are_tf1_constants_and_others_are_refused():
    assert (df.RunOptions.NO_TRACE, df.RunOptions.SOFTWARE_TRACE,
            df.RunOptions.HARDWARE_TRACE, df.RunOptions.FULL_TRACE) == (0, 1, 2, 3)
    with pytest.raises(ValueError, match="trace_level"):
        df.RunOptions(trace_level=7)


def test_full_trace_records_each_node_and_no_trace_leaves_step_stats_empty():
    with df.Graph().as_default() as g:
        x = df.placeholder(df.float32, [])
        y = x * 2.0 + 1.0
        meta = df.RunMetadata()
        with df.Session(graph=g, config=df.ConfigProto(fuse_elementwise=False)) as sess:
            value = sess.run(y, {x: 3.0},
                             options=df.RunOptions(trace_level=df.RunOptions.FULL_TRACE),
                             run_metadata=meta)
            untraced = df.RunMetadata()
            sess.run(y, {x: 3.0}, run_metadata=untraced)
    assert value == 7.0
    [dev] = meta.step_stats.dev_stats
    assert [(n.op_type, n.output[0].tensor_description.dtype) for n in dev.node_stats] \
        == [("Mul", "float32"), ("AddV2", "float32")]
    assert untraced.step_stats.dev_stats == []


def test_run_and_run_tokens_share_the_closed_session_check():
    with df.Graph().as_default() as g:
        y = df.constant(1.0) + 1.0
        sess = df.Session(graph=g)
        assert sess.run_tokens([y]) == [(2.0, False)]
        sess.close()
        for call in (lambda: sess.run(y), lambda: sess.run_tokens([y])):
            with pytest.raises(RuntimeError, match="closed Session"):
                call()


def test_log_device_placement_covers_every_partition(capsys):
    with df.Graph().as_default() as g:
        x = df.placeholder(df.float32, [])
        with df.device("/cpu:0"):
            a = df.multiply(x, 2.0, name="a")
        with df.device("/cpu:1"):
            b = df.add(a, 1.0, name="b")
        config = df.ConfigProto(log_device_placement=True)
        with df.Session(graph=g, config=config) as sess:
            assert sess.run(b, {x: 3.0}) == 7.0
    placed = _placement_lines(capsys.readouterr().err)
    assert placed["a"] == ("Mul", "CPU", 0) and placed["b"] == ("AddV2", "CPU", 1)
    transfers = {v for v in placed.values() if v[0] in ("_Send", "_Recv")}
    assert transfers == {("_Send", "CPU", 0), ("_Recv", "CPU", 1)}


def test_intra_op_threads_without_threadpoolctl_warns(monkeypatch):
    from dataflow.runtime import thread_limits
    monkeypatch.setattr(thread_limits, "_get_controller", lambda: None)
    with pytest.warns(RuntimeWarning, match="threadpoolctl"):
        limit = thread_limits.thread_limit(2)
    # the BLAS pools stay as they are; the runtime's own kernels still see the bound
    with limit():
        assert thread_limits.kernel_threads() == 2


@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_a_dropped_session_is_freed_at_once(mode):
    """No reference cycle keeps a Session alive, so one dropped without close() frees
    its resources (the processes mode: stops its workers) without waiting for the gc."""
    import gc
    import weakref
    with df.Graph().as_default() as g:
        x = df.placeholder(df.float32, [])
        with df.device("/cpu:1"):
            y = x * 2.0
        z = y + 1.0
        sess = df.Session(graph=g, config=df.ConfigProto(partition_mode=mode))
        assert sess.run(z, {x: 1.0}) == 3.0
    gc.disable()
    try:
        ref = weakref.ref(sess)
        del sess
        assert ref() is None
    finally:
        gc.enable()
