"""Elementwise fusion: the plan-time pass (dataflow/runtime/fusion.py) and the CPU kernel
it uses (dataflow/kernels/numba_cpu/fused.py).

Random expressions run with fusion on and off: arithmetic-only ones must agree bit for
bit; with tanh/exp/log/sigmoid the fused loop uses dataflow/kernels/approx.py, so results must
agree within a first-order error bound built from that module's ulp bounds. Both the
small-value path (NumPy reference kernels) and the compiled loop are exercised (the
latter by lowering its size threshold).
"""
import glob
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import dataflow as df
import dataflow.kernels.numba_cpu  # noqa: F401  (registers the CPU FusedElementwise kernel)
from dataflow import ops as raw_ops
from dataflow.ops import grad_ops
from dataflow.runtime import fusion
from dataflow.runtime.plan import build_plan
from dataflow.kernels.numba_cpu import fused

BUILD = {
    "AddV2": df.add, "Sub": df.subtract, "Mul": df.multiply, "RealDiv": df.divide,
    "Maximum": df.maximum, "Minimum": df.minimum,
    "SquaredDifference": df.squared_difference,
    "TanhGrad": lambda y, dy: _activation_grad("TanhGrad", y, dy),
    "SigmoidGrad": lambda y, dy: _activation_grad("SigmoidGrad", y, dy),
    "ReluGrad": lambda dy, x: _activation_grad("ReluGrad", dy, x),
    "Neg": df.negative, "Square": df.square, "Sqrt": df.sqrt, "Rsqrt": df.rsqrt,
    "Abs": df.abs, "Reciprocal": df.reciprocal, "Relu": df.nn.relu,
    "Exp": df.exp, "Log": df.log, "Tanh": df.tanh, "Sigmoid": df.sigmoid,
}


def _activation_grad(op_type, y, dy):
    # These ops take equal shapes (no broadcasting): otherwise multiply instead.
    if y.shape.as_list() != dy.shape.as_list():
        return y * dy
    return grad_ops.activation_grad(op_type, y, dy)


TRANSCENDENTAL = ["Exp", "Log", "Tanh", "Sigmoid"]
EXACT_UNARY = ["Neg", "Square", "Sqrt", "Rsqrt", "Abs", "Reciprocal", "Relu"]
BINARY = ["AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum", "SquaredDifference",
          "TanhGrad", "SigmoidGrad", "ReluGrad"]

# float64 versions of every op, for the error bound of approximated expressions.
F64 = {
    "AddV2": np.add, "Sub": np.subtract, "Mul": np.multiply, "RealDiv": np.divide,
    "Maximum": np.maximum, "Minimum": np.minimum,
    "SquaredDifference": lambda x, y: (x - y) ** 2,
    "TanhGrad": lambda y, dy: (dy * (1 - y * y) if np.shape(y) == np.shape(dy) else y * dy),
    "SigmoidGrad": lambda y, dy: (dy * y * (1 - y) if np.shape(y) == np.shape(dy) else y * dy),
    "ReluGrad": lambda dy, x: (np.where(x > 0, dy, 0) if np.shape(x) == np.shape(dy)
                               else dy * x),
    "Neg": np.negative, "Square": np.square, "Sqrt": np.sqrt, "Rsqrt": lambda x: 1 / np.sqrt(x),
    "Abs": np.abs, "Reciprocal": lambda x: 1 / x, "Relu": lambda x: np.maximum(x, 0),
    "Exp": np.exp, "Log": np.log, "Tanh": np.tanh, "Sigmoid": lambda x: 1 / (1 + np.exp(-x)),
}
NUM_INPUTS = 3
CONSTS = [0.5, -2.0, 3.0, 0.0, 1.5]


def test_every_fusable_op_is_tested_and_generated():
    assert set(BUILD) == set(fusion.FUSABLE)
    for op_type, arity in fusion.FUSABLE.items():
        args = ["a", "b"][:arity]
        assert fused._nb_template(op_type).format(*args)
        assert fused._py_template(op_type).format(*args)


# -- random expressions ----------------------------------------------------------------------

