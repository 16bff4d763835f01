"""Every op's gradient against central finite differences (float64).

Inputs are drawn fresh for every run (the seed is in each failure message) and
kept away from the points where an op is not differentiable (kinks, ties,
discontinuities). Each check also runs on placeholders whose static shapes are
partly unknown, so the run-time shape paths of the gradient functions are used.
The last tests check the registry: every registered op type is either
differentiable or declared not differentiable.
"""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import dataflow as df
from dataflow.autodiff.registry import get_gradient_function, is_not_differentiable
from dataflow.framework.op_registry import get_op_def, registered_ops
from dataflow.ops import grad_ops

from .op_harness import check_gradients, fresh_rng, ops_of_type, run

PARTIAL = [False, True, "unknown_rank"]
BROADCAST_PAIRS = [((3,), (3,)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 3)),
                   ((2, 3), ()), ((3, 1, 2), (4, 1)), ((), ())]


# -- input generators ---------------------------------------------------------------------------

def generic(rng, shape):
    return rng.uniform(-2.0, 2.0, size=shape)


def positive(rng, shape):
    return rng.uniform(0.5, 2.0, size=shape)


def nonzero(rng, shape):
    """Values at least 0.3 away from zero (kinks of abs, relu, elu; poles of 1/x)."""
    return rng.choice([-1.0, 1.0], size=shape) * rng.uniform(0.3, 2.0, size=shape)


def above_minus_one(rng, shape):
    """Inside log1p's domain, away from its pole at -1."""
    return rng.uniform(-0.5, 2.0, size=shape)


def distinct(rng, *shapes):
    """Arrays whose elements, across all of them, are pairwise at least 0.2 apart
    (no ties for max/min, so the finite differences see a smooth function)."""
    sizes = [int(np.prod(s)) for s in shapes]
    grid = rng.permutation(sum(sizes)) * 0.3 - 0.15 * sum(sizes)
    values = grid + rng.uniform(0.0, 0.1, size=grid.shape)
    out, start = [], 0
    for s, n in zip(shapes, sizes):
        out.append(values[start:start + n].reshape(s))
        start += n
    return out


# -- binary elementwise ops ---------------------------------------------------------------------

BINARY = {
    "AddV2": (df.add, generic, generic),
    "Sub": (df.subtract, generic, generic),
    "Mul": (df.multiply, generic, generic),
    "RealDiv": (df.realdiv, generic, nonzero),
    "Pow": (df.pow, positive, generic),
    "SquaredDifference": (df.squared_difference, generic, generic),
}


@pytest.mark.parametrize("partial", PARTIAL)
@pytest.mark.parametrize("shapes", BROADCAST_PAIRS, ids=str)
@pytest.mark.parametrize("op_type", sorted(BINARY))
def test_binary_op_gradient(op_type, shapes, partial):
    fn, gen_x, gen_y = BINARY[op_type]
    rng, seed = fresh_rng()
    x, y = gen_x(rng, shapes[0]), gen_y(rng, shapes[1])
    check_gradients(fn, [x, y], partial=partial, rng=rng, seed=seed)


@pytest.mark.parametrize("partial", PARTIAL)
@pytest.mark.parametrize("shapes", BROADCAST_PAIRS, ids=str)
@pytest.mark.parametrize("fn", [df.maximum, df.minimum], ids=["Maximum", "Minimum"])
def test_maximum_minimum_gradient(fn, shapes, partial):
    rng, seed = fresh_rng()
    x, y = distinct(rng, *shapes)
    check_gradients(fn, [x, y], partial=partial, rng=rng, seed=seed)


def test_maximum_tie_goes_to_x(graph):
    # At a tie the gradient goes to x (TF's convention), not to both.
    x = df.constant([1.0, 2.0], dtype=df.float64)
    y = df.constant([1.0, 3.0], dtype=df.float64)
    gx, gy = df.gradients(df.maximum(x, y), [x, y])
    with df.Session() as sess:
        gx, gy = sess.run([gx, gy])
    np.testing.assert_array_equal(gx, [1.0, 0.0])
    np.testing.assert_array_equal(gy, [0.0, 1.0])


