"""Behaviour of ``df.while_loop`` (control flow v1: Enter, Merge, Switch, NextIteration, Exit).

Expected values come from the same loops written in plain Python. Structure
checks follow the design note (section 3.2): per loop variable
``Enter -> Merge -> Switch -> Identity -> body -> NextIteration -> Merge:1``
and ``Switch:0 -> Exit``, with captured tensors entering as constant Enters.
"""
import collections

import numpy as np
import pytest

import dataflow as df

from .op_harness import NO_HANG, ops_of_type, run

pytestmark = pytest.mark.usefixtures("graph")

Point = collections.namedtuple("Point", "x y")


# -- the design note's example and basics ----------------------------------------------------
def test_design_note_while_loop_counts_to_ten():
    r = df.while_loop(lambda i: i < 10, lambda i: df.add(i, 1), [0])
    assert isinstance(r, df.Tensor)  # a single loop variable comes back bare
    assert run(r) == 10


def test_two_loop_variables():
    n = df.placeholder(df.int32, [])
    i, acc = df.while_loop(lambda i, a: i < n, lambda i, a: (i + 1, a * 2.0), (0, 1.0))
    assert run([i, acc], {n: 5}) == [5, 2.0 ** 5]


def test_zero_iteration_loop_returns_initial_values():
    v = df.Variable(0, name="runs")

    def body(i, a):
        with df.control_dependencies([v.assign_add(1)]):
            return i + 1, a * 2.0

    i, a = df.while_loop(lambda i, a: i < 0, body, [0, 3.0])
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        assert sess.run([i, a]) == [0, 3.0]
        assert sess.run(v) == 0  # the body never ran


def test_loop_over_fed_placeholder_bound():
    n = df.placeholder(df.int32, [])
    total = df.while_loop(lambda i, s: i <= n, lambda i, s: (i + 1, s + i), [1, 0])[1]
    with df.Session() as sess:
        for value in (0, 1, 10, 37):
            assert sess.run(total, {n: value}) == sum(range(1, value + 1))


# -- graph structure -------------------------------------------------------------------------
def build_structure_loop():
    """A two-variable loop capturing ``limit`` (pred and body) and ``scale`` (body)."""
    limit = df.placeholder(df.int32, [], name="limit")
    scale = df.placeholder(df.float32, [], name="scale")
    return limit, scale, df.while_loop(
        lambda i, x: i < limit, lambda i, x: (i + 1, x * scale + df.cast(limit, df.float32)),
        [0, 1.0])


def test_loop_variable_chain_enter_merge_switch_identity_next_exit(graph):
    limit, scale, (i, x) = build_structure_loop()
    loop_cond = ops_of_type(graph, "LoopCond")
    assert len(loop_cond) == 1
    var_enters = [e for e in ops_of_type(graph, "Enter") if not e.get_attr("is_constant")]
    assert len(var_enters) == 2
    exits = []
    for enter in var_enters:
        (merge,) = enter.outputs[0].consumers()
        assert merge.type == "Merge" and merge.inputs[0] is enter.outputs[0]
        next_it = merge.inputs[1].op  # the back edge closes into Merge input 1
        assert next_it.type == "NextIteration"
        switch = [c for c in merge.outputs[0].consumers() if c.type == "Switch"][0]
        assert switch.inputs[0] is merge.outputs[0]
        assert switch.inputs[1] is loop_cond[0].outputs[0]
        kinds = {c.type for t in switch.outputs for c in t.consumers()}
        assert kinds == {"Identity", "Exit"}
        assert switch.outputs[1].consumers()[0].type == "Identity"
        (exit_op,) = switch.outputs[0].consumers()
        assert exit_op.type == "Exit"
        exits.append(exit_op)
    assert sorted(e.outputs[0].name for e in exits) == sorted([i.name, x.name])
    with df.Session() as sess:
        assert sess.run([i, x], {limit: 2, scale: 3.0}) == [2, (1.0 * 3 + 2) * 3 + 2]


def test_captured_tensors_enter_once_as_constants(graph):
    limit, scale, _ = build_structure_loop()
    constant_enters = [e for e in ops_of_type(graph, "Enter") if e.get_attr("is_constant")]
    # limit is used in the predicate and twice in the body, scale once: one Enter each.
    assert sorted(e.inputs[0].name for e in constant_enters) == ["limit:0", "scale:0"]
    frames = {e.get_attr("frame_name") for e in ops_of_type(graph, "Enter")}
    assert len(frames) == 1


