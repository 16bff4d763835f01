"""The executor's delivery code: the two inline copies in ``Executor._loop`` and the
general ``Executor._deliver`` must leave the same state for every edge.

A node's outputs reach its consumers through one of three copies of the same loop
(kept inline for speed, see ``dataflow/runtime/executor.py``). These tests run one
node through each copy on a hand-built plan, over every (edge mode x dead x outputs)
combination and several states of the destination, and compare everything the
delivery can touch. The second half checks the rules themselves on a few cases.
"""
import itertools
import queue

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings

import dataflow as df
from dataflow.runtime.feeds import convert_feeds
from dataflow.runtime.executor import DEAD, Executor, FrameState
from dataflow.runtime.plan import (CONTROL_TO_MERGE, EXIT, MERGE, NEXT_ITERATION, NORMAL,
                                   TO_EXIT, TO_FETCH, TO_MERGE, TO_MERGE_FROM_ENTER, TO_NEXT,
                                   TO_NODE, Edge, FramePlan, NodeInfo, Plan)
from tests.graph_gen import programs, quiet_numpy

# The hand-built loop frame "f" (inside the root frame). Node ids are also the local
# indices in the frame; slot ranges in brackets.
SRC, DST, MRG, EXT, NXT = range(5)   # source [0,1), normal node [1,3), Merge [3,5),
#                                      Exit [5,6), NextIteration [6,7)
DST_SLOT, EXIT_SLOT, NEXT_SLOT = 1, 5, 6
MERGE_INPUTS = 2                     # the Merge's data inputs
OUTPUTS = {1: "out0", 2: ("out0", "out1")}

MODES = ["TO_NODE", "TO_NODE_CONTROL_SLOT", "TO_MERGE", "TO_MERGE_FROM_ENTER",
         "CONTROL_TO_MERGE", "TO_FETCH", "TO_EXIT", "TO_NEXT"]
# (nout, out_index): one output, either output of two, a control edge (k < 0)
OUTPUT_CASES = [(1, 0), (2, 0), (2, 1), (1, -1), (2, -1)]
# The plan makes control edges (k < 0) only into normal nodes (writing no slot) and
# into Merges (test_control_edges_are_only_into_nodes_and_merges checks it on real
# plans); the inline fast path relies on that, so other modes get no k < 0 case.
CONTROL_MODES = ("TO_NODE", "CONTROL_TO_MERGE")
CONTROL_MODES_CODES = (TO_NODE, CONTROL_TO_MERGE)


def _edge(mode, k):
    """The source's out-edge of ``mode`` carrying output ``k``."""
    assert k >= 0 or mode in CONTROL_MODES
    if mode == "TO_NODE":   # a data edge writes its slot; a control edge (k < 0) none
        return Edge(k, DST, DST, DST_SLOT if k >= 0 else -1, TO_NODE)
    if mode == "TO_NODE_CONTROL_SLOT":  # a control edge through a bypassed forwarder
        return Edge(k, DST, DST, -1, TO_NODE)
    if mode in ("TO_MERGE", "TO_MERGE_FROM_ENTER"):
        return Edge(k, MRG, MRG, 0, TO_MERGE if mode == "TO_MERGE" else TO_MERGE_FROM_ENTER)
    if mode == "CONTROL_TO_MERGE":
        return Edge(k, MRG, MRG, -1, CONTROL_TO_MERGE)
    if mode == "TO_FETCH":
        return Edge(k, -1, -1, 0, TO_FETCH)
    if mode == "TO_EXIT":
        return Edge(k, EXT, EXT, EXIT_SLOT, TO_EXIT)
    assert mode == "TO_NEXT"
    return Edge(k, NXT, NXT, NEXT_SLOT, TO_NEXT)


