"""Record TensorFlow's second-order gradients of second_order_programs.py.

TF1's control flow (v1) cannot differentiate a while loop twice, so this runs graph
mode with control flow **v2** (``enable_control_flow_v2``); writes
``expected_second_order.json``. CI never runs it. From the repository root::

    /work/tfvenv/bin/python tests/tf_reference/generate_second_order.py
"""
from __future__ import annotations

import json
import os
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
OUTPUT = HERE / "expected_second_order.json"


def main() -> int:
    sys.path.insert(0, str(HERE))
    import second_order_programs as programs  # a sibling module
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow
    import tensorflow.compat.v1 as tf
    tf.disable_eager_execution()
    tf.enable_control_flow_v2()
    results = {name: programs.run_program(tf, name) for name in programs.PROGRAMS}
    for name, value in results.items():
        print(f"{name}: {json.dumps(value)[:100]}")
    document = {"tensorflow_version": tensorflow.__version__,
                "control_flow": "v2 (enable_control_flow_v2)", "programs": results}
    OUTPUT.write_text(json.dumps(document, indent=1, sort_keys=True) + "\n")
    print(f"wrote {OUTPUT} ({len(results)} programs)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
