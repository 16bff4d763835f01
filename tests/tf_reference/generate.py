"""Record what TensorFlow 1.x graph semantics give for every program in programs.py.

CI never runs this script (CI has no TensorFlow); it runs only when the
programs change, and its output ``expected.json`` is committed.

To regenerate, from the repository root, with a virtualenv outside the repo::

    python3 -m venv /tmp/tfvenv
    /tmp/tfvenv/bin/pip install tensorflow-cpu==2.21.0 numpy
    /tmp/tfvenv/bin/python tests/tf_reference/generate.py

It runs each ``prog_*`` with ``tf = tensorflow.compat.v1`` after
``disable_eager_execution()`` and ``disable_control_flow_v2()`` (so cond and
while_loop build Switch/Merge/Enter/Exit/NextIteration graphs, as dataflow
does) and writes ``tests/tf_reference/expected.json``. Then run
``pytest tests/test_tf_reference.py`` to compare dataflow against it.
"""
from __future__ import annotations

import json
import os
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
OUTPUT = HERE / "expected.json"


def load_tensorflow():
    """``tensorflow.compat.v1`` in TF1 graph mode with control flow v1."""
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow.compat.v1 as tf
    tf.disable_eager_execution()
    tf.disable_control_flow_v2()
    tf.logging.set_verbosity(tf.logging.ERROR)
    return tf


def main() -> int:
    """Run every program under TensorFlow and write expected.json."""
    sys.path.insert(0, str(HERE))
    import programs  # noqa: E402 - a sibling module, importable without the package

    tf = load_tensorflow()
    results = {}
    for name, program in programs.PROGRAMS.items():
        results[name] = programs.run_program(tf, program)
        print(f"{name}: {json.dumps(results[name])[:120]}")
    write_fixtures(results, OUTPUT)
    return 0


def write_fixtures(results, output):
    """Write the recorded outcomes, with the TensorFlow version that produced them."""
    import tensorflow
    document = {"tensorflow_version": tensorflow.__version__,
                "control_flow": "v1 (disable_control_flow_v2)",
                "programs": results}
    output.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    print(f"wrote {output} ({len(results)} programs)")


def record_programs(tf, module, output, only=(), preview=120):
    """Run ``module.PROGRAMS`` under ``tf``, printing each outcome, and write ``output``.

    A non-empty ``only`` (program names from the command line) is a trial run: just
    those programs run and nothing is written.
    """
    results = {}
    for name, program in module.PROGRAMS.items():
        if only and name not in only:
            continue
        results[name] = module.run_program(tf, program)
        print(f"{name}: {json.dumps(results[name])[:preview]}")
    if not only:
        write_fixtures(results, output)


if __name__ == "__main__":
    sys.exit(main())
