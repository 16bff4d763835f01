"""df.function (Terra's co-execution, dataflow/tracer): node identity, TraceGraph merging,
Algorithm 1, graph generation, co-execution with Input Feeding / Output Fetching on
Send/Recv, the deadlock rule, fallback, and eager-vs-graph equality."""
import threading

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import dataflow as df
from dataflow.framework import eager as eager_impl
from dataflow.tracer.case_assignment import all_paths, assign_cases, covers
from dataflow.tracer.location import Locator
from dataflow.tracer.trace import TraceRecorder
from dataflow.tracer.trace_graph import END, START, TraceGraph


def _trace(fn, *args):
    """The trace of one eager call of ``fn`` (recorded as df.function records it)."""
    import sys
    with df.eager_mode():
        loc = Locator()
        rec = TraceRecorder(loc)
        eager_impl.RECORDERS.append(rec.record)
        try:
            loc.boundary = sys._getframe()
            fn(*args)
        finally:
            eager_impl.RECORDERS.remove(rec.record)
        return rec.finish()


def _no_hang(fn, timeout=60.0):
    """Run ``fn`` on a thread; fail (instead of hanging the suite) if it does not end."""
    box = {}

    def target():
        try:
            box["result"] = fn()
        except BaseException as e:  # noqa: BLE001 - re-raised below
            box["error"] = e

    th = threading.Thread(target=target, daemon=True)
    th.start()
    th.join(timeout)
    assert not th.is_alive(), "the step hung"
    if "error" in box:
        raise box["error"]
    return box.get("result")


# -- 1. node identity and TraceGraph merging ------------------------------------------------

def helper(x):
    return x * 2.0


def test_same_op_from_two_call_sites_is_two_nodes():
    def step(x):
        a = helper(x)          # Mul at call site 1 (inside helper)
        b = helper(a)          # the same line of helper, another call site
        return b

    with df.eager_mode():
        x = df.constant([1.0, 2.0])
    trace = _trace(step, x)
    tg = TraceGraph()
    tg.merge(trace)
    assert [n.op_type for n in tg.nodes] == ["Mul", "Mul"]
    assert tg.nodes[0].location != tg.nodes[1].location


def test_same_op_in_two_loop_iterations_is_two_nodes_and_repeats_merge():
    def step(x):
        for _ in range(3):
            x = x + 1.0
        return x

    with df.eager_mode():
        x = df.constant(1.0)
    trace = _trace(step, x)
    locations = [op.location for op in trace.ops]
    assert len(trace.ops) == 3 and [loc[1] for loc in locations] == [0, 1, 2]
    assert len({loc[0] for loc in locations}) == 1          # one call site
    tg = TraceGraph()
    assert tg.merge(trace)
    # The three iterations trace alike: merged, they are one folded loop node.
    assert [n.op_type for n in tg.nodes] == ["FoldedLoop"]
    assert not tg.merge(_trace(step, x))                      # the same trace again
    assert len(tg.nodes) == 1 and tg.num_traces == 1


def test_different_attributes_are_different_nodes():
    def step(a, b, flag):
        return df.matmul(a, b, transpose_a=flag)

    with df.eager_mode():
        a = df.constant(np.eye(2, dtype=np.float32))
    tg = TraceGraph()
    tg.merge(_trace(step, a, a, False))
    tg.merge(_trace(step, a, a, True))
    assert [n.attrs["transpose_a"] for n in tg.nodes] == [False, True]
    assert tg.num_traces == 2


def test_constants_and_outside_tensors_are_fed_not_identified_by_value():
    def step(x, c):
        return x * c + df.constant(float(np.random.rand()))

    with df.eager_mode():
        tg = TraceGraph()
        for value in (1.0, 2.0, 3.0):
            tg.merge(_trace(step, df.constant([value]), df.constant(value)))
    assert [n.op_type for n in tg.nodes] == ["Mul", "AddV2"]
    assert tg.nodes[0].inputs == (("f",), ("f",))
    assert tg.nodes[1].inputs == (("n", 0, 0), ("f",))
    assert tg.num_traces == 1


def test_merge_of_two_branches_makes_a_diamond():
    def step(x, flag):
        y = x + 1.0
        if flag:
            y = y * 3.0
        else:
            y = y - 3.0
        return df.reduce_sum(x)

    with df.eager_mode():
        x = df.constant([1.0])
    tg = TraceGraph()
    tg.merge(_trace(step, x, True))
    tg.merge(_trace(step, x, False))
    types = {n.id: n.op_type for n in tg.nodes}
    assert sorted(types.values()) == ["AddV2", "Mul", "Sub", "Sum"]
    add = next(i for i, t in types.items() if t == "AddV2")
    total = next(i for i, t in types.items() if t == "Sum")
    branches = [i for i, t in types.items() if t in ("Mul", "Sub")]
    assert tg.edges == {(START, add), (add, branches[0]), (add, branches[1]),
                        (branches[0], total), (branches[1], total), (total, END)}


# -- 2. Algorithm 1 ---------------------------------------------------------------------------

# The seed's Figure 2 (its image is not in the text; this is the graph its walk-through
# describes step by step): a: start->1; b, c, d: 1->2, 1->4, 1->6; the chains 2-3 and 4-5;
# g, h: 3->7, 5->7; i: 6->8; j: 7->8; then 8-9 and 9->end.
FIGURE_2 = [("start", 1), (1, 2), (1, 4), (1, 6), (2, 3), (4, 5), (3, 7), (5, 7), (6, 8),
            (7, 8), (8, 9), (9, "end")]


def test_algorithm_1_on_the_papers_figure_2():
    a, b, c, d = ("start", 1), (1, 2), (1, 4), (1, 6)
    g, h, i, j = (3, 7), (5, 7), (6, 8), (7, 8)
    got = [[(block, set(ctrl)) for block, ctrl in sc]
           for sc in assign_cases(FIGURE_2, "start", "end")]
    assert got == [
        [([1], {a})],
        [([2, 3], {b}), ([4, 5], {c}), ([6], {d})],
        [([7], {g, h}), ([], {i})],           # node 8 waits for edge j: an empty block
        [([8, 9], {i, j})],
    ]
    # "if the PythonRunner follows edge c, the GraphRunner executes case 2 of the first
    # Switch-Case": the first switch-case with several cases, second case.
    multi = [sc for sc in assign_cases(FIGURE_2, "start", "end") if len(sc) > 1]
    assert [k for k, (_, ctrl) in enumerate(multi[0]) if c in ctrl] == [1]
    for path in all_paths(FIGURE_2, "start", "end"):
        assert covers(assign_cases(FIGURE_2, "start", "end"), path, "end")


