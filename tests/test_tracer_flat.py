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
    """Wraps FlatSteps.advance: per step, an executor runs the same plan on a rendezvous
    of its own, given the same keys as each flat advance; at each advance it runs
    first, on the variables as they are, then the variables are put back and the flat
    segment runs; both must send the same values and dead bits to the Python side,
    agree on completion and leave the same variable values, or raise the same error
    naming the same node. ``runs`` keeps, per flat advance, the segments built so far
    and what the rendezvous held after it; ``errors`` the flat runs' errors."""

    def __init__(self, monkeypatch):
        self.runs = []
        self.errors = []
        self.mismatches = []     # checks that failed (the CoRun would take an
        #                          AssertionError raised in the run for a graph error)
        self.twins = {}          # id(FlatRun) -> (the run, its rendezvous, executor, keys given)
        real = FlatSteps.advance

        def advance(flat_steps, run, rv):
            cells = {name: c for name, c in _eager._eager_graph().resources.items()
                     if isinstance(c, VariableCell) and c.value is not None}
            before = {name: np.copy(c.value) for name, c in cells.items()}
            state = self.twins.get(id(run))
            if state is None or state[0] is not run:
                twin = LocalRendezvous()
                executor = Executor(flat_steps.plan, None, None, twin)
                executor.start()
                state = self.twins[id(run)] = (run, twin, executor, set())
            _, twin, executor, given = state
            for key, (value, dead) in _entries(rv).items():
                if key in flat_steps.recv_keys and key not in given:
                    given.add(key)
                    twin.send(key, value, dead)
            sent_before, twin_before = set(_entries(rv)), set(_entries(twin))
            try:
                want = executor.advance()
            except df.errors.OpError as exc:
                want = exc
            want_values = {name: np.copy(c.value) for name, c in cells.items()}
            for name, c in cells.items():
                c.value = np.copy(before[name])
            try:
                complete = real(flat_steps, run, rv)
            except df.errors.OpError as exc:
                self.errors.append(exc)
                self._check(_same_error, exc, want)
                raise
            if complete is not None:
                got = {k: v for k, v in _entries(rv).items()
                       if k not in sent_before and k not in flat_steps.recv_keys}
                want_sent = {k: v for k, v in _entries(twin).items()
                             if k not in twin_before and k not in flat_steps.recv_keys}
                self._check(_same_run, complete, want, got, want_sent, cells, want_values)
                self.runs.append((flat_steps.builds, _entries(rv)))
            else:   # no flat run: the executor runs the step on the variables as they were
                del self.twins[id(run)]
                for name, c in cells.items():
                    c.value = before[name]
            return complete

        monkeypatch.setattr(FlatSteps, "advance", advance)

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


def _same_run(complete, want, got, want_sent, cells, want_values):
    assert complete == want
    _same_entries(got, want_sent)
    for name, c in cells.items():
        np.testing.assert_array_equal(c.value, want_values[name])


def _no_flat(monkeypatch):
    monkeypatch.setattr(FlatSteps, "possible", property(lambda self: False))


# -- the eight programs ----------------------------------------------------------------------
STEPS = 28          # crosses sdpoint's and dropblock's fallbacks and regenerations
# Loop-free graphs: read nothing mid-step, or read it (bert_cls's predictions, skip_step's
# norm) and run in segments.
FLAT = {"mlp_adam", "sdpoint", "dropblock", "music_transformer", "bert_cls", "skip_step"}


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
        if name in ("sdpoint", "dropblock", "skip_step"):   # crosses a fallback, a regeneration
            assert f.stats["fallbacks"] > 0
        if name == "skip_step":    # the norm is read mid-step: two advances per step
            assert len(twin.runs) >= 2 * runs and flat_steps_of(f._step).builds >= 2
    else:
        # Folded loops (faster_rcnn, rnn_varlen): while-loop frames.
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
    assert flat.builds == 2          # one list of calls per branch, built once each
    calls = sorted(s.calls for s in flat.segments)
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


