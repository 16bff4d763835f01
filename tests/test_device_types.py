"""The one device-type registry (``dataflow.kernels.registry.register_device_type``):
how many devices of a type a session gets, and host copies for a type with memory
of its own (CPU kernels and fetches read host values)."""
import numpy as np
import pytest

import dataflow as df
from dataflow.kernels.registry import (declared_device_types, device_memory,
                                       device_type_info, register_device_type,
                                       register_kernel)
from dataflow.kernels.resources import VariableCell, is_process_local
from dataflow.runtime.devices import available_device_count, known_device_types


class OnDevice:
    """A value held in the memory of the test device MEMDEV (not a NumPy array)."""

    def __init__(self, host):
        self.host = host


def _to_host(value):
    return value.host if isinstance(value, OnDevice) else value


def _to_device(value):
    return OnDevice(np.array(value))


register_device_type("MEMDEV", to_host=_to_host, to_device=_to_device)
register_device_type("COUNTEDDEV", lambda: 2, "no COUNTEDDEV in this test machine")
register_device_type("SIMDEV")


@register_kernel("Neg", device="MEMDEV")
def _neg_on_memdev(ctx):
    return lambda x: OnDevice(-np.asarray(_to_host(x)))


def test_declarations_are_kept_by_type():
    assert {"MEMDEV", "COUNTEDDEV", "SIMDEV"} <= declared_device_types()
    assert device_memory("memdev").to_host is _to_host
    assert device_memory("SIMDEV") is None and device_memory("CPU") is None
    assert device_type_info("COUNTEDDEV").unavailable_hint.startswith("no COUNTEDDEV")
    # Only a type with a count is counted on the machine; the others are simulated.
    assert "COUNTEDDEV" in known_device_types() and "SIMDEV" not in known_device_types()
    assert available_device_count("COUNTEDDEV") == 2
    assert available_device_count("SIMDEV") == 0


def test_counted_type_gets_at_most_what_the_machine_has():
    with df.Graph().as_default() as g:
        with df.device("/device:COUNTEDDEV:2"):
            y = df.constant(1.0) + 1.0
        sess = df.Session(graph=g, config=df.ConfigProto(device_count={"COUNTEDDEV": 5}))
    assert sess.list_devices() == sorted(["/device:CPU:0", "/device:COUNTEDDEV:0",
                                          "/device:COUNTEDDEV:1"])
    with pytest.raises(df.errors.InvalidArgumentError, match="COUNTEDDEV:2"):
        sess.run(y)


def test_simulated_type_gets_what_device_count_asks_for():
    sess = df.Session(graph=df.Graph(), config=df.ConfigProto(device_count={"SIMDEV": 3}))
    assert sess.list_devices() == sorted(["/device:CPU:0"] + [f"/device:SIMDEV:{i}"
                                                              for i in range(3)])


def test_cpu_kernels_and_fetches_read_host_copies_of_device_values():
    with df.Graph().as_default() as g:
        x = df.placeholder(df.float64, [3])
        with df.device("/device:MEMDEV:0"):
            y = df.negative(x)                 # an OnDevice value
        z = y * 2.0                            # a CPU kernel reads it
        config = df.ConfigProto(device_count={"MEMDEV": 1}, fuse_elementwise=False)
        with df.Session(graph=g, config=config) as sess:
            yv, zv = sess.run([y, z], {x: [1.0, -2.0, 3.0]})
    assert type(yv) is np.ndarray and type(zv) is np.ndarray
    np.testing.assert_array_equal(yv, [-1.0, 2.0, -3.0])
    np.testing.assert_array_equal(zv, [-2.0, 4.0, -6.0])


def test_variable_cells_are_process_local_resources():
    cell = VariableCell("v", df.float32, df.TensorShape([2]))
    assert is_process_local(cell)
    assert not is_process_local(np.zeros(2))
    with pytest.raises(df.errors.FailedPreconditionError, match="uninitialized value v"):
        cell.read()
    cell.store(np.ones(2, np.float32))
    assert not cell.read().flags.writeable
