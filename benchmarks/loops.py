"""Loops compiled by the loop compiler (``dataflow/loopc``) against same-run baselines.

    python -m benchmarks.loops [--repeats 7] [--quick] [--only rnn] [--threads 1]
                               [--blas-coretype env|native|both]

Every figure is a median of interleaved repeats, next to its baseline measured in the
same run:

* scalar while, 10^5 iterations: compiled (``compile_loops="eager"``), interpreted
  (``compile_loops=False``) and a plain Python int loop, in microseconds per iteration;
* cond-in-while, 10^4 iterations, forward and forward+gradient (d acc / d w), against
  the same loop in plain Python;
* the tanh RNN ``h = tanh(h @ W + x)``, T=1000, B=32, H=256, float32: forward against
  the NumPy loop, forward+gradient of ``sum(h_T)`` w.r.t. W against hand-written NumPy
  backprop (:mod:`benchmarks.workloads`);
* compile times: the cond-in-while gradient graph compiled cold (an empty cache
  directory, in a fresh process) and in a new process with a warm cache, each as the
  first run's extra time over a later run, next to Numba's own start-up in the same
  process (``import numba`` and the first call of a trivial cached function, measured
  first, so the extra is what dataflow adds).

The output names the BLAS kernels the run used (:mod:`benchmarks.blas_config`);
``--blas-coretype native`` runs the benchmark in a child process without
``OPENBLAS_CORETYPE`` (OpenBLAS then detects the CPU), ``both`` runs it as it is and then
so.

``benchmarks.compare --only loops`` puts the same loops next to TF1 (graph mode,
control flow v1) and JAX ``jit`` (``lax.while_loop``; gradients through ``lax.scan``,
since JAX cannot differentiate ``while_loop``), in one process.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
import time

import numpy as np

import dataflow as df

from . import blas_config, workloads

EAGER = dict(compile_loops="eager")
OFF = dict(compile_loops=False)


def medians(fns: dict, repeats: int) -> dict:
    """Median seconds per call, the callables interleaved per repeat (after a warm-up)."""
    for fn in fns.values():
        fn()
    samples = {k: [] for k in fns}
    for _ in range(repeats):
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            samples[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in samples.items()}


def _with_config(make, config, **kw):
    """``make``'s (ours, baseline, iterations[, graph]) with a Session of ``config``."""
    return make(config=df.ConfigProto(**config), **kw)


def loop_rows(repeats: int, quick: bool, only: str = "") -> list:
    """``[(workload, {column: seconds per iteration}, iterations)]`` (the workloads
    whose name contains ``only``)."""
    n_scalar, n_cond, steps = (10_000, 1_000, 50) if quick else (100_000, 10_000, 1000)
    rows = []
    for name, make, kw, n in [
            ("scalar while", workloads.make_scalar_loop, {"n": n_scalar}, n_scalar),
            ("cond-in-while fwd", workloads.make_cond_in_while, {"n": n_cond}, n_cond),
            ("cond-in-while fwd+grad", workloads.make_cond_in_while_grad, {"n": n_cond},
             n_cond),
            ("tanh RNN fwd", workloads.make_rnn_loop, {"steps": steps}, steps),
            ("tanh RNN fwd+grad", workloads.make_rnn_grad, {"steps": steps}, steps)]:
        if only.lower() not in name.lower():
            continue
        compiled = _with_config(make, EAGER, **kw)
        interpreted = _with_config(make, OFF, **kw)
        got, want = compiled[0](), compiled[1]()
        assert np.allclose(got, want, rtol=1e-3, atol=1e-3), (name, got, want)
        t = medians({"compiled": compiled[0], "interpreted": interpreted[0],
                     "baseline": compiled[1]}, repeats)
        rows.append((name, {k: v / n for k, v in t.items()}, n))
    return rows


# Numba's own start-up, measured in the same process before dataflow is imported: ``import
# numba``, then the first call of a trivial ``cache=True`` function (which loads Numba's
# typing and lowering registries, NumPy's and SciPy's BLAS bindings among them, as any
# first compile or cache load does).
_TRIVIAL = textwrap.dedent("""
    import numpy as np
    from numba import njit


    @njit(cache=True)
    def first(x):
        return x.sum() + 1
""")

_COMPILE_SCRIPT = textwrap.dedent("""
    import json, sys, time
    t0 = time.perf_counter()
    import numba
    t_numba = time.perf_counter() - t0
    import numpy as np
    sys.path.insert(0, sys.argv[1])
    import df_trivial_numba
    df_trivial_numba.first(np.zeros(3))
    t_startup = time.perf_counter() - t0
    t0 = time.perf_counter()
    import dataflow as df
    t_import = time.perf_counter() - t0
    from benchmarks import workloads
    config = df.ConfigProto(compile_loops="eager")
    ours = workloads.make_cond_in_while_grad(n=10_000, config=config)[0]
    t0 = time.perf_counter(); ours(); first = time.perf_counter() - t0
    t0 = time.perf_counter(); ours(); later = time.perf_counter() - t0
    print(json.dumps({"numba_import": t_numba, "numba_startup": t_startup,
                      "dataflow_import": t_import, "first": first, "later": later}))
""")


