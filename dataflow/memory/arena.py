"""Executing a memory plan: the arena of ``ConfigProto(plan_memory=True)``.

:func:`build_arena_step` turns one compiled step and its fed shapes into an
:class:`ArenaStep`: the step's :class:`~dataflow.memory.planner.MemoryPlan`, one
arena of ``arena_bytes`` allocated once, every planned value a view of it at its
offset, and the step's kernels wrapped to write into those views:

* a kernel with an ``out=`` variant (:func:`dataflow.kernels.registry.register_out_variant`)
  computes straight into its block; one without computes and copies its result into
  the block (it is listed in :attr:`ArenaStep.copied`); a variant that makes several
  passes is not used where the plan puts the output over an input (in place), nor any
  variant where that input has another shape;
* a Merge's value is copied into the Merge's block when the Merge runs (the plan gives
  a loop variable and a cond's result a block of their own; see ``move_into_merge``);
* values the runtime keeps beyond the op (stack pushes, tensor array writes) are
  copied out of the arena first, as are fetched values (the caller keeps them);
* 0-d values stay NumPy scalars (the runtime's representation of scalars), so their
  64-byte blocks go unused.

The runtime (:mod:`dataflow.runtime.memory_arena`) runs the step in the plan's order.
With ``check=True`` every kernel also reports what it reads and writes to an
:class:`ArenaChecker`, which fails the step when a value is read after another value
overwrote any of its bytes: two live values sharing memory.

>>> import dataflow as df
>>> g = df.Graph()
>>> with g.as_default():
...     x = df.placeholder(df.float32, [256], name="x")
...     y = df.reduce_sum(df.exp(df.tanh(x * 2.0)))
>>> with df.Session(graph=g, config=df.ConfigProto(plan_memory=True)) as sess:
...     meta = df.RunMetadata()
...     v = sess.run(y, {x: np.ones(256, np.float32)}, run_metadata=meta)
>>> meta.memory_plan.arena_bytes, meta.copied_kernels
(1024, [])
"""
from __future__ import annotations

import numpy as np

from .. import errors
from ..framework import op_registry as R
from .planner import ALIGNMENT, _history_pairs, plan as _plan

__all__ = ["ArenaChecker", "ArenaStep", "build_arena_step", "register_retains_inputs"]

# op type -> input indices whose values the runtime keeps after the op ran (a stack
# holds what was pushed): they are copied out of the arena first.
_RETAINS: dict = {}


def register_retains_inputs(op_type: str, indices) -> None:
    """Declare that ``op_type`` keeps references to its inputs ``indices`` after it ran
    (so under ``plan_memory`` those values are copied out of the arena first).

    >>> register_retains_inputs("StackPush", [1])
    """
    _RETAINS[op_type] = tuple(indices)


for _type, _idx in (("StackPush", [1]), ("StackPushV2", [1]), ("TensorArrayWriteV3", [2]),
                    ("TensorArrayScatterV3", [2]), ("TensorArraySplitV3", [1]),
                    ("QueueEnqueueV2", [1]), ("QueueEnqueueManyV2", [1])):
    register_retains_inputs(_type, _idx)


