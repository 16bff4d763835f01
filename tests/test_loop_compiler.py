"""The loop compiler (dataflow/loopc): compiled frames against the interpreter and the spec.

Every test here states ``compile_loops`` explicitly ("eager": compiled before the first
run; False: interpreted), so the figures do not depend on background compiles.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

import dataflow as df
from dataflow.loopc import wait_for_compiles
from tests.graph_gen import programs, quiet_numpy
from tests.test_differential import (NOT_COMPUTED, SETTINGS, assert_same_tokens,
                                     seeds_strategy, spec_tokens)
from tests.tf_reference import grad_programs
from tests.test_tf_reference_grads import FIXTURE

EAGER = df.ConfigProto(compile_loops="eager")
OFF = df.ConfigProto(compile_loops=False)


def tokens(graph, fetches, feeds, config, fold_constants=True):
    config.fold_constants = fold_constants
    with df.Session(graph=graph, config=config) as sess:
        md = df.RunMetadata()
        try:
            out = sess.run_tokens(fetches, feeds, run_metadata=md)
        except df.errors.InternalError as e:
            assert "without computing fetch" in str(e), e
            out = NOT_COMPUTED
    return out, md


def run(fetches, feeds=None, config=EAGER, graph=None, **kw):
    with df.Session(graph=graph, config=config) as sess:
        md = df.RunMetadata()
        out = sess.run(fetches, feeds, run_metadata=md, **kw)
    return out, md


# -- the differential suite, compiled and interpreted ---------------------------------------

def check_both(program, seeds):
    note(repr(program))
    graph, fetches, feeds = program.build()
    with quiet_numpy():
        compiled, md = tokens(graph, fetches, feeds, df.ConfigProto(compile_loops="eager"),
                              program.fold_constants)
        interpreted, _ = tokens(graph, fetches, feeds, df.ConfigProto(compile_loops=False),
                                program.fold_constants)
        assert_same_tokens(interpreted, compiled, fetches)
        for seed in seeds:
            assert_same_tokens(spec_tokens(graph, fetches, feeds, seed), compiled, fetches)
    return md


@settings(max_examples=15, **SETTINGS)
@given(program=programs(max_statements=8), seeds=seeds_strategy)
def test_random_programs_compiled_and_interpreted_agree(program, seeds):
    check_both(program, seeds)


@settings(max_examples=15, **SETTINGS)
@given(program=programs(max_statements=6, nested=True), seeds=seeds_strategy)
def test_nested_loops_and_conds_compiled_and_interpreted_agree(program, seeds):
    check_both(program, seeds)


def test_generated_programs_do_compile():
    """The differential programs above are not all interpreted: the shapes they use
    (while loops with conds, raw frames, nested loops) compile."""
    g = df.Graph()
    with g.as_default():
        def outer(i, v):
            def inner(j, u):
                u = df.cond(j < 1, lambda: u + 1.0, lambda: u * 2.0)
                return j + 1, u
            _, v = df.while_loop(lambda j, u: j < 3, inner, (df.constant(0), v))
            return i + 1, v
        _, v = df.while_loop(lambda i, v: i < 2, outer,
                             (df.constant(0), df.constant(1.0, df.float64)))
    out, md = tokens(g, [v], {}, df.ConfigProto(compile_loops="eager"))
    assert md.compiled_frames == ["while/while/while_context", "while/while_context"]
    assert md.interpreted_frames == {}
    assert_same_tokens(spec_tokens(g, [v], {}, 0), out, [v])


# -- lowerings against the NumPy kernels ----------------------------------------------------

UNARY_FLOAT = ["Neg", "Square", "Abs", "Sign", "Floor", "Ceil", "Sqrt", "Rsqrt", "Reciprocal",
               "Relu", "Exp", "Log", "Tanh", "Sigmoid", "Sin", "Cos"]
BINARY_FLOAT = ["AddV2", "Sub", "Mul", "RealDiv", "Maximum", "Minimum", "SquaredDifference"]
COMPARE = ["Less", "LessEqual", "Greater", "GreaterEqual", "Equal", "NotEqual"]
BINARY_INT = ["AddV2", "Sub", "Mul", "Maximum", "Minimum", "FloorDiv", "FloorMod"]
# Within the bounds of dataflow/kernels/approx.py (and 1 ulp of libm for sin/cos).
APPROX_RTOL = {"float32": 3.2e-7 * 2, "float64": 5 * 2.3e-16}
APPROXIMATE = {"Exp", "Log", "Tanh", "Sigmoid", "Sin", "Cos"}


def _op_graph(dtype, shape, data):
    """One loop whose body runs every op under test on invariant inputs; the op results
    are loop variables (so each is an Exit), computed in each of 2 iterations."""
    x = df.placeholder(dtype, shape)
    y = df.placeholder(dtype, shape)
    def ops_of(a, b):
        out = {}
        if dtype in (df.float32, df.float64):
            for t in UNARY_FLOAT:
                arg = df.abs(a) + 0.5 if t in ("Sqrt", "Rsqrt", "Log") else a
                out[t] = _apply(t, [arg])
            for t in BINARY_FLOAT:
                out[t] = _apply(t, [a, b])
        else:
            for t in BINARY_INT:
                out[t] = _apply(t, [a, df.abs(b) + 1] if t in ("FloorDiv", "FloorMod")
                                else [a, b])
            out["Neg"] = -a
        for t in COMPARE:
            out[t] = _apply(t, [a, b])
        out["Select"] = df.where(a < b, a, b)
        out["Cast"] = df.cast(a, df.float64)
        out["Sum"] = df.reduce_sum(a)
        out["Max"] = df.reduce_max(a) if shape and shape[0] else a
        out["AddN"] = df.add_n([a, b, a])
        return out

    names = sorted(ops_of(x, y))   # build once to learn the names

    def body(i, *vals):
        outs = ops_of(x, y)
        return (i + 1,) + tuple(outs[n] for n in names)
    first = ops_of(x, y)
    loop = df.while_loop(lambda i, *v: i < 2, body, (0,) + tuple(first[n] for n in names))
    return x, y, dict(zip(names, loop[1:])), first


def _apply(op_type, args):
    return df.get_default_graph().create_op(op_type, list(args), name=op_type).outputs[0]


shapes = st.sampled_from([[], [1], [5], [3, 4], [9, 17]])
float_dtypes = st.sampled_from([df.float32, df.float64])


@settings(max_examples=8, deadline=None)
@given(shape=shapes, dtype=st.sampled_from([df.float32, df.float64, df.int32, df.int64]),
       seed=st.integers(0, 2**31 - 1))
def test_each_lowering_matches_its_numpy_kernel(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    np_dtype = dtype.as_numpy_dtype
    if np.dtype(np_dtype).kind == "f":
        xv = (rng.standard_normal(shape) * 3).astype(np_dtype)
        yv = (rng.standard_normal(shape) * 3).astype(np_dtype)
    else:
        xv = rng.integers(-50, 50, shape).astype(np_dtype)
        yv = rng.integers(-50, 50, shape).astype(np_dtype)
    g = df.Graph()
    with g.as_default():
        x, y, loop_outs, reference = _op_graph(dtype, shape, (xv, yv))
    names = sorted(loop_outs)
    feeds = {x: xv, y: yv}
    with quiet_numpy():
        compiled, md = run([loop_outs[n] for n in names], feeds, EAGER, graph=g)
        ref = df.Session(graph=g, config=df.ConfigProto(use_compiled_kernels=False,
                                                        compile_loops=False)).run(
            [reference[n] for n in names], feeds)
    assert md.compiled_frames == ["while/while_context"], md.interpreted_frames
    for name, got, want in zip(names, compiled, ref):
        got, want = np.asarray(got), np.asarray(want)
        assert got.dtype == want.dtype and got.shape == want.shape, name
        if name in APPROXIMATE:
            np.testing.assert_allclose(got, want, rtol=APPROX_RTOL[want.dtype.name],
                                       atol=1e-30, err_msg=name)
        else:
            np.testing.assert_array_equal(got, want, err_msg=name, strict=True)


@settings(max_examples=6, deadline=None)
@given(rows=st.integers(1, 6), inner=st.integers(1, 40), cols=st.integers(1, 7),
       dtype=float_dtypes, seed=st.integers(0, 2**31 - 1))
def test_matmul_reductions_and_array_ops_match_numpy(rows, inner, cols, dtype, seed):
    rng = np.random.default_rng(seed)
    npd = dtype.as_numpy_dtype
    av = rng.standard_normal((rows, inner)).astype(npd)
    bv = rng.standard_normal((inner, cols)).astype(npd)
    idx = rng.integers(0, rows, 3).astype(np.int32)
    g = df.Graph()
    with g.as_default():
        a, b = df.placeholder(dtype, [rows, inner]), df.placeholder(dtype, [inner, cols])
        ix = df.placeholder(df.int32, [3])

        def step(a, b):
            p = df.matmul(a, b)
            return {"matmul": p, "matmul_tt": df.matmul(b, a, transpose_a=True,
                                                        transpose_b=True),
                    "sum0": df.reduce_sum(a, axis=0), "sum1": df.reduce_sum(a, axis=1),
                    "mean1": df.reduce_mean(a, axis=1, keepdims=True),
                    "sum": df.reduce_sum(a), "gather": df.gather(a, ix),
                    "reshape": df.reshape(a, [-1]), "concat": df.concat([a, a], axis=1),
                    "stack": df.stack([a, a]), "one_hot": df.one_hot(ix, 4),
                    "zeros": df.zeros_like(a) + df.ones_like(a)}
        names = sorted(step(a, b))
        first = step(a, b)
        outs = df.while_loop(lambda i, *v: i < 2,
                             lambda i, *v: (i + 1,) + tuple(step(a, b)[n] for n in names),
                             (0,) + tuple(first[n] for n in names))[1:]
    feeds = {a: av, b: bv, ix: idx}
    compiled, md = run(list(outs), feeds, EAGER, graph=g)
    ref = df.Session(graph=g, config=df.ConfigProto(use_compiled_kernels=False,
                                                    compile_loops=False)).run(
        [first[n] for n in names], feeds)
    assert md.compiled_frames == ["while/while_context"], md.interpreted_frames
    for name, got, want in zip(names, compiled, ref):
        # BLAS may order a dot product's additions differently from NumPy's matmul.
        if name.startswith("matmul"):
            np.testing.assert_allclose(got, want, rtol=1e-5 if npd == np.float32 else 1e-12,
                                       err_msg=name)
        else:
            np.testing.assert_array_equal(np.asarray(got), np.asarray(want), err_msg=name,
                                          strict=True)


# -- gradient loops (stacks) on the TF reference fixtures -------------------------------------

@pytest.mark.parametrize("name", [n for n in FIXTURE.names if "while" in n])
def test_gradient_loops_compiled_match_tensorflow(name, monkeypatch):
    """The TF-recorded gradient programs through while loops, with every loop compiled
    where the compiler can take it: the same outcome as TensorFlow's."""
    monkeypatch.setenv("DATAFLOW_COMPILE_LOOPS", "eager")
    outcome = grad_programs.run_program(df, FIXTURE.programs[name])
    FIXTURE.assert_matches(name, outcome)