@st.composite
def trace_dags(draw):
    """A random TraceGraph: nodes 0..n-1 in topological order, each reachable from start
    and reaching end."""
    n = draw(st.integers(1, 9))
    edges = set()
    for v in range(n):
        preds = draw(st.sets(st.integers(0, v - 1), max_size=3)) if v else set()
        if not preds or draw(st.booleans()) and v:
            edges.add(("s", v))
        edges |= {(u, v) for u in preds}
    for v in range(n):
        if not any(e[0] == v for e in edges) or draw(st.integers(0, 4)) == 0:
            edges.add((v, "e"))
    if draw(st.booleans()):
        edges.add(("s", "e"))          # an empty trace
    return sorted(edges, key=repr)


@settings(max_examples=300, deadline=None)
@given(trace_dags())
def test_algorithm_1_covers_every_path_of_random_dags(edges):
    """The seed's Theorem 1: every start->end path is covered (Definition 5)."""
    cases = assign_cases(edges, "s", "e")
    nodes = {x for e in edges for x in e} - {"s", "e"}
    assigned = [v for sc in cases for block, _ in sc for v in block]
    assert sorted(assigned) == sorted(nodes)          # each node in exactly one block
    for sc in cases:                                  # cases of a switch-case exclusive
        ctrl = [e for _, c in sc for e in c]
        assert len(ctrl) == len(set(ctrl))
    for path in all_paths(edges, "s", "e"):
        assert covers(cases, path, "e"), (edges, path, cases)


# -- 3/4. generation and co-execution ------------------------------------------------------------

class MLP:
    """digits-size MLP (64 -> 64 -> 10) trained with a GradientTape and Adam."""

    def __init__(self, seed, hidden=64):
        r = np.random.RandomState(seed)
        self.w1 = df.Variable((r.randn(64, hidden) * 0.1).astype(np.float32))
        self.b1 = df.Variable(np.zeros(hidden, np.float32))
        self.w2 = df.Variable((r.randn(hidden, 10) * 0.1).astype(np.float32))
        self.b2 = df.Variable(np.zeros(10, np.float32))
        self.opt = df.train.AdamOptimizer(0.01)

    @property
    def variables(self):
        return [self.w1, self.b1, self.w2, self.b2]

    def loss(self, x, y):
        h = df.nn.relu(df.matmul(x, self.w1) + self.b1)
        logits = df.matmul(h, self.w2) + self.b2
        return df.reduce_mean(df.nn.sparse_softmax_cross_entropy_with_logits(
            labels=y, logits=logits))

    def step(self, x, y):
        with df.GradientTape() as tape:
            loss = self.loss(x, y)
        grads = tape.gradient(loss, self.variables)
        self.opt.apply_gradients(zip(grads, self.variables))
        return loss


def _batches(rng, n, batch=64):
    xs = rng.standard_normal((n, batch, 64)).astype(np.float32)
    ys = rng.integers(0, 10, (n, batch)).astype(np.int32)
    return xs, ys


def _train(mode, xs, ys, order=None):
    with df.eager_mode():
        model = MLP(7)
        step = df.function(model.step, mode=mode, ready_order_seed=order)
        losses = [float(step(df.constant(x), df.constant(y))) for x, y in zip(xs, ys)]
        return losses, step, [v.numpy() for v in model.variables]


def test_mlp_adam_step_gives_eager_losses_with_two_traces_and_no_fallback(rng):
    xs, ys = _batches(rng, 20)
    eager_losses, eager_step, eager_vars = _train("eager", xs, ys)
    losses, step, variables = _train("graph", xs, ys)
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5, atol=1e-6)
    for got, want in zip(variables, eager_vars):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-6)
    assert step.stats == {"traces": 2, "fallbacks": 0, "graph_steps": 18, "eager_steps": 2}
    assert eager_step.stats == {"traces": 0, "fallbacks": 0, "graph_steps": 0,
                                "eager_steps": 20}
    types = {op.type for op in step.graph.get_operations()}
    assert {"MatMul", "ResourceApplyAdam", "_Recv", "_Send"} <= types
    assert "Switch" not in types          # one path: no Switch-Case
    assert "digraph" in df.viz.graph_to_dot(step.graph)


def test_mlp_losses_do_not_depend_on_the_executors_order(rng):
    xs, ys = _batches(rng, 6)
    want, _, _ = _train("eager", xs, ys)
    for order in (11, 12):
        got, step, _ = _train("graph", xs, ys, order)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        assert step.stats["graph_steps"] == 4


def test_gradient_tape_in_df_function_equals_df_gradients(rng):
    xv = rng.standard_normal((5, 3)).astype(np.float32)
    wv = rng.standard_normal((3, 2)).astype(np.float32)

    def loss_of(x, w):
        return df.reduce_sum(df.tanh(df.matmul(x, w)) ** 2.0) + df.reduce_mean(w * w)

    with df.Graph().as_default():
        w = df.Variable(wv)
        want = df.gradients(loss_of(df.constant(xv), w), [w])[0]
        with df.Session() as sess:
            sess.run(df.global_variables_initializer())
            want = sess.run(want)
    with df.eager_mode():
        w = df.Variable(wv)

        @df.function
        def grad(x):
            with df.GradientTape() as tape:
                loss = loss_of(x, w)
            return tape.gradient(loss, w)

        got = [grad(df.constant(xv)).numpy() for _ in range(4)]
    assert grad.stats["graph_steps"] == 2
    for g in got:
        np.testing.assert_allclose(g, want, rtol=1e-5, atol=1e-6)


