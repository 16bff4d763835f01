"""The generated step graph's cost (issue 11, branch tgraph): what the plan of a
df.function graph may fuse, what a finished step keeps alive, and the sparse optimizer
update that stays inside the graph."""
import gc
import weakref

import numpy as np

import dataflow as df
from dataflow.tracer.coexec import CoRun


def _run_chain(mode, xs, w0):
    with df.eager_mode():
        w = df.Variable(w0)

        def step(x):
            # A chain of elementwise ops whose interior values only the chain reads.
            y = df.tanh(df.matmul(x, w) * 2.0 + 1.0) * 0.5 - 0.25
            w.assign_sub(0.01 * df.matmul(x, y, transpose_a=True))
            return df.reduce_sum(y)

        f = df.function(step, mode=mode)
        return [float(f(df.constant(x))) for x in xs], w.numpy(), f


def test_the_generated_graph_fuses_elementwise_chains_and_equals_eager(rng):
    xs = [rng.standard_normal((16, 8)).astype(np.float32) for _ in range(5)]
    w0 = rng.standard_normal((8, 8)).astype(np.float32) * 0.3
    want, want_w, _ = _run_chain("eager", xs, w0)
    got, got_w, f = _run_chain("graph", xs, w0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(got_w, want_w, rtol=1e-5, atol=1e-6)
    assert f.stats == {"traces": 1, "fallbacks": 0, "graph_steps": 3, "eager_steps": 2}
    fusion = f._step.plan.fusion
    # Mul, AddV2, Tanh, Mul, Sub: one fused kernel (each op's value is read only by the
    # next one); with every op a plan target, none could be fused.
    groups = [sorted(op.type for op in members) for members in fusion.members.values()]
    assert ["AddV2", "Mul", "Mul", "Sub", "Tanh"] in groups
    # Every traced op still runs (fused or not): the plan prunes nothing the trace
    # recorded; only the variable handles are folded into their readers as constants.
    left_out = set(f.graph.get_operations()) - set(f._step.plan.ops) - fusion.absorbed
    assert {op.type for op in left_out} == {"VarHandleOp"}
    # One path, no Case Select: nothing can be dead, so the write waits for the read
    # through a plain control edge, not through a ControlTrigger node.
    ops = f.graph.get_operations()
    assert not [op for op in ops if op.type == "ControlTrigger"]
    write = next(op for op in ops if op.type == "AssignSubVariableOp")
    assert [c.type for c in write._control_inputs] == ["ReadVariableOp"]


class _KeptLoss:
    """Keeps each step's loss on ``self`` and adds it to the next step's loss (the
    Music Transformer's smoothed loss)."""

    def __init__(self, w0):
        self.w = df.Variable(w0)
        self.previous = None
        self.runs = []

    def step(self, x):
        loss = df.reduce_sum(df.square(df.matmul(x, self.w)))
        if self.previous is not None:
            loss = 0.9 * self.previous + 0.1 * loss
        self.w.assign_sub(0.001 * df.matmul(x, df.matmul(x, self.w), transpose_a=True))
        self.previous = loss
        return loss


def test_a_loss_kept_on_self_does_not_keep_the_earlier_steps_alive(rng):
    """A handle kept past its step holds its run, and the next step takes it as a fed
    input: the finished run must not hold that step's state (each step then kept all
    earlier ones alive, and memory grew every step)."""
    xs = [rng.standard_normal((4, 3)).astype(np.float32) for _ in range(8)]
    w0 = rng.standard_normal((3, 3)).astype(np.float32)
    with df.eager_mode():
        want_model = _KeptLoss(w0)
        want = [float(want_model.step(df.constant(x))) for x in xs]
        model = _KeptLoss(w0)
        f = df.function(model.step)
        runs, got = [], []
        for x in xs:
            loss = f(df.constant(x))
            got.append(float(loss))
            run = getattr(loss, "_run", None)
            if isinstance(run, CoRun):
                runs.append(weakref.ref(run))
            del loss
        gc.collect()
        assert f.stats["graph_steps"] == 6 and f.stats["fallbacks"] == 0
        np.testing.assert_allclose(got, want, rtol=1e-5)
        alive = [r() is not None for r in runs]
        # Only the last step's run: its loss is still on the model.
        assert alive == [False] * (len(runs) - 1) + [True]
        assert runs[-1]()._executor is None and runs[-1]().matched == []
        assert float(model.previous) == got[-1]


def _run_embedding_adam(mode, ids, table0):
    with df.eager_mode():
        table = df.Variable(table0)
        opt = df.train.AdamOptimizer(0.05)

        def step(i):
            with df.GradientTape() as tape:
                loss = df.reduce_sum(df.square(df.nn.embedding_lookup(table, i)))
            g = tape.gradient(loss, table)
            opt.apply_gradients([(g, table)])
            return loss

        f = df.function(step, mode=mode)
        return [float(f(df.constant(i))) for i in ids], table.numpy(), f


def test_a_sparse_adam_update_with_repeated_indices_comes_from_the_memo(rng, monkeypatch):
    """The optimizer sums an IndexedSlices gradient's repeated rows over a ``unique``
    of its indices; how many unique indices there are is queried inside the graph (not
    read mid-step), so the update is taken from the memo as the dense ones are."""
    table0 = rng.standard_normal((10, 4)).astype(np.float32)
    # Repeated indices, and a different number of unique ones from step to step.
    ids = [rng.integers(0, 6, 8).astype(np.int32) for _ in range(8)]
    want, want_table, _ = _run_embedding_adam("eager", ids, table0)
    taken = [0]
    take_segment = CoRun._take_segment

    def counting(self, *args):
        taken[0] += 1
        return take_segment(self, *args)

    monkeypatch.setattr(CoRun, "_take_segment", counting)
    got, table, f = _run_embedding_adam("graph", ids, table0)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(table, want_table, rtol=1e-5, atol=1e-6)
    assert f.stats == {"traces": 2, "fallbacks": 0, "graph_steps": 6, "eager_steps": 2}
    assert any(key[0] == "apply" for key in f._gradient_memo if type(key[0]) is str)
    # The gradient (IndexedSlices, op by op) and the update, from the memo at every
    # graph step after the first.
    assert taken[0] == 2 * 5
    ops = f.graph.get_operations()
    unique = next(op for op in ops if op.type == "Unique")
    assert any(op.type == "Shape" and op.inputs[0] is unique.outputs[0] for op in ops)
    assert not any(op.type == "_Send" and op.inputs[0].op.type in ("Unique", "Shape")
                   for op in ops)


def test_a_folded_loop_receives_nothing_per_iteration_and_compiles(rng, monkeypatch):
    """A folded loop's trip count and per-iteration values (the ``t`` of ``xs[:, t]``)
    are fed once, when Python leaves the loop: its frame has no ``_Recv``, so the loop
    compiler takes it and its gradient loop, and any trip count still runs on the graph
    with eager's results."""
    from tests.test_tracer_loops import _rnn_batches, _run_rnn
    monkeypatch.setenv("DATAFLOW_COMPILE_LOOPS", "eager")   # read when a graph is made
    lengths = [5, 3, 7, 2, 9, 1, 6]
    batches = _rnn_batches(rng, lengths)
    want, _, want_vars = _run_rnn("eager", 1, batches)
    got, step, got_vars = _run_rnn("graph", 1, batches)
    assert step.stats == {"traces": 1, "fallbacks": 0, "graph_steps": 5, "eager_steps": 2}
    report = step._step.plan.loop_report
    assert len(report) == 2 and all(why is None for why in report.values()), report
    frames = {op._control_flow_context.name for op in step.graph.get_operations()
              if op._control_flow_context is not None}
    assert not [op for op in step.graph.get_operations()
                if op.type == "_Recv" and op._control_flow_context is not None]
    assert len(frames) == 2
    for (loss, grads), (want_loss, want_grads) in zip(got, want):
        np.testing.assert_allclose(loss, want_loss, rtol=1e-5, atol=1e-6)
        for g, w in zip(grads, want_grads):
            np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-5)
    for g, w in zip(got_vars, want_vars):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-6)


