"""Running steps from their memory plans (ConfigProto(plan_memory=True)) and sharing one
budget between sessions (df.memory.Heap)."""
from __future__ import annotations

import gc
import itertools
import tracemalloc

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import dataflow as df
from dataflow.memory import arena as arena_mod
from dataflow.runtime.memory_arena import ArenaExecutor
from tests.graph_gen import programs, quiet_numpy
from tests.op_harness import fresh_rng
from tests.test_differential import NOT_COMPUTED, assert_same_tokens, executor_tokens

SETTINGS = {"deadline": None, "suppress_health_check": list(HealthCheck), "derandomize": True}
# plan_memory runs unfused (every planned value is made) and its loops interpreted, so it
# is compared with the unplanned run of the same kernels (whatever DATAFLOW_COMPILE_LOOPS
# says: a compiled frame's transcendentals differ within their ulp bounds).
UNFUSED = df.ConfigProto(fuse_elementwise=False, compile_loops=False)


def _mlp(rng, sizes=(64, 32, 10), batch=100):
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [None, sizes[0]], name="x")
        y = df.placeholder(df.float32, [None, sizes[-1]], name="y")
        h = x
        for k, (a, b) in enumerate(itertools.pairwise(sizes)):
            w = df.Variable(rng.standard_normal((a, b)).astype(np.float32) * 0.1, name=f"w{k}")
            h = df.matmul(h, w) + df.Variable(np.zeros(b, np.float32), name=f"b{k}")
            if k < len(sizes) - 2:
                h = df.sigmoid(h)
        loss = df.reduce_mean(df.nn.softmax_cross_entropy_with_logits(labels=y, logits=h))
        step = df.train.AdamOptimizer(0.01).minimize(loss)
        init = df.global_variables_initializer()
        variables = df.global_variables()
    feed = {x: rng.standard_normal((batch, sizes[0])).astype(np.float32),
            y: np.eye(sizes[-1], dtype=np.float32)[rng.integers(0, sizes[-1], batch)]}
    return g, [step, loss], init, feed, variables


def _train(g, fetches, init, feed, variables, steps, config):
    with df.Session(graph=g, config=config) as sess:
        sess.run(init)
        losses = [sess.run(fetches, feed)[1] for _ in range(steps)]
        return losses, sess.run(variables)


def _rnn_grad(rng, steps=20, batch=4, hidden=16, cond_in_body=False):
    g = df.Graph()
    with g.as_default():
        w = df.placeholder(df.float32, [hidden, hidden], name="w")
        x = df.placeholder(df.float32, [batch, hidden], name="x")

        def body(i, h):
            h2 = df.tanh(df.matmul(h, w) + x)
            if cond_in_body:
                h2 = df.cond(i < steps // 2, lambda: h2 * 0.5, lambda: df.sigmoid(h2))
            return i + 1, h2
        _, h = df.while_loop(lambda i, h: i < steps, body, (0, df.zeros([batch, hidden])),
                             name="rnn", parallel_iterations=8)
        (dw,) = df.gradients(df.reduce_sum(h), [w])
    feed = {w: (rng.standard_normal((hidden, hidden)) * 0.3).astype(np.float32),
            x: rng.standard_normal((batch, hidden)).astype(np.float32)}
    return g, [dw, h], feed


@pytest.mark.parametrize("compiled", [True, False])
def test_planned_training_is_bit_identical(compiled):
    """An Adam MLP trained from its plan gives the unplanned run's losses and variables
    bit for bit (compiled kernels and the NumPy ones)."""
    rng, _ = fresh_rng()
    g, fetches, init, feed, variables = _mlp(rng, sizes=(64, 256, 10), batch=300)
    base = dict(use_compiled_kernels=compiled, fuse_elementwise=False)
    loss0, vars0 = _train(g, fetches, init, feed, variables, 4, df.ConfigProto(**base))
    loss1, vars1 = _train(g, fetches, init, feed, variables, 4,
                          df.ConfigProto(plan_memory=True, **base))
    assert [float(v) for v in loss0] == [float(v) for v in loss1]
    for a, b in zip(vars0, vars1):
        np.testing.assert_array_equal(a, b, strict=True)


@pytest.mark.parametrize("cond_in_body", [False, True])
def test_planned_loop_gradient_is_bit_identical(cond_in_body):
    """A while loop's forward and gradient (stacks, parallel_iterations=8, a cond in the
    body) from the plan: the same values, and no value read after its bytes were reused
    (the checking run)."""
    rng, _ = fresh_rng()
    g, fetches, feed = _rnn_grad(rng, cond_in_body=cond_in_body)
    with df.Session(graph=g, config=UNFUSED) as sess:
        expected = sess.run(fetches, feed)
    for mode in (True, "check"):
        with df.Session(graph=g, config=df.ConfigProto(plan_memory=mode)) as sess:
            for _ in range(2):
                got = sess.run(fetches, feed)
                for a, b in zip(expected, got):
                    np.testing.assert_array_equal(a, b, strict=True)
            step = next(iter(sess._arena.steps.values()))[1]
            if mode == "check":
                assert step.checker.reads > 100 and step.checker.writes > 100


def _forward_graph(rng, batch=256, width=256, layers=3):
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [batch, width], name="x")
        h = x
        for _ in range(layers):
            w = df.constant((rng.standard_normal((width, width)) / 16).astype(np.float32))
            b = df.constant(rng.standard_normal(width).astype(np.float32))
            h = df.tanh(df.matmul(h, w) + b)
        out = df.reduce_sum(h)
    return g, out, {x: rng.standard_normal((batch, width)).astype(np.float32)}