def test_figure_5_never_hangs_whatever_the_ready_order():
    """x = opA(); print(x); k = constant(random()); y = opB(k): the graph must never wait
    for k before it sent x (the seed's deadlock rule), in any executor order."""
    r = np.random.RandomState(0)
    printed = []
    for seed in range(40):
        with df.eager_mode():
            base = df.constant([1.0, 2.0])

            def program(b):
                x = df.reduce_sum(b * 3.0)                      # opA
                printed.append(float(x))                         # Output Fetching
                k = df.constant(float(r.rand()))                 # Input Feeding
                return df.square(k) + 1.0                        # opB

            f = df.function(program, ready_order_seed=seed)
            ks = []
            for _ in range(4):
                y = _no_hang(lambda: f(base))
                ks.append(float(y))
        assert f.stats["graph_steps"] == 2 and f.stats["fallbacks"] == 0
        assert all(v > 1.0 for v in ks)
        ops = {op.name: op for op in f.graph.get_operations()}
        feed = next(op for op in f.graph.get_operations()
                    if op.type == "_Recv" and any(i.type == "Square" for i in
                                                  [c for c in op.outputs[0].consumers()]))
        # Nothing here can be dead (no Case Select): the edge comes from the _Send
        # itself, with no ControlTrigger between.
        assert any(c.type == "_Send" for c in feed._control_inputs), \
            "no fetch->feed control edge"
        assert ops
    assert printed == [9.0] * (40 * 4)


@pytest.mark.parametrize("order", [None, 1, 2, 3])
def test_random_branches_trace_then_fall_back_once_per_new_branch(order):
    """A branch chosen by Python randomness each step (SDPoint): a fallback the first
    time the graph meets a branch it has not seen, never afterwards; the same in any
    order the executor takes ready nodes (``order``: the test-only random order's seed)."""
    choices = [0, 0, 0, 1, 0, 1, 2, 2, 1, 0, 2, 1]
    with df.eager_mode():
        v = df.Variable(1.0)

        def step(c):
            x = v * 2.0
            if c == 0:
                x = x + 1.0
            elif c == 1:
                x = df.sqrt(x)
            else:
                x = x * x
            v.assign(x / 3.0)
            return x

        fn = df.function(step, ready_order_seed=order)
        got = [float(fn(c)) for c in choices]
        v.assign(1.0)
        want = [float(step(c)) for c in choices]
    np.testing.assert_allclose(got, want, rtol=1e-6)
    # Calls 1-2 trace (branch 0); branches 1 and 2 each fall back the first time.
    assert fn.stats == {"traces": 3, "fallbacks": 2, "graph_steps": 8, "eager_steps": 2}
    assert "Switch" in {op.type for op in fn.graph.get_operations()}


# -- 5. fallback --------------------------------------------------------------------------------

def test_fallback_runs_every_effect_exactly_once(capsys):
    """The failing iteration's assign_add (run by the graph, then re-run imperatively
    after the restore) and its prints (run in Python) happen once."""
    with df.eager_mode():
        counter = df.Variable(0.0)

        def step(i):
            counter.assign_add(1.0)
            df.print("graph print", i, output_stream="stdout")
            print("python print", float(counter.read_value()))
            if i >= 3:                       # a new path from the fourth call on
                counter.assign_add(10.0)
            return counter.read_value()

        f = df.function(step)
        values = [float(f(i)) for i in range(6)]
    assert values == [1.0, 2.0, 3.0, 14.0, 25.0, 36.0]
    assert f.stats == {"traces": 2, "fallbacks": 1, "graph_steps": 3, "eager_steps": 2}
    out = capsys.readouterr().out.splitlines()
    assert out == [line for i, v in enumerate([1.0, 2.0, 3.0, 4.0, 15.0, 26.0])
                   for line in (f"graph print {i}", f"python print {v}")]
    assert not {"PrintV2", "Print"} & {op.type for op in f.graph.get_operations()}


def test_an_exception_in_the_step_leaves_the_eager_state():
    with df.eager_mode():
        v = df.Variable(0.0)

        def step(fail):
            v.assign_add(1.0)
            if fail:
                raise KeyError("boom")
            return v.read_value()

        f = df.function(step)
        for _ in range(3):
            f(False)
        with pytest.raises(KeyError):
            f(True)
        assert float(v.numpy()) == 4.0
        assert float(f(False)) == 5.0
    assert f.stats["fallbacks"] == 1 and f.stats["graph_steps"] == 2


def test_random_ops_run_in_python_and_feed_the_graph():
    """A random op is stateful: it runs in Python (never twice, never in the graph) and
    its value reaches the graph as an Input Feeding."""
    with df.eager_mode():
        w = df.Variable(np.ones(4, np.float32))
        drawn = []

        def step():
            noise = df.random_uniform([4], seed=3)
            drawn.append(noise.numpy())
            w.assign_add(noise * 0.5)
            return df.reduce_sum(w)

        f = df.function(step)
        totals = [float(f()) for _ in range(5)]
        final = w.numpy()
    assert len(drawn) == 5 and len({d.tobytes() for d in drawn}) == 5
    want = np.ones(4, np.float32)
    for i, d in enumerate(drawn):
        want = want + d * np.float32(0.5)
        assert totals[i] == pytest.approx(float(want.sum()), rel=1e-6)
    np.testing.assert_allclose(final, want, rtol=1e-6)
    assert "RandomUniform" not in {op.type for op in f.graph.get_operations()}
    assert f.stats["graph_steps"] == 3


# -- Python programs: objects, loops, early returns -------------------------------------------

class DropNet:
    """A step method mutating ``self`` (DropBlock's keep_prob schedule, the loss kept on
    ``self`` as MusicTransformer's trainer does)."""

    def __init__(self, mode):
        with df.eager_mode():
            self.w = df.Variable(np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3))
        self.keep_prob = 1.0
        self.loss_value = None
        self.train_step = df.function(self._train_step, mode=mode)

    def _train_step(self, x):
        with df.GradientTape() as tape:
            y = df.matmul(x, self.w) * self.keep_prob
            loss = df.reduce_mean(y * y)
        self.w.assign_sub(tape.gradient(loss, self.w) * 0.1)
        self.loss_value = loss


class Counter:
    def __init__(self):
        with df.eager_mode():
            self.total = df.Variable(0.0)

    @df.function
    def add(self, x):
        self.total.assign_add(df.reduce_sum(x))
        return self.total.read_value()


