"""The tracer section of ``python -m benchmarks.compare --only tracer``: the eight
imperative programs (examples/imperative) ported to TF2, JAX and PyTorch
(benchmarks/tracer_ports), each run eagerly and under its framework's compiler --
``tf.function`` (AutoGraph), ``jax.jit``, ``torch.compile`` -- with the same steps,
data and initial weights; and dataflow's own programs under ``df.function`` when it
exists (else that row reads "n/a: df.function not built").

A compiled run *fails* when it raises, or when its result is not its own eager run's:
a per-step loss off by more than 1% (compilers reorder float arithmetic and the
rounding compounds over training: see RTOL), different printed output (numbers
compared to the same tolerance), or different
observations (what the program's Python side recorded: branches taken, F1 scores, trip
counts, the running loss, skipped steps). Steps/s count the steps after the first
``warmup`` (tracing and compilation excluded; later retracing or recompilation is
included, as a user pays it).

Each framework runs in a fresh process of its own (``--tracer-worker NAME``, results
back as JSON), one after another: their thread pools would slow each other.
"""
from __future__ import annotations

import contextlib
import importlib
import io
import json
import os
import re
import subprocess
import sys
import time
import traceback

import numpy as np

from .tracer import same_observations, same_output

NOT_BUILT = "n/a: df.function not built"
# A compiled run's losses may drift from eager's: compilers reassociate float
# arithmetic and the difference compounds over training steps (torch.compile's MLP
# reaches 1e-3 relative in 30 steps, every step plain rounding). A semantic failure --
# a frozen branch, a keep_prob fixed at trace time -- moves them by percents at once.
RTOL, ATOL = 1e-2, 1e-6

FRAMEWORKS = {
    "dataflow df.function": "benchmarks.tracer_ports.dataflow_ports",
    "TF2 tf.function": "benchmarks.tracer_ports.tf2_ports",
    "JAX jax.jit": "benchmarks.tracer_ports.jax_ports",
    "PyTorch torch.compile": "benchmarks.tracer_ports.torch_ports",
}


class _Timed:
    def __init__(self, compiler=None):
        self.compiler, self.seconds = compiler, []

    def __call__(self, step):
        inner = self.compiler(step) if self.compiler else step

        def timed(*args):
            t0 = time.perf_counter()
            result = inner(*args)
            self.seconds.append(time.perf_counter() - t0)
            return result
        return timed


def _attempt(run, steps, compiler, warmup):
    """``{"losses", "observations", "printed", "sps"}`` or ``{"error"}`` of one run."""
    timer, out = _Timed(compiler), io.StringIO()
    with contextlib.redirect_stdout(out):
        try:
            losses, observations = run(steps, wrap=timer)
        except Exception as exc:
            return {"error": _describe(exc), "where": _where(exc)}
    steady = timer.seconds[warmup:]
    return {"losses": losses, "observations": _jsonable(observations),
            "printed": out.getvalue(), "sps": len(steady) / sum(steady) if steady else None}


def _describe(exc) -> str:
    """The exception's type and the informative line of its message (AutoGraph puts
    the original error last, after "in user code:" and a traceback)."""
    text = str(exc).strip()
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    inner = exc.__cause__ or exc.__context__
    if inner is not None and lines and "VERBOSE" in lines[0]:
        # a compiler's internal error wrapping the real one (TorchDynamo's)
        return f"{type(exc).__name__} from {_describe(inner)}"
    if not lines:
        return type(exc).__name__
    frame = re.search(r'File "([^"]+)", line (\d+), in (\w+)', text)
    if "from user code:" in lines and frame:  # TorchDynamo: where tracing failed
        path = frame.group(1).split("site-packages/")[-1]
        head = "" if lines[0] == "from user code:" else lines[0].rstrip(":") + " "
        line = f"{head}raised while tracing {frame.group(3)} ({path}:{frame.group(2)})"
    else:
        line = lines[-1] if lines[0].endswith(":") else lines[0]
    if line.startswith(type(exc).__name__ + ":"):  # AutoGraph repeats the type
        line = line[len(type(exc).__name__) + 1:].strip()
    return f"{type(exc).__name__}: {line[:140]}"


def _where(exc) -> str:
    """The innermost traceback frame in a port's own code (else the innermost)."""
    frames = traceback.extract_tb(exc.__traceback__)
    own = [f for f in frames
           if "tracer_ports" in f.filename or "examples/imperative" in f.filename]
    last = (own or frames)[-1]
    return f"{os.path.basename(last.filename)}:{last.lineno}"


