"""Shared-memory segments: how large arrays travel between the processes of a session.

An array of :data:`SHM_MIN_BYTES` or more is not pickled into a pipe: the sender
copies it into a POSIX shared-memory segment (a ``/dev/shm`` file, as
``multiprocessing.shared_memory`` makes them) and sends only the segment's name,
dtype and shape (:mod:`.pipes`). The receiver reads the array in place (a read-only
view of the segment, which it keeps mapped) and hands the segment back once that
array and its views are gone; the sender then reuses it for its next large value:
one memory copy in all, no pickling, no page faults once warm. Each process keeps
its segments in a :class:`SegmentPool`.

Feeds and fetches travel once, in one-shot segments the receiver adopts (maps and
unlinks): :func:`share_arrays`, :func:`adopt_arrays`. Segment names carry the
session's prefix (``dataflow<pid>x<n>``), so :func:`sweep_segments` removes every one
of them after a run that failed or a process that was killed, and
:func:`sweep_orphans_once` those of sessions whose whole process tree was killed.

>>> writer, reader = SegmentPool("demo", 0), SegmentPool("demo", 1)
>>> name, size = writer.write(np.arange(1 << 15, dtype=np.float64))   # 256 KB
>>> view = reader.read(name, size, "<f8", (1 << 15,), print, "freed")
>>> float(view[-1])
32767.0
>>> del view
freed
>>> writer.release(name)     # the receiver handed it back: ready for the next value
>>> reader.shutdown(); writer.shutdown()
>>> segments_with_prefix("demo")
[]
"""
from __future__ import annotations

import collections
import mmap
import os
import threading
import weakref

import numpy as np

__all__ = ["SHM_MIN_BYTES", "SegmentPool", "SharedArray", "adopt_arrays", "one_shot_prefix",
           "segments_with_prefix", "share_arrays", "shareable", "sweep_orphans_once",
           "sweep_segments"]

# Arrays at least this large go through shared memory. Measured here (send + ack round
# trip between two worker processes, float32 arrays, medians; the machine was loaded):
# 64 KB pipe 332 µs / segment 300 µs, 128 KB 374 / 316, 256 KB 1677 / 433,
# 1 MB 5963 / 264, 4 MB 34360 / 3614. Below ~64 KB the two are alike.
SHM_MIN_BYTES = 1 << 17
_SHM_DIR = "/dev/shm"
_SEGMENT_ROUND = 1 << 20       # segment sizes are rounded up to a MiB, so they are reused
_MAX_FREE_SEGMENTS = 4         # segments kept for reuse per process (the rest are removed)
_MAX_MAPPED = 8                # peers' segments a process keeps mapped


class SegmentPool:
    """One process's segments: those it writes (free for reuse, or lent to a receiver)
    and its peers' segments it has mapped to read.

    ``prefix`` and ``index`` (the process's place in the mesh) name its segments;
    ``reclaim()``, called when no free segment fits, may hand back segments the
    receivers are done with (the pipe protocol reads their messages).
    """

    def __init__(self, prefix: str, index: int, reclaim=None):
        self.prefix = prefix
        self.index = index
        self._reclaim = reclaim
        self._lock = threading.Lock()
        self._free: list = []             # (size, name, mmap) segments ready for reuse
        self._busy: dict = {}             # name -> (size, mmap) lent to a receiver
        self._counter = 0
        self._mapped = collections.OrderedDict()   # peers' segments mapped here, by name

    # -- the sender's side ---------------------------------------------------------------------
    def write(self, value) -> tuple[str, int]:
        """Copy ``value`` into a free segment (or a new one), lent until :meth:`release`;
        returns (name, size)."""
        nbytes = value.nbytes
        found = self._take_free(nbytes)
        if found is None and self._reclaim is not None:
            self._reclaim()   # segments the receivers have handed back meanwhile
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

    def release(self, name: str) -> None:
        """The receiver is done with segment ``name``: keep it for reuse (at most
        :data:`_MAX_FREE_SEGMENTS`, the smallest others are removed)."""
        with self._lock:
            item = self._busy.pop(name, None)
            if item is None:
                return
            self._free.append((item[0], name, item[1]))
            extra = []
            if len(self._free) > _MAX_FREE_SEGMENTS:
                self._free.sort(key=lambda s: s[0])
                extra = self._free[:-_MAX_FREE_SEGMENTS]
                del self._free[:-_MAX_FREE_SEGMENTS]
        for _, n, m in extra:
            _remove_segment(n, m)

    def _take_free(self, nbytes):
        """The smallest free segment that holds ``nbytes``, taken: (size, name, mmap)."""
        with self._lock:
            fits = [k for k, (size, _, _) in enumerate(self._free) if size >= nbytes]
            if not fits:
                return None
            best = min(fits, key=lambda k: self._free[k][0])
            return self._free.pop(best)

    # -- the receiver's side -------------------------------------------------------------------
    def read(self, name, size, dtype, shape, on_release, token):
        """The array in a peer's segment, read in place (no copy, read-only);
        ``on_release(token)`` runs once the array and every view of it are gone."""
        count = int(np.prod(shape, dtype=np.int64))
        flat = np.frombuffer(self._mapping(name, size), np.dtype(dtype), count)
        weakref.finalize(flat, on_release, token)
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
        """Unmap the peers' segments and remove this process's own."""
        for mm in self._mapped.values():
            _close_mapping(mm)
        self._mapped.clear()
        with self._lock:
            segments = [(n, m) for _, n, m in self._free]
            segments += [(n, m) for n, (_, m) in self._busy.items()]
            self._free, self._busy = [], {}
        for n, m in segments:
            _remove_segment(n, m)


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


def shareable(value) -> bool:
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


_swept = False


def sweep_orphans_once():
    """Remove segments left by sessions whose process was killed with its workers (no
    one could clean up then); once per process, when its first runner starts."""
    global _swept
    if _swept:
        return
    _swept = True
    try:
        names = [n for n in os.listdir(_SHM_DIR) if n.startswith("dataflow")]
    except FileNotFoundError:
        return
    for name in names:
        pid = name[len("dataflow"):].split("x", 1)[0]
        if pid.isdigit() and not os.path.exists(f"/proc/{pid}"):
            sweep_segments(name.split("_", 1)[0])


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
        if not shareable(obj):
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
