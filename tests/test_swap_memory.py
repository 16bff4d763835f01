"""swap_memory: stack entries of tensors on a device with its own memory go to host
memory after the push and come back before the pop; on the CPU nothing changes.

A test device type, TESTACCEL, declares its memory as separate (copies counted) and
runs the stack kernels; every other op falls back to the CPU (soft placement), whose
kernels copy TESTACCEL values to the host before reading them.
"""
import numpy as np
import pytest

import dataflow as df
from dataflow.kernels.numpy_cpu import data_flow
from dataflow.kernels.registry import register_device_type, register_kernel

COPIES = {"to_host": 0, "to_device": 0}


def _to_host(value):
    COPIES["to_host"] += 1
    return np.array(value, copy=True)


def _to_device(value):
    COPIES["to_device"] += 1
    return np.array(value, copy=True)


register_device_type("TESTACCEL", to_host=_to_host, to_device=_to_device)
register_kernel("StackPush", device="TESTACCEL")(data_flow.push_kernel)
register_kernel("StackPop", device="TESTACCEL")(data_flow.pop_kernel)

CONFIG = df.ConfigProto(device_count={"TESTACCEL": 1}, allow_soft_placement=True)


def _loop_gradient(swap_memory, device, steps=6):
    with df.Graph().as_default():
        x = df.placeholder(df.float64, [3])
        w = df.placeholder(df.float64, [3])
        with df.device(device):
            _, y = df.while_loop(lambda i, v: i < steps,
                                 lambda i, v: (i + 1, df.sin(v) * w),
                                 (0, x), swap_memory=swap_memory)
        grads = df.gradients(df.reduce_sum(y), [x, w])
        with df.Session(config=CONFIG) as sess:
            return sess.run(grads, {x: [0.1, 0.5, -0.3], w: [1.1, 0.7, -0.9]})


@pytest.fixture(autouse=True)
def reset_copies():
    COPIES.update(to_host=0, to_device=0)


def test_swapped_entries_are_copied_out_and_back_once_each():
    # CPU kernels reading values of TESTACCEL ops copy them to the host as well (the
    # device declares memory of its own); those reads are the same with and without
    # swap_memory, so the difference is what the stacks swapped.
    steps = 6
    swapped = _loop_gradient(True, "/device:TESTACCEL:0", steps)
    with_swap = dict(COPIES)
    COPIES.update(to_host=0, to_device=0)
    plain = _loop_gradient(False, "/device:TESTACCEL:0", steps)
    assert COPIES["to_device"] == 0
    swapped_out = with_swap["to_host"] - COPIES["to_host"]
    assert swapped_out >= steps and swapped_out % steps == 0
    assert with_swap["to_device"] == swapped_out
    for a, b in zip(swapped, plain):
        np.testing.assert_array_equal(a, b)


def test_without_swap_memory_nothing_comes_back_to_the_device():
    _loop_gradient(False, "/device:TESTACCEL:0")
    assert COPIES["to_device"] == 0


def test_swap_memory_on_the_cpu_changes_nothing():
    swapped = _loop_gradient(True, "/cpu:0")
    assert COPIES == {"to_host": 0, "to_device": 0}
    plain = _loop_gradient(False, "/cpu:0")
    for a, b in zip(swapped, plain):
        np.testing.assert_array_equal(a, b)
