"""The random-graph differential test of ``tests/test_differential.py``, partitioned.

Every op of a generated program is put on a random device among ``/cpu:0``..``/cpu:2``;
the Session then partitions the graph (Send/Recv pairs, control loops, one executor
per device on threads) and its tokens must equal the reference interpreter's, which
ignores devices. A generous deadline turns a hang into a failure.
"""
from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st

import dataflow as df
from dataflow.runtime.partitioned import PartitionedPlan
from tests.graph_gen import programs, quiet_numpy
from tests.test_differential import NOT_COMPUTED, SETTINGS, assert_same_tokens, spec_tokens

DEVICES = ["/cpu:0", "/cpu:1", "/cpu:2"]


def partitioned_tokens(graph, fetches, feeds, fold_constants):
    config = df.ConfigProto(fold_constants=fold_constants, device_count={"CPU": 3})
    with df.Session(graph=graph, config=config) as sess:
        try:
            return sess.run_tokens(fetches, feeds, options=df.RunOptions(timeout_in_ms=30_000))
        except df.errors.InternalError as e:
            assert "without computing fetch" in str(e), e
            return NOT_COMPUTED


def place_randomly(graph, seed):
    rng = random.Random(seed)
    for op in graph.get_operations():
        op._set_device(rng.choice(DEVICES))


@settings(max_examples=60, **SETTINGS)
@given(program=programs(max_statements=8), seed=st.integers(0, 2**32 - 1),
       spec_seed=st.integers(0, 2**32 - 1))
def test_random_programs_on_random_devices_agree(program, seed, spec_seed):
    graph, fetches, feeds = program.build()
    expected = spec_tokens(graph, fetches, feeds, spec_seed)
    place_randomly(graph, seed)
    with quiet_numpy():
        actual = partitioned_tokens(graph, fetches, feeds, program.fold_constants)
    assert_same_tokens(expected, actual, fetches)


@settings(max_examples=40, **SETTINGS)
@given(program=programs(max_statements=6, nested=True), seed=st.integers(0, 2**32 - 1))
def test_nested_programs_on_random_devices_agree(program, seed):
    graph, fetches, feeds = program.build()
    expected = spec_tokens(graph, fetches, feeds, 0)
    place_randomly(graph, seed)
    with quiet_numpy():
        actual = partitioned_tokens(graph, fetches, feeds, program.fold_constants)
    assert_same_tokens(expected, actual, fetches)


def test_random_placement_really_partitions():
    """The differential tests above do exercise the partitioned path."""
    g = df.Graph()
    with g.as_default():
        i = df.while_loop(lambda i: i < 3, lambda i: i + 1, [df.constant(0)])
    place_randomly(g, 1)
    fetches = [i]
    config = df.ConfigProto(device_count={"CPU": 3})
    with df.Session(graph=g, config=config) as sess:
        assert sess.run_tokens(fetches) == [(3, False)]
        plans = list(sess._plans.values())
    assert len(plans) == 1 and isinstance(plans[0], PartitionedPlan)
    assert len(plans[0].plans) >= 2
