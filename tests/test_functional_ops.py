"""map_fn, scan, foldl and foldr: against recorded TensorFlow 1.x results and finite
differences.

The programs of ``tests/tf_reference/functional_programs.py`` (ported from TF's
``functional_ops_test.py`` and ``map_fn_test.py``) run here with ``tf = dataflow``
and must match ``expected_functional.json``, recorded from TensorFlow (control flow
v1) by ``generate_tensor_array.py``.
"""
import numpy as np
import pytest

import dataflow as df
from tests.op_harness import check_gradients
from tests.tf_reference import functional_programs
from tests.tf_reference.compare import Fixture

FIXTURE = Fixture("expected_functional.json", functional_programs.PROGRAMS,
                  "functional_programs.py", "generate_tensor_array.py",
                  {"float64": {"rtol": 1e-9, "atol": 1e-12}, "float32": {"rtol": 1e-5, "atol": 1e-6}})


def test_every_program_has_a_fixture():
    FIXTURE.assert_covers_programs()


@pytest.mark.parametrize("name", FIXTURE.names)
def test_functional_ops_match_tensorflow(name):
    outcome = functional_programs.run_program(df, FIXTURE.programs[name])
    FIXTURE.assert_matches(name, outcome)


def test_map_fn_gradient_against_finite_differences():
    check_gradients(lambda x, w: df.map_fn(lambda r: df.tanh(df.reduce_sum(r * w)) * r, x),
                    [np.array([[0.5, -1.0], [2.0, 0.3], [-0.7, 0.1]]), np.array([0.4, -0.9])])


def test_scan_gradient_against_finite_differences_partial_shapes():
    def build(x, a0):
        return df.scan(lambda a, e: df.sin(a) * e + a, x, initializer=a0, reverse=True)
    check_gradients(build, [np.array([[0.5, -1.0], [2.0, 0.3], [-0.7, 0.1]]),
                            np.array([0.2, 0.9])], partial=True)


def test_fold_gradients_against_finite_differences():
    check_gradients(lambda x: df.foldl(lambda a, e: a * e + df.sin(e), x), [np.array(
        [0.5, -1.2, 0.8, 1.5])])
    check_gradients(lambda x: df.foldr(lambda a, e: df.exp(a * 0.1) * e, x), [np.array(
        [[0.5, -1.2], [0.8, 1.5]])])


@pytest.mark.usefixtures("graph")
def test_static_shapes():
    x = df.placeholder(df.float32, [5, 3])
    assert df.map_fn(lambda r: r * 2.0, x).shape == df.TensorShape([5, 3])
    assert df.scan(lambda a, r: a + r, x).shape == df.TensorShape([5, 3])
    assert df.foldl(lambda a, r: a + r, x).shape == df.TensorShape([3])
    y = df.placeholder(df.float32, [None, 3])
    assert df.map_fn(lambda r: df.reduce_sum(r), y).shape.as_list() == [None]


@pytest.mark.usefixtures("graph")
def test_bad_arguments():
    with pytest.raises(TypeError, match="fn must be callable"):
        df.map_fn(3, df.constant([1.0]))
    with pytest.raises(ValueError, match="not scalars"):
        df.scan(lambda a, x: a + x, df.constant(1.0))
    with pytest.raises(ValueError, match="structure"):
        df.map_fn(lambda x: (x, x), df.constant([1.0, 2.0]))
