"""Step values between MPI ranks: the wire format, the pump and the step rendezvous.

Every rank owns one :class:`Endpoint`. A Send to a device of another rank becomes
one small *header* message, and for an array beyond :data:`INLINE_BYTES` one raw
buffer message right behind it (the array's bytes, never pickled). The header is a
pickled tuple ``(step, key, kind, dtype, shape, inline)``: the rendezvous key
carries the frame/iteration path, ``kind`` says dead / array / pickled object.
Scalars and small arrays (a loop predicate, a counter) travel inline in the header:
one message.

Tags: step ``s`` owns the tags ``BASE + 2 * (s % STEP_TAGS)`` (headers) and the next
one (buffers), so no value of one step can be matched by another; a value for a
step that is over is received and dropped. Messages from one sender to one receiver
are not overtaken (MPI's ordering rule), so the buffer behind a header is the next
buffer-tagged message from that sender.

There is no receiving thread: a thread that waits for a value pumps the
communicator itself (:meth:`Endpoint.pump`, via :class:`PumpingQueue`, the
executor's completion queue), as the processes mode reads its pipes. Large sends
are non-blocking (``Isend``), kept until complete, so two ranks that send each other
large arrays before receiving never wait on each other.
"""
from __future__ import annotations

import os
import pickle
import queue
import threading
import time

import numpy as np

from ... import errors
from ...kernels.resources import is_process_local
from ..rendezvous import LocalRendezvous, Rendezvous

__all__ = ["Endpoint", "MpiRendezvous", "PumpingQueue", "INLINE_BYTES"]

INLINE_BYTES = 512            # arrays up to this size travel inside their header
BASE_TAG = 16
STEP_TAGS = 1 << 20
_DEAD, _INLINE, _BUFFER, _OBJECT = range(4)
# A waiter polls without sleeping for a while (as MPI's blocking calls do), then naps,
# each nap a quarter of the time waited so far (at most _MAX_NAP_S). Spinning answers
# fastest while every rank has a core to itself; when the ranks (and whatever else runs)
# share the cores, the spinner takes the CPU from the rank it waits for: on 2 shared
# cores the 2-task scalar loop ran 195 µs/iteration spinning 20 ms, 85 µs napping at
# once. So the spin is long only when the host's ranks fill at most half its cores.
# DATAFLOW_MPI_SPIN_US overrides both.
_SPIN_CORES_S = 0.02
_SPIN_SHARED_S = 0.0001
_MAX_NAP_S = 0.001


def spin_seconds(world) -> float:
    """How long a waiter of ``world`` spins before it naps."""
    if "DATAFLOW_MPI_SPIN_US" in os.environ:
        return float(os.environ["DATAFLOW_MPI_SPIN_US"]) * 1e-6
    host = os.uname().nodename
    here = sum(1 for h, _ in world.places if h == host)
    return _SPIN_CORES_S if 2 * here <= (os.cpu_count() or 1) else _SPIN_SHARED_S


def step_tag(step: int) -> int:
    """The header tag of ``step`` (its buffer tag is the next one)."""
    return BASE_TAG + 2 * (step % STEP_TAGS)