def _step_allocation(sess, fetch, feed) -> int:
    """Bytes allocated at the peak of one step over what existed before it."""
    gc.collect()
    tracemalloc.start()
    try:
        base, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        sess.run(fetch, feed)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - base


@pytest.mark.parametrize("compiled", [True, False])
def test_arena_is_allocated_once_and_steps_allocate_nothing_for_it(compiled):
    """After the first step, a step whose kernels all write into the arena allocates
    none of its values (tracemalloc): less than one value's bytes at its peak, where the
    unplanned step allocates several."""
    rng, _ = fresh_rng()
    g, out, feed = _forward_graph(rng)
    value_bytes = 256 * 256 * 4
    config = dict(use_compiled_kernels=compiled, fuse_elementwise=False)
    with df.Session(graph=g, config=df.ConfigProto(plan_memory=True, **config)) as sess:
        meta = df.RunMetadata()
        expected = sess.run(out, feed, run_metadata=meta)
        assert meta.copied_kernels == []
        arena = next(iter(sess._arena.steps.values()))[1].arena
        sess.run(out, feed)
        planned = _step_allocation(sess, out, feed)
        assert next(iter(sess._arena.steps.values()))[1].arena is arena
        assert sess.run(out, feed) == expected
    with df.Session(graph=g, config=df.ConfigProto(**config)) as sess:
        sess.run(out, feed)
        unplanned = _step_allocation(sess, out, feed)
    assert planned < value_bytes // 4, planned
    assert unplanned > 2 * value_bytes, unplanned


def test_kernels_without_an_out_variant_are_listed():
    rng, _ = fresh_rng()
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [32, 64], name="x")
        y = df.transpose(df.nn.softmax(x * 2.0), name="t")
        z = df.reduce_sum(df.exp(y), name="total")
    feed = {x: rng.standard_normal((32, 64)).astype(np.float32)}
    with df.Session(graph=g, config=df.ConfigProto(plan_memory=True)) as sess:
        meta = df.RunMetadata()
        got = sess.run(z, feed, run_metadata=meta)
    with df.Session(graph=g, config=UNFUSED) as sess:
        assert sess.run(z, feed) == got
    assert set(meta.copied_kernels) == {f"{y.op.name} (Transpose)",
                                        f"{y.op.inputs[0].op.name} (Softmax)"}
    assert meta.memory_plan.arena_bytes > 0


