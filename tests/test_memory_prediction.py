"""The plan's figure against the measured bytes of a planned step (tracemalloc, as
``benchmarks.memory`` measures): random programs of the differential generator with
vectors of realistic size, fetched constants, Cast writing into its block, and the
runtime's own bytes on executor steps (conds, nested loops)."""
from __future__ import annotations

import re

import numpy as np
import pytest
from hypothesis import HealthCheck, assume, find, given, settings

import dataflow as df
from benchmarks.memory import (ARRAY_DOMINANCE, TokenFetches, measure_planned,
                               measure_step_peak, planned_run_bytes)
from tests.graph_gen import programs, quiet_numpy
from tests.op_harness import fresh_rng

SIZE = 1 << 14
PLANNED = df.ConfigProto(fuse_elementwise=False, inter_op_parallelism_threads=1,
                         plan_memory=True, compile_loops=False)


def _fetch_bytes_not_made(p, fetches, tokens, feeds) -> int:
    """The plan's bytes for fetched values this run did not make: a dead fetch (its
    branch not taken) and a fed array passed on unchanged (a cond's Merge forwarding a
    feed) cost nothing; the plan, which cannot know the data, counts them."""
    fed = [v for v in feeds.values() if isinstance(v, np.ndarray)]
    made, not_made = set(), set()    # ids of the fetches zone's buffers
    copies = {b.name: b for b in p.buffers if b.zone == "fetches"}
    for t, (value, dead) in zip(fetches, tokens):
        b = p.tensors.get(t.name)
        b = b if b is not None and b.zone == "fetches" else copies.get(f"{t.name} (fetched copy)")
        if b is None:
            continue
        if dead or any(value is v for v in fed):
            not_made.add(id(b))
        else:
            made.add(id(b))
    return sum(b.size for b in p.buffers if id(b) in not_made - made)


def _check_prediction(program):
    with quiet_numpy():
        g, fetches, feeds = program.build()
        fetches = TokenFetches(fetches)
        p = df.memory.plan(fetches, feed_dict=feeds, graph=g)
        with df.Session(graph=g, config=PLANNED) as sess:
            tokens = sess.run_tokens(fetches, feeds)
        plan_run = planned_run_bytes(p)
        expected = plan_run - _fetch_bytes_not_made(p, fetches, tokens, feeds)
        # An array program: what the run makes is mostly arrays, not the runtime's
        # Python objects (whose few KiB the plan bounds rather than predicts).
        assume(expected >= (ARRAY_DOMINANCE + 1) * p.runtime_bytes)
        measured = measure_planned(g, fetches, feeds, None, PLANNED)
    total = measured["arena_held"] + measured["transient"]
    assert measured["copied"] == [], measured["copied"]
    assert total <= 1.05 * plan_run, (total, plan_run)
    assert abs(total / expected - 1) <= 0.05, (total, expected, plan_run)


SETTINGS = dict(max_examples=8, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))


@settings(**SETTINGS)
@given(program=programs(max_statements=10, size=SIZE))
def test_prediction_within_5_percent_on_random_flat_array_programs(program):
    """Random programs (conds, loops, raw diamonds, dead values) whose vectors have 16384
    elements: the planned run measures within 5% of the plan (arena, fetched values, the
    runtime's bytes), less the fetched values the data made dead or forwarded."""
    _check_prediction(program)


@settings(**SETTINGS)
@given(program=programs(max_statements=10, nested=True, size=SIZE))
def test_prediction_within_5_percent_on_random_nested_array_programs(program):
    """The same for programs starting with a nest of loops and conds, 2-3 deep."""
    _check_prediction(program)


def test_generator_size_option_keeps_the_default_programs():
    """``size=2`` draws the programs the tests always drew; a larger size makes the same
    program with longer vectors (each vector literal from the same two drawn values)."""
    def first(strategy):   # the smallest program with a vector placeholder and a loop
        return find(strategy, lambda p: re.search(r"shape=\[\d+\]", p.source) is not None
                    and "while_loop" in p.source,
                    settings=settings(database=None, derandomize=True, max_examples=300,
                                      suppress_health_check=list(HealthCheck))).source
    default = first(programs(max_statements=4))
    assert first(programs(max_statements=4, size=2)) == default
    big = first(programs(max_statements=4, size=4096))
    as_lists = re.sub(r"np\.linspace\(([^,]+), ([^,]+), 4096\)", r"[\1, \2]", big)
    as_lists = re.sub(r"np\.resize\(np\.array\((\[[^]]*\]), np\.int32\), 4096\)", r"\1",
                      as_lists)
    assert as_lists.replace("shape=[4096]", "shape=[2]") == default
    assert big != default   # the program has vectors, now of 4096 elements