def _tag_step(tag: int) -> int:
    return ((tag - BASE_TAG) // 2)


class MpiRendezvous(Rendezvous):
    """The rendezvous of one step seen from one rank: sends to another rank's device go
    over MPI, receives wait in this rank's table of the step (filled by the pump)."""

    def __init__(self, endpoint: Endpoint, step: int, table: LocalRendezvous):
        self._endpoint = endpoint
        self._step = step
        self._table = table
        self.poll = table.poll
        self.recv_async = table.recv_async

    def send(self, key, value, is_dead):
        rank = self._endpoint.rank_of(key[1])
        if rank == self._endpoint.rank:
            self._table.send(key, value, is_dead)
        else:
            self._endpoint.send_value(rank, self._step, key, value, is_dead)

    def recv_async(self, key, done):  # each instance binds the table's method instead
        self._table.recv_async(key, done)

    def completion_queue(self) -> PumpingQueue:
        return PumpingQueue(self._endpoint)

    def recv(self, key, timeout=None):
        """Blocking helper (pumps while it waits)."""
        q = PumpingQueue(self._endpoint)
        self._table.recv_async(key, lambda v, d, e: q.put((v, d, e)))
        try:
            value, is_dead, exc = q.get(timeout)
        except queue.Empty:
            raise errors.DeadlineExceededError(None, None,
                                               f"Timed out receiving {key!r}") from None
        if exc is not None:
            raise exc
        return value, is_dead

    def cancel(self, exc):
        self._endpoint.close_step(self._step, exc)


class PumpingQueue:
    """An executor completion queue whose ``get`` pumps the endpoint while empty."""

    def __init__(self, endpoint: Endpoint):
        self._queue = queue.SimpleQueue()
        self._endpoint = endpoint
        self.put = self._queue.put

    def get(self, timeout=None):
        limit = None if timeout is None else time.monotonic() + timeout
        get_nowait = self._queue.get_nowait
        pump = self._endpoint.pump
        spin = self._endpoint.spin_s
        idle_since = None
        while True:
            try:
                return get_nowait()
            except queue.Empty:
                pass
            busy = pump()
            now = time.monotonic()
            if limit is not None and now >= limit:
                raise queue.Empty
            if busy:
                idle_since = None
                continue
            if idle_since is None:
                idle_since = now
            elif now - idle_since > spin:
                time.sleep(min(_MAX_NAP_S, (now - idle_since) / 4))


class Endpoint:
    """This rank's side of the step traffic: the data communicator, the per-step tables
    of values that arrived, the sends still in flight. ``rank_of(device)`` maps a
    device name to the rank that runs it. ``on_idle()``, when given, is called by
    :meth:`pump` (the control channel watches for cancels and errors that way)."""

    def __init__(self, world, rank_of):
        self.world = world
        self.MPI = world.MPI
        self.comm = world.data
        self.rank = world.rank
        self.rank_of = rank_of
        self._status = self.MPI.Status()
        self._lock = threading.Lock()
        self._pump_lock = threading.Lock()
        self._send_lock = threading.Lock()
        self._tables: dict[int, LocalRendezvous] = {}
        self._closed_through = 0
        self._in_flight: list = []       # (request, buffer) of sends not yet complete
        self.on_idle = None
        self.spin_s = spin_seconds(world)
        self._in_mpi = world.in_mpi

    # -- steps ---------------------------------------------------------------------------------
    def rendezvous(self, step: int) -> MpiRendezvous:
        return MpiRendezvous(self, step, self._table(step))

    def _table(self, step):
        with self._lock:
            table = self._tables.get(step)
            if table is None:
                table = self._tables[step] = LocalRendezvous()
                if step <= self._closed_through:
                    table.cancel(errors.CancelledError(None, None, f"Step {step} is over"))
            return table

    def close_step(self, step: int, exc: BaseException | None = None):
        """End ``step`` here: waiters get ``exc`` (or CancelledError); later values are dropped."""
        exc = exc or errors.CancelledError(None, None, f"Step {step} is over")
        with self._lock:
            self._closed_through = max(self._closed_through, step)
            over = [self._tables.pop(s) for s in [s for s in self._tables if s <= step]]
        for table in over:
            table.cancel(exc)

    # -- sending -------------------------------------------------------------------------------
    def send_value(self, rank: int, step: int, key, value, is_dead: bool):
        tag = step_tag(step)
        buffer = None
        if is_dead:
            header = (step, key, _DEAD, None, None, None)
        elif isinstance(value, (np.ndarray, np.generic)) and value.dtype.kind in "biufc?":
            if value.nbytes <= INLINE_BYTES:
                shape = value.shape if isinstance(value, np.ndarray) else None  # None: a scalar
                header = (step, key, _INLINE, value.dtype.str, shape, value.tobytes())
            else:
                buffer = np.ascontiguousarray(value)
                header = (step, key, _BUFFER, value.dtype.str, value.shape, None)
        else:
            _check_portable(value, key)
            header = (step, key, _OBJECT, None, None, value)
        data = pickle.dumps(header, pickle.HIGHEST_PROTOCOL)
        if self.world.broken_by is not None:
            raise errors.AbortedError(None, None, self.world.broken_by)
        MPI = self.MPI
        in_mpi, me = self._in_mpi, threading.get_ident()
        with self._send_lock:
            in_mpi[me] = time.monotonic()      # the world's Watchdog looks for stuck calls
            try:
                self._post(self.comm.Isend([data, MPI.BYTE], rank, tag), data)
                if buffer is not None:
                    raw = buffer.reshape(-1).view(np.uint8)
                    self._post(self.comm.Isend([raw, MPI.BYTE], rank, tag + 1), buffer)
            finally:
                in_mpi.pop(me, None)

    def _post(self, request, keep):
        if not request.Test():
            self._in_flight.append((request, keep))

    def _reap_sends(self):
        with self._send_lock:
            self._in_flight = [(r, b) for r, b in self._in_flight if not r.Test()]

    # -- receiving -----------------------------------------------------------------------------
    def pump(self) -> bool:
        """Receive every step value that has arrived and file it in its step's table;
        True when something arrived. Called by waiting threads (one at a time); in a
        broken world (:meth:`.world.World.break_`) it calls no MPI and finds nothing."""
        if self.world.broken_by is not None or not self._pump_lock.acquire(blocking=False):
            time.sleep(0)
            return False
        in_mpi, me = self._in_mpi, threading.get_ident()
        in_mpi[me] = time.monotonic()          # the world's Watchdog looks for stuck calls
        try:
            if self._in_flight:
                self._reap_sends()
            got = False
            status = self._status
            while self.comm.Iprobe(self.MPI.ANY_SOURCE, self.MPI.ANY_TAG, status):
                self._receive(status.Get_source(), status.Get_tag(), status.Get_count())
                got = True
        finally:
            in_mpi.pop(me, None)
            self._pump_lock.release()
        if self.on_idle is not None:
            got = self.on_idle() or got
        return got

    def _receive(self, source, tag, count):
        MPI = self.MPI
        data = bytearray(count)
        self.comm.Recv([data, MPI.BYTE], source, tag)
        step, key, kind, dtype, shape, inline = pickle.loads(data)
        value, is_dead = None, False
        if kind == _DEAD:
            is_dead = True
        elif kind == _INLINE:
            value = np.frombuffer(inline, dtype=dtype)
            value = value[0] if shape is None else value.reshape(shape).copy()
        elif kind == _BUFFER:
            value = np.empty(shape, dtype=dtype)
            self.comm.Recv([value.reshape(-1).view(np.uint8), MPI.BYTE], source, tag + 1)
        else:
            value = inline
        with self._lock:
            if step <= self._closed_through:
                return   # a value of a step that is over: dropped
        self._table(step).send(key, value, is_dead)


def _check_portable(value, key):
    """A variable handle would arrive as a copy: refuse it, naming the key."""
    if is_process_local(value):
        raise errors.InvalidArgumentError(
            None, None, f"The handle of variable '{value.name}' would cross MPI ranks "
            f"(rendezvous key {key!r}); in partition_mode='mpi' every op that uses a "
            "variable must be on the variable's task.")
