"""Static memory plans (dataflow.memory): shapes, Owl's planner, control flow, max batch."""
from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import dataflow as df
from dataflow.framework.graph_analysis import infer_frames, prune
from dataflow.memory.planner import ALIGNMENT, RUNTIME_STACK_ELEM_BYTES
from tests.graph_gen import programs, quiet_numpy

SETTINGS = {"deadline": None, "suppress_health_check": list(HealthCheck), "derandomize": True}


def align(n):
    return -(-n // ALIGNMENT) * ALIGNMENT


def _mlp(batch=None, sizes=(64, 32, 10), seed=0):
    rng = np.random.default_rng(seed)
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [batch, sizes[0]], name="x")
        y = df.placeholder(df.float32, [batch, sizes[-1]], name="y")
        h = x
        for k, (a, b) in enumerate(itertools.pairwise(sizes)):
            w = df.Variable(rng.standard_normal((a, b)).astype(np.float32) * 0.1, name=f"w{k}")
            h = df.matmul(h, w) + df.Variable(np.zeros(b, np.float32), name=f"b{k}")
            if k < len(sizes) - 2:
                h = df.sigmoid(h)
        loss = df.reduce_mean(df.nn.softmax_cross_entropy_with_logits(labels=y, logits=h))
        step = df.train.AdamOptimizer(0.01).minimize(loss)
        init = df.global_variables_initializer()
    return g, x, y, loss, step, init


def _rnn_grad(steps=10, batch=4, hidden=8, swap_memory=False, maximum_iterations=None,
              data_bound=False):
    g = df.Graph()
    with g.as_default():
        w = df.placeholder(df.float32, [hidden, hidden], name="w")
        x = df.placeholder(df.float32, [batch, hidden], name="x")
        if data_bound:
            cond = lambda i, h: df.reduce_sum(h) < 1e9
        else:
            cond = lambda i, h: i < steps
        _, h = df.while_loop(cond, lambda i, h: (i + 1, df.tanh(df.matmul(h, w) + x)),
                             (0, df.zeros([batch, hidden])), swap_memory=swap_memory,
                             maximum_iterations=maximum_iterations, name="rnn")
        (dw,) = df.gradients(df.reduce_sum(h), [w])
    return g, w, x, dw


# -- static shapes ---------------------------------------------------------------------------
def test_step_shapes_match_the_run_values():
    """Every planned value's inferred shape is the shape the run produces (batch from
    feed_shapes, the graph's own batch dimension being unknown)."""
    g, x, y, _loss, step, init = _mlp()
    p = df.memory.plan(step, feed_shapes={x: [37, 64], y: [37, 10]}, graph=g)
    ops = prune([], [step], fed={x, y})
    tensors = [t for op in ops for t in op.outputs
               if t.name in p.tensors and op.type not in ("Placeholder",)
               and t.dtype != df.resource and op.type != "NoOp"]
    assert any(t.shape.dims[0] is None for t in tensors if t.shape.ndims)  # graph: unknown
    sess = df.Session(graph=g)
    sess.run(init)
    rng = np.random.default_rng(1)
    feed = {x: rng.random((37, 64), np.float32), y: np.eye(10, dtype=np.float32)[:37 % 10 + 1]
            .repeat(37, 0)[:37]}
    values = sess.run(tensors, feed)
    checked = 0
    for t, v in zip(tensors, values):
        buf = p.tensors[t.name]
        if buf.name == t.name:
            assert buf.shape == np.shape(v), t.name
            assert buf.nbytes == np.asarray(v).nbytes, t.name
            checked += 1
    assert checked > 20


def test_unknown_shape_names_the_op_and_the_placeholder():
    g, x, y, loss, _step, _init = _mlp()
    with pytest.raises(df.errors.InvalidArgumentError, match=r"feed_shapes=\{x"):
        df.memory.plan(loss, feed_shapes={x: [None, 64], y: [5, 10]}, graph=g)
    with pytest.raises(df.errors.InvalidArgumentError, match=r"not fed.*feed_shapes=\{x"):
        df.memory.plan(loss, feed_shapes={y: [5, 10]}, graph=g)


