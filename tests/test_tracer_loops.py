"""df.function folds Python loops whose iterations trace alike into one ``while_loop``
with a fed trip count (dataflow/tracer/loops.py): a new trip count needs no new trace;
loops that do not qualify stay unrolled; a fallback inside a folded loop runs everything
once; gradients through a folded loop (a GradientTape over an RNN) equal eager's."""
import numpy as np

import dataflow as df
from dataflow.tracer.loops import LOOP_OP, fold_loops
from dataflow.tracer.trace import GRADIENT_OP

from dataflow.framework import eager as eager_impl
from dataflow.tracer.step import _tracing_dispatch

from . import test_tracer


def _trace(fn, *args):
    """The trace of one eager call of ``fn``, with Python slice bounds and indices fed
    as df.function feeds them."""
    previous = eager_impl.set_dispatcher(_tracing_dispatch)
    try:
        return test_tracer._trace(fn, *args)
    finally:
        eager_impl.set_dispatcher(previous)


class _RNN:
    """An Elman RNN over a Python ``for`` loop on the time steps of ``xs[:, t]``, trained
    by a GradientTape and plain gradient descent."""

    def __init__(self, rng, hidden=6):
        self.wx = df.Variable(rng.standard_normal((3, hidden)).astype(np.float32) * 0.5)
        self.wh = df.Variable(rng.standard_normal((hidden, hidden)).astype(np.float32) * 0.3)
        self.wo = df.Variable(rng.standard_normal((hidden, 1)).astype(np.float32) * 0.5)
        self.variables = [self.wx, self.wh, self.wo]
        self.lengths = []

    def step(self, xs, ys):
        self.lengths.append(xs.shape[1])
        with df.GradientTape() as tape:
            h = df.zeros([xs.shape[0], self.wh.shape[0]])
            for t in range(xs.shape[1]):
                h = df.tanh(df.matmul(xs[:, t], self.wx) + df.matmul(h, self.wh))
            loss = df.reduce_mean(df.square(df.matmul(h, self.wo) - ys))
        grads = tape.gradient(loss, self.variables)
        for v, g in zip(self.variables, grads):
            v.assign_sub(0.1 * g)
        return loss, grads


def _rnn_batches(rng, lengths):
    return [(rng.standard_normal((4, n, 3)).astype(np.float32),
             rng.standard_normal((4, 1)).astype(np.float32)) for n in lengths]


def _run_rnn(mode, seed, batches):
    with df.eager_mode():
        model = _RNN(np.random.default_rng(seed))
        step = df.function(model.step, mode=mode)
        out = []
        for x, y in batches:
            loss, grads = step(df.constant(x), df.constant(y))
            out.append((float(loss), [g.numpy() for g in grads]))
        return out, step, [v.numpy() for v in model.variables]


def _node_types(fn):
    return [n.op_type for n in fn._tg.nodes]


def test_a_loop_with_a_new_trip_count_runs_on_the_graph_with_no_new_trace(rng):
    lengths = [5, 3, 7, 2, 9, 4, 1, 6, 8, 3]
    batches = _rnn_batches(rng, lengths)
    want, _, want_vars = _run_rnn("eager", 1, batches)
    got, step, got_vars = _run_rnn("graph", 1, batches)
    # Two tracing steps (5 and 3 iterations) make the graph; every later length, seen or
    # not, one iteration included, runs on it.
    assert step.stats == {"traces": 1, "fallbacks": 0, "graph_steps": 8, "eager_steps": 2}
    assert _node_types(step).count(LOOP_OP) == 1
    ops = {op.type for op in step.graph.get_operations()}
    assert {"Enter", "LoopCond", "NextIteration", "Exit"} <= ops
    for (loss, grads), (want_loss, want_grads) in zip(got, want):
        np.testing.assert_allclose(loss, want_loss, rtol=1e-5, atol=1e-6)
        for g, w in zip(grads, want_grads):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)
    for g, w in zip(got_vars, want_vars):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)


