"""Static memory plans against measured peaks.

    python -m benchmarks.memory [--steps 1000]

For each workload: the plan (``df.memory.plan``) of one step — its peak, the lower
bound under its order, the no-reuse figure and their ratios — and the step run
without a plan, its peak measured with tracemalloc (:func:`measure_step_peak`).
The measured run allocates a fresh NumPy array per op (the NumPy reference kernels,
no fusion, one thread, so every allocation is traced and the order is the
executor's), so it is compared with the part of the plan a run allocates: the arena,
the stacks and the fetched values (variables, constants and feeds exist before it).

Workloads: the digits MLP Adam step (1797 x 64, 64-64-64-10) and the tanh RNN
forward + gradient (T steps, batch 32, hidden 256) of ``benchmarks/workloads.py``,
and a 10-layer MLP inference.
"""
from __future__ import annotations

import argparse
import gc
import tracemalloc

import numpy as np

import dataflow as df

from . import workloads

__all__ = ["WORKLOADS", "measure_step_peak", "planned_run_bytes", "report"]


def measurement_config():
    """A Session whose every value is a NumPy array allocated when its op runs."""
    return df.ConfigProto(use_compiled_kernels=False, fuse_elementwise=False,
                          inter_op_parallelism_threads=1)


def measure_step_peak(sess, fetches, feed_dict=None) -> int:
    """Bytes the step allocates at its peak, over what existed before it (tracemalloc);
    one warm-up run first, so caches and compiled plans are not counted."""
    sess.run(fetches, feed_dict)
    gc.collect()
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        result = sess.run(fetches, feed_dict)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del result
    return peak - base


def planned_run_bytes(plan) -> int:
    """What a run allocates by the plan: the arena, the stacks and the fetched values."""
    return plan.arena_bytes + plan.stack_bytes_for() + plan.zones["fetches"]


def _mlp_step():
    data, labels, init = workloads.mlp_data(0)
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [None, 64])
        y = df.placeholder(df.float32, [None, 10])
        h = x
        for k, w0 in enumerate(init):
            h = df.matmul(h, df.Variable(w0)) + df.Variable(np.zeros(w0.shape[1], np.float32))
            if k < len(init) - 1:
                h = df.sigmoid(h)
        loss = df.reduce_mean(df.nn.softmax_cross_entropy_with_logits(labels=y, logits=h))
        step = df.train.AdamOptimizer(0.001).minimize(loss)
        init_op = df.global_variables_initializer()
    return g, step, {x: data, y: labels}, init_op


def _rnn_grad(steps):
    w, x, h0 = workloads.rnn_data(32, 256, 0)
    g = df.Graph()
    with g.as_default():
        wt = df.placeholder(df.float32, [256, 256])
        xt = df.placeholder(df.float32, [32, 256])
        _, h = df.while_loop(lambda i, h: i < steps,
                             lambda i, h: (i + 1, df.tanh(df.matmul(h, wt) + xt)),
                             (0, df.constant(h0)))
        (grad_w,) = df.gradients(df.reduce_sum(h), [wt])
    return g, grad_w, {wt: w, xt: x}, None


def _deep_mlp(layers=10, batch=512, width=256):
    rng = np.random.default_rng(0)
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [None, width])
        h = x
        for _ in range(layers):
            w = df.constant((rng.standard_normal((width, width)) / 16).astype(np.float32))
            h = df.nn.relu(df.matmul(h, w) + 0.1)
        out = df.reduce_sum(h, axis=1)
    return g, out, {x: rng.random((batch, width), np.float32)}, None


WORKLOADS = {
    "digits MLP Adam step (1797 x 64)": lambda steps: _mlp_step(),
    "tanh RNN fwd+grad (T steps, 32 x 256)": _rnn_grad,
    "10-layer MLP inference (512 x 256)": lambda steps: _deep_mlp(),
}


def report(steps=1000) -> list:
    """One row per workload: the plan's figures and the measured peak (bytes)."""
    rows = []
    for name, make in WORKLOADS.items():
        g, fetch, feed, init = make(steps)
        plan = df.memory.plan(fetch, feed_dict=feed, graph=g)
        sess = df.Session(graph=g, config=measurement_config())
        if init is not None:
            sess.run(init)
        measured = measure_step_peak(sess, fetch, feed)
        sess.close()
        rows.append({
            "workload": name.replace("T steps", f"T={steps}"),
            "peak": plan.peak_bytes, "lower_bound": plan.lower_bound_bytes,
            "naive": plan.naive_bytes, "arena": plan.arena_bytes,
            "arena_lower_bound": plan.lower_bound_arena,
            "stacks": plan.stack_bytes_for(), "planned_run": planned_run_bytes(plan),
            "measured_run": measured,
        })
    return rows


def _mib(n):
    return f"{n / 2**20:.2f}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000, help="RNN trip count")
    args = parser.parse_args(argv)
    print("| workload | plan peak MiB | lower bound MiB | peak / lower bound | no reuse MiB "
          "| no reuse / peak | arena MiB | arena / its lower bound | stacks MiB | planned run MiB | measured run "
          "(unplanned) MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in report(args.steps):
        print(f"| {r['workload']} | {_mib(r['peak'])} | {_mib(r['lower_bound'])} | "
              f"{r['peak'] / r['lower_bound']:.3f} | {_mib(r['naive'])} | "
              f"{r['naive'] / r['peak']:.2f} | {_mib(r['arena'])} | "
              f"{r['arena'] / max(r['arena_lower_bound'], 1):.4f} | {_mib(r['stacks'])} | "
              f"{_mib(r['planned_run'])} | {_mib(r['measured_run'])} |")


if __name__ == "__main__":
    main()