def test_size_computed_from_values_asks_for_them():
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [12], name="x")
        n = df.placeholder(df.int32, [], name="n")
        y = df.reduce_sum(df.exp(df.reshape(x, df.stack([n, -1]))), axis=1)
    with pytest.raises(df.errors.InvalidArgumentError, match=r"Reshape.*values for n"):
        df.memory.plan(y, feed_shapes={x: [12], n: []}, graph=g)
    p = df.memory.plan(y, feed_dict={x: np.zeros(12, np.float32), n: 3}, graph=g)
    assert p.tensors["Exp:0"].shape == (3, 4)


def test_unfed_placeholder_is_an_error():
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [3], name="needed")
        y = x * 2.0
    with pytest.raises(df.errors.InvalidArgumentError, match="needed"):
        df.memory.plan(y, graph=g)


def test_shapes_from_fed_values():
    g, x, y, loss, _step, _init = _mlp()
    p = df.memory.plan(loss, feed_dict={x: np.zeros((11, 64), np.float32),
                                        y: np.zeros((11, 10), np.float32)}, graph=g)
    assert p.tensors["x:0"].shape == (11, 64) and p.tensors["x:0"].zone == "feeds"
    assert p.tensors["MatMul:0"].shape == (11, 32)


# -- Owl's planner -----------------------------------------------------------------------------
def test_owl_elementwise_chain_needs_one_block():
    n = 1000
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float64, [n], name="x")
        h = x * 2.0
        for f in (df.sin, df.exp, df.tanh, df.sigmoid, df.square, df.sqrt):
            h = f(h)
        out = df.reduce_sum(h)
    p = df.memory.plan(out, feed_shapes={x: [n]}, graph=g)
    chain = [b for b in p.buffers if not b.pinned and b.size == align(8 * n)]
    assert len(chain) == 7
    assert len({b.block for b in chain}) == 1
    assert len(p.in_place) == 6
    assert p.arena_bytes == align(8 * n)  # the sum is fetched: pinned
    assert p.naive_bytes - p.pinned_bytes - p.runtime_bytes == 7 * align(8 * n)


def test_non_elementwise_chain_alternates_two_blocks():
    """MatMuls cannot write over their input: a chain needs two blocks (ping-pong)."""
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [64, 64], name="x")
        w = df.constant(np.eye(64, dtype=np.float32))
        h = x
        for _ in range(6):
            h = df.matmul(h, w)
        out = df.reduce_sum(h)
    p = df.memory.plan(out, feed_shapes={x: [64, 64]}, graph=g)
    chain = [b for b in p.buffers if b.name.startswith("MatMul")]
    assert len(chain) == 6 and len({b.block for b in chain}) == 2
    assert p.arena_bytes == 2 * 64 * 64 * 4
    assert p.peak_bytes <= 1.1 * p.lower_bound_bytes


def test_best_fit_picks_the_smallest_block_that_fits_and_grows_the_largest():
    from dataflow.memory.planner import _find_best_block
    blocks, free = [100, 40, 70, 10], {0, 1, 2}
    assert _find_best_block(50, blocks, free) == 2 and free == {0, 1}
    assert _find_best_block(500, blocks, free) == 0 and blocks[0] == 500 and free == {1}
    assert _find_best_block(5, blocks, set()) == 4 and blocks[4] == 5


def test_pinned_values_never_share():
    g, x, y, loss, step, _init = _mlp()
    p = df.memory.plan([step, loss], feed_shapes={x: [16, 64], y: [16, 10]}, graph=g)
    pinned = sorted((b for b in p.buffers if b.pinned), key=lambda b: b.offset)
    assert {b.zone for b in pinned} == {"variables", "constants", "feeds", "fetches"}
    assert pinned[0].offset >= p.arena_bytes
    for a, b in itertools.pairwise(pinned):
        assert a.offset + a.size <= b.offset
    assert p.tensors[loss.name].zone == "fetches"


