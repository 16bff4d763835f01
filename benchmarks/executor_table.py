"""Print the executor benchmark table (figures quoted in RESULTS.md).

    python -m benchmarks.executor_table [--repeats 7]

Each workload and its plain Python/NumPy baseline run interleaved in the same
process, ``--repeats`` times; the table reports medians and their ratio.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

from . import workloads

TARGETS = {  # workload -> (unit, per-iteration target or None, ratio target or None)
    "scalar_loop": ("µs/iter", 6.0, None),
    "rnn_loop": ("ms/run", None, 1.2),
    "cond_in_while": ("µs/iter", 15.0, None),
    "small_run": ("µs/run", 50.0, None),
}


def _time(fn, repeats, inner):
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        samples.append((time.perf_counter() - t0) / inner)
    return samples


def measure(repeats=7):
    rows = []
    for name, make in [("scalar_loop", workloads.make_scalar_loop),
                       ("rnn_loop", workloads.make_rnn_loop),
                       ("cond_in_while", workloads.make_cond_in_while),
                       ("small_run", workloads.make_small_run)]:
        ours, base, iters = make()
        np.testing.assert_allclose(ours(), base(), rtol=1e-5, atol=1e-5)  # warm + check
        inner = 2000 if name == "small_run" else 1
        ours_s, base_s = [], []
        for _ in range(repeats):  # interleave so drift hits both sides alike
            ours_s += _time(ours, 1, inner)
            base_s += _time(base, 1, inner)
        rows.append((name, iters, statistics.median(ours_s), statistics.median(base_s)))
    return rows


def format_table(rows, targets=None) -> str:
    """Markdown table of ``(name, iterations, ours_s, baseline_s)`` rows against
    ``targets[name] = (unit, absolute target or None, ratio target or None)``."""
    targets = targets or TARGETS
    lines = ["| workload | unit | dataflow (median) | baseline (median) | ratio | target | met |",
             "|---|---|---|---|---|---|---|"]
    for name, iters, ours, base in rows:
        unit, absolute, ratio_target = targets[name]
        scale = 1e6 if unit.startswith("µs") else 1e3
        div = iters if unit.endswith("/iter") else 1
        o, b = ours * scale / div, base * scale / div
        ratio = ours / base
        if absolute is not None:
            target, met = f"≤ {absolute:g} {unit}", o <= absolute
        else:
            target, met = f"≤ {ratio_target:g}× baseline", ratio <= ratio_target
        lines.append(f"| {name} | {unit} | {o:.3g} | {b:.3g} | {ratio:.2f}× | {target} | "
                     f"{'yes' if met else 'NO'} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=7)
    args = ap.parse_args()
    print(format_table(measure(args.repeats)))


if __name__ == "__main__":
    main()
