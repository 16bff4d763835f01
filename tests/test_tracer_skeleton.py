"""The Python side of df.function co-execution made cheap (dataflow/tracer/location.py,
coexec.py, step.py): interned call-site stacks whose callers' part is remembered per
user frame, dispatch that checks the one expected node field by field, a step that
leaves no reference cycle behind. Each shortcut must decide exactly as the full
computation does."""
import gc
import sys
import weakref

import numpy as np
import pytest

import dataflow as df
from dataflow.framework.tensor_shape import TensorShape
from dataflow.tracer import coexec
from dataflow.tracer.coexec import _same_attrs
from dataflow.tracer.location import _LIBRARY, Locator, _in_library, intern_stack, stack_of
from dataflow.tracer.trace import freeze_attrs

# A function whose code counts as the dataflow package's (its file name is under the
# package directory), as op wrappers are: it asks the locator from a library frame, so
# the innermost user frame is its caller, as in a real dispatch.
_NS: dict = {"sys": sys}
exec(compile("def where(locator, walk, depth=0):\n"  # noqa: S102 - a library-located probe
             "    if depth:\n"
             "        return where(locator, walk, depth - 1)\n"
             "    return both(locator, walk, sys._getframe())\n"
             "def both(locator, walk, f):\n"      # (a frame in its own locals is a cycle)
             "    return locator.stack_id(f), walk(f, locator.boundary)\n",
             _LIBRARY + "_locator_probe.py", "exec"), _NS)
_where = _NS["where"]


def _full_walk(f, boundary):
    """The call-site stack as a full walk finds it (the definition the locator keeps)."""
    sites = []
    while f is not None and f is not boundary:
        if not _in_library(f.f_code):
            sites.append((id(f.f_code), f.f_lasti))
        f = f.f_back
    return tuple(sites)


def _checked(locator, depth=0):
    """``locator``'s stack id for a call from its caller, after checking it against
    the full walk from the same frame."""
    sid, stack = _where(locator, _full_walk, depth)
    assert stack_of(sid) == stack
    return sid


def test_interned_stacks_round_trip_and_equal_stacks_share_an_id():
    a = ((11, 4), (12, 8))
    b = ((13, 2), (12, 8))
    ids = {intern_stack(a), intern_stack(b), intern_stack(tuple(a)), intern_stack(())}
    assert len(ids) == 3 and intern_stack(()) == 0
    assert stack_of(intern_stack(a)) == a and stack_of(intern_stack(b)) == b
    assert intern_stack(tuple(reversed(tuple(reversed(a))))) == intern_stack(a)


def test_the_locator_finds_the_stacks_of_a_full_walk():
    """Nested helpers, one helper at two call sites, recursion, many library frames, a
    generator resumed from two call sites (its frame's callers change between
    resumptions, so it is never remembered), and a frame that returned."""
    loc = Locator(sys._getframe(1))
    seen = []

    def helper(depth=0):
        return _checked(loc, depth)

    def recurse(n):
        return _checked(loc) if n == 0 else recurse(n - 1)

    def gen():
        for _ in range(3):
            # The generator's own frame is the innermost user frame here.
            sid, stack = _where(loc, _full_walk)
            assert stack_of(sid) == stack
            yield sid

    seen.append(_checked(loc))
    seen.append(_checked(loc))                 # another line of this frame
    seen += [helper(), helper(), helper(3)]    # three call sites of one helper
    seen += [recurse(2), recurse(3)]
    g = gen()
    first = next(g)                            # resumed from here...
    again = next(next(g) for _ in range(1))    # ...and from a generator expression
    assert first != again
    seen += [first, again]
    assert len(set(seen)) == len(seen)
    # The same call site again gives the same id, with and without a remembered frame.
    ids = []
    for i in range(3):
        if i == 2:
            loc.release()                      # forgets the frame and the boundary
            loc.boundary = sys._getframe(1)
        ids.append(helper())
    assert len(set(ids)) == 1


def test_release_lets_go_of_frames():
    loc = Locator(sys._getframe(1))

    def make():
        box = _Box()                           # a local of the frame the locator keeps
        _checked(loc)
        return weakref.ref(box)

    box_ref = make()
    assert box_ref() is not None               # the locator remembers that frame
    loc.release()
    assert box_ref() is None and loc.boundary is None


class _Box:
    """A local value a weak reference can watch."""


