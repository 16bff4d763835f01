"""The ``"processes"`` partition mode: each device's partition in its own worker process.

:class:`ProcessMode` is the per-Session state the mode registers
(:func:`~dataflow.runtime.partitioned.register_partition_mode`): it turns a step's
partition tasks into a :class:`_PartitionProgram` (the plans by device, known to the
workers when they are forked) and the feed values each worker needs, and hands them
to the Session's :class:`~.runner.ProcessRunner`.

>>> sess = df.Session(config=df.ConfigProto(partition_mode="processes"))  # doctest: +SKIP
"""
from __future__ import annotations

import weakref

from ... import errors
from ..denormals import step_float_mode
from ..executor import _NO_VALUE
from ..feeds import feed_templates
from ..partitioned import register_partition_mode
from ..rendezvous import LocalRendezvous
from ..tracing import StepStatsCollector, make_executor
from .runner import ProcessRunner

__all__ = ["ProcessMode"]


class _Missing:
    """Stands for the executor's ``_NO_VALUE`` (a fetch never computed) in a pickle."""

    __slots__ = ()

    def __reduce__(self):
        return "_MISSING"


_MISSING = _Missing()


class _PartitionProgram:
    """The plans of one partitioned plan, by device: what a worker runs for a step."""

    def __init__(self, plans: dict):
        self.plans = plans

    def run_partition(self, device, payload, rendezvous, deadline, pool):
        """``payload`` is ``(feed values, trace, flush_denormals)``; returns ``(raw
        results, stats)``, the partition's DeviceStepStats list when ``trace`` (else
        None)."""
        feed_values, trace, flush = payload
        plan = self.plans[device]
        with step_float_mode(flush, plan):   # this process's thread and BLAS pool
            return self._run(plan, device, feed_values, trace, rendezvous, deadline, pool)

    @staticmethod
    def _run(plan, device, feed_values, trace, rendezvous, deadline, pool):
        templates = feed_templates(plan, feed_values)
        collector = StepStatsCollector(plan, device) if trace else None
        executor = make_executor(plan, pool, templates, rendezvous, collector)
        # The executor waits for Recvs on its completion queue: this one reads the peers'
        # pipes on the executor's own thread while it waits (no hand-off from a reader thread).
        executor.done_queue = rendezvous.completion_queue()
        raw = executor.run(deadline)
        stats = collector.device_stats() if trace else None
        return [_MISSING if v is _NO_VALUE else v for v in raw], stats


def _feed_values(task) -> list:
    """The feed values a task's templates were filled with, in the plan's feed order."""
    values = []
    for slots in task.plan.feed_slots:
        if not slots:            # a feed no node of this plan reads
            values.append(None)
            continue
        frame, slot = slots[0]
        values.append(task.templates[frame][slot])
    return values


class ProcessMode:
    """The per-Session state of ``partition_mode="processes"``: its worker processes.
    Steps of one Session run one at a time in this mode.

    >>> import dataflow as df
    >>> sess = df.Session(config=df.ConfigProto(partition_mode="processes"))
    >>> sess.close()
    """

    def __init__(self, session):
        self._session = weakref.ref(session)
        self._runner = None
        self._programs: dict = {}   # tuple of plan ids -> _PartitionProgram
        # A Session dropped without close() still stops its workers.
        weakref.finalize(session, self.close)

    def _runner_for(self, devices):
        if self._runner is None:
            self._runner = ProcessRunner(sorted(devices), self._session()._resources,
                                         self._find_op)
        else:
            self._runner.add_devices(devices)
        return self._runner

    def _find_op(self, device, name):
        """The op an error from ``device``'s worker names: the partition's copy (as the
        threads mode reports it), else the user's op of that name."""
        for program in self._programs.values():
            plan = program.plans.get(device)
            for op in (plan.ops if plan is not None else ()):
                if op.name == name:
                    return op
        session = self._session()
        try:
            return session.graph.get_operation_by_name(name) if session else None
        except (KeyError, ValueError):
            return None

    def run(self, tasks, rendezvous, deadline, pool=None) -> dict:
        """Run one step's partition tasks, each in its device's worker process."""
        key = tuple(id(t.plan) for t in tasks)
        program = self._programs.get(key)
        if program is None:
            if len(self._programs) > 256:   # as the Session's plan cache: start afresh
                self._programs.clear()
            program = self._programs[key] = _PartitionProgram({t.device: t.plan for t in tasks})
        runner = self._runner_for([t.device for t in tasks])
        flush = self._session()._config.flush_denormals
        payloads = {t.device: (_feed_values(t) if t.templates else [], t.trace, flush)
                    for t in tasks}
        results = runner.run(program, payloads, deadline)
        for t in tasks:
            t.stats = results[t.device][1]
        return {d: [_NO_VALUE if v is _MISSING else v for v in raw]
                for d, (raw, _stats) in results.items()}

    def close(self):
        if self._runner is not None:
            self._runner.close()
            self._runner = None
        self._programs.clear()


def _run_needs_a_session(tasks, rendezvous, deadline, pool=None):
    raise errors.UnimplementedError(
        None, None, "partition_mode='processes' runs through a Session (its worker "
        "processes belong to the Session)")


# ConfigProto(partition_mode="processes") gives each Session a ProcessMode, and graphs
# on one device partition too (their variables live in that device's process).
register_partition_mode("processes", LocalRendezvous, _run_needs_a_session,
                        per_session=ProcessMode, partition_single_device=True)