def test_step_methods_with_object_mutation(rng):
    xs = rng.standard_normal((8, 5, 4)).astype(np.float32)
    losses = {}
    for mode in ("eager", "graph"):
        net = DropNet(mode)
        got = []
        with df.eager_mode():
            for i, x in enumerate(xs):
                net.keep_prob = 1.0 - 0.05 * i          # changed on a schedule
                net.train_step(df.constant(x))
                got.append(float(df.reduce_mean(net.loss_value)))   # a later read
        losses[mode] = got
    np.testing.assert_allclose(losses["graph"], losses["eager"], rtol=1e-5)
    assert net.train_step.stats["graph_steps"] == 6
    a, b = Counter(), Counter()
    with df.eager_mode():
        for _ in range(3):
            a.add(df.constant([1.0, 2.0]))
        assert float(b.add(df.constant([5.0]))) == 5.0
        assert float(a.total.numpy()) == 9.0
    assert a.add.stats["graph_steps"] == 1 and b.add.stats["eager_steps"] == 1


def test_python_loops_with_a_trip_count_read_from_a_tensor():
    def step(x):
        n = int(df.reduce_max(x).numpy())            # FasterRCNN: .numpy() decides
        acc = x
        for _ in range(n):                           # an unrolled loop
            acc = acc * 1.5 - 0.25
        return df.reduce_sum(acc)

    inputs = [[1.0, 2.0], [2.0, 1.0], [1.0, 3.0], [2.0, 2.0], [1.0, 3.0], [0.0, 0.0]]
    with df.eager_mode():
        f = df.function(step)
        got = [float(f(df.constant(v))) for v in inputs]
        want = [float(step(df.constant(v))) for v in inputs]
    assert got == want
    assert f.stats["graph_steps"] + f.stats["fallbacks"] == 4
    assert f.stats["graph_steps"] >= 2      # [2, 2] and the second [1, 3] repeat a path


def test_early_returns_and_prints(capsys):
    def step(x, limit):
        y = df.reduce_sum(x * x)
        if float(y) > limit:
            print("stop at", float(y))
            return None
        return y + 1.0

    with df.eager_mode():
        f = df.function(step)
        x = df.constant([1.0, 2.0])
        got = [f(x, limit) for limit in (10, 10, 10, 1, 1, 10, 1)]
    assert [None if g is None else float(g) for g in got] == [6.0, 6.0, 6.0, None, None,
                                                                6.0, None]
    assert capsys.readouterr().out.count("stop at 5.0") == 3
    assert f.stats["fallbacks"] == 1 and f.stats["graph_steps"] == 4


# -- 6. every op: the graph step against the Session ------------------------------------------

from tests.test_eager_ops import ALL_PROGRAMS, CASES, FED, _build, _replay  # noqa: E402

from .op_harness import tolerance  # noqa: E402


@pytest.mark.parametrize("name", CASES)
def test_every_op_runs_under_df_function_as_in_the_graph(name):
    """The op harness's reference programs, replayed op by op inside a df.function: the
    third call runs on the generated graph (every output materialised) and must give the
    Session's values."""
    graph, feed = _build(ALL_PROGRAMS[name])
    tensors = [t for op in graph.get_operations() for t in op.outputs
               if not (op.type in FED and t in feed)]
    with df.Session(graph=graph) as sess:
        try:
            expected = sess.run(tensors, feed)
        except df.errors.OpError as e:
            step = df.function(lambda: _replay(graph, feed))
            for _ in range(3):
                with pytest.raises(type(e)):
                    step()
            return

    @df.function
    def step():
        values = _replay(graph, feed)
        return [values[t] for t in tensors]

    for _ in range(3):
        got = step()
    assert step.stats == {"traces": 1, "fallbacks": 0, "graph_steps": 1, "eager_steps": 2}
    for t, g, want in zip(tensors, got, expected):
        g = g.numpy()
        assert np.asarray(g).dtype == np.asarray(want).dtype, t
        if np.asarray(want).dtype.kind == "f":
            np.testing.assert_allclose(g, want, err_msg=t.name,
                                       **tolerance(np.asarray(want).dtype))
        else:
            np.testing.assert_array_equal(g, want, err_msg=t.name)


def test_a_df_function_called_inside_another_is_part_of_its_step():
    with df.eager_mode():
        v = df.Variable(1.0)
        inner = df.function(lambda x: x * v)

        @df.function
        def outer(x):
            return inner(x) + 1.0

        got = [float(outer(df.constant(float(i)))) for i in range(4)]
    assert got == [1.0, 2.0, 3.0, 4.0]
    assert outer.stats["graph_steps"] == 2 and inner.stats["eager_steps"] == 4
    assert "Mul" in {op.type for op in outer.graph.get_operations()}


def test_mode_eager_counts_every_call_and_keeps_no_graph():
    with df.eager_mode():
        f = df.function(lambda x: x + 1.0, mode="eager")
        assert [float(f(df.constant(1.0))) for _ in range(3)] == [2.0, 2.0, 2.0]
    assert f.stats == {"traces": 0, "fallbacks": 0, "graph_steps": 0, "eager_steps": 3}
    assert f.graph is None
    with pytest.raises(ValueError, match="mode"):
        df.function(lambda: None, mode="fast")


def test_readme_df_function_example_prints_what_it_says():
    import contextlib
    import io
    import pathlib
    import re
    text = (pathlib.Path(__file__).resolve().parent.parent / "README.md").read_text()
    block = next(b for b in re.findall(r"```python\n(.*?)```", text, re.S)
                 if "@tf.function" in b)
    out = io.StringIO()
    namespace = {"tf": df}
    with contextlib.redirect_stdout(out):
        exec(compile(block, "README-df.function", "exec"), namespace)
    assert out.getvalue().strip() == ("{'traces': 2, 'fallbacks': 0, 'graph_steps': 3, "
                                      "'eager_steps': 2}")
    losses = namespace["losses"]
    assert losses[-1] < losses[0]


