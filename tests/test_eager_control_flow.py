"""cond, case and while_loop in eager mode run as Python control flow with the graph
builders' signatures and results (compared with the same calls run in a Session)."""
import collections

import numpy as np
import pytest

import dataflow as df
from dataflow.framework import eager as eager_impl

Pair = collections.namedtuple("Pair", "a b")


def both_ways(build):
    """``build()`` run eagerly and in a graph: (eager result as NumPy, graph result)."""
    with eager_impl.EagerGraph().as_default():
        eager_out = df.util.nest.map_structure(
            lambda t: t.numpy() if isinstance(t, df.EagerTensor) else t, build())
    with df.Graph().as_default():
        out = build()
        with df.Session() as sess:
            graph_out = sess.run(out)
    return eager_out, graph_out


def assert_same(eager_out, graph_out):
    assert type(eager_out) is type(graph_out) or (
        isinstance(eager_out, np.generic) and isinstance(graph_out, np.generic))
    flat_e = df.util.nest.flatten(eager_out)
    flat_g = df.util.nest.flatten(graph_out)
    assert len(flat_e) == len(flat_g)
    for e, g in zip(flat_e, flat_g):
        assert np.asarray(e).dtype == np.asarray(g).dtype
        np.testing.assert_array_equal(e, g)


PROGRAMS = {
    "cond_scalar": lambda: df.cond(df.constant(2.0) > 1.0, lambda: df.constant(5.0),
                                   lambda: df.constant(7.0)),
    "cond_false_tuple": lambda: df.cond(df.constant(False), lambda: (1, 2.0),
                                        lambda: (3, 4.0)),
    "cond_single_list": lambda: df.cond(df.constant(True), lambda: [df.constant(1)],
                                        lambda: [df.constant(2)]),
    "cond_strict_list": lambda: df.cond(df.constant(True), lambda: [df.constant(1)],
                                        lambda: [df.constant(2)], strict=True),
    "cond_namedtuple": lambda: df.cond(df.constant(True), lambda: Pair(1.0, 2),
                                       lambda: Pair(3.0, 4)),
    "case_first": lambda: df.case([(df.constant(1) > 0, lambda: df.constant(10)),
                                   (df.constant(True), lambda: df.constant(20))],
                                  default=lambda: df.constant(30)),
    "case_default": lambda: df.case([(df.constant(False), lambda: df.constant(1.0))],
                                    default=lambda: df.constant(2.0)),
    "case_last_is_default": lambda: df.case(
        [(df.constant(False), lambda: 1.0), (df.constant(True), lambda: 2.0)]),
    "case_dict": lambda: df.case({df.constant(False): lambda: 1, df.constant(True):
                                  lambda: 2}, default=lambda: 3),
    "while_pair": lambda: df.while_loop(lambda i, a: i < 5, lambda i, a: (i + 1, a * 2.0),
                                        (0, 1.0)),
    "while_single": lambda: df.while_loop(lambda x: x < 100, lambda x: x * 3, [1]),
    "while_bare": lambda: df.while_loop(lambda x: x < 100, lambda x: x * 3,
                                        df.constant(1)),
    "while_same_structure": lambda: df.while_loop(lambda x: x < 10, lambda x: [x + 4], [1],
                                                  return_same_structure=True),
    "while_max_iterations": lambda: df.while_loop(lambda a: a < 1e6, lambda a: a * 2.0,
                                                  [1.0], maximum_iterations=3),
    "while_nested_structure": lambda: df.while_loop(
        lambda p: p.a < 4, lambda p: [Pair(p.a + 1, p.b + df.cast(p.a, df.float32))],
        [Pair(df.constant(0), df.constant(0.5))]),
    "while_dict": lambda: df.while_loop(lambda d: d["i"] < 3,
                                        lambda d: [{"i": d["i"] + 1, "v": d["v"] * 2}],
                                        {"i": 0, "v": df.constant([1, 2])}),
    "while_zero_trips": lambda: df.while_loop(lambda i, v: i < 0, lambda i, v: (i + 1, v),
                                              (5, df.constant([1.0]))),
    "while_with_cond_inside": lambda: df.while_loop(
        lambda i, a: i < 6,
        lambda i, a: (i + 1, df.cond(df.equal(i % 2, 0), lambda: a + 1.0, lambda: a * 2.0)),
        (0, 0.0)),
}


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_eager_control_flow_matches_graph(name):
    assert_same(*both_ways(PROGRAMS[name]))


def test_branches_run_in_python():
    calls = []
    with df.eager_mode():
        r = df.cond(df.constant(True), lambda: calls.append("t") or df.constant(1),
                    lambda: calls.append("f") or df.constant(2))
    assert calls == ["t"] and int(r) == 1


@pytest.mark.parametrize("build, error", [
    (lambda: df.case([(df.constant(False), lambda: df.constant(1.0)),
                      (df.constant(False), lambda: df.constant(2.0))]),
     df.errors.InvalidArgumentError),
    (lambda: df.case([(df.constant(True), lambda: 1.0), (df.constant(True), lambda: 2.0)],
                     default=lambda: 3.0, exclusive=True), df.errors.InvalidArgumentError),
    (lambda: df.cond(df.constant(1.0), lambda: 1.0, lambda: 2.0), TypeError),
    (lambda: df.cond(True, lambda: 1.0, lambda: 2.0), TypeError),
    (lambda: df.while_loop(lambda x: x < 3, lambda x: (x + 1, x), [0]), ValueError),
    (lambda: df.while_loop(lambda x: x + 1, lambda x: x + 1, [0]), TypeError),
], ids=["case_none_true", "case_not_exclusive", "cond_float_pred", "cond_python_bool",
        "while_body_structure", "while_cond_not_bool"])
def test_errors_match_graph_mode(build, error):
    with df.eager_mode():
        with pytest.raises(error):
            build()
    with df.Graph().as_default():
        with pytest.raises(error):
            out = build()
            with df.Session() as sess:
                sess.run(out)