class ArenaStep:
    """One compiled step's arena and the kernels that write into it (see the module
    docstring). ``node_tuples``, ``times``, ``loop_begin``, ``merges`` and
    ``move_into_merge`` are what :class:`dataflow.runtime.memory_arena.ArenaExecutor`
    reads; ``copied`` names the kernels that compute then copy."""

    def __init__(self, memory_plan, arena, node_tuples, times, loop_begin, merges,
                 copied, checker, optimizer_variables=()):
        self.plan = memory_plan
        self.arena = arena
        self.node_tuples = node_tuples
        self.times = times
        self.root_keys = [(t,) for t in times]    # the ready-list keys of root-frame nodes
        self.loop_begin = loop_begin
        self.merges = merges
        self.copied = copied
        self.checker = checker
        self.raw = arena.base          # what every view of the arena has as its base
        # ids of the arrays fetched Merges reuse across the iterations of this run
        self.reused: set = set()
        self.reused_arrays: list = []
        # shared names of the variables only the optimizer touches (its slots and
        # accumulators): CalcGraph's optimizer zone, which a shared Heap may evict
        self.optimizer_variables = tuple(optimizer_variables)
        self.memos: list = []      # the history memos of its stack pushes (per run)
        # its FlatSchedule when it has no control flow (set by the runtime's ArenaCache:
        # dataflow.runtime.flat_schedule)
        self.flat = None
        # its LoopSchedule when it has while loops that fit the flat form (set by the
        # runtime's ArenaCache: dataflow.runtime.loop_schedule)
        self.loop_flat = None
        # Merges in a cycle of copies (MemoryPlan.merge_saves): source gid -> its save
        # block (uint8 bytes of the arena) and reader gid -> source gid; ``saved``:
        # source gid -> (the array it held, that array's copy in the save block)
        self.saves: dict = {}
        self.save_of: dict = {}
        self.saved: dict = {}
        # a loop variable's value push gid -> (its next push gid, the pair's hint): set
        # by build_arena_step, read by the flat loop schedule (see _retaining)
        self.history_pairs: dict = {}

    def new_run(self):
        """Forget the previous run's reused arrays (the caller holds its results) and
        the copies its stack pushes shared (see ``_retaining``)."""
        self.reused.clear()
        self.reused_arrays.clear()
        self.saved.clear()
        for memo in self.memos:
            memo.clear()

    def move_into_merge(self, gid, value, pinned):
        """The value a Merge passes on: ``value`` copied into the Merge's block. A
        fetched Merge's value lives outside the arena: the step's first copy gets a
        fresh array (``pinned``, per run, holds it), later iterations reuse it."""
        view = self.merges[gid]
        checker = self.checker
        if self.saves:
            value = self._through_save(gid, value, pinned)
        if checker is not None:
            checker.read(value, f"Merge node {gid}")
        if type(value) is not np.ndarray:
            return value
        if view is None:
            if value.base is not self.raw and not _held_by(value, pinned):
                return value   # not a value this step overwrites: pass it on
            held = pinned.get(gid)
            if held is None or held.shape != value.shape or held.dtype != value.dtype \
                    or not value.flags.c_contiguous:
                held = pinned[gid] = value.copy(order="K")
                if held.flags.c_contiguous:
                    # values the runtime keeps (stack pushes) are copied out of it too
                    self.reused.add(id(held))
                    self.reused_arrays.append(held)
            else:
                np.copyto(held, value)
            return held
        if value.shape != view.shape or value.dtype != view.dtype:
            return value
        if value is not view:
            value = _place(value, view, self.raw)
        if checker is not None:
            checker.wrote(value, f"Merge node {gid}")
        return value


    def _through_save(self, gid, value, pinned):
        """A Merge of a cycle of copies (see ``saves``): a reader's value is the
        previous value of a Merge that has since overwritten it, so it is taken from
        that Merge's save block; a source saves what it holds before it overwrites
        it."""
        src = self.save_of.get(gid)
        if src is not None and type(value) is np.ndarray:
            held, snap = self.saved.get(src, (None, None))
            if held is not None and np.may_share_memory(value, held):
                value = self._saved_view(value, held, snap, gid)
        save = self.saves.get(gid)
        if save is not None:
            held = self.merges[gid]
            if held is None:
                held = pinned.get(gid)
            self.saved[gid] = (None, None) if held is None else (
                held, _save_copy(held, save, self.raw, self.checker, gid))
        return value

    def _saved_view(self, value, held, snap, gid):
        """``value`` (an array over ``held``'s memory) read from ``snap``, the copy of
        ``held`` in the save block (same strides)."""
        if value is held:
            view = snap
        else:
            offset = snap.ctypes.data - self.raw.ctypes.data \
                + value.ctypes.data - held.ctypes.data
            view = np.ndarray(value.shape, value.dtype, buffer=self.raw, offset=offset,
                              strides=value.strides)
        if self.checker is not None:
            self.checker.alias(view, snap)
        return view


def _save_copy(held, save, raw, checker, gid):
    """``held`` copied into the arena bytes ``save`` with its own strides (a value
    placed with other strides keeps them; a Merge's block view covers the block)."""
    strides = held.strides
    span = sum((n - 1) * st for n, st in zip(held.shape, strides)) + held.itemsize \
        if held.size else 0
    if any(st < 0 for st in strides) or span > save.nbytes:
        raise errors.InternalError(
            None, None, f"plan_memory: Merge node {gid}'s value (shape {held.shape}, "
            f"strides {strides}) does not fit its save block ({save.nbytes} B)")
    snap = np.ndarray(held.shape, held.dtype, buffer=raw,
                      offset=save.ctypes.data - raw.ctypes.data, strides=strides)
    np.copyto(snap, held)
    if checker is not None:
        checker.wrote(snap, f"Merge node {gid} (saved)")
    return snap


