"""The ``"mpi"`` partition mode: each task's partition runs in the MPI rank of that task.

The same script runs on every rank (``dataflow mpirun -n K script.py``). Rank 0 is
the client: it builds the graph and calls ``Session.run``. On every other rank,
creating a Session in this mode enters :func:`serve`, TF1's ``Server.join`` without
the user writing it: the rank runs the partitions rank 0 sends it, for every Session
rank 0 opens, and ends the process (``SystemExit(0)``) when rank 0's interpreter
exits. A device ``/job:worker/task:K/...`` runs on rank K (each task is one CPU
device: every CPU index of a task names the same one).

Per step, rank 0 sends each other rank taking part a ``run`` message (its program's
id, its feeds, the time left), runs its own partition on the calling thread and
collects a ``done`` or ``error`` answer from each. A partition's graph is pickled to
its rank once (the first step that needs it) and compiled there against that rank's
kernels and variables: variables live in the rank of their task and survive across
steps. Step values travel over MPI point to point (:mod:`.transport`).

Failures: an error on any rank cancels the step on every rank and ``run`` raises it
(its type and message, naming the op and its task). A step past its deadline
(``RunOptions(timeout_in_ms)``) is cancelled everywhere and raises
``DeadlineExceededError`` at once, even when a rank hangs; a rank found dead (same
host: its pid is gone; ``dataflow mpirun`` keeps the others alive) makes ``run``
raise ``AbortedError``. A rank that died or did not answer a cancel is lost: later
steps that need it raise ``AbortedError``.

Steps of one Session run one at a time: a ``run`` while another step of the same
Session is running raises ``FailedPreconditionError`` (the ranks serve one step at a
time).

Rank 0 runs a step that involves other ranks on a step thread of its own
(:class:`_StepThread`), and the caller of ``run`` watches it: every MPI call of the
step happens there, so a call that never returns cannot take ``run`` with it. A peer
that dies in the middle of a shared-memory send can leave this rank's receive queue
half-linked, and Open MPI then spins inside the next call for good (see
:mod:`.world`). When the step thread has not finished :data:`WEDGE_GRACE_S` after a
peer was found dead, the caller gives it up, marks the world broken (no thread calls
MPI again) and raises ``AbortedError`` naming the dead task; past the deadline by as
much, it raises ``DeadlineExceededError``. Steps on task 0 alone run on the calling
thread and never call MPI, so they still run once the world is broken.
"""
from __future__ import annotations

import atexit
import functools
import io
import itertools
import os
import pickle
import queue
import threading
import time
import weakref
from collections import deque
from concurrent.futures import ThreadPoolExecutor

from ... import errors
from ...framework.device_spec import parse_device
from ...framework.op_registry import OpDef, get_op_def
from ..executor import _NO_VALUE
from ..feeds import feed_templates
from ..kernel_resolver import KernelResolver
from ..device_set import DeviceSet
from ..multiprocess.exceptions import pack_exception, unpack_exception
from ..partitioned import register_partition_mode, transfer_keys
from ..plan import build_plan
from ..rendezvous import LocalRendezvous
from ..denormals import step_float_mode
from ..tracing import StepStatsCollector, make_executor
from ...util.float_env import in_callers_mode
from .transport import Endpoint, PumpingQueue
from .world import dumps, loads, world

__all__ = ["MpiMode", "serve", "task_device", "rank_of_device"]

_CONTROL, _BUFFERS = 1, 2
CANCEL_GRACE_S = 0.25       # after a cancel, how long rank 0 waits for the others' answers
_LIVENESS_S = 0.05          # how often a waiting rank 0 checks that its peers live
# A step thread still running this long after a peer died (or after the step's
# deadline) is stuck inside Open MPI: its own checks would have ended it by then.
WEDGE_GRACE_S = 1.0
_CHIEF_CHECK_S = 0.25       # how often a serving rank in a step checks that rank 0 lives
_steps = itertools.count(1)  # step numbers, unique in this process (tags come from them)
_sessions = itertools.count(1)
_LOST: set = set()           # ranks that died or stopped answering
_OWING: dict = {}            # rank -> when it was cancelled without answering yet


