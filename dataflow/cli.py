"""The ``dataflow`` command (also ``python -m dataflow``).

``dataflow viz TARGET [-o OUT] [--partition] [--fetch NAME ...]`` draws a graph:

* ``TARGET`` is a Python script that builds a graph, or the name of a program in
  ``examples/`` (``control_flow_demo``, ``digits_rnn``, ...). The script runs with
  ``__name__ == "__dataflow_viz__"`` in a fresh default graph, so its ``if __name__ ==
  "__main__":`` part does not run; if that leaves the graph empty, its
  ``build_model()`` or ``build_graph()`` (else ``main()``) is called to build it;
* ``-o out.svg`` / ``out.png`` renders with Graphviz ``dot`` (an error says so if it is
  not installed); ``-o out.dot`` or no ``-o`` writes the DOT text (to stdout);
* ``--partition`` draws ``df.partition`` of the graph instead: one cluster per device,
  Send/Recv pairs and control loops. It partitions what ``--fetch`` names (op or
  tensor names), by default every op nothing else consumes; placeholders are fed.

``dataflow memory TARGET [--fetch NAME ...] [--feed-shape NAME=D0,D1 ...]
[--trip-count LOOP=N ...] [--svg OUT] [--top N]`` prints the static memory plan
(:func:`dataflow.memory.plan`) of one run of ``--fetch`` (default: every op nothing
else consumes) in the graph the script builds; placeholders are fed with their
declared shapes, or the ones ``--feed-shape`` gives (``x=32,64``).

``dataflow profile TARGET [-o trace.json] [--all] [-- ARGS ...]`` profiles a script:

* it runs ``TARGET`` (a script or an example, as for ``viz``) as ``__main__`` with
  ``ARGS`` (what follows ``--``) as its command line, and every ``Session.run`` during it is traced
  (:func:`dataflow.runtime.step_stats.observe_steps`, as if each run had
  ``RunOptions(trace_level=FULL_TRACE)``);
* it writes the Chrome trace (:mod:`dataflow.timeline`) of the last run, or with
  ``--all`` of every run on one time axis, to ``-o`` (default ``timeline.json``):
  open it in ui.perfetto.dev or chrome://tracing.

Example::

    dataflow viz examples/control_flow_demo.py -o demo.svg
    python -m dataflow viz digits_rnn --partition -o rnn.dot
    dataflow memory my_model.py --fetch train_op --feed-shape x=128,784 --svg plan.svg
    dataflow profile examples/control_flow_demo.py -o trace.json
"""
from __future__ import annotations

import argparse
import contextlib
import os
import runpy
import shutil
import subprocess
import sys

__all__ = ["load_graph", "main"]

_BUILDERS = ("build_model", "build_graph", "main")


def _examples_dir() -> str:
    return os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
                        "examples")


def _resolve_target(target: str) -> str:
    if os.path.isfile(target):
        return target
    name = target.removesuffix(".py")
    path = os.path.join(_examples_dir(), name + ".py")
    if os.path.isfile(path):
        return path
    examples = sorted(f[:-3] for f in os.listdir(_examples_dir()) if f.endswith(".py")) \
        if os.path.isdir(_examples_dir()) else []
    raise SystemExit(f"dataflow viz: {target!r} is neither a script nor an example "
                     f"(examples: {', '.join(examples) or 'none found'})")


def load_graph(target: str):
    """Run the script (or example) ``target`` and return the graph it built."""
    import dataflow as df
    path = _resolve_target(target)
    graph = df.Graph()
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        # What the script prints goes to stderr: stdout may be carrying the DOT text.
        with graph.as_default(), contextlib.redirect_stdout(sys.stderr):
            module = runpy.run_path(path, run_name="__dataflow_viz__")
            for name in _BUILDERS:
                if graph.get_operations() or not callable(module.get(name)):
                    continue
                module[name]()
    finally:
        sys.path.pop(0)
    if not graph.get_operations():
        raise SystemExit(f"dataflow viz: {path} built no ops in the default graph (define "
                         "the graph at module level, or a build_model()/build_graph())")
    return graph


def _sinks(graph):
    """Ops whose outputs and control outputs nobody uses: what the graph computes."""
    used = set()
    for op in graph.get_operations():
        used.update(t.op for t in op.inputs)
        used.update(op.control_inputs)
    return [op for op in graph.get_operations() if op not in used]


def _dot_text(graph, args) -> str:
    if not args.partition:
        return graph.to_dot()
    from .partition import partition
    fetches = args.fetch or _sinks(graph)
    feeds = [op.outputs[0] for op in graph.get_operations() if op.type == "Placeholder"]
    return partition(graph, fetches, feeds).to_dot()