def test_gradients_through_a_folded_loop_equal_eager_and_come_from_the_graph(
        rng, monkeypatch):
    from dataflow.tracer.coexec import CoRun
    matched = [0]
    original = CoRun._match_gradient

    def counting(self, *args):
        grads = original(self, *args)
        matched[0] += grads is not None
        return grads

    monkeypatch.setattr(CoRun, "_match_gradient", counting)
    batches = _rnn_batches(rng, [4, 6, 11, 2, 5])
    want, _, _ = _run_rnn("eager", 2, batches)
    got, step, _ = _run_rnn("graph", 2, batches)
    assert step.stats["fallbacks"] == 0 and step.stats["graph_steps"] == 3
    # The tape's gradient is one node: the graph's df.gradients through the while_loop.
    assert GRADIENT_OP in _node_types(step) and matched[0] == 3
    assert sum(op.type == "StackPush" for op in step.graph.get_operations()) >= 1
    for (_, grads), (_, want_grads) in zip(got, want):
        for g, w in zip(grads, want_grads):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)


class _Detector:
    """Faster R-CNN's pattern: Python chooses the trip count from a fetched value, the
    loop sums a loss that starts as the Python float 0.0, and crops with fed bounds."""

    def __init__(self, rng):
        self.w = df.Variable(rng.standard_normal((2, 3)).astype(np.float32))

    def step(self, pixels, regions):
        total = 0.0
        for r in regions:
            crop = pixels[:, 2 * r:2 * r + 2]
            total += df.reduce_sum(df.square(df.matmul(crop, self.w)))
        return total / len(regions)


def test_a_sum_from_a_python_float_over_fed_crops_folds(rng):
    pixels = rng.standard_normal((5, 8)).astype(np.float32)
    region_lists = [[0, 1], [3, 2, 1], [2], [0, 1, 2, 3], [1], [3, 0]]

    def run(mode):
        with df.eager_mode():
            model = _Detector(np.random.default_rng(3))
            step = df.function(model.step, mode=mode)
            return [float(step(df.constant(pixels), regions))
                    for regions in region_lists], step

    want, _ = run("eager")
    got, step = run("graph")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert step.stats == {"traces": 1, "fallbacks": 0, "graph_steps": 4, "eager_steps": 2}
    assert _node_types(step).count(LOOP_OP) == 1


def test_fold_loops_wires_carried_invariant_and_fed_values(rng):
    xs = rng.standard_normal((4, 6, 3)).astype(np.float32)
    w = rng.standard_normal((3, 3)).astype(np.float32)

    def step(xs, w):
        h = df.zeros([4, 3])
        for t in range(6):
            h = df.tanh(df.matmul(xs[:, t], w) + h)
        return -h

    with df.eager_mode():
        x_t, w_t = df.constant(xs), df.constant(w)
    trace = _trace(step, x_t, w_t)
    folded = fold_loops(trace, {})
    types = [op.op_type for op in folded.ops]
    assert types == [LOOP_OP, "Neg"]
    loop = folded.ops[0]
    spec = loop.attrs["loop"]
    assert [b.op_type for b in spec.body] == ["StridedSlice", "MatMul", "AddV2", "Tanh"]
    # xs is one object fed in every iteration: fed once, its time axis left out of the
    # spec (another sequence length is the same loop); t is fed every iteration; w is
    # invariant; h is carried from a fed first value (df.zeros of a Python list).
    slice_op = spec.body[0]
    assert slice_op.inputs[0][0] == "x" and slice_op.inputs[1] == ("f",)
    xs_input = slice_op.inputs[0][1]
    assert loop.inputs[xs_input] == ("f",)
    assert loop.feed_specs[xs_input] == (df.float32, (4, None, 3))
    (j, k, init), = spec.variables
    assert (j, k) == (3, 0) and loop.inputs[init[1]] == ("f",)
    assert spec.body[2].inputs[1] == ("c", 0)
    assert folded.ops[1].inputs == (("n", 0, 0),)


