"""The co-executed step's graph run as a flat list of kernel calls (issue 11, branch
tflat, dataflow/tracer/flat_step.py): when Python read nothing mid-step, the graph runs
flat at the end of the step. Every flat run here is checked against the executor run on
a copy of the same rendezvous (same values and dead bits sent to Python, same errors),
and the programs against eager execution and against df.function on the executor."""
import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import dataflow as df
from dataflow.framework import eager as _eager
from dataflow.kernels.resources import VariableCell
from dataflow.runtime.executor import Executor
from dataflow.runtime.rendezvous import LocalRendezvous
from dataflow.tracer.flat_step import FlatSteps, flat_steps_of
from examples.imperative import PROGRAMS, load

RTOL, ATOL = 1e-4, 1e-6     # benchmarks/tracer.py's "same losses as eager"


def _entries(rv):
    """What is left in a rendezvous: key -> (value, is_dead) of each unclaimed send."""
    return {key: (entry[1], entry[2]) for key, entry in rv._slots.items()
            if entry[0] == "value"}


def _same_entries(got, want):
    assert got.keys() == want.keys()
    for key, (value, dead) in want.items():
        assert got[key][1] == dead, key
        if not dead:
            np.testing.assert_array_equal(np.asarray(got[key][0]), np.asarray(value))


class _Twin:
    """Wraps FlatSteps.run: the executor first runs the same plan on a copy of the
    rendezvous and on the variables as they are, then the variables are put back and
    the flat run runs; both must leave the same values and dead bits for the Python
    side and the same variable values, or raise the same error naming the same node.
    ``runs`` keeps, per flat run, the case tuples built so far and what the rendezvous
    held after it; ``errors`` the flat runs' errors."""

    def __init__(self, monkeypatch):
        self.runs = []
        self.errors = []
        self.mismatches = []     # checks that failed (the CoRun would take an
        #                          AssertionError raised in the run for a graph error)
        real = FlatSteps.run

        def run(flat_steps, rv):
            cells = {name: c for name, c in _eager._eager_graph().resources.items()
                     if isinstance(c, VariableCell) and c.value is not None}
            before = {name: np.copy(c.value) for name, c in cells.items()}
            twin = LocalRendezvous()
            twin._slots.update(rv._slots)
            executor = Executor(flat_steps.plan, None, None, twin)
            try:
                executor.start()
                want = executor.advance()
            except df.errors.OpError as exc:
                want = exc
            want_values = {name: np.copy(c.value) for name, c in cells.items()}
            for name, c in cells.items():
                c.value = np.copy(before[name])
            try:
                complete = real(flat_steps, rv)
            except df.errors.OpError as exc:
                self.errors.append(exc)
                self._check(_same_error, exc, want)
                raise
            if complete is not None:
                self._check(_same_run, complete, want, rv, twin, cells, want_values)
                self.runs.append((list(flat_steps.by_case), _entries(rv)))
            else:   # no flat run: the executor runs the step on the variables as they were
                for name, c in cells.items():
                    c.value = before[name]
            return complete

        monkeypatch.setattr(FlatSteps, "run", run)

    def _check(self, check, *args):
        try:
            check(*args)
        except AssertionError as exc:
            self.mismatches.append(exc)

    def check(self):
        """Every flat run so far agreed with the executor's."""
        assert not self.mismatches, self.mismatches[0]


def _same_error(exc, want):
    assert type(want) is type(exc) and want.op is exc.op


def _same_run(complete, want, rv, twin, cells, want_values):
    assert complete == want
    _same_entries(_entries(rv), _entries(twin))
    for name, c in cells.items():
        np.testing.assert_array_equal(c.value, want_values[name])


def _no_flat(monkeypatch):
    monkeypatch.setattr(FlatSteps, "possible", property(lambda self: False))


# -- the eight programs ----------------------------------------------------------------------
STEPS = 28          # crosses sdpoint's and dropblock's fallbacks and regenerations
FLAT = {"mlp_adam", "sdpoint", "dropblock", "music_transformer"}   # read nothing mid-step