def _jsonable(value):
    if isinstance(value, dict):
        return {k: _jsonable(v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_jsonable(v) for v in value]
    if hasattr(value, "item"):
        return value.item()
    return value


def verdict(eager: dict, compiled: dict) -> str:
    """"ok", "error: ...", or "wrong: <what differs>" of a compiled run against eager."""
    if "error" in compiled:
        return f"error: {compiled['error']} ({compiled['where']})"
    wrong = []
    e, c = np.asarray(eager["losses"]), np.asarray(compiled["losses"])
    if e.shape != c.shape:
        wrong.append(f"losses ({len(c)} steps, not {len(e)})")
    else:
        rel = np.abs(c - e) / np.maximum(np.abs(e), ATOL)
        if rel.max() > RTOL:
            wrong.append(f"losses (step {int(np.argmax(rel > RTOL))} off by "
                         f"{rel.max():.0%})")
    if not same_output(compiled["printed"], eager["printed"], RTOL, ATOL):
        wrong.append("printed output")
    if not same_observations(compiled["observations"], eager["observations"], RTOL, ATOL):
        wrong.append("observations " + ",".join(
            k for k in eager["observations"]
            if not same_observations({k: compiled["observations"].get(k)},
                                     {k: eager["observations"][k]}, RTOL, ATOL)))
    return "wrong: " + "; ".join(wrong) if wrong else "ok"


def worker(framework: str, steps: int, warmup: int, only=None) -> dict:
    """Every program of one framework, eager then compiled: ``{program: {...}}``."""
    module = importlib.import_module(FRAMEWORKS[framework])
    if module.COMPILE is None:
        return {"_error": NOT_BUILT}
    results = {}
    for name, run in module.PORTS.items():
        if only and name not in only:
            continue
        eager = _attempt(run, steps, None, warmup)
        compiled = _attempt(run, steps, module.COMPILE, warmup)
        results[name] = {"eager_sps": eager.get("sps"), "compiled_sps": compiled.get("sps"),
                         "verdict": verdict(eager, compiled) if "error" not in eager
                         else f"eager failed: {eager['error']}"}
    return results


def _isolated(framework, steps, warmup, only, threads) -> dict:
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(
        filter(None, [root, os.environ.get("PYTHONPATH")])))
    if threads:
        from .compare import THREAD_VARIABLES
        env.update({var: str(threads) for var in THREAD_VARIABLES})
    cmd = [sys.executable, "-m", "benchmarks.compare", "--tracer-worker", framework,
           "--tracer-steps", str(steps)] + (["--tracer-only", ",".join(only)] if only else [])
    proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
    lines = proc.stdout.strip().splitlines()
    if proc.returncode != 0 or not lines:
        return {"_error": f"worker exited {proc.returncode}: "
                          f"{(proc.stderr.strip().splitlines() or ['?'])[-1][:200]}"}
    return json.loads(lines[-1])


def section(steps=60, warmup=5, only=None, threads=None) -> str:
    """The Markdown table: per framework and program, the verdict and steps/s."""
    from examples.imperative import PROGRAMS
    lines = [("| framework | program | verdict | eager steps/s | compiled steps/s "
              "| compiled / eager |"), "|---|---|---|---|---|---|"]
    summary = []
    for framework in FRAMEWORKS:
        results = _isolated(framework, steps, warmup, only, threads)
        if "_error" in results:
            lines.append(f"| {framework} | all | {results['_error']} | | | |")
            summary.append(f"{framework}: {results['_error']}")
            continue
        failed = [n for n, r in results.items() if r["verdict"] != "ok"]
        summary.append(f"{framework}: {len(failed)} of {len(results)} fail"
                       + (f" ({', '.join(failed)})" if failed else ""))
        for name in (n for n in PROGRAMS if n in results):
            r = results[name]
            e, c = r["eager_sps"], r["compiled_sps"]
            cells = [f"{v:.1f}" if v else "-" for v in (e, c)]
            ratio = f"{c / e:.2f}x" if e and c else "-"
            lines.append(f"| {framework} | {name} | {r['verdict']} | {cells[0]} | {cells[1]} "
                         f"| {ratio} |")
    note = (f"{steps} steps per run; steps/s over steps {warmup + 1}..{steps}; a compiled "
            f"run fails on an error or on losses (rtol {RTOL:g}), printed output or "
            "observations that differ from the same framework's eager run. Each framework "
            "in its own process.")
    return "\n".join([*lines, "", *summary, "", note])


def worker_main(framework, steps, only) -> None:
    """Body of ``--tracer-worker``: one framework's results as JSON on the last line."""
    only = set(only.split(",")) if only else None
    print(json.dumps(worker(framework, steps, 5, only)), flush=True)
