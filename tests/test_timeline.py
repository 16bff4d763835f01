"""Step statistics (RunOptions FULL_TRACE -> RunMetadata.step_stats) and their Chrome trace.

The records are checked against the reference interpreter (dataflow/spec): a traced run
must record exactly the (node, frame/iteration, deadness) executions the interpreter
fires, in the single-executor mode and per partition on threads and on processes.
"""
from __future__ import annotations

import collections
import json
import pathlib
import re
import runpy
import struct
import subprocess
import sys
import zlib

import numpy as np
import pytest
from hypothesis import given, settings

import dataflow as df
from dataflow.framework import op_registry as R
from dataflow.runtime.step_stats import TensorDescription, full_device_name
from dataflow.spec import interpreter as spec
from tests.graph_gen import programs, quiet_numpy
from tests.test_differential import SETTINGS, assert_same_tokens

ROOT = pathlib.Path(__file__).resolve().parent.parent
FULL = df.RunOptions(trace_level=df.RunOptions.FULL_TRACE)
# Nothing folded or fused: every op of the pruned graph is a node of the plan.
PLAIN = dict(fold_constants=False, fuse_elementwise=False)


def traced_run(fetches, feed_dict=None, mode=None, graph=None, **config):
    if mode is not None:
        config.update(partition_mode=mode, device_count={"CPU": 3})
    meta = df.RunMetadata()
    with df.Session(graph=graph, config=df.ConfigProto(**config)) as sess:
        value = sess.run(fetches, feed_dict, options=FULL, run_metadata=meta)
    return value, meta.step_stats


def executions(stats, names=None) -> collections.Counter:
    """(node name, frame path, dead) of every record, counted."""
    return collections.Counter(
        (n.node_name, n.frame_path, n.is_dead) for d in stats.dev_stats for n in d.node_stats
        if names is None or n.node_name in names)


def spec_executions(graph, fetches, feeds) -> collections.Counter:
    """What the interpreter fired, with the deadness its rules give each firing."""
    interp = spec.Interpreter(graph, fetches, feeds)
    interp.run(seed=0)
    out = collections.Counter()
    for op, tag in interp.fired:
        role = op._op_def.role
        if role == R.MERGE:
            dead = interp._merge_decision(op, tag)[1] is None
        elif role == R.CONTROL_TRIGGER:
            dead = False
        else:
            dead = any(interp._read(t, tag).is_dead for t in op._inputs) or any(
                interp._read_control(c, tag).is_dead for c in op._control_inputs)
        out[(op.name, tag, dead)] += 1
    return out


def loop_with_cond():
    """A loop whose body takes a cond branch on odd iterations only, split over devices
    by ``place`` below; returns (graph, fetch, feed dict)."""
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float64, [], name="x")

        def body(i, v):
            odd = df.equal(df.floormod(i, 2), 1)
            w = df.cond(odd, lambda: v * 3.0, lambda: v + 1.0)
            return i + 1, w

        _, y = df.while_loop(lambda i, v: i < 4, body, [df.constant(0), x])
    return g, y, {x: 2.0}


def place(graph):
    """Arithmetic of the loop body on /cpu:1, the rest on /cpu:0."""
    for op in graph.get_operations():
        heavy = op.type in ("Mul", "AddV2", "Add") and "cond" in op.name
        op._set_device("/cpu:1" if heavy else "/cpu:0")


def expected_value():
    v = 2.0
    for i in range(4):
        v = v * 3.0 if i % 2 == 1 else v + 1.0
    return v


# -- what is recorded ---------------------------------------------------------------------------
def test_records_match_the_interpreters_firings_in_a_loop_with_a_cond():
    g, y, feeds = loop_with_cond()
    value, stats = traced_run(y, feeds, graph=g, **PLAIN)
    assert value == expected_value()
    [dev] = stats.dev_stats
    assert dev.device == "/job:localhost/replica:0/task:0/device:CPU:0"
    assert executions(stats) == spec_executions(g, [y], feeds)


def test_dead_nodes_of_the_untaken_branch_are_flagged_and_have_no_outputs():
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [], name="x")
        r = df.cond(x < 0.0, lambda: df.square(x, name="neg"), lambda: df.sqrt(x, name="pos"))
    value, stats = traced_run(r, {x: 4.0}, graph=g)
    assert value == 2.0
    by_name = {n.node_name: n for n in stats.dev_stats[0].node_stats}
    neg, pos = by_name["cond/neg"], by_name["cond/pos"]
    assert neg.is_dead and neg.output == [] and "[dead]" in neg.timeline_label
    assert not pos.is_dead
    assert [(o.slot, o.tensor_description) for o in pos.output] == [
        (0, TensorDescription("float32", (), 4))]


