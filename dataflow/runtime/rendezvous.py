"""Rendezvous: the keyed one-shot channels that connect the partitions of one step.

A partitioned graph has a ``_Send`` node on the producing device and a ``_Recv``
node on the consuming device for every tensor that crosses devices. Both name
the same key ``(src_device, dst_device, edge_name, frame_path)``; ``frame_path``
is a tuple of ``(frame_name, iteration)`` pairs from the root frame down, so a
pair inside a loop is used once per iteration. The value travels with its dead
bit: a Send of a dead token makes its Recv produce a dead token.

A rendezvous object lives for one step (one ``Session.run``): a cancelled or
failed step leaves nothing behind for the next one.

>>> rv = LocalRendezvous()
>>> rv.send(("/cpu:0", "/cpu:1", "x:0", ()), 3.0, False)
>>> rv.recv(("/cpu:0", "/cpu:1", "x:0", ()))
(3.0, False)
"""
from __future__ import annotations

import abc
import copy
import itertools
import threading
from collections.abc import Callable

from .. import errors

__all__ = ["DoneCallback", "LocalRendezvous", "Rendezvous"]

DoneCallback = Callable[[object, bool, "BaseException | None"], None]
_MISSING = object()


class Rendezvous(abc.ABC):
    """A keyed one-shot channel between partitions of one step (the shared interface).

    Implementations: :class:`LocalRendezvous` (partitions on threads of one process);
    the processes mode provides its own. Keys are hashable, picklable tuples. An
    implementation may also offer ``poll(key) -> (value, is_dead) | None`` (take a value
    that is already there); the executor then tries it before ``recv_async``.
    """

    @abc.abstractmethod
    def send(self, key: tuple, value, is_dead: bool) -> None:
        """Deliver ``(value, is_dead)`` for ``key``. Never blocks (values are buffered)."""

    @abc.abstractmethod
    def recv_async(self, key: tuple, done: DoneCallback) -> None:
        """Call ``done(value, is_dead, None)`` once the value for ``key`` arrives (possibly
        on another thread, possibly before returning), or ``done(None, False, exc)`` if
        the rendezvous is cancelled."""

    def recv(self, key: tuple, timeout: float | None = None) -> tuple[object, bool]:
        """Blocking helper: ``(value, is_dead)`` for ``key``; raises the cancellation
        error, or DeadlineExceededError after ``timeout`` seconds."""
        box: list = []
        arrived = threading.Event()

        def done(value, is_dead, exc):
            box.append((value, is_dead, exc))
            arrived.set()

        self.recv_async(key, done)
        if not arrived.wait(timeout):
            raise errors.DeadlineExceededError(None, None, f"Timed out receiving {key!r}")
        value, is_dead, exc = box[0]
        if exc is not None:
            raise exc
        return value, is_dead

    @abc.abstractmethod
    def cancel(self, exc: BaseException) -> None:
        """Wake every waiter with ``exc``; later sends are dropped, later recvs fail at once."""


class LocalRendezvous(Rendezvous):
    """The in-process rendezvous: one dict where the sender and the receiver of a key meet.

    Whoever comes first leaves an entry (the value, or the waiting ``done`` callback)
    with ``dict.setdefault``; the second finds it and claims it with ``dict.pop``. Both
    are single atomic dict operations, so no lock is held while Python code runs: with
    partitions on threads that share the interpreter lock, a lock held across a thread
    switch stalls the other partition for a whole switch interval. ``done`` runs on the
    sender's thread, or on the receiver's when the value was already there.
    ``messages`` counts the sends (statistics).
    """

    def __init__(self):
        self._slots: dict = {}      # key -> ("value", value, is_dead) or ("waiter", done)
        self._cancelled: BaseException | None = None
        self._sent = itertools.count()

    @property
    def messages(self) -> int:
        return next(copy.copy(self._sent))

    def send(self, key, value, is_dead):
        if self._cancelled is not None:
            return
        next(self._sent)
        entry = ("value", value, is_dead)
        other = self._slots.setdefault(key, entry)
        if other is entry:
            return                                  # stored; the receiver will claim it
        if other[0] == "value":
            raise errors.InternalError(None, None, f"Duplicate send of key {key!r} in one "
                                       "step")
        if self._slots.pop(key, None) is other:     # claimed (not by a cancel)
            other[1](value, is_dead, None)

    def recv_async(self, key, done):
        exc = self._cancelled
        if exc is not None:
            done(None, False, exc)
            return
        entry = ("waiter", done)
        other = self._slots.setdefault(key, entry)
        if other is entry:
            # A cancel that swept the waiters just before this entry went in must not
            # leave it behind: take it back and fail it here.
            if self._cancelled is not None and self._slots.pop(key, None) is entry:
                done(None, False, self._cancelled)
            return
        if other[0] == "waiter":
            raise errors.InternalError(None, None, f"Duplicate recv of key {key!r} in one "
                                       "step")
        if self._slots.pop(key, None) is other:
            done(other[1], other[2], None)
        else:                                       # a cancel cleared it meanwhile
            done(None, False, self._cancelled)

    def poll(self, key):
        """``(value, is_dead)`` if the value for ``key`` is already there (it is then
        taken), else None. An optional fast path the executor uses when present."""
        entry = self._slots.get(key)
        if entry is not None and entry[0] == "value" and self._slots.pop(key, None) is entry:
            return entry[1], entry[2]
        return None

    def cancel(self, exc):
        if self._cancelled is not None:
            return
        self._cancelled = exc
        for key, entry in list(self._slots.items()):
            if self._slots.pop(key, None) is entry and entry[0] == "waiter":
                entry[1](None, False, exc)

    @property
    def cancelled(self) -> bool:
        return self._cancelled is not None
