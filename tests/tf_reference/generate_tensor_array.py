"""Record what TensorFlow 1.x gives for the TensorArray and functional-op programs.

Like ``generate.py`` (same TensorFlow setup: graph mode, control flow v1), for
``tensor_array_programs.PROGRAMS`` (-> ``expected_tensor_array.json``) and
``functional_programs.PROGRAMS`` (-> ``expected_functional.json``) and
``rnn_programs.PROGRAMS`` (-> ``expected_rnn.json``). CI never runs it. From the repository root::

    /work/tfvenv/bin/python tests/tf_reference/generate_tensor_array.py

Program names given as arguments run only those and print their outcomes (nothing
is written). Then run ``pytest tests/test_tensor_array_reference.py tests/test_functional_ops.py
tests/test_rnn.py``.
"""
from __future__ import annotations

import importlib
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
SUITES = {"tensor_array_programs": HERE / "expected_tensor_array.json",
          "functional_programs": HERE / "expected_functional.json",
          "rnn_programs": HERE / "expected_rnn.json"}


def main() -> int:
    """Run every program of each suite under TensorFlow and write its fixture file."""
    sys.path.insert(0, str(HERE))
    from generate import load_tensorflow, record_programs

    tf = load_tensorflow()
    only = set(sys.argv[1:])
    for module_name, output in SUITES.items():
        if not (HERE / f"{module_name}.py").exists():
            continue
        record_programs(tf, importlib.import_module(module_name), output, only, preview=160)
    return 0


if __name__ == "__main__":
    sys.exit(main())
