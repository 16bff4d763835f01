"""Behaviour of ``df.cond`` and ``df.case`` (control flow v1: Switch and Merge).

Expected values are computed in plain Python next to each graph; graph
structure checks follow the design note ("Implementation of Control Flow in
TensorFlow", section 3.1): one Switch per captured external tensor and branch,
one Merge per output.
"""
import collections

import numpy as np
import pytest

import dataflow as df

from .op_harness import ops_of_type

pytestmark = pytest.mark.usefixtures("graph")

Pair = collections.namedtuple("Pair", "first second")


def design_note_cond():
    """The example of the design note: ``cond(x < y, lambda: add(x, z), lambda: square(y))``."""
    x = df.placeholder(df.float32, [], name="x")
    y = df.placeholder(df.float32, [], name="y")
    z = df.placeholder(df.float32, [], name="z")
    r = df.cond(x < y, lambda: df.add(x, z), lambda: df.square(y))
    return x, y, z, r


# -- the design note's example ---------------------------------------------------------------
def test_design_note_cond_true_branch():
    x, y, z, r = design_note_cond()
    with df.Session() as sess:
        assert sess.run(r, {x: 1.0, y: 5.0, z: 3.0}) == 1.0 + 3.0


def test_design_note_cond_false_branch():
    x, y, z, r = design_note_cond()
    with df.Session() as sess:
        assert sess.run(r, {x: 7.0, y: 5.0, z: 3.0}) == 5.0 * 5.0


def test_design_note_cond_graph_structure(graph):
    x, y, z, r = design_note_cond()
    switches = ops_of_type(graph, "Switch")
    # One Switch routes the predicate to make the branch pivots; then x and z for the
    # true branch and y for the false branch: one Switch per captured tensor per branch.
    data_inputs = sorted(s.inputs[0].name for s in switches if s.inputs[0] is not s.inputs[1])
    assert data_inputs == ["x:0", "y:0", "z:0"]
    assert len(switches) == 4
    merges = ops_of_type(graph, "Merge")
    assert len(merges) == 1 and merges[0].outputs[0] is r
    add = ops_of_type(graph, "AddV2")[0]
    square = ops_of_type(graph, "Square")[0]
    # Add reads the true outputs (index 1) of Switches, Square the false output (index 0).
    assert all(t.op.type == "Switch" and t.value_index == 1 for t in add.inputs)
    assert all(t.op.type == "Switch" and t.value_index == 0 for t in square.inputs)


def test_one_switch_per_captured_tensor_even_when_used_twice(graph):
    x = df.placeholder(df.float32, [], name="x")
    p = df.placeholder(df.bool, [], name="p")
    r = df.cond(p, lambda: x * x + x, lambda: x - 1.0)
    data_switches = [s for s in ops_of_type(graph, "Switch") if s.inputs[0] is x]
    assert len(data_switches) == 2  # one for the true branch, one for the false branch
    with df.Session() as sess:
        assert sess.run(r, {x: 3.0, p: True}) == 12.0
        assert sess.run(r, {x: 3.0, p: False}) == 2.0


def test_one_merge_per_output(graph):
    p = df.placeholder(df.bool, [])
    a = df.constant(1.0)
    r = df.cond(p, lambda: (a, a * 2.0, a * 3.0), lambda: (a * 4.0, a * 5.0, a * 6.0))
    assert len(ops_of_type(graph, "Merge")) == 3
    with df.Session() as sess:
        assert sess.run(r, {p: True}) == (1.0, 2.0, 3.0)
        assert sess.run(r, {p: False}) == (4.0, 5.0, 6.0)


# -- semantics -------------------------------------------------------------------------------
def test_only_the_taken_branch_runs():
    v = df.Variable(0, name="counter")
    p = df.placeholder(df.bool, [])
    r = df.cond(p, lambda: v.assign_add(1), lambda: v.assign_add(100))
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        assert sess.run(r, {p: True}) == 1
        assert sess.run(r, {p: True}) == 2
        assert sess.run(r, {p: False}) == 102
        assert sess.run(v) == 102


def test_failing_assert_on_untaken_branch_does_not_run():
    x = df.placeholder(df.float32, [])

    def checked_sqrt():
        check = df.Assert(x >= 0.0, [x], name="non_negative")
        with df.control_dependencies([check]):
            return df.sqrt(x)

    r = df.cond(x >= 0.0, checked_sqrt, lambda: -x)
    with df.Session() as sess:
        assert sess.run(r, {x: 9.0}) == 3.0
        assert sess.run(r, {x: -4.0}) == 4.0


def test_assert_inside_taken_branch_fails_at_run_time():
    x = df.placeholder(df.float32, [])

    def checked():
        check = df.Assert(x > 0.0, [x], name="positive")
        with df.control_dependencies([check]):
            return df.identity(x)

    r = df.cond(x > -10.0, checked, lambda: df.constant(0.0))
    with df.Session() as sess:
        assert sess.run(r, {x: 2.0}) == 2.0
        with pytest.raises(df.errors.InvalidArgumentError) as info:
            sess.run(r, {x: -1.0})
        assert info.value.op.type == "Assert"
        assert sess.run(r, {x: -20.0}) == 0.0