def test_mlp_zones():
    g, x, y, _loss, step, _init = _mlp(sizes=(64, 32, 10))
    p = df.memory.plan(step, feed_shapes={x: [100, 64], y: [100, 10]}, graph=g)
    # weights and biases, Adam's m and v slots for each, and its two beta powers
    params = [64 * 32, 32, 32 * 10, 10]
    assert p.zones["variables"] == 3 * sum(align(4 * n) for n in params) + 2 * align(4)
    assert p.zones["feeds"] == align(100 * 64 * 4) + align(100 * 10 * 4)
    assert p.zones["forward"] >= align(100 * 32 * 4) and p.zones["gradient"] > 0
    assert p.zones["optimizer"] > 0
    grads = [b for b in p.buffers if b.zone == "gradient"]
    assert grads and all(b.name.startswith("gradients/") for b in grads)
    assert not p.overlaps()


def _lower_bound_by_sweep(p):
    inplace_out = {o for o, _ in p.in_place}
    n = len(p.order)
    live = [0] * n
    for b in p.buffers:
        if b.pinned:
            continue
        for t in range(b.first_use, b.last_use + 1):
            if not (t == b.first_use and b.name in inplace_out):
                live[t] += b.size
    return max(live, default=0)


def _check_invariants(p, graph, fetches, feeds):
    fed = set(feeds)
    ops = prune([f for f in fetches], [], fed=fed)
    times = {name: i for i, (kind, name) in enumerate(p.order) if kind == "op"}
    # every value has a block, and is live wherever it is read
    for op in ops:
        for t in op.outputs:
            if t.dtype == df.resource or op.type == "StackPop" or t in fed:
                continue
            assert t.name in p.tensors, t.name
            assert p.tensors[t.name].offset >= 0
        for t in op.inputs:
            b = p.tensors.get(t.name)
            if op.type == "Merge" and t.op.type == "NextIteration":
                continue  # read by the next iteration (copied at the iteration's end)
            if op.type == "Merge" and b is not None and not b.pinned and t.op.name in times:
                # Either the value lives to the Merge, or (a cond branch's result) it is
                # written into the Merge's block, reserved while the value is live.
                out = p.tensors[op.outputs[0].name]
                at = times[t.op.name]
                assert (b.first_use <= times[op.name] <= b.last_use
                        or out.pinned or out.first_use <= at <= b.last_use), (t.name, op.name)
                continue
            if b is not None and not b.pinned:
                assert b.first_use <= times[op.name] <= b.last_use, (t.name, op.name)
    # a loop variable keeps its block for the whole loop (each iteration starts there)
    frame_of, _ = infer_frames(ops, fed)
    ends = {name: i for i, (kind, name) in enumerate(p.order) if kind == "end"}
    for op in ops:
        if op.type == "Merge" and any(t.op.type == "NextIteration" for t in op.inputs):
            b = p.tensors[op.outputs[0].name]
            assert b.pinned or b.last_use >= ends[frame_of[op].name], op.name
    # no two live buffers overlap in the arena; pinned values are alone
    assert not p.overlaps()
    arena = [b for b in p.buffers if not b.pinned]
    assert all(0 <= b.offset and b.offset + b.size <= p.arena_bytes for b in arena)
    pinned = sorted((b for b in p.buffers if b.pinned), key=lambda b: b.offset)
    assert all(b.offset >= p.arena_bytes for b in pinned)
    assert all(a.offset + a.size <= b.offset for a, b in itertools.pairwise(pinned))
    assert p.lower_bound_arena == _lower_bound_by_sweep(p)
    assert p.lower_bound_bytes <= p.peak_bytes <= p.naive_bytes


@settings(max_examples=120, **SETTINGS)
@given(program=programs(max_statements=8, nested=True))
def test_planner_invariants_on_random_control_flow(program):
    with quiet_numpy():
        graph, fetches, feeds = program.build()
    p = df.memory.plan(fetches, feed_dict=feeds, graph=graph)
    _check_invariants(p, graph, fetches, feeds)


