"""The reference interpreter (``spec``) alone, on hand-written graphs.

Every expected value is a closed-form Python computation, so these tests pin
the spec to the rules in ``dataflow/spec/SEMANTICS.md`` independently of the executor.
Each graph is run under several seeds (firing orders) that must all agree.
"""
from __future__ import annotations

import numpy as np
import pytest

import dataflow as df
from dataflow import spec
from dataflow.ops import control_flow_ops as cf

DEAD = (None, True)
SEEDS = range(6)


def run_spec(graph, fetches, feed_dict=None):
    """Run under several seeds; assert they agree; return ``[(value, is_dead), ...]``."""
    results = [spec.run(graph, fetches, feed_dict, seed=s) for s in SEEDS]
    for other in results[1:]:
        assert _same(results[0], other), (results[0], other)
    return results[0]


def _same(a, b) -> bool:
    return all(da == db and (da or np.array_equal(va, vb)) for (va, da), (vb, db) in zip(a, b))


def live(value):
    return (value, False)


def f64(v):
    return df.constant(v, df.float64)


def i32(v):
    return df.constant(v, df.int32)


# -- Switch and Merge ------------------------------------------------------------------------------
@pytest.mark.parametrize("pred", [True, False])
def test_switch_sends_data_to_one_output_and_kills_the_other(pred):
    g = df.Graph()
    with g.as_default():
        p = df.placeholder(df.bool, shape=[])
        out_f, out_t = cf.switch(f64(3.0), p)
        after_f, after_t = out_f + 1.0, out_t * 2.0
    got = run_spec(g, [out_f, out_t, after_f, after_t], {p: pred})
    if pred:
        assert got == [DEAD, live(3.0), DEAD, live(6.0)]
    else:
        assert got == [live(3.0), DEAD, live(4.0), DEAD]


@pytest.mark.parametrize("pred", [True, False])
def test_merge_forwards_the_live_branch_and_its_index(pred):
    g = df.Graph()
    with g.as_default():
        p = df.placeholder(df.bool, shape=[])
        out_f, out_t = cf.switch(f64(5.0), p)
        value, index = cf.merge([out_f - 1.0, out_t * 10.0])
    got = run_spec(g, [value, index], {p: pred})
    assert got == ([live(50.0), live(1)] if pred else [live(4.0), live(0)])
    assert got[1][0].dtype == np.int32


def test_merge_is_dead_when_every_input_is_dead():
    g = df.Graph()
    with g.as_default():
        p = df.placeholder(df.bool, shape=[])
        _, dead = cf.switch(f64(1.0), p)          # dead when p is False
        a_f, a_t = cf.switch(dead, df.constant(True))
        value, index = cf.merge([a_f, a_t])       # both arms of a dead Switch are dead
        other, _ = cf.merge([dead, f64(7.0)])     # one live input suffices
    assert run_spec(g, [value, index, other], {p: False}) == [DEAD, DEAD, live(7.0)]
    # (with p True `other` would have two live inputs: a race, so it is not fetched)
    assert run_spec(g, [value, index], {p: True}) == [live(1.0), live(1)]


def test_switch_on_a_dead_predicate_has_both_outputs_dead():
    g = df.Graph()
    with g.as_default():
        p = df.placeholder(df.bool, shape=[])
        _, dead_pred = cf.switch(df.constant(True), p)
        out_f, out_t = cf.switch(f64(2.0), dead_pred)
    assert run_spec(g, [out_f, out_t], {p: False}) == [DEAD, DEAD]
    assert run_spec(g, [out_f, out_t], {p: True}) == [DEAD, live(2.0)]


# -- control edges ----------------------------------------------------------------------------
def test_a_dead_control_input_kills_a_node():
    g = df.Graph()
    with g.as_default():
        p = df.placeholder(df.bool, shape=[])
        _, out_t = cf.switch(f64(1.0), p)
        dead_node = df.identity(out_t).op
        with g.control_dependencies([dead_node]):
            y = df.identity(f64(4.0))
            c = f64(9.0)                           # a Const with a control input, too
    assert run_spec(g, [y, c], {p: False}) == [DEAD, DEAD]
    assert run_spec(g, [y, c], {p: True}) == [live(4.0), live(9.0)]