def test_each_iteration_is_recorded_with_its_frame_and_number():
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [3], name="x")
        _, y = df.while_loop(lambda i, v: i < 5, lambda i, v: (i + 1, v * 2.0),
                             [df.constant(0), x])
    value, stats = traced_run(y, {x: np.ones(3, np.float32)}, graph=g)
    np.testing.assert_array_equal(value, np.full(3, 32.0, np.float32))
    muls = [n for n in stats.dev_stats[0].node_stats if n.node_name == "while/mul"]
    frame = "while/while_context"
    assert sorted((n.iteration_id, n.is_dead) for n in muls) == \
        [(i, False) for i in range(5)] + [(5, True)]
    assert {(n.frame_name, n.frame_path[-1][0]) for n in muls} == {(frame, frame)}
    live = [n for n in muls if not n.is_dead]
    assert {(o.tensor_description.shape, o.tensor_description.requested_bytes)
            for n in live for o in n.output} == {((3,), 12)}
    for n in stats.dev_stats[0].node_stats:
        assert n.all_end_rel_nanos >= 0 and n.all_start_micros == n.all_start_nanos // 1000
        assert 0 <= n.op_start_rel_nanos <= n.op_end_rel_nanos <= n.all_end_rel_nanos
    # Nested loops: the frame path names every enclosing iteration.
    with g.as_default():
        z = df.while_loop(lambda i: i < 2, lambda i: i + df.while_loop(
            lambda j: j < 3, lambda j: j + 1, [df.constant(0)], name="inner") - 2,
            [df.constant(0)], name="outer")
    _, stats = traced_run(z, graph=g)
    inner_adds = [n for n in stats.dev_stats[0].node_stats
                  if n.node_name == "outer/inner/add" and not n.is_dead]
    assert sorted(tuple(i for _, i in n.frame_path) for n in inner_adds) == \
        [(o, i) for o in range(2) for i in range(3)]


def test_no_trace_means_empty_step_stats_and_the_same_results():
    g, y, feeds = loop_with_cond()
    for options in (None, df.RunOptions(), df.RunOptions(timeout_in_ms=10_000)):
        meta = df.RunMetadata()
        with df.Session(graph=g) as sess:
            assert sess.run(y, feeds, options=options, run_metadata=meta) == expected_value()
        assert meta.step_stats.dev_stats == []


@settings(max_examples=60, **SETTINGS)
@given(program=programs(max_statements=8))
def test_random_programs_record_what_the_interpreter_fires(program):
    graph, fetches, feeds = program.build()
    meta = df.RunMetadata()
    with quiet_numpy():
        interp = spec.Interpreter(graph, fetches, feeds)
        expected = interp.run(seed=0)
        with df.Session(graph=graph, config=df.ConfigProto(**PLAIN)) as sess:
            tokens = sess.run_tokens(fetches, feeds, options=FULL, run_metadata=meta)
    assert_same_tokens(expected, tokens, fetches)   # tracing changes no result
    assert executions(meta.step_stats) == spec_executions(graph, fetches, feeds)


# -- partitions ----------------------------------------------------------------------------------
@pytest.mark.parametrize("mode", ["threads", "processes"])
def test_partitions_record_the_users_nodes_and_pair_every_send_with_its_recv(mode):
    g, y, feeds = loop_with_cond()
    _, single = traced_run(y, feeds, graph=g, **PLAIN)
    place(g)
    value, stats = traced_run(y, feeds, mode=mode, graph=g, **PLAIN)
    assert value == expected_value()
    devices = sorted(d.device for d in stats.dev_stats)
    assert devices == ["/job:localhost/replica:0/task:0/device:CPU:0",
                       "/job:localhost/replica:0/task:0/device:CPU:1"]
    users = {op.name for op in g.get_operations()}
    assert executions(stats, users) == executions(single)
    on_cpu1 = {n.node_name for d in stats.dev_stats if d.device.endswith("CPU:1")
               for n in d.node_stats if n.node_name in users}
    assert on_cpu1 and all(full_device_name(g.get_operation_by_name(n).device).endswith(
        "/device:CPU:1") for n in on_cpu1)
    sends = collections.Counter(n.rendezvous_key for d in stats.dev_stats
                                for n in d.node_stats if n.op_type == "_Send")
    recvs = collections.Counter(n.rendezvous_key for d in stats.dev_stats
                                for n in d.node_stats if n.op_type == "_Recv")
    assert sends and set(sends.values()) == {1}
    assert recvs == sends   # one Recv per Send, per iteration
    loop_keys = [k for k in sends if "while_context:3" in k]
    assert loop_keys   # the last iteration's transfers carry its frame and number
    for d in stats.dev_stats:
        assert set(d.thread_names) == {n.thread_id for n in d.node_stats}