def _plan(edges, nout, parallel_iterations, dst_pending, merge_pending):
    """A plan whose loop frame holds the source (out-edges ``edges``) and one
    destination of each kind; every iteration starts with the given pending counts."""
    root = FramePlan("", None)
    frame = FramePlan("f", root, parallel_iterations, num_enters=1, num_nodes=5,
                      num_slots=7, depth=1)
    frame.pending = [1, dst_pending, merge_pending, 1, 1]
    frame.inputs = ["src-input"] + [None] * 6
    nodes = [
        NodeInfo(NORMAL, SRC, 0, 1, lambda x: OUTPUTS[nout], tuple(edges), nout, False),
        NodeInfo(NORMAL, DST, 1, 3, None, (), 1, False),
        NodeInfo(MERGE, MRG, 3, 5, None, (), 1, False),
        NodeInfo(EXIT, EXT, 5, 6, None, (Edge(0, -1, -1, 1, TO_FETCH),), 1, False),
        NodeInfo(NEXT_ITERATION, NXT, 6, 7, None, (Edge(0, MRG, MRG, 1, TO_MERGE),), 1,
                 False),
    ]
    return Plan(nodes=nodes, ops=[None] * 5, frames={"": root, "f": frame}, root=root,
                root_ready=[], enter_info={}, merge_num_inputs={MRG: MERGE_INPUTS},
                fetches=[None, None], fetch_from_feed={}, feed_slots=[],
                heavy=[False] * 5)


# Where the source runs: (iterations alive, the source's iteration).
ITERATION_CASES = {"only": (1, 0), "older": (2, 0), "newest": (2, 1)}


def _setup(plan, iterations, src_num, pending_enters, merge_dead, node_dead):
    """An executor in the middle of a run: the root iteration has entered frame "f",
    which has ``iterations`` live iterations; the source is scheduled in ``src_num``."""
    ex = Executor(plan)
    root_it = ex.root_iteration = ex._new_iteration(FrameState(plan.root, None, []))
    frame = FrameState(plan.frames["f"], root_it, plan.frames["f"].inputs)
    root_it.children = {"f": frame}
    root_it.outstanding_frames = 1
    for _ in range(iterations):
        ex._new_iteration(frame)
    frame.pending_enters = pending_enters
    it = frame.iterations[src_num]
    it.dead[MRG] = merge_dead
    it.dead[SRC] = int(node_dead)
    it.outstanding = 1       # the source node, about to run
    return ex, it


class _Stopped(Exception):
    pass


class _StopAfterOne(list):
    """A ready list whose second pop stops the scheduler: ``_loop`` runs exactly one node
    (its delivery included) and leaves what it scheduled on the list."""

    def __init__(self, items):
        super().__init__(items)
        self.popped = False

    def pop(self):
        if self.popped:
            raise _Stopped
        self.popped = True
        return super().pop()


def _run_inline(ex, it):
    """The source runs through ``_loop``: its kernel, then the inline delivery loops."""
    ex.ready = _StopAfterOne([(SRC, it)])
    try:
        ex._loop(None)
    except _Stopped:
        pass


def _run_general(ex, it, nout, node_dead):
    """The source's outputs come back as from a worker thread: ``_wait_for_worker``
    hands them to ``_deliver``."""
    ex.done_queue = queue.SimpleQueue()
    ex.done_queue.put((SRC, it, DEAD if node_dead else OUTPUTS[nout], None))
    ex.inflight = 1
    ex._wait_for_worker(None)


def _state(ex):
    """Everything delivery can change, as plain data (iterations named by their tags)."""
    def tag(it):
        return (it.frame.plan.name, it.num)

    def iteration(it):
        inputs = [(type(v).__name__, v) for v in it.inputs]   # np.int32 index vs int
        return (inputs, list(it.pending), list(it.dead), it.outstanding,
                it.outstanding_frames)

    root_it = ex.root_iteration
    frame = (root_it.children or {}).get("f")
    state = {"ready": [(gid, tag(it)) for gid, it in ex.ready],
             "results": list(ex.results), "inflight": ex.inflight,
             "root": iteration(root_it), "frame_alive": frame is not None}
    if frame is not None:
        state.update(
            iteration_count=frame.iteration_count, num_outstanding=frame.num_outstanding,
            pending_enters=frame.pending_enters, dead_exits=list(frame.dead_exits),
            next_iter_roots=[(tuple(tuple(e) for e in edges), v)
                             for edges, v in frame.next_iter_roots],
            invariants=list(frame.invariants),
            iterations={n: iteration(it) for n, it in frame.iterations.items()})
    return state