def _rnn_grad_graph(steps=7):
    rng = np.random.default_rng(3)
    w = rng.standard_normal((6, 6)) / 3
    x = rng.standard_normal((4, 6))
    g = df.Graph()
    with g.as_default():
        wt, xt = df.placeholder(df.float64, [6, 6]), df.placeholder(df.float64, [4, 6])
        _, h = df.while_loop(lambda i, h: i < steps,
                             lambda i, h: (i + 1, df.tanh(df.matmul(h, wt) + xt)),
                             (0, df.zeros([4, 6], df.float64)))
        grads = df.gradients(df.reduce_sum(h * h), [wt, xt])
    return g, grads, {wt: w, xt: x}


def test_gradient_loop_stacks_compiled_equal_interpreted():
    g, grads, feeds = _rnn_grad_graph()
    compiled, md = run(grads, feeds, EAGER, graph=g)
    interpreted, _ = run(grads, feeds, OFF, graph=g)
    assert md.compiled_frames == ["gradients/while_context", "while/while_context"]
    for c, i in zip(compiled, interpreted):
        # tanh is approximated in compiled code (3 ulp for float64)
        np.testing.assert_allclose(c, i, rtol=1e-13)


def test_cond_in_while_gradient_is_exact():
    g = df.Graph()
    with g.as_default():
        w = df.placeholder(df.float64, [])

        def body(i, acc):
            acc = df.cond(df.equal(i % 3, 0), lambda: acc + w * w, lambda: acc * 0.5 - w)
            return i + 1, acc
        _, r = df.while_loop(lambda i, acc: i < 50, body, (0, df.constant(0.25, df.float64)))
        (gw,) = df.gradients(r, [w])
    compiled, md = run([r, gw], {w: 1.25}, EAGER, graph=g)
    interpreted, _ = run([r, gw], {w: 1.25}, OFF, graph=g)
    assert md.compiled_frames == ["gradients/while_context", "while/while_context"]
    assert compiled == interpreted


