"""A traced step of one while loop partitioned over two devices, as a Chrome trace.

The loop's counter and predicate live on /cpu:0, the matrix work of its body on
/cpu:1, and every iteration takes a cond branch on /cpu:1 only when the counter is
odd. The step runs with ``RunOptions(trace_level=FULL_TRACE)`` in the processes mode
(each device its own process) and the trace is written to ``timeline.json`` (open it
in ui.perfetto.dev or chrome://tracing; README's screenshot is this trace, drawn by
``docs/render_trace.py``)::

    python examples/timeline_demo.py [OUT.json] [threads|processes] [STEPS]
"""
from __future__ import annotations

import sys

import numpy as np

import dataflow as df


def build(iterations=4, n=64):
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((n, n)) / np.sqrt(n)).astype(np.float32)
    with df.device("/cpu:0"):
        x = df.placeholder(df.float32, [n, n], name="x")

    def body(i, h):
        with df.device("/cpu:1"):
            h = df.tanh(df.matmul(h, w, name="matmul"), name="tanh")
            odd = df.equal(df.floormod(i, 2), 1)
            h = df.cond(odd, lambda: h * 0.5, lambda: h)
        with df.device("/cpu:0"):
            return i + 1, h

    with df.device("/cpu:0"):
        _, y = df.while_loop(lambda i, h: i < iterations, body, [df.constant(0), x])
        total = df.reduce_sum(y, name="total")
    return x, total


def span_us(stats) -> float:
    """First start to last end of a step's records, in microseconds."""
    nodes = [n for d in stats.dev_stats for n in d.node_stats]
    return (max(n.all_start_nanos + n.all_end_rel_nanos for n in nodes)
            - min(n.all_start_nanos for n in nodes)) / 1000.0


def main(out="timeline.json", mode="processes", steps=5):
    """Trace ``steps`` steps and keep the shortest (on a busy machine a worker process
    may wake up late for one step); returns its StepStats."""
    x, total = build()
    options = df.RunOptions(trace_level=df.RunOptions.FULL_TRACE)
    config = df.ConfigProto(partition_mode=mode, device_count={"CPU": 2})
    runs = []
    with df.Session(config=config) as sess:
        feed = {x: np.eye(64, dtype=np.float32)}
        sess.run(total, feed)   # the first run compiles (and forks the workers)
        for _ in range(int(steps)):
            meta = df.RunMetadata()
            value = sess.run(total, feed, options=options, run_metadata=meta)
            runs.append(meta)
    meta = min(runs, key=lambda m: span_us(m.step_stats))
    with open(out, "w") as f:
        f.write(df.timeline.Timeline(meta.step_stats).generate_chrome_trace_format())
    for dev in meta.step_stats.dev_stats:
        print(f"{dev.device}: {len(dev.node_stats)} node executions")
    print(f"total = {value:.4f}; the shortest of {len(runs)} traced steps "
          f"({span_us(meta.step_stats):.0f} us) written to {out}")
    return meta.step_stats


if __name__ == "__main__":
    main(*sys.argv[1:])