def task_device(task: int) -> str:
    """The device name of task ``task`` (each task is one CPU device).

    >>> task_device(2)
    '/job:worker/replica:0/task:2/device:CPU:0'
    """
    return f"/job:worker/replica:0/task:{task}/device:CPU:0"


@functools.lru_cache(maxsize=1024)
def rank_of_device(name: str) -> int:
    """The rank that runs device ``name`` (its task; no task: 0).

    >>> rank_of_device('/job:worker/replica:0/task:3/device:CPU:0')
    3
    """
    return parse_device(name).task or 0


# -- the control channel ----------------------------------------------------------------------
class _Control:
    """Pickled messages between rank 0 and the others; NumPy arrays in them travel as
    raw buffers behind the message (pickle protocol 5, out of band)."""

    def __init__(self, w):
        self.w = w
        self.comm = w.control
        self.MPI = w.MPI
        self._status = w.MPI.Status()
        self._lock = threading.Lock()
        self._in_flight: list = []

    def send(self, rank: int, obj):
        """Send ``obj`` to ``rank`` without waiting for it to be received (a rank that
        hangs must not hang the sender): the request and its buffers are kept until done."""
        if self.w.broken_by is not None:
            raise errors.AbortedError(None, None, self.w.broken_by)
        data, buffers = dumps(obj)
        head = pickle.dumps((data, [b.nbytes for b in buffers]), pickle.HIGHEST_PROTOCOL)
        byte = self.MPI.BYTE
        in_mpi, me = self.w.in_mpi, threading.get_ident()
        with self._lock:
            in_mpi[me] = time.monotonic()     # the world's Watchdog looks for stuck calls
            try:
                self._in_flight = [(r, b) for r, b in self._in_flight if not r.Test()]
                for tag, buf in [(_CONTROL, head)] + [(_BUFFERS, b) for b in buffers]:
                    request = self.comm.Isend([buf, byte], rank, tag)
                    if not request.Test():
                        self._in_flight.append((request, buf))
            finally:
                in_mpi.pop(me, None)

    def poll(self, source=None):
        """``(source, message)`` if one has arrived, else None (always, once the world
        is broken: no MPI call then)."""
        if self.w.broken_by is not None:
            return None
        MPI = self.MPI
        status = self._status
        src = MPI.ANY_SOURCE if source is None else source
        in_mpi, me = self.w.in_mpi, threading.get_ident()
        with self._lock:
            in_mpi[me] = time.monotonic()     # the world's Watchdog looks for stuck calls
            try:
                if not self.comm.Iprobe(src, _CONTROL, status):
                    return None
                src = status.Get_source()
                head = bytearray(status.Get_count())
                self.comm.Recv([head, MPI.BYTE], src, _CONTROL)
                data, sizes = pickle.loads(head)
                buffers = []
                for n in sizes:
                    b = bytearray(n)
                    self.comm.Recv([b, MPI.BYTE], src, _BUFFERS)
                    buffers.append(b)
            finally:
                in_mpi.pop(me, None)
        return src, loads(data, buffers)


class _GraphPickler(pickle.Pickler):
    """Pickles a partition graph: op definitions by type (their shape functions are
    registered in every process), the graph's lock as a new lock."""

    _RLOCK = type(threading.RLock())

    def reducer_override(self, obj):
        if isinstance(obj, OpDef):
            return get_op_def, (obj.type,)
        if isinstance(obj, self._RLOCK):
            return threading.RLock, ()
        return NotImplemented


def _pickle_program(plan) -> bytes:
    out = io.BytesIO()
    _GraphPickler(out, pickle.HIGHEST_PROTOCOL).dump(plan.build_args)
    return out.getvalue()