def test_what_a_gradient_node_does_not_need_is_pruned(rng):
    """df.gradients builds each MatMul's two input gradients; the one for the fed input
    ``x`` is not needed (the tape's sources are the variables), so the plan leaves it
    out, as a Session prunes it; the traced ops all stay."""
    xs = [rng.standard_normal((8, 5)).astype(np.float32) for _ in range(5)]
    w0 = rng.standard_normal((5, 3)).astype(np.float32)

    def run(mode):
        with df.eager_mode():
            w = df.Variable(w0)

            def step(x):
                with df.GradientTape() as tape:
                    loss = df.reduce_sum(df.square(df.matmul(x, w)))
                w.assign_sub(0.01 * tape.gradient(loss, w))
                return loss

            f = df.function(step, mode=mode)
            return [float(f(df.constant(x))) for x in xs], w.numpy(), f

    want, want_w, _ = run("eager")
    got, got_w, f = run("graph")
    np.testing.assert_allclose(got, want, rtol=1e-5)
    np.testing.assert_allclose(got_w, want_w, rtol=1e-5)
    assert f.stats["graph_steps"] == 3 and f.stats["fallbacks"] == 0
    matmuls = [op for op in f.graph.get_operations() if op.type == "MatMul"]
    run_ops = set(f._step.plan.ops)
    assert len(matmuls) == 3                      # forward, d/dx, d/dw
    kept = [op for op in matmuls if op in run_ops]
    assert len(kept) == 2                          # d/dx is not run
    dropped = [op for op in matmuls if op not in run_ops]
    assert dropped[0] in f._step.gradient_ops
