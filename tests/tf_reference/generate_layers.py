"""Record the values of layer_programs.py under TF1's tf.layers in ``layers.json``
(CI never runs this)::

    /work/tfvenv/bin/python tests/tf_reference/generate_layers.py
"""
from __future__ import annotations

import json
import os
import pathlib

os.environ["TF_USE_LEGACY_KERAS"] = "1"

from generate import load_tensorflow  # noqa: E402
import layer_programs  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent


def main():
    tf = load_tensorflow()
    tf.disable_resource_variables()
    out = {}
    for name, program in layer_programs.PROGRAMS.items():
        with tf.Graph().as_default():
            out[name] = {k: v.tolist() for k, v in program(tf).items()}
    (HERE / "layers.json").write_text(json.dumps(out, sort_keys=True) + "\n")
    print({k: sorted(v) for k, v in out.items()})


if __name__ == "__main__":
    main()