@pytest.mark.parametrize("partial", PARTIAL)
@pytest.mark.parametrize("shapes", [((2, 3), (2, 3)), ((2, 3), ())], ids=str)
def test_floor_mod_gradient(shapes, partial):
    # x = y * (k + f) with f in [0.2, 0.8]: x / y stays away from the integers where
    # floor(x / y) jumps.
    rng, seed = fresh_rng()
    y = rng.uniform(1.0, 2.0, size=shapes[1])
    k = rng.integers(-3, 3, size=shapes[0])
    x = y * (k + rng.uniform(0.2, 0.8, size=shapes[0]))
    check_gradients(df.floormod, [x, y], partial=partial, rng=rng, seed=seed)


def test_pow_gradient_of_exponent_is_zero_for_nonpositive_base(graph):
    x = df.constant([0.0, -2.0, 2.0], dtype=df.float64)
    p = df.constant([2.0, 2.0, 2.0], dtype=df.float64)
    gx, gp = df.gradients(df.pow(x, p), [x, p])
    with df.Session() as sess:
        gx, gp = sess.run([gx, gp])
    np.testing.assert_allclose(gx, [0.0, -4.0, 4.0])
    np.testing.assert_allclose(gp, [0.0, 0.0, 4.0 * np.log(2.0)])


# -- unary elementwise ops ----------------------------------------------------------------------

def _snapshot(x):
    return df.get_default_graph().create_op("Snapshot", [x], name="Snapshot").outputs[0]


UNARY = {
    "Neg": (df.negative, generic), "Square": (df.square, generic),
    "Sqrt": (df.sqrt, positive), "Rsqrt": (df.rsqrt, positive), "Exp": (df.exp, generic),
    "Log": (df.log, positive), "Log1p": (df.log1p, above_minus_one),
    "Tanh": (df.tanh, generic), "Sigmoid": (df.sigmoid, generic), "Abs": (df.abs, nonzero),
    "Sign": (df.sign, nonzero), "Reciprocal": (df.reciprocal, nonzero),
    "Sin": (df.sin, generic), "Cos": (df.cos, generic),
    "Relu": (df.nn.relu, nonzero), "Elu": (df.nn.elu, nonzero),
    "Softplus": (df.nn.softplus, generic),
    "Identity": (df.identity, generic), "Snapshot": (_snapshot, generic),
    "Print": (lambda x: df.Print(x, [x], message="grad test: "), generic),
}


@pytest.mark.parametrize("partial", PARTIAL)
@pytest.mark.parametrize("shape", [(), (3,), (2, 3)], ids=str)
@pytest.mark.parametrize("op_type", sorted(UNARY))
def test_unary_op_gradient(op_type, shape, partial, capsys):
    fn, gen = UNARY[op_type]
    rng, seed = fresh_rng()
    check_gradients(fn, [gen(rng, shape)], partial=partial, rng=rng, seed=seed)


@pytest.mark.parametrize("partial", PARTIAL)
@pytest.mark.parametrize("shape", [(3,), (2, 4), (2, 1, 3)], ids=str)
@pytest.mark.parametrize("fn", [df.nn.softmax, df.nn.log_softmax],
                         ids=["Softmax", "LogSoftmax"])
def test_softmax_gradient(fn, shape, partial):
    rng, seed = fresh_rng()
    check_gradients(fn, [generic(rng, shape)], partial=partial, rng=rng, seed=seed)


@pytest.mark.parametrize("partial", PARTIAL)
@pytest.mark.parametrize("shape", [(4,), (3, 4), (2, 2, 3)], ids=str)
def test_softmax_cross_entropy_gradient(shape, partial):
    # Labels are distributions (rows summing to 1): the kernel's backprop, softmax -
    # labels, is the logits gradient only then (as in TF). The loss is linear in the
    # labels, so perturbing them off the simplex is harmless to their own check.
    rng, seed = fresh_rng()
    labels = rng.uniform(0.1, 1.0, shape)
    labels /= labels.sum(axis=-1, keepdims=True)

    def xent(logits, labels):
        return df.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    check_gradients(xent, [generic(rng, shape), labels],
                    partial=partial, rng=rng, seed=seed)