# -- rank 0: the client ---------------------------------------------------------------------------
class _Client:
    """Rank 0's endpoint and control channel (one per process, shared by its Sessions)."""

    _instance = None

    def __init__(self):
        self.w = world()
        self.control = _Control(self.w)
        self.endpoint = Endpoint(self.w, rank_of_device)
        self.step_thread: _StepThread | None = None
        self.stuck: _Job | None = None     # a step given up at its deadline, still in MPI

    @classmethod
    def get(cls):
        if cls._instance is None:
            cls._instance = _Client()
        return cls._instance

    def shutdown(self):
        """Tell every other rank that lives to exit (at interpreter exit), and whether
        to finalize MPI: not once a rank is lost (see :mod:`.world`)."""
        living = [r for r in range(1, self.w.size) if self.w.alive(r)]
        if _LOST or len(living) < self.w.size - 1:
            self.w.forgo_finalize()
        for r in living:
            try:
                self.control.send(r, ("exit", self.w.finalize_at_exit))
            except Exception:  # noqa: BLE001 - a dead peer: nothing to tell
                pass


class MpiMode:
    """The per-Session state of ``partition_mode="mpi"`` on rank 0.

    ::

        sess = df.Session(config=df.ConfigProto(partition_mode="mpi"))
    """

    def __init__(self, session):
        self.client = _Client.get()
        self.sid = next(_sessions)
        self._session = weakref.ref(session)
        self._programs: dict = {}      # id(plan) -> (program id, plan)
        self._sent: set = set()        # (rank, program id) known there
        self._running = threading.Lock()
        self._opened = False
        weakref.finalize(session, _close_remote, self.client, self.sid)

    def run(self, tasks, rendezvous, deadline, pool=None) -> dict:
        if not self._running.acquire(blocking=False):
            raise errors.FailedPreconditionError(
                None, None, "Another step of this Session is running: partition_mode='mpi' "
                "runs the steps of one Session one at a time")
        try:
            if all(rank_of_device(t.device) == 0 for t in tasks):
                return self._run_on_task_0(tasks, deadline, pool)
            job = _step_thread(self.client).submit(
                in_callers_mode(functools.partial(self._run, tasks, deadline, pool)))
            return _supervise(self.client, job, deadline)
        finally:
            self._running.release()

    def _run_on_task_0(self, tasks, deadline, pool):
        """A step on task 0 alone: on the calling thread, without a call to MPI."""
        if not tasks:     # every fetch was fed or folded
            return {}
        step = next(_steps)
        task = tasks[0]
        collector = StepStatsCollector(task.plan, task.device) if task.trace else None
        endpoint = self.client.endpoint
        executor = make_executor(task.plan, pool, task.templates,
                                 endpoint.rendezvous(step), collector)
        try:
            raw = executor.run(deadline)
        finally:
            endpoint.close_step(step)
        if collector is not None:
            task.stats = collector.device_stats()
        return {task.device: raw}

    def _run(self, tasks, deadline, pool):
        client = self.client
        remote = {rank_of_device(t.device): t for t in tasks}
        local = remote.pop(0, None)
        _settle_owing(client, remote)
        for r in remote:
            if r >= client.w.size:
                raise errors.InvalidArgumentError(
                    None, None, f"Device {remote[r].device} needs MPI rank {r}, but this "
                    f"world has {client.w.size} rank(s): run under `dataflow mpirun -n "
                    f"{r + 1}` or more")
            if r in _LOST:
                raise errors.AbortedError(
                    None, None, f"Task {r} (MPI rank {r}) died or stopped answering in an "
                    "earlier step; its variables are lost. Restart the job.")
        step = next(_steps)
        self._start_remote(step, remote, deadline)
        step_run = _StepRun(client, step, set(remote), deadline)
        results = {}
        try:
            if local is not None:
                results[local.device] = step_run.run_local(local, pool)
            results.update(step_run.collect(remote))
        finally:
            client.endpoint.close_step(step)
        return results

    def _start_remote(self, step, remote, deadline):
        control = self.client.control
        if remote and not self._opened:
            for r in range(1, self.client.w.size):
                control.send(r, ("open", self.sid))
            self._opened = True
        timeout = None if deadline is None else max(0.0, deadline - time.monotonic())
        for r, task in remote.items():
            pid = self._program_id(task.plan)
            if (r, pid) not in self._sent:
                control.send(r, ("program", self.sid, pid, _pickle_program(task.plan)))
                self._sent.add((r, pid))
            feeds = _feed_values(task)
            control.send(r, ("run", self.sid, step, pid, feeds, timeout, task.trace))

    def _program_id(self, plan):
        entry = self._programs.get(id(plan))
        if entry is None or entry[1] is not plan:
            if len(self._programs) > 256:
                self._programs.clear()
            entry = self._programs[id(plan)] = (next(_program_ids), plan)
        return entry[0]

    def close(self):
        if self._opened:
            _close_remote(self.client, self.sid)
            self._opened = False
        self._programs.clear()