def _scenarios():
    """Destination states: iterations alive, parallel_iterations at the limit or not,
    the normal node one token from ready or two, the Merge undecided / undecided with a
    control input / decided waiting for a control input / fired, with 0 or 1 dead data
    inputs, the last Enter in or not."""
    for (iters, src_num), at_limit, dst_pending, merge_pending, merge_dead, enters in \
            itertools.product(ITERATION_CASES.values(), (True, False), (1, 2),
                              (1, 3, 2, 0), (0, 1), (0, 1)):
        yield dict(iterations=iters, src_num=src_num,
                   parallel_iterations=iters if at_limit else 10, dst_pending=dst_pending,
                   merge_pending=merge_pending, merge_dead=merge_dead, pending_enters=enters)


def _both(mode, node_dead, nout, k, sc):
    """Run one source node through the inline loop and through ``_deliver`` from the
    same starting state; return the starting state and both final states."""
    if mode == "ALL":   # one edge of every mode, in one node
        edges = [_edge(m, k) for m in MODES if k >= 0 or m in CONTROL_MODES]
    else:
        edges = [_edge(mode, k)]
    states = []
    for run in ("inline", "general"):
        plan = _plan(edges, nout, sc["parallel_iterations"], sc["dst_pending"],
                     sc["merge_pending"])
        ex, it = _setup(plan, sc["iterations"], sc["src_num"], sc["pending_enters"],
                        sc["merge_dead"], node_dead)
        if run == "inline":
            before = _state(ex)
            _run_inline(ex, it)
        else:
            _run_general(ex, it, nout, node_dead)
        states.append(_state(ex))
    return before, states[0], states[1]


@pytest.mark.parametrize("mode,node_dead,nout,k", [
    (mode, dead, nout, k) for mode in MODES + ["ALL"] for dead in (False, True)
    for nout, k in OUTPUT_CASES if k >= 0 or mode in CONTROL_MODES + ("ALL",)])
def test_inline_delivery_and_deliver_agree(mode, node_dead, nout, k):
    changed = 0
    for sc in _scenarios():
        before, inline, general = _both(mode, node_dead, nout, k, sc)
        assert inline == general, sc
        changed += inline != before
    assert changed   # the cases really delivered something


# -- the rules themselves, on both paths -----------------------------------------------

def _run(mode, node_dead, driver, nout=1, k=0, **scenario):
    sc = dict(iterations=1, src_num=0, parallel_iterations=10, dst_pending=2,
              merge_pending=1, merge_dead=0, pending_enters=1)
    sc.update(scenario)
    plan = _plan([_edge(mode, k)], nout, sc["parallel_iterations"], sc["dst_pending"],
                 sc["merge_pending"])
    ex, it = _setup(plan, sc["iterations"], sc["src_num"], sc["pending_enters"],
                    sc["merge_dead"], node_dead)
    if driver == "inline":
        _run_inline(ex, it)
    else:
        _run_general(ex, it, nout, node_dead)
    return ex, it


DRIVERS = ["inline", "general"]


@pytest.mark.parametrize("driver", DRIVERS)
def test_tokens_count_down_a_normal_node(driver):
    ex, it = _run("TO_NODE", False, driver, nout=2, k=1, dst_pending=1)
    assert it.inputs[DST_SLOT] == "out1" and it.pending[DST] == 0 and it.dead[DST] == 0
    assert [(g, i.num) for g, i in ex.ready] == [(DST, 0)]
    ex, it = _run("TO_NODE", True, driver, dst_pending=2)
    assert it.inputs[DST_SLOT] is None and it.pending[DST] == 1 and it.dead[DST] == 1
    assert not ex.ready


@pytest.mark.parametrize("driver", DRIVERS)
def test_merge_takes_the_first_live_input_and_dies_at_once_on_a_dead_enter(driver):
    ex, it = _run("TO_MERGE", False, driver, merge_pending=1)
    assert it.inputs[3:5] == ["out0", np.int32(0)] and it.pending[MRG] == 0
    assert [g for g, _ in ex.ready] == [MRG]
    # A dead input that is neither from an Enter nor the last one: still undecided.
    ex, it = _run("TO_MERGE", True, driver, merge_pending=1, merge_dead=0)
    assert it.pending[MRG] == 1 and it.dead[MRG] == 1 and not ex.ready
    # The last data input, all dead: the Merge fires dead.
    ex, it = _run("TO_MERGE", True, driver, merge_pending=1, merge_dead=1)
    assert it.inputs[3] is DEAD and [g for g, _ in ex.ready] == [MRG]
    # A dead input from an Enter decides at once (a loop on an untaken branch).
    ex, it = _run("TO_MERGE_FROM_ENTER", True, driver, merge_pending=1, merge_dead=0)
    assert it.inputs[3] is DEAD and [g for g, _ in ex.ready] == [MRG]
    # A control input takes 2 from the count, whatever its deadness.
    ex, it = _run("CONTROL_TO_MERGE", True, driver, k=-1, merge_pending=3)
    assert it.pending[MRG] == 1 and not ex.ready