def test_loops_that_do_not_qualify_stay_unrolled(rng):
    xs = rng.standard_normal((3, 5, 2)).astype(np.float32)
    w = rng.standard_normal((2, 2)).astype(np.float32)
    counter_values = []

    def collects_outputs(xs, w):
        # Every iteration's output is used after the loop: kept per iteration.
        outs = []
        for t in range(5):
            outs.append(df.matmul(xs[:, t], w))
        return df.add_n(outs)

    def reads_in_the_loop(xs, w):
        # Python reads a value of the body while the loop runs.
        h = df.zeros([3, 2])
        for t in range(5):
            h = df.matmul(xs[:, t], w) + h
            counter_values.append(float(df.reduce_sum(h)))
        return h

    with df.eager_mode():
        v = df.Variable(0.0)

        def writes_a_variable(xs, w):
            # The body writes a variable.
            for t in range(5):
                v.assign_add(df.reduce_sum(xs[:, t]))
            return v.read_value()

        x_t, w_t = df.constant(xs), df.constant(w)
    for fn in (collects_outputs, reads_in_the_loop, writes_a_variable):
        trace = _trace(fn, x_t, w_t)
        assert LOOP_OP not in [op.op_type for op in fold_loops(trace, {}).ops], fn.__name__

    # Unrolled, a new trip count is a new path: one fallback per new count.
    def run(mode, lengths):
        with df.eager_mode():
            f = df.function(lambda x: df.add_n([x[:, t] for t in range(x.shape[1])]),
                            mode=mode)
            return [f(df.constant(xs[:, :n])).numpy() for n in lengths], f

    lengths = [5, 5, 3, 4, 3]
    want, _ = run("eager", lengths)
    got, f = run("graph", lengths)
    for g, w_ in zip(got, want):
        np.testing.assert_allclose(g, w_, rtol=1e-5, atol=1e-6)
    assert f.stats["fallbacks"] == 2 and LOOP_OP not in _node_types(f)


class _Counting:
    """A folded loop with Python side effects in its body and a variable update after
    it; on one step (``flag``) the body takes a new op in its third iteration."""

    def __init__(self):
        self.v = df.Variable(np.zeros(2, np.float32))
        self.log = []

    def step(self, xs, flag):
        h = df.zeros([2])
        for t in range(xs.shape[0]):
            self.log.append(t)                     # Python side effect per iteration
            h = df.tanh(xs[t] + h)
            if flag and t == 2:
                h = h * 2.0                        # a new path in the middle of the loop
        self.v.assign_add(h)
        print("step done", len(self.log))
        return h


def test_a_fallback_inside_a_folded_loop_runs_everything_once(rng, capsys):
    data = [rng.standard_normal((n, 2)).astype(np.float32) for n in (4, 3, 5, 6, 4, 5)]
    flags = [False, False, False, True, False, True]

    def run(mode):
        with df.eager_mode():
            model = _Counting()
            step = df.function(model.step, mode=mode)
            outs = [step(df.constant(x), flag).numpy() for x, flag in zip(data, flags)]
            return outs, model.log, model.v.numpy(), step

    want, want_log, want_v, _ = run("eager")
    want_out = capsys.readouterr().out
    got, got_log, got_v, step = run("graph")
    assert capsys.readouterr().out == want_out
    assert got_log == want_log                      # every iteration ran once in Python
    np.testing.assert_allclose(got_v, want_v, rtol=1e-5, atol=1e-6)   # assign_add once
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    # Step 4 falls back in its third iteration (the flag's op is new); step 6 takes
    # that path again: the fallback's trace, folded with the known body, merged it.
    assert step.stats["fallbacks"] == 1 and step.stats["graph_steps"] == 3
    assert "loop" not in "".join(step.fallback_reasons)


def test_a_folded_loop_in_a_case_not_taken_is_dead_and_never_waited_for(rng):
    xs = [rng.standard_normal((n, 3)).astype(np.float32) for n in (4, 5, 3, 6, 2, 5, 4, 3)]
    branches = [True, False, True, False, False, True, True, False]

    h0 = rng.standard_normal(3).astype(np.float32)

    def step(x, loop):
        h = df.tanh(df.constant(h0))      # x's length varies: only the loop reads x
        if loop:                          # a Python branch: a Switch-Case in the graph
            for t in range(x.shape[0]):
                h = df.tanh(h * x[t])
        else:
            h = h * 3.0
        return h

    def run(mode):
        with df.eager_mode():
            f = df.function(step, mode=mode)
            return [f(df.constant(x), b).numpy() for x, b in zip(xs, branches)], f

    want, _ = run("eager")
    got, f = test_tracer._no_hang(lambda: run("graph"))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    # Both branches were traced first; every later step, either branch, runs on the graph.
    assert f.stats == {"traces": 2, "fallbacks": 0, "graph_steps": 6, "eager_steps": 2}
    assert LOOP_OP in _node_types(f)