def test_branch_returning_external_tensor_unchanged():
    x = df.placeholder(df.int32, [])
    y = df.placeholder(df.int32, [])
    r = df.cond(x < y, lambda: x, lambda: y)
    with df.Session() as sess:
        assert sess.run(r, {x: 2, y: 7}) == 2
        assert sess.run(r, {x: 9, y: 7}) == 7


def test_branch_returning_python_constants():
    p = df.placeholder(df.bool, [])
    r = df.cond(p, lambda: 10, lambda: 20)
    with df.Session() as sess:
        assert sess.run(r, {p: True}) == 10
        assert sess.run(r, {p: False}) == 20


def test_nested_cond_all_four_paths():
    a = df.placeholder(df.bool, [])
    b = df.placeholder(df.bool, [])
    x = df.constant(10)
    r = df.cond(a,
                lambda: df.cond(b, lambda: x + 1, lambda: x + 2),
                lambda: df.cond(b, lambda: x * 3, lambda: x * 4))
    with df.Session() as sess:
        for va in (True, False):
            for vb in (True, False):
                want = (11 if vb else 12) if va else (30 if vb else 40)
                assert sess.run(r, {a: va, b: vb}) == want


def cond_in_cond_in_while_returning_a_loop_exit():
    """A loop whose body has a cond in a cond; the innermost branch returns the Exit of
    a loop built in it. Per outer iteration i adds: -1 if i == 0, 100 * i if i == 1,
    else i (the inner loop counts to i)."""
    def body(i, acc):
        def inner_loop():
            return df.while_loop(lambda j: j < i, lambda j: j + 1, [0])

        def middle():
            return df.cond(i > 1, inner_loop, lambda: i * 100)

        return i + 1, acc + df.cond(i > 0, middle, lambda: df.constant(-1))

    return df.while_loop(lambda i, a: i < 5, body, [0, 0])[1]


def expected_cond_in_cond_in_while():
    """The plain-Python value of :func:`cond_in_cond_in_while_returning_a_loop_exit`."""
    return sum(-1 if i == 0 else 100 * i if i == 1 else i for i in range(5))


def test_branch_returning_the_exit_of_a_loop_built_in_it():
    # Regression: the Merge of the inner cond (built in the outer branch) must take the
    # Exit as a value of that branch, not capture it again through the enclosing loop.
    r = cond_in_cond_in_while_returning_a_loop_exit()
    with df.Session() as sess:
        assert sess.run(r) == expected_cond_in_cond_in_while()


def test_branch_returning_loop_exit_inside_a_loop_inside_a_cond():
    p = df.placeholder(df.bool, [])
    r = df.cond(p, cond_in_cond_in_while_returning_a_loop_exit, lambda: df.constant(7))
    with df.Session() as sess:
        assert sess.run(r, {p: True}) == expected_cond_in_cond_in_while()
        assert sess.run(r, {p: False}) == 7


def test_structured_outputs_dict_and_namedtuple():
    p = df.placeholder(df.bool, [])
    x = df.constant(3.0)
    r = df.cond(p,
                lambda: {"sum": x + 1.0, "pair": Pair(x, x * x)},
                lambda: {"sum": x - 1.0, "pair": Pair(-x, x)})
    with df.Session() as sess:
        assert sess.run(r, {p: True}) == {"sum": 4.0, "pair": Pair(3.0, 9.0)}
        assert sess.run(r, {p: False}) == {"sum": 2.0, "pair": Pair(-3.0, 3.0)}


def test_single_element_list_is_unpacked_unless_strict():
    p = df.constant(True)
    loose = df.cond(p, lambda: [df.constant(1)], lambda: [df.constant(2)])
    strict = df.cond(p, lambda: [df.constant(1)], lambda: [df.constant(2)], strict=True)
    assert isinstance(loose, df.Tensor)
    assert isinstance(strict, list) and len(strict) == 1
    with df.Session() as sess:
        assert sess.run(loose) == 1
        assert sess.run(strict) == [1]


def test_cond_on_vector_values():
    p = df.placeholder(df.bool, [])
    v = df.constant([1.0, 2.0, 3.0])
    r = df.cond(p, lambda: v * 2.0, lambda: v + 1.0)
    with df.Session() as sess:
        np.testing.assert_array_equal(sess.run(r, {p: True}), [2.0, 4.0, 6.0])
        np.testing.assert_array_equal(sess.run(r, {p: False}), [2.0, 3.0, 4.0])


def test_print_inside_cond_runs_only_on_taken_branch(capfd):
    p = df.placeholder(df.bool, [])
    x = df.constant(7)

    def loud():
        return df.Print(x + 1, [x], message="TAKEN:")

    r = df.cond(p, loud, lambda: x - 1)
    with df.Session() as sess:
        assert sess.run(r, {p: False}) == 6
        assert "TAKEN:" not in capfd.readouterr().err
        assert sess.run(r, {p: True}) == 8
        assert "TAKEN:[7]" in capfd.readouterr().err