def test_a_switch_with_live_inputs_is_not_dead_as_a_control_input():
    g = df.Graph()
    with g.as_default():
        out_f, _ = cf.switch(f64(1.0), df.constant(True))   # output 0 is dead
        with g.control_dependencies([out_f.op]):
            y = df.identity(f64(4.0))
    assert run_spec(g, [out_f, y]) == [DEAD, live(4.0)]


def test_control_trigger_is_never_dead():
    g = df.Graph()
    with g.as_default():
        _, out_t = cf.switch(f64(1.0), df.constant(False))
        dead_node = df.identity(out_t).op
        with g.control_dependencies([dead_node]):
            trigger = cf.control_trigger()
            noop = df.no_op()
        with g.control_dependencies([trigger]):
            y = df.identity(f64(2.0))
        with g.control_dependencies([noop]):
            z = df.identity(f64(3.0))
    assert run_spec(g, [y, z]) == [live(2.0), DEAD]


def test_merge_waits_for_control_inputs_but_ignores_their_deadness():
    g = df.Graph()
    with g.as_default():
        _, out_t = cf.switch(f64(1.0), df.constant(False))
        dead_node = df.identity(out_t).op
        six = f64(6.0)
        with g.control_dependencies([dead_node]):
            value, _ = cf.merge([out_t, six])
    assert run_spec(g, [value]) == [live(6.0)]


def test_fed_tensors_cut_the_graph_and_are_fetchable():
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float64, shape=[])
        y = x * 3.0
        z = y + 1.0
    # feeding y means x (an unfed placeholder) is never needed
    assert run_spec(g, [z, y], {y: 2.0}) == [live(3.0), live(2.0)]


# -- raw loops ------------------------------------------------------------------------------------
def _raw_counting_loop(start, limit, parallel_iterations=10, use_private_name=False):
    """i, acc = start, 0; while i < limit: acc += i * i; i += 1 -- from the five primitives."""
    frame = "raw_loop"
    enter_i = cf.enter(start, frame, parallel_iterations=parallel_iterations)
    enter_acc = cf.enter(i32(0), frame, parallel_iterations=parallel_iterations)
    enter_limit = cf.enter(limit, frame, is_constant=True)
    one = cf.enter(i32(1), frame, is_constant=True)
    m_i, _ = cf.merge([enter_i, enter_i])
    m_acc, _ = cf.merge([enter_acc, enter_acc])
    pred = cf.loop_cond(m_i < enter_limit)
    i_f, i_t = cf.switch(m_i, pred)
    acc_f, acc_t = cf.switch(m_acc, pred)
    next_i = cf.next_iteration(i_t + one)
    next_acc = cf.next_iteration(acc_t + i_t * i_t)
    if use_private_name:
        m_i.op._update_input(1, next_i)
        m_acc.op._update_input(1, next_acc)
    else:
        m_i.op.update_input(1, next_i)
        m_acc.op.update_input(1, next_acc)
    return cf.exit(i_f), cf.exit(acc_f)


@pytest.mark.parametrize("start,limit", [(0, 0), (0, 1), (0, 6), (3, 5), (4, -2)])
@pytest.mark.parametrize("parallel_iterations", [1, 3])
def test_raw_primitive_loop(start, limit, parallel_iterations):
    g = df.Graph()
    with g.as_default():
        lim = df.placeholder(df.int32, shape=[])
        i, acc = _raw_counting_loop(i32(start), lim, parallel_iterations,
                                    use_private_name=parallel_iterations == 3)
    expected_acc = sum(k * k for k in range(start, limit))
    assert run_spec(g, [i, acc], {lim: limit}) == [live(max(start, limit)), live(expected_acc)]