_program_ids = itertools.count(1)


class _Job:
    """One step handed to the step thread: its outcome, and when it ended."""

    def __init__(self, fn):
        self.fn = fn
        # A plain lock, held until the job ends: waking its waiter costs less than an
        # Event's condition (measured per step of a tiny 2-task step).
        self._ended = threading.Lock()
        self._ended.acquire()
        self.finished = False
        self.result = None
        self.exc: BaseException | None = None

    def run(self):
        try:
            self.result = self.fn()
        except BaseException as exc:  # noqa: BLE001 - handed to the caller
            self.exc = exc
        finally:
            self.fn = None
            self.finished = True
            self._ended.release()

    def wait(self, timeout: float) -> bool:
        """Whether the job ended within ``timeout`` seconds."""
        if self.finished:
            return True
        if self._ended.acquire(timeout=timeout):
            self._ended.release()
            return True
        return False

    def outcome(self):
        if self.exc is not None:
            raise self.exc
        return self.result


class _StepThread:
    """Rank 0's thread for steps with other ranks: every MPI call of a step is made
    here, while the caller of ``run`` watches (:func:`_supervise`)::

        job = _StepThread(world()).submit(lambda: 42)
        job.wait(1.0); job.outcome()       # 42
    """

    def __init__(self, w):
        self._jobs: queue.SimpleQueue = queue.SimpleQueue()
        self.thread = threading.Thread(target=self._serve, name="dataflow-mpi-step",
                                       daemon=True)
        self.thread.start()
        self.w = w
        w.supervised.add(self.thread.ident)   # its stuck calls are _supervise's to judge

    def _serve(self):
        while True:
            self._jobs.get().run()

    def submit(self, fn) -> _Job:
        job = _Job(fn)
        self._jobs.put(job)
        return job

    def park(self):
        """Give the thread up for good (it spins inside MPI): drop its mark of an MPI
        call and let it run only when nothing else wants a core."""
        self.w.in_mpi.pop(self.thread.ident, None)
        try:
            os.sched_setscheduler(self.thread.native_id, os.SCHED_IDLE, os.sched_param(0))
        except (AttributeError, OSError):   # not Linux: it keeps its priority
            pass


def _step_thread(client) -> _StepThread:
    """The client's step thread; refuses a step while one given up earlier still sits
    in MPI (it holds the endpoint), and any step once the world is broken."""
    if client.w.broken_by is not None:
        raise errors.AbortedError(None, None, client.w.broken_by)
    if client.stuck is not None:
        if not client.stuck.finished:
            raise errors.AbortedError(
                None, None, "An earlier step of this process passed its deadline inside an "
                "MPI call that has not returned yet (a task it waits on is stopped); no "
                "step with other tasks can run until it does")
        client.stuck = None
    if client.step_thread is None:
        client.step_thread = _StepThread(client.w)
    return client.step_thread


def _supervise(client, job, deadline):
    """Wait for ``job`` (a step on the step thread) and return its outcome, unless it
    is stuck in MPI: still running :data:`WEDGE_GRACE_S` after a peer died (the world is
    then broken: AbortedError naming the dead task) or after its deadline
    (DeadlineExceededError)."""
    w = client.w
    dead, dead_since = [], None
    while not job.wait(_LIVENESS_S):
        now = time.monotonic()
        if dead_since is None:
            # Every peer, not only the step's: any of them may have half-linked our queue.
            dead = [r for r in range(1, w.size) if not w.alive(r)]
            if dead:
                dead_since = now
        if dead_since is not None and now - dead_since > WEDGE_GRACE_S:
            _give_up_dead(client, dead)
        if deadline is not None and now > deadline + WEDGE_GRACE_S:
            client.stuck = job
            client.step_thread = None
            raise errors.DeadlineExceededError(
                None, None, "Timed out (RunOptions.timeout_in_ms): the step is stuck inside "
                "an MPI call on task 0, behind a task that stopped answering")
    return job.outcome()


