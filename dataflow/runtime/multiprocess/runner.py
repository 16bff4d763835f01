"""The worker processes of ``partition_mode="processes"``: one per device.

A :class:`ProcessRunner` belongs to one Session. On the first step it forks one
worker process per device (the "fork" start method: a worker starts with a copy of
the parent's graph, partitions and plans, so nothing but feeds, fetches and
rendezvous values is ever pickled). The workers are joined pairwise by pipes
(:mod:`.pipes`; large arrays go through shared memory, :mod:`.segments`) and live
until the Session closes or the interpreter exits; each step sends every worker a
``run`` message and collects a ``done`` or ``error`` answer::

    runner = ProcessRunner(["/cpu:0", "/cpu:1"], resources={})
    runner.run(program, {"/cpu:0": feeds0, "/cpu:1": feeds1}, deadline=None)
    runner.close()

``program`` is any object with ``run_partition(device, payload, rendezvous, deadline,
pool)`` returning a picklable result; it must exist when the workers are forked. A
step with a program the workers have not seen (a new set of fetches, a graph that
grew) forks a fresh set of workers; the old workers first hand over their variables.

Where state lives: a variable is stored in the process of its device (the Session's
resources dict of that process) and survives across steps and re-forks. Ops that
use a variable must be placed on its device (a variable handle never crosses
processes; trying raises ``InvalidArgumentError``). If a worker is killed, its
variables are lost: the step raises ``AbortedError`` and later steps see those
variables uninitialized.

In processes mode every step runs in the workers, a graph on one device too (so a
variable read alone still comes from its device's process); the parent only
partitions, compiles plans and forwards feeds and fetches.

Failure handling: an error in any worker cancels the step in every worker and the
parent raises it (same type, message, node and op type); a deadline cancels every
worker with ``DeadlineExceededError``; a worker that dies is detected through its
process sentinel; a worker whose parent dies sees its control pipe close, cancels
its step and exits. Shared-memory segments of a step that failed are swept, so are a
killed worker's, and a session's first runner removes those of sessions whose whole
process tree was killed (segment names carry the parent's pid).

Forking with threads: the parent forks only between steps, from the thread that
runs the step (the Session's pool threads are idle then), and a worker never uses
the pool it inherited; it makes its own.

Limits: workers read their peers' pipes only while they wait for a value, so a
worker that computes for a long time without receiving lets messages queue in the
kernel's pipe buffers (some hundred KB; large arrays do not count, they go through
shared memory); two workers that both fill them before reading would wait for each
other. The loops this runtime builds send a few small messages per iteration and
``parallel_iterations`` bounds how far ahead a device can run.
"""
from __future__ import annotations

import atexit
import itertools
import multiprocessing
import os
import queue
import threading
import time
import weakref
from concurrent.futures import ThreadPoolExecutor
from multiprocessing.connection import Pipe, wait

from ... import errors
from ...kernels.resources import handover_state, install_handover_state
from .exceptions import pack_exception, unpack_exception
from .pipes import Endpoint
from .segments import (adopt_arrays, one_shot_prefix, share_arrays, sweep_orphans_once,
                       sweep_segments)

__all__ = ["ProcessRunner"]

# After a cancel, how long workers get to report before they are killed (a worker
# stuck in a long kernel cannot notice the cancel).
CANCEL_GRACE_S = 10.0

_live_runners: weakref.WeakSet[ProcessRunner] = weakref.WeakSet()
_ids = itertools.count(1)