def _held_by(value, pinned) -> bool:
    """Whether ``value`` is (a view of) an array a fetched Merge of this run holds and
    overwrites each iteration: another Merge must copy it, not keep it."""
    for held in pinned.values():
        if value is held or value.base is held:
            return True
    return False


def _place(r, view, raw):
    """``r`` copied into ``view``'s block, keeping ``r``'s memory layout (its strides):
    a transposed or sliced result stays one, so the kernels reading it take the same
    paths as in the unplanned run (the compiled ones need C-contiguous inputs)."""
    if r.flags.c_contiguous:
        np.copyto(view, r)
        return view
    strides = r.strides
    if r.size and all(st >= 0 for st in strides):
        span = sum((n - 1) * st for n, st in zip(r.shape, strides)) + r.itemsize
        if span <= view.nbytes:
            placed = np.ndarray(r.shape, r.dtype, buffer=raw,
                                offset=view.ctypes.data - raw.ctypes.data, strides=strides)
            np.copyto(placed, r)
            return placed
    np.copyto(view, r)
    return view


def _own(value, arena):
    """``value``, copied if it is a view of the arena (a fetched value outlives it)."""
    if type(value) is np.ndarray and value.base is arena:
        return value.copy()
    return value


def build_arena_step(run_plan, graph, tensors, targets, feed_tensors, feed_values,
                     kernels, check=False) -> ArenaStep:
    """The :class:`ArenaStep` of ``run_plan`` (a :class:`dataflow.runtime.plan.Plan`)
    for these fed values; ``kernels`` is the Session's KernelResolver (for the
    ``out=`` variants of the kernels it built). Registered with the runtime by
    ``import dataflow``."""
    mp = _plan(list(tensors) + list(targets),
               feed_dict=dict(zip(feed_tensors, feed_values)), graph=graph)
    arena = _aligned_bytes(mp.arena_bytes)
    checker = ArenaChecker(arena) if check else None
    times_of = {name: i for i, (kind, name) in enumerate(mp.order) if kind == "op"}
    loop_begin = {name: i for i, (kind, name) in enumerate(mp.order) if kind == "begin"}
    in_place = dict(mp.in_place)
    views: dict = {}

    def view_of(t):
        """The arena view ``t``'s kernel writes, or None (pinned, an alias, a scalar)."""
        b = mp.tensors.get(t.name)
        if b is None or b.pinned or b.producer is not t.op or b.shape == () \
                or np.dtype(t.dtype.as_numpy_dtype).kind not in "biuf":
            return None
        if id(b) not in views:
            dt = np.dtype(t.dtype.as_numpy_dtype)
            views[id(b)] = arena[b.offset:b.offset + b.nbytes].view(dt).reshape(b.shape)
        return views[id(b)]

    node_tuples, times, merges, copied = [], [], {}, []
    histories = _history_memos(run_plan.ops)
    reused: set = set()
    for gid, op in enumerate(run_plan.ops):
        node = run_plan.node_tuples[gid]
        role = op._op_def.role
        if role == R.ENTER:
            times.append(loop_begin.get(op.get_attr("frame_name"), 0))
        else:
            t = times_of.get(op.name)
            if t is None:
                raise errors.InternalError(
                    None, op, f"plan_memory: '{op.name}' runs but is not in the memory "
                    "plan's order")
            times.append(t)
        if role == R.MERGE:
            b = mp.tensors.get(op.outputs[0].name)
            if b is not None and b.pinned:
                if b.zone == "fetches":   # a fed Merge's value is dropped: no copy
                    merges[gid] = None
            elif b is not None:
                view = view_of(op.outputs[0])
                if view is not None:
                    merges[gid] = view
        fn = node[4]
        if role == R.NORMAL and fn is not None:
            fn, was_copied = _wrap(op, fn, kernels, mp, in_place, view_of, arena, checker,
                                   histories.get(op), reused)
            if was_copied:
                copied.append(f"{op.name} ({op.type})")
            node = node[:4] + (fn,) + node[5:]
        node_tuples.append(node)
    step = ArenaStep(mp, arena, node_tuples, times, loop_begin, merges, copied, checker,
                     _optimizer_variables(graph.get_operations()))
    gid_of = {op.name: gid for gid, op in enumerate(run_plan.ops)}
    for src, (reader, b) in mp.merge_saves.items():
        if src in gid_of and reader in gid_of:
            step.saves[gid_of[src]] = arena[b.offset:b.offset + b.nbytes]
            step.save_of[gid_of[reader]] = gid_of[src]
    step.reused = reused       # the set the kernels above check
    step.memos = list({id(h[0]): h[0] for h in histories.values()}.values())
    # value push gid -> (next push gid, its pair's hint): see _retaining
    gids = {id(op): gid for gid, op in enumerate(run_plan.ops)}
    partner = {}
    for op, (memo, role, hint) in histories.items():
        partner.setdefault(id(memo), {})[role] = (gids[id(op)], hint)
    step.history_pairs = {pair["value"][0]: pair["next"] for pair in partner.values()
                          if "value" in pair and "next" in pair}
    return step


