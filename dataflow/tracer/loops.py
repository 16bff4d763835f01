"""Folding Python loops: iterations that trace alike become one ``while_loop`` node.

A trace records a Python loop unrolled: ``T`` runs of the same ops, each op's location
one iteration further. :func:`fold_loops` finds such runs and replaces each by one
*loop op* (type :data:`LOOP_OP`) whose attribute is a :class:`LoopSpec`: the ops of one
iteration (the *body*) and the loop variables. The loop op's identity does not depend on
the trip count, so a step that runs the loop another number of times is the same path
of the TraceGraph and needs no new trace; the generated graph runs the body in a
``while_loop`` whose trip count Python feeds when it leaves the loop (:mod:`.generate`).

Which loops qualify: a run of ``T >= 2`` consecutive iterations (``T >= 1`` for a body
already folded in an earlier trace) in which

* every op has the same type, attributes, output dtypes and shapes and call-site stack
  as the op at its place in the first iteration (only the iteration index differs);
* every input comes, in every iteration, from the same place: an earlier op of the same
  iteration, a value made before the loop (a loop invariant), a variable, a value fed
  from Python each iteration (a Python number, a loop index such as the ``t`` of
  ``xs[:, t]``: :func:`~.trace.feed_slice_bounds` feeds it), or the previous iteration
  (a loop-carried value, whose first iteration reads a value made before the loop or a
  fed one, such as ``total = 0.0`` then ``total += ...``);
* after the loop, only the last iteration's values are used (a final state, a sum);
  Python reads no value of the body while the loop runs, and keeps none of an earlier
  iteration (a list of per-step outputs used after the loop, ``print`` in the body);
* the body writes no variable and reads none written earlier in the step, and
  contains no ``GradientTape.gradient`` (the gradient of a folded loop is computed
  through the ``while_loop`` by ``df.gradients``); the ops of a gradient recorded op
  by op (an ``IndexedSlices`` one) are never folded either: their repeats (one layer's
  gradient after another's) are no Python loop.

Why these rules: Python feeds the loop's iterations first and the graph runs them
after (when Python next reads a value, or at the end of the step), so a value Python
needs in the middle of the loop would have to come back per iteration (the loops of the
programs here never read one: their bodies only compute), and a value used after the
loop from an iteration other than the last would have to be kept per iteration; ops
whose inputs come from anywhere else have no single body to fold into. Loops that do
not qualify are unrolled, as before: one path per trip count. The graph's loop runs
whole iterations, so a step that leaves a folded loop between two ops of its body (a
``break`` in the middle) falls back; while Python runs a folded loop, its next
iteration is preferred to any other path that starts with the same op.

>>> def op(t, stack, n, inputs):
...     return TraceOp(t, {}, (), (stack, n), inputs, (None,) * len(inputs),
...                    ((df.float32, df.TensorShape([])),), t)
>>> trace = Trace()
>>> trace.ops = [op("Const", "a", 0, ())]                  # h = ...
>>> for t in range(3):                                     # for t in ...: h = tanh(h)
...     trace.ops.append(op("Tanh", "b", t, (("n", len(trace.ops) - 1, 0),)))
>>> trace.ops.append(op("Neg", "c", 0, (("n", 3, 0),)))    # after the loop: -h
>>> folded = fold_loops(trace, {})
>>> [o.op_type for o in folded.ops], folded.ops[2].inputs
(['Const', 'FoldedLoop', 'Neg'], (('n', 1, 0),))
>>> spec = folded.ops[1].attrs["loop"]
>>> [b.inputs for b in spec.body], spec.variables
([(('c', 0),)], ((0, 0, ('x', 0)),))
"""
from __future__ import annotations

from typing import NamedTuple

from ..framework.tensor_shape import TensorShape
from .trace import GRADIENT_OP, WRITING_VARIABLE_OPS, Trace, TraceOp