@pytest.mark.parametrize("a, b", [
    ({}, {}),
    ({"transpose_a": False}, {"transpose_a": False}),
    ({"transpose_a": False}, {"transpose_a": True}),
    ({"transpose_a": True}, {"transpose_a": 1}),          # equal across types
    ({"a": 1, "b": 2}, {"b": 2, "a": 1}),                 # the order is the key's
    ({"x": 1.0}, {"x": 1.0, "y": 2}),
    ({"dtype": df.float32}, {"dtype": df.float32}),
    ({"dtype": df.float32}, {"dtype": df.int32}),
    ({"shape": TensorShape([2, 3])}, {"shape": TensorShape([2, 3])}),
    ({"shape": TensorShape([2, 3])}, {"shape": [2, 3]}),  # equal, but a list freezes
    ({"perm": [1, 0]}, {"perm": [1, 0]}),
    ({"perm": [1, 0]}, {"perm": (1, 0)}),
    ({"value": np.array(3)}, {"value": 3}),               # a 0-d array == 3, not same key
    ({"value": np.array([1.0, 2.0])}, {"value": np.array([1.0, 2.0])}),
    ({"x": float("nan")}, {"x": float("nan")}),
    ({"spec": (("slice", 1, None, None),)}, {"spec": (("slice", 1, None, None),)}),
    ({"spec": (("slice", 1, None, None),)}, {"spec": (("slice", 2, None, None),)}),
    ({"axis": (1, 2)}, {"axis": [1, 2]}),
    ({"axis": (1, [2])}, {"axis": (1, [2])}),             # an unhashable tuple
    ({"s": (TensorShape([2]),), "p": [1]}, {"s": (TensorShape([2]),), "p": [1]}),
    ({"s": (TensorShape([2]),), "p": [1]}, {"s": (TensorShape([3]),), "p": [1]}),
    ({"s": (TensorShape([2]),), "p": 1}, {"s": (TensorShape([2]),), "p": [1]}),
])
def test_attributes_are_compared_as_their_frozen_keys_are(a, b):
    assert _same_attrs(a, freeze_attrs(b)) == (freeze_attrs(a) == freeze_attrs(b))
    assert _same_attrs(b, freeze_attrs(a)) == (freeze_attrs(b) == freeze_attrs(a))


def _run(step_fn, inputs, mode):
    with df.eager_mode():
        step = df.function(step_fn, mode=mode)
        outs = [step(*args) for args in inputs()]
        return [o.numpy() for o in outs], step


def test_one_location_with_other_attributes_or_input_shapes_is_matched_by_its_key(rng):
    """Both successors of a node run the same op at the same line: the first is an
    op's expected node only while its attributes and fed specs fit, and otherwise
    the full key decides (another known node, or a fallback for a new one)."""
    w = rng.standard_normal((3, 3)).astype(np.float32)
    batches = [(rng.standard_normal((n, 3)).astype(np.float32), flag)
               for n, flag in [(2, False), (2, False), (2, False), (2, True), (4, True),
                               (2, False), (2, True), (4, True), (4, False), (4, False)]]

    def step(x, flag):
        return df.reduce_sum(df.matmul(x, df.constant(w), transpose_b=flag))

    def inputs():
        return [(df.constant(x), flag) for x, flag in batches]

    want, _ = _run(step, inputs, "eager")
    got, fn = _run(step, inputs, "graph")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    # New paths: (2, True), (4, True), (4, False); every other call ran on the graph.
    assert fn.stats["fallbacks"] == 3
    assert fn.stats["graph_steps"] == len(batches) - 2 - 3


def test_a_loop_iteration_wired_otherwise_is_a_new_path(rng):
    """In one iteration the same ops at the same lines read another value (the initial
    state instead of the previous iteration's): a folded loop's body check sees it
    and the step falls back once, with eager's results."""
    w = rng.standard_normal((3, 3)).astype(np.float32) * 0.5
    data = [(rng.standard_normal((n, 2, 3)).astype(np.float32), reset)
            for n, reset in [(4, -1), (3, -1), (5, -1), (4, 2), (6, -1), (4, 2), (3, -1)]]

    def step(xs, reset):
        h0 = df.zeros([2, 3])
        h = h0
        for t in range(xs.shape[0]):
            h = df.tanh(df.matmul(h0 if t == reset else h, df.constant(w)) + xs[t])
        return df.reduce_sum(h)

    def inputs():
        return [(df.constant(x), reset) for x, reset in data]

    want, _ = _run(step, inputs, "eager")
    got, fn = _run(step, inputs, "graph")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert fn.stats["fallbacks"] == 1 and fn.stats["graph_steps"] == len(data) - 3
    assert any(n.op_type == "FoldedLoop" for n in fn._tg.nodes)