def test_two_shapes_get_two_arenas_and_fetches_are_not_arena_views():
    """One arena per fed shape; a fetched value survives later steps unchanged."""
    rng, _ = fresh_rng()
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [None, 16], name="x")
        y = df.tanh(x * 3.0) + 1.0
        z = df.reduce_sum(df.tanh(y), axis=1)
    with df.Session(graph=g, config=df.ConfigProto(plan_memory=True)) as sess:
        a = rng.standard_normal((8, 16)).astype(np.float32)
        b = rng.standard_normal((5, 16)).astype(np.float32)
        first = sess.run([y, z], {x: a})
        kept = [v.copy() for v in first]
        sess.run([y, z], {x: b})
        sess.run([y, z], {x: a * 2})
        for v, k in zip(first, kept):
            np.testing.assert_array_equal(v, k)
        assert len(sess._arena.steps) == 2
    with df.Session(graph=g, config=UNFUSED) as sess:
        for v, e in zip(first, sess.run([y, z], {x: a})):
            np.testing.assert_array_equal(v, e, strict=True)


def test_the_checker_fails_a_plan_that_shares_live_memory(monkeypatch):
    """The checking run is not vacuous: a plan whose values all sit at offset 0 fails it,
    naming the value read after another overwrote it."""
    rng, _ = fresh_rng()
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [64], name="x")
        a = df.tanh(x)
        out = df.reduce_sum(a * df.exp(a))        # a is read after exp(a) is written
    feed = {x: rng.standard_normal(64).astype(np.float32)}
    real_plan = arena_mod._plan

    def overlapping_plan(*args, **kwargs):
        p = real_plan(*args, **kwargs)
        for b in p.buffers:
            if not b.pinned:
                b.offset = 0
        p.arena_bytes = max(b.size for b in p.buffers if not b.pinned)
        return p
    monkeypatch.setattr(arena_mod, "_plan", overlapping_plan)
    with df.Session(graph=g, config=df.ConfigProto(plan_memory="check")) as sess:
        with pytest.raises(df.errors.OpError, match="read 'Tanh:0' .* after 'Exp:0'"):
            sess.run(out, feed)


def test_the_plan_order_is_kept_while_the_default_order_breaks_it(monkeypatch):
    """The executor's own ready order (last in, first out) interleaves loop iterations
    that the plan puts one after another: the checker catches it on this loop, and the
    plan's order passes."""
    rng, _ = fresh_rng()
    g, fetches, feed = _rnn_grad(rng, steps=6, cond_in_body=True)
    with df.Session(graph=g, config=df.ConfigProto(plan_memory="check")) as sess:
        sess.run(fetches, feed)

    class LastInFirstOut(list):
        def __init__(self, step, nodes):
            super().__init__()
            self.step, self.nodes = step, nodes

        def pop(self, index=-1):
            gid, it = list.pop(self)
            if gid in self.step.merges and it.inputs[self.nodes[gid][2]] is not None:
                base = self.nodes[gid][2]
                if it.inputs[base] is not df.runtime.executor.DEAD:
                    it.inputs[base] = self.step.move_into_merge(gid, it.inputs[base], {})
            return gid, it

    def lifo_init(self, plan, step, templates=None):
        df.runtime.executor.Executor.__init__(self, plan, None, templates)
        self.step = step
        self.node_tuples = step.node_tuples
        self.ready = LastInFirstOut(step, step.node_tuples)
        self.interpret_loops = True   # as ArenaExecutor's own __init__ does
    monkeypatch.setattr(ArenaExecutor, "__init__", lifo_init)
    with df.Session(graph=g, config=df.ConfigProto(plan_memory="check")) as sess:
        with pytest.raises(df.errors.OpError, match="overwrote its bytes"):
            sess.run(fetches, feed)


