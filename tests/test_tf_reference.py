"""dataflow against recorded TensorFlow 1.x results (``tests/tf_reference/expected.json``).

Every program of ``tests/tf_reference/programs.py`` runs here with
``tf = dataflow``; its outcome must match what TensorFlow (control flow v1)
produced when ``generate.py`` recorded the fixtures: the same structure,
dtypes, shapes and values, and errors of the same class. An error matches if
dataflow's error is an instance of the class TF raised (dataflow's
InvalidArgumentError is also a ValueError, so it matches TF's ValueError for a
badly shaped feed).
"""
import builtins
import json
import pathlib

import numpy as np
import pytest

import dataflow as df
from tests.tf_reference import programs

EXPECTED = json.loads(
    (pathlib.Path(__file__).parent / "tf_reference" / "expected.json").read_text())["programs"]


def error_class(name):
    """The dataflow or builtin exception class TF's error ``name`` corresponds to."""
    cls = getattr(df.errors, name, None) or getattr(builtins, name, None)
    assert isinstance(cls, type) and issubclass(cls, BaseException), f"unknown error {name}"
    return cls


def actual_error(outcome):
    """Raise-free description of a dataflow outcome, for assertion messages."""
    return outcome.get("build_error") or outcome


def assert_same_error(expected_name, actual_name, where):
    """dataflow raised a subclass of (or the same class as) TF's error."""
    assert actual_name is not None, f"{where}: TF raised {expected_name}, dataflow did not"
    actual_cls = error_class(actual_name)
    assert issubclass(actual_cls, error_class(expected_name)), \
        f"{where}: TF raised {expected_name}, dataflow raised {actual_name}"


def assert_same_leaf(expected, actual, where):
    """dtype, shape and values agree (floats to float32 rounding)."""
    assert "dtype" in actual, f"{where}: expected a tensor value, got {actual}"
    assert actual["dtype"] == expected["dtype"], \
        f"{where}: dtype {actual['dtype']} != TF's {expected['dtype']}"
    assert actual["shape"] == expected["shape"], \
        f"{where}: shape {actual['shape']} != TF's {expected['shape']}"
    want = np.array(expected["value"], dtype=expected["dtype"])
    got = np.array(actual["value"], dtype=actual["dtype"])
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6, err_msg=where)
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
    assert sorted(programs.PROGRAMS) == sorted(EXPECTED), \
        "programs.py and expected.json disagree: rerun tests/tf_reference/generate.py"


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_matches_tensorflow(name):
    expected = EXPECTED[name]
    outcome = programs.run_program(df, programs.PROGRAMS[name])
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
