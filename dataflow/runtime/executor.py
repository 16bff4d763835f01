"""The executor: runs a :class:`~dataflow.runtime.plan.Plan` with frames and iterations.

A token is a value in an input slot of an :class:`IterationState`; its tag is
implicit in which iteration state (of which frame) holds it, and a dead token
is the :data:`DEAD` sentinel. The rules (see ``dataflow/spec/SEMANTICS.md``):

* a normal node runs once per iteration when all its inputs have arrived; if
  any input (control inputs included) is dead, it does not compute and all
  its outputs are dead;
* Switch sends data to output 1 if pred else output 0, the other is dead;
* Merge fires on its first live data input, or dead once every data input is
  dead, or at once on a dead input from an Enter (a loop on an untaken branch);
* Enter forwards into iteration 0 of the child frame (every iteration for
  ``is_constant``), Exit to the parent frame, NextIteration to iteration n+1;
  a dead NextIteration stops there, dead Exits of the last iteration reach the
  parent when the frame completes;
* at most ``parallel_iterations`` iterations of a frame are in flight;
  finished iterations and frames are freed at once.

The run-time state (pending and dead counts per node, the Merge encoding, what
keeps an iteration or a frame alive) is described in the block comment above
:class:`FrameState`; the checklists in ``SEMANTICS.md`` list what to change
together when the dead-signal rules change or a role is added.

The whole scheduler runs on the calling thread; only large kernels are handed
to worker threads (their results come back through a queue), so no locks are
needed on the hot path and results never depend on scheduling.

Tracing (``RunOptions(trace_level=FULL_TRACE)``) adds nothing here: a traced step runs
:class:`~dataflow.runtime.tracing.TracedExecutor`, which watches ``_loop`` from
outside, through the ready list's ``pop``, the kernels in ``node_tuples``, ``_recv``,
``_launch``, ``_wait_for_worker`` and ``done_queue``; keep those call sites in
``_loop`` (inlining one of them would hide its nodes from traces).
"""
from __future__ import annotations

import queue
import threading
import time

from .. import errors
from ..util.float_env import in_callers_mode
from .plan import (CONTROL_TO_MERGE, ENTER, EXIT, MERGE, NEXT_ITERATION, NORMAL, RECV, SEND,
                   SWITCH, TO_EXIT, TO_FETCH, TO_MERGE, TO_MERGE_FROM_ENTER, TO_NEXT, TO_NODE,
                   NodeInfo, Plan)

import numpy as np


class _Dead:
    __slots__ = ()

    def __repr__(self):
        return "DEAD"

    def __reduce__(self):
        return "DEAD"


DEAD = _Dead()          # the value of a dead token
_NO_VALUE = object()    # a fetch that never arrived
_PENDING = object()     # a Recv whose value has not arrived yet
# Inputs above this size may run on a worker thread. A hand-off costs tens of
# microseconds plus GIL traffic; measured on the digits MLP step (arrays of 460 KB),
# offloading at 256 KB made the step 1.7x slower, so only multi-megabyte work moves.
BIG_BYTES = 1 << 22


class _NoneTuples(dict):
    """``_NONES[n]``: a tuple of n Nones, for clearing n input slots in one assignment."""

    def __missing__(self, n):
        v = self[n] = (None,) * n
        return v


_NONES = _NoneTuples()


class _Int32Cache(dict):
    """Merge's value_index as a NumPy int32, made once per index."""

    def __missing__(self, i):
        v = self[i] = np.int32(i)
        return v


_INT32 = _Int32Cache()

# Field positions in Plan.node_tuples, for the two hot helpers that read one field once
# per loop iteration (_deliver_to_merge, _pass_to_next_iteration): reading the NodeInfo
# field by name there cost 2% more instructions per scalar-loop iteration (callgrind).
_BASE = NodeInfo._fields.index("base")
_EDGES = NodeInfo._fields.index("edges")