@settings(max_examples=150, **SETTINGS)
@given(program=programs(max_statements=10, nested=True))
def test_no_two_live_values_overlap_on_random_control_flow(program):
    """The differential generator's programs (nested conds and loops, raw Switch/Merge
    diamonds and loops, parallel_iterations up to 10) run from their plans with the
    checker on: the same tokens as the unplanned run, and no value is read after
    another value overwrote its bytes."""
    with quiet_numpy():
        graph, fetches, feeds = program.build()
        expected = executor_tokens(graph, fetches, feeds)
        with df.Session(graph=graph, config=df.ConfigProto(plan_memory="check")) as sess:
            try:
                actual = sess.run_tokens(fetches, feeds)
            except df.errors.InternalError as e:
                assert "without computing fetch" in str(e), e
                actual = NOT_COMPUTED
    assert_same_tokens(expected, actual, fetches)


@settings(max_examples=80, **SETTINGS)
@given(program=programs(max_statements=10))
def test_no_two_live_values_overlap_on_random_programs(program):
    with quiet_numpy():
        graph, fetches, feeds = program.build()
        expected = executor_tokens(graph, fetches, feeds)
        with df.Session(graph=graph, config=df.ConfigProto(plan_memory="check")) as sess:
            try:
                actual = sess.run_tokens(fetches, feeds)
            except df.errors.InternalError as e:
                assert "without computing fetch" in str(e), e
                actual = NOT_COMPUTED
    assert_same_tokens(expected, actual, fetches)


def test_bad_plan_memory_value_and_partitioned_steps():
    with pytest.raises(ValueError, match="plan_memory"):
        df.ConfigProto(plan_memory="yes")
    g = df.Graph()
    with g.as_default():
        with df.device("/cpu:0"):
            a = df.constant(np.ones(4, np.float32)) * 2.0
        with df.device("/cpu:1"):
            b = a + 1.0
    config = df.ConfigProto(plan_memory=True, device_count={"CPU": 2})
    with df.Session(graph=g, config=config) as sess:
        with pytest.raises(df.errors.UnimplementedError, match="partitioned"):
            sess.run(b)


# -- the shared heap ---------------------------------------------------------------------------
def _heap_models(rng):
    a = _mlp(rng, sizes=(64, 64, 10), batch=1000)
    b = _mlp(rng, sizes=(64, 128, 128, 10), batch=1000)
    return a, b


def _weights_bytes(model, optimizer_names):
    g, _, _, _, variables = model
    return sum(int(np.prod(v.shape.as_list())) * 4 for v in variables
               if v.op.get_attr("shared_name") not in optimizer_names)


def test_heap_switching_a_b_a_resumes_training_bit_identically():
    """Sessions A and B share a Heap that cannot hold B's step beside all of A: running
    B evicts A's optimizer zone and arena to host copies (A's slots are gone meanwhile),
    running A again restores them, and A's training continues exactly as if alone."""
    rng, _ = fresh_rng()
    model_a, model_b = _heap_models(rng)
    peak = {m[0]: df.memory.plan(m[1], feed_dict=m[3], graph=m[0]).peak_bytes
            for m in (model_a, model_b)}
    init_peak = max(df.memory.plan(m[2], graph=m[0]).peak_bytes for m in (model_a, model_b))
    optimizer_a = set(arena_mod._optimizer_variables(model_a[0].get_operations()))
    assert {"w0/Adam", "w0/Adam_1", "beta1_power"} <= optimizer_a
    budget = max(peak[model_b[0]], init_peak) + _weights_bytes(model_a, optimizer_a) + 4096
    assert budget < peak[model_a[0]] + peak[model_b[0]]
    heap = df.memory.Heap(budget)
    config = df.ConfigProto(memory_heap=heap)
    g_a, fetches_a, init_a, feed_a, vars_a = model_a
    g_b, fetches_b, init_b, feed_b, _ = model_b
    sess_a = df.Session(graph=g_a, config=config)
    sess_b = df.Session(graph=g_b, config=config)
    sess_a.run(init_a)
    sess_b.run(init_b)
    losses = [sess_a.run(fetches_a, feed_a)[1] for _ in range(3)]
    evicted_before = len(heap.evictions)
    for _ in range(2):
        sess_b.run(fetches_b, feed_b)
    assert len(heap.evictions) > evicted_before and heap.evictions[-1][0] == "session 0"
    assert sess_a._resources["w0/Adam"].value is None        # really moved out
    assert sess_a._resources["w0"].value is not None         # the weights stay
    assert not sess_a._arena.steps
    losses += [sess_a.run(fetches_a, feed_a)[1] for _ in range(3)]
    assert heap.restores[-1][0] == "session 0"
    final = sess_a.run(vars_a)
    sess_a.close()
    sess_b.close()
    ref_losses, ref_final = _train(g_a, fetches_a, init_a, feed_a, vars_a, 6, UNFUSED)
    assert [float(v) for v in losses] == [float(v) for v in ref_losses]
    for a, b in zip(final, ref_final):
        np.testing.assert_array_equal(a, b, strict=True)


