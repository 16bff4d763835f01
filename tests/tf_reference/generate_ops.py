"""Record TensorFlow 1.x outcomes of ``ops_programs.py`` into ``expected_ops.json``.

CI never runs this (it has no TensorFlow). From the repository root, with a
virtualenv holding tensorflow-cpu (see ``generate.py``)::

    /path/to/tfvenv/bin/python tests/tf_reference/generate_ops.py
"""
from __future__ import annotations

import json
import pathlib
import sys

HERE = pathlib.Path(__file__).resolve().parent
OUTPUT = HERE / "expected_ops.json"


def main() -> int:
    sys.path.insert(0, str(HERE))
    import ops_programs  # noqa: E402 - siblings, importable without the package
    import programs  # noqa: E402
    from generate import load_tensorflow, write_fixtures  # noqa: E402

    tf = load_tensorflow()
    results = {}
    for name, program in ops_programs.PROGRAMS.items():
        results[name] = programs.run_program(tf, program)
        print(f"{name}: {json.dumps(results[name])[:100]}")
    write_fixtures(results, OUTPUT)
    return 0


if __name__ == "__main__":
    sys.exit(main())