def _program(name, mode):
    module = load(name)
    made = []

    def wrap(step):
        made.append(df.function(step, mode=mode))
        return made[-1]
    with threadpool_limits(1, user_api="blas"):
        losses = module.run(STEPS, wrap=wrap, model=module.make_model(0))
    return losses, made[0]


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_programs_give_the_same_losses_and_stats_flat(name, monkeypatch, capsys):
    eager, _ = _program(name, "eager")
    with monkeypatch.context() as m:
        _no_flat(m)
        on_executor, f_executor = _program(name, "graph")
    twin = _Twin(monkeypatch)
    flat, f = _program(name, "graph")
    capsys.readouterr()
    twin.check()
    np.testing.assert_allclose(flat, eager, rtol=RTOL, atol=ATOL)
    # The same kernels in the executor's order: bit for bit what the executor computes.
    np.testing.assert_array_equal(flat, on_executor)
    assert f.stats == f_executor.stats
    assert f.fallback_reasons == f_executor.fallback_reasons
    runs = flat_steps_of(f._step).runs
    if name in FLAT:
        assert runs > 0 and len(twin.runs) >= runs
        if name in ("sdpoint", "dropblock"):   # the run crosses a fallback, a regeneration
            assert f.stats["fallbacks"] > 0
    else:
        # Read mid-step (bert_cls, faster_rcnn, skip_step) or folded loops (rnn_varlen).
        assert runs == 0 and not twin.runs


# -- Switch-Cases ------------------------------------------------------------------------------
FLAGS = [True, False, True, False, False, True, True, False]


def _branches(mode, xs, w0, monkeypatch=None):
    """Each step takes one of two cases, chosen by a Python bool; each case's value is
    kept past the step, so both have an Output Fetching."""
    with df.eager_mode():
        w = df.Variable(w0)

        def step(x, flag):
            h = df.matmul(x, w)
            if flag:
                y = df.reduce_sum(df.square(h))
                w.assign_sub(0.01 * df.transpose(x[:1]))
            else:
                y = df.reduce_max(df.sin(h))
            return y

        f = df.function(step, mode=mode)
        out = [f(df.constant(x), flag) for x, flag in zip(xs, FLAGS)]
        return [float(v) for v in out], w.numpy(), f


def _case_data(rng):
    xs = [rng.standard_normal((3, 4)).astype(np.float32) for _ in FLAGS]
    return xs, rng.standard_normal((4, 1)).astype(np.float32)


def test_a_switch_case_runs_flat_in_each_branch(rng, monkeypatch):
    xs, w0 = _case_data(rng)
    want, want_w, _ = _branches("eager", xs, w0)
    twin = _Twin(monkeypatch)
    got, got_w, f = _branches("graph", xs, w0)
    twin.check()
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_w, want_w, rtol=1e-5, atol=1e-6)
    # Two tracing calls (one per branch), then every step on the graph, flat.
    assert f.stats == {"traces": 2, "fallbacks": 0, "graph_steps": 6, "eager_steps": 2}
    flat = flat_steps_of(f._step)
    assert flat.runs == 6 and len(twin.runs) == 6
    assert len(flat.by_case) == 2          # one list of calls per branch, built once each
    calls = sorted(s.calls for s in flat.by_case.values())
    # The branch with the write calls more kernels; neither calls the other's.
    assert calls[0] < calls[1]
    assert {op.type for op in f.graph.get_operations()} >= {"Switch", "_Recv", "_Send"}