def compile_times() -> dict:
    """Cold compile and warm-cache new-process figures of the cond-in-while gradient
    (generated modules and Numba's cache in a fresh directory; the cached helpers of
    ``dataflow.loopc.nbhelpers`` stay in Numba's cache beside the package, filled once per
    installation)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    with tempfile.TemporaryDirectory() as cache:
        with open(os.path.join(cache, "df_trivial_numba.py"), "w") as f:
            f.write(_TRIVIAL)
        env = dict(os.environ, DATAFLOW_CACHE_DIR=cache,
                   PYTHONPATH=os.pathsep.join(filter(None, [root, os.environ.get(
                       "PYTHONPATH")])))
        out = {}
        for label in ("cold", "warm"):
            proc = subprocess.run([sys.executable, "-c", _COMPILE_SCRIPT, cache], cwd=root,
                                  env=env, capture_output=True, text=True, timeout=600)
            if proc.returncode:
                raise RuntimeError(proc.stderr[-2000:])
            out[label] = json.loads(proc.stdout.strip().splitlines()[-1])
    return out


def table(rows) -> str:
    lines = ["| workload | iterations | compiled µs/iter | interpreted µs/iter | baseline "
             "µs/iter | compiled / baseline | interpreted / compiled |",
             "|---|---|---|---|---|---|---|"]
    for name, t, n in rows:
        lines.append(f"| {name} | {n} | {t['compiled'] * 1e6:.4g} | "
                     f"{t['interpreted'] * 1e6:.4g} | {t['baseline'] * 1e6:.4g} | "
                     f"{t['compiled'] / t['baseline']:.3f}x | "
                     f"{t['interpreted'] / t['compiled']:.0f}x |")
    return "\n".join(lines)


def compile_table(c) -> str:
    rows = ["| cond-in-while gradient graph, new process | first run | a later run | "
            "extra on first run | Numba's start-up (import + first cached call) | "
            "`import numba` | `import dataflow` |", "|---|---|---|---|---|---|---|"]
    for label in ("cold", "warm"):
        r = c[label]
        rows.append(f"| {label} cache | {r['first']:.3f} s | {r['later'] * 1e3:.2f} ms | "
                    f"{r['first'] - r['later']:.3f} s | {r['numba_startup']:.3f} s | "
                    f"{r['numba_import']:.3f} s | {r['dataflow_import']:.3f} s |")
    return "\n".join(rows)


# -- other frameworks (benchmarks.compare --only loops) ---------------------------------------

def tf1_loops(n_scalar=100_000, n_cond=10_000) -> dict:
    try:
        import tensorflow as tf
    except ImportError:
        return {}
    v1 = tf.compat.v1
    v1.disable_eager_execution()
    v1.disable_control_flow_v2()
    out = {}
    g = tf.Graph()
    with g.as_default():
        r = v1.while_loop(lambda i: i < n_scalar, lambda i: i + 1, [0])
    s1 = v1.Session(graph=g)
    out["scalar while"] = lambda: s1.run(r)
    g = tf.Graph()
    with g.as_default():
        def body(i, acc):
            return i + 1, v1.cond(tf.equal(i % 2, 0), lambda: acc + 3, lambda: acc - 1)
        _, r2 = v1.while_loop(lambda i, a: i < n_cond, body, (0, 0))
    s2 = v1.Session(graph=g)
    out["cond-in-while fwd"] = lambda: s2.run(r2)
    g = tf.Graph()
    with g.as_default():
        w = v1.placeholder(tf.float64, [])

        def body_g(i, acc):
            return i + 1, v1.cond(tf.equal(i % 2, 0), lambda: acc + w, lambda: acc * 0.5)
        _, r3 = v1.while_loop(lambda i, a: i < n_cond, body_g,
                              (0, tf.constant(0.0, tf.float64)))
        (gw,) = v1.gradients(r3, [w])
    s3 = v1.Session(graph=g)
    out["cond-in-while fwd+grad"] = lambda: s3.run(gw, {w: 1.5})
    return out


def jax_loops(n_scalar=100_000, n_cond=10_000) -> dict:
    try:
        import jax
        import jax.numpy as jnp
        from jax import lax
    except ImportError:
        return {}
    jax.config.update("jax_enable_x64", True)
    scalar = jax.jit(lambda: lax.while_loop(lambda i: i < n_scalar, lambda i: i + 1, 0))

    def cond_body(c):
        i, acc = c
        return i + 1, lax.cond(i % 2 == 0, lambda a: a + 3, lambda a: a - 1, acc)
    cond = jax.jit(lambda: lax.while_loop(lambda c: c[0] < n_cond, cond_body, (0, 0))[1])

    def scanned(w):   # while_loop cannot be differentiated in JAX: the scan version
        def step(acc, i):
            return lax.cond(i % 2 == 0, lambda a: a + w, lambda a: a * 0.5, acc), None
        return lax.scan(step, jnp.float64(0.0), jnp.arange(n_cond))[0]
    grad = jax.jit(jax.grad(scanned))
    return {"scalar while": lambda: scalar().block_until_ready(),
            "cond-in-while fwd": lambda: cond().block_until_ready(),
            "cond-in-while fwd+grad": lambda: grad(1.5).block_until_ready()}


def compare_section(repeats: int) -> str:
    """Scalar and cond-in-while loops (forward and gradient): dataflow compiled and
    interpreted, plain Python, TF1 and JAX jit, in this process."""
    n_scalar, n_cond = 100_000, 10_000
    cols = {"dataflow": {}, "dataflow interpreted": {}, "Python": {}}
    for name, make, n in [("scalar while", workloads.make_scalar_loop, n_scalar),
                          ("cond-in-while fwd", workloads.make_cond_in_while, n_cond),
                          ("cond-in-while fwd+grad", workloads.make_cond_in_while_grad,
                           n_cond)]:
        compiled = _with_config(make, EAGER, n=n)
        cols["dataflow"][name] = compiled[0]
        cols["dataflow interpreted"][name] = _with_config(make, OFF, n=n)[0]
        cols["Python"][name] = compiled[1]
    for label, fns in (("TF1", tf1_loops(n_scalar, n_cond)),
                       ("JAX jit", jax_loops(n_scalar, n_cond))):
        if fns:
            cols[label] = fns
    names = list(cols["dataflow"])
    iters = {"scalar while": n_scalar, "cond-in-while fwd": n_cond,
             "cond-in-while fwd+grad": n_cond}
    times = {c: {} for c in cols}
    for name in names:
        med = medians({c: f[name] for c, f in cols.items() if name in f}, repeats)
        for c, t in med.items():
            times[c][name] = t / iters[name]
    head = ["| workload (µs/iter) | " + " | ".join(cols) + " | " +
            " | ".join(f"{c} / dataflow" for c in list(cols)[1:]) + " |",
            "|---|" + "---|" * (2 * len(cols) - 1)]
    body = []
    for name in names:
        ours = times["dataflow"][name]
        body.append(f"| {name} | " + " | ".join(
            f"{times[c][name] * 1e6:.4g}" if name in times[c] else "-" for c in cols) + " | " +
            " | ".join(f"{times[c][name] / ours:.1f}x" if name in times[c] else "-"
                       for c in list(cols)[1:]) + " |")
    note = ("JAX's gradient is of a `lax.scan` version (JAX cannot differentiate "
            "`lax.while_loop`); its forward loops are `lax.while_loop` under `jit`.")
    return "\n".join(head + body) + "\n\n" + note


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="small trip counts (a smoke test)")
    ap.add_argument("--no-compile-times", action="store_true")
    ap.add_argument("--only", default="", help="only the workloads whose name contains "
                    "this (e.g. 'rnn'); implies --no-compile-times")
    ap.add_argument("--threads", type=int, default=0,
                    help="cap NumPy's BLAS pool (shared by compiled loops) at N threads")
    ap.add_argument("--blas-coretype", choices=blas_config.MODES, default="env",
                    help="run with the environment as it is (env), in a child process "
                         "without OPENBLAS_CORETYPE (native), or both, one after the other")
    args = ap.parse_args(argv)
    for config in blas_config.configurations(args.blas_coretype):
        if config == "native" and blas_config.CORETYPE in os.environ:
            _run_native(argv)
        else:
            _run(args)


def _run(args):
    """The benchmark in this process, with the BLAS it loaded."""
    print(f"load average: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    if args.threads:
        from threadpoolctl import threadpool_limits
        with threadpool_limits(args.threads, "blas"):
            rows = _rows(args)
    else:
        rows = _rows(args)
    print(table(rows))
    print(f"\nload average after: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    if not args.no_compile_times and not args.only:
        print("\n## Compile times\n")
        print(compile_table(compile_times()))
    print(flush=True)


def _rows(args):
    print(f"BLAS: {blas_config.blas_label()}\n")   # after --threads took effect
    print("## Compiled loops against same-run baselines (medians)\n", flush=True)
    return loop_rows(args.repeats, args.quick, args.only)


def _run_native(argv):
    """The same command in a child process without ``OPENBLAS_CORETYPE`` (its kernels are
    chosen when NumPy loads, so this process cannot switch)."""
    argv = list(sys.argv[1:] if argv is None else argv)
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = blas_config.worker_env(os.environ, "native")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    print(flush=True)
    subprocess.run([sys.executable, "-m", "benchmarks.loops", *argv, "--blas-coretype", "env"],
                   cwd=root, env=env, check=True)


if __name__ == "__main__":
    main()
