"""A rendezvous between partitions that run in different OS processes.

Every process of a partitioned session (one per device, see
:mod:`dataflow.runtime.process_runner`) owns one :class:`Endpoint`: its ends of a
full mesh of pipes to the other device processes and the per-step tables
(:class:`LocalRendezvous`) of the values that arrived. There is no reader thread:
the thread that waits for a value reads the pipes itself (:meth:`Endpoint.pump`,
through the executor's completion queue, :class:`PumpingQueue`), which saves a
thread hand-off per message. ``Endpoint.rendezvous(step)`` gives
the :class:`ProcessRendezvous` of one step (one ``Session.run``)::

    a, b = Endpoint.mesh(["/cpu:0", "/cpu:1"], prefix="demo")   # in one process here
    ra, rb = a.rendezvous(1), b.rendezvous(1)
    ra.send(("/cpu:0", "/cpu:1", "x:0", ()), np.ones(3), False)
    rb.recv(("/cpu:0", "/cpu:1", "x:0", ()))   # (array([1., 1., 1.]), False): pumps a's pipe

How values travel:

* small values (scalars, small arrays, dead bits, control dummies) are pickled into
  the pipe of the destination's process (a NumPy scalar as its Python value and dtype
  character, a dead token as a tag alone);
* arrays of :data:`SHM_MIN_BYTES` or more are written into a POSIX shared-memory
  segment (a ``/dev/shm`` file, as ``multiprocessing.shared_memory`` makes them) and
  only its name, dtype and shape go through the pipe. The receiver reads the array in
  place (a read-only view of the segment, which it keeps mapped) and hands the
  segment back once that array and its views are gone; the sender then reuses it for
  its next large value: one memory copy in all, no pickling, no page faults once
  warm. Feeds and fetches travel once, in segments the receiver adopts
  (:func:`share_arrays`, :func:`adopt_arrays`).
  Segment names carry the session's prefix, so :func:`sweep_segments` removes every
  one of them after a run that failed or a process that was killed.

A value sent for a step whose table is closed (a cancelled or finished step) is
dropped, so no later step sees it. Variable handles cannot cross processes (they
would arrive as copies): sending one raises ``InvalidArgumentError``.
"""
from __future__ import annotations

import collections
import mmap
import os
import pickle
import queue
import select
import threading
import time
import weakref
from multiprocessing.connection import Pipe

import numpy as np

from .. import errors
from ..kernels.resources import is_process_local
from .rendezvous import LocalRendezvous, Rendezvous

__all__ = [
    "SHM_MIN_BYTES",
    "Endpoint",
    "ProcessRendezvous",
    "adopt_arrays",
    "one_shot_prefix",
    "segments_with_prefix",
    "share_arrays",
    "sweep_segments",
]

