"""One table of dataflow's kernels against NumPy and, when installed, TF1, JAX and PyTorch.

    python -m benchmarks.compare [--repeats 7] [--quick] [--no-frameworks]
                                 [--only kernels|fusion|training|frameworks|loops|tracer]
                                 [--isolated]

    python -m benchmarks.compare --only tracer [--tracer-steps 60] [--threads 1]

    python -m benchmarks.compare --only frameworks --isolated --repeats 5 [--threads 1]
                                 [--blas-coretype env|native|both]
                                 [--workloads convnet_step,conv2d_fwd,conv2d_bwd]

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
  optional ``compare`` extra), with ratios to ours, plus convolution: one Adam step
  (dropout on) of ``examples/tf1/convnet.py`` on a batch of 64 digits -- TF1 runs the
  very same program source -- and a ``[64, 8, 8, 16] * [3, 3, 16, 32]`` SAME conv2d
  forward and backward (both backprops);
* ``--only loops``: the scalar and cond-in-while loops (and the latter's gradient) with
  compiled loop frames, interpreted, in plain Python, TF1 and JAX ``jit``
  (:func:`benchmarks.loops.compare_section`).

* tracer (only with ``--only tracer``: minutes of compilation): the eight imperative
  programs of examples/imperative ported to TF2, JAX and PyTorch, each run eagerly
  and under ``tf.function`` (AutoGraph), ``jax.jit`` and ``torch.compile``: which
  compiled runs fail (an error, or losses, prints or recorded Python-side values that
  differ from that framework's eager run) and their steps/s
  (:mod:`benchmarks.tracer_compare`; each framework in its own process).

Every figure is a median of interleaved repeats: the machine is shared and noisy.

By default the frameworks section runs every column in this one process, interleaved.
TF, JAX and PyTorch keep thread pools that go on spinning and slow whatever runs next,
so for fair standalone figures pass ``--isolated``: each column (dataflow, NumPy, TF1,
JAX, PyTorch) then runs in its own fresh subprocess (``--worker COLUMN``, medians sent
back as JSON on stdout), one column after another. ``--threads N`` (with ``--isolated``)
caps each worker's BLAS, Numba, TF and PyTorch threads at ``N``: on a small shared
machine multi-threaded BLAS spinning against other processes made the small convnet
GEMMs up to 80x slower (4.6 ms against 396 ms per convnet step, one thread against all).
Each column names the GEMM it runs and the BLAS kernels loaded in its process
(:mod:`benchmarks.blas_config`); ``--blas-coretype native`` (or ``both``) runs the dataflow
and NumPy workers without ``OPENBLAS_CORETYPE``, so that OpenBLAS picks its kernels by
detecting the CPU.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time

import numpy as np

import dataflow as df
from dataflow.loopc import wait_for_compiles

from . import blas_config, frameworks, workloads

BEFORE = dict(use_compiled_kernels=False, fuse_elementwise=False)


def _median_times(fns: dict, repeats: int, inner: int = 1) -> dict:
    """Median seconds per call of each callable, the callables interleaved per repeat."""
    samples = {k: [] for k in fns}
    for fn in fns.values():  # warm-up: compilation, plan building, caches
        fn()
    wait_for_compiles()      # loops compiled in the background during the warm-up
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
        **ours_conv_workloads(config),
    }


def ours_conv_workloads(config=None) -> dict:
    def session(g):
        return df.Session(graph=g, config=config)
    program = workloads.load_tf1_example("convnet")
    return {"convnet_step": workloads.make_convnet_step(program, session),
            "conv2d_fwd": workloads.make_conv2d(df, session),
            "conv2d_bwd": workloads.make_conv2d(df, session, backward=True)}


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


WORKLOADS = ("chain", "matmul", "mlp_adam_step", "rnn_loop", "rnn_grad", "convnet_step",
             "conv2d_fwd", "conv2d_bwd")
COLUMNS = ("dataflow", "NumPy") + tuple(frameworks.FRAMEWORKS)


def numpy_workloads(quick=False) -> dict:
    """The same workloads written by hand in NumPy."""
    chain = frameworks.chain_inputs(1_000_000 if quick else frameworks.CHAIN_N)
    mm = frameworks.matmul_inputs(512 if quick else frameworks.MATMUL_N)
    return {
        "chain": lambda a=chain: np.tanh(a[0] * a[1] + a[2]) * 0.5 + a[0],
        "matmul": lambda m=mm: m[0] @ m[1],
        "mlp_adam_step": workloads.make_mlp_adam_step()[1],
        "rnn_loop": workloads.make_rnn_loop()[1],
        "rnn_grad": workloads.make_rnn_grad()[1],
        "conv2d_fwd": workloads.numpy_conv2d_forward(),
    }


def column_workloads(column: str, quick=False) -> dict:
    """``{workload: callable}`` of one table column; ``{}`` if that framework is missing."""
    if column == "dataflow":
        n = frameworks.threads()
        config = df.ConfigProto(inter_op_parallelism_threads=n,
                                intra_op_parallelism_threads=n) if n else None
        return ours_workloads(config=config, quick=quick)
    if column == "NumPy":
        return numpy_workloads(quick)
    return {} if quick else frameworks.FRAMEWORKS[column]()


def _inner(name):
    return 10 if name in ("mlp_adam_step", "convnet_step", "conv2d_fwd", "conv2d_bwd") else 1


def _times_in_process(columns, repeats, quick) -> dict:
    """``{column: {workload: median s}}``, all columns in this process, interleaved."""
    fns = {c: column_workloads(c, quick) for c in columns}
    times = {c: {} for c, d in fns.items() if d}
    for name in selected_workloads():
        med = _median_times({c: d[name] for c, d in fns.items() if name in d},
                            repeats, _inner(name))
        for c, t in med.items():
            times[c][name] = t
    return times


def selected_workloads() -> tuple:
    """The workloads of the frameworks table: all, or those named by ``--workloads``
    (``COMPARE_WORKLOADS``, comma-separated, passed on to the workers)."""
    names = os.environ.get("COMPARE_WORKLOADS")
    if not names:
        return WORKLOADS
    chosen = tuple(n for n in WORKLOADS if n in names.split(","))
    unknown = set(names.split(",")) - set(WORKLOADS)
    if unknown:
        raise SystemExit(f"unknown workloads {sorted(unknown)}; choose from {WORKLOADS}")
    return chosen


def _column_worker(column, repeats, quick) -> dict:
    """Body of ``--worker COLUMN``: that column's medians, one workload at a time, and
    under ``BLAS_KEY`` the worker's :func:`_blas_label`."""
    fns = column_workloads(column, quick)
    chosen = selected_workloads()
    times = {name: _median_times({name: fn}, repeats, _inner(name))[name]
             for name, fn in fns.items() if name in chosen}
    return dict(times, **{BLAS_KEY: _blas_label(column)}) if times else {}