def _give_up_dead(client, dead):
    tasks = ", ".join(str(r) for r in dead)
    reason = (f"Task {tasks} (MPI rank {tasks}) died during the step and left task 0 stuck "
              "inside Open MPI (a send cut short halfway leaves the shared-memory queue "
              "it wrote half-linked): this process can make no further MPI call; steps "
              "on task 0 alone still run. Restart the job.")
    client.w.break_(reason)
    for r in dead:
        _lose(client, r)
    client.step_thread.park()
    client.step_thread = None
    raise errors.AbortedError(None, None, reason)


def _settle_owing(client, remote):
    """Before a step, wait (up to CANCEL_GRACE_S after their cancel) for the answers the
    ranks of ``remote`` still owe to an earlier cancelled step; a rank that never
    answers is lost (it hangs)."""
    owing = [r for r in remote if r in _OWING]
    if not owing:
        return
    watcher = _StepRun(client, 0, set(), None)
    while any(r in _OWING for r in owing):
        if not watcher.watch():
            time.sleep(0.0005)
        now = time.monotonic()
        for r in owing:
            since = _OWING.get(r)
            if since is not None and (now - since > CANCEL_GRACE_S
                                      or not client.w.alive(r)):
                _OWING.pop(r)
                _lose(client, r)


def _lose(client, rank):
    """``rank`` died or stopped answering: later steps that need it fail, and no rank
    finalizes MPI at exit (its fence would wait for ``rank``)."""
    _LOST.add(rank)
    client.w.forgo_finalize()


def _close_remote(client, sid):
    for r in range(1, client.w.size):
        if r not in _LOST:
            try:
                client.control.send(r, ("close", sid))
            except Exception:  # noqa: BLE001 - a dead peer
                pass


def _feed_values(task) -> list:
    """The feed values a task's templates were filled with, in the plan's feed order."""
    values = []
    for slots in task.plan.feed_slots:
        if not slots:
            values.append(None)
            continue
        frame, slot = slots[0]
        values.append(task.templates[frame][slot])
    return values


class _StepRun:
    """One step seen from rank 0: its own partition, the others' answers, cancels."""

    def __init__(self, client, step, pending: set, deadline):
        self.client = client
        self.step = step
        self.pending = set(pending)
        self.deadline = deadline
        self.answers: dict = {}
        self.stats: dict = {}          # rank -> its partition's DeviceStepStats (traced steps)
        self.error = None
        self.cancelled = False
        self._next_check = time.monotonic() + _LIVENESS_S

    # Called by the endpoint's pump while rank 0 waits (for a Recv or the answers).
    def watch(self) -> bool:
        got = False
        while True:
            msg = self.client.control.poll()
            if msg is None:
                break
            got = True
            self._answer(*msg)
        now = time.monotonic()
        if now >= self._next_check:
            self._next_check = now + _LIVENESS_S
            for r in list(self.pending):
                if not self.client.w.alive(r):
                    _lose(self.client, r)
                    self.pending.discard(r)
                    self._fail(errors.AbortedError(
                        None, None, f"Task {r} (MPI rank {r}) died during the step; its "
                        "variables are lost."))
        return got

    def _answer(self, source, msg):
        kind, step = msg[0], msg[1]
        if step != self.step or source not in self.pending:
            _OWING.pop(source, None)
            return    # a late answer to a step that is over
        self.pending.discard(source)
        if kind == "done":
            self.answers[source] = msg[2]
            self.stats[source] = msg[3]
        else:
            exc = unpack_exception(msg[2], None)
            self._fail(exc)

    def _fail(self, exc):
        if self.error is None or (isinstance(self.error, errors.CancelledError)
                                  and not isinstance(exc, errors.CancelledError)):
            self.error = exc
        if not self.cancelled:
            self.cancelled = True
            self.client.endpoint.close_step(self.step, exc)
            packed = pack_exception(exc)
            for r in self.pending:
                try:
                    self.client.control.send(r, ("cancel", self.step, packed))
                except Exception:  # noqa: BLE001 - a dead peer
                    pass

    def run_local(self, task, pool):
        endpoint = self.client.endpoint
        collector = StepStatsCollector(task.plan, task.device) if task.trace else None
        executor = make_executor(task.plan, pool, task.templates,
                                 endpoint.rendezvous(self.step), collector)
        executor.done_queue = PumpingQueue(endpoint)
        endpoint.on_idle = self.watch
        try:
            raw = executor.run(self.deadline)
            if collector is not None:
                task.stats = collector.device_stats()
            return raw
        except BaseException as exc:  # noqa: BLE001 - the others are cancelled first
            self._fail(exc)
            return None
        finally:
            endpoint.on_idle = None

    def collect(self, remote) -> dict:
        endpoint = self.client.endpoint
        grace_until = None
        while self.pending:
            got = endpoint.pump() | self.watch()
            now = time.monotonic()
            if self.error is not None and grace_until is None:
                grace_until = now + CANCEL_GRACE_S
            if self.deadline is not None and now > self.deadline:
                if grace_until is None:
                    self._fail(errors.DeadlineExceededError(
                        None, None, "Timed out waiting for the tasks of this step (RunOptions"
                        f".timeout_in_ms); still running: tasks {sorted(self.pending)}"))
                grace_until = now    # past the deadline: raise now, settle them later
            if grace_until is not None and now >= grace_until:
                for r in self.pending:   # they owe an answer to the cancel
                    _OWING[r] = now
                break
            if not got:
                time.sleep(0.0002)
        if self.error is not None:
            raise self.error
        for r, stats in self.stats.items():
            remote[r].stats = stats
        return {remote[r].device: [_NO_VALUE if v is _MISSING else v for v in raw]
                for r, raw in self.answers.items()}


