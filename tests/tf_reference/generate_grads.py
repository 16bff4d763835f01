"""Record what TensorFlow 1.x gives for every gradient program in grad_programs.py.

Like ``generate.py`` (same TensorFlow setup: graph mode, control flow v1),
for ``grad_programs.PROGRAMS``; writes ``expected_grads.json``. CI never runs
it. From the repository root::

    /tmp/tfvenv/bin/python tests/tf_reference/generate_grads.py

Then run ``pytest tests/test_tf_reference_grads.py``.
"""
from __future__ import annotations

import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
OUTPUT = HERE / "expected_grads.json"


def main() -> int:
    """Run every gradient program under TensorFlow and write expected_grads.json."""
    sys.path.insert(0, str(HERE))
    import grad_programs  # a sibling module, importable without the package
    from generate import load_tensorflow, write_fixtures

    tf = load_tensorflow()
    only = set(sys.argv[1:])
    results = {}
    for name, program in grad_programs.PROGRAMS.items():
        if only and name not in only:
            continue
        results[name] = grad_programs.run_program(tf, program)
        print(f"{name}: {json.dumps(results[name])[:120]}")
    if only:  # a trial run of some programs: print, do not write
        return 0
    write_fixtures(results, OUTPUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