def test_sparse_gradients_second_order_tapes_and_cond_in_a_step(rng):
    """Gathers (IndexedSlices gradients, sparse Adam updates), a nested tape for a second
    derivative and df.cond (Python control flow on a fetched predicate) inside a step."""
    table = rng.standard_normal((6, 3)).astype(np.float32)
    batches = [rng.integers(0, 6, 4).astype(np.int32) for _ in range(12)]

    def run(mode):
        with df.eager_mode():
            emb = df.Variable(table)
            opt = df.train.AdamOptimizer(0.05)

            def step(ids):
                x = df.constant(2.0)
                with df.GradientTape() as outer:
                    outer.watch(x)
                    with df.GradientTape() as tape:
                        tape.watch(x)
                        rows = df.gather(emb, ids)
                        loss = df.reduce_sum(rows * rows) * x * x
                    g_emb, g_x = tape.gradient(loss, [emb, x])
                second = outer.gradient(g_x, x)              # d2 loss / dx2
                opt.apply_gradients([(g_emb, emb)])
                scaled = df.cond(second > 10.0, lambda: second / 10.0, lambda: second)
                return float(scaled), float(loss)

            f = df.function(step, mode=mode)
            out, graph_steps = [], []
            for ids in batches:
                out.append(f(df.constant(ids)))
                graph_steps.append(f.stats["graph_steps"])
            return out, emb.numpy(), graph_steps

    want, want_table, _ = run("eager")
    got, got_table, graph_steps = run("graph")
    np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_allclose(got_table, want_table, rtol=1e-5, atol=1e-6)
    # The unique ids' count (a shape that depends on data) varies between batches and
    # the cond's branch depends on the data: a fallback the first time Python asks for
    # such a shape or takes a new branch, then the graph.
    assert graph_steps[-1] >= 5, graph_steps


class Trainer:
    """Keeps a persistent tape and the last loss on ``self`` between steps."""

    def __init__(self):
        with df.eager_mode():
            self.w = df.Variable([1.0, 2.0])
        self.tape = None
        self.last = None

    @df.function
    def step(self, x):
        with df.GradientTape(persistent=True) as tape:
            self.last = df.reduce_sum(self.w * x)
        self.tape = tape
        self.w.assign_sub(tape.gradient(self.last, self.w) * 0.5)


def test_values_and_tapes_kept_on_self_are_materialised():
    t = Trainer()
    seen = []
    with df.eager_mode():
        for i in range(5):
            t.step(df.constant([1.0, float(i)]))
            seen.append(float(t.last))
            g = t.tape.gradient(t.last, t.w)                 # the kept tape still works
            np.testing.assert_allclose(g.numpy(), [1.0, float(i)])
    assert seen == [1.0, 2.5, 3.0, 1.0, -5.0]       # w -= x / 2 after each step
    assert t.step.stats["graph_steps"] == 3


def test_a_kernel_error_in_the_graph_step_is_raised_as_eager_raises_it():
    """The graph step fails (a bad index fed this time): the step falls back, the eager
    re-run raises the same error class at the op, and the variable holds what eager
    execution leaves (the assign before the failing op happened once)."""
    with df.eager_mode():
        params = df.constant([1.0, 2.0, 3.0])
        v = df.Variable(0.0)

        def step(i):
            v.assign_add(1.0)
            return df.reduce_sum(df.gather(params, df.constant([i])))

        f = df.function(step)
        assert [float(f(i)) for i in (0, 1, 2)] == [1.0, 2.0, 3.0]
        with pytest.raises(df.errors.InvalidArgumentError):
            step(7)                                      # eager: the error class
        with pytest.raises(df.errors.InvalidArgumentError):
            f(7)
        assert float(v.numpy()) == 5.0
        assert float(f(1)) == 2.0 and float(v.numpy()) == 6.0
    assert f.stats["fallbacks"] == 1 and f.stats["graph_steps"] == 2


# -- the skeleton matches a GradientTape's gradient as one node ---------------------------------

def _count_gradient_nodes(monkeypatch):
    """How many gradients the skeleton matched as one gradient node (computed by the
    graph's ``df.gradients``, without running the gradient functions in Python)."""
    from dataflow.tracer.coexec import CoRun
    hits = [0]
    original = CoRun._match_gradient

    def counting(self, *args):
        grads = original(self, *args)
        hits[0] += grads is not None
        return grads

    monkeypatch.setattr(CoRun, "_match_gradient", counting)
    return hits


def _count_memo_hits(monkeypatch):
    """How many gradients the skeleton took from its memo (a gradient not recorded as
    one node: IndexedSlices, or ops not all recorded), without running the gradient
    functions. The counter wraps the memo replay, which dispatches no op: a wrapper
    around the gradient functions would be a user frame in the ops' locations."""
    from dataflow.tracer.coexec import CoRun
    hits = [0]
    original = CoRun._take_gradient

    def counting(self, *args):
        hits[0] += 1
        return original(self, *args)

    monkeypatch.setattr(CoRun, "_take_gradient", counting)
    return hits


class ScaledModel:
    """A linear model whose loss is scaled by a Python float that changes every step and
    whose gradient is taken either for both variables or, on a Python flag, for one."""

    def __init__(self, wv):
        self.w = df.Variable(wv)
        self.b = df.Variable(np.zeros(wv.shape[1], np.float32))

    def step(self, x, scale, both=True, extra=False):
        with df.GradientTape() as tape:
            loss = df.reduce_sum(df.square(df.matmul(x, self.w) + self.b)) * scale
        sources = [self.w, self.b] if both else [self.w]
        grads = tape.gradient(loss, sources)
        for g, v in zip(grads, sources):
            v.assign_sub(0.01 * g)
        if extra:               # an op after the gradient on a path not seen yet
            loss = loss * 2.0
        return loss, grads


def _scaled_run(mode, wv, batches):
    with df.eager_mode():
        model = ScaledModel(wv)
        step = df.function(model.step, mode=mode)
        out = []
        for x, scale, both, *extra in batches:
            loss, grads = step(df.constant(x), scale, both, *extra)
            out.append((float(loss), [g.numpy() for g in grads]))
        return out, step, model.w.numpy()


def _assert_same_run(got, want):
    for (loss, grads), (want_loss, want_grads) in zip(got, want):
        np.testing.assert_allclose(loss, want_loss, rtol=1e-5, atol=1e-6)
        assert len(grads) == len(want_grads)
        for g, w in zip(grads, want_grads):
            np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)


def test_a_gradient_matched_as_one_node_equals_eager(rng, monkeypatch):
    xs, ys = _batches(rng, 8)
    want, _, want_vars = _train("eager", xs, ys)
    hits = _count_gradient_nodes(monkeypatch)
    got, step, got_vars = _train("graph", xs, ys)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for g, w in zip(got_vars, want_vars):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)
    assert step.stats == {"traces": 2, "fallbacks": 0, "graph_steps": 6, "eager_steps": 2}
    # The tracing steps recorded the gradient as one node; every graph step matches it.
    assert hits[0] == 6