@pytest.mark.parametrize("pred", [True, False])
def test_raw_loop_entered_on_an_untaken_branch_is_dead(pred):
    g = df.Graph()
    with g.as_default():
        p = df.placeholder(df.bool, shape=[])
        _, start = cf.switch(i32(1), p)   # dead unless p
        i, acc = _raw_counting_loop(start, i32(4))
    got = run_spec(g, [i, acc], {p: pred})
    assert got == ([live(4), live(1 + 4 + 9)] if pred else [DEAD, DEAD])


def test_loop_invariant_reaches_iterations_started_later():
    g = df.Graph()
    with g.as_default():
        inv = f64(0.5)
        acc = df.while_loop(lambda a: a < 4.0, lambda a: a + inv, [f64(0.0)],
                            parallel_iterations=1)
    assert run_spec(g, [acc]) == [live(4.0)]


# -- cond ------------------------------------------------------------------------------------------
@pytest.mark.parametrize("x,y", [(1.0, 2.0), (3.0, 2.0)])
def test_cond_runs_only_the_taken_branch(x, y):
    g = df.Graph()
    with g.as_default():
        px, py = df.placeholder(df.float64, shape=[]), df.placeholder(df.float64, shape=[])
        z = f64(10.0)
        r = df.cond(px < py, lambda: df.add(px, z), lambda: df.square(py))
    assert run_spec(g, [r], {px: x, py: y}) == [live(x + 10.0 if x < y else y * y)]


def test_cond_branch_tensors_are_dead_on_the_untaken_side():
    g = df.Graph()
    with g.as_default():
        p = df.placeholder(df.bool, shape=[])
        inside = {}

        def true_fn():
            inside["t"] = f64(1.0) + 1.0
            return inside["t"]

        def false_fn():
            inside["f"] = f64(5.0) * 2.0
            return inside["f"]
        r = df.cond(p, true_fn, false_fn)
    assert run_spec(g, [r, inside["t"], inside["f"]], {p: True}) == [live(2.0), live(2.0), DEAD]
    assert run_spec(g, [r, inside["t"], inside["f"]], {p: False}) == [live(10.0), DEAD,
                                                                      live(10.0)]


# -- while_loop ------------------------------------------------------------------------------------
@pytest.mark.parametrize("n", [0, 1, 7])
def test_while_loop_trip_counts(n):
    g = df.Graph()
    with g.as_default():
        limit = df.placeholder(df.int32, shape=[])
        i, total, prod = df.while_loop(
            lambda i, t, p: i < limit,
            lambda i, t, p: (i + 1, t + df.cast(i, df.float64), p * 2.0),
            (i32(0), f64(0.0), f64(1.0)), parallel_iterations=4)
    assert run_spec(g, [i, total, prod], {limit: n}) == [
        live(n), live(float(sum(range(n)))), live(2.0 ** n)]


def test_while_loop_maximum_iterations():
    g = df.Graph()
    with g.as_default():
        v = df.while_loop(lambda v: v < 100, lambda v: v + 3, [i32(0)], maximum_iterations=5)
    assert run_spec(g, [v]) == [live(15)]


@pytest.mark.parametrize("n", [0, 1, 4])
def test_nested_while_loops(n):
    """total = sum over i < n, j < i of (i * j + c), with c captured from the root."""
    g = df.Graph()
    with g.as_default():
        limit = df.placeholder(df.int32, shape=[])
        c = i32(3)

        def outer_body(i, total):
            _, inner = df.while_loop(lambda j, s: j < i, lambda j, s: (j + 1, s + i * j + c),
                                     (i32(0), total), parallel_iterations=2)
            return i + 1, inner
        _, total = df.while_loop(lambda i, t: i < limit, outer_body, (i32(0), i32(0)))
    expected = sum(i * j + 3 for i in range(n) for j in range(i))
    assert run_spec(g, [total], {limit: n}) == [live(expected)]


@pytest.mark.parametrize("pred", [True, False])
def test_while_loop_in_an_untaken_cond_branch_is_dead(pred):
    g = df.Graph()
    with g.as_default():
        p = df.placeholder(df.bool, shape=[])
        loops = []

        def true_fn():
            loops.append(df.while_loop(lambda v: v < 20, lambda v: v * 3, [i32(1)]))
            return loops[0] + 0
        r = df.cond(p, true_fn, lambda: i32(-1))
    assert run_spec(g, [r, loops[0]], {p: pred}) == (
        [live(27), live(27)] if pred else [live(-1), DEAD])