# Arrays at least this large go through shared memory. Measured here (send + ack round
# trip between two worker processes, float32 arrays, medians; the machine was loaded):
# 64 KB pipe 332 µs / segment 300 µs, 128 KB 374 / 316, 256 KB 1677 / 433,
# 1 MB 5963 / 264, 4 MB 34360 / 3614. Below ~64 KB the two are alike.
SHM_MIN_BYTES = 1 << 17
_SHM_DIR = "/dev/shm"
_SEGMENT_ROUND = 1 << 20       # segment sizes are rounded up to a MiB, so they are reused
_MAX_FREE_SEGMENTS = 4         # segments kept for reuse per process (the rest are removed)
_MAX_MAPPED = 8                # peers' segments a process keeps mapped

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
        self._free: list = []             # (size, name, mmap) segments ready for reuse
        self._busy: dict = {}             # name -> (size, mmap) lent to a receiver
        self._counter = 0
        self._read_lock = threading.Lock()
        self._peer_index = {c: j for j, c in self.conns.items()}
        self._mapped = collections.OrderedDict()   # peers' segments mapped here, by name
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
        if not is_dead and _shareable(value):
            name, size = self._write_segment(value)
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

    def _write_segment(self, value):
        """Copy ``value`` into a free segment (or a new one); returns (name, size)."""
        nbytes = value.nbytes
        found = self._take_free(nbytes)
        if found is None:
            self.pump(0)   # segments the receivers have handed back meanwhile
            found = self._take_free(nbytes)
        if found is not None:
            size, name, mm = found
            np.copyto(np.frombuffer(mm, value.dtype, value.size).reshape(value.shape), value,
                      casting="no")
        else:
            size = -(-nbytes // _SEGMENT_ROUND) * _SEGMENT_ROUND
            mm = None
            while mm is None:
                with self._lock:
                    self._counter += 1
                    name = f"{self.prefix}_{self.index}_{self._counter}"
                try:
                    mm = _create_segment(name, size, value)
                except FileExistsError:  # left by a dead process that had our pid: skip it
                    continue
        with self._lock:
            self._busy[name] = (size, mm)
        return name, size

    def _take_free(self, nbytes):
        """The smallest free segment that holds ``nbytes``, taken: (size, name, mmap)."""
        with self._lock:
            fits = [k for k, (size, _, _) in enumerate(self._free) if size >= nbytes]
            if not fits:
                return None
            best = min(fits, key=lambda k: self._free[k][0])
            return self._free.pop(best)

    def _give_back(self, name, size, mm):
        with self._lock:
            self._free.append((size, name, mm))
            extra = []
            if len(self._free) > _MAX_FREE_SEGMENTS:
                self._free.sort(key=lambda s: s[0])
                extra = self._free[:-_MAX_FREE_SEGMENTS]
                del self._free[:-_MAX_FREE_SEGMENTS]
        for _, n, m in extra:
            _remove_segment(n, m)

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
            with self._lock:
                item = self._busy.pop(payload, None)
            if item is not None:
                self._give_back(payload, *item)
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
            value = self._adopt(j, *payload)
        else:
            value = payload
        with self._lock:
            if step <= self._closed_through:
                return  # a value of a step that is over: drop it
        self._table(step).send(key, value, is_dead)

    def _adopt(self, j, name, size, dtype, shape):
        """The array in peer ``j``'s segment, read in place (no copy, read-only); the
        segment goes back to the sender once the array and every view of it are gone."""
        count = int(np.prod(shape, dtype=np.int64))
        flat = np.frombuffer(self._mapping(name, size), np.dtype(dtype), count)
        weakref.finalize(flat, self._released.append, (j, name))
        return flat.reshape(shape)

    def _mapping(self, name, size):
        """The receiver's mapping of a peer's segment, kept for the segment's next use
        (mapping and faulting in 100 MB costs as much as copying it)."""
        mm = self._mapped.pop(name, None)
        if mm is None:
            mm = _map_segment(name, size)
            if len(self._mapped) >= _MAX_MAPPED:
                _, old = self._mapped.popitem(last=False)   # least recently used
                _close_mapping(old)
        self._mapped[name] = mm
        return mm

    def shutdown(self):
        """Remove this process's segments and close its pipes."""
        for mm in self._mapped.values():
            _close_mapping(mm)
        self._mapped.clear()
        with self._lock:
            segments = [(n, m) for _, n, m in self._free]
            segments += [(n, m) for n, (_, m) in self._busy.items()]
            self._free, self._busy = [], {}
        for n, m in segments:
            _remove_segment(n, m)
        self.close_connections()


def _check_portable(value, key):
    """Only plain data may cross processes: a variable handle would arrive as a copy."""
    if is_process_local(value):
        raise errors.InvalidArgumentError(
            None, None, f"The handle of variable '{value.name}' would cross processes "
            f"(rendezvous key {key!r}); in partition_mode='processes' every op that uses a "
            "variable must be on the variable's device.")


def _create_segment(name, size, value):
    """A new segment holding ``value``. The first write goes through ``pwrite``: on a
    fresh tmpfs file it is twice as fast as faulting the pages in through the mapping."""
    fd = os.open(os.path.join(_SHM_DIR, name), os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o600)
    try:
        os.ftruncate(fd, size)
        data = np.ascontiguousarray(value)
        os.pwrite(fd, memoryview(data.reshape(-1)).cast("B"), 0)
        return mmap.mmap(fd, size, flags=mmap.MAP_SHARED)
    finally:
        os.close(fd)


def _map_segment(name, size):
    fd = os.open(os.path.join(_SHM_DIR, name), os.O_RDONLY)
    try:
        return mmap.mmap(fd, size, flags=mmap.MAP_SHARED, prot=mmap.PROT_READ)
    finally:
        os.close(fd)


def _close_mapping(mm):
    try:
        mm.close()
    except BufferError:
        pass  # arrays still read it: the mapping goes away with the last of them


def _shareable(value) -> bool:
    """A large plain-data array (object arrays hold pointers: they are pickled)."""
    return (type(value) is np.ndarray and value.nbytes >= SHM_MIN_BYTES
            and not value.dtype.hasobject)


def _remove_segment(name, mm):
    try:
        mm.close()
    except BufferError:
        pass  # still exported to an array somewhere: the mapping dies with it
    try:
        os.unlink(os.path.join(_SHM_DIR, name))
    except FileNotFoundError:
        pass


def segments_with_prefix(prefix: str) -> list[str]:
    """Names of the shared-memory segments of ``prefix`` that exist now."""
    try:
        return [n for n in os.listdir(_SHM_DIR) if n.startswith(prefix + "_")]
    except FileNotFoundError:
        return []


def sweep_segments(prefix: str) -> int:
    """Remove every segment of ``prefix`` (after a failed step or a killed process)."""
    removed = 0
    for n in segments_with_prefix(prefix):
        try:
            os.unlink(os.path.join(_SHM_DIR, n))
            removed += 1
        except FileNotFoundError:
            pass
    return removed


# Exceptions cross processes as (class, message, node name, op type): the Operation an
# OpError carries cannot be pickled, so the parent finds it again by name.
def pack_exception(exc: BaseException):
    """A picklable description of ``exc``."""
    op = getattr(exc, "op", None)
    if isinstance(exc, errors.OpError):
        return ("op", type(exc).__name__, exc.message, getattr(op, "name", None),
                getattr(op, "type", None))
    try:
        pickle.dumps(exc)
        return ("pickle", exc)
    except Exception:  # noqa: BLE001 - any unpicklable exception is described instead
        return ("op", "UnknownError", f"{type(exc).__name__}: {exc}", None, None)


class RemoteOp:
    """Stands in for an Operation that exists only in another process (a Send, a Recv)."""

    graph = None

    def __init__(self, name, op_type):
        self.name, self.type = name, op_type

    def __repr__(self):
        return f"<RemoteOp '{self.name}' type={self.type}>"


def unpack_exception(packed, find_op=None) -> BaseException:
    """The exception ``pack_exception`` described; ``find_op(name)`` finds the op."""
    if packed[0] == "pickle":
        return packed[1]
    _, cls_name, message, op_name, op_type = packed
    cls = getattr(errors, cls_name, None)
    if not (isinstance(cls, type) and issubclass(cls, errors.OpError)):
        cls = errors.UnknownError
    op = None
    if op_name is not None:
        op = find_op(op_name) if find_op is not None else None
        if op is None:
            op = RemoteOp(op_name, op_type)
    return cls(None, op, message)


# Feeds going to a worker and fetches coming back travel once, so they use one-shot
# segments the receiver adopts (maps and unlinks) instead of copying out.
_one_shot = iter(range(1, 1 << 62))


def one_shot_prefix(prefix: str) -> str:
    """The prefix of the one-shot segments of a session (swept after a failed step)."""
    return prefix + "_p"


class SharedArray:
    """A large array parked in a one-shot segment, as it travels through a pipe."""

    __slots__ = ("dtype", "name", "shape", "size")

    def __init__(self, name, size, dtype, shape):
        self.name, self.size, self.dtype, self.shape = name, size, dtype, shape

    def __reduce__(self):
        return SharedArray, (self.name, self.size, self.dtype, self.shape)


def share_arrays(obj, prefix: str):
    """``obj`` (nested lists, tuples, dicts) with every large array moved to a segment."""
    if type(obj) is np.ndarray:
        if not _shareable(obj):
            return obj
        name = f"{prefix}_p_{os.getpid()}_{next(_one_shot)}"
        _create_segment(name, obj.nbytes, obj).close()
        return SharedArray(name, obj.nbytes, obj.dtype.str, obj.shape)
    if type(obj) in (list, tuple):
        return type(obj)(share_arrays(v, prefix) for v in obj)
    if type(obj) is dict:
        return {k: share_arrays(v, prefix) for k, v in obj.items()}
    return obj


def adopt_arrays(obj):
    """Undo :func:`share_arrays`: map each segment, unlink its name, wrap it (no copy)."""
    if type(obj) is SharedArray:
        path = os.path.join(_SHM_DIR, obj.name)
        fd = os.open(path, os.O_RDWR)
        try:
            mm = mmap.mmap(fd, obj.size, flags=mmap.MAP_SHARED)
        finally:
            os.close(fd)
            os.unlink(path)
        count = int(np.prod(obj.shape, dtype=np.int64))
        return np.frombuffer(mm, np.dtype(obj.dtype), count).reshape(obj.shape)
    if type(obj) in (list, tuple):
        return type(obj)(adopt_arrays(v) for v in obj)
    if type(obj) is dict:
        return {k: adopt_arrays(v) for k, v in obj.items()}
    return obj