@settings(max_examples=80, **SETTINGS)
@given(program=programs(max_statements=10))
def test_planner_invariants_on_random_programs(program):
    with quiet_numpy():
        graph, fetches, feeds = program.build()
    p = df.memory.plan(fetches, feed_dict=feeds, graph=graph)
    _check_invariants(p, graph, fetches, feeds)


def test_invariants_on_training_steps():
    g, x, y, loss, step, _init = _mlp()
    p = df.memory.plan([step, loss], feed_shapes={x: [50, 64], y: [50, 10]}, graph=g)
    _check_invariants(p, g, [loss], {x: 0, y: 0})
    g, w, x, dw = _rnn_grad()
    p = df.memory.plan(dw, feed_shapes={w: [8, 8], x: [4, 8]}, graph=g)
    _check_invariants(p, g, [dw], {w: 0, x: 0})


# -- control flow ------------------------------------------------------------------------------
def _cond_graph(true_fn, false_fn, n=4096):
    g = df.Graph()
    with g.as_default():
        p = df.placeholder(df.bool, [], name="p")
        x = df.placeholder(df.float32, [n], name="x")
        out = df.cond(p, lambda: true_fn(x), lambda: false_fn(x))
    return g, df.memory.plan(out, feed_shapes={p: [], x: [n]}, graph=g)


def test_cond_branches_share_memory():
    big = lambda x: df.reduce_sum(df.matmul(df.reshape(x, [64, 64]),
                                            df.reshape(df.exp(x), [64, 64])) + 1.0)
    other = lambda x: df.reduce_sum(df.sin(x) * df.cos(x) + df.tanh(x))
    small = lambda x: df.constant(0.0)
    _, both = _cond_graph(big, other)
    _, only_big = _cond_graph(big, small)
    _, only_other = _cond_graph(small, other)
    assert both.arena_bytes == max(only_big.arena_bytes, only_other.arena_bytes)
    span = {(k, name.rsplit(":", 1)[-1]): i for i, (k, name) in enumerate(both.order)
            if k in ("begin", "end") and name.endswith(("true", "false"))}

    def blocks(branch):
        lo, hi = span[("begin", branch)], span[("end", branch)]
        return {b.block for b in both.buffers if not b.pinned and lo <= b.first_use <= hi}
    assert blocks("false") and blocks("false") <= blocks("true")  # no new block for it


def test_loop_body_planned_once():
    """The arena does not grow with the trip count; only the stacks do."""
    plans = {}
    for steps in (3, 30):
        g, w, x, dw = _rnn_grad(steps=steps)
        plans[steps] = df.memory.plan(dw, feed_shapes={w: [8, 8], x: [4, 8]}, graph=g)
    assert plans[3].arena_bytes == plans[30].arena_bytes
    assert plans[3].trip_counts["rnn/while_context"] == 3
    assert plans[30].trip_counts["rnn/while_context"] == 30
    # the forward loop's count is the gradient loop's
    assert set(plans[30].trip_counts.values()) == {30}


def test_trip_count_function_matches_the_formula():
    batch, hidden = 4, 8
    g, w, x, dw = _rnn_grad(steps=10, batch=batch, hidden=hidden)
    p = df.memory.plan(dw, feed_shapes={w: [hidden, hidden], x: [batch, hidden]}, graph=g)
    # The gradient saves h (for MatMul's gradient) and tanh's output once per iteration:
    # the same arrays one iteration apart, so one history of n + 1 values of h.
    elem = align(batch * hidden * 4)
    assert [(s.elem_bytes, s.history) for s in p.stacks] == [(elem, True)]
    # each stack element also costs the runtime its array object (RUNTIME_STACK_ELEM_BYTES)
    base = p.arena_bytes + p.pinned_bytes + p.runtime_step_bytes
    elem += RUNTIME_STACK_ELEM_BYTES
    for n in (0, 1, 7, 100, 1000):
        assert p.peak_bytes_for({"rnn": n}) == base + (n + 1 if n else 0) * elem
        replanned = df.memory.plan(dw, feed_shapes={w: [hidden, hidden], x: [batch, hidden]},
                                   graph=g, trip_counts={"rnn": n})
        assert replanned.peak_bytes == p.peak_bytes_for({"rnn": n})
    assert p.peak_bytes == base + 11 * elem