# -- semantics: deadness, variables, deadlines, errors --------------------------------------

def test_loop_in_an_untaken_branch_is_never_entered():
    g = df.Graph()
    with g.as_default():
        p = df.placeholder(df.bool, [])

        def looping():
            def body(i):
                check = df.Assert(df.less(i, 0), [i])   # fails if the loop ever runs
                with df.control_dependencies([check]):
                    return i + 1
            return df.while_loop(lambda i: i < 3, body, [df.constant(0)])
        r = df.cond(p, looping, lambda: df.constant(7))
    (out,), md = run([r], {p: False}, EAGER, graph=g)
    assert out == 7 and md.compiled_frames == ["cond/while/while_context"]
    with pytest.raises(df.errors.InvalidArgumentError, match="assertion failed"):
        run([r], {p: True}, EAGER, graph=g)


def test_variables_updated_in_the_loop_are_visible_after():
    for config in (EAGER, OFF):
        g = df.Graph()
        with g.as_default():
            v = df.Variable(np.array([1.0, 2.0]), name="v")

            def body(i):
                with df.control_dependencies([v.assign_add(v * 0.5)]):
                    return i + 1
            r = df.while_loop(lambda i: i < 5, body, [0])
            read = v.read_value()
            init = df.global_variables_initializer()
        with df.Session(graph=g, config=config) as sess:
            sess.run(init)
            md = df.RunMetadata()
            assert sess.run(r, run_metadata=md) == 5
            if config is EAGER:
                assert md.compiled_frames == ["while/while_context"], md.interpreted_frames
            np.testing.assert_array_equal(sess.run(read), np.array([1.0, 2.0]) * 1.5 ** 5)


