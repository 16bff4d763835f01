"""Variable handles in the run plan: a ``VarHandleOp`` (its kernel is registered
``constant``) is folded into its consumers like a ``Const``, so it never runs as a node;
every result equals the unfolded plan's (``fold_constants=False``), across runs, in
conds and in loops."""
import numpy as np
import pytest

import dataflow as df
from dataflow.kernels.registry import kernel_is_constant


def _fired_types(sess, fetches, feed=None):
    """The op types of the nodes a traced run of ``fetches`` fired, and its result."""
    options = df.RunOptions(trace_level=df.RunOptions.FULL_TRACE)
    meta = df.RunMetadata()
    out = sess.run(fetches, feed, options=options, run_metadata=meta)
    types = {n.timeline_label.split(" = ")[1].split("(")[0]
             for d in meta.step_stats.dev_stats for n in d.node_stats}
    return types, out


def _program():
    """A counter, a weight read in a cond and updated in a loop."""
    v = df.Variable(np.arange(4, dtype=np.float32), name="v")
    count = df.Variable(0, name="count")
    p = df.placeholder(df.bool, [])
    read = df.cond(p, lambda: v.read_value() * 2.0, lambda: df.zeros([4]))
    _, total = df.while_loop(lambda i, s: i < 3,
                             lambda i, s: (i + 1, s + df.reduce_sum(v.read_value())),
                             (0, 0.0))
    with df.control_dependencies([read, total]):
        step = df.group(v.assign_add(df.ones([4])), count.assign_add(1))
    return p, [read, total], step, count


def test_handle_kernels_are_constant():
    with df.Graph().as_default():
        v = df.Variable(1.0)
        assert kernel_is_constant(v.handle.op, "CPU")
        assert not kernel_is_constant(v.read_value().op, "CPU")


@pytest.mark.parametrize("taken", [True, False])
def test_folded_handles_never_run_and_change_no_result(taken):
    results, fired = {}, {}
    for fold in (True, False):
        with df.Graph().as_default():
            p, fetches, step, count = _program()
            config = df.ConfigProto(fold_constants=fold)
            with df.Session(config=config) as sess:
                sess.run(df.global_variables_initializer())
                runs = []
                for _ in range(3):
                    types, out = _fired_types(sess, fetches + [step], {p: taken})
                    runs.append(out[:2])
                runs.append(sess.run(count))
                results[fold], fired[fold] = runs, types
    assert "VarHandleOp" not in fired[True] and "VarHandleOp" in fired[False]
    assert "ReadVariableOp" in fired[True]
    for (read, total), (read0, total0) in zip(results[True][:3], results[False][:3]):
        np.testing.assert_array_equal(read, read0)
        assert total == total0
    assert results[True][-1] == results[False][-1] == 3
    # The third run reads v = [2, 3, 4, 5]: doubled when taken, summed 3 times in the loop.
    read, total = results[True][2]
    np.testing.assert_array_equal(read, [4, 6, 8, 10] if taken else [0, 0, 0, 0])
    assert total == 3 * 14.0


def test_a_fetched_handle_still_runs():
    with df.Graph().as_default():
        v = df.Variable(2.0)
        with df.Session() as sess:
            sess.run(v.initializer)
            types, _ = _fired_types(sess, [v.handle, v.read_value()])
    assert "VarHandleOp" in types
