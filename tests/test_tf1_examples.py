"""The TF1 programs of examples/tf1/ (TF1 code with ``import dataflow as tf``) against
TensorFlow running the same source (tf_reference/tf1_examples.json, made by
generate_tf1_examples.py): the first training steps from fixed weights give TF's losses
to 1e-4, and a short full run (train, save, restore in a new Session) reaches TF's test
accuracy within a few points."""
from __future__ import annotations

import json
import pathlib
import subprocess
import sys

import numpy as np
import pytest

from .tf_reference import tf1_examples

EXPECTED = json.loads((pathlib.Path(__file__).parent / "tf_reference" /
                       "tf1_examples.json").read_text())
ACCURACY_POINTS = 0.04   # "within a few points": random initial weights differ from TF's


def test_every_program_has_a_fixture():
    assert sorted(EXPECTED) == sorted(tf1_examples.PROGRAMS)
    for name in tf1_examples.PROGRAMS:
        source = (tf1_examples.EXAMPLES / f"{name}.py").read_text()
        assert "\nimport tensorflow" not in source
        assert source.count(tf1_examples.DATAFLOW_IMPORT) == 1


@pytest.mark.parametrize("name", tf1_examples.PROGRAMS)
def test_first_steps_match_tensorflow(name):
    want = EXPECTED[name]
    got = tf1_examples.first_steps(tf1_examples.load_program(name))
    assert got["variables"] == want["variables"]
    np.testing.assert_allclose(got["losses"], want["losses"], rtol=0, atol=1e-4,
                               err_msg=name)


@pytest.mark.parametrize("name", tf1_examples.PROGRAMS)
def test_trains_saves_and_restores_to_tensorflows_accuracy(name, tmp_path):
    want = EXPECTED[name]
    program = tf1_examples.load_program(name)
    run = program.main(steps=want["end_steps"], seed=0, checkpoint_dir=str(tmp_path),
                       verbose=False)
    assert run["restored_accuracy"] == run["test_accuracy"]
    assert abs(run["test_accuracy"] - want["test_accuracy"]) <= ACCURACY_POINTS, (
        name, run["test_accuracy"], want["test_accuracy"])
    assert run["losses"][-1] < run["losses"][0] / 3
    assert sorted(p.name for p in tmp_path.iterdir()) != []


def test_command_line_runs_and_prints_the_restored_accuracy():
    script = tf1_examples.EXAMPLES / "softmax_regression.py"
    out = subprocess.run([sys.executable, str(script), "--steps", "20"], check=True,
                         capture_output=True, text=True, cwd=pathlib.Path(__file__).parents[1],
                         timeout=300).stdout
    last = out.strip().splitlines()[-1]
    accuracy, restored = last.split("test accuracy ")[1].split("; restored from ")
    assert float(accuracy) == float(restored.split(": ")[1])