def test_a_deadline_interrupts_a_compiled_loop():
    g = df.Graph()
    with g.as_default():
        r = df.while_loop(lambda i, x: i < 2_000_000_000,
                          lambda i, x: (i + 1, x * 0.999 + 1.0), (0, df.constant(0.0)))
    with df.Session(graph=g, config=EAGER) as sess:
        start = time.monotonic()
        with pytest.raises(df.errors.DeadlineExceededError, match="compiled loop frame"):
            sess.run(r, options=df.RunOptions(timeout_in_ms=300))
        assert time.monotonic() - start < 30   # includes compiling, not 2e9 iterations


def _error_of(fetch, feeds, config, graph):
    with df.Session(graph=graph, config=config) as sess:
        with pytest.raises(df.errors.OpError) as info:
            sess.run(fetch, feeds)
    return type(info.value), info.value.op.name if info.value.op else None, str(info.value)


def test_assert_and_out_of_range_gather_raise_the_interpreters_errors():
    g = df.Graph()
    with g.as_default():
        table = df.placeholder(df.float32, [4])
        limit = df.placeholder(df.int32, [])

        def body(i, acc):
            check = df.Assert(df.less(i, limit), [i, acc], name="bound")
            with df.control_dependencies([check]):
                return i + 1, acc + df.gather(table, i)
        _, acc = df.while_loop(lambda i, a: i < 6, body, (0, df.constant(0.0)))
    data = np.arange(4, dtype=np.float32)
    for feeds in ({table: data, limit: 3}, {table: data, limit: 10}):
        assert _error_of(acc, feeds, EAGER, g) == _error_of(acc, feeds, OFF, g)
    kind, name, message = _error_of(acc, {table: data, limit: 3}, EAGER, g)
    assert kind is df.errors.InvalidArgumentError and name == "while/bound"
    kind, name, message = _error_of(acc, {table: data, limit: 10}, EAGER, g)
    assert kind is df.errors.InvalidArgumentError and "not in [0, 4)" in message