def _viz(args) -> int:
    from . import viz
    dot_text = _dot_text(load_graph(args.target), args)
    out = args.output
    if out is None:
        sys.stdout.write(dot_text)
        return 0
    if out.lower().endswith(".dot") or out.lower().endswith(".gv"):
        with open(out, "w") as f:
            f.write(dot_text)
    else:
        try:
            viz.render(dot_text, out)
        except viz.DotNotFoundError as e:
            print(f"dataflow viz: {e}", file=sys.stderr)
            return 2
    print(f"wrote {out}", file=sys.stderr)
    return 0


def _parse_feed_shape(text: str):
    name, _, dims = text.partition("=")
    if not name or not dims:
        raise SystemExit(f"dataflow memory: --feed-shape wants NAME=D0,D1,..., got {text!r}")
    return name, [int(d) for d in dims.split(",") if d.strip()]


def _memory(args) -> int:
    import dataflow as df
    graph = load_graph(args.target)
    fetches = args.fetch or _sinks(graph)
    shapes = {}
    for op in graph.get_operations():
        if op.type == "Placeholder" and op.outputs[0].shape.is_fully_defined():
            shapes[op.outputs[0]] = op.outputs[0].shape
    for text in args.feed_shape or []:
        name, dims = _parse_feed_shape(text)
        try:
            shapes[graph.get_tensor_by_name(name if ":" in name else name + ":0")] = dims
        except KeyError as e:
            raise SystemExit(f"dataflow memory: --feed-shape {text!r}: {e.args[0]}") from None
    counts = {}
    for text in args.trip_count or []:
        loop, _, n = text.partition("=")
        counts[loop] = int(n)
    try:
        plan = df.memory.plan(fetches, feed_shapes=shapes, graph=graph, trip_counts=counts)
    except df.errors.OpError as e:
        print(f"dataflow memory: {e.message}\n(shapes: --feed-shape NAME=D0,D1,...; "
              f"loops: --trip-count LOOP=N)", file=sys.stderr)
        return 2
    print(plan.summary(args.top))
    if args.svg:
        plan.to_svg(args.svg)
        print(f"wrote {args.svg}", file=sys.stderr)
    return 0


def _profile(args) -> int:
    from .runtime.step_stats import StepStats, observe_steps
    from .timeline import Timeline
    path = _resolve_target(args.target)
    steps = []
    argv = sys.argv
    sys.argv = [path] + list(args.args)
    sys.path.insert(0, os.path.dirname(os.path.abspath(path)))
    try:
        with observe_steps(steps.append), contextlib.redirect_stdout(sys.stderr):
            runpy.run_path(path, run_name="__main__")
    finally:
        sys.path.pop(0)
        sys.argv = argv
    if not steps:
        print(f"dataflow profile: {path} ran no Session.run: nothing to trace",
              file=sys.stderr)
        return 1
    stats = StepStats()
    for step in steps if args.all else steps[-1:]:
        stats.merge(step.dev_stats)
    with open(args.output, "w") as f:
        f.write(Timeline(stats).generate_chrome_trace_format())
    nodes = sum(len(d.node_stats) for d in stats.dev_stats)
    print(f"wrote {args.output}: {nodes} node executions on {len(stats.dev_stats)} "
          f"device(s), {len(steps) if args.all else 1} of {len(steps)} run(s)",
          file=sys.stderr)
    return 0


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="dataflow", description="dataflow tools")
    sub = parser.add_subparsers(dest="command", required=True)
    v = sub.add_parser("viz", help="draw a graph built by a script or an example "
                                   "(Graphviz DOT, SVG or PNG)")
    v.add_argument("target", help="a Python script, or the name of a program in examples/")
    v.add_argument("-o", "--output", help="out.svg, out.png (needs Graphviz 'dot') or "
                                          "out.dot; default: DOT text on stdout")
    v.add_argument("--partition", action="store_true",
                   help="draw the per-device partitions (Send/Recv, control loops)")
    v.add_argument("--fetch", action="append",
                   help="with --partition: an op or tensor name to compute (repeatable)")
    v.set_defaults(func=_viz)
    m = sub.add_parser("memory", help="print the static memory plan of a script's fetches")
    m.add_argument("target", help="a Python script, or the name of a program in examples/")
    m.add_argument("--fetch", action="append", help="an op or tensor name to run "
                   "(repeatable; default: every op nothing else consumes)")
    m.add_argument("--feed-shape", action="append",
                   help="NAME=D0,D1,...: the shape fed to a placeholder (repeatable)")
    m.add_argument("--trip-count", action="append",
                   help="LOOP=N: a while loop's trip count (repeatable)")
    m.add_argument("--svg", help="also draw the arena to this SVG file")
    m.add_argument("--top", type=int, default=10, help="how many largest buffers to list")
    m.set_defaults(func=_memory)
    p = sub.add_parser("profile", help="run a script with every Session.run traced and "
                                       "write a Chrome trace (Perfetto, chrome://tracing)")
    p.add_argument("target", help="a Python script, or the name of a program in examples/")
    p.add_argument("-o", "--output", default="timeline.json",
                   help="the trace file to write (default: timeline.json)")
    p.add_argument("--all", action="store_true",
                   help="trace every run on one time axis (default: the last run only)")
    p.set_defaults(func=_profile)
    mp = sub.add_parser("mpirun", help="run a script on N MPI ranks on this host "
                                      "(ConfigProto(partition_mode='mpi'))")
    mp.add_argument("-n", "--np", type=int, required=True, dest="ranks",
                   help="number of ranks (tasks)")
    mp.add_argument("script", help="the Python script")
    mp.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    mp.set_defaults(func=_mpirun)
    return parser