def test_softmax_cross_entropy_gradient_uses_backprop_output(graph):
    logits = df.placeholder(df.float64, [2, 3])
    labels = df.constant(np.eye(3)[:2])
    loss = df.nn.softmax_cross_entropy_with_logits(labels=labels, logits=logits)
    g, = df.gradients(loss, [logits])
    xent_op = loss.op
    # The gradient reads the kernel's second output rather than recomputing a softmax.
    consumers = [c.type for c in xent_op.outputs[1].consumers()]
    assert consumers, "the backprop output of the xent op is unused by its gradient"
    assert not [op for op in graph.get_operations() if op.type == "Softmax"]
    with df.Session() as sess:
        value = sess.run(g, {logits: np.zeros((2, 3))})
    np.testing.assert_allclose(value, np.full((2, 3), 1 / 3) - np.eye(3)[:2])


@pytest.mark.parametrize("src", [df.float32, df.float64], ids=lambda d: d.name)
def test_cast_gradient(graph, src):
    # A linear float -> float cast: the gradient of sum(cast(x) * w) is w, cast back.
    x = df.placeholder(src, [3])
    w = np.array([1.5, -2.0, 0.25])
    y = df.reduce_sum(df.cast(x, df.float64 if src is df.float32 else df.float32) * w)
    g, = df.gradients(y, [x])
    assert g.dtype is src
    with df.Session() as sess:
        np.testing.assert_allclose(sess.run(g, {x: np.ones(3)}), w)


@pytest.mark.parametrize("fn", [df.floor, df.ceil, df.round, df.sign,
                                lambda x: df.cast(df.cast(x, df.int32), df.float64)],
                         ids=["Floor", "Ceil", "Round", "Sign", "CastToInt"])
def test_piecewise_constant_ops_pass_no_gradient(graph, fn):
    x = df.placeholder(df.float64, [3])
    g, = df.gradients(fn(x), [x])
    if g is not None:  # Sign gives zeros, as in TF
        with df.Session() as sess:
            np.testing.assert_array_equal(sess.run(g, {x: [0.5, -1.5, 2.0]}), 0.0)


# -- matmul and reductions ------------------------------------------------------------------------

@pytest.mark.parametrize("partial", PARTIAL)
@pytest.mark.parametrize("transpose_a", [False, True])
@pytest.mark.parametrize("transpose_b", [False, True])
def test_matmul_gradient(transpose_a, transpose_b, partial):
    rng, seed = fresh_rng()
    a = generic(rng, (4, 2) if transpose_a else (2, 4))
    b = generic(rng, (3, 4) if transpose_b else (4, 3))
    check_gradients(lambda x, y: df.matmul(x, y, transpose_a=transpose_a,
                                           transpose_b=transpose_b),
                    [a, b], partial=partial, rng=rng, seed=seed)


REDUCTIONS = {"Sum": df.reduce_sum, "Mean": df.reduce_mean, "Max": df.reduce_max,
              "Min": df.reduce_min, "Prod": df.reduce_prod}
AXES = [(None, False), (None, True), (0, False), (-1, True), ((0, 2), False), (1, False),
        ((-1, 0), True)]


@pytest.mark.parametrize("partial", PARTIAL)
@pytest.mark.parametrize("axis,keepdims", AXES, ids=str)
@pytest.mark.parametrize("op_type", sorted(REDUCTIONS))
def test_reduction_gradient(op_type, axis, keepdims, partial):
    rng, seed = fresh_rng()
    if op_type in ("Max", "Min"):
        x, = distinct(rng, (2, 3, 2))
    elif op_type == "Prod":
        x = nonzero(rng, (2, 3, 2))
    else:
        x = generic(rng, (2, 3, 2))
    fn = REDUCTIONS[op_type]
    check_gradients(lambda t: fn(t, axis=axis, keepdims=keepdims), [x], partial=partial,
                    rng=rng, seed=seed)


@pytest.mark.parametrize("fn", [df.reduce_sum, df.reduce_mean], ids=["Sum", "Mean"])
def test_reduction_of_a_scalar(fn):
    rng, seed = fresh_rng()
    check_gradients(fn, [generic(rng, ())], rng=rng, seed=seed)


