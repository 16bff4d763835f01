"""Record what TensorFlow 1.x gives for every gradient program in grad_programs.py.

Like ``generate.py`` (same TensorFlow setup: graph mode, control flow v1),
for ``grad_programs.PROGRAMS``; writes ``expected_grads.json``. CI never runs
it. From the repository root::

    /tmp/tfvenv/bin/python tests/tf_reference/generate_grads.py

Then run ``pytest tests/test_tf_reference_grads.py``.
"""
from __future__ import annotations

import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
OUTPUT = HERE / "expected_grads.json"


def main() -> int:
    """Run every gradient program under TensorFlow and write expected_grads.json."""
    sys.path.insert(0, str(HERE))
    import grad_programs  # a sibling module, importable without the package
    from generate import load_tensorflow, record_programs

    record_programs(load_tensorflow(), grad_programs, OUTPUT, set(sys.argv[1:]), preview=120)
    return 0


if __name__ == "__main__":
    sys.exit(main())
