"""Record what TensorFlow 1.x gives for every program in tf1_behaviour_programs.py.

Same TensorFlow setup as ``generate.py`` (graph mode, control flow v1); writes
``expected_tf1_behaviours.json``. CI never runs it. From the repository root::

    /work/tfvenv/bin/python tests/tf_reference/generate_tf1_behaviours.py [names...]

Naming programs runs only those and prints their outcomes without writing.
"""
from __future__ import annotations

import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
OUTPUT = HERE / "expected_tf1_behaviours.json"


def main() -> int:
    """Run every program under TensorFlow and write expected_tf1_behaviours.json."""
    sys.path.insert(0, str(HERE))
    import tf1_behaviour_programs as programs  # a sibling module
    from generate import load_tensorflow, record_programs

    record_programs(load_tensorflow(), programs, OUTPUT, set(sys.argv[1:]), preview=300)
    return 0


if __name__ == "__main__":
    sys.exit(main())
