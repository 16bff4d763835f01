"""The eight imperative programs (examples/imperative) run three ways in this process:
under ``df.function`` (issue 11's co-executing tracer), eagerly, and as the same step
written by hand as a TF1 graph (examples/imperative/tf1_graphs.py).

    python -m benchmarks.tracer [--steps 60] [--repeats 3] [--only NAME[,NAME...]]
                                [--blas-threads N] [--uncounted-collections]

Per program it prints steps/s of each way (the steps after the first ``--warmup``
ones: kernel building, tracing and plan building are not the steady state), the speedup
over eager, ``df.function``'s ``traces`` and ``fallbacks`` (from ``f.stats``), and
whether each way's per-step losses equal eager's: every loss within ``rtol=1e-4``
(fusion's approximations; the TF1 versions in fact match to a few ulps) and, for
``df.function``, the same printed output (numbers within the same tolerance: a print
that ran twice, or not at all, is a mismatch) and the same ``observations`` (what the
program's Python side recorded: branches taken, F1 scores, trip counts...). A geometric-mean speedup closes the table.
When ``dataflow.function`` does not exist its columns read "n/a: df.function not built".

Over many steps, training amplifies last-bit differences: a graph adds the gradients
that reach one tensor (an ``add_n``) in another order than eager's tape does, which
changes the last bit of a gradient, and a few hundred Adam steps can grow that to a
percent (faster_rcnn, music_transformer over 300 steps). So a way whose losses leave
the tolerance is compared with what rounding order alone does to the same program: eager
run once more with the terms of every gradient sum of its tape reversed
(:func:`reordered_gradient_sums`). The way reads "rounding" when it stays within the
tolerance of eager on every step before that reordered eager run leaves it (the way
diverges no earlier than eager diverges from itself), else "NO". Below the table, each
such program gets the first step beyond the tolerance and the largest relative
difference (and its step) of each way and of the reordered eager run. For a
``df.function`` that reads "rounding", its observations are compared over the steps
before its losses left the tolerance (after that the program's own decisions, such as a
proposal count, follow the diverged values), and its printed output is not compared.

Figures are medians over ``--repeats`` runs, the three ways interleaved per repeat
(the machine is shared: read the ratios). ``--blas-threads 1`` caps BLAS's threads
(threadpoolctl) for the whole run: on a loaded machine a multi-threaded BLAS spinning
against other processes made the small matmuls of the Transformer programs 4 to 6
times slower, in every column alike. The garbage collections that run between two
steps are added to the next step's time: ``df.function`` pauses the collector while its
step runs, so its collections run at the program's next allocation, outside the timed
call (eager's run inside its steps). ``--uncounted-collections`` leaves them out, as
the rounds before 2026-11-24's fifth did (it flatters ``df.function``).
"""
from __future__ import annotations

import argparse
import contextlib
import gc
import io
import math
import re
import statistics
import time

import numpy as np