@pytest.mark.parametrize("driver", DRIVERS)
def test_next_iteration_starts_the_next_iteration_or_waits(driver):
    ex, it = _run("TO_NEXT", False, driver, parallel_iterations=2)
    frame = it.frame
    assert frame.iteration_count == 1 and frame.iterations[1].inputs[3:5] == [
        "out0", np.int32(1)]
    # parallel_iterations iterations in flight: the value waits for the next one.
    ex, it = _run("TO_NEXT", False, driver, parallel_iterations=1)
    frame = it.frame
    assert frame.iteration_count == 0 and [v for _, v in frame.next_iter_roots] == ["out0"]
    # A dead token stops there.
    ex, it = _run("TO_NEXT", True, driver, parallel_iterations=2)
    assert it.frame.iteration_count == 0 and not it.frame.next_iter_roots


@pytest.mark.parametrize("driver", DRIVERS)
def test_only_the_newest_iterations_dead_exits_are_kept(driver):
    ex, it = _run("TO_EXIT", True, driver, iterations=2, src_num=1)
    assert it.frame.dead_exits == [EXT] and not ex.ready
    ex, it = _run("TO_EXIT", True, driver, iterations=2, src_num=0)
    assert it.frame.dead_exits == []
    # A live token schedules the Exit at once.
    ex, it = _run("TO_EXIT", False, driver)
    assert it.inputs[EXIT_SLOT] == "out0" and [g for g, _ in ex.ready] == [EXT]


@pytest.mark.parametrize("driver", DRIVERS)
def test_a_done_frame_hands_its_dead_exits_to_the_parent(driver):
    # Iteration 0 is the frame's only one and every Enter has run: once the source has
    # delivered, the frame is done and the Exit's dead token reaches the fetch.
    ex, it = _run("TO_EXIT", True, driver, pending_enters=0)
    assert not ex.root_iteration.children and ex.root_iteration.outstanding_frames == 0
    assert ex.results[1] is DEAD


# -- what the fast path assumes of real plans ----------------------------------------------

@settings(max_examples=150, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(program=programs(max_statements=8))
def test_control_edges_are_only_into_nodes_and_merges(program):
    """The inline fast path hands a control edge (out_index < 0) the node's output and
    relies on it writing nothing: control edges go only into normal nodes (slot -1) and
    Merges. Every edge mode matches its destination's role, and the scheduler's plain
    tuples are exact copies of the NodeInfo/Edge NamedTuples."""
    graph, fetches, feeds = program.build()
    config = df.ConfigProto(fold_constants=program.fold_constants)
    with quiet_numpy(), df.Session(graph=graph, config=config) as sess:
        feed_tensors, _ = convert_feeds(graph, feeds)
        plan = sess._plans.get(graph, list(fetches), [], feed_tensors)
    role_of_mode = {TO_EXIT: EXIT, TO_NEXT: NEXT_ITERATION, TO_MERGE: MERGE,
                    TO_MERGE_FROM_ENTER: MERGE, CONTROL_TO_MERGE: MERGE}
    for node, plain in zip(plan.nodes, plan.node_tuples):
        assert type(plain) is tuple and plain == node
        assert all(type(e) is tuple for e in plain[NodeInfo._fields.index("edges")])
        for e in node.edges:
            if e.out_index < 0:
                assert e.mode in CONTROL_MODES_CODES and e.dst_slot == -1, e
            if e.mode == TO_FETCH:
                assert e.dst_gid == -1
            elif e.mode in role_of_mode:
                assert plan.nodes[e.dst_gid].role == role_of_mode[e.mode], e
            else:
                assert plan.nodes[e.dst_gid].role not in (MERGE,), e
