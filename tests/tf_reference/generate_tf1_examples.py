"""Record TensorFlow's results for the TF1 programs of ``examples/tf1/`` in
``tf1_examples.json`` (CI never runs this)::

    /work/tfvenv/bin/python tests/tf_reference/generate_tf1_examples.py

Per program: its first training steps' losses from fixed weights
(:func:`tf1_examples.first_steps`) and the test accuracy of a full run of
``END_STEPS`` steps (and after restoring its checkpoint).
"""
from __future__ import annotations

import json
import os
import pathlib
import tempfile

os.environ["TF_USE_LEGACY_KERAS"] = "1"   # tf.layers and tf.nn.rnn_cell of TF1
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tf1_examples  # noqa: E402

HERE = pathlib.Path(__file__).resolve().parent


def main():
    out = {}
    for name in tf1_examples.PROGRAMS:
        program = tf1_examples.load_program(name, tensorflow=True)
        program.tf.logging.set_verbosity(program.tf.logging.ERROR)
        record = tf1_examples.first_steps(program)
        steps = tf1_examples.END_STEPS[name]
        with tempfile.TemporaryDirectory() as tmp:
            run = program.main(steps=steps, seed=0, checkpoint_dir=tmp, verbose=False)
        record.update(end_steps=steps, test_accuracy=run["test_accuracy"],
                      restored_accuracy=run["restored_accuracy"])
        out[name] = record
        print(name, record["losses"], run["test_accuracy"], run["restored_accuracy"])
    (HERE / "tf1_examples.json").write_text(json.dumps(out, indent=1) + "\n")


if __name__ == "__main__":
    main()