def test_prod_gradient_with_zeros(graph):
    # Rows with no zero, one zero and two zeros: d prod / d x_i = product of the others.
    x = df.constant([[2.0, 3.0, 4.0], [2.0, 0.0, 4.0], [0.0, 3.0, 0.0]], dtype=df.float64)
    g, = df.gradients(df.reduce_prod(x, axis=1), [x])
    with df.Session() as sess:
        value = sess.run(g)
    np.testing.assert_array_equal(value, [[12.0, 8.0, 6.0], [0.0, 8.0, 0.0], [0.0, 0.0, 0.0]])


@pytest.mark.parametrize("fn,expected", [(df.reduce_max, [[0.0, 0.5, 0.5], [1.0, 0.0, 0.0]]),
                                         (df.reduce_min, [[1.0, 0.0, 0.0], [0.0, 0.5, 0.5]])],
                         ids=["Max", "Min"])
def test_reduction_ties_split_the_gradient(graph, fn, expected):
    x = df.constant([[1.0, 3.0, 3.0], [5.0, 2.0, 2.0]], dtype=df.float64)
    g, = df.gradients(fn(x, axis=1), [x])
    with df.Session() as sess:
        np.testing.assert_allclose(sess.run(g), expected)


# -- array ops -------------------------------------------------------------------------------------

ARRAY_ONE_INPUT = {
    "Reshape": (lambda x: df.reshape(x, [3, -1]), (2, 3)),
    "Reshape_scalar": (lambda x: df.reshape(x, [1, 1]), ()),
    "Reshape_dynamic": (lambda x: df.reshape(x, df.shape(df.transpose(x))), (2, 3)),
    "ExpandDims": (lambda x: df.expand_dims(x, 1), (2, 3)),
    "ExpandDims_neg": (lambda x: df.expand_dims(x, -1), (2, 3)),
    "Squeeze": (lambda x: df.squeeze(x), (2, 1, 3, 1)),
    "Squeeze_axis": (lambda x: df.squeeze(x, axis=[1]), (2, 1, 3)),
    "Transpose": (lambda x: df.transpose(x), (2, 3, 4)),
    "Transpose_perm": (lambda x: df.transpose(x, [1, 2, 0]), (2, 3, 4)),
    "Tile": (lambda x: df.tile(x, [2, 3]), (2, 3)),
    "Tile_3d": (lambda x: df.tile(x, [1, 2, 2]), (2, 1, 3)),
    "Tile_dynamic": (lambda x: df.tile(x, df.stack([df.constant(2), df.constant(1)])),
                     (2, 3)),
    "GatherV2": (lambda x: df.gather(x, [2, 0, 2, 2]), (3, 2)),
    "GatherV2_axis1": (lambda x: df.gather(x, [[1, 1], [0, 2]], axis=1), (2, 3, 2)),
    "GatherV2_scalar_index": (lambda x: df.gather(x, 1, axis=-1), (2, 3)),
    "GatherV2_int64": (lambda x: df.gather(x, np.array([1, 1, 0], np.int64)), (2, 3)),
    "StridedSlice_int": (lambda x: x[1], (3, 2)),
    "StridedSlice_slice": (lambda x: x[1:, ::2], (3, 4)),
    "StridedSlice_negative_step": (lambda x: x[::-1, 2:0:-1], (3, 4)),
    "StridedSlice_ellipsis_newaxis": (lambda x: x[..., None, 1], (2, 3, 2)),
    "StridedSlice_scalar": (lambda x: x[1, 2], (2, 3)),
    "StridedSlice_tensor_index": (lambda x: x[df.constant(1), df.constant(1):], (3, 3)),
    "Fill": (lambda v: df.fill([2, 3], v), ()),
    "Fill_dynamic": (lambda v: df.fill(df.stack([df.constant(2), df.constant(2)]), v), ()),
    "PlaceholderWithDefault": (lambda x: df.placeholder_with_default(x, [None, 3]), (2, 3)),
    "BroadcastTo": (lambda x: grad_ops.broadcast_to(x, [2, 3, 3]), (3, 1)),
    "SumToShape": (lambda x: grad_ops.sum_to_shape(x, [3, 1]), (2, 3, 4)),
    "GatherGrad": (lambda g: grad_ops.gather_grad(g, [1, 1, 0], [3, 2], axis=0), (3, 2)),
    "StridedSliceGrad": (lambda g: grad_ops.strided_slice_grad(
        g, [3, 4], (("slice", 1, None, None), ("int", 2))), (2,)),
}


