"""Record TensorFlow's second-order gradients of second_order_nested_programs.py.

Graph mode with control flow **v2** (``enable_control_flow_v2``): TF's v1 control flow
cannot differentiate a while loop twice at all, nested or not. To document that, each
program is also built with v1 control flow (``disable_control_flow_v2``), and the
error TF raises is recorded under ``"v1_errors"``. Writes
``expected_second_order_nested.json``. CI never runs it. From the repository root::

    /work/tfvenv/bin/python tests/tf_reference/generate_second_order_nested.py
"""
from __future__ import annotations

import json
import os
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
OUTPUT = HERE / "expected_second_order_nested.json"


def _v1_error(tf, programs, name):
    """What TF with v1 control flow does with program ``name``: its error, one line."""
    tf.disable_control_flow_v2()
    try:
        programs.run_program(tf, name)
    except Exception as error:  # noqa: BLE001 - recording whatever TF raises
        return f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"
    finally:
        tf.enable_control_flow_v2()
    return None


def main() -> int:
    sys.path.insert(0, str(HERE))
    import second_order_nested_programs as programs  # a sibling module
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow
    import tensorflow.compat.v1 as tf
    tf.disable_eager_execution()
    tf.enable_control_flow_v2()
    results = {name: programs.run_program(tf, name) for name in programs.PROGRAMS}
    v1_errors = {name: _v1_error(tf, programs, name) for name in programs.PROGRAMS}
    for name, value in results.items():
        print(f"{name}: {json.dumps(value)[:100]}")
        print(f"  v1: {v1_errors[name]}")
    document = {"tensorflow_version": tensorflow.__version__,
                "control_flow": "v2 (enable_control_flow_v2)", "programs": results,
                "v1_errors": v1_errors}
    OUTPUT.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUTPUT} ({len(results)} programs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
