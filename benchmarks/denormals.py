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

Timing method: each setting runs in blocks (``--rounds`` rounds, each a discarded
warm-up run then ``--repeats`` timed runs of one setting, settings in turn, the order
reversed every other round). The BLAS thread pool's mode is process-wide and setting it
wakes every BLAS thread (tens of milliseconds on a loaded machine): interleaving a
flushing and a non-flushing run step by step switched it on every run and charged
that to whichever setting ran next. In blocks, a switch falls on the warm-up run.
``--interleaved`` runs the old method, for comparison.
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
    ap.add_argument("--repeats", type=int, default=5, help="timed runs per block")
    ap.add_argument("--rounds", type=int, default=2, help="blocks per setting")
    ap.add_argument("--interleaved", action="store_true",
                    help="one run per setting in turn (switches the BLAS mode each run)")
    ap.add_argument("--steps", type=int, default=1000)
    ap.add_argument("--interpreted", dest="compile_loops", action="store_const",
                    const=False, default="eager",
                    help="run dataflow's loops interpreted (default: compiled)")
    args = ap.parse_args(argv)

    on, baseline, _, _ = workloads.make_rnn_grad(args.steps, config=df.ConfigProto(
        compile_loops=args.compile_loops))
    off = workloads.make_rnn_grad(args.steps, config=df.ConfigProto(
        flush_denormals=False, compile_loops=args.compile_loops))[0]
    graph, grad_w, feed = rnn_grad_graph(args.steps)
    print(f"RNN gradient T={args.steps} B=32 H=256; FTZ/DAZ settable here: "
          f"{float_env.supported()}")
    for flush in (True, False):
        print(f"  flush_denormals={flush}: {subnormals_per_step(graph, grad_w, feed, flush)} "
              "subnormal values produced by the step's kernels")

    fns = {"dataflow flush_denormals=True": (on, None),
           "dataflow flush_denormals=False": (off, None),
           "NumPy by hand, IEEE": (baseline, False),
           "NumPy by hand, FTZ/DAZ": (baseline, True)}
    if args.interleaved:
        samples = _interleaved(fns, args.repeats)
    else:
        samples = _blocks(fns, args.rounds, args.repeats)
    for k, s in samples.items():
        print(f"  {k:32s} {statistics.median(s) * 1e3:8.1f} ms  "
              f"(min {min(s) * 1e3:.1f}, max {max(s) * 1e3:.1f}, {len(s)} runs)")


def _timed(fn) -> float:
    t = time.perf_counter()
    fn()
    return time.perf_counter() - t


def _blocks(fns: dict, rounds: int, repeats: int) -> dict:
    """Seconds per run of each ``name: (fn, mode)``: a NumPy baseline (``mode`` True or
    False) runs with its thread and the BLAS threads set for the whole block."""
    samples = {k: [] for k in fns}
    names = list(fns)
    for r in range(rounds):
        for k in names if r % 2 == 0 else names[::-1]:
            fn, mode = fns[k]
            if mode is None:
                fn()                                   # warm-up: takes any mode switch
                samples[k] += [_timed(fn) for _ in range(repeats)]
                continue
            before = float_env.flush_denormals_on_this_thread(mode)
            float_env.set_blas_threads_flush(mode)
            try:
                fn()
                samples[k] += [_timed(fn) for _ in range(repeats)]
            finally:
                float_env.flush_denormals_on_this_thread(before)
                float_env.set_blas_threads_flush(before)
    return samples


def _interleaved(fns: dict, repeats: int) -> dict:
    """The first method: one run of each setting in turn (the BLAS pool's mode switches
    at nearly every run)."""
    runs = {k: (fn if mode is None else _numpy_in_mode(fn, mode)) for k, (fn, mode)
            in fns.items()}
    samples = {k: [] for k in runs}
    for fn in runs.values():
        fn()
    for _ in range(repeats):
        for k, fn in runs.items():
            samples[k].append(_timed(fn))
    return samples


if __name__ == "__main__":
    main()
