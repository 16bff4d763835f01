"""Second-order gradients through loops against TensorFlow (control flow v2).

``tests/tf_reference/expected_second_order.json`` holds what TF 2 computed for each
program of ``tests/tf_reference/second_order_programs.py`` (regenerate with
``generate_second_order.py``); here dataflow runs the same programs. The closed forms
and finite differences of the same cases are in ``test_gradients_second_order.py``.
"""
import json
import pathlib

import numpy as np
import pytest

import dataflow as df

from .tf_reference import second_order_programs as programs

FIXTURE = json.loads((pathlib.Path(__file__).parent / "tf_reference" /
                      "expected_second_order.json").read_text())


def test_every_program_has_a_fixture():
    assert set(FIXTURE["programs"]) == set(programs.PROGRAMS)
    assert FIXTURE["control_flow"].startswith("v2")


@pytest.mark.parametrize("name", sorted(programs.PROGRAMS))
def test_second_order_matches_tensorflow(name):
    got = programs.run_program(df, name)
    want = FIXTURE["programs"][name]
    assert len(got) == len(want)
    for i, (g, w) in enumerate(zip(got, want)):
        np.testing.assert_allclose(np.asarray(g), np.asarray(w), rtol=1e-9, atol=1e-12,
                                   err_msg=f"{name}: fetch {i}")


def test_closed_forms_of_the_power_programs():
    """The fixture itself agrees with the closed forms (x w^4 and x^4)."""
    x, w = (float(v) for v in programs.INPUTS["power"])
    assert FIXTURE["programs"]["power"] == pytest.approx(
        [x * w ** 4, 4 * x * w ** 3, 4 * w ** 3, 12 * x * w ** 2])
    (x,) = (float(v) for v in programs.INPUTS["self_power"])
    assert FIXTURE["programs"]["self_power"] == pytest.approx([4 * x ** 3, 12 * x ** 2, 24 * x])
