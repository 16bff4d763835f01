"""Stack ops: LIFO order, one stack per step and per loop instance, clear errors."""
import numpy as np
import pytest

import dataflow as df
from dataflow import ops

pytestmark = pytest.mark.usefixtures("graph")


def test_push_then_pop_in_reverse_order():
    h = ops.stack(df.float32)
    a = ops.stack_push(h, df.constant(1.0))
    with df.control_dependencies([a]):  # order the pushes: 1.0 then 2.0
        b = ops.stack_push(h, df.constant(2.0))
    with df.control_dependencies([b]):
        first = ops.stack_pop(h, df.float32)
    with df.control_dependencies([first]):
        second = ops.stack_pop(h, df.float32)
    with df.control_dependencies([second]):
        size = ops.stack_size(h)
    assert df.Session().run([first, second, size]) == [2.0, 1.0, 0]


def test_loop_pushes_then_pops_in_reverse():
    """Push i*i in a while loop, then pop all of them in a second loop: LIFO order."""
    n = 5
    h = ops.stack(df.int32)

    def push_body(i, total):
        pushed = ops.stack_push(h, i * i)
        with df.control_dependencies([pushed]):
            return i + 1, total + 1

    _, pushed_count = df.while_loop(lambda i, t: i < n, push_body, (0, 0),
                                    parallel_iterations=1)

    def pop_body(k, acc):
        v = ops.stack_pop(h, df.int32, shape=[])
        return k - 1, acc * 100 + v

    with df.control_dependencies([pushed_count]):
        start = df.identity(pushed_count)
    _, popped = df.while_loop(lambda k, a: k > 0, pop_body, (start, 0),
                              parallel_iterations=1)
    expected = 0
    for i in reversed(range(n)):
        expected = expected * 100 + i * i
    assert df.Session().run(popped) == expected


def test_each_step_gets_a_fresh_stack():
    h = ops.stack(df.float64)
    pushed = ops.stack_push(h, df.constant(3.0, df.float64))
    with df.control_dependencies([pushed]):
        size = ops.stack_size(h)
    sess = df.Session()
    assert sess.run(size) == 1
    assert sess.run(size) == 1  # not 2: the stack of the first run is gone


def test_pop_of_an_empty_stack_names_the_node():
    h = ops.stack(df.float32)
    popped = ops.stack_pop(h, df.float32, name="pop_empty")
    with pytest.raises(df.errors.InvalidArgumentError, match="empty") as info:
        df.Session().run(popped)
    assert info.value.op.name == "pop_empty"


def test_max_size_is_enforced():
    h = ops.stack(df.float32, max_size=1)
    a = ops.stack_push(h, df.constant(1.0))
    with df.control_dependencies([a]):
        b = ops.stack_push(h, df.constant(2.0), name="second_push")
    with pytest.raises(df.errors.InvalidArgumentError, match="full") as info:
        df.Session().run(b)
    assert info.value.op.name == "second_push"
    np.testing.assert_equal(df.Session().run(a), np.float32(1.0))