__all__ = ["LOOP_OP", "LoopSpec", "BodyOp", "fold_loops"]

LOOP_OP = "FoldedLoop"
_FED = ("f",)


class BodyOp(NamedTuple):
    """One op of a folded loop's body. ``inputs`` per slot: ``("b", j, k)`` output ``k``
    of body op ``j`` of the same iteration; ``("c", m)`` loop variable ``m`` (the
    previous iteration's value, its initial value in the first); ``("x", e)`` input
    ``e`` of the loop op (a value made before the loop or a variable); ``("f",)`` fed
    from Python every iteration (``feed_specs`` has its dtype and shape)."""

    op_type: str
    attrs: dict
    attrs_key: tuple
    stack: tuple
    inputs: tuple
    feed_specs: tuple
    out_specs: tuple
    name: str

    @property
    def key(self):
        return (self.op_type, self.attrs_key, self.stack, self.inputs, self.feed_specs)


class LoopSpec(NamedTuple):
    """A folded loop: its body and its variables. Variable ``m`` is ``(j, k, init)``:
    body op ``j``'s output ``k`` at the end of each iteration, starting from ``init``
    (``("x", e)``: loop input ``e``, which may be fed; ``("zeros",)``: a value used only
    after the loop, which the first iteration overwrites). The loop op's output ``m``
    is variable ``m`` after the last iteration."""

    body: tuple
    variables: tuple

    @property
    def key(self):
        return (tuple(b.key for b in self.body), self.variables)


def _sig(op):
    return (op.op_type, op.location[0], op.attrs_key, op.out_specs)


def _same(a, b) -> bool:
    """Whether two ops' signatures are equal (an attribute value that compares
    elementwise, such as an array inside a list, counts as different)."""
    if a[:2] != b[:2]:
        return False
    try:
        return bool(a[2:] == b[2:])
    except (ValueError, TypeError):
        return False


def fold_loops(trace: Trace, known: dict) -> Trace:
    """``trace`` with each qualifying loop (see the module docstring) replaced by a
    loop op. ``known`` maps :attr:`LoopSpec.key` to the specs folded before: a run of
    one of their bodies folds even with a single iteration. Returns ``trace`` itself
    when nothing folds."""
    ops = list(trace.ops)
    reads, alive, shape_reads = dict(trace.reads), set(trace.alive), dict(trace.shape_reads)
    written_before = _writes_before(ops)
    avoid = frozenset(getattr(trace, "gradient_stacks", ()))
    folded_any = False
    s = 0
    while s < len(ops):
        found = _find_loop(ops, s, known, reads, alive, shape_reads, written_before, avoid)
        if found is None:
            s += 1
            continue
        loop_op, end, out_of = found
        ops, reads, alive, shape_reads = _replace(ops, s, end, loop_op, out_of, reads,
                                                  alive, shape_reads)
        written_before = _writes_before(ops)
        folded_any = True
        s += 1
    if not folded_any:
        return trace
    new = Trace()
    new.ops = ops
    new.reads, new.alive, new.shape_reads = reads, alive, shape_reads
    new.variables, new.created = trace.variables, trace.created
    new.gradient_stacks = trace.gradient_stacks
    return new


def _writes_before(ops) -> list:
    """Per op index: the variables written by ops before it."""
    seen: set = set()
    result = []
    for op in ops:
        result.append(frozenset(seen))
        if op.op_type in WRITING_VARIABLE_OPS:
            seen.update(src[1] for src in op.inputs if src[0] == "v")
    return result