def test_frame_names_are_unique_across_loops(graph):
    for _ in range(3):
        df.while_loop(lambda i: i < 3, lambda i: i + 1, [0])
    df.while_loop(lambda i: i < 3, lambda i: i + 1, [0], name="custom")
    frames = [e.get_attr("frame_name") for e in ops_of_type(graph, "Enter")]
    assert len(frames) == len(set(frames)) == 4
    assert len(ops_of_type(graph, "LoopCond")) == 4


def test_nested_loop_frames_are_distinct(graph):
    def outer_body(i):
        inner = df.while_loop(lambda j: j < 2, lambda j: j + 1, [0])
        return i + inner

    df.while_loop(lambda i: i < 5, outer_body, [0])
    frames = {e.get_attr("frame_name") for e in ops_of_type(graph, "Enter")}
    assert len(frames) == 2


# -- nesting ---------------------------------------------------------------------------------
def nested_three_deep_expected(n1, n2, n3, a, b, c):
    """The plain-Python loop nest that ``test_nested_while_three_deep`` builds as a graph."""
    acc = 0
    for i in range(n1):
        for j in range(n2):
            for k in range(n3):
                acc += i * j + k * c
            acc += b
        acc += a
    return acc


def build_nested_three_deep(a, b, c, n1, n2, n3):
    """Three nested loops; each level captures a tensor from outside the whole nest and
    the inner levels also use the outer loop variables."""
    def level1(i, acc):
        def level2(j, acc):
            def level3(k, acc):
                return k + 1, acc + i * j + k * c
            _, acc = df.while_loop(lambda k, acc: k < n3, level3, [0, acc])
            return j + 1, acc + b
        _, acc = df.while_loop(lambda j, acc: j < n2, level2, [0, acc])
        return i + 1, acc + a

    return df.while_loop(lambda i, acc: i < n1, level1, [0, 0])[1]


def test_nested_while_three_deep():
    a, b, c = (df.placeholder(df.int32, [], name=n) for n in "abc")
    n1, n2, n3 = (df.placeholder(df.int32, [], name=n) for n in ("n1", "n2", "n3"))
    r = build_nested_three_deep(a, b, c, n1, n2, n3)
    with df.Session() as sess:
        for sizes in [(2, 3, 4), (3, 1, 5), (0, 2, 2), (2, 0, 3), (2, 2, 0), (4, 3, 2)]:
            feed = {a: 7, b: 3, c: 5, n1: sizes[0], n2: sizes[1], n3: sizes[2]}
            assert sess.run(r, feed, options=NO_HANG) == \
                nested_three_deep_expected(*sizes, 7, 3, 5)


def test_inner_loop_result_feeds_outer_body():
    def outer(i, total):
        inner_sum = df.while_loop(lambda j, s: j < i, lambda j, s: (j + 1, s + j), [0, 0])[1]
        return i + 1, total + inner_sum

    r = df.while_loop(lambda i, t: i < 6, outer, [0, 0])[1]
    assert run(r) == sum(sum(range(i)) for i in range(6))


def test_while_in_cond_taken_branch():
    p = df.placeholder(df.bool, [])
    x = df.placeholder(df.int32, [])
    r = df.cond(p, lambda: df.while_loop(lambda i: i < 10, lambda i: i + x, [x]),
                lambda: x * 100)
    assert run(r, {p: True, x: 3}) == 12
    assert run(r, {p: False, x: 3}) == 300


def test_while_in_untaken_branch_does_not_run():
    p = df.placeholder(df.bool, [])
    v = df.Variable(0, name="body_runs")

    def loop():
        def body(i):
            with df.control_dependencies([v.assign_add(1)]):
                return i + 1
        return df.while_loop(lambda i: i < 4, body, [0])

    r = df.cond(p, loop, lambda: df.constant(-1))
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        assert sess.run(r, {p: False}, options=NO_HANG) == -1
        assert sess.run(v) == 0
        assert sess.run(r, {p: True}, options=NO_HANG) == 4
        assert sess.run(v) == 4


def test_infinite_loop_in_untaken_branch_does_not_hang():
    p = df.placeholder(df.bool, [])
    x = df.constant(1)
    r = df.cond(p, lambda: df.while_loop(lambda i: i > 0, lambda i: i + 1, [x]),
                lambda: x * 100)
    assert run(r, {p: False}) == 100


def test_cond_in_while():
    def body(i, acc):
        return i + 1, df.cond(df.equal(i % 2, 0), lambda: acc + i, lambda: acc - 1)

    r = df.while_loop(lambda i, a: i < 10, body, [0, 0])
    assert run(r) == (10, sum(i if i % 2 == 0 else -1 for i in range(10)))


