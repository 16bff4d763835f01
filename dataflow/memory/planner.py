"""Owl's best-fit memory planner, extended to cond and while loops.

:func:`plan` reads one step (the ops a ``Session.run`` of some fetches needs), infers
every value's size, fixes an evaluation order (:mod:`.regions`) and assigns each
value a block of one arena by Owl's algorithm (Vandenhove 2018, Algorithm 1):

* walking the order, an op's output gets, in this order of preference, the block of
  an input that dies at this op when the op is elementwise (``OpDef.in_place``);
  the smallest free block that fits; the largest free block, grown to fit; a new
  block. A value's block is freed after its last use (reference counts).
* Blocks are laid out one after another at the end, so a block's final size is the
  largest value it ever held; ``peak_bytes`` counts the arena plus the *pinned*
  values (variables and optimizer slots, constants, feeds, fetches), which never
  share, plus the stacks that carry forward values to a gradient loop, plus the
  most bytes kernels allocate outside the arena at once (``scratch_bytes``, declared
  per op type with :func:`register_workspace`: an optimizer's new variable values).
* Reshape-like ops (:func:`register_view_op`) get no block: their output is a view of
  their input's.
* The runtime's own host objects during the step (``runtime_bytes``): the value list
  of its schedule, the executor's frame and iteration state, a kernel call's Python
  temporaries, the array object of every stack element. Calibrated with tracemalloc
  on CPython 3.11 (the ``RUNTIME_*`` constants below) and counted in the peak, so a
  batch :func:`~dataflow.memory.max_batch_size` returns runs under its budget as
  measured, not only as the arrays add up.

Control flow: a cond's branches follow each other in the order and a branch's
values die within it (its result is written into the Merge's block, reserved when
the cond starts), so the second branch reuses the first's blocks: the cond costs
the larger branch. A while loop's body is planned once; its loop variables have
their own blocks for the whole loop, a value made in an iteration and needed by the
next lives to the iteration's end, and a value from outside read in the body lives
to the loop's end, so the same blocks serve every iteration. Stack pushes grow with
the trip count: the stacks' bytes are ``elem_bytes * product of the enclosing
loops' trip counts``, which :meth:`MemoryPlan.peak_bytes_for` evaluates.

>>> import dataflow as df
>>> g = df.Graph()
>>> with g.as_default():
...     x = df.placeholder(df.float32, [1000], name="x")
...     y = df.exp(df.tanh(df.sin(x * 2.0)))
>>> p = plan(y, feed_shapes={x: [1000]}, graph=g)
>>> len({b.block for b in p.buffers if not b.pinned})   # the chain needs one block
1
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field

import numpy as np

from .. import dtypes as _dtypes
from .. import errors
from ..framework import op_registry as R
from ..framework.convert import convert_to_tensor
from ..framework.graph import Operation, Tensor, get_default_graph
from ..framework.graph_analysis import infer_frames, prune
from ..framework.tensor_shape import as_shape
from . import regions as RG
from .shapes import infer_step_shapes, stack_of

__all__ = ["ALIGNMENT", "Buffer", "MemoryPlan", "RUNTIME_FLAT_LOOP_BYTES", "RUNTIME_INPUT_BYTES",
           "RUNTIME_LOOP_BYTES", "RUNTIME_LOOP_NODE_BYTES", "RUNTIME_LOOP_NODE_INPUT_BYTES",
           "RUNTIME_NODE_BYTES", "RUNTIME_NODE_INPUT_BYTES", "RUNTIME_SEQUENTIAL_LOOP_BYTES",
           "RUNTIME_STACK_ELEM_BYTES", "RUNTIME_STEP_BYTES", "StackUse", "plan",
           "register_view_op", "register_workspace"]

# Every block starts on a 64-byte boundary (a cache line; what NumPy's allocator gives).
ALIGNMENT = 64
PINNED_ZONES = ("variables", "constants", "feeds", "fetches")
ARENA_ZONES = ("forward", "gradient", "optimizer", "workspace")
_GRADIENT_SCOPE = re.compile(r"^gradients(_\d+)?$")
# Ops that change a variable in place: the scope they sit in is an optimizer's.
_UPDATE_TYPES = re.compile(r"^(Resource)?Apply|^Assign(Add|Sub)?VariableOp$")
# Ops whose kernel returns a view of input 0 (its bytes under another shape): their
# output is planned as that input's memory, not a block of its own.
_VIEW_OPS: set = set()

# The runtime's own bytes per step (see the module docstring), measured with tracemalloc
# over planned steps built to vary one count at a time (chains of 1-, 2- and 4-input ops,
# alone and after a cond; loops in sequence and nested 1-3 deep, bodies of 2 and 66 ops):
# * per step, what any step allocates besides its values: the Session's per-run objects
#   and the Python objects of the kernel call running at the peak (argument tuples,
#   NumPy views and scalars): 2.4-3 KiB on flat steps, up to 4.5 KiB with a Numba kernel's
#   call objects (softmax cross-entropy), 4.4 KiB on the executor;
# * a step without control flow runs as a flat schedule: its value list, one register
#   per op input at most (measured 2-8 B per input);
# * a step with control flow runs on the executor: its iteration state per node (pending
#   count, ready-list entry) and per input slot, measured 24 B per node + 16 B per input
#   in the root frame and about 56 B per one-input node in a loop body (the next
#   iteration's state is made while the current one lives), counted as 32 + 24;
# * per loop on the deepest nest of loops, its frame (1.4 KiB measured per level); a loop
#   that ran and exited before another starts leaves about 250 B;
# * per stack element, the array object and list slot that hold its data (250 B per
#   element measured over 3-30 pushes, 155 B over 30-100).
# Upper bounds on every calibration step (the tests check them on others).
RUNTIME_STEP_BYTES = 5 << 10
RUNTIME_INPUT_BYTES = 8
RUNTIME_NODE_BYTES = 24
RUNTIME_NODE_INPUT_BYTES = 16
RUNTIME_LOOP_NODE_BYTES = 32
RUNTIME_LOOP_NODE_INPUT_BYTES = 24
RUNTIME_LOOP_BYTES = 1536
RUNTIME_SEQUENTIAL_LOOP_BYTES = 256
# A loop run by a flat loop schedule (dataflow.runtime.loop_schedule: a step whose
# Switches and Merges are all its loops' own) keeps no frame, iteration or per-node
# executor state: its registers are in the value list (RUNTIME_INPUT_BYTES per input).
RUNTIME_FLAT_LOOP_BYTES = 0
RUNTIME_STACK_ELEM_BYTES = 256


def register_view_op(op_type: str) -> None:
    """Declare that ``op_type``'s kernel returns a view of its input 0 (a reshape): the
    planner gives its output no block, only a longer life to the input's, and a
    planned run does not copy it.

    >>> register_view_op("Reshape")
    >>> "Reshape" in _VIEW_OPS
    True
    """
    _VIEW_OPS.add(op_type)


for _type in ("Reshape", "ExpandDims", "Squeeze"):
    register_view_op(_type)

# op type -> fn(op, variable_bytes) -> bytes its kernel allocates outside the arena
# while it runs; ``variable_bytes`` lists the sizes of the variables behind the op's
# resource inputs.
_WORKSPACE: dict = {}


def register_workspace(op_type: str, fn) -> None:
    """Declare the bytes ``op_type``'s kernel allocates beyond its planned outputs:
    ``fn(op, variable_bytes)``, ``variable_bytes`` the sizes of the variables behind
    the op's resource inputs, in input order. A variable update makes each variable's
    new value while the old one lives (the runtime replaces values, readers keep
    references to old ones): the plan counts those bytes at the op, and an updated
    variable's old value until the last read of it made before the update is used.

    >>> register_workspace("ResourceApplyAdam", lambda op, var_bytes: sum(var_bytes[:3]))
    >>> sorted(_WORKSPACE)[:2]
    ['AssignAddVariableOp', 'AssignSubVariableOp']
    """
    _WORKSPACE[op_type] = fn


# An update's new values: Adam's variable and both moments; an assignment's variable.
register_workspace("ResourceApplyAdam", lambda op, var_bytes: sum(var_bytes[:3]))
for _type in ("AssignVariableOp", "AssignAddVariableOp", "AssignSubVariableOp"):
    register_workspace(_type, lambda op, var_bytes: sum(var_bytes[:1]))


@dataclass(eq=False)
class Buffer:
    """One value that needs memory: ``size`` bytes (aligned) at ``offset`` of the
    arena (pinned values are laid out after it), live from event ``first_use`` to
    ``last_use`` of :attr:`MemoryPlan.order`."""

    name: str
    dtype: object
    shape: tuple
    nbytes: int
    size: int
    zone: str
    frame: str
    pinned: bool = False
    first_use: int = 0
    last_use: int = 0
    offset: int = -1
    block: int = -1
    producer: object = None

    def __repr__(self):
        return (f"Buffer({self.name!r}, {self.size} B @ {self.offset}, zone={self.zone}, "
                f"live {self.first_use}..{self.last_use})")


@dataclass
class StackUse:
    """A stack's pushes: ``elem_bytes`` per push, once per iteration of each loop in
    ``loops`` (outermost first); ``host`` when pushed with ``swap_memory=True``.

    ``history`` marks two stacks merged into one: one pushes a loop variable's value
    and the other its next value, so together they hold the variable's ``n + 1``
    successive values of an ``n``-iteration loop (the runtime pushes the same arrays,
    by reference), not ``2 n``.

    ``branch`` is ``(cond, branch)`` (region names) for a push inside one branch of a
    cond in the body of its innermost loop: each iteration runs one branch of that
    cond, so its branches' stacks count as the larger branch's
    (:meth:`MemoryPlan.stack_bytes_for`), not as their sum.
    """

    name: str
    elem_bytes: int
    loops: tuple
    host: bool = False
    history: bool = False
    branch: tuple | None = None

    def bytes_for(self, trip_counts) -> int:
        n = 1
        for i, loop in enumerate(self.loops):
            k = int(trip_counts[loop])
            if self.history and i == len(self.loops) - 1 and k > 0:
                k += 1
            n *= k
        return self.elem_bytes * n

    def elements_for(self, trip_counts) -> int:
        """How many values the stack holds (``bytes_for`` / ``elem_bytes``)."""
        return self.bytes_for(trip_counts) // self.elem_bytes if self.elem_bytes else 0


@dataclass(eq=False)
class MemoryPlan:
    """The memory of one step, decided before it runs (see :func:`plan`).

    >>> import dataflow as df
    >>> g = df.Graph()
    >>> with g.as_default():
    ...     x = df.placeholder(df.float32, [8], name="x")
    ...     _, h = df.while_loop(lambda i, h: i < 10, lambda i, h: (i + 1, df.sin(h)),
    ...                          (0, x), name="loop")
    ...     (dx,) = df.gradients(df.reduce_sum(h), [x])
    >>> p = plan(dx, feed_shapes={x: [8]}, graph=g)
    >>> p.trip_counts["loop/while_context"], len(p.stacks)
    (10, 1)
    >>> extra = p.stacks[0].elem_bytes + RUNTIME_STACK_ELEM_BYTES   # its data, its array object
    >>> p.peak_bytes_for({"loop": 20}) - p.peak_bytes == 10 * extra
    True
    >>> print(p.summary(top=1).splitlines()[0])  # doctest: +ELLIPSIS
    peak ... = arena ... + pinned ... + stacks ...
    """

    buffers: list
    order: list
    arena_bytes: int
    pinned_bytes: int
    stacks: list
    trip_counts: dict
    in_place: list
    lower_bound_arena: int
    naive_arena: int
    arena_zones: dict
    blocks: list = field(default_factory=list)
    tensors: dict = field(default_factory=dict)   # tensor name -> its Buffer (aliases too)
    # The most bytes kernels allocate outside the arena at once (register_workspace:
    # an optimizer's new values); counted in the peak and in the workspace zone.
    scratch_bytes: int = 0
    scratch: dict = field(default_factory=dict)   # op name -> bytes its kernel allocates
    lower_bound_live: int = 0   # most arena-live + scratch bytes at one event
    # The runtime's own host bytes of a step but its stacks' element objects (see
    # RUNTIME_STEP_BYTES): runtime_bytes_for adds those.
    runtime_step_bytes: int = 0
    # Loop variables' Merges in a cycle of copies (a swap or rotation through
    # identities): {Merge name: (name of the Merge reading its previous value, the
    # save Buffer)}. The runtime copies the Merge's previous value into the save block
    # before the Merge overwrites it, and the reader takes it from there.
    merge_saves: dict = field(default_factory=dict)

    # -- figures ---------------------------------------------------------------------
    def stack_bytes_for(self, trip_counts=None, host=False) -> int:
        """Bytes the stacks hold at the end of the forward loops: a cond's branches in
        a loop body count as the larger branch (one of them runs per iteration)."""
        tc = self._counts(trip_counts)
        total = 0
        branches: dict = {}      # cond -> {branch: bytes}
        for s in self.stacks:
            if s.host != host:
                continue
            if s.branch is None:
                total += s.bytes_for(tc)
            else:
                per = branches.setdefault(s.branch[0], {})
                per[s.branch[1]] = per.get(s.branch[1], 0) + s.bytes_for(tc)
        return total + sum(max(per.values()) for per in branches.values())

    def peak_bytes_for(self, trip_counts=None) -> int:
        """The peak for other trip counts (``{loop name: n}``; loops not named keep
        the plan's counts), without replanning: the arena and the pinned values do
        not depend on trip counts, the stacks grow linearly in each."""
        return self.arena_bytes + self.scratch_bytes + self.pinned_bytes \
            + self.stack_bytes_for(trip_counts) + self.runtime_bytes_for(trip_counts)

    def runtime_bytes_for(self, trip_counts=None) -> int:
        """The runtime's own host bytes during the step (``RUNTIME_*`` constants):
        ``runtime_step_bytes`` plus an array object per stack element (every stack,
        device and host, each cond branch's counted)."""
        tc = self._counts(trip_counts) if self.stacks else {}
        return self.runtime_step_bytes + RUNTIME_STACK_ELEM_BYTES * sum(
            s.elements_for(tc) for s in self.stacks)

    @property
    def runtime_bytes(self) -> int:
        """:meth:`runtime_bytes_for` the plan's trip counts."""
        return self.runtime_bytes_for()

    @property
    def peak_bytes(self) -> int:
        """Bytes of the step: arena + kernels' scratch outside it (the arena is held
        whole for the step) + pinned values + device-side stacks + the runtime's own
        (``runtime_bytes``)."""
        return self.peak_bytes_for()

    @property
    def host_stack_bytes(self) -> int:
        """Bytes of the stacks pushed with ``swap_memory=True`` (kept on the host)."""
        return self.stack_bytes_for(host=True)

    @property
    def lower_bound_bytes(self) -> int:
        """The most bytes simultaneously live under this order and these lifetimes
        (no allocator can do better), with the same pinned values and stacks."""
        return max(self.lower_bound_arena, self.lower_bound_live) + self.pinned_bytes \
            + self.stack_bytes_for() + self.runtime_bytes

    @property
    def naive_bytes(self) -> int:
        """Every value in a block of its own (no reuse; a loop body's values once)."""
        return self.naive_arena + self.scratch_bytes + self.pinned_bytes \
            + self.stack_bytes_for() + self.runtime_bytes

    @property
    def zones(self) -> dict:
        """CalcGraph's zones in bytes: ``forward`` / ``gradient`` / ``optimizer`` /
        ``workspace`` (shape arithmetic in the arena, and kernels' scratch outside it)
        are each zone's most simultaneously live bytes; ``variables`` (with optimizer slots), ``constants``,
        ``feeds``, ``fetches`` are pinned; ``stacks`` / ``host_stacks`` the pushes."""
        out = dict(self.arena_zones)
        for z in PINNED_ZONES:
            out[z] = sum(b.size for b in self.buffers if b.pinned and b.zone == z)
        out["stacks"] = self.stack_bytes_for()
        out["host_stacks"] = self.host_stack_bytes
        return out

    def _counts(self, trip_counts) -> dict:
        tc = dict(self.trip_counts)
        for k, v in (trip_counts or {}).items():
            tc[_loop_key(k, tc)] = int(v)
        missing = sorted({loop for s in self.stacks for loop in s.loops if tc[loop] is None})
        if missing:
            raise errors.InvalidArgumentError(
                None, None, f"no trip count for while loop(s) {missing}")
        return tc

    # -- checks and views ------------------------------------------------------------
    def overlaps(self) -> list:
        """Pairs of arena buffers live at once whose bytes overlap (empty when the
        plan is sound); an in-place pair (input dying where its output is made) is not
        counted."""
        inplace = {(a, b) for a, b in self.in_place}
        arena = sorted((b for b in self.buffers if not b.pinned), key=lambda b: b.first_use)
        bad = []
        for i, a in enumerate(arena):
            for b in arena[i + 1:]:
                if b.first_use > a.last_use:
                    break
                if (b.name, a.name) in inplace and b.first_use == a.last_use:
                    continue
                if a.offset < b.offset + b.size and b.offset < a.offset + a.size:
                    bad.append((a, b))
        return bad

    def summary(self, top=10) -> str:
        from .draw import summary
        return summary(self, top)

    def to_svg(self, path, width=960):
        """Draw the arena as offset x time blocks coloured by zone (Owl's figure 5)."""
        from .draw import to_svg
        return to_svg(self, path, width)

    def __repr__(self):
        return (f"<MemoryPlan peak={self.peak_bytes} B arena={self.arena_bytes} B "
                f"pinned={self.pinned_bytes} B buffers={len(self.buffers)}>")


def _loop_key(key, known) -> str:
    """A loop named by its frame (``"while/while_context"``) or its name scope
    (``"while"``)."""
    if key in known:
        return key
    for name in known:
        if name.rsplit("/", 1)[0] == key:
            return name
    raise KeyError(f"no while loop named {key!r} in this step (loops: {sorted(known)})")


# -----------------------------------------------------------------------------------
def plan(fetches, feed_dict=None, feed_shapes=None, graph=None, trip_counts=None,
         config=None) -> MemoryPlan:
    """Plan the memory of one ``Session.run(fetches, feed_dict)`` before running it.

    Sizes come from ``feed_shapes`` (``{placeholder: shape}``) and the shapes of the
    values in ``feed_dict``; a value whose shape is still unknown is an
    InvalidArgumentError naming its op and what to feed. ``trip_counts`` gives
    ``{loop name: n}`` for loops whose stacks grow with their count (otherwise
    ``maximum_iterations`` or a constant bound ``i < N`` is used; a loop with none is
    an error naming it). ``config`` is accepted for symmetry with Session and unused
    (CPU arenas).

    >>> import dataflow as df
    >>> g = df.Graph()
    >>> with g.as_default():
    ...     x = df.placeholder(df.float32, [None, 4], name="x")
    ...     y = df.reduce_sum(df.tanh(x) * 3.0)
    >>> p = plan(y, feed_shapes={x: [256, 4]}, graph=g)
    >>> p.peak_bytes >= p.lower_bound_bytes >= 256 * 4 * 4
    True
    """
    del config
    graph = graph or get_default_graph()
    fetch_tensors, targets = _flatten_fetches(fetches, graph)
    feed_values = {_as_tensor(k, graph): v for k, v in (feed_dict or {}).items()}
    feed_shp = {_as_tensor(k, graph): as_shape(v) for k, v in (feed_shapes or {}).items()}
    fed = set(feed_values) | set(feed_shp)
    ops = prune(fetch_tensors, targets, fed)
    frame_of, frames = infer_frames(ops, fed)
    shapes = infer_step_shapes(ops, feed_shp, feed_values)
    return _Planner(ops, frame_of, frames, shapes, fed, fetch_tensors, targets,
                    trip_counts or {}).run()


def _as_tensor(x, graph) -> Tensor:
    if isinstance(x, Tensor):
        return x
    if isinstance(x, str):
        return graph.get_tensor_by_name(x)
    return convert_to_tensor(x)


def _flatten_fetches(fetches, graph):
    tensors, targets = [], []
    stack = [fetches]
    while stack:
        f = stack.pop(0)
        if isinstance(f, (list, tuple)):
            stack[:0] = list(f)
        elif isinstance(f, dict):
            stack[:0] = list(f.values())
        elif isinstance(f, Operation):
            targets.append(f)
        elif isinstance(f, str) and ":" not in f:
            targets.append(graph.get_operation_by_name(f))
        else:
            tensors.append(_as_tensor(f, graph))
    return tensors, targets


def _align(n: int) -> int:
    return -(-n // ALIGNMENT) * ALIGNMENT


class _Planner:
    def __init__(self, ops, frame_of, frames, shapes, fed, fetches, targets, trip_counts):
        self.ops = ops
        self.needed = set(ops)
        self.frame_of = frame_of
        self.frames = frames
        self.shapes = shapes
        self.fed = fed
        self.fetches = fetches
        self.targets = targets
        self.user_counts = trip_counts
        self.buffer_of: dict = {}     # tensor -> Buffer (aliases share one)
        self.buffers: list = []

    def run(self) -> MemoryPlan:
        root, self.region_of, self.contexts = RG.build_regions(
            self.ops, self.frame_of, self.frames)
        sinks = [t.op for t in self.fetches if t not in self.fed] + list(self.targets)
        self.events = RG.evaluation_order(root, self.region_of, self.needed, self.fed, sinks,
                                          self._forwarded)
        self.time = {ev[1]: i for i, ev in enumerate(self.events) if ev[0] == "op"}
        self._check_order()
        self._make_buffers()
        saves = self._merge_saves()
        self._lifetimes()
        blocks, in_place = self._allocate()
        arena = self._layout(blocks)
        stacks = self._stacks()
        counts = self._trip_counts(stacks)
        scratch, per_op = self._scratch()
        lower, zones, lower_live = self._live_peaks(in_place, scratch)
        scratch_peak = int(scratch.max(initial=0))
        naive = sum(b.size for b in self.buffers if not b.pinned)
        order = [(kind, x.name) for kind, x in self.events]
        plan = MemoryPlan(self.buffers, order, arena, sum(b.size for b in self.buffers
                                                          if b.pinned),
                          stacks, counts, [(o.name, i.name) for o, i in in_place],
                          lower, naive, zones, blocks,
                          {t.name: b for t, b in self.buffer_of.items()},
                          scratch_peak, per_op, lower_live)
        plan.runtime_step_bytes = self._runtime_step_bytes()
        plan.merge_saves = {src.name: (reader.name, b) for src, (reader, b, _r) in saves.items()}
        return plan

    def _runtime_step_bytes(self) -> int:
        """The runtime's bytes of a step but its stacks (RUNTIME_* constants): a step
        without control flow, or whose only control flow is loops a flat loop schedule
        runs, is a list of kernel calls (a register per op input at most); any other
        runs on the executor (its state per node and input slot, more in loop bodies,
        and the frames of the deepest nest of loops)."""
        ops = list(self.time)
        no_control_flow = all(op._op_def.role in (R.NORMAL, R.CONTROL_TRIGGER)
                              for op in ops) and len(self.frames) == 1
        if no_control_flow or self._loops_run_flat():
            inputs = sum(len(op._inputs) for op in ops)
            loops = sum(1 for name in self.frames if name)
            return (RUNTIME_STEP_BYTES + RUNTIME_INPUT_BYTES * inputs
                    + RUNTIME_FLAT_LOOP_BYTES * loops)
        total = RUNTIME_STEP_BYTES
        for op in ops:
            frame = self.frame_of.get(op)
            if frame is not None and frame.name:
                total += RUNTIME_LOOP_NODE_BYTES + RUNTIME_LOOP_NODE_INPUT_BYTES * len(op._inputs)
            else:
                total += RUNTIME_NODE_BYTES + RUNTIME_NODE_INPUT_BYTES * len(op._inputs)
        loops = [f for name, f in self.frames.items() if name]
        depth = max((_nesting(f) for f in loops), default=0)
        return total + RUNTIME_LOOP_BYTES * depth \
            + RUNTIME_SEQUENTIAL_LOOP_BYTES * (len(loops) - depth)

    def _loops_run_flat(self) -> bool:
        """Whether the runtime runs this step's loops by a flat loop schedule: every
        Switch is a loop's (its predicate a LoopCond) and every Merge a loop variable's
        (an Enter and a NextIteration in). Others run on the executor."""
        for op in self.time:
            if op.type in ("Switch", "RefSwitch") and op.inputs[1].op.type != "LoopCond":
                return False
            if op.type in ("Merge", "RefMerge") and sorted(
                    i.op.type for i in op.inputs) != ["Enter", "NextIteration"]:
                return False
            if op.type in ("_Send", "_Recv", "Send", "Recv"):
                return False
        return True

    def _check_order(self) -> None:
        """Every op comes after what it reads (but the back edges): a region structure
        this planner does not understand fails here, not in a wrong plan."""
        for op, t in self.time.items():
            for x in op._inputs:
                if x in self.fed or x.op not in self.time:
                    continue
                if op._op_def.role == R.MERGE and x.op._op_def.role == R.NEXT_ITERATION:
                    continue
                if self.time[x.op] >= t:
                    raise errors.InternalError(
                        None, op, f"memory plan: the evaluation order puts '{op.name}' "
                        f"before its input '{x.op.name}' (unsupported control-flow nesting)")

    # -- values ----------------------------------------------------------------------
    def _make_buffers(self) -> None:
        for t in self.fed:
            self._new_buffer(t, "feeds", pinned=True)
        for op in self.ops:  # every variable the step touches (optimizer slots too)
            if op.type == "VarHandleOp":
                self._variable(op._outputs[0])
        for op in self._ops_in_order():
            for t in op._outputs:
                if t in self.fed:
                    continue
                alias = self._alias_source(op, t)
                if alias is not None and op.type in _VIEW_OPS \
                        and not self.shapes.shape_of(t).is_fully_defined():
                    # a view has no block, but an unknown size is named where it starts
                    raise self._unknown_shape(t, self.shapes.shape_of(t))
                if alias is not None:
                    if alias in self.buffer_of:
                        self.buffer_of[t] = self.buffer_of[alias]
                    continue
                if t.dtype in (_dtypes.resource,) or op.type == "StackPop":
                    continue  # a handle, or a view of a stack's storage
                self._new_buffer(t, *self._zone(op, t))
        for t in self.fetches:
            b = self.buffer_of.get(t)
            if b is not None and not b.pinned:
                b.pinned, b.zone = True, "fetches"
            elif b is not None and b.zone in ("constants", "variables") and b.shape:
                self._fetched_copy(t, b)

    def _fetched_copy(self, t, storage) -> None:
        """A fetch that is read-only storage (a constant or a variable's value, or an
        identity of one) is handed out as a copy (``feeds.fetched_value``): the step
        makes that copy, so it counts in the fetches zone. It has no tensor of its own:
        the planned run still reads the storage."""
        self.buffers.append(Buffer(f"{t.name} (fetched copy)", storage.dtype, storage.shape,
                                   storage.nbytes, storage.size, "fetches", storage.frame,
                                   True, producer=t.op))

    def _ops_in_order(self):
        return [ev[1] for ev in self.events if ev[0] == "op"]

    @staticmethod
    def _forwarded(op):
        """The input tensor whose memory ``op``'s output is when its kernel forwards or
        views it (the evaluation order's test for Merges carrying another's value)."""
        d = op._op_def
        if op._inputs and (d.forwards_input or op.type in _VIEW_OPS or d.role in (
                R.SWITCH, R.ENTER, R.EXIT, R.NEXT_ITERATION)):
            return op._inputs[0]
        return None

    def _alias_source(self, op, t):
        """The tensor whose memory ``t`` is (None when ``t`` needs its own)."""
        d = op._op_def
        if d.forwards_input or d.role in (R.SWITCH, R.ENTER, R.EXIT, R.NEXT_ITERATION):
            return op._inputs[0]
        if op.type == "StackPush":
            return op._inputs[1]
        if op.type in _VIEW_OPS:
            return op._inputs[0]
        if op.type in ("ReadVariableOp",) or _UPDATE_TYPES.match(op.type):
            return self._variable(op._inputs[0])
        return None

    def _variable(self, handle):
        """The (pinned) storage of the variable behind ``handle``."""
        var = stack_of(handle)  # through Enters and identities to the VarHandleOp
        key = var._outputs[0]
        if key not in self.buffer_of:
            dtype, shape = var.get_attr("dtype"), var.get_attr("shape")
            self._new_buffer(key, "variables", pinned=True, dtype=dtype, shape=shape)
        return key

    def _new_buffer(self, t, zone, pinned=False, dtype=None, shape=None) -> None:
        dtype = dtype or t.dtype
        shape = as_shape(shape) if shape is not None else self.shapes.shape_of(t)
        if not shape.is_fully_defined():
            raise self._unknown_shape(t, shape)
        n = shape.num_elements() * _itemsize(dtype)
        frame = self.frame_of.get(t.op)
        b = Buffer(t.name, dtype, tuple(shape.as_list()), n, _align(n), zone,
                   frame.name if frame is not None else "", pinned, producer=t.op)
        self.buffer_of[t] = b
        self.buffers.append(b)

    def _unknown_shape(self, t, shape):
        """The error for a value whose size static inference could not find: it names
        the op and the placeholders whose shapes (or, for sizes computed from data,
        whose integer values) would settle it."""
        ups = _placeholders_upstream(t.op, self.fed, self.needed)
        need = sorted({p.name for p in ups
                       if not self.shapes.shape_of(p._outputs[0]).is_fully_defined()})
        ints = sorted({p.name for p in ups if p._outputs[0].dtype.is_integer
                       and p._outputs[0] not in self.shapes.values})
        if need:
            what = f"give its inputs' shapes: feed_shapes={{{', '.join(need)}: [...]}}"
        elif ints:
            what = (f"its size is computed from values: give feed_dict values for "
                    f"{', '.join(ints)}")
        else:
            what = f"its size depends on data: feed '{t.name}' or a value it is computed from"
        return errors.InvalidArgumentError(
            None, t.op, f"memory plan: the shape of '{t.name}' ({t.op.type}) is {shape} "
            f"after static inference; {what}")

    def _zone(self, op, t):
        if op.type == "Const":
            return ("constants", True)
        if op.type == "Placeholder":
            raise errors.InvalidArgumentError(
                None, op, f"memory plan: placeholder '{op.name}' is needed but not fed; "
                f"give feed_shapes={{{op.name}: [...]}} or a feed_dict value")
        if t in self.shapes.values:
            return ("workspace", False)
        scopes = op.name.split("/")[:-1]
        if any(_GRADIENT_SCOPE.match(s) for s in scopes):
            return ("gradient", False)
        if scopes and scopes[0] in self._optimizer_scopes():
            return ("optimizer", False)
        return ("forward", False)

    def _optimizer_scopes(self) -> set:
        """The top name scopes holding variable updates (``Adam/update_w/...``): an
        optimizer's ``apply_gradients`` builds all its ops under its name."""
        if not hasattr(self, "_opt_scopes"):
            self._opt_scopes = {op.name.split("/")[0] for op in self.ops
                                if _UPDATE_TYPES.match(op.type) and "/update_" in op.name}
        return self._opt_scopes

    def _merge_saves(self) -> dict:
        """``{source Merge: (reader Merge, save Buffer, loop region)}``: a loop
        variable's Merge copies the value its NextIteration carries into its own block;
        when that value is another Merge's (``regions.carried_merges``) placed before it
        in the order, the source has overwritten it already (a cycle: two variables
        swapped, three rotated). The source's previous value goes to a save block of
        its size, live for the whole loop, which the reader copies instead."""
        self._saves = out = {}
        loops = {id(r): r for r in self.region_of.values() if r.kind == RG.LOOP}
        for region in loops.values():
            for reader, src in RG.carried_merges(region, self._forwarded).items():
                if reader not in self.time or src not in self.time \
                        or self.time[src] > self.time[reader]:
                    continue
                own = self.buffer_of.get(src._outputs[0])
                if own is None:
                    continue   # a handle: nothing is copied
                b = Buffer(f"{src.name}/merge_save", own.dtype, own.shape, own.nbytes,
                           own.size, own.zone if not own.pinned else "forward", own.frame,
                           producer=src)
                self.buffers.append(b)
                out[src] = (reader, b, region)
        return out

    # -- lifetimes ---------------------------------------------------------------------
    def _lifetimes(self) -> None:
        """first_use / last_use of every buffer, in event times."""
        for b in self.buffers:
            b.first_use, b.last_use = None, None
        for t, b in self.buffer_of.items():
            if b.pinned or t.op not in self.time:
                continue
            if t.op._op_def.role == R.MERGE:
                start = self._merge_start(t.op)
            else:
                start = self.time[t.op]
            if b.first_use is None or start < b.first_use:
                b.first_use = start
        for op in self._ops_in_order():
            for t in op._inputs:
                b = self.buffer_of.get(t)
                if b is None or b.pinned:
                    continue
                end = self._use_time(op, t, b)
                b.last_use = end if b.last_use is None else max(b.last_use, end)
        for merge in self.ops:  # a loop variable's block is its own for the whole loop
            region = self.region_of[merge]
            b = self.buffer_of.get(merge._outputs[0]) if merge._outputs else None
            if (merge._op_def.role == R.MERGE and region.kind == RG.LOOP and b is not None
                    and any(t.op._op_def.role == R.NEXT_ITERATION for t in merge._inputs)):
                b.last_use = region.end if b.last_use is None else max(b.last_use, region.end)
        for _reader, b, region in self._saves.values():   # live as the loop variable
            b.first_use, b.last_use = region.begin, region.end
        for b in self.buffers:
            if b.pinned:
                b.first_use, b.last_use = 0, len(self.events) - 1
            else:
                b.last_use = b.first_use if b.last_use is None else max(b.last_use,
                                                                        b.first_use)

    def _merge_start(self, merge) -> int:
        """A loop variable's Merge holds its value for the whole loop; a cond's Merge
        is written by whichever branch runs, so its block is taken when the cond
        begins."""
        region = self.region_of[merge]
        if region.kind == RG.LOOP and any(
                t.op._op_def.role == R.NEXT_ITERATION for t in merge._inputs):
            return region.begin
        cond = self._cond_of_merge(merge)
        return cond.begin if cond is not None else self.time[merge]

    def _cond_of_merge(self, merge):
        """The cond region whose branches feed ``merge`` (None for a raw diamond)."""
        mine = self.region_of[merge]
        for t in merge._inputs:
            if t.op not in self.region_of:
                continue
            path = self.region_of[t.op].path()
            if mine in path:
                i = path.index(mine)
                if i + 1 < len(path) and path[i + 1].kind == RG.COND:
                    return path[i + 1]
        return None

    def _use_time(self, op, t, b) -> int:
        """When ``op``'s use of ``t`` ends, lifted so that a loop never frees, during an
        iteration, memory a later iteration still reads."""
        role = op._op_def.role
        if role == R.NEXT_ITERATION:
            return self.region_of[op].end  # carried to the next iteration
        cond = self._cond_of_merge(op) if role == R.MERGE else None
        branch = None if cond is None or t.op not in self.region_of else next(
            (r for r in self.region_of[t.op].path() if r.parent is cond), None)
        if branch is not None:
            # A branch's result is written into the Merge's block at the branch's end.
            use_region, when = branch, branch.end
        else:
            use_region, when = self.region_of[op], self.time[op]
        def_path = self._def_path(b)
        for r in use_region.path():
            if r not in def_path and r.kind == RG.LOOP:
                return r.end
        return when

    def _def_path(self, b) -> list:
        op = b.producer
        if op._op_def.role == R.MERGE and self.region_of[op].kind == RG.LOOP:
            return self.region_of[op].path()
        return self.region_of[op].path() if op in self.region_of else []

    # -- Owl's allocation ---------------------------------------------------------------
    def _allocate(self):
        starts: dict = {}
        ends: dict = {}
        for b in self.buffers:
            if not b.pinned:
                starts.setdefault(b.first_use, []).append(b)
                ends.setdefault(b.last_use, []).append(b)
        blocks: list = []          # block id -> size
        free: set = set()
        in_place = []
        for time, (kind, x) in enumerate(self.events):
            dying = ends.get(time, [])
            born = [b for b in starts.get(time, [])]
            overwritable = []
            if kind == "op" and x._op_def.in_place:
                ins = {id(self.buffer_of.get(t)) for t in x._inputs}
                overwritable = [b for b in dying if id(b) in ins and b not in born]
            for b in overwritable:
                free.add(b.block)
            for b in born:
                donor = next((d for d in overwritable if d.block in free
                              and blocks[d.block] >= b.size and d.size == b.size), None)
                if donor is not None:
                    b.block = donor.block
                    free.discard(donor.block)
                    in_place.append((b, donor))
                else:
                    b.block = _find_best_block(b.size, blocks, free)
            for b in dying:
                if b not in overwritable:
                    free.add(b.block)
        return blocks, in_place

    def _layout(self, blocks) -> int:
        offsets, total = [], 0
        for size in blocks:
            offsets.append(total)
            total += size
        for b in self.buffers:
            if not b.pinned:
                b.offset = offsets[b.block]
        at = total
        for b in self.buffers:
            if b.pinned:
                b.offset = at
                at += b.size
        return total

    def _scratch(self):
        """Bytes kernels hold outside the arena at each event (see
        :func:`register_workspace`), and per op. An updated variable's old value lives
        on after its update while a read of it made before the update is still to be
        used; the new values take the variable's pinned place."""
        n = len(self.events)
        delta = np.zeros(n + 1, np.int64)
        per_op = {}
        reads = self._variable_reads()
        for op, t in self.time.items():
            fn = _WORKSPACE.get(op.type)
            if fn is None:
                continue
            handles = [x for x in op._inputs if x.dtype == _dtypes.resource]
            keys = [self._variable(h) for h in handles]
            nbytes = int(fn(op, [self.buffer_of[k].size for k in keys]))
            if nbytes <= 0:
                continue
            per_op[op.name] = nbytes
            delta[t] += nbytes
            delta[t + 1] -= nbytes
            if keys:   # the old value of the updated variable, still to be read
                key = keys[0]
                end = max((u for (r, u) in reads.get(key, ()) if r < t), default=t)
                if end > t:
                    size = self.buffer_of[key].size
                    delta[t + 1] += size
                    delta[end + 1] -= size
        return np.cumsum(delta)[:n], per_op

    def _variable_reads(self) -> dict:
        """variable key -> [(time of a ReadVariableOp, time of its value's last use)]."""
        out: dict = {}
        for op, t in self.time.items():
            if op.type != "ReadVariableOp":
                continue
            users = [self.time[c] for c in op._outputs[0].consumers() if c in self.time]
            out.setdefault(self._variable(op._inputs[0]), []).append((t, max(users,
                                                                          default=t)))
        return out

    def _live_peaks(self, in_place, scratch=None):
        """The most bytes live at once in the arena, per zone (the kernels' scratch
        outside it counted in the workspace zone), and with the scratch."""
        n = len(self.events)
        delta = {z: np.zeros(n + 1, np.int64) for z in ARENA_ZONES}
        for b in self.buffers:
            if b.pinned:
                continue
            delta[b.zone][b.first_use] += b.size
            delta[b.zone][b.last_use + 1] -= b.size
        for out, donor in in_place:  # the output takes the input's bytes at that op
            delta[out.zone][out.first_use] -= out.size
            delta[out.zone][out.first_use + 1] += out.size
        live = {z: np.cumsum(d)[:n] for z, d in delta.items()}
        arena_total = sum(live.values())
        if scratch is not None:
            live["workspace"] = live["workspace"] + scratch
        total = sum(live.values())
        zones = {z: int(v.max(initial=0)) for z, v in live.items()}
        return int(arena_total.max(initial=0)), zones, int(total.max(initial=0))

    # -- stacks and trip counts ----------------------------------------------------------
    def _stacks(self) -> list:
        pushes = [op for op in self.ops if op.type == "StackPush"]
        pairs = _history_pairs(pushes)
        out = []
        for op in pushes:
            if op in pairs and pairs[op] is None:
                continue  # merged into its partner's entry
            loops, f = [], self.frame_of[op]
            while f is not None and f.parent is not None:
                loops.append(f.name)
                f = f.parent
            value = op._inputs[1]
            if self.shapes.nbytes(value) is None:
                raise self._unknown_shape(value, self.shapes.shape_of(value))
            name = stack_of(op._inputs[0]).name
            if op in pairs:
                name = f"{name} + {stack_of(pairs[op]._inputs[0]).name}"
            out.append(StackUse(name, _align(self.shapes.nbytes(value)), tuple(loops[::-1]),
                                bool(op.get_attr("swap_memory")), history=op in pairs,
                                branch=None if op in pairs else self._branch_in_loop(op)))
        return out

    def _branch_in_loop(self, op):
        """``(cond, branch)`` region names of the first cond inside ``op``'s innermost
        loop whose branch holds ``op``; None when ``op`` is in no such branch."""
        path = self.region_of[op].path()
        loops = [i for i, r in enumerate(path) if r.kind == RG.LOOP]
        if not loops:
            return None
        for i in range(loops[-1] + 1, len(path) - 1):
            if path[i].kind == RG.COND and path[i + 1].kind == RG.BRANCH:
                return (path[i].name, path[i + 1].name)
        return None

    def _trip_counts(self, stacks) -> dict:
        counts: dict = {}
        names = set(self.frames) - {""}
        user = {}
        for k, v in self.user_counts.items():
            user[_loop_key(k, names)] = int(v)
        for name in sorted(names):
            counts[name] = self._trip_count(name, user)
        needed = {loop for s in stacks for loop in s.loops}
        for name in sorted(n for n in needed if counts[n] is None):
            raise errors.InvalidArgumentError(
                None, None, f"memory plan: while loop '{name.rsplit('/', 1)[0]}' (frame "
                f"'{name}') has no known trip count and its stacks grow with it; pass "
                f"trip_counts={{'{name.rsplit('/', 1)[0]}': n}} or build it with "
                f"maximum_iterations")
        return counts

    def _trip_count(self, name, user):
        if name in user:
            return user[name]
        ctx = self.contexts.get(name)
        if ctx is not None and ctx.grad_state is not None:
            fwd = ctx.grad_state.forward_context.name
            if fwd in self.frames:
                return self._trip_count(fwd, user)
        return _constant_bound(name, self.ops, self.frame_of, self.shapes)


def _nesting(frame) -> int:
    """How many loop frames ``frame`` is, counting itself and those around it."""
    n = 0
    while frame is not None and frame.name:
        n, frame = n + 1, frame.parent
    return n


def _itemsize(dtype) -> int:
    try:
        return int(np.dtype(dtype.as_numpy_dtype).itemsize)
    except (TypeError, AttributeError):
        return 8


def _history_pairs(pushes) -> dict:
    """Pushes of a loop variable's value (its Merge) paired with pushes of its next
    value (what its NextIteration receives), in the same loop: ``{first: second,
    second: None}``. Both stacks then hold one history of the variable."""
    by_value = {}
    for op in pushes:
        by_value.setdefault(_through(op._inputs[1]), []).append(op)
    pairs: dict = {}
    for op in pushes:
        merge = _through(op._inputs[1]).op
        if op in pairs or merge._op_def.role != R.MERGE:
            continue
        nxt = [t for t in merge._inputs if t.op._op_def.role == R.NEXT_ITERATION]
        if not nxt:
            continue
        partners = [q for q in by_value.get(_through(nxt[0].op._inputs[0]), [])
                    if q not in pairs and q is not op
                    and bool(q.get_attr("swap_memory")) == bool(op.get_attr("swap_memory"))]
        if partners:
            pairs[op], pairs[partners[0]] = partners[0], None
    return pairs


def _placeholders_upstream(op, fed, needed) -> list:
    seen, stack, out = set(), [op], []
    while stack:
        o = stack.pop()
        if o in seen:
            continue
        seen.add(o)
        if o.type == "Placeholder":
            out.append(o)
        for t in o._inputs:
            if t.op in needed or t in fed:
                stack.append(t.op)
    return out


def _find_best_block(size, blocks, free) -> int:
    """Owl's FINDBESTBLOCK: the smallest free block that fits, else the largest free
    block grown to fit, else a new block."""
    fits = [i for i in free if blocks[i] >= size]
    if fits:
        best = min(fits, key=lambda i: (blocks[i], i))
    elif free:
        best = max(free, key=lambda i: (blocks[i], -i))
        blocks[best] = size
    else:
        blocks.append(size)
        return len(blocks) - 1
    free.discard(best)
    return best


# -- constant loop bounds -----------------------------------------------------------------
def _constant_bound(frame_name, ops, frame_of, shapes):
    """The trip count of a loop whose predicate bounds a counter: ``i < N`` (or ``<=``)
    with ``i`` starting at a constant and stepping by a constant 1, possibly and-ed
    with other conditions (``maximum_iterations`` builds exactly that). None when
    there is no such bound."""
    cond = next((op for op in ops if op.type == "LoopCond" and frame_of[op].name == frame_name),
                None)
    if cond is None:
        return None
    return _bound(cond._inputs[0], shapes)


def _bound(pred, shapes):
    op = _through(pred).op
    if op.type == "LogicalAnd":
        found = [b for b in (_bound(t, shapes) for t in op._inputs) if b is not None]
        return min(found) if found else None
    if op.type not in ("Less", "LessEqual"):
        return None
    counter, limit = op._inputs
    n = _value(limit, shapes)
    start = _counter_start(counter, shapes)
    if n is None or start is None:
        return None
    return max(0, int(n) - start + (1 if op.type == "LessEqual" else 0))


def _through(t):
    while t.op._op_def.forwards_input or t.op._op_def.role in (R.SWITCH, R.ENTER):
        t = t.op._inputs[0]
    return t


def _value(t, shapes):
    v = shapes.values.get(_through(t))
    if v is None or np.ndim(v) != 0:
        return None
    return int(v)


def _counter_start(counter, shapes):
    """The start of ``counter`` if it is a loop variable stepping by +1, else None."""
    merge = _through(counter).op
    if merge._op_def.role != R.MERGE:
        return None
    start, step = None, None
    for t in merge._inputs:
        if t.op._op_def.role == R.ENTER:
            start = _value(t, shapes)
        elif t.op._op_def.role == R.NEXT_ITERATION:
            add = _through(t.op._inputs[0]).op
            if add.type in ("AddV2", "Add") and any(
                    _through(i).op is merge for i in add._inputs):
                other = [i for i in add._inputs if _through(i).op is not merge]
                step = _value(other[0], shapes) if other else None
    return start if step == 1 else None