import dataflow as df
from dataflow.autodiff import tape as _tape
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
    result (for its ``stats``).

    With ``count_collections``, the garbage collections that run between two calls
    are added to the next call's seconds (:meth:`close` stops counting). df.function
    pauses the collector while a step runs, so its collections run at the program's
    next allocation, outside the call (eager's run inside its steps): without this
    they are not timed."""

    def __init__(self, inner=None, count_collections=False):
        self.inner = inner
        self.seconds = []
        self.wrapped = None
        self._outside = None      # collection seconds since the last call, if counted
        self._gc_start = None
        self._inside = False
        if count_collections:
            self._outside = 0.0
            gc.callbacks.append(self._on_collection)

    def _on_collection(self, phase, info):
        if phase == "start":
            self._gc_start = time.perf_counter()
        elif self._gc_start is not None and not self._inside:
            self._outside += time.perf_counter() - self._gc_start

    def close(self):
        """Stop counting collections (a no-op without ``count_collections``)."""
        if self._on_collection in gc.callbacks:
            gc.callbacks.remove(self._on_collection)

    def __call__(self, step):
        self.wrapped = self.inner(step) if self.inner else step

        def timed(*args):
            self._inside = True
            t0 = time.perf_counter()
            try:
                result = self.wrapped(*args)
            finally:
                self._inside = False
            seconds = time.perf_counter() - t0
            if self._outside is not None:
                seconds, self._outside = seconds + self._outside, 0.0
            self.seconds.append(seconds)
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


def divergence(losses, reference, rtol=RTOL, atol=ATOL) -> dict:
    """How ``losses`` leave ``reference`` step by step: ``first_diff`` (the first step
    whose losses are not bit-equal), ``first_over`` (the first beyond ``rtol``/``atol``),
    both None when there is none; ``max_rel`` (the largest relative difference) and
    ``at`` (its step).

    >>> divergence([1.0, 2.0, 3.3], [1.0, 2.0000001, 3.0])
    {'first_diff': 1, 'first_over': 2, 'max_rel': 0.1, 'at': 2}
    """
    a = np.asarray(losses, np.float64)
    b = np.asarray(reference, np.float64)
    if a.shape != b.shape:
        raise ValueError(f"divergence: {a.shape[0]} losses against {b.shape[0]}")
    rel = np.abs(a - b) / np.maximum(np.abs(b), np.finfo(np.float64).tiny)
    differ = np.flatnonzero(a != b)
    over = np.flatnonzero(~np.isclose(a, b, rtol=rtol, atol=atol))
    at = int(rel.argmax()) if len(rel) else 0
    return {"first_diff": int(differ[0]) if len(differ) else None,
            "first_over": int(over[0]) if len(over) else None,
            "max_rel": round(float(rel[at]), 12) if len(rel) else 0.0, "at": at}


def agreement(way: dict, reordered) -> str:
    """``"yes"`` when a way's losses stay within the tolerance of eager's on every step
    (``way`` is its :func:`divergence` from eager); ``"rounding"`` when they leave it no
    earlier than eager run with its gradient sums reordered does (``reordered``, that
    run's divergence, or None when it was not run); else ``"NO"``.

    >>> agreement({"first_over": None}, None)
    'yes'
    >>> agreement({"first_over": 243}, {"first_over": 243}), agreement({"first_over": 5}, {"first_over": 243})
    ('rounding', 'NO')
    """
    if way["first_over"] is None:
        return "yes"
    if reordered is not None and reordered["first_over"] is not None \
            and way["first_over"] >= reordered["first_over"]:
        return "rounding"
    return "NO"


@contextlib.contextmanager
def reordered_gradient_sums():
    """While active, eager ``GradientTape`` s add the gradients that reach one tensor in
    the reverse of their usual order (the terms of each ``add_n``): the same values up
    to rounding, so a run under it shows how far rounding order alone moves a program's
    losses. (It wraps ``dataflow.autodiff.tape._sum``, the tape's one place for those
    sums.)

    >>> def gradient():
    ...     x = df.constant(2.0)
    ...     with df.GradientTape() as tape:
    ...         tape.watch(x)
    ...         y = x * -1.0 + x * 1.0 + x * 1e-8
    ...     return float(tape.gradient(y, x))
    >>> with df.eager_mode():
    ...     plain = gradient()
    ...     with reordered_gradient_sums():
    ...         reordered = gradient()
    >>> plain, reordered     # 1e-08 + 1.0 - 1.0 against -1.0 + 1.0 + 1e-08
    (0.0, 9.99999993922529e-09)
    """
    original = _tape._sum

    def reversed_sum(grads):
        return original(grads[::-1] if grads else grads)
    _tape._sum = reversed_sum
    try:
        yield
    finally:
        _tape._sum = original


def _prefix_observations(seen: dict, steps: int) -> dict:
    """Observations recorded per step (lists) cut to their first ``steps`` entries; the
    others (end-of-run state) left out."""
    return {key: list(value)[:steps] for key, value in seen.items()
            if isinstance(value, (list, tuple))}


def _run_captured(fn):
    """``(result, stdout text)`` of ``fn()``; an exception becomes the result."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            result = fn()
        except Exception as exc:  # a way that fails is reported, not fatal to the table
            result = exc
    return result, out.getvalue()


def measure_program(name, steps, warmup, repeats, with_function=None,
                    count_collections=True) -> dict:
    """One program's figures: ``{way: {"sps", "equal", "agreement", "divergence",
    "error", "stats"}}`` for the ways ``eager``, ``graph`` and (when available)
    ``function`` (see :func:`divergence`, :func:`agreement`), and when a way's losses
    left the tolerance, ``"reordered"``: the divergence from eager of eager run with its
    gradient sums reordered (:func:`reordered_gradient_sums`)."""
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
            timer = Timed(df.function if way == "function" else None, count_collections)
            try:
                outcome, printed = _run_captured(lambda fn=fn, timer=timer: fn(timer))
            finally:
                timer.close()
            results[way] = (outcome, printed, timer)
            if not isinstance(outcome, Exception):
                samples[way].append(timer.steps_per_second(warmup))
    (eager_losses, eager_seen), eager_printed, _ = results["eager"]
    figures = {}
    for way, (outcome, printed, timer) in results.items():
        entry = {"sps": statistics.median(samples[way]) if samples[way] else None,
                 "error": None, "equal": None, "agreement": None, "divergence": None,
                 "stats": None}
        if isinstance(outcome, Exception):
            entry["error"] = f"{type(outcome).__name__}: {str(outcome).splitlines()[0][:80]}"
        else:
            try:
                entry["divergence"] = divergence(outcome[0], eager_losses)
            except ValueError as exc:   # not one loss per step: reported, not compared
                entry["error"] = str(exc)
        if way == "function":
            entry["stats"] = dict(getattr(timer.wrapped, "stats", {}) or {})
        figures[way] = entry
    reordered = None
    if any(e["divergence"] and e["divergence"]["first_over"] is not None
           for e in figures.values()):
        # Only then: what rounding order alone does to this program (one eager run).
        with reordered_gradient_sums():
            outcome, _ = _run_captured(lambda: imperative(Timed()))
        if not isinstance(outcome, Exception):
            reordered = figures["reordered"] = {"divergence": divergence(outcome[0],
                                                                         eager_losses)}
    for way, (outcome, printed, timer) in results.items():
        entry = figures[way]
        if entry["error"]:
            continue
        verdict = agreement(entry["divergence"], reordered and reordered["divergence"])
        if way == "function":  # the Python side must have done the same too
            seen = outcome[1]
            if verdict == "yes":
                same = (same_output(printed, eager_printed)
                        and same_observations(seen, eager_seen))
            else:
                until = entry["divergence"]["first_over"]
                same = same_observations(_prefix_observations(seen, until),
                                         _prefix_observations(eager_seen, until))
            if not same:
                verdict = "NO"
        entry["agreement"] = verdict
        entry["equal"] = verdict == "yes"
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
                                                f[w]["agreement"]))
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
    notes = [_divergence_note(name, f) for name, f in figures.items()]
    notes = [n for n in notes if n]
    if notes:
        lines.append("\nlosses beyond the tolerance of eager's (the first step beyond it, "
                     "the largest relative difference and its step):")
        lines.extend(notes)
    return "\n".join(lines)