def test_fetched_constant_is_counted_as_the_copy_the_run_hands_out():
    """A fetched constant (or an identity of one) is read-only storage, so the run
    returns a copy: the plan counts it in the fetches zone, and the run measures it."""
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float64, [SIZE], name="x")
        c = df.constant(np.linspace(0.0, 1.0, SIZE), name="c")
        with df.control_dependencies([x.op]):
            ident = df.identity(c)
        y = df.sin(x) + c
    feed = {x: np.ones(SIZE)}
    p = df.memory.plan([ident, y], feed_dict=feed, graph=g)
    assert p.zones["fetches"] == 2 * SIZE * 8
    assert p.zones["constants"] == SIZE * 8
    measured = measure_planned(g, [ident, y], feed, None, PLANNED)
    total = measured["arena_held"] + measured["transient"]
    assert abs(total / planned_run_bytes(p) - 1) < 0.05, (total, planned_run_bytes(p))
    with df.Session(graph=g, config=PLANNED) as sess:
        got_c, got_y = sess.run([ident, y], feed)
    assert np.array_equal(got_c, np.linspace(0.0, 1.0, SIZE))
    assert np.array_equal(got_y, np.sin(np.ones(SIZE)) + np.linspace(0.0, 1.0, SIZE))


@pytest.mark.parametrize("src,dst", [(np.float64, np.int32), (np.int32, np.float64),
                                     (np.float64, np.float32), (np.float32, np.bool_),
                                     (np.int32, np.int64)])
def test_cast_writes_into_its_block_bit_identically(src, dst):
    """Cast has an out= variant (planned steps no longer copy its result): the same
    values as the unplanned cast, large values, negatives and fractions included."""
    rng, _ = fresh_rng()
    values = (rng.standard_normal(5000) * 1e3).astype(src)
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.as_dtype(src), [5000], name="x")
        y = df.cast(x, df.as_dtype(dst))
    with df.Session(graph=g, config=PLANNED) as sess:
        meta = df.RunMetadata()
        planned = sess.run(y, {x: values}, run_metadata=meta)
    assert meta.copied_kernels == []
    with df.Session(graph=g) as sess:
        unplanned = sess.run(y, {x: values})
    assert planned.dtype == unplanned.dtype == np.dtype(dst)
    assert np.array_equal(planned, unplanned)
    assert np.array_equal(planned, values.astype(dst))


# -- the runtime's own bytes on executor steps ----------------------------------------------

def _cond_chain(n, size=1000):
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [size], name="x")
        c = df.placeholder(df.float32, [size], name="c")
        h = df.cond(df.reduce_sum(x) > 0, lambda: x * 2.0, lambda: x * 3.0)
        for i in range(n):
            h = df.tanh(h) if i % 3 == 0 else (h - c if i % 3 == 1 else df.add_n([h, c, c]))
        out = df.reduce_sum(h)
    return g, out, {x: np.ones(size, np.float32), c: np.ones(size, np.float32) * 0.1}


def _nested_loops(depth, body_ops, trips=4, size=1000):
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [size], name="x")

        def make(d):
            def body(i, h):
                if d > 1:
                    _, h = df.while_loop(lambda j, v: j < trips, make(d - 1), (0, h))
                for k in range(body_ops):
                    h = df.sin(h) if k % 2 else h * 0.5
                return i + 1, h
            return body
        _, h = df.while_loop(lambda i, v: i < trips, make(depth), (0, x))
        out = df.reduce_sum(h)
    return g, out, {x: np.ones(size, np.float32)}


@pytest.mark.parametrize("make", [lambda: _cond_chain(20), lambda: _cond_chain(150),
                                  lambda: _nested_loops(1, 40), lambda: _nested_loops(2, 25),
                                  lambda: _nested_loops(3, 10)],
                         ids=["cond+20", "cond+150", "loop(40)", "loop(loop(25))",
                              "3 nested loops"])
def test_runtime_bytes_bound_executor_steps(make):
    """Steps with control flow run on the executor, whose state grows per node and input
    slot (more in loop bodies) and per nested loop: ``runtime_bytes`` bounds what the
    step allocates besides its values, and is not far over it."""
    g, out, feed = make()
    p = df.memory.plan(out, feed_dict=feed, graph=g)
    with df.Session(graph=g, config=df.ConfigProto(plan_memory=True)) as sess:
        transient = measure_step_peak(sess, out, feed)
    own = transient - (p.scratch_bytes + p.stack_bytes_for() + p.zones["fetches"])
    assert 0 < own <= p.runtime_bytes <= own + 4096 + own // 4, (own, p.runtime_bytes)