def test_leaving_a_folded_loop_mid_iteration_falls_back_with_eager_results(rng):
    xs = [rng.standard_normal((5, 3)).astype(np.float32) for _ in range(7)]
    stops = [None, None, None, 2, None, 3, None]
    h0 = rng.standard_normal(3).astype(np.float32)

    def step(x, stop):
        h = df.tanh(df.constant(h0))
        for t in range(x.shape[0]):
            h = df.tanh(h * x[t])
            if t == stop:
                break                     # leaves the loop in the middle of an iteration
            h = h + 1.0
        return h

    def run(mode):
        with df.eager_mode():
            f = df.function(step, mode=mode)
            return [f(df.constant(x), s).numpy() for x, s in zip(xs, stops)], f

    want, _ = run("eager")
    got, f = test_tracer._no_hang(lambda: run("graph"))
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    # The graph's loop runs whole iterations: a step that leaves the loop between two
    # ops of its body falls back (every time); the other steps run on the graph, whose
    # loop goes first when a step could also be on such a step's path.
    assert f.stats["fallbacks"] == 2 and f.stats["graph_steps"] == 3
    assert all("middle of an iteration" in r for r in f.fallback_reasons)


def test_folded_loops_under_random_executor_orders_never_hang(rng):
    data = [(rng.standard_normal((2, n, 3)).astype(np.float32), n) for n in (3, 4, 2, 5, 3)]
    w = rng.standard_normal((3, 3)).astype(np.float32)

    seen = []

    def step(xs, w):
        h = df.zeros([2, 3])
        scale = df.reduce_sum(w)
        for t in range(xs.shape[1]):
            h = df.tanh(df.matmul(xs[:, t], w) + h)
            if t == 1:      # Python reads a value made before the loop, mid-loop
                seen.append(float(scale))
        return df.reduce_sum(h)

    def run(mode, seed=None):
        with df.eager_mode():
            f = df.function(step, mode=mode, ready_order_seed=seed)
            w_t = df.constant(w)
            return [float(f(df.constant(x), w_t)) for x, _ in data], f

    want, _ = run("eager")
    for seed in range(6):
        got, f = test_tracer._no_hang(lambda: run("graph", seed))
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        assert f.stats["graph_steps"] == 3 and LOOP_OP in _node_types(f)
    assert len(seen) == 7 * len(data) and len(set(seen)) == 1


def test_a_gradient_recorded_op_by_op_is_not_folded_and_comes_from_the_memo(
        rng, monkeypatch):
    """An embedding's gradient is IndexedSlices, so the tape's gradient is recorded op
    by op. A division's gradient divides by the divisor twice in a row (``-x / y / y``):
    two alike ops, the second fed by the first, at one call site, which are no Python
    loop. They stay unfolded, so later steps take the gradient from the memo (a folded
    run would run the gradient functions in Python every step)."""
    table0 = rng.standard_normal((10, 4)).astype(np.float32)
    ids = [rng.integers(0, 10, 6).astype(np.int32) for _ in range(7)]
    scale = rng.uniform(1.0, 2.0, (6, 4)).astype(np.float32)

    def run(mode):
        with df.eager_mode():
            table = df.Variable(table0)

            def step(i):
                with df.GradientTape() as tape:
                    h = df.nn.embedding_lookup(table, i) / scale
                    loss = df.reduce_sum(df.square(h))
                g = tape.gradient(loss, table)
                table.assign_sub(0.1 * df.convert_to_tensor(g))
                return loss

            f = df.function(step, mode=mode)
            losses = [float(f(df.constant(i))) for i in ids]
            return losses, table.numpy(), f

    want, want_table, _ = run("eager")
    hits = test_tracer._count_memo_hits(monkeypatch)
    got, table, f = run("graph")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(table, want_table, rtol=1e-5, atol=1e-6)
    assert f.stats == {"traces": 1, "fallbacks": 0, "graph_steps": 5, "eager_steps": 2}
    types = _node_types(f)
    # One forward division and three in its gradient (g / y, -x / y, then / y).
    assert types.count("RealDiv") == 4 and LOOP_OP not in types and GRADIENT_OP not in types
    assert hits[0] == 4                      # every graph step after the first
