"""The pipe protocol between the processes of a partitioned session.

Every process of a session in ``partition_mode="processes"`` (one per device, see
:mod:`.runner`) owns one :class:`Endpoint`: its ends of a full mesh of pipes to the
other device processes and the per-step tables (:class:`LocalRendezvous`) of the
values that arrived. There is no reader thread: the thread that waits for a value
reads the pipes itself (:meth:`Endpoint.pump`, through the executor's completion
queue, :class:`PumpingQueue`), which saves a thread hand-off per message.
``Endpoint.rendezvous(step)`` gives the :class:`ProcessRendezvous` of one step (one
``Session.run``)::

    a, b = Endpoint.mesh(["/cpu:0", "/cpu:1"], prefix="demo")   # in one process here
    ra, rb = a.rendezvous(1), b.rendezvous(1)
    ra.send(("/cpu:0", "/cpu:1", "x:0", ()), np.ones(3), False)
    rb.recv(("/cpu:0", "/cpu:1", "x:0", ()))   # (array([1., 1., 1.]), False): pumps a's pipe

Messages are ``(tag, step, key, payload)`` tuples, pickled:

* ``_VALUE``: a small value (a small array, a control dummy), pickled whole;
* ``_SCALAR``: a NumPy scalar as its dtype character and Python value (NumPy
  scalars pickle slowly);
* ``_DEAD``: a dead token, the tag alone;
* ``_SEGMENT``: an array of :data:`~.segments.SHM_MIN_BYTES` or more, written into a
  shared-memory segment of the sender's :class:`~.segments.SegmentPool`: the payload
  is the segment's name, size, dtype and shape;
* ``_FREE``: the receiver hands a segment back (the array read from it is gone).

A value sent for a step whose table is closed (a cancelled or finished step) is
dropped, so no later step sees it. Variable handles cannot cross processes (they
would arrive as copies): sending one raises ``InvalidArgumentError``.
"""
from __future__ import annotations

import collections
import pickle
import queue
import select
import threading
import time
from multiprocessing.connection import Pipe

import numpy as np

from ... import errors
from ...kernels.resources import is_process_local
from ..rendezvous import LocalRendezvous, Rendezvous
from .segments import SegmentPool, shareable

__all__ = ["Endpoint", "ProcessRendezvous", "PumpingQueue"]

# A waiting thread looks at its queue at least this often (cancellations come that way).
_POLL_S = 0.005
# Message tags on the pipes between device processes.
_VALUE, _SCALAR, _DEAD, _SEGMENT, _FREE = range(5)
_dumps, _loads, _PROTOCOL = pickle.dumps, pickle.loads, pickle.HIGHEST_PROTOCOL


class _ScalarTypes(dict):
    """NumPy scalar type by dtype character, looked up once per character."""

    def __missing__(self, char):
        t = self[char] = np.dtype(char).type
        return t


_SCALAR_TYPES = _ScalarTypes()


class ProcessRendezvous(Rendezvous):
    """The rendezvous of one step, seen from one process (made by :meth:`Endpoint.rendezvous`).

    Keys are ``(src_device, dst_device, edge_name, frame_path)``; a send to a device of
    another process goes through that process's pipe, a recv waits in this process's
    :class:`LocalRendezvous` of the step (filled by whoever pumps the pipes).
    """

    def __init__(self, endpoint: Endpoint, step: int, table: LocalRendezvous):
        self._endpoint = endpoint
        self._step = step
        self._table = table

    def send(self, key, value, is_dead):
        peer = self._endpoint.peer_of(key[1])
        if peer is None:
            self._table.send(key, value, is_dead)
        else:
            self._endpoint.send_to(peer, self._step, key, value, is_dead)

    def recv_async(self, key, done):
        self._table.recv_async(key, done)

    def poll(self, key):
        """``(value, is_dead)`` if the value for ``key`` has arrived (it is taken), else
        None: the executor's fast path."""
        return self._table.poll(key)

    def completion_queue(self) -> PumpingQueue:
        """A queue for ``done`` results whose ``get`` reads the pipes while it waits."""
        return self._endpoint.completion_queue()

    def recv(self, key, timeout=None):
        """Blocking helper: pumps the pipes while it waits (see :meth:`Endpoint.pump`)."""
        q = self._endpoint.completion_queue()
        self.recv_async(key, lambda value, is_dead, exc: q.put((value, is_dead, exc)))
        try:
            value, is_dead, exc = q.get(timeout)
        except queue.Empty:
            raise errors.DeadlineExceededError(
                None, None, f"Timed out receiving {key!r}") from None
        if exc is not None:
            raise exc
        return value, is_dead

    def cancel(self, exc):
        self._endpoint.close_step(self._step, exc)


