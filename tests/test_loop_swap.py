"""Loop variables that swap or rotate their values through identity ops (issue 12): each
loop variable's Merge copies the value its NextIteration carries into its own block, so
when that value is another Merge's block, the Merges form a cycle of copies; the
planner breaks it with a save block (``MemoryPlan.merge_saves``) and every planned run
equals the unplanned one bit for bit, on both runners, under the overlap checker too."""
from __future__ import annotations

import numpy as np
import pytest

import dataflow as df
from dataflow.memory import plan as plan_memory
from tests.op_harness import fresh_rng
from tests.test_loop_schedule import _assert_identical, _three_ways


def _vectors(rng, k, n=24):
    return [rng.standard_normal(n).astype(np.float32) + 10.0 * j for j in range(k)]


def _swap_graph(rng, k, body, trips=7, fetch_exits=False):
    """A loop over ``k`` float vectors (fed) whose body is ``body(vs) -> vs``; fetched:
    its results times one (the Merges' blocks in the arena), or the Exits themselves
    (the Merges' values held outside it)."""
    g = df.Graph()
    with g.as_default():
        xs = [df.placeholder(df.float32, [24], name=f"x{j}") for j in range(k)]
        out = df.while_loop(lambda i, *vs: i < trips,
                            lambda i, *vs: (i + 1,) + tuple(body(list(vs))),
                            [df.constant(0)] + xs)
        fetches = list(out[1:]) if fetch_exits else [v * 1.0 for v in out[1:]]
    feed = dict(zip(xs, _vectors(rng, k)))
    return g, fetches, feed, xs


def _rotated(values, k, trips):
    vs = list(values)
    for _ in range(trips):
        vs = vs[1:] + vs[:1]
    return vs


BODIES = {
    "swap": (2, lambda vs: [vs[1], vs[0]]),
    "rotate3": (3, lambda vs: [vs[1], vs[2], vs[0]]),
    "identities": (2, lambda vs: [df.identity(df.identity(vs[1])), df.identity(vs[0])]),
    "views": (3, lambda vs: [df.reshape(df.reshape(vs[1], [4, 6]), [24]), vs[2],
                             df.identity(vs[0])]),
}


@pytest.mark.parametrize("fetch_exits", [False, True])
@pytest.mark.parametrize("mode", [True, "check"])
@pytest.mark.parametrize("case", sorted(BODIES))
def test_rotation_through_identities_equals_unplanned(monkeypatch, mode, case, fetch_exits):
    """Two swapped or three rotated variables, directly, through Identity chains and
    through reshape views: the planned values (loop schedule and executor) are the
    unplanned ones, which are the inputs rotated once per iteration."""
    rng, _ = fresh_rng()
    k, body = BODIES[case]
    g, fetches, feed, xs = _swap_graph(rng, k, body, fetch_exits=fetch_exits)
    unplanned, flat, executor, _schedules, _checked = _three_ways(g, fetches, feed,
                                                                 monkeypatch, mode)
    expected = _rotated([feed[x] for x in xs], k, 7)
    for got, want in zip(unplanned[0], expected):
        np.testing.assert_array_equal(got, want)
    _assert_identical(unplanned, flat, executor)
    p = plan_memory(fetches, feed_dict=feed, graph=g)
    assert len(p.merge_saves) == 1     # one save breaks the one cycle


@pytest.mark.parametrize("fetch_exits", [False, True])
@pytest.mark.parametrize("mode", [True, "check"])
def test_swap_with_ops_in_between(monkeypatch, mode, fetch_exits):
    """A swap where one of the two values goes through a kernel (its own block): no
    cycle of Merge copies, no save block, and the planned values stay the unplanned
    ones (fetching the Exits: one Merge must copy the other's held value, not keep
    a reference to it)."""
    rng, _ = fresh_rng()
    g, fetches, feed, xs = _swap_graph(rng, 2, lambda vs: [vs[1] * 0.5, vs[0]],
                                       fetch_exits=fetch_exits)
    unplanned, flat, executor, _s, _c = _three_ways(g, fetches, feed, monkeypatch, mode)
    a, b = feed[xs[0]], feed[xs[1]]
    for _ in range(7):
        a, b = b * np.float32(0.5), a
    np.testing.assert_array_equal(unplanned[0][0], a)
    np.testing.assert_array_equal(unplanned[0][1], b)
    _assert_identical(unplanned, flat, executor)
    assert plan_memory(fetches, feed_dict=feed, graph=g).merge_saves == {}


@pytest.mark.parametrize("mode", [True, "check"])
def test_swap_inside_gradient_loop(monkeypatch, mode):
    """The gradient of a loop that swaps two variables and scales one: the gradient
    loop swaps its accumulators through identities. Planned gradients equal the
    unplanned ones and the closed form (7 iterations: a is scaled 4 times, b 3)."""
    rng, _ = fresh_rng()
    g = df.Graph()
    with g.as_default():
        x0 = df.placeholder(df.float32, [24], name="x0")
        x1 = df.placeholder(df.float32, [24], name="x1")
        s = df.placeholder(df.float32, [24], name="s")
        _, a, b = df.while_loop(lambda i, a, b: i < 7,
                                lambda i, a, b: (i + 1, b, a * s), [df.constant(0), x0, x1])
        loss = df.reduce_sum(a * 2.0 + b * 3.0)
        fetches = df.gradients(loss, [x0, x1, s])
    feed = {x0: rng.standard_normal(24).astype(np.float32),
            x1: rng.standard_normal(24).astype(np.float32),
            s: (1.0 + 0.1 * rng.standard_normal(24)).astype(np.float32)}
    unplanned, flat, executor, _s, _c = _three_ways(g, fetches, feed, monkeypatch, mode)
    sv = feed[s].astype(np.float64)
    # after 7 iterations: a = x1 * s^3, b = x0 * s^4
    np.testing.assert_allclose(unplanned[0][0], 3.0 * sv ** 4, rtol=1e-5)
    np.testing.assert_allclose(unplanned[0][1], 2.0 * sv ** 3, rtol=1e-5)
    _assert_identical(unplanned, flat, executor)