def _find_loop(ops, s, known, reads, alive, shape_reads, written_before, avoid):
    """The loop starting at ``s``: ``(loop op, end, out_of)`` (``out_of`` maps an
    output ``(i, k)`` of the last iteration to the loop op's output), or None. No op
    of a body may be at a call site in ``avoid`` (a gradient computed op by op)."""
    first = ops[s]
    if first.op_type in (GRADIENT_OP, LOOP_OP) or first.location[0] in avoid:
        return None
    for spec in known.values():
        if spec.body[0].key[:3] == (first.op_type, first.attrs_key, first.location[0]):
            found = _fold_known(ops, s, spec, reads, alive, shape_reads, written_before)
            if found is not None:
                return found
    sig = _sig(first)
    n = len(ops)
    for nxt in range(s + 1, n):
        if _same(_sig(ops[nxt]), sig):
            break
    else:
        return None
    period = nxt - s
    trips = 1
    while s + (trips + 1) * period <= n and all(
            _same(_sig(ops[s + trips * period + j]), _sig(ops[s + j])) for j in range(period)):
        trips += 1
    if trips < 2 or any(ops[s + j].location[0] in avoid for j in range(period)):
        return None
    return _fold(ops, s, period, trips, reads, alive, shape_reads, written_before)


def _classify(ops, s, period, t, j, q):
    """Where input ``q`` of body op ``j`` in iteration ``t`` comes from (body wiring
    with ``("c", (j', k))`` for the previous iteration and ``("F", id)`` for one Python
    object fed in every iteration), or None."""
    op = ops[s + t * period + j]
    src = op.inputs[q]
    kind = src[0]
    if kind == "f":
        return ("F", op.feed_ids[q]) if op.feed_ids else src
    if kind != "n":
        return src
    i, k = src[1], src[2]
    base = s + t * period
    if base <= i < base + j:
        return ("b", i - base, k)
    if t >= 1 and base - period <= i < base:
        return ("c", (i - base + period, k))
    if i < s:
        return ("x", src)
    return None


def _fold(ops, s, period, trips, reads, alive, shape_reads, written_before):
    """Check the wiring of the ``trips`` iterations of ``period`` ops at ``s`` and build
    the loop op; shortens the loop to the iterations that agree; None if < 2 remain."""
    while trips >= 2:
        pattern = _wiring(ops, s, period, trips)
        if pattern is not None:
            break
        trips -= 1
    else:
        return None
    later, initial = pattern
    if _unsafe_body(ops, s, period, written_before):
        return None
    return _build(ops, s, period, trips, later, initial, reads, alive, shape_reads)


def _wiring(ops, s, period, trips, template=None):
    """``(later, initial)``: per body op the input classes of iterations 1.. (equal in
    all of them) and of iteration 0; None when they disagree. A fed input is
    ``("F", id)`` when every iteration fed the same Python object (a loop invariant,
    fed once), else ``("f",)`` (fed every iteration). ``template`` (a known body's
    wiring) stands for iteration 1 when the loop ran once."""
    later, initial = [], []
    for j in range(period):
        width = len(ops[s + j].inputs)
        rows = [tuple(_classify(ops, s, period, t, j, q) for q in range(width))
                for t in range(trips)]
        if any(None in row or len(row) != width for row in rows):
            return None
        row0 = rows[0]
        if template is not None:
            row1 = tuple(w if w[0] in ("b", "c") or w == _FED else a
                         for w, a in zip(template[j], row0))
        else:
            row1 = rows[1]
        fixed0, fixed1 = list(row0), list(row1)
        for q in range(width):
            column = [row[q] for row in rows[1:]]
            if row1[q][0] == "c":
                if row0[q][0] == "F":
                    fixed0[q] = _FED          # the first value of a loop variable
                if row0[q][0] not in ("x", "f", "F") or any(c != row1[q] for c in column):
                    return None
                continue
            if row1[q][0] in ("f", "F"):
                every = [row0[q]] + column
                if any(c[0] not in ("f", "F") for c in every):
                    return None
                if row1[q] == _FED or len(set(every)) != 1:
                    fixed0[q] = fixed1[q] = _FED
                    if any(ops[s + t * period + j].feed_specs[q] != ops[s + j].feed_specs[q]
                           for t in range(trips)):
                        return None
                continue
            if any(c != row1[q] for c in column) or row0[q] != row1[q]:
                return None
        later.append(tuple(fixed1))
        initial.append(tuple(fixed0))
    return later, initial


