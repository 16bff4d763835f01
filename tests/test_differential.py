"""Differential tests: the fast executor against the reference interpreter ``spec``.

Each generated program (see ``tests/graph_gen.py``) is run once by
``Session.run_tokens`` and by ``spec.run`` under 1-3 random firing orders;
fetched values (exactly, dtype included) and deadness must agree. A run that
leaves a fetch without any token must fail in both. In all, 550 programs run
per test session.
"""
from __future__ import annotations

import numpy as np
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

import dataflow as df
import spec
from tests.graph_gen import Program, programs, quiet_numpy

SETTINGS = dict(deadline=None, derandomize=False,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])

NOT_COMPUTED = "not computed"


def executor_tokens(graph, fetches, feeds, fold_constants=True, options=None):
    """``run_tokens`` of a fresh Session, or NOT_COMPUTED if a fetch got no token."""
    config = df.ConfigProto(fold_constants=fold_constants)
    with df.Session(graph=graph, config=config) as sess:
        try:
            return sess.run_tokens(fetches, feeds, options=options)
        except df.errors.InternalError as e:
            assert "without computing fetch" in str(e), e
            return NOT_COMPUTED


def spec_tokens(graph, fetches, feeds, seed):
    try:
        return spec.run(graph, fetches, feeds, seed=seed)
    except spec.FetchNotComputed:
        return NOT_COMPUTED


def assert_same_tokens(expected, actual, fetches):
    """Same deadness, same dtype, bit-identical values (NaN equal to NaN)."""
    if expected == NOT_COMPUTED or actual == NOT_COMPUTED:
        assert expected == actual, (expected, actual)
        return
    assert len(expected) == len(actual)
    for t, (ev, edead), (av, adead) in zip(fetches, expected, actual):
        assert edead == adead, f"{t.name}: dead={edead} in the spec, {adead} in the executor"
        if edead:
            assert ev is None and av is None
            continue
        e, a = np.asarray(ev), np.asarray(av)
        assert e.dtype == a.dtype, f"{t.name}: dtype {e.dtype} vs {a.dtype}"
        np.testing.assert_array_equal(a, e, err_msg=t.name, strict=True)


def check_program(program: Program, seeds):
    """Run ``program`` in both runtimes and compare; returns the executor's tokens."""
    note(repr(program))
    graph, fetches, feeds = program.build()
    with quiet_numpy():
        actual = executor_tokens(graph, fetches, feeds, program.fold_constants)
        for seed in seeds:
            assert_same_tokens(spec_tokens(graph, fetches, feeds, seed), actual, fetches)
    _record(actual)
    return actual


def _record(tokens):
    """Hypothesis statistics (``--hypothesis-show-statistics``): how many fetches are dead."""
    if tokens == NOT_COMPUTED:
        event("a fetch was never computed")
    else:
        event(f"dead fetches: {sum(dead for _, dead in tokens)}/{len(tokens)}")


seeds_strategy = st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=3, unique=True)


@settings(max_examples=250, **SETTINGS)
@given(program=programs(max_statements=8), seeds=seeds_strategy)
def test_random_programs_agree(program, seeds):
    check_program(program, seeds)


@settings(max_examples=200, **SETTINGS)
@given(program=programs(max_statements=6, nested=True), seeds=seeds_strategy)
def test_nested_loops_and_conds_agree(program, seeds):
    """Programs that start with loops in conds in loops (2-3 deep)."""
    check_program(program, seeds)


@settings(max_examples=100, **SETTINGS)
@given(program=programs(max_statements=8), seeds=seeds_strategy)
def test_programs_agree_under_a_deadline_and_repeated_runs(program, seeds):
    """RunOptions with a generous timeout changes nothing, and a Session reused for a second
    run (cached plan, fresh frames) gives the same tokens again."""
    actual = check_program(program, seeds[:1])
    graph, fetches, feeds = program.build()
    config = df.ConfigProto(fold_constants=program.fold_constants)
    with quiet_numpy(), df.Session(graph=graph, config=config) as sess:
        options = df.RunOptions(timeout_in_ms=60_000)
        for _ in range(2):
            try:
                again = sess.run_tokens(fetches, feeds, options=options)
            except df.errors.InternalError:
                again = NOT_COMPUTED
            assert_same_tokens(actual, again, fetches)