# The run-time state
# ------------------
# A run is a tree of frame instances (FrameState): the root frame, and one instance
# of a while loop's frame per parent iteration that enters it. Each frame instance
# holds its live iterations (IterationState). A node is identified at run time by
# (gid, iteration): the scheduler's ready list holds such pairs, and the tag of a
# token is implicit in which iteration's buffers it sits.
#
# Static layout (dataflow/runtime/plan.py). Every node of a frame has a local index
# `local` (into the iteration's `pending` and `dead` lists) and an input slot range
# `[base, end)` in the iteration's `inputs` list. FramePlan.pending holds each
# node's initial pending count and FramePlan.inputs the initial slot contents
# (folded constants); an iteration starts from copies of the frame's templates.
#
# Per node and iteration:
#
#   pending[local]  How many input tokens the node still waits for.
#       A non-Merge node starts at (data inputs that are not folded constants or
#       feeds) + (control inputs): every token, live or dead, data or control,
#       counts down by 1 (TO_NODE edges: the delivery loops in _loop and _deliver).
#       The node is ready when it reaches 0: whoever takes it to 0 pushes
#       (gid, iteration) onto the ready list and counts it in `outstanding`.
#       Plan-time adjustments: _drop_implied_control_edges removes control edges
#       (and their counts) that a data edge already implies; constant loop
#       invariants that cannot complete a node alone are taken out of the frame's
#       pending_template (_add_invariant). A node reached only by a TO_EXIT or
#       TO_NEXT edge (an Exit or NextIteration with one input and no control
#       input) never counts down: the edge decides at once (see the edge modes).
#
#       A Merge starts at 2*len(control inputs) + 1. Each control input takes 2
#       (CONTROL_TO_MERGE, whatever its deadness); the low bit set means "no data
#       input decided yet". The first live data input clears the bit and writes
#       its value and index into slots base and base + 1; a dead data input clears
#       it (and writes DEAD into slot base) only if it comes from an Enter
#       (TO_MERGE_FROM_ENTER) or it is the last data input and all were dead. Once
#       the bit is clear every later data input is ignored. So the Merge is ready
#       at 0: all control inputs in and its data input decided
#       (_deliver_to_merge is the only code that reads or writes a Merge's count).
#
#   dead[local]     How many dead tokens the node has received (never decremented).
#       A non-Merge node runs dead (computes nothing, all its outputs dead) when it
#       is > 0; ControlTrigger ignores it. For a Merge it counts dead *data*
#       inputs only, compared with plan.merge_num_inputs; the Merge is dead when
#       the value in its slot `base` is DEAD. Dead constant loop invariants are
#       baked into the frame's dead_template.
#
#   inputs[base:end] The node's input values, written by the delivery code
#       (a control edge writes nothing: slot -1). Loop iterations drop the whole
#       list when freed; root-frame NORMAL nodes clear their slots once they ran
#       (NodeInfo.clear), so large arrays go as early as possible.
#
# Per iteration (IterationState):
#
#   outstanding     Nodes of this iteration that are on the ready list or running
#       (on a worker thread, or a Recv waiting for its value). Incremented at
#       every push onto the ready list (the delivery code, _deliver_to_merge,
#       run() for the root's initial nodes); decremented by the scheduler once the
#       node's outputs are delivered (end of the _loop body, _wait_for_worker).
#   outstanding_frames  Child frame instances started by this iteration's Enters
#       that are not done: +1 in _enter when the instance is created, -1 in
#       _frame_done.
#   An iteration is done (_cleanup) when outstanding == 0, outstanding_frames == 0
#   and its predecessor is done (for iteration 0: every Enter of the frame
#   instance has run, pending_enters == 0). Done iterations are freed in order,
#   oldest first. _cleanup runs when outstanding drops to 0, when the last Enter
#   arrives, and when a child frame is done. The root iteration is never freed:
#   the run ends when the ready list is empty and nothing is in flight.
#
# Per frame instance (FrameState):
#
#   iteration_count  The newest iteration started (-1 before iteration 0).
#   iterations       {num: IterationState} of the live (not yet freed) iterations.
#   num_outstanding  len(iterations): +1 in _new_iteration, -1 in _cleanup. A live
#       NextIteration token of the newest iteration starts a new one only while
#       num_outstanding < parallel_iterations; otherwise it is deferred.
#   next_iter_roots  The deferred live NextIteration outputs, (edges, value): the
#       next iteration gets them when it starts (_new_iteration), which _cleanup
#       does as soon as it frees an iteration.
#   pending_enters   Enters of the frame that have not run yet in the parent
#       iteration (FramePlan.num_enters at the start, -1 in _enter).
#   invariants       (edges, value, dead) of constant Enters (loop invariants) that
#       every iteration started from now on must receive through delivery;
#       _new_iteration delivers them.
#   template, pending_template, dead_template  What _new_iteration copies into a
#       new iteration: input slots (feeds and folded loop invariants filled in),
#       pending counts and dead counts. They are the FramePlan's shared lists until
#       the first invariant is folded in (_add_invariant copies them then).
#   dead_exits       Exits that got a dead token in the newest iteration
#       (_dead_exit); _new_iteration clears them (the loop went on) and
#       _frame_done delivers them, dead, to the parent (the loop's dead outputs).
#   A frame instance is done when num_outstanding == 0 and pending_enters == 0
#   (end of _cleanup): _frame_done delivers its dead Exits, removes it from the
#   parent iteration's children and lets the parent iteration finish.