def test_stacks_of_unrelated_values_do_not_merge():
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [16], name="x")
        _, v = df.while_loop(lambda i, v: i < 4, lambda i, v: (i + 1, df.sin(v) * df.cos(v)),
                             (0, x), name="loop")
        (dx,) = df.gradients(df.reduce_sum(v), [x])
    p = df.memory.plan(dx, feed_shapes={x: [16]}, graph=g)
    assert not any(s.history for s in p.stacks) and len(p.stacks) >= 2
    assert p.stack_bytes_for() == 4 * sum(s.elem_bytes for s in p.stacks)


def test_loop_without_a_known_count_is_an_error_naming_it():
    g, w, x, dw = _rnn_grad(data_bound=True)
    shapes = {w: [8, 8], x: [4, 8]}
    with pytest.raises(df.errors.InvalidArgumentError, match="'rnn'"):
        df.memory.plan(dw, feed_shapes=shapes, graph=g)
    p = df.memory.plan(dw, feed_shapes=shapes, graph=g, trip_counts={"rnn": 5})
    assert p.trip_counts["rnn/while_context"] == 5
    g, w, x, dw = _rnn_grad(data_bound=True, maximum_iterations=7)
    p = df.memory.plan(dw, feed_shapes={w: [8, 8], x: [4, 8]}, graph=g)
    assert p.trip_counts["rnn/while_context"] == 7


def test_swap_memory_stacks_count_on_the_host():
    g, w, x, dw = _rnn_grad(steps=20, swap_memory=True)
    host = df.memory.plan(dw, feed_shapes={w: [8, 8], x: [4, 8]}, graph=g)
    g2, w2, x2, dw2 = _rnn_grad(steps=20)
    device = df.memory.plan(dw2, feed_shapes={w2: [8, 8], x2: [4, 8]}, graph=g2)
    assert host.host_stack_bytes == device.stack_bytes_for() == 21 * align(4 * 8 * 4)
    assert host.peak_bytes == device.peak_bytes - device.stack_bytes_for()
    assert host.zones["host_stacks"] == host.host_stack_bytes and host.zones["stacks"] == 0


def test_nested_loop_stacks_multiply_trip_counts():
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [16], name="x")

        def outer(i, v):
            _, v = df.while_loop(lambda j, u: j < 3, lambda j, u: (j + 1, df.sin(u) * x),
                                 (0, v), name="inner")
            return i + 1, v
        _, v = df.while_loop(lambda i, v: i < 5, outer, (0, x), name="outer")
        (dx,) = df.gradients(df.reduce_sum(v), [x])
    p = df.memory.plan(dx, feed_shapes={x: [16]}, graph=g)
    # per outer iteration: the inner loop's count (an int32) and, per inner iteration,
    # u (for Sin's gradient) and sin(u) (for mul's): 16 floats each
    assert sorted((len(s.loops), s.elem_bytes) for s in p.stacks) == [
        (1, align(4)), (2, align(64)), (2, align(64))]
    base = p.peak_bytes_for({"outer": 0})
    # (and the runtime's array object of each element: RUNTIME_STACK_ELEM_BYTES)
    elem4, elem64 = align(4) + RUNTIME_STACK_ELEM_BYTES, align(64) + RUNTIME_STACK_ELEM_BYTES
    for n_out, n_in in ((1, 3), (2, 3), (5, 3), (5, 10)):
        expect = n_out * (elem4 + 2 * n_in * elem64)
        assert p.peak_bytes_for({"outer": n_out, "outer/inner": n_in}) - base == expect
    assert p.peak_bytes == base + 5 * (elem4 + 2 * 3 * elem64)


