"""The five control-flow primitives used directly (``df.ops.control_flow_ops``).

Switch/Merge graphs with dead branches and hand-built Enter/Merge/Switch/
NextIteration/Exit loops, closed with ``merge_op._update_input(1, next)`` as
the design note's pseudo-code does, and with the public ``update_input``.
"""
import numpy as np
import pytest

import dataflow as df
from dataflow.ops import control_flow_ops as cf

from .op_harness import NO_HANG

pytestmark = pytest.mark.usefixtures("graph")


# -- Switch and Merge ------------------------------------------------------------------------
def test_switch_forwards_to_the_output_selected_by_pred():
    data = df.constant(3.0)
    p = df.placeholder(df.bool, [])
    out_false, out_true = cf.switch(data, p)
    with df.Session() as sess:
        assert sess.run(out_true, {p: True}) == 3.0
        assert sess.run(out_false, {p: False}) == 3.0


@pytest.mark.parametrize("pred, dead_index", [(True, 0), (False, 1)])
def test_fetching_the_untaken_switch_output_raises(pred, dead_index):
    p = df.placeholder(df.bool, [])
    outputs = cf.switch(df.constant(3.0), p)
    with df.Session() as sess:
        with pytest.raises(df.errors.InvalidArgumentError) as info:
            sess.run(outputs[dead_index], {p: pred})
        assert isinstance(info.value, ValueError)
        assert info.value.op is outputs[dead_index].op


def test_ops_on_a_dead_tensor_are_dead():
    p = df.placeholder(df.bool, [])
    out_false, out_true = cf.switch(df.constant(3.0), p)
    downstream = df.square(out_false) + 1.0
    with df.Session() as sess:
        assert sess.run(downstream, {p: False}) == 10.0
        with pytest.raises(df.errors.InvalidArgumentError):
            sess.run(downstream, {p: True})


def test_dead_control_input_makes_an_op_dead():
    p = df.placeholder(df.bool, [])
    out_false, _ = cf.switch(df.constant(1), p)
    with df.control_dependencies([out_false.op]):
        gated = df.identity(df.constant(5))
    with df.Session() as sess:
        assert sess.run(gated, {p: True}) == 5  # Switch op itself ran: control edge is live
    # A control edge from an op that is itself dead (fed only by the dead output).
    dead_op = df.identity(out_false)
    with df.control_dependencies([dead_op.op]):
        gated_dead = df.identity(df.constant(5))
    with df.Session() as sess:
        assert sess.run(gated_dead, {p: False}) == 5
        with pytest.raises(df.errors.InvalidArgumentError):
            sess.run(gated_dead, {p: True})


def test_merge_picks_the_live_input_and_reports_its_index():
    p = df.placeholder(df.bool, [])
    out_false, out_true = cf.switch(df.constant(2.0), p)
    value, index = cf.merge([out_false * 10.0, out_true * 100.0])
    assert index.dtype == df.int32
    with df.Session() as sess:
        assert sess.run([value, index], {p: False}) == [20.0, 0]
        assert sess.run([value, index], {p: True}) == [200.0, 1]


def test_merge_of_only_dead_inputs_is_dead():
    p = df.placeholder(df.bool, [])
    out_false, _ = cf.switch(df.constant(1), p)
    other_false, _ = cf.switch(df.constant(2), p)
    value, _ = cf.merge([out_false, other_false])
    with df.Session() as sess:
        assert sess.run(value, {p: False}) in (1, 2)
        with pytest.raises(df.errors.InvalidArgumentError):
            sess.run(value, {p: True})


def test_merge_with_three_inputs_one_live():
    sel = df.placeholder(df.int32, [])
    f0, t0 = cf.switch(df.constant(0), df.equal(sel, 0))
    f1, t1 = cf.switch(df.constant(1), df.equal(sel, 1))
    f2, t2 = cf.switch(df.constant(2), df.equal(sel, 2))
    value, index = cf.merge([t0 + 10, t1 + 20, t2 + 30])
    with df.Session() as sess:
        for s in range(3):
            assert sess.run([value, index], {sel: s}) == [10 * (s + 1) + s, s]


def test_switch_pred_must_be_scalar_bool():
    with pytest.raises(TypeError):
        cf.switch(df.constant(1.0), df.constant(1))
    with pytest.raises(ValueError):
        cf.switch(df.constant(1.0), df.constant([True, False]))


def test_merge_inputs_must_share_a_dtype():
    with pytest.raises(TypeError):
        cf.merge([df.constant(1), df.constant(1.0)])


def test_control_trigger_is_never_dead():
    p = df.placeholder(df.bool, [])
    out_false, _ = cf.switch(df.constant(1), p)
    dead_op = df.identity(out_false).op
    with df.control_dependencies([dead_op]):
        trigger = df.control_trigger()
    with df.control_dependencies([trigger]):
        after = df.identity(df.constant(7))
    with df.Session() as sess:
        assert sess.run(after, {p: True}) == 7   # dead_op is dead, the trigger is not
        assert sess.run(after, {p: False}) == 7


