"""Every ``>>>`` example in dataflow's docstrings runs and prints what it shows.

A module is left out only where its examples need something this run cannot give; each
exclusion says why and where those examples run instead.
"""
import pytest

import dataflow

from .doctest_runner import module_names, run_module_doctests

EXCLUDED = {
    # Importing it runs the command line (argparse on this process's argv).
    "dataflow.__main__": "runs the CLI when imported; no examples",
    # /gpu:0 exists only with a GPU or Numba's CUDA simulator, which must be switched on
    # before numba is imported: tests/cuda/test_doctests.py runs these under it.
    "dataflow.kernels.cuda": "needs /gpu:0 (run under the simulator by tests/cuda)",
}

MODULES = module_names(dataflow, skip=EXCLUDED)
# The shared test helpers document themselves with examples too.
HELPERS = ["tests.op_harness"]


def test_the_walk_finds_the_packages_and_skips_only_the_exclusions():
    assert {"dataflow.control_flow.cond", "dataflow.control_flow.while_loop",
            "dataflow.spec.interpreter", "dataflow.kernels.registry",
            "dataflow.partition.control_loop"} <= set(MODULES)
    assert not [m for m in MODULES if m.startswith(tuple(EXCLUDED))]


@pytest.mark.parametrize("name", MODULES + HELPERS)
def test_docstring_examples(name):
    attempted, failures = run_module_doctests(name)
    assert not failures, f"{name}: broken docstring examples\n{failures}"
