"""TF1 behaviours against recorded TensorFlow 1.x outcomes (tf1_behaviour_programs.py).

Each program of ``tests/tf_reference/tf1_behaviour_programs.py`` runs here with
``tf = dataflow``; its outcome (structure, dtypes, shapes, values, error classes) must
match what TensorFlow with control flow v1 recorded in
``tests/tf_reference/expected_tf1_behaviours.json`` (``generate_tf1_behaviours.py``).
"""
import pytest

import dataflow as df
from tests.tf_reference import tf1_behaviour_programs as programs
from tests.tf_reference.compare import Fixture

FIXTURE = Fixture("expected_tf1_behaviours.json", programs.PROGRAMS, "tf1_behaviour_programs.py",
                  "generate_tf1_behaviours.py",
                  {"float64": {"rtol": 1e-6, "atol": 1e-9}, "float32": {"rtol": 1e-5, "atol": 1e-6}})


def test_every_program_has_a_fixture():
    FIXTURE.assert_covers_programs()


@pytest.mark.parametrize("name", FIXTURE.names)
def test_matches_tensorflow(name):
    outcome = programs.run_program(df, FIXTURE.programs[name])
    FIXTURE.assert_matches(name, outcome)