def test_heap_refuses_a_step_that_cannot_fit_even_alone():
    """A step over the heap's budget on its own fails before running: the variables
    keep their values."""
    rng, _ = fresh_rng()
    g, fetches, init, feed, variables = _mlp(rng, batch=500)
    need = df.memory.plan(fetches, feed_dict=feed, graph=g).peak_bytes
    heap = df.memory.Heap(need - 1)
    with df.Session(graph=g, config=df.ConfigProto(memory_heap=heap)) as sess:
        sess.run(init)
        before = sess.run(variables)
        with pytest.raises(df.errors.ResourceExhaustedError, match=f"needs {need} bytes"):
            sess.run(fetches, feed)
        for a, b in zip(before, sess.run(variables)):
            np.testing.assert_array_equal(a, b)


def test_planned_run_measures_what_the_cond_loop_plan_predicts():
    """A cond inside a while loop, with its gradient: the planned run's measured bytes
    (its arena plus the step's tracemalloc peak) are within 5% of the plan's arena +
    stacks + fetched values. Each iteration pushes in one branch only, and the plan
    counts the larger branch's stacks, not both."""
    rng, _ = fresh_rng()
    g = df.Graph()
    with g.as_default():
        w = df.placeholder(df.float32, [128, 128], name="w")
        x = df.placeholder(df.float32, [64, 128], name="x")

        def body(i, h):
            h = df.tanh(df.matmul(h, w))
            return i + 1, df.cond(i % 2 < 1, lambda: h * 0.5, lambda: df.sigmoid(h) + x)
        _, h = df.while_loop(lambda i, h: i < 12, body, (0, x))
        (dw,) = df.gradients(df.reduce_sum(h), [w])
    feed = {w: (rng.standard_normal((128, 128)) / 16).astype(np.float32),
            x: rng.standard_normal((64, 128)).astype(np.float32)}
    p = df.memory.plan(dw, feed_dict=feed, graph=g)
    branch_stacks = [s for s in p.stacks if s.branch is not None]
    assert len(branch_stacks) == 2 and branch_stacks[0].branch[0] == branch_stacks[1].branch[0]
    both = sum(s.bytes_for(p.trip_counts) for s in p.stacks)
    assert p.stack_bytes_for() == both - branch_stacks[0].bytes_for(p.trip_counts)
    predicted = p.arena_bytes + p.stack_bytes_for() + p.zones["fetches"]
    config = df.ConfigProto(plan_memory=True, inter_op_parallelism_threads=1)
    with df.Session(graph=g, config=config) as sess:
        sess.run(dw, feed)
        transient = _step_allocation(sess, dw, feed)
        arena = next(iter(sess._arena.steps.values()))[1].arena.nbytes
    assert abs((arena + transient) / predicted - 1) < 0.05, (arena + transient, predicted)