def _optimizer_variables(ops) -> list:
    """Shared names of the variables that only an optimizer uses (Adam's slots and
    power accumulators): every op of the graph using the variable, but its own
    plumbing under its name scope (initializer, read), lies under an optimizer's scope
    (``Adam/...``, the scope of its ``update_<var>`` ops). The model's weights are read
    outside it."""
    scopes = {op.name.split("/")[0] for op in ops if "/update_" in op.name}
    out = []
    if not scopes:
        return out
    for op in ops:
        if op.type != "VarHandleOp":
            continue
        own = op.name + "/"
        users = [c for c in op.outputs[0].consumers() if not c.name.startswith(own)]
        if users and all(c.name.split("/")[0] in scopes for c in users):
            out.append(op.get_attr("shared_name"))
    return out


def _aligned_bytes(n) -> np.ndarray:
    """``n`` bytes starting on an ALIGNMENT boundary (a view of a slightly larger array,
    whose base every view of the arena shares)."""
    raw = np.empty(n + ALIGNMENT, np.uint8)
    skip = (-raw.ctypes.data) % ALIGNMENT
    return raw[skip:skip + n]


def _history_memos(ops) -> dict:
    """A shared memo per pair of stack pushes that hold one loop variable's history
    (the planner's ``_history_pairs``: one pushes the variable's value, the other its
    next value): push op -> (memo, role, hint), role "next" or "value" (see _retaining)."""
    pairs = _history_pairs([op for op in ops if op.type == "StackPush"])
    out = {}
    for first, second in pairs.items():
        if second is not None:
            memo, hint = {}, {}
            out[first], out[second] = (memo, "value", hint), (memo, "next", hint)
    return out


def _retaining(fn, retained, raw, history, reused):
    """``fn`` given private copies of its retained inputs that are views of the arena.

    A loop variable's history is pushed twice per value (as the next value, then as
    the variable's value in the next iteration, which the Merge copied into its own
    block): the second push takes the first push's copy when the bytes are the same,
    so the stacks hold ``n + 1`` values, as the unplanned run and the plan count.
    ``history`` is ``(memo, role, hint)``: the pair's shared memo, this push's role
    ("value" or "next"), and the pair's hint, where a runner that knows which copy the
    value push matches ("previous" or "next") puts it under ``"take"``."""
    if history is None:
        def keep(*args):
            args = list(args)
            for i in retained:
                if i < len(args):
                    a = args[i]
                    args[i] = a.copy() if id(a) in reused else _own(a, raw)
            return fn(*args)
        return keep
    memo, role, hint = history
    i = retained[0]

    def keep_history(*args):
        args = list(args)
        value = args[i]
        if type(value) is np.ndarray and (value.base is raw or id(value) in reused):
            if role == "next":
                args[i] = value.copy()
                memo["previous"], memo["next"] = memo.get("next"), args[i]
            else:   # the same value was pushed as the next one, this iteration or the last
                # A runner that proved which copy that is (``hint["take"]``, set by the
                # flat loop schedule) takes it unseen: comparing costs 9 µs per push of
                # the 32 x 256 RNN state.
                take = hint.get("take")
                if take is not None:
                    c = memo.get(take)
                    if c is not None and c.shape == value.shape and c.dtype == value.dtype:
                        args[i] = c
                        return fn(*args)
                args[i] = next((c for c in (memo.get("previous"), memo.get("next"))
                                if c is not None and c.shape == value.shape
                                and c.dtype == value.dtype and _same_values(c, value)),
                               None)
                if args[i] is None:
                    args[i] = value.copy()
        return fn(*args)
    return keep_history