def test_cond_in_while_on_a_tensor_computed_in_the_body():
    def body(i, total):
        k = i * 2
        return i + 1, total + df.cond(k > 4, lambda: k * 10, lambda: k)

    r = df.while_loop(lambda i, t: i < 4, body, [0, 0])
    assert run(r) == (4, sum(2 * i * 10 if 2 * i > 4 else 2 * i for i in range(4)))


def test_cond_on_inner_loop_exit_in_outer_body():
    def outer(i, total):
        inner = df.while_loop(lambda j: j < 100, lambda j: j + 1, [0], maximum_iterations=i)
        return i + 1, total + df.cond(inner > 2, lambda: inner * 10, lambda: inner)

    r = df.while_loop(lambda i, t: i < 6, outer, [0, 0])
    assert run(r) == (6, sum(k * 10 if k > 2 else k for k in range(6)))


def test_cond_in_while_capturing_outer_tensor():
    bonus = df.placeholder(df.float32, [])

    def body(i, acc):
        return i + 1, df.cond(i < 3, lambda: acc + bonus, lambda: acc * 2.0)

    r = df.while_loop(lambda i, a: i < 5, body, [0, 0.0])[1]
    expected = 0.0
    for i in range(5):
        expected = expected + 1.5 if i < 3 else expected * 2.0
    assert run(r, {bonus: 1.5}) == expected


# -- maximum_iterations and parallel_iterations ----------------------------------------------
@pytest.mark.parametrize("max_iter, want", [(3, 3), (0, 0), (10, 10), (25, 10)])
def test_maximum_iterations(max_iter, want):
    r = df.while_loop(lambda i: i < 10, lambda i: i + 1, [0], maximum_iterations=max_iter)
    assert run(r) == want


def test_maximum_iterations_as_fed_tensor_with_several_variables():
    m = df.placeholder(df.int32, [])
    i, p = df.while_loop(lambda i, p: i < 100, lambda i, p: (i + 1, p * 3), [0, 1],
                         maximum_iterations=m)
    assert run([i, p], {m: 4}) == [4, 3 ** 4]
    assert run([i, p], {m: 0}) == [0, 1]


def test_maximum_iterations_single_variable_returned_bare():
    r = df.while_loop(lambda i: i < 10, lambda i: i + 2, [0], maximum_iterations=2)
    assert isinstance(r, df.Tensor)
    assert run(r) == 4


def test_maximum_iterations_in_nested_loop():
    def outer(i, total):
        inner = df.while_loop(lambda j: j < 100, lambda j: j + 1, [0], maximum_iterations=i)
        return i + 1, total + inner

    r = df.while_loop(lambda i, t: i < 5, outer, [0, 0])[1]
    assert run(r) == sum(range(5))


def test_maximum_iterations_counter_structure(graph):
    """As the while_loop docstring draws it: the counter is loop variable 0, compared with
    a constant Enter of the limit and ANDed into the predicate; its Exit is dropped."""
    r = df.while_loop(lambda a: a < 100.0, lambda a: a * 2.0, [1.0], maximum_iterations=3)
    exits = ops_of_type(graph, "Exit")
    assert len(exits) == 2 and r is exits[1].outputs[0]
    [loop_cond] = ops_of_type(graph, "LoopCond")
    [both] = [op for op in ops_of_type(graph, "LogicalAnd") if op.outputs[0] is
              loop_cond.inputs[0]]
    counter_test = both.inputs[0].op
    assert counter_test.type == "Less"
    counter_merge, limit = counter_test.inputs
    assert counter_merge.op is exits[0].inputs[0].op.inputs[0].op  # Merge of variable 0
    assert limit.op.type == "Enter" and limit.op.get_attr("is_constant")
    assert limit.op.inputs[0].op.name.endswith("maximum_iterations")
    assert run(r) == 8.0


def test_outer_pivot_edge_on_inner_enter_of_an_outer_invariant(graph):
    """A nested loop whose variable starts from an outer loop invariant: its Enter waits
    for the outer body pivot, so no inner loop runs in the outer loop's last iteration
    (where the invariant is live but the body is not)."""
    x = df.placeholder(df.float32, [], name="x")

    def outer_body(i, total):
        inner = df.while_loop(lambda b: b < 3.0, lambda b: b + 1.0, [x])
        return i + 1, total + inner

    _, total = df.while_loop(lambda i, t: i < 4, outer_body, [0, 0.0])
    [inner_enter] = [op for op in ops_of_type(graph, "Enter")
                     if op.inputs[0].op.type == "Enter"
                     and not op.get_attr("is_constant")]
    assert inner_enter.inputs[0].op.get_attr("is_constant")  # the outer invariant
    [pivot] = inner_enter.control_inputs
    assert pivot.type == "Identity" and pivot.inputs[0].op.type == "Switch"
    assert pivot.inputs[0].value_index == 1  # the outer Switch's true output
    assert run(total, {x: 0.5}) == 4 * 3.5