def test_frames_that_cannot_compile_say_why():
    g = df.Graph()
    with g.as_default():
        r = df.while_loop(lambda i, x: i < 3,
                          lambda i, x: (i + 1, df.nn.softplus(x)), (0, df.constant(1.0)))
    (out,), md = run([r[1]], None, EAGER, graph=g)
    assert md.compiled_frames == []
    assert "Softplus" in md.interpreted_frames["while/while_context"]
    assert "no loop lowering" in md.interpreted_frames["while/while_context"]
    x = 1.0
    for _ in range(3):
        x = np.logaddexp(0, np.float32(x))
    assert out == np.float32(x)


def test_switches():
    assert df.ConfigProto().compile_loops is None       # the default: on, tiered
    with pytest.raises(ValueError, match="compile_loops"):
        df.ConfigProto(compile_loops="sometimes")
    g = df.Graph()
    with g.as_default():
        r = df.while_loop(lambda i: i < 10, lambda i: i + 2, [0])
    _, md = run([r], None, OFF, graph=g)
    assert md.compiled_frames == [] and "off" in md.interpreted_frames["while/while_context"]


def test_tiering_never_changes_a_result(monkeypatch):
    """Default mode: the first run is interpreted while a thread compiles; later runs are
    compiled; every run gives the same values."""
    monkeypatch.delenv("DATAFLOW_COMPILE_LOOPS", raising=False)
    monkeypatch.setenv("DATAFLOW_CACHE_DIR", os.environ.get("TMPDIR", "/tmp") +
                       f"/dataflow-tiering-{os.getpid()}-{time.time_ns()}")
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float64, [3])

        def body(i, v):
            v = df.cond(df.equal(i % 2, 0), lambda: v * 1.5 - 0.25, lambda: v + x)
            return i + 1, v
        _, r = df.while_loop(lambda i, v: i < 40, body, (0, x))
    feeds = {x: np.array([0.5, -1.0, 2.0])}
    results, kinds = [], []
    with df.Session(graph=g) as sess:
        for _ in range(3):
            md = df.RunMetadata()
            results.append(sess.run(r, feeds, run_metadata=md))
            kinds.append(md.compiled_frames)
            wait_for_compiles()
    assert kinds[0] == [] and kinds[1] == kinds[2] == ["while/while_context"]
    for out in results[1:]:
        np.testing.assert_array_equal(out, results[0], strict=True)


