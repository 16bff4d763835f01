"""Running a partitioned graph: one plan and executor per device, joined by a rendezvous.

A :class:`PartitionedPlan` is compiled once (the Session caches it like a plan): the
registered partitioner (:func:`dataflow.partition`, which registers itself with
:func:`register_partitioner`: the runtime sits below the partitioning pass and never
imports it) splits the graph, and each partition gets its own
:class:`~dataflow.runtime.plan.Plan`. A step creates one rendezvous and hands the
partitions to a *runner*, the strategy that runs them (threads here; the processes
mode registers its own). If any partition fails or the step runs past its deadline,
the rendezvous is cancelled so every other partition stops waiting, and the step
raises the first real error (one that names the failing node and op type).

How the Session uses it (``kernel_for`` resolves an op's kernel)::

    register_partition_mode("threads", LocalRendezvous, run_on_threads)
    pplan = build_partitioned_plan(graph, fetches, [], [], kernel_for)
    raw = run_partitioned(pplan, [], deadline=None)
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

from .. import errors
from ..util.float_env import in_callers_mode
from .plan import RECV, SEND, build_plan
from .rendezvous import LocalRendezvous
from .tracing import StepStatsCollector, make_executor

__all__ = ["PartitionTask", "PartitionedPlan", "build_partitioned_plan", "partition_mode",
           "register_partition_mode", "register_partitioner", "run_on_threads",
           "run_partitioned"]


@dataclass(frozen=True)
class PartitionMode:
    """How a step runs its partitions: ``rendezvous_factory()`` makes the step's
    rendezvous; ``runner(tasks, rendezvous, deadline, pool)`` runs every
    :class:`PartitionTask` and returns ``{device: raw results}``."""

    name: str
    rendezvous_factory: Callable
    runner: Callable
    # Optional, for a mode with per-Session state (the processes mode's workers):
    # ``per_session(session)`` makes it once per Session; its ``run(tasks, rendezvous,
    # deadline, pool)`` replaces ``runner`` and Session.close calls its ``close()``.
    per_session: Callable | None = None
    # Partition graphs on one device too (the processes mode: state lives in workers).
    partition_single_device: bool = False
    # Optional, for a mode whose processes all run the user's script (the MPI mode):
    # ``on_session(session)`` runs when a Session in this mode is created.
    on_session: Callable | None = None
    # Optional: ``device_name(devices, op)`` names the device of a placed op (the MPI
    # mode keeps the task), ``default_device`` runs unplaced ops.
    device_name: Callable | None = None
    default_device: str = "/device:CPU:0"


_MODES: dict = {}


def register_partition_mode(name: str, rendezvous_factory, runner, *, per_session=None,
                            partition_single_device=False, on_session=None,
                            device_name=None, default_device="/device:CPU:0") -> None:
    """Make ``ConfigProto(partition_mode=name)`` run partitions with ``runner``.

    >>> register_partition_mode("threads", LocalRendezvous, run_on_threads)
    """
    _MODES[name] = PartitionMode(name, rendezvous_factory, runner, per_session,
                                 partition_single_device, on_session, device_name,
                                 default_device)


def partition_mode(name: str) -> PartitionMode:
    """The registered mode ``name``; UnimplementedError naming the available ones."""
    mode = _MODES.get(name)
    if mode is None:
        raise errors.UnimplementedError(
            None, None, f"Partition mode {name!r} is not available; registered modes: "
            f"{sorted(_MODES)}")
    return mode


# The graph partitioner: ``partitioner(graph, fetches, feeds, default_device=, resolve=)``
# returns a PartitionResult. dataflow.partition registers df.partition when imported
# (``import dataflow`` imports it).
_PARTITIONER: list = []


def register_partitioner(partitioner) -> None:
    """Make ``partitioner`` the function that splits a graph into per-device partitions
    for :func:`build_partitioned_plan` (``dataflow.partition`` registers its own).

    >>> from dataflow.partition import partition
    >>> register_partitioner(partition)
    """
    _PARTITIONER[:] = [partitioner]


def _partitioner():
    if not _PARTITIONER:
        raise errors.UnimplementedError(
            None, None, "No graph partitioner is registered: import dataflow.partition")
    return _PARTITIONER[0]


@dataclass(eq=False)
class PartitionTask:
    """One partition of one step: its device, plan and per-frame input templates."""

    device: str
    plan: object
    templates: dict | None
    # Tracing: a runner that sees ``trace`` runs the partition with a StepStatsCollector
    # (tracing.make_executor) and stores its ``device_stats()`` in ``stats``;
    # run_partitioned merges them into the step's StepStats.
    trace: bool = False
    stats: list | None = None


@dataclass(eq=False)
class PartitionedPlan:
    """Per-device plans of one (graph, fetches, feeds) triple.

    ``plans[device]`` is a Plan; ``fetch_at[j]`` is ``(device, index in that plan's
    fetches)`` for fetch ``j`` (None when the fetch is fed); ``feed_at[device]`` lists,
    per feed slot of that plan, the index of the Session's feed; ``result`` is the
    :class:`~dataflow.partition.PartitionResult`.
    """

    result: object
    plans: dict
    fetch_at: list
    feed_at: dict
    fetch_from_feed: dict

    @property
    def nodes(self) -> list:
        return [n for p in self.plans.values() for n in p.nodes]


def build_partitioned_plan(graph, fetch_tensors, target_ops, feed_tensors, kernel_for, *,
                           default_device=None, resolve=None, **plan_options):
    """Partition the graph and compile one plan per device; ``plan_options`` go to
    :func:`~dataflow.runtime.plan.build_plan` (``fold_constants``...)."""
    result = _partitioner()(graph, list(fetch_tensors) + list(target_ops), feed_tensors,
                            default_device=default_device, resolve=resolve)
    feed_index = {t: i for i, t in enumerate(feed_tensors)}
    fetch_at, plans, feed_at = [], {}, {}
    per_device = {d: [] for d in result.partitions}
    fetch_from_feed = {}
    for j, where in enumerate(result.fetches):
        if where is None:
            fetch_at.append(None)
            fetch_from_feed[j] = feed_index[fetch_tensors[j]]
        else:
            d, t = where
            fetch_at.append((d, len(per_device[d])))
            per_device[d].append(t)
    for d, part in result.partitions.items():
        feeds = result.feeds.get(d, [])
        feed_at[d] = [feed_index[t] for t, _ in feeds]
        plan = build_plan(part, per_device[d], result.targets[d], [ph for _, ph in feeds],
                          kernel_for, **plan_options)
        plan.transfers = transfer_keys(plan)
        # What compiles this plan again in another process (the MPI mode ships it).
        plan.build_args = (part, per_device[d], result.targets[d], [ph for _, ph in feeds],
                           plan_options)
        plans[d] = plan
    return PartitionedPlan(result, plans, fetch_at, feed_at, fetch_from_feed)


def transfer_keys(plan) -> dict:
    """``{gid: (send_device, recv_device, tensor_name)}`` of the plan's Send/Recv nodes."""
    return {gid: (op.get_attr("send_device"), op.get_attr("recv_device"),
                  op.get_attr("tensor_name"))
            for gid, op in enumerate(plan.ops) if plan.nodes[gid].role in (SEND, RECV)}