# -- max batch --------------------------------------------------------------------------------
def test_max_batch_size_on_superlinear_memory():
    """``x^T x`` style outer products: memory grows with batch^2."""
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [None, 16], name="x")
        gram = df.matmul(x, x, transpose_b=True)       # batch x batch
        out = df.reduce_sum(df.tanh(gram) * 2.0)
    budget = 3 << 20

    def peak(b):
        return df.memory.plan(out, feed_shapes={x: [b, 16]}, graph=g).peak_bytes
    b = df.memory.max_batch_size(out, {x: [None, 16]}, budget, graph=g)
    assert peak(b) <= budget < peak(b + 1)
    assert 4 * b * b <= budget < 4 * 2 * (b + 1) * (b + 1) + 16 * 4 * (b + 1) + 4096


def test_max_batch_size_linear_mlp_and_too_small_budget():
    g, x, y, _loss, step, _init = _mlp()
    shapes = {x: [None, 64], y: [None, 10]}
    budget = 4 << 20
    b = df.memory.max_batch_size(step, shapes, budget, graph=g)
    peak = lambda n: df.memory.plan(step, feed_shapes={x: [n, 64], y: [n, 10]},
                                    graph=g).peak_bytes
    assert peak(b) <= budget < peak(b + 1)
    one = peak(1)
    with pytest.raises(df.errors.ResourceExhaustedError, match=str(one)):
        df.memory.max_batch_size(step, shapes, one - 1, graph=g)


# -- views ------------------------------------------------------------------------------------
def test_summary_and_svg(tmp_path):
    g, w, x, dw = _rnn_grad(steps=10)
    p = df.memory.plan(dw, feed_shapes={w: [8, 8], x: [4, 8]}, graph=g)
    text = p.summary(top=3)
    assert "lower bound" in text and "stack" in text and "gradient" in text
    assert len([ln for ln in text.splitlines() if " live " in ln]) == 3
    svg = p.to_svg(tmp_path / "plan.svg")
    assert svg.startswith("<svg") and svg.rstrip().endswith("</svg>")
    assert svg.count("<rect") >= len([b for b in p.buffers if not b.pinned])
    import xml.etree.ElementTree as ET
    ET.fromstring((tmp_path / "plan.svg").read_text())


# -- CLI and measurement ---------------------------------------------------------------------
def test_cli_memory_prints_the_plan(tmp_path, capsys):
    from dataflow.cli import main
    script = tmp_path / "model.py"
    script.write_text(
        "import dataflow as df\n"
        "x = df.placeholder(df.float32, [None, 32], name='x')\n"
        "y = df.reduce_sum(df.tanh(df.matmul(x, df.ones([32, 32]))), name='y')\n")
    svg = tmp_path / "plan.svg"
    assert main(["memory", str(script), "--fetch", "y:0", "--feed-shape", "x=100,32",
                 "--svg", str(svg), "--top", "2"]) == 0
    out = capsys.readouterr().out
    # x (pinned feed) and the MatMul/Tanh outputs: 100 x 32 floats
    assert "peak " in out and "12.5 KiB" in out and svg.read_text().startswith("<svg")
    assert main(["memory", str(script), "--fetch", "y:0"]) == 2
    assert "feed_shapes={x" in capsys.readouterr().err


def test_measured_peak_lies_between_the_largest_value_and_no_reuse():
    from benchmarks.memory import measure_step_peak, measurement_config, planned_run_bytes
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float64, [200_000], name="x")
        h = x
        for f in (df.sin, df.exp, df.tanh, df.cos):
            h = f(h) * 1.5
        out = df.reduce_sum(h)
    feed = {x: np.linspace(0, 1, 200_000)}
    p = df.memory.plan(out, feed_dict=feed, graph=g)
    with df.Session(graph=g, config=measurement_config()) as sess:
        measured = measure_step_peak(sess, out, feed)
    assert 200_000 * 8 <= measured <= (p.naive_bytes - p.pinned_bytes) + 64 * 1024
    # in place: one block + the sum, and the runtime's own objects
    assert planned_run_bytes(p) == 200_000 * 8 + align(8) + p.runtime_bytes


