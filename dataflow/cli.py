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

Example::

    dataflow viz examples/control_flow_demo.py -o demo.svg
    python -m dataflow viz digits_rnn --partition -o rnn.dot
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
    m = sub.add_parser("mpirun", help="run a script on N MPI ranks on this host "
                                      "(ConfigProto(partition_mode='mpi'))")
    m.add_argument("-n", "--np", type=int, required=True, dest="ranks",
                   help="number of ranks (tasks)")
    m.add_argument("script", help="the Python script")
    m.add_argument("args", nargs=argparse.REMAINDER, help="the script's arguments")
    m.set_defaults(func=_mpirun)
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


def _mpirun(args) -> int:
    try:
        cmd = mpirun_command(args.ranks, [args.script] + list(args.args))
    except FileNotFoundError as e:
        print(f"dataflow mpirun: {e}", file=sys.stderr)
        return 2
    return subprocess.call(cmd, env=mpirun_env(ranks=args.ranks))


def main(argv=None) -> int:
    """Entry point of the ``dataflow`` command; returns the exit status."""
    args = _parser().parse_args(argv)
    return args.func(args)


if __name__ == "__main__":
    sys.exit(main())
