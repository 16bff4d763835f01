"""dataflow's gradients and optimizers against recorded TensorFlow 1.x results.

Every program of ``tests/tf_reference/grad_programs.py`` (tf.gradients through
cond and while_loop, stop_gradient, grad_ys, variables, optimizer steps) runs
here with ``tf = dataflow``; its outcome must match what TensorFlow (control
flow v1) produced when ``generate_grads.py`` recorded
``tests/tf_reference/expected_grads.json``: the same structure, dtypes, shapes,
``None`` gradients (fetched as ``grad_programs.NONE_MARKER``) and values --
to rtol 1e-6 for float64, 1e-5 for float32.
"""
import json
import pathlib

import numpy as np
import pytest

import dataflow as df
from tests.test_tf_reference import actual_error, assert_same_error
from tests.tf_reference import grad_programs

EXPECTED = json.loads((pathlib.Path(__file__).parent / "tf_reference" /
                       "expected_grads.json").read_text())["programs"]

TOLERANCE = {"float64": {"rtol": 1e-6, "atol": 1e-9}, "float32": {"rtol": 1e-5, "atol": 1e-6}}


def assert_same_leaf(expected, actual, where):
    """dtype, shape and values agree (floats to the dtype's tolerance)."""
    assert "dtype" in actual, f"{where}: expected a tensor value, got {actual}"
    assert actual["dtype"] == expected["dtype"], \
        f"{where}: dtype {actual['dtype']} != TF's {expected['dtype']}"
    assert actual["shape"] == expected["shape"], \
        f"{where}: shape {actual['shape']} != TF's {expected['shape']}"
    want = np.array(expected["value"], dtype=expected["dtype"])
    got = np.array(actual["value"], dtype=actual["dtype"])
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, err_msg=where, **TOLERANCE[want.dtype.name])
    else:
        np.testing.assert_array_equal(got, want, err_msg=where)


def assert_same_structure(expected, actual, where):
    """Recursively compare two encoded fetch results (see ``programs.encode``)."""
    if "dtype" in expected:
        assert_same_leaf(expected, actual, where)
        return
    kind = next(iter(k for k in expected if k != "fields"))
    assert kind in actual, f"{where}: TF returned a {kind}, dataflow returned {actual}"
    if kind == "none":
        return
    if kind == "namedtuple":
        assert actual["namedtuple"] == expected["namedtuple"], where
        expected, actual = expected["fields"], actual["fields"]
    else:
        expected, actual = expected[kind], actual[kind]
    if isinstance(expected, dict):
        assert sorted(actual) == sorted(expected), f"{where}: keys differ"
        for key in expected:
            assert_same_structure(expected[key], actual[key], f"{where}.{key}")
    else:
        assert len(actual) == len(expected), f"{where}: lengths differ"
        for i, (e, a) in enumerate(zip(expected, actual)):
            assert_same_structure(e, a, f"{where}[{i}]")


def test_every_program_has_a_fixture():
    assert sorted(grad_programs.PROGRAMS) == sorted(EXPECTED), \
        "grad_programs.py and expected_grads.json disagree: rerun generate_grads.py"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_gradients_match_tensorflow(name):
    expected = EXPECTED[name]
    outcome = grad_programs.run_program(df, grad_programs.PROGRAMS[name])
    if "build_error" in expected:
        assert_same_error(expected["build_error"], outcome.get("build_error"),
                          f"{name} (build)")
        return
    assert "runs" in outcome, f"{name}: dataflow failed to build: {actual_error(outcome)}"
    assert len(outcome["runs"]) == len(expected["runs"])
    for i, (want, got) in enumerate(zip(expected["runs"], outcome["runs"])):
        where = f"{name} run {i}"
        if "error" in want:
            assert_same_error(want["error"], got.get("error"), where)
        else:
            assert "error" not in got, f"{where}: dataflow raised {got['error']}, TF did not"
            assert_same_structure(want, got, where)