def test_a_changed_python_value_before_a_gradient_node_is_fed_anew(rng, monkeypatch):
    wv = rng.standard_normal((4, 3)).astype(np.float32)
    batches = [(rng.standard_normal((5, 4)).astype(np.float32), float(s), True)
               for s in rng.uniform(0.5, 2.0, 8)]
    want, _, want_w = _scaled_run("eager", wv, batches)
    hits = _count_gradient_nodes(monkeypatch)
    got, step, got_w = _scaled_run("graph", wv, batches)
    _assert_same_run(got, want)
    np.testing.assert_allclose(got_w, want_w, rtol=1e-5, atol=1e-6)
    # No variable is created in the step: both tracing steps give the same trace.
    assert step.stats == {"traces": 1, "fallbacks": 0, "graph_steps": 6, "eager_steps": 2}
    assert hits[0] == 6


def test_a_new_shape_or_new_sources_of_a_gradient_node_fall_back_correctly(rng, monkeypatch):
    wv = rng.standard_normal((4, 3)).astype(np.float32)

    def batch(rows, both=True):
        return rng.standard_normal((rows, 4)).astype(np.float32), 1.5, both

    # Steps 3-4 match the gradient node; step 5 has a new batch size (new forward
    # nodes), step 6 takes the gradient for one variable only (the same taped nodes,
    # other sources: another gradient node), steps 7-10 repeat those on the regenerated
    # graph and match their gradient nodes.
    batches = [batch(5), batch(5), batch(5), batch(5), batch(7), batch(5, both=False),
               batch(7), batch(5, both=False), batch(7), batch(5, both=False)]
    want, _, want_w = _scaled_run("eager", wv, batches)
    hits = _count_gradient_nodes(monkeypatch)
    got, step, got_w = _scaled_run("graph", wv, batches)
    _assert_same_run(got, want)
    np.testing.assert_allclose(got_w, want_w, rtol=1e-5, atol=1e-6)
    assert step.stats == {"traces": 3, "fallbacks": 2, "graph_steps": 6, "eager_steps": 2}
    assert hits[0] == 6


def test_a_fallback_after_a_gradient_node_reruns_the_gradient_once(rng, monkeypatch):
    wv = rng.standard_normal((4, 3)).astype(np.float32)
    batches = [(rng.standard_normal((5, 4)).astype(np.float32), 1.5, True, i == 4)
               for i in range(6)]
    want, _, want_w = _scaled_run("eager", wv, batches)
    hits = _count_gradient_nodes(monkeypatch)
    got, step, got_w = _scaled_run("graph", wv, batches)
    # Step 5 matches the gradient node, then falls back at the new op after it: the
    # matched ops are re-run once eagerly, and the gradient from the re-run ops.
    _assert_same_run(got, want)
    np.testing.assert_allclose(got_w, want_w, rtol=1e-5, atol=1e-6)
    assert step.stats == {"traces": 2, "fallbacks": 1, "graph_steps": 3, "eager_steps": 2}
    assert hits[0] == 4


def test_an_optimizer_update_comes_from_the_memo_until_its_learning_rate_changes(
        rng, monkeypatch):
    from dataflow.tracer.coexec import CoRun
    xs, ys = _batches(rng, 8)
    schedule = [0.01] * 4 + [0.003] * 4      # a Python learning rate changed at step 5

    def train(mode):
        with df.eager_mode():
            model = MLP(7)
            step = df.function(model.step, mode=mode)
            losses = []
            for x, y, lr in zip(xs, ys, schedule):
                model.opt._lr = lr
                losses.append(float(step(df.constant(x), df.constant(y))))
            return losses, step, [v.numpy() for v in model.variables]

    want, _, want_vars = train("eager")
    taken = {"segments": 0}
    take_segment = CoRun._take_segment

    def counting_segment(self, *args):
        taken["segments"] += 1
        return take_segment(self, *args)

    monkeypatch.setattr(CoRun, "_take_segment", counting_segment)
    gradient_nodes = _count_gradient_nodes(monkeypatch)
    got, step, got_vars = train("graph")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    for g, w in zip(got_vars, want_vars):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)
    assert step.stats == {"traces": 2, "fallbacks": 0, "graph_steps": 6, "eager_steps": 2}
    # Gradients: one node, matched at every graph step. Updates: computed at step 3,
    # from the memo at step 4, computed again at step 5 (new learning rate: the same
    # nodes, the new value fed), from the memo at steps 6-8.
    assert gradient_nodes[0] == 6
    assert taken["segments"] == 4

# -- fallbacks only on new paths (issue 11 §3: repeated fallbacks without a new trace) ------

class _ReshapeMetricModel:
    """Reshapes to shapes computed in Python (the graph cannot infer the result's shape),
    reads those shapes, and computes a NumPy metric on ``.numpy()`` predictions every
    step, keeping the loss on ``self`` for the next step (BERT-CLS, MusicTransformer)."""

    def __init__(self, seed):
        rng = np.random.default_rng(seed)
        self.w = df.Variable(rng.standard_normal((8, 10)).astype(np.float32))
        self.opt = df.train.GradientDescentOptimizer(0.05)
        self.scores, self.previous = [], None

    def step(self, pixels, labels):
        with df.GradientTape() as tape:
            rows = df.reshape(pixels, [-1, 8])                    # shape from a fed value
            flat = df.reshape(rows, [-1, rows.shape[-1]])         # Python reads it
            logits = df.reshape(df.matmul(flat, self.w), [pixels.shape[0], -1, 10])
            loss = df.reduce_mean(df.square(logits))
            if self.previous is not None:                          # last step's loss
                loss = loss + 0.1 * self.previous
        self.opt.apply_gradients([(tape.gradient(loss, self.w), self.w)])
        predictions = df.argmax(df.reduce_sum(logits, axis=1), axis=1).numpy()
        self.scores.append(float(np.mean(predictions == labels.numpy())))  # NumPy metric
        self.previous = loss
        return loss


def _run_reshape_metric(mode, batches):
    with df.eager_mode():
        model = _ReshapeMetricModel(3)
        step = df.function(model.step, mode=mode)
        losses = [float(step(df.constant(x), df.constant(y))) for x, y in batches]
        return losses, model.scores, step