def test_tf_print_inside_cond(capfd):
    p = df.placeholder(df.bool, [])
    x = df.constant(5)

    def loud():
        printed = df.print("value is", x)
        with df.control_dependencies([printed]):
            return df.identity(x)

    r = df.cond(p, loud, lambda: x * 0)
    with df.Session() as sess:
        assert sess.run(r, {p: True}) == 5
        assert "value is 5" in capfd.readouterr().err
        assert sess.run(r, {p: False}) == 0
        assert "value is" not in capfd.readouterr().err


def test_tf_print_to_stdout(capfd):
    import sys
    x = df.constant(3)
    printed = df.print("out:", x, output_stream=sys.stdout)
    with df.Session() as sess:
        sess.run(printed)
    captured = capfd.readouterr()
    assert "out: 3" in captured.out and "out:" not in captured.err


# -- build-time errors -----------------------------------------------------------------------
def test_python_bool_predicate_is_rejected():
    with pytest.raises(TypeError):
        df.cond(True, lambda: df.constant(1), lambda: df.constant(2))


def test_non_bool_predicate_is_rejected():
    with pytest.raises(TypeError):
        df.cond(df.constant(1), lambda: df.constant(1), lambda: df.constant(2))


def test_branches_with_different_structures_are_rejected():
    with pytest.raises(ValueError):
        df.cond(df.constant(True), lambda: (df.constant(1), df.constant(2)),
                lambda: df.constant(3))


def test_branches_with_different_dtypes_are_rejected():
    with pytest.raises(ValueError):
        df.cond(df.constant(True), lambda: df.constant(1), lambda: df.constant(2.0))


def test_branch_returning_none_is_rejected():
    with pytest.raises(ValueError):
        df.cond(df.constant(True), lambda: None, lambda: None)


def test_non_callable_branch_is_rejected():
    with pytest.raises(TypeError):
        df.cond(df.constant(True), df.constant(1), lambda: df.constant(2))


# -- case ------------------------------------------------------------------------------------
def case_with_default(x, exclusive=False):
    """``x < 0 -> -1``, ``x > 10 -> 1``, otherwise ``0``."""
    return df.case([(x < 0, lambda: df.constant(-1)), (x > 10, lambda: df.constant(1))],
                   default=lambda: df.constant(0), exclusive=exclusive)


@pytest.mark.parametrize("value, want", [(-5, -1), (50, 1), (5, 0)])
def test_case_with_default(value, want):
    x = df.placeholder(df.int32, [])
    r = case_with_default(x)
    with df.Session() as sess:
        assert sess.run(r, {x: value}) == want


def test_case_first_true_predicate_wins_when_not_exclusive():
    x = df.placeholder(df.int32, [])
    r = df.case([(x > 0, lambda: df.constant(1)), (x > 1, lambda: df.constant(2))],
                default=lambda: df.constant(0))
    with df.Session() as sess:
        assert sess.run(r, {x: 5}) == 1   # both true: the first pair wins
        assert sess.run(r, {x: 1}) == 1
        assert sess.run(r, {x: -3}) == 0


def test_case_exclusive_with_two_true_predicates_fails_at_run_time():
    x = df.placeholder(df.int32, [])
    r = df.case([(x > 0, lambda: df.constant(1)), (x > 1, lambda: df.constant(2))],
                default=lambda: df.constant(0), exclusive=True)
    with df.Session() as sess:
        assert sess.run(r, {x: 1}) == 1    # exactly one true
        assert sess.run(r, {x: -1}) == 0   # none true: default
        with pytest.raises(df.errors.InvalidArgumentError):
            sess.run(r, {x: 5})
        assert sess.run(r, {x: 1}) == 1    # the session survives the failed run


def test_case_without_default_uses_last_pair_guarded_by_assert():
    x = df.placeholder(df.int32, [])
    r = df.case([(x < 0, lambda: df.constant(-1)), (x > 10, lambda: df.constant(1))])
    with df.Session() as sess:
        assert sess.run(r, {x: -4}) == -1
        assert sess.run(r, {x: 11}) == 1
        with pytest.raises(df.errors.InvalidArgumentError) as info:
            sess.run(r, {x: 5})   # no predicate is true
        assert info.value.op.type == "Assert"


def test_case_runs_only_the_chosen_function():
    v = df.Variable(0, name="hits")
    x = df.placeholder(df.int32, [])
    r = df.case([(x < 0, lambda: v.assign_add(1)), (x > 10, lambda: v.assign_add(10))],
                default=lambda: v.assign_add(100))
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        sess.run(r, {x: -1})
        sess.run(r, {x: 20})
        sess.run(r, {x: 3})
        assert sess.run(v) == 111


def test_case_rejects_non_bool_predicate_and_non_callable():
    with pytest.raises(TypeError):
        df.case([(df.constant(1), lambda: df.constant(1))])
    with pytest.raises(TypeError):
        df.case([(df.constant(True), 1)])