@pytest.mark.parametrize("partial", PARTIAL)
@pytest.mark.parametrize("case", sorted(ARRAY_ONE_INPUT))
def test_array_op_gradient(case, partial):
    fn, shape = ARRAY_ONE_INPUT[case]
    rng, seed = fresh_rng()
    check_gradients(fn, [generic(rng, shape)], partial=partial, rng=rng, seed=seed)


JOINS = {
    "ConcatV2_axis0": (lambda a, b, c: df.concat([a, b, c], 0), [(1, 3), (2, 3), (1, 3)]),
    "ConcatV2_axis1": (lambda a, b: df.concat([a, b], 1), [(2, 1), (2, 3)]),
    "ConcatV2_axis_neg": (lambda a, b: df.concat([a, b], -1), [(2, 2, 1), (2, 2, 2)]),
    "Pack_axis0": (lambda a, b: df.stack([a, b]), [(2, 3), (2, 3)]),
    "Pack_axis_neg": (lambda a, b, c: df.stack([a, b, c], axis=-1), [(2, 3)] * 3),
    "Pack_scalars": (lambda a, b: df.stack([a, b]), [(), ()]),
    "AddN": (lambda a, b, c: df.add_n([a, b, c]), [(2, 3)] * 3),
    "SelectV2": (lambda a, b: df.where(df.constant([True, False, True]), a, b),
                 [(2, 3), (3,)]),
    "SelectV2_scalar": (lambda a, b: df.where(df.constant([[True], [False]]), a, b),
                        [(), (2, 3)]),
}


@pytest.mark.parametrize("partial", PARTIAL)
@pytest.mark.parametrize("case", sorted(JOINS))
def test_multi_input_array_op_gradient(case, partial):
    fn, shapes = JOINS[case]
    rng, seed = fresh_rng()
    check_gradients(fn, [generic(rng, s) for s in shapes], partial=partial, rng=rng, seed=seed)


def test_gather_gradient_with_unknown_rank(graph):
    # Repeated indices accumulate: row 2 is picked twice.
    x = df.placeholder(df.float64)
    g, = df.gradients(df.gather(x, [2, 0, 2]), [x])
    assert isinstance(g, df.IndexedSlices)
    with df.Session() as sess:
        value = sess.run(df.convert_to_tensor(g), {x: np.ones((3, 2))})
    np.testing.assert_array_equal(value, [[1, 1], [0, 0], [2, 2]])


def test_index_inputs_get_no_gradient(graph):
    x = df.placeholder(df.float64, [3])
    i = df.placeholder(df.int32, [])
    shape = df.placeholder(df.int32, [2])
    grads = df.gradients(df.reduce_sum(df.reshape(x[i:], shape)), [i, shape])
    assert grads == [None, None]


# -- no gradient / disabled gradient -------------------------------------------------------------

@pytest.mark.parametrize("fn", [df.zeros_like, df.ones_like, df.shape, df.size, df.rank,
                                lambda x: df.cast(df.greater(x, 0.0), df.float64),
                                lambda x: df.cast(df.where(df.greater(x, 0.0)), df.float64),
                                lambda x: df.one_hot(df.cast(x, df.int32), 3)],
                         ids=["ZerosLike", "OnesLike", "Shape", "Size", "Rank", "Greater",
                              "Where", "OneHot"])
def test_not_differentiable_ops_give_none(graph, fn):
    x = df.placeholder(df.float64, [3])
    y = fn(x)
    y = y if y.dtype.is_floating else df.cast(y, df.float64)
    assert df.gradients(y, [x]) == [None]


def test_prevent_gradient_raises_lookup_error(graph):
    x = df.placeholder(df.float64, [3])
    y = graph.create_op("PreventGradient", [x], {"message": "no second derivative"},
                        name="blocked").outputs[0]
    with pytest.raises(LookupError, match="blocked.*no second derivative"):
        df.gradients(df.reduce_sum(y), [x])


