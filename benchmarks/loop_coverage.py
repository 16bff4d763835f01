"""Which loop frames of the repo's programs compile, and why the others stay interpreted.

Runs the loops of examples/, benchmarks/workloads.py and the TF fixture programs under
tests/tf_reference/ (small sizes) with ``compile_loops="eager"``, records the loop
compiler's verdict on every frame of every plan (``RunMetadata.interpreted_frames``'s
reasons), and prints one table: per program, the frames compiled and the frames left
interpreted with the reason. ``python -m benchmarks.loop_coverage``.
"""
from __future__ import annotations

import collections
import contextlib
import importlib
import io
import os
import sys

os.environ["DATAFLOW_COMPILE_LOOPS"] = "eager"

import numpy as np  # noqa: E402

import dataflow as df  # noqa: E402
from dataflow.runtime import loop_hook  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
REPORTS: dict = collections.defaultdict(dict)   # program -> {frame: reason or None}
_current = ["?"]


def _record(attach):
    def recording(plan, *args):
        attach(plan, *args)
        for frame, reason in getattr(plan, "loop_report", {}).items():
            REPORTS[_current[0]].setdefault(frame, reason)
            if reason is not None:
                REPORTS[_current[0]][frame] = reason
    return recording


def _run(label, fn):
    _current[0] = label
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            fn()
    except Exception as exc:   # noqa: BLE001  (a program's own error is part of the report)
        REPORTS[label]["<run>"] = f"raised {type(exc).__name__}: {str(exc)[:80]}"


def _examples():
    sys.path[:0] = [os.path.join(ROOT, "examples"), os.path.join(ROOT, "examples", "tf1")]
    yield "examples/control_flow_demo", lambda: importlib.import_module(
        "control_flow_demo").main()
    yield "examples/partitioned_loop", lambda: importlib.import_module(
        "partitioned_loop").main()
    yield "examples/digits_rnn", lambda: importlib.import_module("digits_rnn").main(
        epochs=1, verbose=False)
    yield "examples/lstm_sequence_classifier", lambda: importlib.import_module(
        "lstm_sequence_classifier").main(epochs=1, train_size=100, test_size=50,
                                         verbose=False)
    yield "examples/tf1/rnn_classifier", lambda: importlib.import_module(
        "rnn_classifier").main(steps=3, verbose=False)
    graphs = importlib.import_module("examples.imperative.tf1_graphs")
    for name in ("faster_rcnn", "rnn_varlen"):
        yield f"examples/imperative/tf1_graphs:{name}", \
            lambda name=name: graphs.GRAPH_VERSIONS[name](2)


def _workloads():
    from benchmarks import workloads as w
    for name, make in (("scalar_loop", lambda: w.make_scalar_loop(100)),
                       ("cond_in_while", lambda: w.make_cond_in_while(100)),
                       ("cond_in_while_grad", lambda: w.make_cond_in_while_grad(100)),
                       ("rnn_loop", lambda: w.make_rnn_loop(5, 4, 8)),
                       ("rnn_grad", lambda: w.make_rnn_grad(5, 4, 8))):
        def run(make=make):
            step = make()
            step() if callable(step) else step[0]()
        yield f"benchmarks/workloads:{name}", run


def _fixtures():
    from tests.tf_reference import (grad_programs, programs, rnn_programs,
                                    second_order_nested_programs, second_order_programs,
                                    tensor_array_programs)
    for module in (programs, grad_programs, tensor_array_programs, rnn_programs):
        for name, program in module.PROGRAMS.items():
            yield f"{module.__name__.split('.')[-1]}:{name}", \
                lambda m=module, p=program: m.run_program(df, p)
    for module in (second_order_programs, second_order_nested_programs):
        for name in module.PROGRAMS:
            yield f"{module.__name__.split('.')[-1]}:{name}", \
                lambda m=module, n=name: m.run_program(df, n)


def main():
    attach = loop_hook._COMPILER[0]
    loop_hook.register_loop_compiler(_record(attach))
    np.seterr(all="ignore")
    for source in (_examples(), _workloads(), _fixtures()):
        for label, fn in source:
            _run(label, fn)
    compiled = interpreted = 0
    reasons = collections.Counter()
    for label, frames in REPORTS.items():
        for frame, reason in sorted(frames.items()):
            if reason is None:
                compiled += 1
                continue
            interpreted += 1
            reasons[_short(reason)] += 1
            print(f"{label}\t{frame}\t{reason}")
    print(f"\n{len(REPORTS)} programs with loops: {compiled} frames compiled, "
          f"{interpreted} interpreted")
    for reason, n in reasons.most_common():
        print(f"{n:4d}  {reason}")


def _short(reason):
    """The reason without op names (for counting kinds)."""
    if "has no loop lowering" in reason:
        return "no lowering: " + reason.rsplit("(", 1)[-1].split(")")[0]
    return reason.split(": ", 1)[-1][:90] if reason.startswith("op '") else reason[:90]


if __name__ == "__main__":
    main()