def test_shape_reads_numpy_metrics_and_a_kept_loss_run_on_the_graph_after_two_traces(rng):
    batches = [(rng.standard_normal((16, 64)).astype(np.float32),
                rng.integers(0, 10, 16).astype(np.int64)) for _ in range(8)]
    eager_losses, eager_scores, _ = _run_reshape_metric("eager", batches)
    losses, scores, step = _run_reshape_metric("graph", batches)
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5, atol=1e-6)
    assert scores == eager_scores
    # Reads of shapes the graph cannot infer are Output Fetchings learnt while tracing:
    # no fallback after the two tracing calls.
    assert step.stats == {"traces": 2, "fallbacks": 0, "graph_steps": 6, "eager_steps": 2}
    assert not step.fallback_reasons


def test_fallback_reasons_name_the_new_op_and_a_seen_path_does_not_fall_back_again():
    with df.eager_mode():
        @df.function
        def f(x, flag):
            y = x * 2.0
            if flag:
                y = df.sqrt(df.abs(y))
            return y

        flags = [False, False, True, True, False, True, True]
        got = [float(f(df.constant(-3.0), flag)) for flag in flags]
    assert got == [float(np.sqrt(np.float32(6.0))) if flag else -6.0 for flag in flags]
    assert f.stats == {"traces": 2, "fallbacks": 1, "graph_steps": 4, "eager_steps": 2}
    assert f.fallback_reasons == {"new op Abs after node 0": 1}


def test_slice_bounds_chosen_in_python_are_fed_not_new_nodes(rng):
    """Faster R-CNN's crops: the region a slice takes is a Python value each step; with
    the same number of regions the step stays on the graph (bounds are Input Feeding)."""
    xs = rng.standard_normal((10, 4, 16)).astype(np.float32)
    regions = [[int(r) for r in rng.permutation(4)[:2]] for _ in xs]

    def run(mode):
        with df.eager_mode():
            w = df.Variable(w0)
            opt = df.train.GradientDescentOptimizer(0.1)

            def step(x, chosen):
                with df.GradientTape() as tape:
                    loss = 0.0
                    for r in chosen:
                        loss += df.reduce_sum(df.square(df.matmul(x[:, r * 4:(r + 1) * 4], w)))
                opt.apply_gradients([(tape.gradient(loss, w), w)])
                return loss

            f = df.function(step, mode=mode)
            return [float(f(df.constant(x), c)) for x, c in zip(xs, regions)], f

    w0 = rng.standard_normal((4, 3)).astype(np.float32)
    eager_losses, _ = run("eager")
    losses, f = run("graph")
    np.testing.assert_allclose(losses, eager_losses, rtol=1e-5, atol=1e-5)
    assert f.stats == {"traces": 1, "fallbacks": 0, "graph_steps": 8, "eager_steps": 2}


# -- the cost of a co-executed step (branch tracerspeed) ------------------------------------------

class _ConvNet:
    """conv - relu - mean - dense, trained with Adam: a conv gradient reads the shapes of
    Conv2DBackprop outputs whose size input is a constant made in Python (fed)."""

    def __init__(self, rng):
        self.k = df.Variable(0.3 * rng.standard_normal((3, 3, 1, 4)).astype(np.float32))
        self.w = df.Variable(0.3 * rng.standard_normal((4, 3)).astype(np.float32))
        self.opt = df.train.AdamOptimizer(0.05)

    def step(self, x, y):
        with df.GradientTape() as tape:
            h = df.nn.relu(df.nn.conv2d(x, self.k, [1, 1, 1, 1], "SAME"))
            logits = df.matmul(df.reduce_mean(h, axis=[1, 2]), self.w)
            loss = df.reduce_mean(df.nn.sparse_softmax_cross_entropy_with_logits(
                labels=y, logits=logits))
        grads = tape.gradient(loss, [self.k, self.w])
        self.opt.apply_gradients(zip(grads, [self.k, self.w]))
        return loss


def test_conv_gradients_need_no_fetch_and_are_one_gradient_node(rng, monkeypatch):
    """The shapes a conv gradient reads are inferred in Python from the fed sizes: no
    Output Fetching mid-step, and the dense gradient is one node the graph computes
    (nothing from the memo); losses equal eager's."""
    from dataflow.tracer.coexec import CoRun
    batches = [(rng.standard_normal((5, 6, 6, 1)).astype(np.float32),
                rng.integers(0, 3, 5).astype(np.int32)) for _ in range(7)]
    seed = int(rng.integers(1 << 30))

    def run(mode):
        with df.eager_mode():
            net = _ConvNet(np.random.default_rng(seed))
            f = df.function(net.step, mode=mode)
            return [float(f(df.constant(x), df.constant(y))) for x, y in batches], f

    want, _ = run("eager")
    hits = _count_memo_hits(monkeypatch)
    nodes = _count_gradient_nodes(monkeypatch)
    fetched = []
    original = CoRun.fetch
    monkeypatch.setattr(CoRun, "fetch", lambda self, h: fetched.append(
        self.tg.nodes[h._node].op_type) or original(self, h))
    got, f = run("graph")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert f.stats == {"traces": 2, "fallbacks": 0, "graph_steps": 5, "eager_steps": 2}
    assert nodes[0] == 5 and hits[0] == 0     # every graph step matches the node
    # Only the returned losses (materialised at the end of each step) were fetched.
    assert len(fetched) == 5 and set(fetched) <= {"Mean"}, fetched


def test_an_embedding_gradient_comes_from_the_memo_as_indexed_slices(rng, monkeypatch):
    """A Gather's gradient is IndexedSlices (values, the forward indices, a constant
    dense shape): the memo gives it back with this step's indices."""
    table0 = rng.standard_normal((10, 4)).astype(np.float32)
    ids = [rng.integers(0, 10, 6).astype(np.int32) for _ in range(7)]

    def run(mode):
        with df.eager_mode():
            table = df.Variable(table0)

            def step(i):
                with df.GradientTape() as tape:
                    loss = df.reduce_sum(df.square(df.nn.embedding_lookup(table, i)))
                g = tape.gradient(loss, table)
                table.assign_sub(0.1 * df.convert_to_tensor(g))
                return loss, type(g).__name__

            f = df.function(step, mode=mode)
            out = [f(df.constant(i)) for i in ids]
            return [float(v) for v, _ in out], {k for _, k in out}, table.numpy(), f

    want, want_kinds, want_table, _ = run("eager")
    hits = _count_memo_hits(monkeypatch)
    nodes = _count_gradient_nodes(monkeypatch)
    got, kinds, table, f = run("graph")
    assert kinds == want_kinds == {"IndexedSlices"}
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(table, want_table, rtol=1e-5, atol=1e-6)
    assert f.stats["fallbacks"] == 0 and f.stats["graph_steps"] == 5
    # Not dense, so not one gradient node: its ops are recorded one by one and every
    # graph step after the first takes them from the memo.
    assert hits[0] == 4 and nodes[0] == 0