# -- hand-built loops ------------------------------------------------------------------------
def build_raw_counting_loop(start, limit, step, close):
    """The design note's while-loop recipe with the primitives; ``close(merge_op, nxt)``
    closes the back edge. Returns the Exit tensor."""
    frame = "raw_loop"
    enter_i = cf.enter(start, frame)
    enter_limit = cf.enter(limit, frame, is_constant=True)
    enter_step = cf.enter(step, frame, is_constant=True)
    merged, _ = cf.merge([enter_i, enter_i])
    pred = cf.loop_cond(df.less(merged, enter_limit))
    out_false, out_true = cf.switch(merged, pred)
    body = df.identity(out_true) + enter_step
    nxt = cf.next_iteration(body)
    close(merged.op, nxt)
    return cf.exit(out_false)


@pytest.mark.parametrize("close", [
    lambda merge_op, nxt: merge_op._update_input(1, nxt),
    lambda merge_op, nxt: merge_op.update_input(1, nxt),
], ids=["_update_input", "update_input"])
def test_raw_loop(close):
    start = df.placeholder(df.int32, [])
    result = build_raw_counting_loop(start, df.constant(10), df.constant(3), close)
    with df.Session() as sess:
        for s in (0, 1, 9, 10, 25):
            expected = s
            while expected < 10:
                expected += 3
            assert sess.run(result, {start: s}, options=NO_HANG) == expected


def test_raw_loop_with_two_variables_and_parallel_iterations_one():
    frame = "raw_pair"

    def invariant(value):
        # Constants of the body must enter the frame too: a Const built outside any
        # loop context lives in the root frame.
        return cf.enter(df.constant(value), frame, is_constant=True, parallel_iterations=1)

    e_i = cf.enter(df.constant(0), frame, parallel_iterations=1)
    e_acc = cf.enter(df.constant(1.0), frame, parallel_iterations=1)
    m_i, _ = cf.merge([e_i, e_i])
    m_acc, _ = cf.merge([e_acc, e_acc])
    pred = cf.loop_cond(m_i < invariant(6))
    i_false, i_true = cf.switch(m_i, pred)
    acc_false, acc_true = cf.switch(m_acc, pred)
    i_body = df.identity(i_true)
    acc_body = df.identity(acc_true)
    m_i.op._update_input(1, cf.next_iteration(i_body + invariant(1)))
    m_acc.op._update_input(1, cf.next_iteration(
        acc_body * invariant(1.5) + df.cast(i_body, df.float32)))
    i_out, acc_out = cf.exit(i_false), cf.exit(acc_false)
    expected = 1.0
    for i in range(6):
        expected = expected * 1.5 + i
    with df.Session() as sess:
        i_val, acc_val = sess.run([i_out, acc_out], options=NO_HANG)
    assert i_val == 6
    assert acc_val == pytest.approx(expected, rel=1e-6)


def test_raw_loop_zero_iterations():
    result = build_raw_counting_loop(df.constant(50), df.constant(10), df.constant(1),
                                     lambda m, nxt: m._update_input(1, nxt))
    with df.Session() as sess:
        assert sess.run(result, options=NO_HANG) == 50


def test_raw_loop_on_vectors():
    frame = "vec_loop"
    e_v = cf.enter(df.constant([1.0, 2.0]), frame)
    e_k = cf.enter(df.constant(0), frame)
    two = cf.enter(df.constant(2.0), frame, is_constant=True)
    one = cf.enter(df.constant(1), frame, is_constant=True)
    m_v, _ = cf.merge([e_v, e_v])
    m_k, _ = cf.merge([e_k, e_k])
    pred = cf.loop_cond(m_k < cf.enter(df.constant(3), frame, is_constant=True))
    v_false, v_true = cf.switch(m_v, pred)
    k_false, k_true = cf.switch(m_k, pred)
    m_v.op.update_input(1, cf.next_iteration(df.identity(v_true) * two))
    m_k.op.update_input(1, cf.next_iteration(df.identity(k_true) + one))
    with df.Session() as sess:
        np.testing.assert_array_equal(sess.run(cf.exit(v_false), options=NO_HANG), [8.0, 16.0])


def test_raw_loop_mixing_root_frame_tensor_into_body_is_rejected_at_run_time():
    # As in TF's executor, a node may not take inputs from two frames: a Const built
    # outside any context is in the root frame, the loop body is not.
    frame = "mixed"
    e_k = cf.enter(df.constant(0), frame)
    m_k, _ = cf.merge([e_k, e_k])
    pred = cf.loop_cond(m_k < cf.enter(df.constant(3), frame, is_constant=True))
    k_false, k_true = cf.switch(m_k, pred)
    m_k.op.update_input(1, cf.next_iteration(df.identity(k_true) + df.constant(1)))
    result = cf.exit(k_false)
    with df.Session() as sess:
        with pytest.raises(df.errors.InvalidArgumentError):
            sess.run(result, options=NO_HANG)


def test_update_input_checks_dtype_and_index():
    m, _ = cf.merge([df.constant(1), df.constant(2)])
    with pytest.raises(TypeError):
        m.op.update_input(1, df.constant(1.0))
    with pytest.raises(IndexError):
        m.op.update_input(5, df.constant(1))


def test_enter_requires_a_frame_name():
    with pytest.raises(ValueError):
        cf.enter(df.constant(1), "")
