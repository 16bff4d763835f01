"""Comparing dataflow's outcome of a reference program with TensorFlow's recorded one.

Outcomes are encoded by ``programs.encode`` / ``programs.run_program``: nested
structures whose leaves carry dtype, shape and value, and error class names.
``tolerance(dtype_name)`` gives the ``assert_allclose`` tolerances for floats.
``Fixture`` loads one recorded ``expected_*.json`` for the test module that
checks its programs.
"""
import builtins
import json
import pathlib

import numpy as np

import dataflow as df


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


def assert_same_leaf(expected, actual, where, tolerance):
    """dtype, shape and values agree (floats to ``tolerance(dtype name)``)."""
    assert "dtype" in actual, f"{where}: expected a tensor value, got {actual}"
    assert actual["dtype"] == expected["dtype"], \
        f"{where}: dtype {actual['dtype']} != TF's {expected['dtype']}"
    assert actual["shape"] == expected["shape"], \
        f"{where}: shape {actual['shape']} != TF's {expected['shape']}"
    want = np.array(expected["value"], dtype=expected["dtype"])
    got = np.array(actual["value"], dtype=actual["dtype"])
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, err_msg=where, **tolerance(want.dtype.name))
    else:
        np.testing.assert_array_equal(got, want, err_msg=where)


def assert_same_structure(expected, actual, where, tolerance):
    """Recursively compare two encoded fetch results (see ``programs.encode``)."""
    if "dtype" in expected:
        assert_same_leaf(expected, actual, where, tolerance)
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
            assert_same_structure(expected[key], actual[key], f"{where}.{key}", tolerance)
    else:
        assert len(actual) == len(expected), f"{where}: lengths differ"
        for i, (e, a) in enumerate(zip(expected, actual)):
            assert_same_structure(e, a, f"{where}[{i}]", tolerance)


def assert_same_outcome(name, expected, outcome, tolerance):
    """A whole program's outcome (build error, or each run's values or error) agrees."""
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
            assert_same_structure(want, got, where, tolerance)


class Fixture:
    """One recorded fixture (``tests/tf_reference/<filename>``) and the programs it covers.

    ``tolerance`` is either a ``{dtype name: assert_allclose kwargs}`` table or a
    ``tolerance(dtype_name)`` function. Test modules parametrise over ``names``::

        FIXTURE = Fixture("expected.json", programs.PROGRAMS, "programs.py", "generate.py",
                          {"float32": {"rtol": 1e-5, "atol": 1e-6}})

        @pytest.mark.parametrize("name", FIXTURE.names)
        def test_matches_tensorflow(name):
            FIXTURE.assert_matches(name, programs.run_program(df, FIXTURE.programs[name]))
    """

    def __init__(self, filename, programs, programs_file, generator, tolerance):
        self.filename = filename
        self.expected = json.loads(
            (pathlib.Path(__file__).parent / filename).read_text())["programs"]
        self.names = sorted(self.expected)
        self.programs = programs
        self.programs_file = programs_file
        self.generator = generator
        self.tolerance = tolerance.__getitem__ if isinstance(tolerance, dict) else tolerance

    def assert_covers_programs(self):
        """Every program has a recorded outcome and every recorded outcome a program."""
        assert sorted(self.programs) == self.names, \
            f"{self.programs_file} and {self.filename} disagree: rerun " \
            f"tests/tf_reference/{self.generator}"

    def assert_matches(self, name, outcome):
        """dataflow's ``outcome`` of program ``name`` agrees with TF's recorded one."""
        assert_same_outcome(name, self.expected[name], outcome, self.tolerance)