class ProcessRunner:
    """The worker processes of one Session: one per device, forked on first use."""

    def __init__(self, devices, resources: dict, find_op=None):
        self.devices = list(devices)
        self.resources = resources
        self.find_op = find_op                # find_op(device, name): the op of an error
        self.prefix = f"dataflow{os.getpid()}x{next(_ids)}"
        self._workers: dict | None = None    # device -> _Worker
        self._programs: dict = {}            # id -> program, known to the current workers
        self._step = 0
        self._stale = False                  # the workers must be forked again
        self._lock = threading.Lock()
        self._closed = False
        _live_runners.add(self)
        sweep_orphans_once()

    # -- public --------------------------------------------------------------------------------
    def run(self, program, payloads: dict, deadline=None) -> dict:
        """Run ``program`` for one step: ``payloads[device]`` goes to the device's worker;
        returns ``{device: result}`` for the devices in ``payloads``."""
        with self._lock:
            if self._closed:
                raise RuntimeError("Attempted to use a closed Session.")
            self._ensure_workers(program)
            self._step += 1
            return self._run_step(self._step, id(program), payloads, deadline)

    def add_devices(self, devices):
        """Make sure every device of ``devices`` has a worker (new ones: at the next
        step, by forking a new set of workers that take over the variables)."""
        new = [d for d in devices if d not in self.devices]
        if new:
            self.devices = self.devices + new
            self._stale = True

    def pids(self) -> list[int]:
        """Process ids of the live workers (for tests and diagnostics)."""
        return [w.process.pid for w in (self._workers or {}).values()]

    def close(self):
        """Stop the workers (their variables are gone) and remove their segments."""
        with self._lock:
            self._closed = True
            self._stop_workers()
        _live_runners.discard(self)

    # -- workers -------------------------------------------------------------------------------
    def _ensure_workers(self, program):
        if self._workers is not None and id(program) in self._programs and not self._stale \
                and all(w.process.is_alive() for w in self._workers.values()):
            return
        state = self._collect_state()
        self._stop_workers()
        if len(self._programs) > 256:
            self._programs.clear()
        self._programs[id(program)] = program
        self._fork_workers(state)
        self._stale = False

    def _collect_state(self) -> dict:
        """Variables of the live workers, by device (a dead worker's are lost)."""
        state = {}
        for device, w in (self._workers or {}).items():
            if not w.process.is_alive():
                continue
            try:
                w.conn.send(("dump",))
                if w.conn.poll(CANCEL_GRACE_S):
                    state[device] = w.conn.recv()[1]
            except (OSError, EOFError):
                pass
        return state

    def _fork_workers(self, state):
        ctx = multiprocessing.get_context("fork")
        endpoints = Endpoint.mesh(self.devices, self.prefix)
        workers = {}
        try:
            for i, device in enumerate(self.devices):
                parent_end, child_end = Pipe(duplex=True)
                proc = ctx.Process(
                    target=_worker_main, name=f"dataflow-{device}", daemon=True,
                    args=(i, endpoints, child_end, self._programs, self.resources,
                          state.get(device, {}),
                          [parent_end] + [w.conn for w in workers.values()]))
                proc.start()
                child_end.close()
                workers[device] = _Worker(proc, parent_end)
        finally:
            for e in endpoints:
                e.close_connections()   # the parent is not part of the mesh
        self._workers = workers

    def _stop_workers(self):
        workers, self._workers = self._workers, None
        if not workers:
            return
        for w in workers.values():
            try:
                w.conn.send(("stop",))
            except (OSError, EOFError):
                pass
        deadline = time.monotonic() + 2.0
        for w in workers.values():
            w.process.join(max(0.0, deadline - time.monotonic()))
            if w.process.is_alive():
                w.process.kill()
                w.process.join()
            w.conn.close()
            w.process.close()
        sweep_segments(self.prefix)

    # -- one step ------------------------------------------------------------------------------
    def _run_step(self, step, program_id, payloads, deadline):
        workers = self._workers
        active = {}
        for device, payload in payloads.items():
            w = workers[device]
            try:
                w.conn.send(("run", step, program_id, device,
                             share_arrays(payload, self.prefix), deadline))
            except (OSError, EOFError):
                pass  # found dead below through its sentinel
            active[w.process.sentinel] = device
            active[w.conn] = device
        results, error, crashed = {}, None, False
        waiting = set(payloads)
        grace_until = None
        while waiting:
            now = time.monotonic()
            limit = grace_until if grace_until is not None else deadline
            timeout = None if limit is None else max(0.0, limit - now)
            ready = wait(list(active), timeout)
            if not ready:
                if grace_until is not None:  # workers ignore the cancel: kill them
                    crashed = True
                    break
                error = errors.DeadlineExceededError(
                    None, None, "Timed out waiting for the partitions of this step "
                    "(RunOptions.timeout_in_ms)")
                self._cancel(step, error, waiting)
                grace_until = time.monotonic() + CANCEL_GRACE_S
                continue
            for r in ready:
                device = active.get(r)
                if device is None or device not in waiting:
                    continue
                msg = self._answer(r, workers[device], device)
                if msg is None:
                    continue
                if msg[0] == "done" and msg[1] == step:
                    results[device] = adopt_arrays(msg[2])
                elif msg[0] == "error" and msg[1] == step:
                    exc = unpack_exception(msg[2], self._op_finder(device))
                    if msg[2][0] == "crash":
                        crashed = True
                    if error is None or _is_cancel(error) and not _is_cancel(exc):
                        error = exc
                    if grace_until is None:
                        self._cancel(step, error, waiting - {device})
                        grace_until = time.monotonic() + CANCEL_GRACE_S
                else:
                    continue
                waiting.discard(device)
                active = {k: d for k, d in active.items() if d != device}
        if error is not None or crashed:
            if crashed:
                self._stop_workers()  # the next step forks fresh workers
            else:
                sweep_segments(one_shot_prefix(self.prefix))
            raise error
        return results

    def _op_finder(self, device):
        if self.find_op is None:
            return None
        return lambda name: self.find_op(device, name)

    def _answer(self, r, worker, device):
        """The message a ready worker has, or an ("error", ...) for a dead worker."""
        if r is worker.conn:
            try:
                return worker.conn.recv()
            except (EOFError, OSError):
                pass
        elif worker.conn.poll(0):
            return None  # its last answer is still in the pipe: read that first
        worker.process.join(1.0)
        code = worker.process.exitcode
        exc = errors.AbortedError(
            None, None, f"The worker process of device {device} died (exit code {code}) "
            "during the step; its variables are lost.")
        return ("error", self._step, ("crash",) + pack_exception(exc)[1:])

    def _cancel(self, step, exc, devices):
        packed = pack_exception(exc)
        for device in devices:
            try:
                self._workers[device].conn.send(("cancel", step, packed))
            except (OSError, EOFError):
                pass