class _Missing:
    """Stands for the executor's ``_NO_VALUE`` (a fetch never computed) in a pickle."""

    __slots__ = ()

    def __reduce__(self):
        return "_MISSING"


_MISSING = _Missing()


# -- the other ranks: serving ---------------------------------------------------------------------
class _Served:
    """One of rank 0's Sessions as a serving rank holds it: its variables and programs."""

    def __init__(self, config):
        self.resources: dict = {}
        self.config = config
        self.programs: dict = {}


def serve(config) -> None:
    """Serve rank 0's Sessions until rank 0 exits, then end this process (SystemExit(0)).

    Called on ranks other than 0 when the script creates a Session in ``"mpi"`` mode.
    """
    w = world()
    control = _Control(w)
    endpoint = Endpoint(w, rank_of_device)
    sessions: dict = {}
    pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="dataflow-mpi")
    held: deque = deque()      # control messages read while a step ran
    idle = 0
    while True:
        msg = held.popleft() if held else control.poll(0)
        if msg is None:
            idle = 0 if endpoint.pump() else idle + 1    # drop values of steps that are over
            time.sleep(0 if idle < 200 else 0.001)
            if idle % 500 == 499 and not w.alive(0):
                w.forgo_finalize()
                break     # rank 0 is gone without saying goodbye (same host: its pid)
            continue
        idle = 0
        body = msg[1]
        kind = body[0]
        if kind == "exit":
            if len(body) > 1 and not body[1]:
                w.forgo_finalize()        # rank 0 lost a rank: see .world
            break
        if kind == "open":
            sessions[body[1]] = _Served(config)
        elif kind == "close":
            served = sessions.pop(body[1], None)
            if served is not None:
                served.resources.clear()
        elif kind == "program":
            _, sid, pid, blob = body
            sessions[sid].programs[pid] = _compile(blob, sessions[sid])
        elif kind == "run":
            _, sid, step, pid, feeds, timeout, trace = body
            served, plan = sessions[sid], sessions[sid].programs[pid]
            with step_float_mode(served.config.flush_denormals, plan):
                answer = _run_step(w, endpoint, control, held, plan, step, feeds, timeout,
                                   pool, trace)
            if not w.alive(0):
                w.forgo_finalize()
                break          # nobody to answer
            control.send(0, answer)
        # "cancel" of a step that is over: nothing to do
    pool.shutdown(wait=False)
    raise SystemExit(0)


