"""dataflow against recorded TensorFlow 1.x results of ``tests/tf_reference/ops_programs.py``
(``expected_ops.json``, written by ``generate_ops.py``): the array, nn, loss and
convolution ops of issue 15, forward values, gradients and error classes."""
import pytest

import dataflow as df
from tests.tf_reference import ops_programs, programs
from tests.tf_reference.compare import Fixture


def tolerance(dtype_name):
    """float32 results agree to a few float32 ulps of accumulated rounding."""
    return {"rtol": 2e-5, "atol": 2e-6} if dtype_name == "float32" else \
        {"rtol": 1e-10, "atol": 1e-12}


FIXTURE = Fixture("expected_ops.json", ops_programs.PROGRAMS, "ops_programs.py", "generate_ops.py",
                  tolerance)


def test_every_program_has_a_fixture():
    FIXTURE.assert_covers_programs()


@pytest.mark.parametrize("name", FIXTURE.names)
def test_matches_tensorflow(name):
    outcome = programs.run_program(df, FIXTURE.programs[name])
    FIXTURE.assert_matches(name, outcome)
