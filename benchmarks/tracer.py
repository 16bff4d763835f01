"""The eight imperative programs (examples/imperative) run three ways in this process:
under ``df.function`` (issue 11's co-executing tracer), eagerly, and as the same step
written by hand as a TF1 graph (examples/imperative/tf1_graphs.py).

    python -m benchmarks.tracer [--steps 60] [--repeats 3] [--only NAME[,NAME...]]
                                [--blas-threads N]

Per program it prints steps/s of each way (the steps after the first ``--warmup``
ones: kernel building, tracing and plan building are not the steady state), the speedup
over eager, ``df.function``'s ``traces`` and ``fallbacks`` (from ``f.stats``), and
whether each way's per-step losses equal eager's: every loss within ``rtol=1e-4``
(fusion's approximations; the TF1 versions in fact match to a few ulps) and, for
``df.function``, the same printed output (numbers within the same tolerance: a print
that ran twice, or not at all, is a mismatch) and the same ``observations`` (what the
program's Python side recorded: branches taken, F1 scores, trip counts...). A geometric-mean speedup closes the table.
When ``dataflow.function`` does not exist its columns read "n/a: df.function not built".

Figures are medians over ``--repeats`` runs, the three ways interleaved per repeat
(the machine is shared: read the ratios). ``--blas-threads 1`` caps BLAS's threads
(threadpoolctl) for the whole run: on a loaded machine a multi-threaded BLAS spinning
against other processes made the small matmuls of the Transformer programs 4 to 6
times slower, in every column alike.
"""
from __future__ import annotations

import argparse
import contextlib
import io
import math
import re
import statistics
import time

import numpy as np

import dataflow as df
from examples.imperative import PROGRAMS, load, tf1_graphs

RTOL, ATOL = 1e-4, 1e-6
NOT_BUILT = "n/a: df.function not built"
_NUMBER = re.compile(r"[-+]?(?:\d+\.\d*|\.\d+|\d+)(?:[eE][-+]?\d+)?")


def function_available() -> bool:
    """Whether this dataflow has ``df.function`` (the tracer of issue 11, section 2)."""
    return callable(getattr(df, "function", None))


class Timed:
    """A ``wrap`` for the programs' ``run``: wraps each step with ``inner`` (e.g.
    ``df.function``) and records every call's seconds; ``wrapped`` is ``inner``'s
    result (for its ``stats``)."""

    def __init__(self, inner=None):
        self.inner = inner
        self.seconds = []
        self.wrapped = None

    def __call__(self, step):
        self.wrapped = self.inner(step) if self.inner else step

        def timed(*args):
            t0 = time.perf_counter()
            result = self.wrapped(*args)
            self.seconds.append(time.perf_counter() - t0)
            return result
        return timed

    def steps_per_second(self, warmup: int) -> float:
        steady = self.seconds[warmup:]
        return len(steady) / sum(steady)


def same_output(a: str, b: str, rtol=RTOL, atol=ATOL) -> bool:
    """Printed texts equal up to their numbers, the numbers equal to ``rtol``/``atol``."""
    if _NUMBER.sub("#", a) != _NUMBER.sub("#", b):
        return False
    x = np.array([float(v) for v in _NUMBER.findall(a)])
    y = np.array([float(v) for v in _NUMBER.findall(b)])
    return bool(np.allclose(x, y, rtol=rtol, atol=atol))


def same_observations(a: dict, b: dict, rtol=RTOL, atol=ATOL) -> bool:
    """Two programs' ``observations`` equal: same keys, numbers to tolerance, other
    values exactly."""
    if a.keys() != b.keys():
        return False
    for key in a:
        x, y = a[key], b[key]
        try:
            if not np.allclose(np.asarray(x, float), np.asarray(y, float), rtol=rtol,
                               atol=atol):
                return False
        except (TypeError, ValueError):  # not numbers (e.g. branch names)
            if x != y:
                return False
    return True