def test_every_registered_op_has_a_gradient_or_is_declared_not_differentiable():
    # Only the runtime's own ops: other tests register throwaway op types.
    runtime_ops = [t for t in registered_ops()
                   if get_op_def(t).infer.__module__.startswith("dataflow.")]
    assert {"MatMul", "Switch", "Merge", "Enter", "Exit", "NextIteration"} <= set(runtime_ops)
    missing = [t for t in runtime_ops
               if get_gradient_function(SimpleNamespace(type=t)) is None
               and not is_not_differentiable(t)]
    assert missing == []


# -- the loop primitives: Enter, NextIteration, Exit ---------------------------------------------

@pytest.mark.parametrize("partial", PARTIAL)
@pytest.mark.parametrize("shape", [(), (2, 3)], ids=str)
def test_loop_primitive_gradients(shape, partial):
    """``v`` enters as a loop variable (Enter, then Merge/NextIteration every iteration,
    Exit at the end) and ``x`` as a loop invariant (constant Enter, whose gradient sums
    over the iterations): ``v * x**3`` after three iterations."""
    rng, seed = fresh_rng()

    def build(v, x):
        _, out = df.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * x), (0, v))
        return out
    check_gradients(build, [generic(rng, shape), generic(rng, shape)], partial=partial,
                    rng=rng, seed=seed)


def test_loop_primitive_gradient_ops(graph):
    """Each primitive's gradient is its mirror in the backprop loop: Exit -> Enter,
    NextIteration -> NextIteration, a constant Enter -> an accumulator leaving by Exit."""
    v = df.placeholder(df.float64, [])
    x = df.placeholder(df.float64, [])
    _, out = df.while_loop(lambda i, a: i < 3, lambda i, a: (i + 1, a * x), (0, v))
    before = {op.type: len(ops_of_type(graph, op.type)) for op in graph.get_operations()}
    dv, dx = df.gradients(out, [v, x])
    added = {t: len(ops_of_type(graph, t)) - before.get(t, 0)
             for t in ("Enter", "Exit", "NextIteration")}
    assert all(n > 0 for n in added.values()), added
    assert run([dv, dx], {v: 2.0, x: 1.5}) == pytest.approx([1.5 ** 3, 3 * 2.0 * 1.5 ** 2])


# -- hypothesis: broadcasting pairs drawn at random ------------------------------------------------

@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(shapes=hnp.mutually_broadcastable_shapes(num_shapes=2, min_dims=0, max_dims=3,
                                                 max_side=3),
       op_type=st.sampled_from(["AddV2", "Sub", "Mul", "RealDiv", "SquaredDifference"]),
       partial=st.booleans(), seed=st.integers(0, 2 ** 32 - 1))
def test_binary_op_gradient_random_broadcast(shapes, op_type, partial, seed):
    fn, gen_x, gen_y = BINARY[op_type]
    rng = np.random.default_rng(seed)
    x, y = gen_x(rng, shapes.input_shapes[0]), gen_y(rng, shapes.input_shapes[1])
    check_gradients(fn, [x, y], partial=partial, rng=rng, seed=seed)


# -- the gradient helper ops' kernels --------------------------------------------------------------

@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_sum_to_shape_kernel(graph, dtype):
    g = np.arange(24, dtype=dtype).reshape(2, 3, 4)
    to_row = run(grad_ops.sum_to_shape(g, [3, 1]))
    np.testing.assert_array_equal(to_row, g.sum(axis=(0, 2)).reshape(3, 1))
    assert to_row.dtype == dtype
    to_scalar = run(grad_ops.sum_to_shape(g, []))
    assert type(to_scalar) is dtype and to_scalar == g.sum()


def test_sum_to_shape_static_shape(graph):
    x = df.placeholder(df.float32, [None, 3])
    g = df.placeholder(df.float32, [4, 2, 3])
    assert grad_ops.sum_to_shape(g, df.shape(x)).shape.as_list() == [None, 3]


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_broadcast_to_kernel(graph, dtype):
    out = run(grad_ops.broadcast_to(np.array([[1], [2]], dtype=dtype), [3, 2, 2]))
    np.testing.assert_array_equal(out, np.broadcast_to([[1], [2]], (3, 2, 2)))
    assert out.dtype == dtype and out.flags.writeable
    scalar = run(grad_ops.broadcast_to(dtype(2), []))
    assert type(scalar) is dtype and scalar == 2