def test_shape_arithmetic_is_computed_in_python_and_needs_no_fetch(monkeypatch):
    """A Reshape to a shape computed by small integer ops in the step: Python computes
    those too, so reading the Reshape's shape fetches nothing from the graph."""
    from dataflow.tracer.coexec import CoRun
    fetched = []
    original = CoRun.fetch
    monkeypatch.setattr(CoRun, "fetch", lambda self, h: fetched.append(
        self.tg.nodes[h._node].op_type) or original(self, h))
    with df.eager_mode():
        @df.function
        def f(x, n):
            rows = df.constant(n) * 2                       # a node: int32 Mul
            y = df.reshape(x, df.stack([rows, -1]))         # its value sets the shape
            return y.shape.as_list(), df.reduce_sum(y)

        got = [f(df.constant(np.arange(12, dtype=np.float32)), n) for n in (1, 1, 3, 3, 1)]
    assert [s for s, _ in got] == [[2, 6], [2, 6], [6, 2], [6, 2], [2, 6]]
    assert all(float(t) == 66.0 for _, t in got)
    assert f.stats == {"traces": 1, "fallbacks": 0, "graph_steps": 3, "eager_steps": 2}
    assert set(fetched) == {"Sum"}          # the returned sums only


def test_the_collector_is_paused_during_a_step_and_restored_after(rng):
    import gc
    seen = []
    with df.eager_mode():
        @df.function
        def f(x, fail=False):
            seen.append(gc.isenabled())
            if fail:
                raise ValueError("from the step")
            return x * 2.0

        for _ in range(4):
            f(df.constant(1.0))
        with pytest.raises(ValueError):
            f(df.constant(1.0), True)
    assert gc.isenabled()
    assert seen == [False] * 5
    gc.disable()                            # a program that runs without the collector
    try:
        with df.eager_mode():
            f(df.constant(1.0))
        assert not gc.isenabled()
    finally:
        gc.enable()


def test_the_graph_side_runs_inline_until_it_waits_for_a_feed():
    """Executor.start/advance: the co-executed step's graph runs on the caller's thread,
    as far as the values sent so far let it, and reports whether it is complete."""
    from dataflow.runtime.device_set import DeviceSet
    from dataflow.runtime.executor import Executor
    from dataflow.runtime.kernel_resolver import KernelResolver
    from dataflow.runtime.partitioned import transfer_keys
    from dataflow.runtime.plan import build_plan
    from dataflow.runtime.rendezvous import LocalRendezvous
    from dataflow.tracer.generate import GRAPH_DEVICE, PYTHON_DEVICE

    g = df.Graph()
    with g.as_default():
        def recv(name):
            return g.create_op("_Recv", [], {"send_device": PYTHON_DEVICE,
                                             "recv_device": GRAPH_DEVICE, "tensor_name": name,
                                             "dtype": df.float32, "shape": df.TensorShape([])},
                               name=name).outputs[0]

        def send(t, name):
            g.create_op("_Send", [t], {"send_device": GRAPH_DEVICE,
                                       "recv_device": PYTHON_DEVICE, "tensor_name": name},
                        name=name)

        a, b = recv("a"), recv("b")
        send(df.square(a), "a2")
        send(df.square(a) + b, "a2b")
    resolver = KernelResolver(DeviceSet(g, {}, False), df.ConfigProto(), {})
    plan = build_plan(g, [], g.get_operations(), [], resolver.kernel_for)
    plan.transfers = transfer_keys(plan)
    rv = LocalRendezvous()
    executor = Executor(plan, None, None, rv)

    def key(src, dst, name):
        return (src, dst, name, ())

    executor.start()
    assert executor.advance() is False                  # nothing sent: waits
    rv.send(key(PYTHON_DEVICE, GRAPH_DEVICE, "a"), np.float32(3.0), False)
    assert executor.advance() is False                  # a sent, b not: part of it ran
    assert rv.poll(key(GRAPH_DEVICE, PYTHON_DEVICE, "a2")) == (9.0, False)
    assert rv.poll(key(GRAPH_DEVICE, PYTHON_DEVICE, "a2b")) is None
    rv.send(key(PYTHON_DEVICE, GRAPH_DEVICE, "b"), np.float32(1.0), False)
    assert executor.advance() is True                   # complete
    assert rv.poll(key(GRAPH_DEVICE, PYTHON_DEVICE, "a2b")) == (10.0, False)


def test_shape_arithmetic_under_a_tape_keeps_the_gradient_one_node(rng, monkeypatch):
    """Folding a small integer op in Python must not put it on a recording tape: the
    tape holds the program's ops only, so its gradient is still one gradient node. What
    follows a Reshape to a shape fed from Python has that step's shape (the Square
    here), in the handles and in the gradient the graph computes (built on the
    inferred shapes, not the first trace's)."""
    x0 = rng.standard_normal(12).astype(np.float32)

    def run(mode):
        with df.eager_mode():
            w = df.Variable(x0)

            def step(n):
                with df.GradientTape() as tape:
                    rows = df.constant(n) * 2
                    loss = df.reduce_sum(df.square(df.reshape(w, df.stack([rows, -1]))))
                g = tape.gradient(loss, w)
                w.assign_sub(0.1 * g)
                return loss

            f = df.function(step, mode=mode)
            return [float(f(n)) for n in (1, 1, 3, 3, 1, 3)], f

    want, _ = run("eager")
    hits = _count_memo_hits(monkeypatch)
    nodes = _count_gradient_nodes(monkeypatch)
    got, f = run("graph")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert f.stats == {"traces": 1, "fallbacks": 0, "graph_steps": 4, "eager_steps": 2}
    # Graph steps n = 3, 3, 1, 3 (the trace had n = 1) all match the one gradient node.
    assert nodes[0] == 4 and hits[0] == 0
