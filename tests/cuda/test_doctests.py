"""The docstring examples of the CUDA kernels (``dataflow.kernels.cuda``), which place
ops on ``/gpu:0``, run under the simulator (the main suite leaves them out)."""
import pytest

import dataflow.kernels.cuda as cuda_kernels

from ..doctest_runner import count_examples, module_names, run_module_doctests

# The PTX compile check's command line: no examples, and it refuses the simulator.
MODULES = module_names(cuda_kernels, skip=["dataflow.kernels.cuda.compile_check"])


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    attempted, failures = run_module_doctests(name)
    assert not failures, f"{name}: broken docstring examples\n{failures}"


def test_the_examples_cover_the_kernel_families():
    covered = [m for m in MODULES if count_examples(m) > 0]
    for family in ("elementwise", "matmul", "reduction", "nn", "array", "state", "fused",
                   "device.rows", "device.matmul"):
        assert f"dataflow.kernels.cuda.{family}" in covered, family