def test_a_co_executed_step_leaves_no_reference_cycle(rng, monkeypatch):
    """The step's run (its executor, matched ops, handles) is freed when the call
    returns, by reference counting: it waits for no garbage collection."""
    runs = []
    init = coexec.CoRun.__init__

    def tracking_init(self, *args, **kwargs):
        init(self, *args, **kwargs)
        runs.append(weakref.ref(self))

    monkeypatch.setattr(coexec.CoRun, "__init__", tracking_init)
    with df.eager_mode():
        w = df.Variable(rng.standard_normal((4, 2)).astype(np.float32))
        opt = df.train.AdamOptimizer(0.01)

        @df.function
        def step(x):
            with df.GradientTape() as tape:
                loss = df.reduce_mean(df.square(df.matmul(x, w)))
            opt.apply_gradients([(tape.gradient(loss, w), w)])
            return loss

        gc.disable()
        try:
            for _ in range(5):
                step(df.constant(rng.standard_normal((3, 4)).astype(np.float32)))
            assert step.stats["graph_steps"] == 3 and len(runs) == 3
            assert [r() for r in runs] == [None] * 3
        finally:
            gc.enable()


def _loop_program(rng):
    """Steps with a folded loop whose state starts from a node output, a variable or a
    fed constant (by ``start``), with new trip counts, and an op after the loop that
    one step changes (``after``): steady steps, and new paths at the loop's entry and
    exit."""
    w = rng.standard_normal((3, 3)).astype(np.float32) * 0.5
    v0 = rng.standard_normal((2, 3)).astype(np.float32)
    plan = [(4, "node", "sum"), (3, "node", "sum"), (5, "node", "sum"), (4, "node", "sum"),
            (6, "variable", "sum"), (4, "variable", "sum"), (2, "variable", "sum"),
            (3, "fed", "sum"), (5, "fed", "sum"), (4, "fed", "sum"), (4, "node", "max"),
            (6, "node", "max"), (3, "node", "sum"), (5, "variable", "max")]
    data = [(rng.standard_normal((n, 2, 3)).astype(np.float32), start, after)
            for n, start, after in plan]

    def make():
        v = df.Variable(v0)

        def step(xs, start, after):
            if start == "node":
                h = xs[0] * 2.0
            elif start == "variable":
                h = v
            else:
                h = df.constant(np.ones((2, 3), np.float32))
            for t in range(xs.shape[0]):
                h = df.tanh(df.matmul(h, df.constant(w)) + xs[t])
            return df.reduce_sum(h) if after == "sum" else df.reduce_max(h)
        return step

    def inputs():
        return [(df.constant(x), start, after) for x, start, after in data]
    return make, inputs


def test_entering_and_leaving_a_folded_loop_decide_as_the_full_key(rng, monkeypatch):
    """The shortcuts into a folded loop (the entry op checked against the loop's first
    body op, a loop variable's first value against the loop node's input) and out of
    it (the op after the loop matched from the loop node) give the same results,
    traces, fallbacks and graph steps as the full key alone, which they spare."""
    make, inputs = _loop_program(rng)
    with df.eager_mode():
        want, _ = _run(make(), inputs, "eager")
    matches = []
    full_match = coexec.CoRun._match

    def counting(self, *args):
        matches.append(1)
        return full_match(self, *args)

    # The wrappers below sit between library frames (a re-dispatch walks the stack
    # through them): they must count as library code, as what they wrap does.
    counting.__code__ = counting.__code__.replace(co_filename=coexec.__file__)
    monkeypatch.setattr(coexec.CoRun, "_match", counting)
    with df.eager_mode():
        got, fast = _run(make(), inputs, "graph")
    fast_matches = len(matches)
    monkeypatch.setattr(coexec.CoRun, "_enter_loop", lambda self, *args: None)
    monkeypatch.setattr(coexec.CoRun, "_leaves_loop", lambda self, *args: False)
    body_next = coexec.CoRun._loop_next

    def first_iteration_by_key(self, *args):
        # Without the first-iteration check: a loop variable's first value is left to
        # _loop_dispatch, as before the shortcut.
        if self._iteration_nodes[1] is None and self._loop[2] < len(self._loop[1].body):
            if any(p[0] == "c" for p in self._body_inputs[self._loop[0]][self._loop[2]]):
                return None
        return body_next(self, *args)

    first_iteration_by_key.__code__ = first_iteration_by_key.__code__.replace(
        co_filename=coexec.__file__)
    monkeypatch.setattr(coexec.CoRun, "_loop_next", first_iteration_by_key)
    del matches[:]
    with df.eager_mode():
        slow_got, slow = _run(make(), inputs, "graph")
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(slow_got, want, rtol=1e-5, atol=1e-6)
    assert fast.stats == slow.stats
    assert fast.fallback_reasons == slow.fallback_reasons
    assert fast.stats["graph_steps"] >= 6 and fast.stats["fallbacks"] >= 4
    assert any(n.op_type == "FoldedLoop" for n in fast._tg.nodes)
    # Each graph step entered and left its loop by the full key before the shortcuts.
    assert len(matches) - fast_matches >= 2 * fast.stats["graph_steps"]