def _run_captured(fn):
    """``(result, stdout text)`` of ``fn()``; an exception becomes the result."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            result = fn()
        except Exception as exc:  # a way that fails is reported, not fatal to the table
            result = exc
    return result, out.getvalue()


def measure_program(name, steps, warmup, repeats, with_function=None) -> dict:
    """One program's figures: ``{way: {"sps", "equal", "error", "stats"}}`` for the ways
    ``eager``, ``graph`` and (when available) ``function``."""
    module = load(name)
    with_function = function_available() if with_function is None else with_function

    def imperative(timer):
        model = module.make_model(0)
        return module.run(steps, wrap=timer, model=model), module.observations(model)
    ways = {"eager": imperative,
            "graph": lambda t: (tf1_graphs.GRAPH_VERSIONS[name](steps, wrap=t), None)}
    if with_function:
        ways["function"] = imperative
    samples = {w: [] for w in ways}
    results = {}
    for _ in range(repeats):
        for way, fn in ways.items():
            timer = Timed(df.function if way == "function" else None)
            outcome, printed = _run_captured(lambda fn=fn, timer=timer: fn(timer))
            results[way] = (outcome, printed, timer)
            if not isinstance(outcome, Exception):
                samples[way].append(timer.steps_per_second(warmup))
    (eager_losses, eager_seen), eager_printed, _ = results["eager"]
    figures = {}
    for way, (outcome, printed, timer) in results.items():
        entry = {"sps": statistics.median(samples[way]) if samples[way] else None,
                 "error": None, "equal": None, "stats": None}
        if isinstance(outcome, Exception):
            entry["error"] = f"{type(outcome).__name__}: {str(outcome).splitlines()[0][:80]}"
        else:
            losses, seen = outcome
            equal = np.allclose(losses, eager_losses, rtol=RTOL, atol=ATOL)
            if way == "function":  # the Python side must have done the same too
                equal = (equal and same_output(printed, eager_printed)
                         and same_observations(seen, eager_seen))
            entry["equal"] = bool(equal)
        if way == "function":
            entry["stats"] = dict(getattr(timer.wrapped, "stats", {}) or {})
        figures[way] = entry
    return figures


def _cell(entry, key="sps"):
    if entry is None:
        return "n/a"
    if entry["error"]:
        return "error"
    return f"{entry[key]:.1f}"


def _speedup(entry, eager):
    if entry is None or entry["error"] or not eager["sps"]:
        return "-"
    return f"{entry['sps'] / eager['sps']:.2f}x"


def format_table(figures: dict) -> str:
    """The table of :func:`measure` results, a geometric-mean line at the bottom."""
    lines = [("| program | hard case | df.function steps/s | eager steps/s "
              "| TF1 graph steps/s | df.function / eager | TF1 graph / eager | traces "
              "| fallbacks | df.function losses = eager | TF1 losses = eager |"),
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    gm = {"function": [], "graph": []}
    for name, f in figures.items():
        fn, eager, graph = f.get("function"), f["eager"], f["graph"]
        stats = (fn or {}).get("stats") or {}
        for way in gm:
            e = f.get(way)
            if e and not e["error"] and e["sps"] and eager["sps"]:
                gm[way].append(e["sps"] / eager["sps"])
        eq = {w: ("-" if f.get(w) is None else ("error" if f[w]["error"] else
                                                ("yes" if f[w]["equal"] else "NO")))
              for w in ("function", "graph")}
        lines.append(
            f"| {name} | {PROGRAMS[name]} | {_cell(fn)} | {_cell(eager)} | {_cell(graph)} "
            f"| {_speedup(fn, eager) if fn else 'n/a'} | {_speedup(graph, eager)} "
            f"| {stats.get('traces', '-') if fn else '-'} "
            f"| {stats.get('fallbacks', '-') if fn else '-'} "
            f"| {eq['function'] if fn else 'n/a'} | {eq['graph']} |")
        for way in ("function", "graph"):
            if f.get(way) and f[way]["error"]:
                lines.append(f"|  | {way} error: {f[way]['error']} |||||||||")

    def geomean(xs):
        return f"{math.exp(sum(map(math.log, xs)) / len(xs)):.2f}x" if xs else "-"
    fn_gm = geomean(gm["function"]) if any(f.get("function") for f in figures.values()) \
        else NOT_BUILT
    lines.append(f"\ngeometric-mean speedup over eager: df.function {fn_gm}, "
                 f"TF1 graph {geomean(gm['graph'])} ({len(figures)} programs)")
    return "\n".join(lines)


def measure(steps=60, warmup=5, repeats=3, only=None, with_function=None) -> dict:
    """``{program: figures}`` of :func:`measure_program`, programs in PROGRAMS order."""
    return {name: measure_program(name, steps, warmup, repeats, with_function)
            for name in PROGRAMS if only is None or name in only}


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tracer", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=60, help="steps per run (default 60)")
    ap.add_argument("--warmup", type=int, default=5, help="steps left out of steps/s")
    ap.add_argument("--repeats", type=int, default=3, help="runs per way; medians")
    ap.add_argument("--only", help="comma-separated programs: " + ", ".join(PROGRAMS))
    ap.add_argument("--blas-threads", type=int, help="cap BLAS at this many threads")
    args = ap.parse_args(argv)
    only = None if args.only is None else set(args.only.split(","))
    if only is not None and not only <= set(PROGRAMS):
        ap.error(f"--only: unknown program(s) {sorted(only - set(PROGRAMS))}")
    if args.steps <= args.warmup:
        ap.error("--steps must be larger than --warmup")
    if not function_available():
        print(f"df.function: {NOT_BUILT} (its columns read n/a)\n")
    t0 = time.perf_counter()
    limits = contextlib.nullcontext()
    if args.blas_threads:
        from threadpoolctl import threadpool_limits
        limits = threadpool_limits(args.blas_threads, user_api="blas")
    with limits:
        print(format_table(measure(args.steps, args.warmup, args.repeats, only)))
    print(f"\n{args.steps} steps per run, steps/s over steps {args.warmup + 1}..{args.steps}, "
          f"medians of {args.repeats} interleaved runs; losses equal: every step within "
          f"rtol={RTOL}, atol={ATOL}"
          + (f"; BLAS threads {args.blas_threads}" if args.blas_threads else "")
          + f"; {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
