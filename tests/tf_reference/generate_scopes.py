"""Run 60 random scope scripts (scope_scripts.py) under TF1 and store the scripts and the
names TF gives in ``scopes.json`` (CI never runs this)::

    /work/tfvenv/bin/python tests/tf_reference/generate_scopes.py
"""
from __future__ import annotations

import json
import pathlib
import random

from generate import load_tensorflow
import scope_scripts

HERE = pathlib.Path(__file__).resolve().parent


def main():
    tf = load_tensorflow()
    tf.disable_resource_variables()
    rng = random.Random(15)
    cases = []
    for _ in range(60):
        script = scope_scripts.random_script(rng)
        with tf.Graph().as_default():
            names = scope_scripts.run_script(tf, script)
        cases.append({"script": script, "names": names})
    (HERE / "scopes.json").write_text(json.dumps(cases) + "\n")
    print(sum(len(c["names"]) for c in cases), "names")


if __name__ == "__main__":
    main()
