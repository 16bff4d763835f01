"""Shared pytest fixtures, and the one seed every random draw of the suite comes from.

A run uses the seed in ``DATAFLOW_TEST_SEED`` or, when it is unset, a fresh one, and
prints it (in the header, in the summary, and under every failure), so a failing run
replays exactly::

    DATAFLOW_TEST_SEED=1234 python -m pytest tests/test_x.py::test_y

The seed drives Hypothesis (as ``--hypothesis-seed``, which also keeps its example
database out of the way; tests whose settings say ``derandomize=True`` keep their fixed
examples) and NumPy's and Python's global generators, re-seeded before each test from
the seed and the test's id, so a test draws the same values whether it runs alone or in
the whole suite. ``HYPOTHESIS_PROFILE=ci`` runs every Hypothesis test derandomized
(each test's examples fixed by its name), as a CI may prefer.
"""
import os
import random
import zlib

import numpy as np
import pytest
from hypothesis import settings

import dataflow as df

SEED_VARIABLE = "DATAFLOW_TEST_SEED"

# Loops are compiled by default (ConfigProto.compile_loops, dataflow/loopc), a frame's first
# run interpreted while a thread compiles it. The suite's own loops run interpreted unless
# a test says otherwise (tests/test_loop_compiler.py does), so its time does not depend on
# hundreds of background Numba compiles; DATAFLOW_COMPILE_LOOPS=1 runs it with the default.
os.environ.setdefault("DATAFLOW_COMPILE_LOOPS", "0")

settings.register_profile("ci", derandomize=True)
if os.environ.get("HYPOTHESIS_PROFILE"):
    settings.load_profile(os.environ["HYPOTHESIS_PROFILE"])


def _session_seed() -> int:
    """``DATAFLOW_TEST_SEED`` when set, else a fresh seed (printed, so it can be replayed)."""
    value = os.environ.get(SEED_VARIABLE)
    if value is not None:
        try:
            return int(value)
        except ValueError:
            raise pytest.UsageError(f"{SEED_VARIABLE}={value!r} is not an integer") from None
    return int.from_bytes(os.urandom(4), "little")


SEED = _session_seed()


def test_seed(nodeid: str) -> int:
    """The seed of one test: the session seed mixed with the test's id (order-independent)."""
    return zlib.crc32(nodeid.encode(), SEED) & 0xFFFFFFFF


test_seed.__test__ = False  # a helper, not a test


def _replay_line() -> str:
    return f"dataflow test seed {SEED} (replay: {SEED_VARIABLE}={SEED})"


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    # Runs before Hypothesis's own pytest_configure, which reads --hypothesis-seed.
    if getattr(config.option, "hypothesis_seed", None) is None:
        config.option.hypothesis_seed = str(SEED)


def pytest_report_header(config):
    return _replay_line()


@pytest.fixture(autouse=True)
def _seed_global_generators(request):
    """NumPy's and Python's global generators start each test from its own seed."""
    seed = test_seed(request.node.nodeid)
    np.random.seed(seed)
    random.seed(seed)


@pytest.fixture
def rng(request):
    """A NumPy generator seeded from the test's seed."""
    return np.random.default_rng(test_seed(request.node.nodeid))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    if report.failed:
        report.sections.append(("replay", f"{SEED_VARIABLE}={SEED} python -m pytest "
                                          f"'{item.nodeid}'"))


def pytest_terminal_summary(terminalreporter):
    terminalreporter.write_line(_replay_line())


@pytest.fixture
def graph():
    """A fresh graph installed as the default graph for the test, so op names and
    counts are predictable and tests do not see each other's ops."""
    with df.Graph().as_default() as g:
        yield g