def _compile(blob, served):
    graph, fetches, targets, feeds, options = pickle.loads(blob)
    devices = DeviceSet(graph, {}, True)
    kernels = KernelResolver(devices, served.config, served.resources)
    plan = build_plan(graph, fetches, targets, feeds, kernels.kernel_for, **options)
    plan.transfers = transfer_keys(plan)
    return plan


def _run_step(w, endpoint, control, held, plan, step, feeds, timeout, pool, trace=False):
    deadline = None if timeout is None else time.monotonic() + timeout
    rendezvous = endpoint.rendezvous(step)

    next_check = [time.monotonic() + _CHIEF_CHECK_S]

    def watch():
        msg = control.poll(0)
        if msg is None:
            now = time.monotonic()
            if now >= next_check[0]:
                # Rank 0 gone mid-step (or exited without a word, its MPI broken): no
                # cancel will come, and the step may have no deadline.
                next_check[0] = now + _CHIEF_CHECK_S
                if not w.alive(0):
                    w.forgo_finalize()
                    endpoint.close_step(step, errors.AbortedError(
                        None, None, "Task 0 (MPI rank 0) died during the step"))
            return False
        body = msg[1]
        if body[0] == "cancel" and body[1] == step:
            endpoint.close_step(step, unpack_exception(body[2]))
        elif body[0] != "cancel":
            held.append(msg)
        return True

    collector = StepStatsCollector(plan, task_device(w.rank)) if trace else None
    executor = make_executor(plan, pool, feed_templates(plan, feeds), rendezvous, collector)
    executor.done_queue = PumpingQueue(endpoint)
    endpoint.on_idle = watch
    try:
        raw = executor.run(deadline)
        stats = collector.device_stats() if collector is not None else None
        answer = ("done", step, [_MISSING if v is _NO_VALUE else v for v in raw], stats)
    except BaseException as exc:  # noqa: BLE001 - every failure goes to rank 0
        answer = ("error", step, _name_task(pack_exception(exc), w.rank))
    finally:
        endpoint.on_idle = None
        endpoint.close_step(step)
    return answer


def _name_task(packed, rank):
    """The packed error with its task named in the message."""
    if packed[0] != "op" or packed[1] == "CancelledError":
        return packed
    return packed[:2] + (f"{packed[2]} (on task {rank}: {task_device(rank)})",) + packed[3:]


@atexit.register
def _goodbye():
    """At rank 0's exit (an error too), tell the serving ranks to exit: MPI's finalize
    waits for every rank, so they must not wait for rank 0."""
    from .world import _WORLD
    if _WORLD and _WORLD[0].rank == 0 and _WORLD[0].size > 1:
        _Client.get().shutdown()


def _run_needs_a_session(tasks, rendezvous, deadline, pool=None):
    raise errors.UnimplementedError(
        None, None, "partition_mode='mpi' runs through a Session")


def _on_session(session):
    """A Session in ``"mpi"`` mode: on a rank other than 0, serve until rank 0 exits."""
    w = world()
    if w.rank != 0:
        serve(session._config)


def _device_name(devices, op) -> str:
    """Where ``op`` runs in ``"mpi"`` mode: its task's device (the task's only CPU)."""
    spec = parse_device(op.device)
    kind = spec.device_type or "CPU"
    if kind != "CPU" and not devices.allow_soft_placement:
        raise errors.InvalidArgumentError(
            None, op, f"Cannot assign a device for operation {op.name}: {op.device}; in "
            "partition_mode='mpi' each task has one CPU device (pass "
            "allow_soft_placement=True to run it on its task's CPU)")
    task = spec.task or 0
    size = world().size
    if task >= size:
        raise errors.InvalidArgumentError(
            None, op, f"Cannot assign a device for operation {op.name}: {op.device} names "
            f"task {task}, but this MPI world has {size} rank(s) (run under `dataflow "
            f"mpirun -n {task + 1}` or more)")
    return task_device(task)


register_partition_mode("mpi", LocalRendezvous, _run_needs_a_session, per_session=MpiMode,
                        partition_single_device=True, on_session=_on_session,
                        device_name=_device_name, default_device=task_device(0))