def test_reduced_shape_kernel(graph):
    np.testing.assert_array_equal(run(grad_ops.reduced_shape([2, 3, 4], (0, -1))), [1, 3, 1])
    np.testing.assert_array_equal(run(grad_ops.reduced_shape([2, 3], None)), [1, 1])


def test_gather_grad_kernel_sums_repeated_indices(graph):
    g = np.arange(12, dtype=np.float32).reshape(2, 3, 2)   # params (2, 4, 2), axis 1
    out = run(grad_ops.gather_grad(g, [3, 0, 3], [2, 4, 2], axis=1))
    expected = np.zeros((2, 4, 2), np.float32)
    np.add.at(expected, (slice(None), [3, 0, 3]), g)
    np.testing.assert_array_equal(out, expected)
    assert out.dtype == np.float32


def test_strided_slice_grad_kernel(graph):
    spec = (("slice", None, None, -1), ("int", 1), ("newaxis",))
    g = np.array([[1.0], [2.0], [3.0]])
    out = run(grad_ops.strided_slice_grad(g, [3, 2], spec))
    np.testing.assert_array_equal(out, [[0.0, 3.0], [0.0, 2.0], [0.0, 1.0]])


# -- second order: every op's gradient graph is itself differentiated ----------------------------------

def _first_gradients(fn):
    """``xs -> all first derivatives of sum(fn(xs)), flattened and joined``: its own
    gradient, checked by finite differences of it, holds the second derivatives."""
    def build(*xs):
        grads = df.gradients(fn(*xs), list(xs))
        return df.concat([df.reshape(g, [-1]) for g in grads], 0)
    return build


SECOND_ORDER = {
    **{f"{t}": (fn, [gen], [(2, 3)]) for t, (fn, gen) in UNARY.items()},
    **{f"{t}_broadcast": (fn, [gx, gy], [(2, 1), (3,)]) for t, (fn, gx, gy) in BINARY.items()},
    "Maximum": (df.maximum, None, [(2, 3), (3,)]),
    "MatMul": (lambda a, b: df.matmul(a, b, transpose_b=True), [generic, generic],
               [(2, 3), (4, 3)]),
    "Softmax": (df.nn.softmax, [generic], [(2, 3)]),
    "LogSoftmax": (df.nn.log_softmax, [generic], [(2, 3)]),
    "SoftmaxCrossEntropyWithLogits": (
        lambda z, t: df.nn.softmax_cross_entropy_with_logits(labels=t, logits=z),
        [generic, positive], [(2, 3), (2, 3)]),
    "Mean_axis": (lambda x: df.reduce_mean(df.square(x), axis=1), [generic], [(2, 3)]),
    "Sum_keepdims": (lambda x: df.reduce_sum(x * x * x, axis=0, keepdims=True), [generic],
                     [(2, 3)]),
    "Max": (lambda x: df.reduce_max(df.exp(x), axis=-1), None, [(2, 3)]),
    "Prod": (lambda x: df.reduce_prod(x, axis=0), [nonzero], [(3, 2)]),
    "Tile_Gather_Slice": (lambda x: df.gather(df.tile(x, [1, 2]), [0, 3], axis=1)[:, 1] ** 3.0,
                          [generic], [(2, 2)]),
    "Concat_Pack_Select": (lambda a, b: df.where(df.constant([True, False]),
                                                 df.concat([a, b], 0), df.stack([a, b]) ** 2.0),
                           [generic, generic], [(1, 2), (1, 2)]),
}


@pytest.mark.parametrize("partial", [False, True])
@pytest.mark.parametrize("case", sorted(SECOND_ORDER))
def test_second_order_gradient(case, partial):
    fn, gens, shapes = SECOND_ORDER[case]
    rng, seed = fresh_rng()
    values = distinct(rng, *shapes) if gens is None else [g(rng, s) for g, s in zip(gens, shapes)]
    check_gradients(_first_gradients(fn), values, partial=partial, rng=rng, seed=seed,
                    none_means_zero=True)