# -- the Chrome trace ----------------------------------------------------------------------------
def check_trace(trace: dict):
    """Every event is well formed: ph, ts, pid, tid; slices have durations >= 0."""
    events = trace["traceEvents"]
    assert events
    rows = collections.defaultdict(list)
    for e in events:
        assert {"ph", "ts", "pid", "tid", "name"} <= set(e), e
        assert e["ts"] >= 0
        if e["ph"] == "X":
            assert e["dur"] >= 0
            rows[(e["pid"], e["tid"])].append((e["ts"], e["ts"] + e["dur"]))
    for spans in rows.values():   # the slices of one thread never overlap
        spans.sort()
        assert all(a[1] <= b[0] + 1e-3 for a, b in zip(spans, spans[1:])), spans
    waits = collections.Counter((e["id"], e["ph"]) for e in events if e["ph"] in "be")
    assert all(waits[(i, "b")] == waits[(i, "e")] == 1 for i, _ in waits)
    return events


def test_chrome_trace_has_rows_per_device_and_thread_and_arrows_per_transfer():
    g, y, feeds = loop_with_cond()
    place(g)
    _, stats = traced_run(y, feeds, mode="threads", graph=g)
    text = df.timeline.Timeline(stats).generate_chrome_trace_format(show_memory=False)
    events = check_trace(json.loads(text))
    processes = {e["pid"]: e["args"]["name"] for e in events if e["name"] == "process_name"}
    assert sorted(processes.values()) == [
        "/job:localhost/replica:0/task:0/device:CPU:0 Compute",
        "/job:localhost/replica:0/task:0/device:CPU:1 Compute"]
    threads = {(e["pid"], e["tid"]) for e in events if e["name"] == "thread_name"}
    slices = [e for e in events if e["ph"] == "X"]
    assert {(e["pid"], e["tid"]) for e in slices} == threads
    assert len(slices) == sum(len(d.node_stats) for d in stats.dev_stats)
    names = {e["name"] for e in slices}
    assert {f"while/Merge [iter {i}]" for i in range(5)} <= names
    assert "while/cond/mul [iter 0] (dead)" in names and "while/cond/mul [iter 1]" in names
    starts = {e["id"]: e for e in events if e["ph"] == "s"}
    ends = {e["id"]: e for e in events if e["ph"] == "f"}
    assert starts and starts.keys() == ends.keys()
    for flow_id, s in starts.items():
        f = ends[flow_id]
        send = [e for e in slices if e["pid"] == s["pid"] and e["tid"] == s["tid"]
                and e["ts"] <= s["ts"] <= e["ts"] + e["dur"]]
        recv = [e for e in slices if e["pid"] == f["pid"] and e["tid"] == f["tid"]
                and e["ts"] <= f["ts"] <= e["ts"] + e["dur"]]
        assert len(send) == 1 and len(recv) == 1, (send, recv)   # each end binds one slice
        send = send[0]
        assert send["args"]["op"] == "_Send" and recv[0]["args"]["op"] == "_Recv"
        assert s["pid"] != f["pid"]
        assert [r["args"]["rendezvous_key"] for r in recv] == [send["args"]["rendezvous_key"]]
    memory = json.loads(df.timeline.Timeline(stats).generate_chrome_trace_format(
        show_memory=True))["traceEvents"]
    counters = [e for e in memory if e["ph"] == "C"]
    assert len(counters) == len(slices) and max(c["args"]["bytes"] for c in counters) == 8


