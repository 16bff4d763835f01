"""dataflow's TensorArray against recorded TensorFlow 1.x results.

Every program of ``tests/tf_reference/tensor_array_programs.py`` (ported from TF's
``tensor_array_ops_test.py``: accesses, zero-fill, errors, gradients through
while_loop, nested loops and cond) runs here with ``tf = dataflow``; its outcome
must match what TensorFlow (control flow v1) produced when
``generate_tensor_array.py`` recorded ``expected_tensor_array.json``: the same
structure, dtypes, shapes, values and error classes.
"""
import json
import pathlib

import pytest

import dataflow as df
from tests.tf_reference import tensor_array_programs
from tests.tf_reference.compare import assert_same_outcome

EXPECTED = json.loads((pathlib.Path(__file__).parent / "tf_reference" /
                       "expected_tensor_array.json").read_text())["programs"]

TOLERANCE = {"float64": {"rtol": 1e-9, "atol": 1e-12}, "float32": {"rtol": 1e-5, "atol": 1e-6}}


def tolerance(dtype_name):
    return TOLERANCE[dtype_name]


def test_every_program_has_a_fixture():
    assert sorted(tensor_array_programs.PROGRAMS) == sorted(EXPECTED), \
        "tensor_array_programs.py and expected_tensor_array.json disagree: rerun " \
        "tests/tf_reference/generate_tensor_array.py"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_tensor_array_matches_tensorflow(name):
    program = tensor_array_programs.PROGRAMS[name]
    outcome = tensor_array_programs.run_program(df, program)
    assert_same_outcome(name, EXPECTED[name], outcome, tolerance)
