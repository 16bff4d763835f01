"""Page faults and step time with and without keeping freed host memory.

    python -m benchmarks.host_memory_table [--repeats 7] [--rounds 3]

The digits MLP Adam step (ours) and the same step written by hand in NumPy, each in a
fresh process with ``DATAFLOW_RETAIN_HOST_MEMORY=0`` (glibc's default malloc settings)
and with the default (the first Session keeps freed memory, see
``dataflow/runtime/host_memory.py``). The setting is process-wide, so every (variant,
step) pair runs in its own process; rounds alternate them. "both, alternating" runs one
step of each in turn in one process, as the interleaved benchmarks (and a program that
allocates anything else between steps) do; its time is for the pair. Printed: the
median step time over rounds, and the range of minor page faults per step across
rounds. Under glibc's defaults the fault count depends on the process's allocation
history (its mmap threshold adapts to the blocks freed so far), so a step that does not
fault alone may fault beside other work; with the memory kept it stays at zero.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import time

from . import workloads

VARIANTS = {"glibc defaults": "0", "memory kept (default)": "1"}
COLUMNS = ("dataflow", "NumPy by hand", "both, alternating")


def _worker(column: str, repeats: int) -> tuple:
    """Body of ``--worker COLUMN``: (ms per step, faults per step), medians."""
    ours, numpy_step, _ = workloads.make_mlp_adam_step()

    def both():
        ours()
        numpy_step()
    fn = {"dataflow": ours, "NumPy by hand": numpy_step, "both, alternating": both}[column]
    for _ in range(30):
        fn()
    times, faults = [], []
    for _ in range(repeats):
        f0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
        t0 = time.perf_counter()
        for _ in range(100):
            fn()
        times.append((time.perf_counter() - t0) / 100 * 1e3)
        faults.append((resource.getrusage(resource.RUSAGE_SELF).ru_minflt - f0) / 100)
    return statistics.median(times), statistics.median(faults)


def measure(repeats: int, rounds: int) -> dict:
    """``{(variant, column): ([ms...], [faults...])}``, one entry per round."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    results: dict = {}
    for _ in range(rounds):
        for variant, flag in VARIANTS.items():
            env = dict(os.environ, DATAFLOW_RETAIN_HOST_MEMORY=flag,
                       PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get(
                           "PYTHONPATH")])))
            for column in COLUMNS:
                proc = subprocess.run(
                    [sys.executable, "-m", "benchmarks.host_memory_table", "--worker",
                     column, "--repeats", str(repeats)],
                    cwd=root, env=env, check=True, capture_output=True, text=True)
                ms, faults = json.loads(proc.stdout.splitlines()[-1])
                entry = results.setdefault((variant, column), ([], []))
                entry[0].append(ms)
                entry[1].append(faults)
    return results


def format_table(results: dict) -> str:
    lines = ["| malloc settings | step | ms/step (median of rounds) | "
             "minor page faults / step (min–max over rounds) |", "|---|---|---|---|"]
    for (variant, column), (ms, faults) in results.items():
        lines.append(f"| {variant} | {column} | {statistics.median(ms):.2f} | "
                     f"{min(faults):.0f}–{max(faults):.0f} |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--worker", choices=COLUMNS, help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    if args.worker:
        print(json.dumps(_worker(args.worker, args.repeats)), flush=True)
        return
    print(format_table(measure(args.repeats, args.rounds)))


if __name__ == "__main__":
    main()