def test_concurrent_runs_of_one_planned_session_do_not_share_the_arena_at_once():
    """Steps of one session from several threads run one at a time over the arena:
    every result equals the single-threaded one."""
    import threading
    rng, _ = fresh_rng()
    g, out, feed = _forward_graph(rng, batch=512, width=256, layers=6)
    feeds = [{k: v * (i + 1) for k, v in feed.items()} for i in range(3)]
    with df.Session(graph=g, config=UNFUSED) as sess:
        expected = [sess.run(out, f) for f in feeds]
    errors_seen = []
    with df.Session(graph=g, config=df.ConfigProto(plan_memory=True)) as sess:
        def work(i):
            for _ in range(8):
                if sess.run(out, feeds[i]) != expected[i]:
                    errors_seen.append(i)
        threads = [threading.Thread(target=work, args=(i,)) for i in range(3)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    assert errors_seen == []


def _traced_step_allocation(sess, fetch, feed) -> int:
    """As ``_step_allocation``, after one step run traced: a step that replaces values
    made before it (an optimizer's new variable values) is credited with freeing the
    old ones, which tracemalloc only sees for blocks it traced."""
    gc.collect()
    tracemalloc.start()
    try:
        sess.run(fetch, feed)
        gc.collect()
        base, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        sess.run(fetch, feed)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return peak - base


def test_planned_adam_step_copies_nothing_and_measures_what_its_plan_predicts():
    """The Adam MLP step: every kernel writes into its block (softmax cross-entropy,
    SumToShape, BroadcastTo, Shape have out= variants, ExpandDims is a view), and the
    plan counts Adam's new values of the largest variable and its two moments
    (made while the old ones live) as scratch: the measured run (arena + the step's
    peak) is within 5% of arena + scratch + fetched values."""
    rng, _ = fresh_rng()
    g, fetches, init, feed, _variables = _mlp(rng, sizes=(64, 256, 10), batch=300)
    p = df.memory.plan(fetches, feed_dict=feed, graph=g)
    largest = max(b.size for b in p.buffers if b.zone == "variables")
    assert largest == 64 * 256 * 4
    assert p.scratch_bytes == 3 * largest
    assert p.zones["workspace"] >= p.scratch_bytes
    assert p.peak_bytes == p.arena_bytes + p.scratch_bytes + p.pinned_bytes + p.runtime_bytes
    predicted = p.arena_bytes + p.scratch_bytes + p.zones["fetches"] + p.runtime_bytes
    config = df.ConfigProto(plan_memory=True, inter_op_parallelism_threads=1)
    with df.Session(graph=g, config=config) as sess:
        sess.run(init)
        meta = df.RunMetadata()
        sess.run(fetches, feed, run_metadata=meta)
        assert meta.copied_kernels == []
        transient = _traced_step_allocation(sess, fetches, feed)
        arena = meta.memory_plan.arena_bytes
    assert abs((arena + transient) / predicted - 1) < 0.05, (arena + transient, predicted)


@pytest.mark.parametrize("compiled", [True, False])
def test_out_variants_and_views_give_the_kernels_values(compiled):
    """SoftmaxCrossEntropyWithLogits (two outputs), SumToShape, BroadcastTo, Shape, AddN
    written through their out= variants, and Reshape / ExpandDims / Squeeze planned as
    views of their input's block: nothing copies, the values equal the unplanned run's
    bit for bit, and a view has no block of its own."""
    rng, _ = fresh_rng()
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [48, 10], name="x")
        y = df.placeholder(df.float32, [48, 10], name="y")
        b = df.placeholder(df.float32, [10], name="b")
        logits = df.tanh(x) + b
        loss = df.reduce_mean(df.nn.softmax_cross_entropy_with_logits(labels=y, logits=logits))
        flat = df.reshape(df.sigmoid(x), [480], name="flat")
        wide = df.expand_dims(flat, 0, name="wide")
        back = df.squeeze(df.exp(wide), [0], name="back")
        total = df.add_n([df.reduce_sum(back), loss, df.reduce_sum(df.cos(x))])
        shape = df.shape(df.sin(x), name="shape")
        grads = df.gradients(total + loss, [x, b])
    fetches = [total, shape] + grads
    feed = {x: rng.standard_normal((48, 10)).astype(np.float32),
            y: np.eye(10, dtype=np.float32)[rng.integers(0, 10, 48)],
            b: rng.standard_normal(10).astype(np.float32)}
    base = dict(use_compiled_kernels=compiled, fuse_elementwise=False)
    with df.Session(graph=g, config=df.ConfigProto(**base)) as sess:
        expected = sess.run(fetches, feed)
    with df.Session(graph=g, config=df.ConfigProto(plan_memory="check", **base)) as sess:
        meta = df.RunMetadata()
        got = sess.run(fetches, feed, run_metadata=meta)
    assert meta.copied_kernels == []
    for a, c in zip(expected, got):
        np.testing.assert_array_equal(a, c, strict=True)
    p = meta.memory_plan
    assert p.tensors["flat:0"] is p.tensors[flat.op.inputs[0].name]
    assert p.tensors["wide:0"] is p.tensors[flat.op.inputs[0].name]
    assert p.tensors["back:0"] is p.tensors[back.op.inputs[0].name]
    types = {op.type for op in g.get_operations()}
    assert {"SoftmaxCrossEntropyWithLogits", "SumToShape", "BroadcastTo", "AddN"} <= types