class FrameState:
    """A live instance of a while-loop frame (one per parent iteration that entered it).

    Its fields are described in the block comment above.
    """

    __slots__ = ("plan", "parent_iter", "iterations", "iteration_count", "num_outstanding",
                 "pending_enters", "invariants", "next_iter_roots", "dead_exits", "template",
                 "pending_template", "dead_template")

    def __init__(self, plan, parent_iter, template):
        self.plan = plan                  # the FramePlan (static layout, parallel_iterations)
        self.template = template          # input slots a new iteration copies
        self.pending_template = plan.pending   # pending counts a new iteration copies
        self.dead_template = [0] * len(plan.pending)   # dead counts a new iteration copies
        self.parent_iter = parent_iter    # the IterationState that entered it (None: root)
        self.iterations = {}              # num -> IterationState, live iterations only
        self.iteration_count = -1         # the newest iteration started
        self.num_outstanding = 0          # live iterations (<= parallel_iterations)
        self.pending_enters = plan.num_enters   # Enters not yet run
        self.invariants = []        # (edges, value, dead) delivered to every new iteration
        self.next_iter_roots = []   # deferred NextIteration outputs: (edges, value)
        self.dead_exits = []        # Exit gids that got a dead token in the newest iteration


class IterationState:
    """Input buffers and pending counts of one iteration of one frame.

    Its fields are described in the block comment above :class:`FrameState`.
    """

    __slots__ = ("frame", "num", "inputs", "pending", "dead", "outstanding",
                 "outstanding_frames", "children", "is_root")

    def __init__(self, frame, num, inputs, pending, dead):
        self.frame = frame                # its FrameState
        self.is_root = frame.parent_iter is None   # the root iteration is never freed
        self.num = num                    # iteration number within the frame instance
        self.inputs = inputs              # input slots of every node of the frame
        self.pending = pending            # local -> tokens still awaited (Merge: encoded)
        self.dead = dead                  # local -> dead tokens received
        self.outstanding = 0              # its nodes ready or running
        self.outstanding_frames = 0       # child frame instances not done
        self.children = None              # frame name -> FrameState, made on first Enter


class ShuffledReady(list):
    """A ready list whose ``pop`` takes a random ready node (test-only): tests run a
    graph many times in many orders to show that a result, or the absence of a hang,
    does not depend on the order the scheduler happens to pick. Only
    ``Executor(ready_order=rng)`` uses it; the scheduler loop is the same."""

    __slots__ = ("rng",)

    def __init__(self, rng):
        super().__init__()
        self.rng = rng

    def pop(self, index=-1):
        i = self.rng.randrange(len(self))
        self[i], self[-1] = self[-1], self[i]
        return list.pop(self)