class PumpingQueue:
    """A completion queue for a thread that waits on rendezvous values: ``get`` reads
    the peers' pipes while nothing is queued. Items put by other threads (a cancel from
    the control thread) are seen within :data:`_POLL_S`."""

    def __init__(self, endpoint):
        self._queue = queue.SimpleQueue()
        self._endpoint = endpoint
        self.put = self._queue.put

    def get(self, timeout=None):
        limit = None if timeout is None else time.monotonic() + timeout
        get_nowait = self._queue.get_nowait
        while True:
            try:
                return get_nowait()
            except queue.Empty:
                pass
            wait_s = _POLL_S
            if limit is not None:
                wait_s = min(wait_s, limit - time.monotonic())
                if wait_s <= 0:
                    raise queue.Empty
            self._endpoint.pump(wait_s)


class Endpoint:
    """One process's side of the mesh: the pipes to its peers and the step tables.

    ``devices`` maps every device name to the index of the process that runs it;
    ``index`` is this process's; ``conns[j]`` is the pipe to process ``j``.
    ``prefix`` names this session's shared-memory segments.
    """

    def __init__(self, index: int, devices: dict, conns: dict, prefix: str):
        self.index = index
        self.devices = dict(devices)
        self.conns = dict(conns)
        self.prefix = prefix
        self._send_locks = {j: threading.Lock() for j in conns}
        self._lock = threading.Lock()
        self._tables: dict[int, LocalRendezvous] = {}
        self._closed_through = 0          # steps <= this are over: their messages are dropped
        # This process's shared-memory segments; when none is free for a large value,
        # the segments receivers handed back meanwhile are read from the pipes first.
        self.segments = SegmentPool(prefix, index, reclaim=lambda: self.pump(0))
        self._read_lock = threading.Lock()
        self._peer_index = {c: j for j, c in self.conns.items()}
        self._released = collections.deque()        # (peer, segment) to hand back
        self._conn_of_fd = {}
        self._poller = None

    def _make_poller(self):
        """A poll object over the peers' pipes, made once the process owns its ends."""
        self._poller = select.poll()
        for c in self.conns.values():
            self._conn_of_fd[c.fileno()] = c
            self._poller.register(c.fileno(), select.POLLIN)

    # -- setup -------------------------------------------------------------------------------
    @classmethod
    def mesh(cls, device_lists, prefix: str) -> list[Endpoint]:
        """Endpoints for len(device_lists) processes, joined pairwise by pipes.

        ``device_lists[i]`` is a device name or a list of the device names of process i.
        The endpoints are built in one process; each process then keeps its own one
        (:meth:`keep_only`) and calls :meth:`start`.
        """
        devices = {}
        for i, names in enumerate(device_lists):
            for name in ([names] if isinstance(names, str) else names):
                devices[name] = i
        n = len(device_lists)
        conns = [{} for _ in range(n)]
        for i in range(n):
            for j in range(i + 1, n):
                conns[i][j], conns[j][i] = Pipe(duplex=True)
        return [cls(i, devices, conns[i], prefix) for i in range(n)]

    def close_connections(self):
        """Close this endpoint's pipes (a process closes the endpoints it does not own)."""
        for c in self.conns.values():
            c.close()

    def start_control(self, conn, handler):
        """Start a thread that reads the parent's control pipe ``conn`` and calls
        ``handler(msg)`` per message (``handler(None)`` at EOF). Cancellation arrives
        this way while the process's own thread is busy or waiting."""
        def read():
            while True:
                try:
                    msg = conn.recv()
                except (EOFError, OSError):
                    handler(None)
                    return
                handler(msg)
                if msg[0] == "stop":
                    return

        threading.Thread(target=read, name=f"dataflow-control-{self.index}",
                         daemon=True).start()

    def peer_of(self, device):
        """The index of the process that runs ``device``, or None for this process."""
        j = self.devices.get(device)
        if j is None:
            raise errors.InternalError(None, None, f"Rendezvous key names device {device!r}, "
                                       f"which no process runs ({sorted(self.devices)})")
        return None if j == self.index else j

    # -- steps ---------------------------------------------------------------------------------
    def rendezvous(self, step: int) -> ProcessRendezvous:
        """The rendezvous of ``step`` (steps count up; one step at a time per session)."""
        return ProcessRendezvous(self, step, self._table(step))

    def _table(self, step):
        with self._lock:
            table = self._tables.get(step)
            if table is None:
                table = self._tables[step] = LocalRendezvous()
                if step <= self._closed_through:
                    table.cancel(errors.CancelledError(None, None, f"Step {step} is over"))
            return table

    def close_step(self, step: int, exc: BaseException | None = None):
        """End ``step`` here: waiting recvs get ``exc`` (or a CancelledError), values
        that arrive later are dropped."""
        exc = exc or errors.CancelledError(None, None, f"Step {step} is over")
        with self._lock:
            self._closed_through = max(self._closed_through, step)
            table = self._tables.pop(step, None)
            for s in [s for s in self._tables if s <= step]:
                self._tables.pop(s).cancel(exc)
        if table is not None:
            table.cancel(exc)

    def close_all(self, exc: BaseException):
        """End every step: waiting recvs get ``exc`` (the process is going away)."""
        with self._lock:
            tables = list(self._tables.values())
            self._tables.clear()
            self._closed_through = 1 << 62
        for table in tables:
            table.cancel(exc)

    def flush_released(self):
        """Hand back to their senders the segments whose arrays died here (an array
        dies on whatever thread drops it last, so the hand-back waits for this call)."""
        released = self._released
        while released:
            j, name = released.popleft()
            try:
                self._post(j, (_FREE, 0, None, name))
            except errors.AbortedError:
                pass  # the sender is gone; its segments are swept by the session

    # -- sending -------------------------------------------------------------------------------
    def send_to(self, peer: int, step: int, key, value, is_dead: bool):
        if self._released:
            self.flush_released()
        if not is_dead and shareable(value):
            name, size = self.segments.write(value)
            msg = (_SEGMENT, step, key, (name, size, value.dtype.str, value.shape))
        elif is_dead:
            msg = (_DEAD, step, key, None)
        elif isinstance(value, np.generic):
            # NumPy scalars pickle slowly (a reconstructor call): send the Python value.
            msg = (_SCALAR, step, key, (value.dtype.char, value.item()))
        else:
            _check_portable(value, key)
            msg = (_VALUE, step, key, value)
        self._post(peer, msg)

    def _post(self, peer, msg):
        try:
            data = _dumps(msg, _PROTOCOL)
            with self._send_locks[peer]:
                self.conns[peer].send_bytes(data)
        except (OSError, EOFError) as e:
            raise errors.AbortedError(
                None, None, f"The process of device(s) {self._devices_of(peer)} is gone "
                f"(pipe closed: {e})") from None

    def _devices_of(self, j):
        return sorted(d for d, i in self.devices.items() if i == j)

    # -- receiving -----------------------------------------------------------------------------
    def pump(self, timeout: float | None) -> None:
        """Read what the peers sent (waiting up to ``timeout`` s for the first message)
        and file it into the step tables. The thread that waits for a value calls this
        itself, so a value reaches it without a hand-off between threads."""
        if self._released:
            self.flush_released()
        if not self._read_lock.acquire(timeout=-1 if timeout is None else timeout):
            return
        if self._poller is None:
            self._make_poller()
        try:
            poll = self._poller.poll
            ready = poll(None if timeout is None else timeout * 1000.0)
            while ready:        # one message per ready pipe, until none is ready
                for fd, _ in ready:
                    c = self._conn_of_fd[fd]
                    try:
                        self._deliver(self._peer_index[c], _loads(c.recv_bytes()))
                    except (EOFError, OSError):
                        # That peer is gone (the parent notices and cancels the step).
                        self._poller.unregister(fd)
                ready = poll(0)
        finally:
            self._read_lock.release()

    def completion_queue(self) -> PumpingQueue:
        """A queue for an executor's completions whose ``get`` pumps this endpoint."""
        return PumpingQueue(self)

    def _deliver(self, j, msg):
        tag, step, key, payload = msg
        if tag == _FREE:
            self.segments.release(payload)
            return
        is_dead = False
        if tag == _SCALAR:
            value = _SCALAR_TYPES[payload[0]](payload[1])
        elif tag == _DEAD:
            value, is_dead = None, True
        elif tag == _SEGMENT:
            with self._lock:
                over = step <= self._closed_through
            if over:   # nobody will take it: the sender may reuse the segment at once
                self._released.append((j, payload[0]))
                return
            name, size, dtype, shape = payload
            value = self.segments.read(name, size, dtype, shape, self._released.append,
                                       (j, name))
        else:
            value = payload
        with self._lock:
            if step <= self._closed_through:
                return  # a value of a step that is over: drop it
        self._table(step).send(key, value, is_dead)

    def shutdown(self):
        """Remove this process's segments and close its pipes."""
        self.segments.shutdown()
        self.close_connections()


def _check_portable(value, key):
    """Only plain data may cross processes: a variable handle would arrive as a copy."""
    if is_process_local(value):
        raise errors.InvalidArgumentError(
            None, None, f"The handle of variable '{value.name}' would cross processes "
            f"(rendezvous key {key!r}); in partition_mode='processes' every op that uses a "
            "variable must be on the variable's device.")
