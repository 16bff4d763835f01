"""dataflow against recorded TensorFlow 1.x results (``tests/tf_reference/expected.json``).

Every program of ``tests/tf_reference/programs.py`` runs here with
``tf = dataflow``; its outcome must match what TensorFlow (control flow v1)
produced when ``generate.py`` recorded the fixtures: the same structure,
dtypes, shapes and values, and errors of the same class. An error matches if
dataflow's error is an instance of the class TF raised (dataflow's
InvalidArgumentError is also a ValueError, so it matches TF's ValueError for a
badly shaped feed).
"""
import pytest

import dataflow as df
from tests.tf_reference import programs
from tests.tf_reference.compare import Fixture


def tolerance(dtype_name):
    """Floats agree to float32 rounding."""
    return {"rtol": 1e-5, "atol": 1e-6}


FIXTURE = Fixture("expected.json", programs.PROGRAMS, "programs.py", "generate.py", tolerance)


def test_every_program_has_a_fixture():
    FIXTURE.assert_covers_programs()


@pytest.mark.parametrize("name", FIXTURE.names)
def test_matches_tensorflow(name):
    outcome = programs.run_program(df, FIXTURE.programs[name])
    FIXTURE.assert_matches(name, outcome)