# Elements compared at once by _same_values (its boolean temporary: 2 KiB).
_COMPARE_CHUNK = 2048


def _same_values(a, b) -> bool:
    """``np.array_equal(a, b)`` for two arrays of one shape and dtype, compared in
    slices of ``_COMPARE_CHUNK`` elements: the whole comparison makes a boolean array
    as large as the value, which the planned RNN step measured at its peak (32 B per
    batch row), outside the plan; a slice's is small and the same at every batch."""
    if not (a.flags.c_contiguous and b.flags.c_contiguous):
        return bool(np.array_equal(a, b))
    # Every element equal, as np.array_equal decides it once the shapes match, counted
    # with count_nonzero: array_equal's argument checks and ``.all()``'s generic
    # reduction cost 19 µs per push of the 32 x 256 RNN state (a slice of the planned
    # RNN step's extra time per iteration), this about 5 µs.
    x, y = a.reshape(-1), b.reshape(-1)
    count_nonzero = np.count_nonzero
    for i in range(0, x.size, _COMPARE_CHUNK):
        xs = x[i:i + _COMPARE_CHUNK]
        if count_nonzero(xs == y[i:i + _COMPARE_CHUNK]) != xs.size:
            return False
    return True


def _wrap(op, fn, kernels, mp, in_place, view_of, arena, checker, history, reused):
    """``(kernel, copies)``: ``fn`` made to write its planned outputs into the arena;
    ``copies`` when some output is computed then copied (no usable out= variant)."""
    raw = arena.base
    outs = [view_of(t) for t in op.outputs]
    retained = _RETAINS.get(op.type, ())
    fetched = tuple(k for k, t in enumerate(op.outputs)
                    if (b := mp.tensors.get(t.name)) is not None and b.pinned)
    planned = any(v is not None for v in outs)
    # A kernel of several outputs writes them through its variant only when every one
    # has a block (its variant takes them as a tuple).
    variant = kernels.out_kernel_for(op) \
        if planned and all(v is not None for v in outs) else None
    if variant is not None and not _variant_fits(op, variant[1], mp, in_place):
        variant = None
    if retained:
        fn = _retaining(fn, retained, raw, history, reused)
    if checker is not None:
        return _checked(op, fn, variant, outs, fetched, raw, checker), \
            planned and variant is None
    if not planned:
        if fetched:
            return _owning(fn, raw, fetched, len(op.outputs)), False
        return fn, False
    copying = _copying(fn, outs, raw, fetched)
    if variant is not None:
        out_fn, view = variant[0], outs[0] if len(outs) == 1 else tuple(outs)
        ndarray = np.ndarray

        def into_block(*args):
            # A kernel's result follows its inputs' layout: a non-C-contiguous input
            # takes the copying path, which keeps that layout.
            for a in args:
                if type(a) is ndarray and not a.flags.c_contiguous:
                    return copying(*args)
            out_fn(*args, view)
            return view
        return into_block, False
    return copying, True


def _variant_fits(op, alias_safe, mp, in_place) -> bool:
    """An out= variant may write the block unless the plan puts it over an input the
    variant cannot share memory with (one not alias-safe, or another shape)."""
    for t in op.outputs:
        donor_name = in_place.get(t.name)
        if donor_name is None:
            continue
        out, donor = mp.tensors[t.name], mp.tensors[donor_name]
        if not (alias_safe and donor.shape == out.shape and donor.dtype == out.dtype):
            return False
    return True


def _copying(fn, outs, raw, fetched):
    """``fn`` whose results are copied into their blocks (when they have the planned
    shape and dtype; otherwise the kernel's own result is kept)."""
    if len(outs) == 1:
        view = outs[0]
        shape, dtype = view.shape, view.dtype

        def copy_one(*args):
            r = fn(*args)
            if type(r) is np.ndarray and r.shape == shape and r.dtype == dtype:
                return _place(r, view, raw)
            return r
        return copy_one

    def copy_many(*args):
        rs = list(fn(*args))
        for k, view in enumerate(outs):
            r = rs[k]
            if view is not None and type(r) is np.ndarray and r.shape == view.shape \
                    and r.dtype == view.dtype:
                rs[k] = _place(r, view, raw)
            elif k in fetched:
                rs[k] = _own(r, raw)
        return tuple(rs)
    return copy_many