class _Worker:
    __slots__ = ("conn", "process")

    def __init__(self, process, conn):
        self.process, self.conn = process, conn


def _is_cancel(exc):
    return isinstance(exc, errors.CancelledError)


# -- the worker process ---------------------------------------------------------------------------
def _worker_main(index, endpoints, conn, programs, resources, state, parent_conns):
    """A device process: run the steps the parent sends until told to stop (or until
    the parent is gone: its pipe's EOF ends the current step and the process)."""
    for c in parent_conns:       # the parent's ends of this and earlier workers' pipes:
        c.close()                # closed, so the parent's death reads as EOF here
    for r in list(_live_runners):
        for w in (r._workers or {}).values():   # other sessions' workers' pipes
            w.conn.close()
    endpoint = endpoints[index]
    for e in endpoints:
        if e is not endpoint:
            e.close_connections()
    install_handover_state(resources, state)
    commands = queue.SimpleQueue()

    def on_control(msg):
        if msg is None:                       # the parent is gone
            endpoint.close_all(errors.CancelledError(None, None, "The Session's process "
                                                     "is gone"))
            commands.put(("stop",))
        elif msg[0] == "cancel":
            endpoint.close_step(msg[1], unpack_exception(msg[2]))
        else:
            commands.put(msg)

    endpoint.start_control(conn, on_control)
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="dataflow-worker")
    try:
        while True:
            msg = commands.get()
            if msg[0] == "stop":
                break
            if msg[0] == "dump":
                conn.send(("dump", handover_state(resources)))
                continue
            _, step, program_id, device, payload, deadline = msg
            rendezvous = endpoint.rendezvous(step)
            try:
                result = programs[program_id].run_partition(
                    device, adopt_arrays(payload), rendezvous, deadline, pool)
                answer = ("done", step, share_arrays(result, endpoint.prefix))
                result = None   # drop received arrays, so their segments can go back
            except BaseException as exc:  # noqa: BLE001 - every failure goes to the parent
                endpoint.close_step(step, exc)
                answer = ("error", step, pack_exception(exc))
            else:
                endpoint.close_step(step)
            endpoint.flush_released()   # the step's received arrays are gone by now
            try:
                conn.send(answer)
            except Exception as exc:  # noqa: BLE001 - e.g. an unpicklable fetch
                conn.send(("error", step, pack_exception(errors.InternalError(
                    None, None, f"Cannot send the result of device {device} to the "
                    f"Session: {exc}"))))
    except (OSError, EOFError):
        pass  # the parent is gone
    finally:
        pool.shutdown(wait=False)
        endpoint.shutdown()


@atexit.register
def _close_all():
    for r in list(_live_runners):
        r.close()
