"""pytest-benchmark suite for the executor (run: ``python -m pytest benchmarks``).

Correctness of each workload is asserted against its baseline; the timing is
pytest-benchmark's. Figures for RESULTS.md come from ``python -m benchmarks.executor_table``.
"""
import numpy as np
import pytest

from . import workloads

CASES = {
    "scalar_loop": lambda: workloads.make_scalar_loop(100_000),
    "rnn_loop": lambda: workloads.make_rnn_loop(),
    "cond_in_while": lambda: workloads.make_cond_in_while(10_000),
    "small_run": workloads.make_small_run,
}


@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("side", ["dataflow", "baseline"])
def test_executor_workload(benchmark, name, side):
    ours, baseline, _ = CASES[name]()
    expected = baseline()
    fn = ours if side == "dataflow" else baseline
    result = benchmark(fn)
    np.testing.assert_allclose(result, expected, rtol=1e-5, atol=1e-5)
