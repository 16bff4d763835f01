"""Autodiff benchmark table: loops with their gradients and a training step.

    python -m benchmarks.autodiff_table [--repeats 7]

Each workload and its baseline run interleaved in the same process; medians and
their ratio are printed, plus the stack memory of the RNN gradient (tracemalloc
peak of one run against T x the bytes of the values the forward loop saves).
"""
from __future__ import annotations

import argparse
import statistics
import tracemalloc

import numpy as np

from . import executor_table, workloads
from .executor_table import _time

TARGETS = {  # name -> (unit, absolute target or None, ratio target or None)
    "rnn_grad": ("ms/run", None, 1.3),
    "cond_in_while_grad": ("µs/iter", 50.0, None),
    "mlp_adam_step": ("ms/step", 1.5, None),
}


def measure(repeats=7):
    rows = []
    ours, base, steps, graph = workloads.make_rnn_grad()
    np.testing.assert_allclose(ours(), base(), rtol=2e-2, atol=1e-2)
    rows.append(("rnn_grad", steps, *_interleaved(ours, base, repeats, 1)))
    memory = stack_memory(ours, graph, steps)
    ours, base, n = workloads.make_cond_in_while_grad()
    np.testing.assert_allclose(ours(), base())
    rows.append(("cond_in_while_grad", n, *_interleaved(ours, base, repeats, 1)))
    ours, base, _ = workloads.make_mlp_adam_step()
    ours(), base()
    rows.append(("mlp_adam_step", 1, *_interleaved(ours, base, repeats, 50)))
    return rows, memory


def _interleaved(ours, base, repeats, inner):
    ours_s, base_s = [], []
    for _ in range(repeats):
        ours_s += _time(ours, 1, inner)
        base_s += _time(base, 1, inner)
    return statistics.median(ours_s), statistics.median(base_s)


def stack_memory(run, graph, steps):
    """(peak bytes allocated during one run, T x bytes saved per iteration)."""
    saved = 0
    for op in graph.get_operations():
        if op.type == "StackPush":
            t = op.inputs[1]
            saved += t.shape.num_elements() * t.dtype.np.itemsize
    tracemalloc.start()
    try:
        run()
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak, steps * saved


def format_table(rows, memory) -> str:
    peak, expected = memory
    return (executor_table.format_table(rows, TARGETS) + "\n\n"
            f"RNN gradient: tracemalloc peak of one run {peak / 2**20:.1f} MiB; values "
            f"saved on stacks T x bytes = {expected / 2**20:.1f} MiB "
            f"(ratio {peak / expected:.2f}).")


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    print(format_table(*measure(args.repeats)))


if __name__ == "__main__":
    main()