def test_planned_steps_run_their_loops_interpreted_under_the_loop_compiler():
    """With the loop compiler on (compile_loops="eager"), a planned step still runs the
    loop's kernels through the arena (a compiled frame would allocate its values
    outside it): the checker sees the body's reads, and the values are the unplanned
    run's."""
    rng, _ = fresh_rng()
    g, fetches, feed = _rnn_grad(rng, steps=6)
    with df.Session(graph=g, config=UNFUSED) as sess:
        expected = sess.run(fetches, feed)
    config = df.ConfigProto(plan_memory="check", compile_loops="eager")
    with df.Session(graph=g, config=config) as sess:
        got = sess.run(fetches, feed)
        plan, step = next(iter(sess._arena.steps.values()))
    assert any(f.compiled is not None for f in plan.frames.values())
    for a, c in zip(expected, got):
        np.testing.assert_array_equal(a, c, strict=True)
    # every iteration's matmul, add and tanh read through the checker
    assert step.checker.reads > 3 * 6


def _raw_diamond(rng, n=64 * 1024):
    """``x`` through a raw Switch on ``p``: three big ops on the false side, two on the
    true side, joined by a Merge (no ``cond``)."""
    from dataflow.ops import control_flow_ops as cf
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [n], name="x")
        p = df.placeholder(df.bool, [], name="p")
        f, t = cf.switch(df.sin(x), p)
        left = df.exp(df.cos(df.tanh(f) * 2.0) + f)
        right = df.sqrt(df.abs(t) + 1.0)
        y, _ = cf.merge([left, right])
        out = df.reduce_sum(y * 3.0)
    return g, out, x, p, rng.standard_normal(n).astype(np.float32)


def test_raw_switch_merge_diamond_is_planned_as_its_larger_side():
    """A diamond built from raw Switch/Merge (graph_analysis.switch_diamonds) is planned
    as a cond: its sides are branch regions of the order, one after the other, and its
    arena is the same cond's built with ``df.cond``; every run from the plan equals the
    unplanned run bit for bit with no overlap (checking run), and the measured run is
    within 5% of the plan on either side."""
    rng, _ = fresh_rng()
    g, out, x, p, xv = _raw_diamond(rng)
    plan = df.memory.plan(out, feed_dict={x: xv, p: True}, graph=g)
    branches = [name for kind, name in plan.order if kind == "begin" and "cond(" in name]
    assert branches == ["cond(Switch)", "cond(Switch):true", "cond(Switch):false"]
    g2 = df.Graph()
    with g2.as_default():
        x2 = df.placeholder(df.float32, xv.shape, name="x")
        p2 = df.placeholder(df.bool, [], name="p")
        s = df.sin(x2)
        y2 = df.cond(p2, lambda: df.sqrt(df.abs(s) + 1.0),
                     lambda: df.exp(df.cos(df.tanh(s) * 2.0) + s))
        out2 = df.reduce_sum(y2 * 3.0)
    cond_plan = df.memory.plan(out2, feed_dict={x2: xv, p2: True}, graph=g2)
    assert plan.arena_bytes == cond_plan.arena_bytes
    assert plan.lower_bound_arena <= plan.arena_bytes <= 1.1 * plan.lower_bound_arena
    for pv in (True, False):
        feed = {x: xv, p: pv}
        with df.Session(graph=g, config=UNFUSED) as sess:
            expected = sess.run(out, feed)
        with df.Session(graph=g, config=df.ConfigProto(plan_memory="check")) as sess:
            assert sess.run(out, feed) == expected
        config = df.ConfigProto(plan_memory=True, inter_op_parallelism_threads=1)
        with df.Session(graph=g, config=config) as sess:
            meta = df.RunMetadata()
            assert sess.run(out, feed, run_metadata=meta) == expected
            transient = _step_allocation(sess, out, feed)
        predicted = meta.memory_plan.arena_bytes + meta.memory_plan.zones["fetches"]
        measured = meta.memory_plan.arena_bytes + transient
        assert abs(measured / predicted - 1) < 0.05, (pv, measured, predicted)