@st.composite
def _trees(draw, unary, max_ops=6):
    """A random expression of 2..max_ops ops; its first leaf is always an input. Some
    results feed two ops (the same tuple object twice): DAGs, not only trees."""
    leaves = []

    def leaf():
        if leaves and draw(st.integers(0, 3)) == 0:
            node = ("const", draw(st.sampled_from(CONSTS)))
        else:
            node = ("in", draw(st.integers(0, NUM_INPUTS - 1)) if leaves else 0)
        leaves.append(node)
        return node

    def operand(pool):
        if pool and draw(st.booleans()):
            i = draw(st.integers(0, len(pool) - 1))
            return pool[i] if draw(st.integers(0, 3)) == 0 else pool.pop(i)
        return leaf()

    pool = []
    for _ in range(draw(st.integers(2, max_ops))):
        if draw(st.booleans()):
            pool.append((draw(st.sampled_from(unary)), operand(pool)))
        else:
            pool.append((draw(st.sampled_from(BINARY)), operand(pool), operand(pool)))
    while len(pool) > 1:  # join what is left into one tree
        pool.append((draw(st.sampled_from(BINARY)), pool.pop(), pool.pop()))
    return pool[0]


@st.composite
def _cases(draw, unary, min_ndim=0, max_ndim=3):
    tree = draw(_trees(unary))
    dtype = draw(st.sampled_from([np.float32, np.float64]))
    out_shape = tuple(draw(st.lists(st.integers(1, 5), min_size=min_ndim, max_size=max_ndim)))
    shapes = [out_shape]  # input 0 has the output's shape
    for _ in range(NUM_INPUTS - 1):
        kind = draw(st.sampled_from(["same", "broadcast", "scalar"]))
        if kind == "same":
            shapes.append(out_shape)
        elif kind == "scalar":
            shapes.append(())
        else:  # drop leading axes and stretch some axes: NumPy broadcasting
            lead = draw(st.integers(0, len(out_shape)))
            shapes.append(tuple(d if draw(st.booleans()) else 1 for d in out_shape[lead:]))
    seed = draw(st.integers(0, 2 ** 31 - 1))
    return tree, dtype, shapes, seed


def _build(tree, inputs, dtype, memo=None):
    """The graph of ``tree``; a subtree object met twice is built once (a shared value)."""
    memo = {} if memo is None else memo
    if id(tree) not in memo:
        if tree[0] == "in":
            memo[id(tree)] = inputs[tree[1]]
        elif tree[0] == "const":
            memo[id(tree)] = df.constant(tree[1], dtype=dtype)
        else:
            memo[id(tree)] = BUILD[tree[0]](*(_build(c, inputs, dtype, memo)
                                             for c in tree[1:]))
    return memo[id(tree)]


def _values(shapes, dtype, seed):
    rng = np.random.default_rng(seed)
    vals = []
    for shape in shapes:
        v = rng.uniform(-3, 3, shape).astype(dtype)
        vals.append(v[()] if v.ndim == 0 else v)  # scalars arrive as NumPy scalars
    return vals


_FULL_TRACE = df.RunOptions(trace_level=df.RunOptions.FULL_TRACE)


def _nodes_run(meta):
    """How many nodes a traced loop-free step ran (one record per node)."""
    return sum(len(d.node_stats) for d in meta.step_stats.dev_stats)


def _run_both(tree, dtype, shapes, values):
    """(fused, unfused, fused node count, unfused node count)."""
    with df.Graph().as_default():
        phs = [df.placeholder(dtype, shape) for shape in shapes]
        y = _build(tree, phs, dtype)
        feed = dict(zip(phs, values))
        results = []
        for on in (True, False):
            meta = df.RunMetadata()
            with df.Session(config=df.ConfigProto(fuse_elementwise=on)) as sess, \
                    np.errstate(all="ignore"):
                results.append((sess.run(y, feed_dict=feed, run_metadata=meta,
                                         options=_FULL_TRACE),
                                _nodes_run(meta)))
    (a, na), (b, nb) = results
    return a, b, na, nb


def _num_ops(tree):
    return 0 if tree[0] in ("in", "const") else 1 + sum(_num_ops(c) for c in tree[1:])


def _check_same_kind(a, b, dtype):
    assert type(a) is type(b)
    assert np.shape(a) == np.shape(b)
    assert np.asarray(a).dtype == np.asarray(b).dtype == dtype