def run_partitioned(pplan: PartitionedPlan, feed_values, deadline=None, mode="threads",
                    pool=None, templates_for=None, rendezvous=None, runner=None,
                    stats=None) -> list:
    """Run one step; returns the raw fetched values in fetch order (fed fetches: None,
    the caller fills them in). ``templates_for(plan, values)`` fills feeds into a plan's
    input templates (:func:`~dataflow.runtime.feeds.feed_templates`). ``rendezvous``
    and ``runner`` override the mode's (a runner with per-Session state, say). With
    ``stats`` (a :class:`~.step_stats.StepStats`) every partition is traced and the
    partitions' statistics are merged into it."""
    m = partition_mode(mode)
    rv = rendezvous if rendezvous is not None else m.rendezvous_factory()
    runner = runner if runner is not None else m.runner
    tasks = []
    for d, plan in pplan.plans.items():
        values = [feed_values[i] for i in pplan.feed_at[d]]
        templates = templates_for(plan, values) if templates_for is not None else None
        tasks.append(PartitionTask(d, plan, templates, trace=stats is not None))
    try:
        results = runner(tasks, rv, deadline, pool)
    except errors.OpError as exc:
        _name_the_users_op(exc, pplan.result.graph)
        raise
    if stats is not None:
        for t in tasks:
            stats.merge(t.stats or [])
    raw = []
    for where in pplan.fetch_at:
        raw.append(None if where is None else results[where[0]][where[1]])
    return raw


def run_on_threads(tasks, rendezvous, deadline, pool=None) -> dict:
    """The threads runner: the first partition runs on the calling thread, each other
    one on a thread of its own. The first failure cancels the rendezvous (waking every
    partition that waits on a Recv) and stops the others at their next iteration start
    (a partition may run a loop that never waits on another one)."""
    collectors = {t.device: StepStatsCollector(t.plan, t.device) if t.trace else None
                  for t in tasks}
    executors = {t.device: make_executor(t.plan, pool, t.templates, rendezvous,
                                         collectors[t.device]) for t in tasks}
    results: dict = {}
    failures: list = []
    lock = threading.Lock()

    def run(task):
        try:
            results[task.device] = executors[task.device].run(deadline)
        except BaseException as exc:  # noqa: BLE001 - handed to the calling thread
            with lock:
                failures.append(exc)
                first = len(failures) == 1
            if first:
                _stop_all(executors, rendezvous, task.device, exc)

    # Each partition thread runs in the calling thread's floating-point mode.
    threads = [threading.Thread(target=in_callers_mode(run), args=(t,), daemon=True,
                                name=f"dataflow-partition-{t.device}") for t in tasks[1:]]
    for th in threads:
        th.start()
    run(tasks[0])
    for th in threads:
        th.join()
    if failures:
        raise _first_real_error(failures)
    for t in tasks:
        if collectors[t.device] is not None:
            t.stats = collectors[t.device].device_stats()
    return results


def _stop_all(executors, rendezvous, failed_device, exc):
    rendezvous.cancel(errors.CancelledError(
        None, None, f"Step cancelled: the partition on {failed_device} failed "
        f"({type(exc).__name__})"))
    for device, ex in executors.items():
        if device != failed_device:
            ex.deadline = 0.0   # the executor checks it whenever it starts an iteration


def _name_the_users_op(exc, graph):
    """Point ``exc.op`` at the user's op (partition copies keep the user's names), so
    ``e.op`` is an op of the graph the user built, as in a single-device run."""
    op = exc.op
    if op is not None and op.graph is not graph:
        exc.op = graph._ops_by_name.get(op.name, op)


def _first_real_error(failures):
    """The error that caused the cancellation, not a partition's CancelledError."""
    for exc in failures:
        if not isinstance(exc, errors.CancelledError):
            return exc
    return failures[0]


register_partition_mode("threads", LocalRendezvous, run_on_threads)
from . import multiprocess  # noqa: E402,F401  registers the "processes" mode
from . import mpi  # noqa: E402,F401  registers the "mpi" mode (mpi4py imported on use)