@pytest.mark.parametrize("pred", [True, False])
def test_while_loop_on_dead_loop_variables_is_dead(pred):
    g = df.Graph()
    with g.as_default():
        p = df.placeholder(df.bool, shape=[])
        _, start = cf.switch(f64(1.0), p)
        _, count = cf.switch(i32(0), p)
        i, v = df.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * 2.0), (count, start))
    assert run_spec(g, [i, v], {p: pred}) == ([live(3), live(8.0)] if pred else [DEAD, DEAD])


def test_loop_in_cond_in_loop():
    """For k < 4: if k is even, add sum(range(k)) (an inner loop); else subtract 1."""
    g = df.Graph()
    with g.as_default():
        def body(k, acc):
            def even():
                _, s = df.while_loop(lambda j, s: j < k, lambda j, s: (j + 1, s + j),
                                     (i32(0), i32(0)))
                return acc + s
            return k + 1, df.cond(df.equal(k % 2, 0), even, lambda: acc - 1)
        _, acc = df.while_loop(lambda k, a: k < 4, body, (i32(0), i32(100)))
    expected = 100
    for k in range(4):
        expected = expected + sum(range(k)) if k % 2 == 0 else expected - 1
    assert run_spec(g, [acc]) == [live(expected)]


def test_dead_predicate_in_the_last_iteration_makes_the_outputs_dead():
    """The predicate reads a dead capture: iteration 0 is the last and its Exits are dead."""
    g = df.Graph()
    with g.as_default():
        _, dead_limit = cf.switch(i32(5), df.constant(False))
        i = df.while_loop(lambda i: i < dead_limit, lambda i: i + 1, [i32(0)])
    assert run_spec(g, [i]) == [DEAD]


def test_a_loop_variable_that_dies_mid_loop_never_reaches_its_exit():
    """Its NextIteration stops, so its Exit fires (dead) only in iteration 0, which is not
    the last: no token ever reaches the fetch, which is an error, not a dead value."""
    g = df.Graph()
    with g.as_default():
        _, dead = cf.switch(i32(5), df.constant(False))
        i, v = df.while_loop(lambda i, v: i < 2, lambda i, v: (i + 1, v + dead),
                             (i32(0), i32(0)))
    assert run_spec(g, [i]) == [live(2)]
    with pytest.raises(spec.FetchNotComputed):
        spec.run(g, [v])


def test_two_tokens_in_one_slot_is_a_spec_error():
    """A raw loop whose Exit is live in every iteration sends the parent two tokens."""
    g = df.Graph()
    with g.as_default():
        e = cf.enter(i32(0), "bad")
        one = cf.enter(i32(1), "bad", is_constant=True)
        three = cf.enter(i32(3), "bad", is_constant=True)
        m, _ = cf.merge([e, e])
        _, t = cf.switch(m, cf.loop_cond(m < three))
        m.op.update_input(1, cf.next_iteration(t + one))
        out = cf.exit(m)
    with pytest.raises(spec.SpecError, match="two tokens"):
        spec.run(g, [out])


def test_control_edges_from_a_fed_placeholder_are_satisfied_by_the_feed():
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float64, shape=[])
        with g.control_dependencies([x.op]):
            y = df.identity(f64(2.0))
    assert run_spec(g, [y], {x: 1.0}) == [live(2.0)]


def test_docstring_examples():
    import doctest

    import dataflow.spec.interpreter  # noqa: F401
    failures, tried = doctest.testmod(spec.interpreter)
    assert tried >= 10 and failures == 0


def test_a_merge_with_two_live_inputs_is_reported_as_a_race():
    """Which input such a Merge forwards depends on timing, so the spec refuses the graph."""
    g = df.Graph()
    with g.as_default():
        value, _ = cf.merge([f64(1.0), f64(2.0)])
    with pytest.raises(spec.MergeRace):
        spec.run(g, [value])