def _two_processes_sharing_a_cache(script, cache):
    """The JSON each of two processes running ``script`` one after the other, with the
    loop cache directory ``cache``, printed last: (cold cache, warm cache)."""
    env = dict(os.environ, DATAFLOW_CACHE_DIR=str(cache))
    runs = []
    for _ in range(2):
        proc = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                              env=env, cwd=os.getcwd(), timeout=300)
        assert proc.returncode == 0, proc.stderr
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    return runs


def test_a_new_process_loads_compiled_loops_from_the_disk_cache(tmp_path):
    script = textwrap.dedent("""
        import json, time, numpy as np
        import dataflow as df
        from dataflow.loopc import runner
        g = df.Graph()
        with g.as_default():
            def body(i, acc):
                acc = df.cond(df.equal(i % 2, 0), lambda: acc + 3, lambda: acc - 1)
                return i + 1, acc
            _, r = df.while_loop(lambda i, acc: i < 1000, body, (0, 0))
        sess = df.Session(graph=g, config=df.ConfigProto(compile_loops="eager"))
        md = df.RunMetadata()
        t = time.perf_counter()
        out = sess.run(r, run_metadata=md)
        first = time.perf_counter() - t
        stats = [m.frame_fn.stats for m in runner._modules.values()]
        print(json.dumps({"out": int(out), "compiled": md.compiled_frames,
                          "hits": sum(sum(s.cache_hits.values()) for s in stats),
                          "misses": sum(sum(s.cache_misses.values()) for s in stats),
                          "first": first}))
    """)
    cold, warm = _two_processes_sharing_a_cache(script, tmp_path)
    assert cold["out"] == warm["out"] == 1000
    assert cold["compiled"] == warm["compiled"] == ["while/while_context"]
    assert cold["misses"] >= 1 and warm["misses"] == 0 and warm["hits"] >= 1


def test_a_loop_loaded_from_the_disk_cache_gives_the_interpreters_bits(tmp_path):
    """The RNN gradient's shapes (float32 products in the own GEMM's range), with a product
    taken *after* the loops on their outputs. Arrays that disk-cached compiled code
    returns carry a dtype object of their own; the interpreter's MatMul once routed them
    by identity to OpenBLAS, so only a warm-cache process got other last bits."""
    script = textwrap.dedent("""
        import json, numpy as np
        import dataflow as df
        from dataflow.loopc import runner
        rng = np.random.default_rng(7)
        w0 = (rng.standard_normal((128, 128)) / 12).astype(np.float32)
        v0 = rng.standard_normal((128, 16)).astype(np.float32)
        x = rng.standard_normal((32, 128)).astype(np.float32)
        g = df.Graph()
        with g.as_default():
            w, v = df.constant(w0), df.constant(v0)
            _, h = df.while_loop(lambda i, h: i < 6,
                                 lambda i, h: (i + 1, df.tanh(df.matmul(h, w) + x)),
                                 (0, df.constant(x)))
            loss = df.reduce_sum(df.square(df.matmul(h, v)))
            grads = df.gradients(loss, [w, v])
        out = {}
        for mode in ("eager", False):
            md = df.RunMetadata()
            sess = df.Session(graph=g, config=df.ConfigProto(compile_loops=mode))
            values = sess.run([loss] + grads, run_metadata=md)
            out[str(mode)] = [np.asarray(a).tobytes().hex() for a in values]
            out["compiled_" + str(mode)] = md.compiled_frames
        stats = [m.frame_fn.stats for m in runner._modules.values()]
        out["hits"] = sum(sum(s.cache_hits.values()) for s in stats)
        print(json.dumps(out))
    """)
    cold, warm = _two_processes_sharing_a_cache(script, tmp_path)
    assert cold["compiled_eager"] == warm["compiled_eager"] \
        == ["gradients/while_context", "while/while_context"]
    assert cold["compiled_False"] == warm["compiled_False"] == []
    assert warm["hits"] >= 2                      # both frames came from the disk cache
    assert cold["eager"] == cold["False"]         # compiled = interpreted, bit for bit
    assert warm["eager"] == warm["False"] == cold["False"]