class Executor:
    """Runs one plan once. Create a new Executor per step (it is cheap).

    ``ready_order`` (test-only): a ``random.Random`` that picks each next ready node at
    random (:class:`ShuffledReady`) instead of the scheduler's own order.
    """

    def __init__(self, plan: Plan, pool=None, templates=None, rendezvous=None,
                 ready_order=None):
        self.plan = plan
        self.rendezvous = rendezvous  # for Send/Recv nodes (partitioned graphs only)
        # Optional fast path of a rendezvous: take a value that is already there.
        self._poll = getattr(rendezvous, "poll", None)
        self._path_of = (None, ())    # (iteration, its frame path): the last one computed
        self.nodes = plan.nodes       # gid -> NodeInfo, read by field name
        # The same as plain tuples (they unpack fastest, see plan._plain_tuples): the
        # scheduler unpacks them, and the hot helpers index them with _BASE/_EDGES.
        self.node_tuples = plan.node_tuples
        self.pool = pool
        self.templates = templates   # per-run {FramePlan: input template}, feeds filled in
        self.ready: list = [] if ready_order is None else ShuffledReady(ready_order)
        self.results = [_NO_VALUE] * len(plan.fetches)
        self.inflight = 0
        self.done_queue = None
        self.cancelled = False
        self.deadline = None
        self.peak_iterations = 0    # most iterations of one frame alive at once (stats)
        self.offloaded = 0          # kernels run on worker threads (stats)
        self.last_launched = None
        self.root_iteration = None
        # Compiled frames (FramePlan.compiled): Enter tokens gathered per (parent
        # iteration, frame name) until the frame's last Enter arrives, and a list that
        # gets (frame name, None or why interpreted) per frame run (RunMetadata).
        self._gathering = {}
        self.loop_log = None
        self.interpret_loops = False   # True: ignore compiled frames (traced steps)

    # -- driver ------------------------------------------------------------------------------
    def run(self, deadline=None):
        """Execute until quiescent; returns the fetched values in fetch order."""
        self.start(deadline)
        try:
            self._loop(deadline)
        except BaseException:
            self.cancelled = True
            raise
        return self.results

    def start(self, deadline=None):
        """Set up the root frame and its ready nodes without running any (then
        :meth:`advance`; :meth:`run` does both)."""
        plan = self.plan
        self.deadline = deadline
        root = FrameState(plan.root, None, self._template(plan.root))
        root_it = self.root_iteration = self._new_iteration(root)
        ready = self.ready
        for gid in plan.root_ready:
            ready.append((gid, root_it))
        root_it.outstanding = len(ready)

    def advance(self) -> bool:
        """Run, on the calling thread, every node that can run now (after :meth:`start`).

        True once the run is complete; False when what is left waits for rendezvous
        values not sent yet. The caller is then the other side of the rendezvous (the
        tracer's Python side, which feeds the step it co-executes): it sends, and calls
        again. Nothing blocks and no thread is involved (with no worker pool), so a
        caller that has sent everything gets True, or a Recv is waiting for a value that
        nobody will send.
        """
        try:
            return self._loop(self.deadline, block=False)
        except BaseException:
            self.cancelled = True
            raise

    def _loop(self, deadline, block=True):
        """The scheduler. Every role is handled inline: this loop runs millions of times.
        Returns True when the run is complete; with ``block=False``, False as soon as
        nothing is ready and nothing has arrived (see :meth:`advance`)."""
        nodes = self.node_tuples
        ready = self.ready
        pop = ready.pop
        push = ready.append
        heavy = self.plan.heavy
        pool = self.pool
        results = self.results
        deliver_to_merge = self._deliver_to_merge
        self.deadline = deadline
        while True:
            while ready:
                gid, it = pop()
                role, local, base, end, fn, edges, nout, clear = nodes[gid]
                inputs = it.inputs
                node_dead = it.dead[local]
                target = it
                out = None
                if role == NORMAL:
                    if not node_dead:
                        # Hand a large kernel to a worker only when another large
                        # kernel could run meanwhile (out on a worker, or ready): a
                        # hand-off costs tens of microseconds and gains nothing alone.
                        if heavy[gid] and pool is not None and _is_big(inputs, base, end) \
                                and (self.inflight or _any_heavy(ready, heavy)):
                            self._launch(gid, it, fn, inputs[base:end])
                            if clear:
                                inputs[base:end] = _NONES[end - base]
                            continue
                        try:
                            # Direct calls for the common arities: no slice, no *args.
                            n = end - base
                            if n == 2:
                                out = fn(inputs[base], inputs[base + 1])
                            elif n == 1:
                                out = fn(inputs[base])
                            else:
                                out = fn(*inputs[base:end])
                        except BaseException as exc:
                            raise self._kernel_error(gid, exc)
                    if clear:
                        inputs[base:end] = _NONES[end - base]
                elif role == SWITCH:
                    if not node_dead:
                        data = inputs[base]
                        out = (DEAD, data) if inputs[base + 1] else (data, DEAD)
                elif role == MERGE:
                    # Merge's dead count tallies dead data inputs, not its own deadness.
                    value = inputs[base]
                    node_dead = value is DEAD
                    if not node_dead:
                        out = value if nout == 1 else (value, _INT32[inputs[base + 1]])
                elif role == NEXT_ITERATION:
                    out = inputs[base]
                    target = self._next_iteration_target(edges, DEAD if node_dead else out, it)
                elif role == EXIT:
                    out = inputs[base]
                    target = _exit_target(gid, node_dead, it)
                elif role == ENTER:
                    self._enter(gid, edges, DEAD if node_dead else inputs[base], node_dead, it)
                    target = None
                elif role == SEND:  # runs even when dead: the dead bit is sent
                    self._send(gid, None if node_dead else inputs[base], node_dead, it)
                elif role == RECV:
                    if not node_dead:
                        out = self._recv(gid, it)
                        if out is _PENDING:  # completes through the done queue
                            continue
                        if out is DEAD:
                            node_dead, out = 1, None
                else:  # ControlTrigger: never dead
                    node_dead = 0
                # Delivery: the outputs (or the deadness) go along the out-edges into
                # iteration `target` (None: nothing to deliver now). These two loops are
                # inline copies of _deliver, the one for other callers: change the three
                # together (tests/test_executor.py checks that they agree on every edge
                # mode). Calling _deliver here instead costs 1.7% more instructions per
                # scalar-loop iteration and 3.3% on cond-in-while (callgrind).
                if target is None:
                    pass
                elif nout == 1 and not node_dead:
                    # Live single-output node: no DEAD values, no per-edge output select.
                    tinputs = target.inputs
                    tpend = target.pending
                    for k, dg, dl, ds, mode in edges:
                        if mode == TO_NODE:
                            if ds >= 0:
                                tinputs[ds] = out
                            p = tpend[dl] - 1
                            tpend[dl] = p
                            if not p:
                                push((dg, target))
                                target.outstanding += 1
                        elif mode == TO_FETCH:
                            results[ds] = out
                        elif mode == TO_NEXT:
                            self._pass_to_next_iteration(dg, out, target)
                        elif mode == TO_EXIT:
                            tinputs[ds] = out
                            push((dg, target))
                            target.outstanding += 1
                        else:
                            deliver_to_merge(dg, dl, ds, mode, None if k < 0 else out, target)
                else:
                    tinputs = target.inputs
                    tpend = target.pending
                    for k, dg, dl, ds, mode in edges:  # the same as _deliver's loop
                        if node_dead:
                            v = DEAD
                        elif k < 0:
                            v = None
                        elif nout == 1:
                            v = out
                        else:
                            v = out[k]
                        if mode == TO_NODE:
                            if v is DEAD:
                                target.dead[dl] += 1
                            elif ds >= 0:
                                tinputs[ds] = v
                            p = tpend[dl] - 1
                            tpend[dl] = p
                            if not p:
                                push((dg, target))
                                target.outstanding += 1
                        elif mode == TO_FETCH:
                            results[ds] = v
                        elif mode == TO_NEXT:
                            self._pass_to_next_iteration(dg, v, target)
                        elif mode == TO_EXIT:
                            if v is DEAD:
                                _dead_exit(dg, target)
                            else:
                                tinputs[ds] = v
                                push((dg, target))
                                target.outstanding += 1
                        else:
                            deliver_to_merge(dg, dl, ds, mode, v, target)
                it.outstanding -= 1
                if not it.outstanding and not it.is_root:
                    self._cleanup(it)
            if not self.inflight:
                return True
            if not block and self.done_queue.empty():
                return False
            self._wait_for_worker(self.deadline)   # moved on by compile pauses

    # -- delivery ----------------------------------------------------------------------------
    def _deliver(self, edges, out, nout, node_dead, it):
        """Send a node's outputs (or its death) along ``edges`` into iteration ``it``.

        ``out`` is the node's output (``nout == 1``) or tuple of outputs; a control edge
        (``out_index < 0``) carries None, and every edge carries DEAD when ``node_dead``.
        The delivery rule per edge mode (``plan.TO_*``) lives here and in two inline copies
        in :meth:`_loop` (its live single-output fast path and its general loop, which
        this loop repeats line for line): change the three together.
        ``tests/test_executor.py`` drives both and checks that they leave the same state.
        """
        ready = self.ready
        for k, dg, dl, ds, mode in edges:
            if node_dead:
                v = DEAD
            elif k < 0:
                v = None
            elif nout == 1:
                v = out
            else:
                v = out[k]
            if mode == TO_NODE:
                # Count down; a dead token counts as dead, a live one fills its slot
                # (a control edge fills none); the node is ready at 0.
                if v is DEAD:
                    it.dead[dl] += 1
                elif ds >= 0:
                    it.inputs[ds] = v
                p = it.pending[dl] - 1
                it.pending[dl] = p
                if not p:
                    ready.append((dg, it))
                    it.outstanding += 1
            elif mode == TO_FETCH:  # a result (DEAD: Session.run raises for it)
                self.results[ds] = v
            elif mode == TO_NEXT:  # the NextIteration rule, without scheduling the node
                self._pass_to_next_iteration(dg, v, it)
            elif mode == TO_EXIT:
                # The Exit's only input: a live token schedules it at once (its pending
                # count is never used); a dead one takes the Exit rule's dead half.
                if v is DEAD:
                    _dead_exit(dg, it)
                else:
                    it.inputs[ds] = v
                    ready.append((dg, it))
                    it.outstanding += 1
            else:  # TO_MERGE, TO_MERGE_FROM_ENTER, CONTROL_TO_MERGE
                self._deliver_to_merge(dg, dl, ds, mode, v, it)

    def _deliver_to_merge(self, dg, dl, index, mode, v, it):
        """A data or control token ``v`` reaching Merge ``dg`` through input ``index``.

        The only code that reads or writes a Merge's pending count; its encoding
        (``2 * len(control inputs) + 1``, low bit: no data input decided yet) is described
        in the block comment above :class:`FrameState`."""
        pend = it.pending
        p = pend[dl]
        base = self.node_tuples[dg][_BASE]
        if mode == CONTROL_TO_MERGE:
            p -= 2
        elif v is DEAD:
            it.dead[dl] += 1
            if not p & 1:
                return  # the Merge already has its value (or already fired): ignored
            if mode != TO_MERGE_FROM_ENTER and it.dead[dl] < self.plan.merge_num_inputs[dg]:
                return  # a live input may still come
            p -= 1
            it.inputs[base] = DEAD
        elif p & 1:
            p -= 1
            it.inputs[base] = v
            it.inputs[base + 1] = index
        else:
            return  # a later live input of a Merge that already fired: ignored
        pend[dl] = p
        if not p:
            self.ready.append((dg, it))
            it.outstanding += 1

    # -- the control-flow primitives ---------------------------------------------------------
    def _enter(self, gid, edges, value, node_dead, it):
        child_plan, is_constant = self.plan.enter_info[gid]
        if child_plan.compiled is not None and not self.interpret_loops:
            self._enter_compiled(child_plan, gid, edges, value, node_dead, it)
            return
        self._enter_interpreted(child_plan, is_constant, gid, edges, value, node_dead, it)

    def _enter_compiled(self, child_plan, gid, edges, value, node_dead, it):
        """An Enter of a compiled frame: gather the Enter tokens of this parent iteration;
        at the last one, the runner runs the whole frame and its Exits' values are
        delivered to ``it`` (live, or dead for a loop on an untaken branch). When the
        runner declines (see dataflow/loopc/runner.py) the gathered Enters are replayed
        into the interpreted frame, in their order of arrival."""
        key = (it, child_plan.name)
        gathered = self._gathering.get(key)
        if gathered is None:
            gathered = self._gathering[key] = []
            it.outstanding_frames += 1      # the parent iteration waits for the frame
        gathered.append((gid, edges, value, node_dead))
        if len(gathered) < child_plan.num_enters:
            return
        del self._gathering[key]
        it.outstanding_frames -= 1   # `it` is still running this Enter: no cleanup due here
        runner = child_plan.compiled
        exits = runner.run(gathered, self.loop_log, self.deadline)
        if self.deadline is not None:
            self.deadline += runner.compile_pause()   # compiling is not the step's time
        if exits is None:
            enter_info = self.plan.enter_info
            for g, e, v, d in gathered:
                self._enter_interpreted(*enter_info[g], g, e, v, d, it)
            return
        nodes = self.nodes
        for exit_gid, out in exits:
            self._deliver(nodes[exit_gid].edges, out, 1, out is None, it)

    def _enter_interpreted(self, child_plan, is_constant, gid, edges, value, node_dead, it):
        children = it.children
        if children is None:
            children = it.children = {}
        frame = children.get(child_plan.name)
        if frame is None:
            frame = children[child_plan.name] = FrameState(child_plan, it,
                                                           self._template(child_plan))
            it.outstanding_frames += 1
            self._new_iteration(frame)
        if is_constant:
            for child_it in list(frame.iterations.values()):
                self._deliver(edges, value, 1, node_dead, child_it)
            self._add_invariant(frame, edges, value, node_dead)
        else:
            self._deliver(edges, value, 1, node_dead, frame.iterations[0])
        frame.pending_enters -= 1
        if not frame.pending_enters:
            self._cleanup(frame.iterations[0])

    @staticmethod
    def _add_invariant(frame, edges, value, dead):
        """Make a loop invariant part of every iteration the frame starts from now on.

        Where it cannot complete a node by itself, it is written into the frame's
        templates once, instead of being delivered to each new iteration.
        """
        if frame.template is frame.plan.inputs or frame.pending_template is frame.plan.pending:
            frame.template = frame.template[:]
            frame.pending_template = frame.pending_template[:]
        pend, later = frame.pending_template, []
        for e in edges:
            k, dg, dl, ds, mode = e
            if mode == TO_NODE and pend[dl] > 1:
                pend[dl] -= 1
                if dead:
                    frame.dead_template[dl] += 1
                elif ds >= 0:
                    frame.template[ds] = value
            else:
                later.append(e)
        if later:
            frame.invariants.append((tuple(later), value, dead))

    def _template(self, frame_plan):
        templates = self.templates
        if templates:
            return templates.get(frame_plan, frame_plan.inputs)
        return frame_plan.inputs

    def _pass_to_next_iteration(self, gid, value, it):
        """A token reaching a NextIteration whose only input it is (a TO_NEXT edge): what
        running the NextIteration would do, without scheduling it (one per loop variable
        and iteration).

        The decision below is an inline copy of :meth:`_next_iteration_target` (the
        NextIteration rule; change both together): this runs once per loop variable and
        iteration, and the extra call cost 1.3-1.8% more instructions per iteration on
        the scalar and cond-in-while loops (callgrind).
        """
        if value is DEAD:
            return
        edges = self.node_tuples[gid][_EDGES]
        frame = it.frame
        if it.num == frame.iteration_count:
            if frame.num_outstanding >= frame.plan.parallel_iterations:
                frame.next_iter_roots.append((edges, value))
                return
            self._new_iteration(frame)
        target = frame.iterations[it.num + 1]
        if len(edges) == 1:
            k, dg, dl, ds, mode = edges[0]
            if mode == TO_MERGE:  # the usual case: the loop variable's Merge, input 1
                self._deliver_to_merge(dg, dl, ds, TO_MERGE, value, target)
                return
        self._deliver(edges, value, 1, False, target)

    def _next_iteration_target(self, edges, value, it):
        """The NextIteration rule: the iteration a NextIteration's output ``value`` (in
        iteration ``it``, out along ``edges``) goes to, or None.

        A dead token stops here: it does not start iteration n + 1. A live one goes to
        iteration n + 1, which it starts if n is the newest, unless
        ``parallel_iterations`` iterations are in flight: then it waits in
        ``next_iter_roots`` until ``_cleanup`` frees one (None here too). The only
        decision of the rule, called by the NEXT_ITERATION role in :meth:`_loop`;
        :meth:`_pass_to_next_iteration` (TO_NEXT edges) has an inline copy for speed.
        """
        if value is DEAD:
            return None
        frame = it.frame
        if it.num == frame.iteration_count:
            if frame.num_outstanding >= frame.plan.parallel_iterations:
                frame.next_iter_roots.append((edges, value))
                return None
            self._new_iteration(frame)
        return frame.iterations[it.num + 1]

    def _new_iteration(self, frame):
        """Start iteration ``iteration_count + 1``: deferred roots and invariants flow in.

        The deadline is checked here (and while waiting for workers): only loops can
        make a step run unboundedly long, and they do it by starting iterations.
        """
        if self.deadline is not None and time.monotonic() > self.deadline:
            raise self._deadline_error(frame.plan.ops[0] if frame.plan.ops else None,
                                       f" while starting iteration {frame.iteration_count + 1}"
                                       f" of loop frame '{frame.plan.name}'")
        num = frame.iteration_count = frame.iteration_count + 1
        template = frame.template
        it = IterationState(frame, num, template[:], frame.pending_template[:],
                            frame.dead_template[:])
        frame.iterations[num] = it
        n = frame.num_outstanding = frame.num_outstanding + 1
        if n > self.peak_iterations:
            self.peak_iterations = n
        if frame.dead_exits:  # the loop went on: they were not the last iteration's
            frame.dead_exits.clear()
        if frame.next_iter_roots:
            roots, frame.next_iter_roots = frame.next_iter_roots, []
            for edges, value in roots:
                self._deliver(edges, value, 1, False, it)
        for edges, value, dead in frame.invariants:
            self._deliver(edges, value, 1, dead, it)
        return it

    # -- completion --------------------------------------------------------------------------
    def _cleanup(self, it):
        """Free finished iterations in order; finish the frame when nothing is left.

        An iteration is done when nothing of it is scheduled or running, none of its
        child frames is alive, and its predecessor is done (for iteration 0: every
        Enter of the frame has arrived).
        """
        frame = it.frame
        iterations = frame.iterations
        while it is not None and not it.outstanding and not it.outstanding_frames and (
                (it.num - 1) not in iterations if it.num else not frame.pending_enters):
            del iterations[it.num]
            frame.num_outstanding -= 1
            nxt = it.num + 1
            if frame.next_iter_roots:
                self._new_iteration(frame)
            it = iterations.get(nxt)
        if not frame.num_outstanding and not frame.pending_enters:
            self._frame_done(frame)

    def _frame_done(self, frame):
        """Frame instance ``frame`` is done: the dead Exits of its last iteration reach the
        parent iteration, dead (the last step of the Exit rule, :func:`_exit_target`), and
        the parent iteration may finish."""
        parent_it = frame.parent_iter
        for gid in frame.dead_exits:
            self._deliver(self.nodes[gid].edges, None, 1, True, parent_it)
        frame.dead_exits = []
        del parent_it.children[frame.plan.name]
        parent_it.outstanding_frames -= 1
        if not parent_it.is_root:
            self._cleanup(parent_it)

    # -- Send / Recv ---------------------------------------------------------------------------
    def _path(self, it):
        """frame_path(it), remembered for the last iteration asked about (the Sends and
        Recvs of one iteration usually run one after another)."""
        last, path = self._path_of
        if last is not it:
            path = frame_path(it)
            self._path_of = (it, path)
        return path

    def _send(self, gid, value, node_dead, it):
        src, dst, name = self.plan.transfers[gid]
        self.rendezvous.send((src, dst, name, self._path(it)), value, bool(node_dead))

    def _recv(self, gid, it):
        """The received value (DEAD for a dead token) when it is already there, else
        _PENDING: the scheduler keeps running other nodes and picks the value up from
        the done queue (a Recv never blocks its partition: the partition may have to
        Send before the value it waits for can be produced)."""
        src, dst, name = self.plan.transfers[gid]
        key = (src, dst, name, self._path(it))
        if self._poll is not None:
            got = self._poll(key)
            if got is not None:
                return DEAD if got[1] else got[0]
        if self.done_queue is None:
            self.done_queue = queue.SimpleQueue()
        put = self.done_queue.put
        me = threading.get_ident()
        box = []
        inside = [True]   # a later call on this thread (a rendezvous that reads its pipes
        #                   on the waiting thread) must go through the queue

        def done(value, is_dead, exc):
            if exc is None and inside[0] and threading.get_ident() == me:
                box.append(DEAD if is_dead else value)   # called from recv_async itself
            else:
                put((gid, it, DEAD if is_dead else value, exc))

        self.inflight += 1
        self.rendezvous.recv_async(key, done)
        inside[0] = False
        if box:
            self.inflight -= 1
            return box[0]
        self.last_launched = gid
        return _PENDING

    # -- worker threads ----------------------------------------------------------------------
    def _launch(self, gid, it, fn, args):
        if self.done_queue is None:
            self.done_queue = queue.SimpleQueue()
        done = self.done_queue
        self.inflight += 1
        self.offloaded += 1
        self.last_launched = gid

        def work():
            if self.cancelled:
                return
            try:
                done.put((gid, it, fn(*args), None))
            except BaseException as exc:  # handed back to the scheduler thread
                done.put((gid, it, None, exc))

        # The pool's threads run the kernel in this thread's mode (flush to zero or not).
        self.pool.submit(in_callers_mode(work))

    def _wait_for_worker(self, deadline):
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        try:
            gid, it, out, exc = self.done_queue.get(timeout=timeout)
        except queue.Empty:
            waiting = self.nodes[self.last_launched].role == RECV
            raise self._deadline_error(self.plan.ops[self.last_launched],
                                       " while waiting for a Recv" if waiting else
                                       " while this kernel ran on a worker thread") from None
        self.inflight -= 1
        if exc is not None:
            raise self._kernel_error(gid, exc)
        # A Recv of a dead token hands back DEAD: all its outputs are dead.
        dead = out is DEAD
        node = self.nodes[gid]
        self._deliver(node.edges, None if dead else out, node.nout, dead, it)
        it.outstanding -= 1
        if not it.outstanding and not it.is_root:
            self._cleanup(it)

    # -- errors ------------------------------------------------------------------------------
    def _kernel_error(self, gid, exc):
        """The OpError to raise for ``exc`` from node ``gid``: it names the node and
        chains the original exception."""
        op = self.plan.ops[gid]
        if isinstance(exc, errors.OpError):
            if exc.op is not None:
                return exc
            err = type(exc)(None, op, exc.message)
        else:
            cls = errors.InvalidArgumentError if isinstance(
                exc, (ValueError, TypeError, IndexError, ArithmeticError, KeyError)) \
                else errors.UnknownError
            err = cls(None, op, f"{type(exc).__name__}: {exc}")
        err.__cause__ = exc
        return err

    @staticmethod
    def _deadline_error(op, where=""):
        return errors.DeadlineExceededError(
            None, op, f"Timed out waiting for the step to finish (RunOptions.timeout_in_ms)"
            f"{where}")