def _build(ops, s, period, trips, later, initial, reads, alive, shape_reads):
    end = s + period * trips
    last = end - period
    ext: list = []              # loop op inputs: ("n", i, k) | ("v", name) | ("f",)
    ext_specs: list = []
    ext_index: dict = {}

    def external(src, spec=None, key=None):
        if key is not None and key in ext_index:
            return ext_index[key]
        ext.append(src)
        ext_specs.append(spec)
        if key is not None:
            ext_index[key] = len(ext) - 1
        return len(ext) - 1

    variables: list = []        # (j, k, init)
    var_index: dict = {}
    body = []
    for j in range(period):
        op = ops[s + j]
        wired = []
        for q, (b, a) in enumerate(zip(later[j], initial[j])):
            if b[0] == "c":
                jj, k = b[1]
                if _spec_of(ops, a, op, q) != ops[s + jj].out_specs[k]:
                    return None    # the first value has another dtype or shape
                if a[0] == "x":
                    init = ("x", external(a[1], key=a[1]))
                else:
                    init = ("x", external(_FED, op.feed_specs[q]))
                var = (jj, k, init)
                if var not in var_index:
                    var_index[var] = len(variables)
                    variables.append(var)
                wired.append(("c", var_index[var]))
            elif b[0] == "x":
                wired.append(("x", external(b[1], key=b[1])))
            elif b[0] == "v":
                wired.append(("x", external(b, key=b)))
            elif b[0] == "F":
                wired.append(("x", external(_FED, op.feed_specs[q], key=b)))
            else:
                wired.append(b)
        feed_specs = tuple(op.feed_specs[q] if w == _FED else None
                           for q, w in enumerate(wired))
        body.append(BodyOp(op.op_type, op.attrs, op.attrs_key, op.location[0], tuple(wired),
                           feed_specs, op.out_specs, op.name))
    _relax_indexed_axes(body, ext, ext_specs)
    # Values used after the loop: the last iteration's only.
    out_of: dict = {}

    def output(i, k):
        if not last <= i < end:
            return None
        j = i - last
        for m, (jj, kk, _) in enumerate(variables):
            if (jj, kk) == (j, k):
                return m
        spec = ops[i].out_specs[k]
        if not spec[1].is_fully_defined():
            return None
        variables.append((j, k, ("zeros",)))
        return len(variables) - 1

    for i in range(end, len(ops)):
        for src in ops[i].inputs:
            if src[0] == "n" and s <= src[1] < end:
                m = output(src[1], src[2])
                if m is None:
                    return None
                out_of[(src[1], src[2])] = m
    for table in (reads, shape_reads):
        for (i, k), position in table.items():
            if s <= i < end:
                if position < end:
                    if table is reads:
                        return None   # a value read while the loop runs
                    continue          # a shape: the body's handles have their own
                m = output(i, k)
                if m is None:
                    return None
                out_of[(i, k)] = m
    for i, k in alive:
        if s <= i < end:
            m = output(i, k)
            if m is None:
                return None
            out_of[(i, k)] = m
    spec = LoopSpec(tuple(body), tuple(variables))
    out_specs = tuple(ops[s + j].out_specs[k] for j, k, _ in variables)
    loop_op = TraceOp(LOOP_OP, {"loop": spec}, ("loop", spec.key), ops[s].location,
                      tuple(ext), tuple(ext_specs), out_specs, "loop")
    return loop_op, end, out_of