def test_quality_on_the_benchmark_workloads():
    """peak <= 1.1 x lower bound on each workload of benchmarks/memory.py, and reuse
    saves memory wherever the values are not all live at once."""
    from benchmarks.memory import WORKLOADS
    for name, make in WORKLOADS.items():
        g, fetch, feed, _ = make(50)
        p = df.memory.plan(fetch, feed_dict=feed, graph=g)
        assert p.peak_bytes <= 1.1 * p.lower_bound_bytes, name
        assert p.arena_bytes <= 1.1 * p.lower_bound_arena, name
        assert not p.overlaps(), name
        if "MLP" in name:
            assert p.naive_bytes >= 2 * p.peak_bytes, name


def test_loop_plan_against_the_measured_run():
    """The T-step RNN gradient: what the plan says a run allocates (arena, the history
    of h on the stacks, the fetched gradient) against tracemalloc on the unplanned run."""
    from benchmarks.memory import measure_step_peak, measurement_config, planned_run_bytes
    for steps in (40, 80):
        g, w, x, dw = _rnn_grad(steps=steps, batch=32, hidden=128)
        rng = np.random.default_rng(0)
        feed = {w: (rng.standard_normal((128, 128)) / 12).astype(np.float32),
                x: rng.standard_normal((32, 128)).astype(np.float32)}
        p = df.memory.plan(dw, feed_dict=feed, graph=g)
        with df.Session(graph=g, config=measurement_config()) as sess:
            measured = measure_step_peak(sess, dw, feed)
        assert abs(measured - planned_run_bytes(p)) <= 0.15 * planned_run_bytes(p), (
            steps, measured, planned_run_bytes(p))


def test_raw_loop_inside_a_cond_branch():
    """A loop built from the raw primitives (no WhileContext) inside ``df.cond``: its
    region sits in the branch its entered values come from, and its counter bound is
    found."""
    from dataflow.ops import control_flow_ops as cf
    g = df.Graph()
    with g.as_default():
        p = df.placeholder(df.bool, [], name="p")
        x = df.placeholder(df.float64, [100], name="x")

        def true_fn():
            frame = "raw_in_cond"
            ei = cf.enter(df.constant(0, df.int32), frame)
            ea = cf.enter(df.sin(x), frame)
            lim = cf.enter(df.constant(3, df.int32), frame, is_constant=True)
            one = cf.enter(df.constant(1, df.int32), frame, is_constant=True)
            mi, _ = cf.merge([ei, ei])
            ma, _ = cf.merge([ea, ea])
            pc = cf.loop_cond(df.less(mi, lim))
            _, ti = cf.switch(mi, pc)
            fa, ta = cf.switch(ma, pc)
            mi.op._update_input(1, cf.next_iteration(df.add(ti, one)))
            ma.op._update_input(1, cf.next_iteration(df.exp(ta)))
            return df.reduce_sum(cf.exit(fa) * 2.0)
        out = df.cond(p, true_fn, lambda: df.reduce_sum(df.cos(x)))
    feeds = {p: True, x: np.zeros(100)}
    plan = df.memory.plan(out, feed_dict=feeds, graph=g)
    _check_invariants(plan, g, [out], feeds)
    assert plan.trip_counts == {"raw_in_cond": 3}
    events = [name for _, name in plan.order]
    true_at = events.index("cond(cond/Switch):true")
    assert true_at < events.index("raw_in_cond") < events.index("cond(cond/Switch):false")


def test_loop_variable_whose_shape_grows_is_an_error_not_a_guess():
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [2], name="x")
        _, v = df.while_loop(lambda i, v: i < 3,
                             lambda i, v: (i + 1, df.concat([v, df.ones([1])], 0)),
                             (0, x), shape_invariants=(df.TensorShape([]),
                                                       df.TensorShape([None])), name="grow")
        out = df.reduce_sum(v)
    with pytest.raises(df.errors.InvalidArgumentError, match=r"grow/.*\(\?,\)"):
        df.memory.plan(out, feed_shapes={x: [2]}, graph=g)
