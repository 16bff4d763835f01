"""Record the variable and op names TF1 gives the programs of name_programs.py, in
``names.json`` (CI never runs this; run it when the programs change)::

    /work/tfvenv/bin/python tests/tf_reference/generate_names.py

TF runs in graph mode with resource variables disabled (TF 1.15's variables) and
``TF_USE_LEGACY_KERAS=1`` so ``tf.layers`` is the TF1 one (needs ``tf-keras``).
"""
from __future__ import annotations

import json
import os
import pathlib

os.environ["TF_USE_LEGACY_KERAS"] = "1"

from generate import load_tensorflow  # noqa: E402
import name_programs  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent


def main():
    tf = load_tensorflow()
    tf.disable_resource_variables()
    out = {}
    for name, program in name_programs.PROGRAMS.items():
        with tf.Graph().as_default():
            out[name] = name_programs.describe(tf, program(tf))
    (HERE / "names.json").write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")
    print(json.dumps(out, indent=1))


if __name__ == "__main__":
    main()