def _relax_indexed_axes(body, ext, ext_specs):
    """A loop invariant fed from Python and only indexed in the body by the loop's fed
    index (``xs[:, t]``) is fed once with that axis's size left out of its spec: a
    sequence of another length, read for another trip count, is the same loop input
    (the slice's shape does not depend on that size)."""
    for e, src in enumerate(ext):
        if src != _FED or ext_specs[e] is None:
            continue
        axes = None
        for b in body:
            for q, w in enumerate(b.inputs):
                if w == ("x", e):
                    found = _indexed_axes(b, q)
                    axes = found if axes is None else axes & found
        if axes:
            dtype, shape = ext_specs[e]
            ext_specs[e] = (dtype, tuple(None if i in axes else d for i, d in enumerate(shape)))


def _indexed_axes(b, q) -> set:
    """Axes of input ``q`` of body op ``b`` indexed by a value fed every iteration."""
    if b.op_type != "StridedSlice" or q != 0:
        return set()
    axes, axis = set(), 0
    for item in b.attrs["spec"]:
        kind = item[0]
        if kind == "ellipsis":
            return set()
        if kind == "newaxis":
            continue
        if kind == "tensor_int" and b.inputs[item[1]] == _FED:
            axes.add(axis)
        axis += 1
    return axes


def _spec_of(ops, a, op, q):
    """``(dtype, shape)`` of the first iteration's value ``a`` at input ``q`` of ``op``."""
    if a[0] == "f":
        dtype, shape = op.feed_specs[q]
        return (dtype, TensorShape(shape))
    src = a[1]
    if src[0] == "n":
        return ops[src[1]].out_specs[src[2]]
    return None


def _fold_known(ops, s, spec, reads, alive, shape_reads, written_before):
    """A run of ``spec``'s body at ``s`` (one iteration or more), or None."""
    period = len(spec.body)
    sigs = [(b.op_type, b.stack, b.attrs_key, b.out_specs) for b in spec.body]
    trips = 0
    while s + (trips + 1) * period <= len(ops) and all(
            _same(_sig(ops[s + trips * period + j]), sigs[j]) for j in range(period)):
        trips += 1
    if trips == 0:
        return None
    template = [tuple(("c", spec.variables[w[1]][:2]) if w[0] == "c" else w
                      for w in b.inputs) for b in spec.body]
    while trips >= 1:
        pattern = _wiring(ops, s, period, trips, template)
        if pattern is not None:
            break
        trips -= 1
    else:
        return None
    if _unsafe_body(ops, s, period, written_before):
        return None
    found = _build(ops, s, period, trips, *pattern, reads, alive, shape_reads)
    if found is None or found[0].attrs["loop"].key != spec.key:
        return None
    return found


def _unsafe_body(ops, s, period, written_before) -> bool:
    for j in range(period):
        op = ops[s + j]
        if op.op_type in (GRADIENT_OP, LOOP_OP) or op.op_type in WRITING_VARIABLE_OPS:
            return True
        if any(src[0] == "v" and src[1] in written_before[s] for src in op.inputs):
            return True
    return False


def _replace(ops, s, end, loop_op, out_of, reads, alive, shape_reads):
    """``ops[s:end]`` replaced by ``loop_op``, later wiring and reads renumbered."""
    shift = end - s - 1

    def move(i, k):
        if i < s:
            return (i, k)
        if i >= end:
            return (i - shift, k)
        return (s, out_of.get((i, k)))

    new_ops = ops[:s] + [loop_op]
    for op in ops[end:]:
        inputs = tuple(("n",) + move(src[1], src[2]) if src[0] == "n" else src
                       for src in op.inputs)
        new_ops.append(op._replace(inputs=inputs))
    def position(p):
        return p if p <= s else max(p - shift, s + 1)

    new_reads = {move(i, k): position(p) for (i, k), p in reads.items()}
    new_shape = {move(i, k): position(p) for (i, k), p in shape_reads.items()
                 if not (s <= i < end and (i, k) not in out_of)}
    new_alive = {move(i, k) for i, k in alive}
    return new_ops, new_reads, new_alive, new_shape