def _reads(a):
    s = df.reduce_sum(a)
    if float(s) > 1e9:      # a value read mid-step
        return s
    # A constant made after the read: fed then, so the graph finishes in a second segment.
    return df.square(s) + df.constant(0.0)


def test_a_read_mid_step_runs_flat_in_segments_built_once(rng, monkeypatch):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    twin = _Twin(monkeypatch)
    with df.eager_mode():
        f = df.function(_reads)
        for _ in range(5):
            got = float(f(df.constant(x)))
        flat = flat_steps_of(f._step)
        # Three steps on the graph, each in two segments (up to the read, then the rest).
        assert f.stats["graph_steps"] == 3 and flat.runs == 3 and len(twin.runs) == 6
        assert flat.builds == 2
        for _ in range(4):          # steady steps replay their segments: no build
            got = float(f(df.constant(x)))
        assert flat.runs == 7 and flat.builds == 2
    twin.check()
    np.testing.assert_allclose(got, float(x.sum()) ** 2, rtol=1e-5)


def test_a_random_ready_order_keeps_the_executor(rng):
    x = rng.standard_normal((2, 3)).astype(np.float32)
    with df.eager_mode():
        def plain(a):
            return df.square(df.reduce_sum(a))

        for fn, seed, flat_runs in ((_reads, 3, 0), (plain, 3, 0), (plain, None, 3)):
            f = df.function(fn, ready_order_seed=seed)
            for _ in range(5):
                got = float(f(df.constant(x)))
            np.testing.assert_allclose(got, float(x.sum()) ** 2, rtol=1e-5)
            assert f.stats["graph_steps"] == 3
            assert flat_steps_of(f._step).runs == flat_runs


def _reads_late(mode, xs, flags, w0):
    """A flat segment runs up to a read of ``s``; a later read of ``h``, which the graph
    does not fetch (no trace read it), falls back after the variable was written."""
    with df.eager_mode():
        w = df.Variable(w0)

        def step(x, flag):
            s = df.reduce_sum(df.matmul(x, w))
            w.assign_add(0.01 * df.ones_like(w) * s)
            seen = [float(s)]
            h = df.square(s)
            if flag:
                seen.append(float(h))
            return df.reduce_sum(w) + h, seen

        f = df.function(step, mode=mode)
        out = []
        for x, flag in zip(xs, flags):
            y, seen = f(df.constant(x), flag)
            out.append([float(y)] + seen)
        return out, w.numpy(), f


def test_a_read_the_path_never_sends_falls_back_after_a_flat_segment(rng, monkeypatch):
    xs = [rng.standard_normal((3, 4)).astype(np.float32) for _ in range(7)]
    w0 = rng.standard_normal((4, 1)).astype(np.float32)
    flags = [False, False, False, True, False, False, False]
    want, want_w, _ = _reads_late("eager", xs, flags, w0)
    twin = _Twin(monkeypatch)
    got, got_w, f = _reads_late("graph", xs, flags, w0)
    twin.check()
    for g, w in zip(got, want):
        np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got_w, want_w, rtol=1e-5, atol=1e-6)
    # The read of h: a fallback (the write restored and done once, eagerly), a
    # regeneration; the steps after it run flat on the new graph.
    assert f.stats["fallbacks"] == 1
    assert any("unfetched Square" in reason for reason in f.fallback_reasons)
    assert flat_steps_of(f._step).runs == 3


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
        assert before.runs == 2 and before.builds == 1
        built = before.segments
        f(df.constant(xs[4]), True)          # a new path: fallback, regeneration
        f(df.constant(xs[5]), True)
        after = flat_steps_of(f._step)
    assert f.stats["fallbacks"] == 1
    assert after is not before and after.plan is f._step.plan
    assert after.runs == 1 and after.builds == 1 and after.segments[0] not in built