def test_switch_diamonds_leaves_out_a_side_that_reads_its_merge():
    """An op that reads a side's value and the Merge's is on that side (dead when the
    other side runs) but must run after the Merge: no closed diamond, so
    switch_diamonds reports nothing for it (the plan treats both sides as running),
    and the planned run still equals the unplanned one."""
    from dataflow.ops import control_flow_ops as cf
    from dataflow.framework.graph_analysis import switch_diamonds
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [8], name="x")
        p = df.placeholder(df.bool, [], name="p")
        f, t = cf.switch(x, p)
        left, right = df.negative(f, name="left"), df.exp(t, name="right")
        y, _ = cf.merge([left, right])
        closed = switch_diamonds(g.get_operations())
        z = y + df.identity(left)   # reads the false side past the Merge
    assert sorted((op.name, b) for op, (_k, b) in closed.items()) == [("left", 0),
                                                                       ("right", 1)]
    assert switch_diamonds(g.get_operations()) == {}
    xv = np.arange(8, dtype=np.float32)
    for pv in (False, True):
        feed = {x: xv, p: pv}
        with df.Session(graph=g, config=UNFUSED) as sess:
            expected = sess.run_tokens([z], feed)
        with df.Session(graph=g, config=df.ConfigProto(plan_memory="check")) as sess:
            assert_same_tokens(expected, sess.run_tokens([z], feed), [z])


@pytest.mark.parametrize("pattern", ["vv_x", "vv_y", "vs", "sv", "rows", "rows_rev", "cols",
                                     "cols_rev"])
def test_compiled_binary_out_variant_in_place_gives_the_kernels_values(pattern):
    """The compiled binary ops' out= variant with ``out`` over an operand (the
    planner's in-place reuse) runs the one-array loops: each broadcast pattern gives
    the kernel's values bit for bit."""
    from dataflow.kernels.numba_cpu._dispatch import ENABLED
    from dataflow.kernels.registry import find_kernel, out_variant
    if not ENABLED:
        pytest.fail("the Numba kernels are off")
    rng, _ = fresh_rng()
    big = rng.standard_normal((96, 256)).astype(np.float32)
    small = {"vv_x": big + 1, "vv_y": big + 1, "vs": np.float32(1.5), "sv": np.float32(1.5),
             "rows": rng.standard_normal(256).astype(np.float32),
             "rows_rev": rng.standard_normal(256).astype(np.float32),
             "cols": rng.standard_normal((96, 1)).astype(np.float32),
             "cols_rev": rng.standard_normal((96, 1)).astype(np.float32)}[pattern]
    first = pattern in ("vv_x", "vs", "rows", "cols")
    for op_name, fn in (("Sub", df.subtract), ("Mul", df.multiply)):
        g = df.Graph()
        with g.as_default():
            a = df.placeholder(df.float32, np.shape(big if first else small))
            b = df.placeholder(df.float32, np.shape(small if first else big))
            op = fn(a, b).op
        factory = find_kernel(op)
        ctx = df.kernels.registry.KernelContext(op)
        x, y = (big, small) if first else (small, big)
        expected = factory(ctx)(x, y)
        out = (x if first else y).copy()
        args = (out, y) if first else (x, out)
        out_variant(factory)[0](ctx)(*args, out)
        np.testing.assert_array_equal(out, expected, strict=True)