def _owning(fn, raw, fetched, nout):
    """``fn`` whose fetched results are never views of the arena."""
    if nout == 1:
        return lambda *args: _own(fn(*args), raw)

    def own_many(*args):
        rs = list(fn(*args))
        for k in fetched:
            rs[k] = _own(rs[k], raw)
        return tuple(rs)
    return own_many


# -- the checker ---------------------------------------------------------------------------
class ArenaChecker:
    """Records, during a run, which value last wrote each 64-byte granule of the arena,
    and fails a read of a value some of whose granules another value wrote since:
    two values live at once in overlapping memory.

    Values are recognised by identity: the arrays a kernel writes (its block's view) and
    those derived from them by aliasing ops (reshape, identity) are registered with the
    version of their write.

    >>> arena = np.zeros(256, np.uint8)
    >>> c = ArenaChecker(arena)
    >>> a = arena[:128].view(np.float32); c.wrote(a, "a")
    >>> b = arena[64:192].view(np.float32); c.wrote(b, "b")
    >>> c.read(a, "c")
    Traceback (most recent call last):
    AssertionError: c read 'a' (written at event 1) after 'b' (event 2) overwrote its bytes
    """

    def __init__(self, arena):
        self.arena = arena
        self.start = arena.ctypes.data
        self.owner = np.zeros(-(-arena.nbytes // ALIGNMENT) + 1, np.int64)
        self.values: dict = {}     # id(array) -> (version, first granule, end granule, label)
        self.labels = {0: "nothing"}
        self.keep = []             # the registered arrays (their ids stay unique)
        self.version = 0
        self.reads = 0
        self.writes = 0

    def _span(self, a):
        lo = (a.ctypes.data - self.start) // ALIGNMENT
        hi = -(-(a.ctypes.data - self.start + a.nbytes) // ALIGNMENT)
        return lo, max(hi, lo + 1)

    def wrote(self, a, label):
        self.version += 1
        self.writes += 1
        lo, hi = self._span(a)
        self.owner[lo:hi] = self.version
        self.values[id(a)] = (self.version, lo, hi, label)
        self.labels[self.version] = label
        self.keep.append(a)

    def alias(self, result, source):
        """``result`` is the same value as ``source`` (a view made by an aliasing op)."""
        rec = self.values.get(id(source))
        if rec is not None and type(result) is np.ndarray and result is not source:
            self.values[id(result)] = rec
            self.keep.append(result)

    def read(self, a, where):
        rec = self.values.get(id(a))
        if rec is None:
            return
        self.reads += 1
        version, lo, hi, label = rec
        span = self.owner[lo:hi]
        if (span != version).any():
            other = int(span[span != version][0])
            raise AssertionError(f"{where} read {label!r} (written at event {version}) after "
                                 f"{self.labels[other]!r} (event {other}) overwrote its bytes")


def _checked(op, fn, variant, outs, fetched, raw, checker):
    """The kernel of ``op`` for a checked run: it reports its reads and writes."""
    label = op.name
    plain = _copying(fn, outs, raw, fetched) if any(v is not None for v in outs) else fn

    def kernel(*args):
        for a in args:
            checker.read(a, f"op '{label}'")
        if variant is not None and all(type(a) is not np.ndarray or a.flags.c_contiguous
                                       for a in args):
            result = outs[0] if len(outs) == 1 else tuple(outs)
            variant[0](*args, result)
        else:
            result = plain(*args)
        results = result if len(outs) > 1 and isinstance(result, tuple) else (result,)
        for k, r in enumerate(results):
            if k < len(outs) and outs[k] is not None and type(r) is np.ndarray \
                    and np.shares_memory(r, outs[k]):
                checker.wrote(r, f"{op.outputs[k].name}")
            elif type(r) is np.ndarray and r.base is raw:
                for a in args:     # an aliasing op's view of its input
                    if type(a) is np.ndarray and a.base is raw and np.shares_memory(a, r):
                        checker.alias(r, a)
                        break
        if fetched and len(outs) == 1:
            result = _own(result, raw)
        return result
    return kernel