def test_profile_command_writes_the_trace_of_the_last_run(tmp_path):
    script = tmp_path / "script.py"
    script.write_text(
        "import sys\nimport dataflow as df\n"
        "x = df.placeholder(df.float32, [])\n"
        "y = df.while_loop(lambda v: v < float(sys.argv[1]), lambda v: v * 2.0, [x])\n"
        "with df.Session() as sess:\n"
        "    sess.run(x * 3.0, {x: 1.0})\n"
        "    print(sess.run(y, {x: 1.0}))\n")
    out = tmp_path / "trace.json"
    proc = subprocess.run([sys.executable, "-m", "dataflow", "profile", str(script), "-o",
                           str(out), "--", "8"], capture_output=True, text=True, timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    assert "8.0" in proc.stderr   # the script's own output goes to stderr
    events = check_trace(json.loads(out.read_text()))
    names = {e["name"] for e in events if e["ph"] == "X"}
    assert {"while/mul [iter 0]", "while/mul [iter 2]", "while/mul [iter 3] (dead)"} <= names
    assert not any(n.startswith("mul") for n in names)   # only the last run
    proc = subprocess.run([sys.executable, "-m", "dataflow", "profile", str(script), "-o",
                           str(out), "--all", "--", "8"], capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode == 0, proc.stderr
    names = {e["name"] for e in check_trace(json.loads(out.read_text())) if e["ph"] == "X"}
    assert "mul" in names and "while/mul [iter 0]" in names


def test_the_readme_example_writes_a_trace(tmp_path, monkeypatch):
    readme = (ROOT / "README.md").read_text()
    [block] = [b for b in re.findall(r"```python\n(.*?)```", readme, re.S)
               if "generate_chrome_trace_format" in b]
    monkeypatch.chdir(tmp_path)
    with df.Graph().as_default():
        exec(compile(block, "README-timeline", "exec"), {})
    events = check_trace(json.loads((tmp_path / "timeline.json").read_text()))
    names = {e["name"] for e in events if e["ph"] == "X"}
    assert {f"while/mul [iter {i}]" for i in range(7)} <= names
    assert "while/mul [iter 7] (dead)" in names


def test_render_trace_draws_one_box_per_slice_row(tmp_path):
    render = runpy.run_path(str(ROOT / "docs" / "render_trace.py"))["render"]
    g, y, feeds = loop_with_cond()
    place(g)
    _, stats = traced_run(y, feeds, mode="threads", graph=g)
    out = tmp_path / "t.png"
    render(df.timeline.Timeline(stats).trace_events(), str(out), width=900, font=None)
    data = out.read_bytes()
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = struct.unpack(">II", data[16:24])
    assert width == 900 and height > 100
    pixels = zlib.decompress(data[data.index(b"IDAT") + 4:])
    assert len(pixels) == height * (1 + 3 * width)
    send_orange = bytes((255, 143, 0))
    assert send_orange in pixels   # the Sends' boxes were drawn


def test_kernels_on_worker_threads_are_recorded_on_their_threads():
    rng = np.random.default_rng(0)
    a, b = (rng.standard_normal((1024, 1024)).astype(np.float32) for _ in range(2))
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [1024, 1024], name="x")
        y = df.placeholder(df.float32, [1024, 1024], name="y")
        # Two large independent single-threaded kernels (NumPy's): the executor runs
        # them on its worker threads.
        z = df.add(df.tanh(x, name="mx"), df.tanh(y, name="my"), name="z")
    value, stats = traced_run(z, {x: a, y: b}, graph=g, use_compiled_kernels=False, **PLAIN)
    np.testing.assert_allclose(value, np.tanh(a) + np.tanh(b), rtol=1e-6)
    [dev] = stats.dev_stats
    by_name = {n.node_name: n for n in dev.node_stats}
    scheduler = by_name["z"].thread_id
    for name in ("mx", "my"):
        n = by_name[name]
        assert n.thread_id != scheduler and dev.thread_names[n.thread_id].startswith("dataflow")
        assert n.scheduled_micros <= n.all_start_micros
        assert n.op_start_rel_nanos == 0 and n.op_end_rel_nanos == n.all_end_rel_nanos > 0
        assert n.output[0].tensor_description == TensorDescription("float32", (1024, 1024),
                                                                   4 << 20)
    events = check_trace(json.loads(df.timeline.Timeline(stats).generate_chrome_trace_format()))
    rows = {e["args"]["name"] for e in events if e["name"] == "thread_name"}
    assert len(rows) >= 2 and any(r.startswith("dataflow") for r in rows)
