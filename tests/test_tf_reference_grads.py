"""dataflow's gradients and optimizers against recorded TensorFlow 1.x results.

Every program of ``tests/tf_reference/grad_programs.py`` (tf.gradients through
cond and while_loop, stop_gradient, grad_ys, variables, optimizer steps) runs
here with ``tf = dataflow``; its outcome must match what TensorFlow (control
flow v1) produced when ``generate_grads.py`` recorded
``tests/tf_reference/expected_grads.json``: the same structure, dtypes, shapes,
``None`` gradients (fetched as ``grad_programs.NONE_MARKER``) and values --
to rtol 1e-6 for float64, 1e-5 for float32.
"""
import pytest

import dataflow as df
from tests.tf_reference import grad_programs
from tests.tf_reference.compare import Fixture

FIXTURE = Fixture("expected_grads.json", grad_programs.PROGRAMS, "grad_programs.py",
                  "generate_grads.py",
                  {"float64": {"rtol": 1e-6, "atol": 1e-9}, "float32": {"rtol": 1e-5, "atol": 1e-6}})


def test_every_program_has_a_fixture():
    FIXTURE.assert_covers_programs()


@pytest.mark.parametrize("name", FIXTURE.names)
def test_gradients_match_tensorflow(name):
    outcome = grad_programs.run_program(df, FIXTURE.programs[name])
    FIXTURE.assert_matches(name, outcome)
