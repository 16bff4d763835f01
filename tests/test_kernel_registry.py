"""The kernel registry's lookups: reference (NumPy) kernels, and device fallbacks
resolved at lookup time (dataflow/kernels/registry.py, dataflow/kernels/cuda/fallback.py).
These run without a GPU: the GPU fallback only wraps the CPU kernel with host copies."""
import numpy as np

import dataflow as df
from dataflow import spec
from dataflow.framework.op_registry import register_op
from dataflow.kernels import registry
from dataflow.kernels.cuda.fallback import fallback_op_types, host_round_trip
from dataflow.kernels.numba_cpu import _dispatch
from dataflow.ops import control_flow_ops, shape_fns


def _same_as_input(op):
    # A shape function of this test module (not dataflow's), so the test-only op types
    # are not taken for the runtime's own ops (see test_gradients_ops).
    return shape_fns.unchanged(op)


# Registered here, after dataflow.kernels.cuda was imported (by import dataflow).
register_op("RegistryTestTriple")(_same_as_input)
registry.register_kernel("RegistryTestTriple")(lambda ctx: lambda x: x * 3)
register_op("RegistryTestNoKernel")(_same_as_input)


def _node(op_type, x):
    return df.get_default_graph().create_op(op_type, [x]).outputs[0]


def test_an_op_registered_after_the_gpu_kernels_gets_the_host_fallback(graph):
    y = _node("RegistryTestTriple", df.placeholder(df.float32, [3]))
    factory = registry.find_kernel(y.op, "GPU")
    assert factory is host_round_trip
    fn = factory(registry.KernelContext(op=y.op, device_type="GPU"))
    np.testing.assert_array_equal(fn(np.arange(3, dtype=np.float32)), [0.0, 3.0, 6.0])
    assert "RegistryTestTriple" in fallback_op_types()


def test_no_fallback_without_a_cpu_kernel_or_for_control_flow(graph):
    x = df.placeholder(df.float32, [3])
    assert registry.find_kernel(_node("RegistryTestNoKernel", x).op, "GPU") is None
    merged = control_flow_ops.merge([x, x])[0]
    assert registry.find_kernel(merged.op, "GPU") is None
    assert "RegistryTestNoKernel" not in fallback_op_types()


def test_a_gpu_kernel_is_preferred_and_other_dtypes_fall_back(graph):
    f32 = df.negative(df.placeholder(df.float32, [3]))
    i8 = df.negative(df.placeholder(df.int8, [3]))     # no CUDA kernel for int8
    assert registry.find_kernel(f32.op, "GPU").__module__ == "dataflow.kernels.cuda.elementwise"
    assert registry.find_kernel(i8.op, "GPU") is host_round_trip


def test_reference_lookup_skips_compiled_kernels(graph):
    y = df.tanh(df.placeholder(df.float32, [None]))
    ctx = registry.KernelContext(op=y.op)
    assert registry.reference_kernel(y.op)(ctx) is np.tanh
    assert registry.find_kernel(y.op, "CPU", reference=True)(ctx) is np.tanh
    compiled = registry.find_kernel(y.op, "CPU")
    assert getattr(compiled, "numba_cpu", False) == _dispatch.ENABLED


def test_the_spec_interpreter_runs_the_reference_kernels():
    # Above its size threshold the compiled tanh uses kernels.approx (a few ulps from
    # np.tanh); the spec must agree with np.tanh bit for bit, so it never picks it.
    x_value = np.random.default_rng(0).uniform(-5, 5, 50_000).astype(np.float32)
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [None])
        y = df.tanh(x)
    [(got, dead)] = spec.run(g, [y], {x: x_value})
    assert not dead
    np.testing.assert_array_equal(got, np.tanh(x_value))
    if _dispatch.ENABLED:
        compiled = registry.find_kernel(y.op, "CPU")(registry.KernelContext(op=y.op))
        assert not np.array_equal(compiled(x_value), np.tanh(x_value))
