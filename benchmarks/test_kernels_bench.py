"""pytest-benchmark suite for the compiled kernels (run: ``python -m pytest benchmarks``).

Each workload runs through a Session three ways (compiled kernels with fusion, the
NumPy reference kernels without fusion, and plain NumPy) and is checked against the
NumPy result; the table for RESULTS.md comes from ``python -m benchmarks.compare``.
"""
import numpy as np
import pytest

import dataflow as df

from . import frameworks, workloads
from .compare import BEFORE, _chain_graph, _matmul_graph, _session_fn

N = 1_000_000


def _softmax_graph(rows, cols):
    def build():
        x = df.placeholder(df.float32, [rows, cols])
        return (x,), df.nn.softmax(x)
    return build


def _sum_graph(n):
    def build():
        x = df.placeholder(df.float32, [n // 100, 100])
        return (x,), df.reduce_sum(x, axis=0)
    return build


def _numpy_softmax(x):
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


CASES = {  # name -> (graph builder, inputs, NumPy function, rtol)
    "chain": (_chain_graph(N), frameworks.chain_inputs(N),
              lambda a, b, c: np.tanh(a * b + c) * np.float32(0.5) + a, 1e-5),
    "matmul_1024": (_matmul_graph(1024), frameworks.matmul_inputs(1024), np.matmul, 1e-4),
    "softmax": (_softmax_graph(N // 100, 100),
                (np.random.default_rng(0).standard_normal((N // 100, 100), np.float32),),
                _numpy_softmax, 1e-5),
    "sum_axis0": (_sum_graph(N),
                  (np.random.default_rng(1).standard_normal((N // 100, 100), np.float32),),
                  lambda x: x.sum(axis=0), 1e-4),
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("side", ["compiled", "reference", "numpy"])
def test_kernel_workload(benchmark, name, side):
    build, inputs, numpy_fn, rtol = CASES[name]
    expected = numpy_fn(*inputs)
    if side == "numpy":
        fn = lambda: numpy_fn(*inputs)  # noqa: E731
    else:
        config = df.ConfigProto(**BEFORE) if side == "reference" else None
        fn = _session_fn(build, inputs, config)
    np.testing.assert_allclose(benchmark(fn), expected, rtol=rtol, atol=1e-4)


@pytest.mark.parametrize("side", ["compiled", "reference", "numpy"])
def test_mlp_adam_step(benchmark, side):
    config = df.ConfigProto(**BEFORE) if side == "reference" else None
    ours, numpy_step, _ = workloads.make_mlp_adam_step(config=config)
    benchmark(numpy_step if side == "numpy" else ours)