BLAS_KEY = "__blas__"


def _blas_label(column) -> str:
    """Whose GEMM ``column`` runs and the BLAS kernels loaded in this process."""
    return f"{blas_config.GEMM_OF.get(column, column)}; {blas_config.blas_label()}"


THREAD_VARIABLES = ("COMPARE_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                    "MKL_NUM_THREADS", "NUMBA_NUM_THREADS")


def _times_isolated(columns, repeats, quick, threads=None, blas="env") -> tuple:
    """Like :func:`_times_in_process`, but each column in a fresh Python process
    (``python -m benchmarks.compare --worker COLUMN``), medians back as JSON; with
    ``threads``, each worker's thread pools are capped at that many threads; ``blas``
    is the workers' BLAS configuration (:func:`.blas_config.worker_env`). Returns the
    times and ``{column: BLAS label}``."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    env = blas_config.worker_env(os.environ, blas)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [root, os.environ.get("PYTHONPATH")]))
    if threads:
        env.update({var: str(threads) for var in THREAD_VARIABLES})
    times, labels = {}, {}
    for c in columns:
        cmd = [sys.executable, "-m", "benchmarks.compare", "--worker", c,
               "--repeats", str(repeats)] + (["--quick"] if quick else [])
        proc = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True)
        if proc.returncode != 0:  # a crashed framework loses its column, not the table
            print(f"{c} worker failed ({proc.returncode}), column left out:\n"
                  f"{proc.stderr[-2000:]}", file=sys.stderr)
            continue
        result = json.loads(proc.stdout.strip().splitlines()[-1])
        if result:
            labels[c] = result.pop(BLAS_KEY)
            times[c] = result
    return times, labels


OWN_BLAS_COLUMNS = ("dataflow", "NumPy")   # the columns whose GEMM is NumPy's BLAS
_HOW = {"env": "the environment as it is",
        "native": f"{blas_config.CORETYPE} removed: OpenBLAS detects the CPU"}


def frameworks_section(repeats: int, quick: bool, with_frameworks: bool,
                       isolated: bool = False, threads: int | None = None,
                       blas: str = "env") -> str:
    """The frameworks table; one table per BLAS configuration of ``blas`` (``env``,
    ``native`` or ``both``, see :mod:`.blas_config`): the dataflow and NumPy columns are
    measured in each, the peers (their own GEMMs) once, in the caller's environment."""
    columns = COLUMNS if with_frameworks and not quick else COLUMNS[:2]
    configs = blas_config.configurations(blas)
    if not isolated:
        if configs != ("env",):
            raise SystemExit("--blas-coretype native/both needs --isolated (OpenBLAS picks "
                             "its kernels once, when NumPy loads)")
        label = blas_config.blas_label()
        times = _times_in_process(columns, repeats, quick)
        return _frameworks_table(columns, times, {c: f"{blas_config.GEMM_OF.get(c, c)}; "
                                                  f"{label}" for c in times},
                                 quick, with_frameworks, isolated, threads)
    peers = [c for c in columns if c not in OWN_BLAS_COLUMNS]
    peer_times, peer_labels = _times_isolated(peers, repeats, quick, threads)
    tables = []
    for config in configs:
        times, labels = _times_isolated([c for c in columns if c in OWN_BLAS_COLUMNS],
                                        repeats, quick, threads, config)
        times.update(peer_times)
        labels.update(peer_labels)
        title = ("" if len(configs) == 1 else
                 f"BLAS configuration `{config}` ({_HOW[config]}):\n\n")
        tables.append(title + _frameworks_table(columns, times, labels, quick,
                                                with_frameworks, isolated, threads))
    return "\n\n".join(tables)


def _frameworks_table(columns, times, labels, quick, with_frameworks, isolated,
                      threads) -> str:
    cols = [c for c in columns if c in times]
    head = ["| workload | unit | " + " | ".join(cols) + " | " +
            " | ".join(f"{c} / dataflow" for c in cols[1:]) + " |",
            "|---|---|" + "---|" * (2 * len(cols) - 1),
            "| GEMM; BLAS kernels loaded | | " + " | ".join(labels.get(c, "?") for c in cols)
            + " |" + " |" * (len(cols) - 1)]
    rows = []
    ours = times["dataflow"]
    for name in selected_workloads():
        unit, amount = _work_units(name, quick)
        cells = [_fmt(times[c][name], amount) if name in times[c] else "-" for c in cols]
        # Ratios as "how many times faster than that column" is dataflow (>1: we win).
        ratios = [f"{times[c][name] / ours[name]:.2f}x" if name in times[c] else "-"
                  for c in cols[1:]]
        rows.append(f"| {name} | {unit} | " + " | ".join(cells) + " | " + " | ".join(ratios)
                    + " |")
    note = ("Ratios are the other column's time over dataflow's: above 1 dataflow is faster."
            + ("" if len(cols) > 2 or quick or not with_frameworks else
               " (No other framework importable here: install the `compare` extra.)"))
    if isolated:
        note += ("\nEach column was measured in its own fresh process (one after another), "
                 "not interleaved with the others: no framework shares a process with another."
                 + (f" Threads per framework: {threads}." if threads else ""))
    return "\n".join(head + rows) + "\n\n" + note


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--quick", action="store_true", help="small sizes, no frameworks")
    ap.add_argument("--no-frameworks", action="store_true")
    ap.add_argument("--only", choices=["kernels", "fusion", "training", "frameworks",
                                       "loops", "tracer"],
                    help="print one section (tracer: only when named here)")
    ap.add_argument("--isolated", action="store_true",
                    help="frameworks section: each column in its own fresh process")
    ap.add_argument("--threads", type=int,
                    help="with --isolated: cap each framework's threads (BLAS, Numba, TF, "
                         "PyTorch) at this many")
    ap.add_argument("--blas-coretype", choices=blas_config.MODES, default="env",
                    help="with --isolated: run the dataflow and NumPy workers with the "
                         "environment as it is (env), without OPENBLAS_CORETYPE (native: "
                         "OpenBLAS detects the CPU), or both, one table each")
    ap.add_argument("--workloads", help="frameworks section: only these workloads "
                    f"(comma-separated, of {','.join(WORKLOADS)})")
    ap.add_argument("--tracer-steps", type=int, default=60,
                    help="tracer section: steps per run (default 60)")
    ap.add_argument("--tracer-only", help="tracer section: only these programs "
                    "(comma-separated)")
    ap.add_argument("--worker", choices=COLUMNS, help=argparse.SUPPRESS)
    ap.add_argument("--tracer-worker", help=argparse.SUPPRESS)
    args = ap.parse_args(argv)
    from . import tracer_compare
    if args.tracer_worker:  # one framework of the tracer section: JSON on stdout
        tracer_compare.worker_main(args.tracer_worker, args.tracer_steps, args.tracer_only)
        return
    if args.workloads:  # an environment variable, so that --isolated workers see it too
        os.environ["COMPARE_WORKLOADS"] = args.workloads
        selected_workloads()
    if args.threads and not (args.isolated or args.only == "tracer"):
        ap.error("--threads needs --isolated (thread pools are sized when a process starts)")
    if args.worker:  # one column of the frameworks table, for --isolated: JSON on stdout
        print(json.dumps(_column_worker(args.worker, args.repeats, args.quick)), flush=True)
        return
    from . import fusion_table, kernels_table
    sections = [
        ("Kernel families against NumPy", lambda: kernels_table.table(
            repeats=args.repeats, sizes=(10**3, 10**5) if args.quick else kernels_table.SIZES)),
        ("Fused chain tanh(a*b + c) * 0.5 + a", lambda: fusion_table.table(
            repeats=args.repeats, quick=args.quick)),
        ("Training workloads before/after the compiled kernels",
         lambda: training_section(args.repeats, args.quick)),
        ("Across frameworks", lambda: frameworks_section(
            args.repeats, args.quick, not args.no_frameworks, args.isolated, args.threads,
            args.blas_coretype)),
        ("Imperative programs under each framework's compiler", lambda: tracer_compare.section(
            args.tracer_steps, only=args.tracer_only and set(args.tracer_only.split(",")),
            threads=args.threads)),
    ]
    from . import loops
    sections.append(("Loops compiled, against TF1 and JAX jit",
                     lambda: loops.compare_section(args.repeats)))
    keys = ["kernels", "fusion", "training", "frameworks", "tracer", "loops"]
    for key, (title, fn) in zip(keys, sections):
        if args.only != key and (args.only or key == "tracer"):
            continue
        print(f"## {title}\n")
        print(fn())
        print(flush=True)


if __name__ == "__main__":
    main()