def _check_exact(tree, dtype, shapes, seed):
    a, b, na, nb = _run_both(tree, dtype, shapes, _values(shapes, dtype, seed))
    _check_same_kind(a, b, dtype)
    np.testing.assert_array_equal(a, b)
    assert na < nb  # the expression (2 ops or more, reading an input) was fused


@pytest.fixture
def compiled_path():
    """Route every non-0-d value through the compiled loop."""
    old = fused.set_numba_min_size(1)
    yield
    fused.set_numba_min_size(old)


@settings(max_examples=60, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(_cases(EXACT_UNARY))
def test_random_arithmetic_small_path_is_exact(case):
    _check_exact(*case)


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(_cases(EXACT_UNARY, min_ndim=1, max_ndim=2))
def test_random_arithmetic_compiled_path_is_exact(compiled_path, case):
    _check_exact(*case)


def _eval64(tree, values, perturb=None, counter=None):
    """``tree`` in float64; ``perturb = (node index, factor)`` scales one node's value."""
    counter = counter if counter is not None else [0]
    if tree[0] == "in":
        return np.asarray(values[tree[1]], np.float64)
    if tree[0] == "const":
        return np.float64(tree[1])
    args = [_eval64(c, values, perturb, counter) for c in tree[1:]]
    idx = counter[0]
    counter[0] += 1
    out = F64[tree[0]](*args)
    if perturb is not None and perturb[0] == idx:
        out = out * perturb[1]
    return out


def _error_bound(tree, values, dtype, ref):
    """First-order bound: every op's result may be off by a few ulp (4 for the
    approximations, 1 for correctly rounded ops, doubled), propagated to the output
    with its sensitivity |d out / d v * v| (central differences in float64)."""
    eps = np.finfo(dtype).eps
    h = 1e-6
    total = np.zeros(np.shape(ref))
    for j in range(_num_ops(tree)):
        up = _eval64(tree, values, (j, 1 + h))
        down = _eval64(tree, values, (j, 1 - h))
        total = total + np.abs(up - down) / (2 * h)
    return 16 * eps * (total + np.abs(np.asarray(ref, np.float64)))


def _check_approx(tree, dtype, shapes, seed):
    values = _values(shapes, dtype, seed)
    a, b, _, _ = _run_both(tree, dtype, shapes, values)
    _check_same_kind(a, b, dtype)
    with np.errstate(all="ignore"):
        bound = _error_bound(tree, values, dtype, b)
    a64, b64 = np.asarray(a, np.float64), np.asarray(b, np.float64)
    both_finite = np.isfinite(a64) & np.isfinite(b64) & np.isfinite(bound)
    assert np.all(np.abs(a64 - b64)[both_finite] <= bound[both_finite])
    # Non-finite results agree, unless the bound itself is undefined there.
    clear = np.isfinite(bound) & ~both_finite
    np.testing.assert_array_equal(a64[clear], b64[clear])


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(_cases(EXACT_UNARY + TRANSCENDENTAL * 2))
def test_random_transcendental_small_path_is_exact(case):
    # The small-value path composes the NumPy reference kernels: bit-exact.
    _check_exact(*case)


@settings(max_examples=12, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(_cases(EXACT_UNARY + TRANSCENDENTAL * 2, min_ndim=1, max_ndim=2))
def test_random_transcendental_compiled_path_within_bounds(compiled_path, case):
    _check_approx(*case)


# -- structure of the pass ---------------------------------------------------------------------

def _plan(fetches, feeds=(), fuse=True, targets=()):
    """A plan of the default graph (kernels are not built: the pass's result is what
    these tests look at)."""
    return build_plan(df.get_default_graph(), list(fetches), list(targets), list(feeds),
                      lambda op: None, fuse_elementwise=fuse)


def _groups(plan):
    return {root.name: sorted(m.name for m in plan.fusion.members[root])
            for root in plan.fusion.exprs}


def test_tree_becomes_one_node_with_literals_and_external_inputs(graph):
    a = df.placeholder(df.float32, [4], name="a")
    b = df.placeholder(df.float32, [4], name="b")
    y = df.add(df.tanh(a * b + 1.0, name="t") * 0.5, a, name="y")
    plan = _plan([y], [a, b])
    assert len(plan.nodes) == 1
    expr = plan.fusion.exprs[y.op]
    assert expr.inputs == (a, b)  # a used twice, one input
    assert expr.dtype == "float32"
    assert [op for op, _ in expr.program] == ["Mul", "AddV2", "Tanh", "Mul", "AddV2"]
    assert expr.program[1][1][1] == ("const", (1.0).hex())
    assert expr.program[-1][1] == (("value", 3), ("input", 0))


def test_dag_with_reuse_inside_the_group_is_fused(graph):
    a = df.placeholder(df.float64, [3])
    u = df.square(a)
    y = df.tanh(u) + u  # u has two consumers, both in the group
    plan = _plan([y], [a])
    assert len(plan.nodes) == 1
    with df.Session() as sess:
        x = np.array([0.5, -1.0, 2.0])
        np.testing.assert_array_equal(sess.run(y, {a: x}), np.tanh(x * x) + x * x)


def test_shared_intermediate_is_not_fused_across(graph):
    a = df.placeholder(df.float32, [3])
    u = df.multiply(a, a, name="u")
    y1 = df.tanh(u + 1.0, name="y1")
    y2 = df.exp(u * 2.0, name="y2")
    plan = _plan([y1, y2], [a])
    assert "u" not in {op.name for op in plan.fusion.absorbed}
    assert u.op in plan.ops
    groups = _groups(plan)
    assert all("u" not in members for members in groups.values())
    assert set(groups) == {"y1", "y2"}


def test_fetched_intermediate_is_kept(graph):
    a = df.placeholder(df.float32, [3])
    u = df.multiply(a, 3.0, name="u")
    y = df.tanh(u + 1.0)
    plan = _plan([u, y], [a])
    assert u.op in plan.ops and u.op not in plan.fusion.absorbed
    with df.Session() as sess:
        x = np.array([0.1, 0.2, 0.3], np.float32)
        uu, yy = sess.run([u, y], {a: x})
        np.testing.assert_array_equal(uu, x * np.float32(3))
        np.testing.assert_array_equal(yy, np.tanh(x * np.float32(3) + np.float32(1)))


def test_fed_intermediate_is_an_input(graph):
    a = df.placeholder(df.float32, [3])
    u = df.multiply(a, 3.0, name="u")
    y = df.tanh(u + 1.0, name="y")
    plan = _plan([y], [u])
    assert plan.fusion.exprs[y.op].inputs == (u,)
    with df.Session() as sess:
        x = np.array([0.1, 0.2, 0.3], np.float32)
        np.testing.assert_array_equal(sess.run(y, {u: x}), np.tanh(x + np.float32(1)))


def test_control_dependencies_stop_fusion(graph):
    a = df.placeholder(df.float32, [3])
    v = df.Variable(np.zeros(3, np.float32))
    bump = v.assign_add(np.ones(3, np.float32))
    with df.control_dependencies([bump]):
        u = df.multiply(a, a, name="u")       # control edge into u
    w = df.add(a, 1.0, name="w")
    with df.control_dependencies([w.op]):      # control edge out of w
        z = df.identity(a)
    y = df.tanh(u + w, name="y")
    plan = _plan([y, z], [a])
    absorbed = {op.name for op in plan.fusion.absorbed}
    assert "u" not in absorbed and "w" not in absorbed
    assert u.op in plan.ops and w.op in plan.ops
    with df.Session() as sess:
        sess.run(df.global_variables_initializer())
        x = np.array([0.1, 0.2, 0.3], np.float32)
        yy, _ = sess.run([y, z], {a: x})
        np.testing.assert_array_equal(yy, np.tanh(x * x + (x + np.float32(1))))
        np.testing.assert_array_equal(sess.run(v), np.ones(3, np.float32))


def test_ops_on_different_devices_are_not_fused_together(graph):
    a = df.placeholder(df.float32, [3])
    with df.device("/cpu:1"):
        u = df.multiply(a, 2.0, name="u")
        u2 = df.add(u, 1.0, name="u2")
    y = df.tanh(u2, name="y")
    y2 = df.square(y, name="y2")
    plan = _plan([y2], [a])
    assert _groups(plan) == {"u2": ["u", "u2"], "y2": ["y", "y2"]}
    with df.Session(config=df.ConfigProto(device_count={"CPU": 2})) as sess:
        x = np.array([0.1, 0.2, 0.3], np.float32)
        np.testing.assert_array_equal(sess.run(y2, {a: x}),
                                      np.square(np.tanh(x * np.float32(2) + np.float32(1))))


def test_a_device_type_without_a_fused_kernel_is_not_fused(graph):
    a = df.placeholder(df.float32, [3])
    y = df.tanh(a * 2.0)
    ops = [a.op, y.op.inputs[0].op, y.op]
    frames = {op: None for op in ops}
    result = fusion.fuse_elementwise(ops, frames, {a}, set(), {y.op}, lambda op: "NOSUCH")
    assert result is fusion.NO_FUSION
    result = fusion.fuse_elementwise(ops, frames, {a}, set(), {y.op}, lambda op: "CPU")
    assert list(result.exprs) == [y.op]


def test_mixed_dtypes_are_separate_groups(graph):
    a = df.placeholder(df.float32, [3])
    b = df.placeholder(df.float64, [3])
    y = df.cast(df.tanh(a * 2.0), df.float64) * b + 1.0
    plan = _plan([y], [a, b])
    assert sorted(e.dtype for e in plan.fusion.exprs.values()) == ["float32", "float64"]


def test_fusion_inside_while_loop_body(graph):
    x = df.placeholder(df.float32, [4])
    outside = df.multiply(x, 0.5, name="outside")

    def body(i, h):
        return i + 1, df.tanh(h * outside + 1.0) * 0.9 - 0.1

    _, h = df.while_loop(lambda i, h: i < 5, body, (0, df.zeros([4], df.float32)))
    plan = _plan([h], [x])
    [loop_frame] = [f for f in plan.frames.values() if f is not plan.root]
    loop_groups = [root for root in plan.fusion.exprs if root in loop_frame.ops]
    assert loop_groups and all(len(plan.fusion.members[r]) >= 4 for r in loop_groups)
    assert all(m.name != "outside" for r in loop_groups for m in plan.fusion.members[r])
    xv = np.array([0.1, -0.2, 0.3, 2.0], np.float32)
    expected = np.zeros(4, np.float32)
    for _ in range(5):
        expected = (np.tanh(expected * (xv * np.float32(0.5)) + np.float32(1))
                    * np.float32(0.9) - np.float32(0.1))
    # The interpreter's fused groups (compile_loops=False): NumPy's tanh exactly. A compiled
    # frame is within the tanh approximation's ulp bound instead (tests/test_loop_compiler*).
    for on in (True, False):
        config = df.ConfigProto(fuse_elementwise=on, compile_loops=False)
        with df.Session(config=config) as sess:
            np.testing.assert_array_equal(sess.run(h, {x: xv}), expected)


def test_fusion_in_cond_branches_and_dead_tokens(graph):
    x = df.placeholder(df.float32, [])
    p = df.placeholder(df.bool, [])
    _, sw_true = raw_ops.switch(x, p)
    inner_t = df.tanh(sw_true * 2.0 + 1.0, name="inner_t")  # dead when p is False
    r = df.cond(p, lambda: df.sqrt(df.abs(x * 3.0) + 1.0), lambda: df.square(x - 1.0) * 2.0)
    plan = _plan([inner_t, r], [x, p])
    assert inner_t.op in plan.fusion.exprs and len(plan.fusion.exprs) >= 3
    for on in (True, False):
        with df.Session(config=df.ConfigProto(fuse_elementwise=on)) as sess:
            t_tok, r_tok = sess.run_tokens([inner_t, r], {x: 0.5, p: True})
            assert t_tok == (np.tanh(np.float32(0.5) * np.float32(2) + np.float32(1)), False)
            assert r_tok == (np.sqrt(np.abs(np.float32(0.5) * np.float32(3)) + np.float32(1)),
                             False)
            t_tok, r_tok = sess.run_tokens([inner_t, r], {x: 0.5, p: False})
            assert t_tok == (None, True)
            assert r_tok == (np.square(np.float32(0.5) - np.float32(1)) * np.float32(2), False)
            assert type(r_tok[0]) is np.float32


def test_gradients_are_fused(graph):
    w = df.placeholder(df.float32, [3])
    y = df.reduce_sum(df.tanh(w * 2.0) * df.sigmoid(w))
    (g,) = df.gradients(y, [w])
    on = _plan([g], [w])
    off = _plan([g], [w], fuse=False)
    assert on.fusion.nodes_removed > 0 and len(on.nodes) < len(off.nodes)
    wv = np.array([0.3, -1.0, 2.0], np.float32)
    results = []
    for flag in (True, False):
        with df.Session(config=df.ConfigProto(fuse_elementwise=flag)) as sess:
            results.append(sess.run(g, {w: wv}))
    np.testing.assert_array_equal(results[0], results[1])


# -- switches -----------------------------------------------------------------------------------

def _node_count(config=None):
    with df.Graph().as_default():
        a = df.placeholder(df.float32, [3])
        y = df.tanh(a * 2.0 + 1.0)
        meta = df.RunMetadata()
        with df.Session(config=config) as sess:
            out = sess.run(y, {a: np.ones(3, np.float32)}, run_metadata=meta,
                           options=_FULL_TRACE)
        np.testing.assert_array_equal(out, np.tanh(np.full(3, 3.0, np.float32)))
        return _nodes_run(meta)


def test_on_by_default_and_config_switch():
    assert _node_count() == 1
    assert _node_count(df.ConfigProto(fuse_elementwise=False)) == 3


def test_environment_variable_switch(monkeypatch):
    monkeypatch.setenv("DATAFLOW_FUSION", "0")
    assert _node_count() == 3
    monkeypatch.setenv("DATAFLOW_FUSION", "1")
    assert _node_count() == 1


# -- the compiled loop ---------------------------------------------------------------------

def _expr(program, n, dtype="float32"):
    return fusion.FusedExpr(tuple(range(n)), program, dtype)


TANH_CHAIN = (("Mul", (("input", 0), ("input", 1))), ("AddV2", (("value", 0), ("input", 2))),
              ("Tanh", (("value", 1),)), ("Mul", (("value", 2), ("const", (0.5).hex()))),
              ("AddV2", (("value", 3), ("input", 0))))


def _tanh_chain_ref(a, b, c):
    return np.tanh(a * b + c) * np.float32(0.5) + a


LOOP_OF_LAYOUT = {"flat": None, "rows": "rows", "bias_split": "rows", "broadcast": 2,
                  "transposed": 2, "split": None, "column_slices": "rows",
                  "column_slices_split": "rows", "column_slices_3d": "rows",
                  "row_gaps_3d": 3}


def _column_slice(rng, shape, extra=13, offset=5):
    """A view of ``shape`` whose rows are contiguous but ``extra`` elements apart (a column
    slice of a wider matrix, as an LSTM's gates are cut from one matmul)."""
    wide = rng.standard_normal(shape[:-1] + (shape[-1] + extra,)).astype(np.float32)
    return wide[..., offset:offset + shape[-1]]


@pytest.mark.parametrize("layout", list(LOOP_OF_LAYOUT))
def test_compiled_loop_layouts(layout):
    rng = np.random.default_rng(1)
    n = (fused.PARALLEL_MIN_SIZE + 7 if layout in ("split", "bias_split", "column_slices_split")
         else 5000)
    a = rng.standard_normal((n // 50, 50)).astype(np.float32)
    b = rng.standard_normal(a.shape).astype(np.float32)
    c = rng.standard_normal(a.shape).astype(np.float32)
    if layout in ("rows", "bias_split"):    # a bias along the last axis
        b, c = b[0], np.float32(0.25)
    elif layout == "broadcast":             # a column: the general loop nest
        b, c = b[:, :1], np.float32(0.25)
    elif layout == "transposed":
        a, b, c = a.T, b.T, c.T
    elif layout in ("column_slices", "column_slices_split"):  # strided rows, a bias
        a, b, c = _column_slice(rng, a.shape), _column_slice(rng, a.shape, 1, 0), b[0]
    elif layout == "column_slices_3d":      # leading axes that merge into one
        a, b = _column_slice(rng, (10, 10, 50)), _column_slice(rng, (10, 10, 50), 3, 3)
        c = rng.standard_normal(a.shape).astype(np.float32)
    elif layout == "row_gaps_3d":           # leading axes that do not merge: loop nest
        a = rng.standard_normal((10, 12, 50)).astype(np.float32)[:, :10]
        b, c = a + 1, np.float32(0.5)
    fn = fused.python_function(_expr(TANH_CHAIN, 3))
    fn.__globals__["_compiled"].kernels.clear()  # the function is cached across layouts
    out = fn(a, b, c)
    loops = {key[1] for key in fn.__globals__["_compiled"].kernels}
    assert LOOP_OF_LAYOUT[layout] in loops
    if layout.startswith("column_slices"):
        assert {key[0] for key in fn.__globals__["_compiled"].kernels} & {"wwr", "wwa"}
    ref = _tanh_chain_ref(a, b, c)
    assert out.shape == ref.shape and out.dtype == np.float32
    # tanh within 3 ulp of its value, then * 0.5 + a: a few ulp of the result's scale.
    np.testing.assert_allclose(out, ref, rtol=0, atol=8 * np.finfo(np.float32).eps
                               * (1 + np.abs(a)).max())


def test_compiled_loop_without_approximations_matches_libm():
    old = fused.use_approx(False)
    try:
        program = TANH_CHAIN[:3] + (("Mul", (("value", 2), ("const", (0.25).hex()))),)
        fn = fused.python_function(_expr(program, 3, "float64"))
        x = np.linspace(-4, 4, 6000)
        # Numba's np.tanh is the C library's tanh, as Python's math.tanh.
        libm = np.array([math.tanh(v) for v in x * x + x])
        np.testing.assert_array_equal(fn(x, x, x), libm * 0.25)
    finally:
        fused.use_approx(old)


_CACHED_KERNEL = """
import sys, numpy as np
from dataflow.kernels.numba_cpu import fused
program = (("Mul", (("input", 0), ("const", (1.0 / 3.0).hex()))), ("Sqrt", (("value", 0),)))
kernel = fused.numba_kernel(program, "float64", "a", None)
x = np.arange(10.0)
out = np.empty(10)
kernel(out, x)
assert np.array_equal(out, np.sqrt(x * (1.0 / 3.0)))
print(sum(kernel.stats.cache_hits.values()), sum(kernel.stats.cache_misses.values()))
"""


def test_loop_modules_are_cached_on_disk_across_processes(tmp_path):
    env = {**os.environ, "DATAFLOW_CACHE_DIR": str(tmp_path)}
    runs = [subprocess.run([sys.executable, "-c", _CACHED_KERNEL], env=env, check=True,
                           capture_output=True, text=True).stdout.split()
            for _ in range(2)]
    assert runs == [["0", "1"], ["1", "0"]]  # compiled once, then loaded from the cache
    [source] = glob.glob(os.path.join(tmp_path, "dataflow_fused_*.py"))
    with open(source) as f:
        assert "def kernel(out, a0):" in f.read()


def test_large_outputs_are_reused_only_when_dead():
    fn = fused.python_function(_expr(TANH_CHAIN[:2], 3))  # a * b + c
    n = fused.REUSE_MIN_BYTES // 4
    ones, twos = np.ones(n, np.float32), np.full(n, 2, np.float32)
    held = fn(ones, ones, ones)
    again = fn(twos, twos, twos)
    assert again is not held and held[0] == 2 and again[0] == 6  # held: not overwritten
    address = again.__array_interface__["data"][0]
    del again
    third = fn(ones, twos, ones)
    assert third.__array_interface__["data"][0] == address  # the dead one was reused
    np.testing.assert_array_equal(third, np.full(n, 3, np.float32))
    np.testing.assert_array_equal(held, np.full(n, 2, np.float32))


@pytest.mark.parametrize("n", [3, 20000])  # the NumPy path and the compiled loop
def test_an_error_in_a_fused_node_names_its_root(graph, n):
    a = df.placeholder(df.float32, [None])
    b = df.placeholder(df.float32, [None])
    y = df.tanh(a * b + 1.0, name="root")
    with df.Session() as sess:
        with pytest.raises(df.errors.InvalidArgumentError, match="root") as info:
            sess.run(y, {a: np.ones(n, np.float32), b: np.ones(n + 1, np.float32)})
    assert info.value.op is y.op
