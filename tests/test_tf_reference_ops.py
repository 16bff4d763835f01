"""dataflow against recorded TensorFlow 1.x results of ``tests/tf_reference/ops_programs.py``
(``expected_ops.json``, written by ``generate_ops.py``): the array, nn, loss and
convolution ops of issue 15, forward values, gradients and error classes."""
import json
import pathlib

import pytest

import dataflow as df
from tests.tf_reference import ops_programs, programs
from tests.tf_reference.compare import assert_same_outcome

EXPECTED = json.loads((pathlib.Path(__file__).parent / "tf_reference" /
                       "expected_ops.json").read_text())["programs"]


def tolerance(dtype_name):
    """float32 results agree to a few float32 ulps of accumulated rounding."""
    return {"rtol": 2e-5, "atol": 2e-6} if dtype_name == "float32" else \
        {"rtol": 1e-10, "atol": 1e-12}


def test_every_program_has_a_fixture():
    assert sorted(ops_programs.PROGRAMS) == sorted(EXPECTED), \
        "ops_programs.py and expected_ops.json disagree: rerun tests/tf_reference/generate_ops.py"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_matches_tensorflow(name):
    outcome = programs.run_program(df, ops_programs.PROGRAMS[name])
    assert_same_outcome(name, EXPECTED[name], outcome, tolerance)