def _divergence_note(name, f) -> str:
    """One line on a program some way of which left eager's losses, '' if none did."""
    def part(label, d):
        over = "never" if d["first_over"] is None else f"from step {d['first_over']}"
        return f"{label} {over} (largest {d['max_rel']:.1e}, step {d['at']})"
    parts = [part(label, f[way]["divergence"])
             for way, label in (("function", "df.function"), ("graph", "TF1 graph"))
             if f.get(way) and f[way]["divergence"]
             and f[way]["divergence"]["first_over"] is not None]
    if not parts:
        return ""
    reordered = f.get("reordered")
    parts.append(part("eager with its gradient sums reordered", reordered["divergence"])
                 if reordered else "eager with its gradient sums reordered: failed")
    return f"- {name}: " + "; ".join(parts)


def measure(steps=60, warmup=5, repeats=3, only=None, with_function=None,
            count_collections=True) -> dict:
    """``{program: figures}`` of :func:`measure_program`, programs in PROGRAMS order."""
    return {name: measure_program(name, steps, warmup, repeats, with_function,
                                  count_collections)
            for name in PROGRAMS if only is None or name in only}


def main(argv=None):
    ap = argparse.ArgumentParser(prog="python -m benchmarks.tracer", description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=60, help="steps per run (default 60)")
    ap.add_argument("--warmup", type=int, default=5, help="steps left out of steps/s")
    ap.add_argument("--repeats", type=int, default=3, help="runs per way; medians")
    ap.add_argument("--only", help="comma-separated programs: " + ", ".join(PROGRAMS))
    ap.add_argument("--blas-threads", type=int, help="cap BLAS at this many threads")
    ap.add_argument("--uncounted-collections", action="store_true",
                    help="leave out the garbage collections run between two steps "
                         "(df.function's run there; counted by default)")
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
        print(format_table(measure(args.steps, args.warmup, args.repeats, only,
                                   count_collections=not args.uncounted_collections)))
    print(f"\n{args.steps} steps per run, steps/s over steps {args.warmup + 1}..{args.steps}, "
          f"medians of {args.repeats} interleaved runs; losses equal: every step within "
          f"rtol={RTOL}, atol={ATOL}"
          + (f"; BLAS threads {args.blas_threads}" if args.blas_threads else "")
          + ("; collections between steps NOT counted" if args.uncounted_collections
             else "; collections between steps counted")
          + f"; {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
