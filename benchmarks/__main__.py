"""One summary table of every headline workload, each next to its same-run baseline.

    python -m benchmarks [--quick] [--repeats N] [--only ROW[,ROW...]]

Rows (the detailed tables live in the modules named):

* executor (:mod:`benchmarks.executor_table`): the scalar loop, cond-in-while and the
  fixed cost of a small ``run`` against plain Python; the RNN loop against NumPy;
* autodiff (:mod:`benchmarks.autodiff_table`): the RNN and cond-in-while gradients
  and the digits MLP Adam step against the same computations by hand in NumPy;
* fusion (:mod:`benchmarks.fusion_table`): the fused chain ``tanh(a*b + c) * 0.5 + a``
  through a Session against the NumPy expression, in GB/s;
* kernels (:mod:`benchmarks.kernels_table`): tanh, a bias add, a row sum and softmax
  cross-entropy against the NumPy reference kernels; a float32 matmul through a Session
  against ``a @ b`` (:mod:`benchmarks.compare`);
* partitions (:mod:`benchmarks.partition_table`): a loop over two devices against the
  same loop on one device.

Every pair runs interleaved in this process (``--repeats`` medians), so drift on the
shared machine hits both sides alike: read the ratio column. ``--quick`` shrinks every
workload (a couple of minutes in all); its figures are for checking that the table
runs, not for RESULTS.md.
"""
from __future__ import annotations

import argparse
import statistics
import time
from typing import Callable, NamedTuple

import numpy as np

from . import compare, fusion_table, kernels_table, partition_table, workloads

# Workload sizes per scale. "full" is what RESULTS.md quotes; "quick" is a smoke run;
# "tiny" only exercises the code paths (the test suite uses it).
SCALES = {
    "full": dict(loop_n=100_000, cond_n=10_000, rnn_steps=1000, rnn_hidden=256,
                 grad_steps=1000, grad_cond_n=10_000, chain_n=10 ** 7, kernel_n=10 ** 6,
                 matmul_n=1024, partition_n=20_000, small_inner=2000, mlp_inner=50,
                 repeats=7),
    "quick": dict(loop_n=10_000, cond_n=2_000, rnn_steps=100, rnn_hidden=256,
                  grad_steps=100, grad_cond_n=1_000, chain_n=10 ** 6, kernel_n=10 ** 5,
                  matmul_n=256, partition_n=2_000, small_inner=500, mlp_inner=5,
                  repeats=3),
    "tiny": dict(loop_n=20, cond_n=20, rnn_steps=3, rnn_hidden=8, grad_steps=3,
                 grad_cond_n=10, chain_n=1000, kernel_n=1000, matmul_n=8, partition_n=20,
                 small_inner=2, mlp_inner=1, repeats=1),
}

KERNEL_FAMILIES = ("tanh", "add bias row", "sum axis 1", "softmax_xent")


class Row(NamedTuple):
    """One line of the summary: ``ours`` and ``baseline`` in ``unit`` (a time per call,
    per iteration, or a throughput when ``higher_is_better``)."""

    group: str
    workload: str
    unit: str
    ours: float
    baseline_name: str
    baseline: float
    higher_is_better: bool = False

    @property
    def speedup(self) -> float:
        """How many times faster ours is than the baseline (> 1: ours is faster)."""
        if self.higher_is_better:
            return self.ours / self.baseline
        return self.baseline / self.ours


def _interleaved(ours: Callable, base: Callable, repeats: int, inner: int = 1):
    """Median seconds per call of ``ours`` and ``base``, alternating each repeat."""
    ours(), base()  # warm-up: plans, compilation, caches
    samples = ([], [])
    for _ in range(repeats):
        for k, fn in enumerate((ours, base)):
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            samples[k].append((time.perf_counter() - t0) / inner)
    return statistics.median(samples[0]), statistics.median(samples[1])


def _pair(group, name, make, s, unit, baseline_name, inner=1, check=None):
    """A Row of workload ``make()`` (``(ours, baseline, iterations, ...)``): both checked
    equal by ``check``, then timed interleaved."""
    ours, base, iters = make()[:3]
    if check is not None:
        check(ours(), base())
    o, b = _interleaved(ours, base, s["repeats"], inner)
    scale = {"µs/iter": 1e6 / iters, "µs/run": 1e6, "ms/run": 1e3, "ms/step": 1e3}[unit]
    return Row(group, name, unit, o * scale, baseline_name, b * scale)


def _close(rtol=1e-5, atol=1e-5):
    return lambda got, want: np.testing.assert_allclose(got, want, rtol=rtol, atol=atol)


