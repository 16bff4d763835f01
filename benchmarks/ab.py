"""A/B timing of the executor workloads: this checkout against another commit.

    python -m benchmarks.ab --base HEAD~1 [--rounds 5] [--only scalar_loop,mlp_step]

A refactor that must not change speed is checked here: the base commit is checked
out into a temporary ``git worktree``, and each round runs every workload once in
each tree, alternating, each in a fresh process (so neither side inherits the
other's caches, allocator state or thread pools, and drift on a shared machine hits
both alike). The table gives the medians over rounds and their ratio (ours / base).

Each child process times the workload with the same code (:func:`child`): a warm-up
run, then ``inner`` runs, reporting the median per run. The workloads come from the
tree's own ``benchmarks/workloads.py``, so both sides build the same graph through
their own library.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile

# name -> (workload factory in benchmarks.workloads, runs per process, unit, scale)
WORKLOADS = {
    "scalar_loop": ("make_scalar_loop", 3, "µs/iter", 1e6),
    "cond_in_while": ("make_cond_in_while", 3, "µs/iter", 1e6),
    "rnn_loop": ("make_rnn_loop", 3, "µs/step", 1e6),
    "mlp_step": ("make_mlp_adam_step", 200, "ms/step", 1e3),
}


def child(name: str) -> float:
    """Seconds per iteration (per run for one-shot workloads) of one workload, median
    of its runs in this process."""
    import time

    from benchmarks import workloads

    factory, inner, _, _ = WORKLOADS[name]
    ours, _, iters = getattr(workloads, factory)()
    ours()  # warm: plan, kernels, caches
    samples = []
    for _ in range(inner):
        t0 = time.perf_counter()
        ours()
        samples.append((time.perf_counter() - t0) / iters)
    return statistics.median(samples)


def _run_child(tree: str, name: str) -> float:
    env = dict(os.environ, PYTHONPATH=tree)
    # This file runs as a script so the base tree needs no copy of it; the workloads and
    # the library come from ``tree`` (first on the path).
    out = subprocess.run([sys.executable, os.path.abspath(__file__), "--child", name],
                         cwd=tree, env=env, capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])["seconds"]


def compare(base_rev: str, names, rounds: int, here: str) -> list:
    """``[(name, unit, ours, base, ratio)]`` with medians over ``rounds`` alternations."""
    tmp = tempfile.mkdtemp(prefix="dataflow-ab-")
    base_tree = os.path.join(tmp, "base")
    subprocess.run(["git", "worktree", "add", "-q", "--detach", base_tree, base_rev],
                   cwd=here, check=True)
    try:
        rows = []
        for name in names:
            ours, base = [], []
            for r in range(rounds):
                # Alternate which side goes first, so a slow start-up of the machine's
                # caches is not charged to one side.
                order = [(here, ours), (base_tree, base)]
                for tree, into in (order if r % 2 == 0 else order[::-1]):
                    into.append(_run_child(tree, name))
                print(f"  {name}: round {r + 1}/{rounds}", file=sys.stderr, flush=True)
            _, _, unit, scale = WORKLOADS[name]
            o, b = statistics.median(ours) * scale, statistics.median(base) * scale
            rows.append((name, unit, o, b, o / b))
        return rows
    finally:
        subprocess.run(["git", "worktree", "remove", "--force", base_tree], cwd=here)
        shutil.rmtree(tmp, ignore_errors=True)


def format_rows(rows, base_rev: str) -> str:
    lines = [f"| workload | unit | this checkout | {base_rev} | ratio |", "|---|---|---|---|---|"]
    for name, unit, o, b, ratio in rows:
        lines.append(f"| {name} | {unit} | {o:.3g} | {b:.3g} | {ratio:.3f}× |")
    return "\n".join(lines)


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--base", default="HEAD~1", help="commit to compare against")
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--only", default=",".join(WORKLOADS), help="comma-separated workloads")
    p.add_argument("--child", help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    if args.child:
        print(json.dumps({"seconds": child(args.child)}))
        return
    here = subprocess.run(["git", "rev-parse", "--show-toplevel"], capture_output=True,
                          text=True, check=True).stdout.strip()
    names = [n for n in args.only.split(",") if n]
    unknown = sorted(set(names) - set(WORKLOADS))
    if unknown:
        p.error(f"unknown workloads {unknown}; choose from {sorted(WORKLOADS)}")
    print(format_rows(compare(args.base, names, args.rounds, here), args.base))


if __name__ == "__main__":
    main()
