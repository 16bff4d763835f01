"""One table of dataflow's kernels against NumPy and, when installed, TF1, JAX and PyTorch.

    python -m benchmarks.compare [--repeats 7] [--quick] [--no-frameworks]

Sections:

* kernel families (elementwise, reductions, softmax, ...) against NumPy at 10^3..10^7
  elements (:mod:`benchmarks.kernels_table`);
* the fused chain ``tanh(a*b + c) * 0.5 + a`` on 10^7 float32 in GB/s next to this
  machine's copy bandwidth (:mod:`benchmarks.fusion_table`);
* a 2048x2048 float32 matmul in GFLOP/s;
* the digits MLP full-batch Adam step and the RNN loop (forward, and forward+backward)
  with the compiled kernels and fusion ("after") and with the NumPy reference kernels
  and no fusion ("before"), next to hand-written NumPy;
* the same workloads in the other frameworks that import in this process (the
  optional ``compare`` extra), with ratios to ours.

Every figure is a median of interleaved repeats: the machine is shared and noisy.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import dataflow as df

from . import frameworks, workloads

BEFORE = dict(use_compiled_kernels=False, fuse_elementwise=False)


def _median_times(fns: dict, repeats: int, inner: int = 1) -> dict:
    """Median seconds per call of each callable, the callables interleaved per repeat."""
    samples = {k: [] for k in fns}
    for fn in fns.values():  # warm-up: compilation, plan building, caches
        fn()
    for _ in range(repeats):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            samples[k].append((time.perf_counter() - t0) / inner)
    return {k: statistics.median(v) for k, v in samples.items()}


def _session_fn(build, feeds, config=None):
    g = df.Graph()
    with g.as_default():
        placeholders, out = build()
    sess = df.Session(graph=g, config=config)
    feed = dict(zip(placeholders, feeds))
    return lambda: sess.run(out, feed_dict=feed)


def _chain_graph(n):
    def build():
        a, b, c = (df.placeholder(df.float32, [n]) for _ in range(3))
        return (a, b, c), df.tanh(a * b + c) * 0.5 + a
    return build


def _matmul_graph(n):
    def build():
        a, b = (df.placeholder(df.float32, [n, n]) for _ in range(2))
        return (a, b), df.matmul(a, b)
    return build


def ours_workloads(config=None, quick=False) -> dict:
    """The dataflow side of the cross-framework workloads (same data as frameworks.py)."""
    n = 1_000_000 if quick else frameworks.CHAIN_N
    m = 512 if quick else frameworks.MATMUL_N
    return {
        "chain": _session_fn(_chain_graph(n), frameworks.chain_inputs(n), config),
        "matmul": _session_fn(_matmul_graph(m), frameworks.matmul_inputs(m), config),
        "mlp_adam_step": workloads.make_mlp_adam_step(config=config)[0],
        "rnn_loop": workloads.make_rnn_loop(config=config)[0],
        "rnn_grad": workloads.make_rnn_grad(config=config)[0],
    }


def _work_units(name, quick):
    """(unit, amount per call) used to turn seconds into GB/s or GFLOP/s."""
    if name == "chain":
        n = 1_000_000 if quick else frameworks.CHAIN_N
        return "GB/s", 16 * n / 1e9          # three float32 reads + one write
    if name == "matmul":
        m = 512 if quick else frameworks.MATMUL_N
        return "GFLOP/s", 2 * m ** 3 / 1e9
    return "ms", None


def _fmt(seconds, amount):
    return f"{amount / seconds:.1f}" if amount is not None else f"{seconds * 1e3:.2f}"


def training_section(repeats: int, quick: bool) -> str:
    """MLP step and RNN loops before/after the compiled kernels, next to NumPy."""
    before = df.ConfigProto(**BEFORE)
    rows = []
    for name, make, inner in [("mlp_adam_step", workloads.make_mlp_adam_step, 20),
                              ("rnn_loop", workloads.make_rnn_loop, 1),
                              ("rnn_grad", workloads.make_rnn_grad, 1)]:
        after_fn, numpy_fn = make()[:2]
        before_fn = make(config=before)[0]
        med = _median_times({"after": after_fn, "before": before_fn, "numpy": numpy_fn},
                            max(3, repeats // (1 if inner > 1 else 2)), inner)
        rows.append(f"| {name} | {med['after'] * 1e3:.2f} | {med['before'] * 1e3:.2f} | "
                    f"{med['numpy'] * 1e3:.2f} | {med['before'] / med['after']:.2f}x | "
                    f"{med['after'] / med['numpy']:.2f}x |")
    head = ["| workload (ms) | after: compiled + fused | before: NumPy kernels | "
            "hand-written NumPy | speed-up | after / NumPy |", "|---|---|---|---|---|---|"]
    return "\n".join(head + rows)


def frameworks_section(repeats: int, quick: bool, with_frameworks: bool) -> str:
    ours = ours_workloads(quick=quick)
    numpy_side = {
        "chain": lambda a=frameworks.chain_inputs(1_000_000 if quick else frameworks.CHAIN_N):
            np.tanh(a[0] * a[1] + a[2]) * 0.5 + a[0],
        "matmul": lambda m=frameworks.matmul_inputs(512 if quick else frameworks.MATMUL_N):
            m[0] @ m[1],
        "mlp_adam_step": workloads.make_mlp_adam_step()[1],
        "rnn_loop": workloads.make_rnn_loop()[1],
        "rnn_grad": workloads.make_rnn_grad()[1],
    }
    others = {}
    if with_frameworks and not quick:
        for fw, make in frameworks.FRAMEWORKS.items():
            fns = make()
            if fns:
                others[fw] = fns
    names = list(ours)
    cols = ["dataflow", "NumPy"] + list(others)
    head = ["| workload | unit | " + " | ".join(cols) + " | " +
            " | ".join(f"{c} / dataflow" for c in cols[1:]) + " |",
            "|---|---|" + "---|" * (2 * len(cols) - 1)]
    rows = []
    for name in names:
        fns = {"dataflow": ours[name], "NumPy": numpy_side[name]}
        fns.update({fw: d[name] for fw, d in others.items() if name in d})
        inner = 10 if name == "mlp_adam_step" else 1
        med = _median_times(fns, repeats, inner)
        unit, amount = _work_units(name, quick)
        cells = [_fmt(med[c], amount) if c in med else "-" for c in cols]
        # Ratios as "how many times faster than that column" is dataflow (>1: we win).
        ratios = []
        for c in cols[1:]:
            if c not in med:
                ratios.append("-")
            else:
                ratios.append(f"{med[c] / med['dataflow']:.2f}x")
        rows.append(f"| {name} | {unit} | " + " | ".join(cells) + " | " + " | ".join(ratios)
                    + " |")
    note = ("Ratios are the other column's time over dataflow's: above 1 dataflow is faster."
            + ("" if others else " (No other framework importable here: install the "
               "`compare` extra.)"))
    return "\n".join(head + rows) + "\n\n" + note


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="small sizes, no frameworks")
    ap.add_argument("--no-frameworks", action="store_true")
    ap.add_argument("--only", choices=["kernels", "fusion", "training", "frameworks"],
                    help="print one section")
    args = ap.parse_args(argv)
    from . import fusion_table, kernels_table
    sections = [
        ("Kernel families against NumPy", lambda: kernels_table.table(
            repeats=args.repeats, sizes=(10**3, 10**5) if args.quick else kernels_table.SIZES)),
        ("Fused chain tanh(a*b + c) * 0.5 + a", lambda: fusion_table.table(
            repeats=args.repeats, quick=args.quick)),
        ("Training workloads before/after the compiled kernels",
         lambda: training_section(args.repeats, args.quick)),
        ("Across frameworks", lambda: frameworks_section(args.repeats, args.quick,
                                                         not args.no_frameworks)),
    ]
    keys = ["kernels", "fusion", "training", "frameworks"]
    for key, (title, fn) in zip(keys, sections):
        if args.only and key != args.only:
            continue
        print(f"## {title}\n")
        print(fn())
        print(flush=True)


if __name__ == "__main__":
    main()