def frame_path(it) -> tuple:
    """``((frame_name, iteration), ...)`` from the root frame down to iteration ``it``:
    the run-time part of a rendezvous key (only Send/Recv nodes compute it)."""
    path = ()
    while not it.is_root:
        frame = it.frame
        path = ((frame.plan.name, it.num),) + path
        it = frame.parent_iter
    return path


def _exit_target(gid, node_dead, it):
    """The Exit rule: the iteration Exit ``gid``'s output in iteration ``it`` goes to, or None.

    A live token goes to the parent iteration at once. A dead one is held back: only
    the newest iteration's dead Exits are kept (``frame.dead_exits``; a new iteration
    clears them, the loop went on), and :meth:`Executor._frame_done` delivers them to the
    parent, dead, when the frame is done. Called by the EXIT role in
    :meth:`Executor._loop`; TO_EXIT edges (an Exit with one input) call its dead half,
    :func:`_dead_exit`, directly (every iteration but the last sends one) and schedule
    the Exit for a live token.
    """
    if not node_dead:
        return it.frame.parent_iter
    _dead_exit(gid, it)
    return None


def _dead_exit(gid, it):
    """A dead token at Exit ``gid`` in iteration ``it`` (the dead half of
    :func:`_exit_target`, called directly for TO_EXIT edges): kept only if ``it`` is
    the newest iteration of its frame."""
    frame = it.frame
    if it.num == frame.iteration_count:
        frame.dead_exits.append(gid)


def _any_heavy(ready, heavy) -> bool:
    for gid, _ in ready:
        if heavy[gid]:
            return True
    return False


def _is_big(inputs, base, end) -> bool:
    """True if a node's array inputs are large enough to be worth a worker thread."""
    total = 0
    for i in range(base, end):
        a = inputs[i]
        if type(a) is np.ndarray:
            total += a.nbytes
    return total >= BIG_BYTES