def executor_rows(s):
    return [
        _pair("executor", "scalar loop", lambda: workloads.make_scalar_loop(s["loop_n"]),
              s, "µs/iter", "Python", check=_close()),
        _pair("executor", "cond in while", lambda: workloads.make_cond_in_while(s["cond_n"]),
              s, "µs/iter", "Python", check=_close()),
        _pair("executor", "small run (fixed cost)", workloads.make_small_run, s, "µs/run",
              "NumPy", inner=s["small_inner"], check=_close()),
        _pair("executor", "RNN loop", lambda: workloads.make_rnn_loop(
            s["rnn_steps"], hidden=s["rnn_hidden"]), s, "ms/run", "NumPy", check=_close()),
    ]


def autodiff_rows(s):
    return [
        _pair("autodiff", "RNN forward + backward", lambda: workloads.make_rnn_grad(
            s["grad_steps"], hidden=s["rnn_hidden"]), s, "ms/run", "NumPy by hand",
            check=_close(rtol=2e-2, atol=1e-2)),
        _pair("autodiff", "cond in while, gradient", lambda:
              workloads.make_cond_in_while_grad(s["grad_cond_n"]), s, "µs/iter", "Python",
              check=_close()),
        _pair("autodiff", "digits MLP Adam step", workloads.make_mlp_adam_step, s,
              "ms/step", "NumPy by hand", inner=s["mlp_inner"]),
    ]


def fusion_rows(s):
    n = s["chain_n"]
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    half = np.float32(0.5)
    fused = fusion_table._session_run(n, True)
    np.testing.assert_allclose(fused(a, b, c), np.tanh(a * b + c) * half + a, atol=1e-5)
    o, base = _interleaved(lambda: fused(a, b, c), lambda: np.tanh(a * b + c) * half + a,
                           s["repeats"])
    gbs = 16 * n / 1e9  # three float32 inputs read, one output written
    return [Row("fusion", f"fused chain, {n:.0e} float32", "GB/s", gbs / o, "NumPy",
                gbs / base, higher_is_better=True)]


def kernel_rows(s):
    n = s["kernel_n"]
    rows = [Row("kernels", f"{family} ({op_type}), {size:.0e}", "µs", ours * 1e6,
                "NumPy kernel", ref * 1e6)
            for family, op_type, size, ours, ref in kernels_table.measure(
                sizes=(n,), repeats=s["repeats"], families=KERNEL_FAMILIES)]
    m = s["matmul_n"]
    a, b = (np.random.default_rng(k).standard_normal((m, m)).astype(np.float32)
            for k in (1, 2))
    ours = compare._session_fn(compare._matmul_graph(m), (a, b))
    o, base = _interleaved(ours, lambda: a @ b, s["repeats"])
    flops = 2 * m ** 3 / 1e9
    rows.append(Row("kernels", f"matmul {m}² float32", "GFLOP/s", flops / o, "NumPy",
                    flops / base, higher_is_better=True))
    return rows


def partition_rows(s):
    part, single, _msgs, _pc, _sc = partition_table.measure(2, s["partition_n"],
                                                            s["repeats"])
    return [Row("partitions", "loop over 2 devices (threads)", "µs/iter", part * 1e6,
                "one device", single * 1e6)]


GROUPS = {"executor": executor_rows, "autodiff": autodiff_rows, "fusion": fusion_rows,
          "kernels": kernel_rows, "partitions": partition_rows}


def measure(scale="full", repeats=None, only=None) -> list:
    """The summary rows at ``scale`` (a key of SCALES), of the groups in ``only``."""
    s = dict(SCALES[scale])
    if repeats is not None:
        s["repeats"] = repeats
    rows = []
    for name, fn in GROUPS.items():
        if only is None or name in only:
            rows += fn(s)
    return rows


def _fmt(v: float) -> str:
    return f"{v:.3g}" if v < 1000 else f"{v:.0f}"


def format_table(rows) -> str:
    """The rows as one Markdown table; "speed-up" > 1 means ours is faster."""
    lines = ["| group | workload | unit | dataflow | baseline | baseline figure | speed-up |",
             "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r.group} | {r.workload} | {r.unit} | {_fmt(r.ours)} | "
                     f"{r.baseline_name} | {_fmt(r.baseline)} | {r.speedup:.3g}× |")
    return "\n".join(lines)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--quick", action="store_true", help="small sizes, 3 repeats")
    ap.add_argument("--scale", choices=sorted(SCALES), help="overrides --quick")
    ap.add_argument("--repeats", type=int, help="medians over this many repeats")
    ap.add_argument("--only", help="comma-separated groups: " + ", ".join(GROUPS))
    args = ap.parse_args(argv)
    scale = args.scale or ("quick" if args.quick else "full")
    only = None if args.only is None else set(args.only.split(","))
    if only is not None and not only <= set(GROUPS):
        ap.error(f"--only: unknown group(s) {sorted(only - set(GROUPS))}")
    t0 = time.perf_counter()
    print(format_table(measure(scale, args.repeats, only)))
    print(f"\n{scale} scale, {time.perf_counter() - t0:.0f} s; speed-up = baseline time / "
          "ours (throughputs: ours / baseline), medians of interleaved repeats")


if __name__ == "__main__":
    main()
