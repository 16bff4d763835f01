"""Subnormal floats in the RNN gradient, and what flushing them to zero saves.

    python -m benchmarks.denormals [--repeats 5] [--steps 1000]

The compare suite's RNN gradient (``h = tanh(h @ W + x)`` for T steps, B=32, H=256, the
gradient of ``sum(h_T)`` w.r.t. W) drives the backward sweep's ``dh`` towards zero, so
it spends most of its time in subnormal arithmetic unless the CPU flushes them. This
prints, in one process and interleaved:

* how many subnormal values the kernels of one dataflow step produce (counted on every
  kernel output, by bit pattern) with ``ConfigProto(flush_denormals=True)`` and
  ``False``;
* the step's median time with each setting, and the hand-written NumPy backprop
  (:func:`benchmarks.workloads.make_rnn_grad`'s baseline) with IEEE subnormals and
  with its thread and the BLAS threads flushing (:mod:`dataflow.util.float_env`).
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import dataflow as df
from dataflow.runtime.denormals import step_float_mode
from dataflow.runtime.device_set import DeviceSet
from dataflow.runtime.kernel_resolver import KernelResolver
from dataflow.runtime.run_modes import SingleDriver, WorkerPool
from dataflow.util import float_env

from . import workloads


def _counting(fn, counter):
    """``fn`` that adds the subnormals of each output array to ``counter[0]``."""
    def kernel(*args):
        out = fn(*args)
        for v in out if isinstance(out, (tuple, list)) else (out,):
            if isinstance(v, (np.ndarray, np.floating)):
                counter[0] += float_env.count_subnormals(v)
        return out
    return kernel


def subnormals_per_step(graph, fetch, feed: dict, flush: bool) -> int:
    """Subnormal values produced by the kernels of one step of ``fetch``."""
    counter = [0]
    kernels = KernelResolver(DeviceSet(graph, {}, False), df.ConfigProto(), resources={})
    plan = SingleDriver.build(graph, [fetch], [], list(feed),
                              lambda op: _counting(kernels.kernel_for(op), counter))
    pool = WorkerPool()
    try:
        with step_float_mode(flush, plan):
            SingleDriver(pool).execute(plan, list(feed.values()), deadline=None)
    finally:
        pool.shutdown()
    return counter[0]


def _numpy_in_mode(baseline, flush: bool):
    def run():
        before = float_env.flush_denormals_on_this_thread(flush)
        float_env.set_blas_threads_flush(flush)
        try:
            return baseline()
        finally:
            float_env.flush_denormals_on_this_thread(before)
            float_env.set_blas_threads_flush(before)
    return run


def rnn_grad_graph(steps: int, batch: int = 32, hidden: int = 256):
    """``(graph, grad_w, feed)``: the graph of :func:`benchmarks.workloads.make_rnn_grad`
    (built the same way here, so the step's kernels can be instrumented)."""
    w, x, h0 = workloads.rnn_data(batch, hidden)
    graph = df.Graph()
    with graph.as_default():
        wt = df.placeholder(df.float32, w.shape)
        xt = df.placeholder(df.float32, x.shape)
        _, h = df.while_loop(lambda i, h: i < steps,
                             lambda i, h: (i + 1, df.tanh(df.matmul(h, wt) + xt)),
                             (0, df.constant(h0)))
        (grad_w,) = df.gradients(df.reduce_sum(h), [wt])
    return graph, grad_w, {wt: w, xt: x}


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--steps", type=int, default=1000)
    args = ap.parse_args(argv)

    on, baseline, _, _ = workloads.make_rnn_grad(args.steps)
    off = workloads.make_rnn_grad(args.steps, config=df.ConfigProto(flush_denormals=False))[0]
    graph, grad_w, feed = rnn_grad_graph(args.steps)
    print(f"RNN gradient T={args.steps} B=32 H=256; FTZ/DAZ settable here: "
          f"{float_env.supported()}")
    for flush in (True, False):
        print(f"  flush_denormals={flush}: {subnormals_per_step(graph, grad_w, feed, flush)} "
              "subnormal values produced by the step's kernels")

    fns = {"dataflow flush_denormals=True": on, "dataflow flush_denormals=False": off,
           "NumPy by hand, IEEE": _numpy_in_mode(baseline, False),
           "NumPy by hand, FTZ/DAZ": _numpy_in_mode(baseline, True)}
    samples = {k: [] for k in fns}
    for fn in fns.values():
        fn()
    for _ in range(args.repeats):
        for k, fn in fns.items():
            t = time.perf_counter()
            fn()
            samples[k].append(time.perf_counter() - t)
    for k, s in samples.items():
        print(f"  {k:32s} {statistics.median(s) * 1e3:8.1f} ms  "
              f"(min {min(s) * 1e3:.1f}, max {max(s) * 1e3:.1f})")


if __name__ == "__main__":
    main()