def test_parallel_iterations_do_not_change_results():
    def build(parallel):
        def body(i, acc, vec):
            x = df.cast(i, df.float32)
            return i + 1, acc + x * 0.5, vec * 0.5 + x
        return df.while_loop(lambda i, a, v: i < 50, body,
                             [0, 0.0, df.constant([1.0, 2.0])],
                             parallel_iterations=parallel)

    seq, par = build(1), build(10)
    results = run([seq, par])
    vec = np.array([1.0, 2.0], np.float32)
    for i in range(50):
        vec = vec * np.float32(0.5) + np.float32(i)
    for i, acc, v in results:
        assert i == 50 and acc == sum(range(50)) * 0.5
        np.testing.assert_allclose(v, vec, rtol=1e-6)
    np.testing.assert_array_equal(results[0][2], results[1][2])


def test_parallel_iterations_must_be_positive():
    with pytest.raises(TypeError):
        df.while_loop(lambda i: i < 3, lambda i: i + 1, [0], parallel_iterations=0)


# -- structures ------------------------------------------------------------------------------
def test_return_same_structure_keeps_the_list():
    r = df.while_loop(lambda i: i < 3, lambda i: i + 1, [0], return_same_structure=True)
    assert isinstance(r, list) and len(r) == 1
    assert run(r) == [3]


def test_nested_tuple_and_list_loop_vars():
    r = df.while_loop(lambda a, b: a < 3, lambda a, b: (a + 1, [b[0] * 2, b[1] + 1]),
                      (0, [1, 2]))
    assert run(r) == (3, [8, 5])


def test_namedtuple_loop_vars():
    r = df.while_loop(lambda x, y: x < 3, lambda x, y: Point(x + 1, y * 2), Point(0, 1))
    assert run(r) == Point(3, 8)


def test_single_namedtuple_loop_var_in_list():
    r = df.while_loop(lambda p: p.x < 3, lambda p: [Point(p.x + 1, p.y + p.x)], [Point(0, 0)])
    assert run(r) == [Point(3, 0 + 1 + 2)]


def test_dict_inside_loop_vars():
    def body(i, state):
        return i + 1, {"sum": state["sum"] + i, "prod": state["prod"] * 2.0}

    i, state = df.while_loop(lambda i, s: i < 4, body, [0, {"sum": 0, "prod": 1.0}])
    assert run([i, state]) == [4, {"sum": 6, "prod": 16.0}]


def test_body_returning_a_different_structure_is_rejected():
    with pytest.raises(ValueError):
        df.while_loop(lambda i, j: i < 3, lambda i, j: (i + 1,), [0, 1])
    with pytest.raises(ValueError):
        df.while_loop(lambda i, s: i < 3, lambda i, s: (i + 1, [s, s]), [0, 1])


def test_predicate_must_be_boolean():
    with pytest.raises(TypeError):
        df.while_loop(lambda i: i, lambda i: i + 1, [0])


def test_loop_variable_dtype_change_is_rejected():
    with pytest.raises(TypeError):
        df.while_loop(lambda i: i < 3, lambda i: df.cast(i, df.float32), [0])


def test_no_loop_variables_is_rejected():
    with pytest.raises(ValueError):
        df.while_loop(lambda: df.constant(True), lambda: (), [])


# -- shapes ----------------------------------------------------------------------------------
def test_shape_invariant_allows_growing_tensor():
    i, y = df.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, df.concat([y, y * 2.0], 0)),
                         [0, df.constant([1.0])],
                         shape_invariants=[df.TensorShape([]), df.TensorShape([None])])
    assert y.shape.as_list() == [None]
    expected = [1.0]
    for _ in range(3):
        expected = expected + [2.0 * v for v in expected]
    np.testing.assert_array_equal(run(y), expected)


def test_growing_tensor_without_shape_invariant_is_rejected():
    with pytest.raises(ValueError):
        df.while_loop(lambda i, y: i < 3, lambda i, y: (i + 1, df.concat([y, y], 0)),
                      [0, df.constant([1.0])])


def test_shape_invariant_incompatible_with_initial_shape_is_rejected():
    with pytest.raises(ValueError):
        df.while_loop(lambda i: i < 3, lambda i: i + 1, [df.constant([1])],
                      shape_invariants=[df.TensorShape([2])])


