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


X = np.arange(12, dtype=np.float32).reshape(4, 3) / 7.0
FUNCTIONAL = {
    "map_fn": lambda: df.map_fn(lambda r: df.reduce_sum(r * r), df.constant(X)),
    "map_fn_nested_dtype": lambda: df.map_fn(
        lambda r: (df.reduce_sum(r), df.cast(df.argmax(r), df.int32)), df.constant(X),
        dtype=(df.float32, df.int32)),
    "scan": lambda: df.scan(lambda a, v: a * 0.5 + v, df.constant(X)),
    "scan_reverse_initializer": lambda: df.scan(
        lambda a, v: (a[1], a[0] + df.reduce_sum(v)), df.constant(X),
        initializer=(df.constant(0.0), df.constant(1.0)), reverse=True),
    "foldl": lambda: df.foldl(lambda a, v: a * 10 + v, df.constant([1, 2, 3])),
    "foldr": lambda: df.foldr(lambda a, v: a * 10 + v, df.constant([1, 2, 3])),
    "foldl_initializer": lambda: df.foldl(lambda a, v: a + df.reduce_max(v), df.constant(X),
                                          initializer=df.constant(-1.0)),
    "tensor_array_in_loop": lambda: df.while_loop(
        lambda i, ta: i < 4, lambda i, ta: (i + 1, ta.write(i, df.cast(i, df.float32) ** 2)),
        (0, df.TensorArray(df.float32, size=0, dynamic_size=True)))[1].stack(),
}


@pytest.mark.parametrize("name", sorted(FUNCTIONAL))
def test_functional_ops_and_tensor_arrays_run_eagerly_as_in_the_graph(name):
    eager_out, graph_out = both_ways(FUNCTIONAL[name])
    flat_e, flat_g = df.util.nest.flatten(eager_out), df.util.nest.flatten(graph_out)
    assert len(flat_e) == len(flat_g)
    for e, g in zip(flat_e, flat_g):
        assert np.asarray(e).dtype == np.asarray(g).dtype
        np.testing.assert_allclose(e, g, rtol=1e-6)


def test_tape_differentiates_through_scan_as_the_graph_does():
    def loss(x):
        return df.reduce_sum(df.scan(lambda a, v: df.tanh(a * v + 0.5), x))

    with df.Graph().as_default():
        x = df.constant(X)
        want = df.Session().run(df.gradients(loss(x), [x])[0])
    with df.eager_mode():
        x = df.constant(X)
        with df.GradientTape() as tape:
            tape.watch(x)
            y = loss(x)
        got = tape.gradient(y, x)
    np.testing.assert_allclose(got.numpy(), want, rtol=1e-5, atol=1e-6)


def test_eager_tensor_array_errors():
    with df.eager_mode():
        ta = df.TensorArray(df.float32, size=2)
        with pytest.raises(df.errors.InvalidArgumentError):
            ta.read(0)                       # never written, no element shape
        with pytest.raises(df.errors.InvalidArgumentError):
            ta.write(5, 1.0)
        with pytest.raises(df.errors.InvalidArgumentError):
            ta.unstack(df.constant([1.0, 2.0, 3.0]))
        assert ta.write(0, 1.0).read(1).numpy() == 0.0   # known element shape: zeros


@pytest.mark.parametrize("cell_fn", [lambda: df.nn.rnn_cell.BasicRNNCell(4),
                                     lambda: df.nn.rnn_cell.BasicLSTMCell(4)],
                         ids=["rnn", "lstm"])
def test_dynamic_rnn_runs_eagerly_as_in_the_graph(cell_fn, rng):
    x_np = rng.standard_normal((2, 5, 3)).astype(np.float32)
    weights = rng.standard_normal((7, 16)).astype(np.float32) * 0.3

    def build():
        def init(shape, dtype=None, partition_info=None):
            return weights[:shape[0], :shape[1]]

        with df.variable_scope("test", initializer=init):
            out, state = df.nn.dynamic_rnn(cell_fn(), df.constant(x_np),
                                           sequence_length=[5, 3], dtype=df.float32)
        return out, state

    with eager_impl.EagerGraph().as_default():
        eager_out = df.util.nest.map_structure(lambda t: t.numpy(), build())
    with df.Graph().as_default():
        out = build()
        with df.Session() as sess:
            sess.run(df.global_variables_initializer())
            graph_out = sess.run(out)
    for e, g in zip(df.util.nest.flatten(eager_out), df.util.nest.flatten(graph_out)):
        np.testing.assert_allclose(e, g, rtol=1e-5, atol=1e-6)
