"""Second-order gradients through nested loops and conds in loops against TensorFlow.

``tests/tf_reference/expected_second_order_nested.json`` holds what TF 2 (control flow
v2) computed for each program of ``tests/tf_reference/second_order_nested_programs.py``
(regenerate with ``generate_second_order_nested.py``); here dataflow runs the same
programs. The fixture also records that TF with v1 control flow refuses every one of
them. Closed forms and finite differences of these cases are in
``test_gradients_second_order_nested.py``.
"""
import json
import pathlib

import numpy as np
import pytest

import dataflow as df

from .tf_reference import second_order_nested_programs as programs

FIXTURE = json.loads((pathlib.Path(__file__).parent / "tf_reference" /
                      "expected_second_order_nested.json").read_text())


def test_every_program_has_a_fixture():
    assert set(FIXTURE["programs"]) == set(programs.PROGRAMS)
    assert FIXTURE["control_flow"].startswith("v2")


def test_tensorflow_v1_control_flow_refuses_every_program():
    """TF1's loops (v1 control flow) cannot differentiate a gradient loop: the programs
    this runtime runs were recorded as TypeErrors there."""
    assert set(FIXTURE["v1_errors"]) == set(programs.PROGRAMS)
    for name, error in FIXTURE["v1_errors"].items():
        assert error.startswith("TypeError: Second-order gradient for while loops"), name


@pytest.mark.parametrize("name", sorted(programs.PROGRAMS))
def test_second_order_matches_tensorflow(name):
    got = programs.run_program(df, name)
    want = FIXTURE["programs"][name]
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-9, atol=1e-12,
                                   err_msg=f"{name}: fetch {i}")


def test_closed_form_of_the_nested_power_program():
    """The fixture itself agrees with the closed form: y = x w^6."""
    x, w = (float(v) for v in programs.INPUTS["nested_power"])
    assert FIXTURE["programs"]["nested_power"] == pytest.approx(
        [x * w ** 6, 6 * x * w ** 5, 6 * w ** 5, 30 * x * w ** 4])