def test_shape_invariant_with_maximum_iterations():
    y = df.while_loop(lambda y: df.size(y) < 100, lambda y: df.concat([y, y], 0),
                      [df.constant([1])], shape_invariants=[df.TensorShape([None])],
                      maximum_iterations=3)
    np.testing.assert_array_equal(run(y), [1] * 8)


# -- loop frames are closed ------------------------------------------------------------------
def test_tensor_from_inside_one_loop_cannot_be_used_in_another():
    leaked = []

    def body(i):
        leaked.append(i * 2)
        return i + 1

    df.while_loop(lambda i: i < 3, body, [0])
    with pytest.raises(ValueError):
        df.while_loop(lambda j: j < 3, lambda j: j + leaked[0], [0])


def test_tensor_from_inside_a_loop_cannot_be_used_outside():
    leaked = []

    def body(i):
        leaked.append(i * 2)
        return i + 1

    df.while_loop(lambda i: i < 3, body, [0])
    with pytest.raises(ValueError):
        df.add(leaked[0], 1)


# -- state, assertions and printing ----------------------------------------------------------
def test_assign_add_in_body_with_control_dependencies():
    v = df.Variable(0.0, name="acc")

    def body(i):
        with df.control_dependencies([v.assign_add(2.5)]):
            return i + 1

    n = df.placeholder(df.int32, [])
    r = df.while_loop(lambda i: i < n, body, [0])
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        assert sess.run(r, {n: 4}) == 4
        assert sess.run(v) == 10.0
        assert sess.run(r, {n: 2}) == 2
        assert sess.run(v) == 15.0


def test_variable_read_in_each_iteration_sees_previous_updates():
    v = df.Variable(1, name="doubling")

    def body(i, seen):
        new = v.assign(v.read_value() * 2)
        return i + 1, seen + new

    _, seen = df.while_loop(lambda i, s: i < 5, body, [0, 0], parallel_iterations=1)
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        assert sess.run(seen) == 2 + 4 + 8 + 16 + 32
        assert sess.run(v) == 32


def test_loop_built_under_control_dependencies_waits_for_them():
    v = df.Variable(1, name="seed")
    set_v = v.assign(5)
    with df.control_dependencies([set_v]):
        _, total = df.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a + v.read_value()),
                                 [0, 0])
    with df.Session() as sess:
        sess.run(v.initializer)
        assert sess.run(total, options=NO_HANG) == 3 * 5


def test_body_op_with_control_dependency_on_outer_op():
    v = df.Variable(0, name="outer_counter")
    bump = v.assign_add(1)

    def body(i, acc):
        with df.control_dependencies([bump]):
            return i + 1, acc + v.read_value()

    _, acc = df.while_loop(lambda i, a: i < 4, body, [0, 0])
    with df.Session() as sess:
        sess.run(v.initializer)
        # The outer increment runs once, before any body read that depends on it.
        assert sess.run(acc, options=NO_HANG) == 4 * 1
        assert sess.run(v) == 1


def test_assert_inside_while_fails_on_the_bad_iteration():
    limit = df.placeholder(df.int32, [])

    def body(i):
        check = df.Assert(i < limit, [i], name="below_limit")
        with df.control_dependencies([check]):
            return i + 1

    r = df.while_loop(lambda i: i < 5, body, [0])
    with df.Session() as sess:
        assert sess.run(r, {limit: 5}, options=NO_HANG) == 5
        with pytest.raises(df.errors.InvalidArgumentError) as info:
            sess.run(r, {limit: 3}, options=NO_HANG)
        assert "below_limit" in str(info.value)
        assert sess.run(r, {limit: 10}, options=NO_HANG) == 5


def test_print_in_while_prints_every_iteration(capfd):
    def body(i):
        return df.Print(i + 1, [i], message="iter:")

    r = df.while_loop(lambda i: i < 3, body, [0])
    assert run(r) == 3
    err = capfd.readouterr().err
    assert [line for line in err.splitlines() if line.startswith("iter:")] == \
        ["iter:[0]", "iter:[1]", "iter:[2]"]


def test_tf_print_in_while(capfd):
    def body(i):
        printed = df.print("step", i)
        with df.control_dependencies([printed]):
            return i + 1

    assert run(df.while_loop(lambda i: i < 3, body, [0])) == 3
    lines = [ln for ln in capfd.readouterr().err.splitlines() if ln.startswith("step")]
    assert sorted(lines) == ["step 0", "step 1", "step 2"]
