"""The generated CUDA kernels of fused elementwise groups, under the simulator: fused
GPU results equal the unfused GPU run and the CPU run, on random expressions."""
import numpy as np
from hypothesis import given, settings, strategies as st

import dataflow as df
from dataflow.runtime.fusion import FUSED_OP_TYPE
from dataflow.kernels.cuda.fused import kernel_source

UNARY = {"neg": df.negative, "square": df.square, "tanh": df.tanh, "exp": df.exp,
         "sigmoid": df.sigmoid, "abs": df.abs, "relu": df.nn.relu}
BINARY = {"add": df.add, "sub": df.subtract, "mul": df.multiply, "max": df.maximum,
          "min": df.minimum, "sqdiff": df.squared_difference}


@st.composite
def expressions(draw):
    """A random expression over 3 inputs as a list of steps (kind, fn name, operands)."""
    steps = []
    for i in range(draw(st.integers(2, 6))):
        pool = list(range(-3, i))  # negative: an input; else an earlier step
        if draw(st.booleans()):
            steps.append(("u", draw(st.sampled_from(sorted(UNARY))), draw(st.sampled_from(pool))))
        else:
            other = draw(st.one_of(st.sampled_from(pool), st.floats(-2, 2, width=32)))
            steps.append(("b", draw(st.sampled_from(sorted(BINARY))),
                          draw(st.sampled_from(pool)), other))
    return steps


def _build(steps, inputs):
    values = []

    def get(ref):
        if isinstance(ref, float):
            return df.constant(np.float32(ref))
        return inputs[ref + 3] if ref < 0 else values[ref]
    for step in steps:
        if step[0] == "u":
            values.append(UNARY[step[1]](get(step[2])))
        else:
            values.append(BINARY[step[1]](get(step[2]), get(step[3])))
    return values[-1]


def _run(steps, feeds, device, fuse):
    g = df.Graph()
    with g.as_default():
        xs = [df.placeholder(df.float32, np.shape(v)) for v in feeds]
        with df.device(device):
            y = _build(steps, xs)
        config = df.ConfigProto(fuse_elementwise=fuse)
        with df.Session(config=config) as sess:
            value = sess.run(y, dict(zip(xs, feeds)))
            plan = sess._plans.get(sess.graph, [y], [], xs)
    fused = sum(1 for op in plan.ops if getattr(op, "type", None) == FUSED_OP_TYPE) + \
        sum(1 for op in plan.ops if op in getattr(plan.fusion, "exprs", {}))
    return value, fused


@settings(max_examples=15, deadline=None)
@given(steps=expressions(), seed=st.integers(0, 99),
       shapes=st.sampled_from([((3, 4), (3, 4), (3, 4)), ((3, 4), (4,), (3, 1)),
                               ((2, 3), (), (2, 3))]))
def test_fused_matches_unfused_and_cpu(steps, seed, shapes):
    rng = np.random.default_rng(seed)
    feeds = [rng.standard_normal(s).astype(np.float32) for s in shapes]
    fused, n_fused = _run(steps, feeds, "/gpu:0", True)
    unfused, _ = _run(steps, feeds, "/gpu:0", False)
    cpu, _ = _run(steps, feeds, "/cpu:0", False)
    assert type(fused) is type(cpu)
    np.testing.assert_allclose(fused, unfused, rtol=2e-6, atol=1e-6)
    np.testing.assert_allclose(fused, cpu, rtol=2e-5, atol=1e-5)


def test_a_chain_becomes_one_gpu_kernel():
    feeds = [np.linspace(-2, 2, 12, dtype=np.float32).reshape(3, 4)] * 3
    steps = [("b", "mul", -3, -2), ("b", "add", 0, -1), ("u", "tanh", 1),
             ("b", "mul", 2, 0.5), ("b", "add", 3, -3)]   # tanh(a*b + c) * 0.5 + a
    value, n_fused = _run(steps, feeds, "/gpu:0", True)
    a = feeds[0]
    np.testing.assert_allclose(value, np.tanh(a * a + a) * 0.5 + a, rtol=1e-6, atol=1e-6)
    assert n_fused == 1


def test_kernel_source_names_each_function_and_literal_once():
    program = (("Mul", (("input", 0), ("const", "0x1.0p-1"))),
               ("Tanh", (("value", 0),)),
               ("Mul", (("value", 1), ("const", "0x1.0p-1"))))
    src = kernel_source(program, "float32", 1)
    assert src.functions == ("Mul", "Tanh") and src.constants == ("0x1.0p-1",)
    assert "v2 = F0(v1, C0)" in src.device_function
    assert "fused_expr(x0[o0])" in src.broadcast_kernel