def mpirun_command(ranks: int, argv: list) -> list:
    """The ``mpiexec`` command line that runs ``argv`` (after the Python interpreter)
    on ``ranks`` ranks of this host: more ranks than cores allowed, the other ranks kept
    alive when one dies (the Session reports it), this interpreter on every rank::

        subprocess.call(mpirun_command(2, ["script.py"]), env=mpirun_env())
    """
    exe = shutil.which("mpiexec", path=os.path.dirname(sys.executable)) or \
        shutil.which("mpiexec")
    if exe is None:
        raise FileNotFoundError("mpiexec not found: pip install 'dataflow[mpi]'")
    return [exe, "-n", str(ranks), "--oversubscribe", "--enable-recovery",
            "--bind-to", "none", sys.executable, "-u"] + list(argv)


# The BLAS / OpenMP thread pools of NumPy's kernels: each rank gets its share of the cores.
_BLAS_THREAD_VARS = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def mpirun_env(environ=None, ranks: int = 1) -> dict:
    """The environment for :func:`mpirun_command`: Open MPI refuses to run as root
    unless told that it is meant, and each of ``ranks`` ranks gets its share of the cores
    for its BLAS threads (unless set already): ranks whose BLAS pools each take every
    core spin against each other (a 2-rank MLP step ran 50x slower here).

    >>> mpirun_env({}, ranks=os.cpu_count())["OPENBLAS_NUM_THREADS"]
    '1'
    """
    env = dict(os.environ if environ is None else environ)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT", "1")
        env.setdefault("OMPI_ALLOW_RUN_AS_ROOT_CONFIRM", "1")
    share = str(max(1, (os.cpu_count() or 1) // max(1, ranks)))
    for var in _BLAS_THREAD_VARS:
        env.setdefault(var, share)
    return env


def remove_stale_session_dirs(tmpdir=None) -> list:
    """Remove the session directories (``ompi.<pid>`` in the temporary directory) that
    Open MPI launchers killed mid-job left behind; returns the paths removed.

    Each ``mpiexec`` keeps its PMIx rendezvous files in ``ompi.<its pid>``. A launcher
    killed with SIGKILL never removes it, and when the process ids wrap around a new
    launcher given the same id finds the stale files and stops with "The PMIx server's
    listener thread failed to start". Only directories of this user whose process is
    gone are removed, so running jobs keep theirs::

        remove_stale_session_dirs()   # before launching mpiexec
    """
    import tempfile

    base = tmpdir or tempfile.gettempdir()
    removed = []
    try:
        names = os.listdir(base)
    except OSError:
        return removed
    uid = os.getuid() if hasattr(os, "getuid") else None
    for name in names:
        if not name.startswith("ompi.") or not name[5:].isdigit():
            continue
        path = os.path.join(base, name)
        try:
            st = os.lstat(path)
        except OSError:
            continue
        if uid is not None and st.st_uid != uid:
            continue
        if _process_exists(int(name[5:])):
            continue
        shutil.rmtree(path, ignore_errors=True)
        removed.append(path)
    return removed


def _process_exists(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:     # another user's process
        return True
    return True


def _mpirun(args) -> int:
    try:
        cmd = mpirun_command(args.ranks, [args.script] + list(args.args))
    except FileNotFoundError as e:
        print(f"dataflow mpirun: {e}", file=sys.stderr)
        return 2
    remove_stale_session_dirs()
    return subprocess.call(cmd, env=mpirun_env(ranks=args.ranks))


def main(argv=None) -> int:
    """Entry point of the ``dataflow`` command; returns the exit status."""
    argv = list(sys.argv[1:] if argv is None else argv)
    # ``dataflow profile SCRIPT -o t.json -- ARGS``: what follows ``--`` is the script's.
    script_args = []
    if "--" in argv:
        at = argv.index("--")
        argv, script_args = argv[:at], argv[at + 1:]
    args = _parser().parse_args(argv)
    args.args = script_args
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