def test_a_fetched_tensor_on_the_untaken_branch_comes_out_dead(rng, monkeypatch):
    xs, w0 = _case_data(rng)
    twin = _Twin(monkeypatch)
    _, _, f = _branches("graph", xs, w0)
    twin.check()
    tg, step = f._tg, f._step
    fetched = {tg.nodes[nid].op_type: key for (nid, _k), key in step.fetch_keys.items()}
    square, sin = fetched["Sum"], fetched["Max"]
    # The runs on the graph: the steps after the two tracing calls.
    for flag, (_cases, left) in zip(FLAGS[2:], twin.runs):
        taken, untaken = (square, sin) if flag else (sin, square)
        # Python read the taken branch's value; the other branch's Output Fetching
        # sent a dead token, as the executor's does (checked by _Twin).
        assert left[untaken] == (None, True)
        assert taken not in left or not left[taken][1]


# -- errors and the executor's cases ------------------------------------------------------------
def test_a_kernel_error_in_the_flat_run_names_its_node_and_falls_back(rng, monkeypatch):
    twin = _Twin(monkeypatch)
    table = rng.standard_normal(6).astype(np.float32)
    with df.eager_mode():
        t = df.Variable(table)

        def step(i):
            return df.reduce_sum(df.gather(t, i) * 2.0)

        f = df.function(step)
        for _ in range(3):
            got = float(f(df.constant(np.array([1, 4], np.int32))))
        np.testing.assert_allclose(got, 2 * (table[1] + table[4]), rtol=1e-6)
        with pytest.raises(df.errors.InvalidArgumentError, match="not in"):
            f(df.constant(np.array([1, 9], np.int32)))
    twin.check()
    assert f.stats == {"traces": 1, "fallbacks": 1, "graph_steps": 1, "eager_steps": 2}
    (error,) = twin.errors
    assert isinstance(error, df.errors.InvalidArgumentError)
    assert error.op.type == "GatherV2"         # the node whose kernel failed
    assert flat_steps_of(f._step).runs == 2


def test_a_read_mid_step_or_a_random_ready_order_keeps_the_executor(rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    with df.eager_mode():
        def reads(a):
            s = df.reduce_sum(a)
            if float(s) > 1e9:      # a value read mid-step
                return s
            return df.square(s)

        def plain(a):
            return df.square(df.reduce_sum(a))

        for fn, seed, flat_runs in ((reads, None, 0), (plain, 3, 0), (plain, None, 3)):
            f = df.function(fn, ready_order_seed=seed)
            for _ in range(5):
                got = float(f(df.constant(x)))
            np.testing.assert_allclose(got, float(x.sum()) ** 2, rtol=1e-5)
            assert f.stats["graph_steps"] == 3
            assert flat_steps_of(f._step).runs == flat_runs


def test_folded_loops_have_no_flat_run(rng):
    xs = rng.standard_normal((5, 2, 3)).astype(np.float32)
    with df.eager_mode():
        def step(x, n):
            h = df.zeros([2, 3])
            for t in range(n):
                h = df.tanh(h + x[t])
            return df.reduce_sum(h)

        f = df.function(step)
        for n in (3, 4, 5, 3):
            got = float(f(df.constant(xs), n))
    h = np.zeros((2, 3), np.float32)
    for t in range(3):
        h = np.tanh(h + xs[t])
    np.testing.assert_allclose(got, h.sum(), rtol=1e-5)
    assert f.stats["graph_steps"] >= 1
    assert not flat_steps_of(f._step).possible and flat_steps_of(f._step).runs == 0


def test_a_regeneration_drops_the_flat_runs(rng):
    xs, w0 = _case_data(rng)
    with df.eager_mode():
        w = df.Variable(w0)

        def step(x, flag):
            y = df.matmul(x, w)
            if flag:
                y = df.square(y)
            return df.reduce_sum(y)

        f = df.function(step)
        for x in xs[:4]:
            f(df.constant(x), False)
        before = flat_steps_of(f._step)
        assert before.runs == 2 and len(before.by_case) == 1
        f(df.constant(xs[4]), True)          # a new path: fallback, regeneration
        f(df.constant(xs[5]), True)
        after = flat_steps_of(f._step)
    assert f.stats["fallbacks"] == 1
    assert after is not before and after.plan is f._step.plan
    assert after.runs == 1 and list(after.by_case) != list(before.by_case)
