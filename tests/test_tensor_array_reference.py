"""dataflow's TensorArray against recorded TensorFlow 1.x results.

Every program of ``tests/tf_reference/tensor_array_programs.py`` (ported from TF's
``tensor_array_ops_test.py``: accesses, zero-fill, errors, gradients through
while_loop, nested loops and cond) runs here with ``tf = dataflow``; its outcome
must match what TensorFlow (control flow v1) produced when
``generate_tensor_array.py`` recorded ``expected_tensor_array.json``: the same
structure, dtypes, shapes, values and error classes.
"""
import pytest

import dataflow as df
from tests.tf_reference import tensor_array_programs
from tests.tf_reference.compare import Fixture

FIXTURE = Fixture("expected_tensor_array.json", tensor_array_programs.PROGRAMS,
                  "tensor_array_programs.py", "generate_tensor_array.py",
                  {"float64": {"rtol": 1e-9, "atol": 1e-12}, "float32": {"rtol": 1e-5, "atol": 1e-6}})


def test_every_program_has_a_fixture():
    FIXTURE.assert_covers_programs()


@pytest.mark.parametrize("name", FIXTURE.names)
def test_tensor_array_matches_tensorflow(name):
    outcome = tensor_array_programs.run_program(df, FIXTURE.programs[name])
    FIXTURE.assert_matches(name, outcome)
