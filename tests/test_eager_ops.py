"""Eager against graph mode for every op: each op of the TF reference programs (the op
harness's programs over the array, nn, loss, convolution, math and gradient ops) is run
again through eager dispatch, with the graph's own inputs and attributes, and every value
is compared with the Session's; every elementwise op of the table is run through its
wrapper both ways."""
import numpy as np
import pytest

import dataflow as df
from dataflow.framework import eager as eager_impl
from dataflow.framework.convert import convert_value
from dataflow.framework.elementwise_table import ELEMENTWISE
from dataflow.framework.op_registry import NORMAL, get_op_def
from dataflow.ops.random_ops import RANDOM_OP_TYPES
from tests.tf_reference import grad_programs, ops_programs, programs

from .op_harness import tolerance

MODULES = (ops_programs, grad_programs, programs)
ALL_PROGRAMS = {f"{module.__name__.rsplit('.', 1)[1]}.{name}": fn
                for module in MODULES
                for name, fn in module.PROGRAMS.items()}
FED = ("Placeholder", "PlaceholderWithDefault")


def _replayable(graph):
    """Programs of stateless ops (no control-flow primitive, variable, random op or
    assertion): every value is a function of the feeds, so the order of execution does
    not matter and all tensors can be fetched at once."""
    for op in graph.get_operations():
        op_def = get_op_def(op.type)
        if op_def.role != NORMAL or (op_def.stateful and op.type not in FED) \
                or op.type in RANDOM_OP_TYPES:
            return False
    return True


def _build(program):
    graph = df.Graph()
    # Some programs draw from their module's generator when built: building them here must
    # leave those generators as the TF reference tests expect to find them.
    states = [(m.RNG, m.RNG.bit_generator.state) for m in MODULES if hasattr(m, "RNG")]
    with graph.as_default():
        try:
            _, feeds = program(df)
        except Exception:  # noqa: BLE001 - build errors are tested by the TF reference tests
            return None, None
        finally:
            for rng, state in states:
                rng.bit_generator.state = state
    feed = (feeds[0] if isinstance(feeds, list) else feeds) if feeds else {}
    return graph, feed


def _replay(graph, feed):
    """Run every op of ``graph`` eagerly, in creation order, on the fed values."""
    eager_graph = eager_impl.EagerGraph()
    values = {}
    for op in graph.get_operations():
        if op.type in FED and op.outputs[0] in feed:
            t = op.outputs[0]
            values[t] = eager_impl.EagerTensor(convert_value(feed[t], t.dtype), t.dtype)
            continue
        inputs = [values[t] for t in op.inputs]
        eager_op = eager_impl.execute(eager_graph, op.type, inputs, op.attrs, op.name)
        assert len(eager_op.outputs) == len(op.outputs), op
        for t, e in zip(op.outputs, eager_op.outputs):
            assert e.dtype is t.dtype, (op, e.dtype, t.dtype)
            assert t.shape.is_compatible_with(e.shape), (op, t.shape, e.shape)
            values[t] = e
    return values


def _cases():
    cases = []
    for name in sorted(ALL_PROGRAMS):
        graph, feed = _build(ALL_PROGRAMS[name])
        if graph is not None and _replayable(graph):
            cases.append(name)
    return cases


CASES = _cases()


def test_the_replayed_programs_cover_many_op_types():
    types = set()
    for name in CASES:
        graph, _ = _build(ALL_PROGRAMS[name])
        types |= {op.type for op in graph.get_operations()}
    assert len(CASES) >= 40 and len(types) >= 100, (len(CASES), sorted(types))


@pytest.mark.parametrize("name", CASES)
def test_every_op_runs_eagerly_as_in_the_graph(name):
    graph, feed = _build(ALL_PROGRAMS[name])
    tensors = [t for op in graph.get_operations() for t in op.outputs
               if not (op.type in FED and t in feed)]
    with df.Session(graph=graph, config=df.ConfigProto(use_compiled_kernels=True)) as sess:
        try:
            expected = sess.run(tensors, feed)
        except df.errors.OpError as e:
            with pytest.raises(type(e)):
                _replay(graph, feed)
            return
    values = _replay(graph, feed)
    for t, want in zip(tensors, expected):
        got = values[t].numpy()
        assert np.asarray(got).dtype == np.asarray(want).dtype, t
        if np.asarray(want).dtype.kind == "f":
            np.testing.assert_allclose(got, want, err_msg=t.name, **tolerance(
                np.asarray(want).dtype))
        else:
            np.testing.assert_array_equal(got, want, err_msg=t.name)


ROWS = sorted((r for r in ELEMENTWISE.values() if r.wrapper), key=lambda r: r.name)


def _inputs(row, rng):
    if row.dtypes == "bool":
        return [rng.standard_normal(6) > 0 for _ in range(row.arity)]
    if row.dtypes == "float" or row.dtypes == "numeric":
        # Positive values keep log/sqrt/pow real; integers for the integer-only rows.
        return [(rng.uniform(0.5, 2.0, 6)).astype(np.float32) for _ in range(row.arity)]
    return [rng.integers(1, 9, 6).astype(np.int32) for _ in range(row.arity)]


@pytest.mark.parametrize("row", ROWS, ids=[r.name for r in ROWS])
def test_every_elementwise_wrapper_runs_eagerly_as_in_the_graph(row, rng):
    fn = getattr(df.ops.math_ops, row.wrapper, None) or getattr(df.nn, row.wrapper)
    values = _inputs(row, rng)
    with df.Graph().as_default():
        want = df.Session().run(fn(*[df.constant(v) for v in values]))
    with df.eager_mode():
        got = fn(*[df.constant(v) for v in values])
    assert isinstance(got, df.EagerTensor) and got.op.type == row.name
    np.testing.assert_allclose(got.numpy(), want, **tolerance(np.asarray(want).dtype))
    assert got.numpy().dtype == np.asarray(want).dtype
