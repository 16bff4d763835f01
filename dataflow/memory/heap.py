"""One memory budget shared by several sessions: CalcGraph's model switching.

``Heap(budget_bytes)`` is given to several sessions
(``ConfigProto(memory_heap=heap)``, which runs them from their memory plans). Before a
session's step runs, the heap admits it: the step needs its plan's peak; every other
session holds its arenas and its variables. When they do not fit together, the heap
evicts the least recently run other session's *gradient and optimizer zones*: its
arenas (where its gradients are computed) and the variables only its optimizer
touches (Adam's slots and accumulators) move to host copies, through the device-memory
hooks ``swap_memory`` stacks use (:func:`dataflow.kernels.registry.device_memory`;
on the CPU, whose memory is the host's, a copy stands for the transfer), and their
memory is released. When the evicted session runs again it is restored first, bit for
bit, so its training resumes exactly where it stopped. A step that does not fit even
with every other session evicted raises ResourceExhaustedError before running.

>>> import dataflow as df
>>> heap = Heap(1 << 20)
>>> g = df.Graph()
>>> with g.as_default():
...     x = df.placeholder(df.float32, [64], name="x")
...     y = df.reduce_sum(df.tanh(x))
>>> with df.Session(graph=g, config=df.ConfigProto(memory_heap=heap)) as sess:
...     _ = sess.run(y, {x: np.ones(64, np.float32)})
...     heap.resident_bytes() > 0
True
"""
from __future__ import annotations

import itertools
import threading

import numpy as np

from .. import errors
from ..kernels.registry import device_memory
from ..kernels.resources import VariableCell

__all__ = ["Heap"]


def _host_copy(value):
    return np.array(value, copy=True)


def _transfers(device_type="CPU"):
    """``(to_host, to_device)`` of ``device_type``'s memory hooks (the CPU's: copies)."""
    memory = device_memory(device_type)
    if memory is None:
        return _host_copy, _host_copy
    return memory.to_host, memory.to_device


class _Tenant:
    """A session's standing in the heap (``owner`` is its ArenaCache)."""

    def __init__(self, owner, label):
        self.owner = owner
        self.label = label
        self.last_run = 0
        self.evicted = False
        self.saved_arenas: dict = {}   # arena-cache key -> host copy of that arena
        self.saved_cells: dict = {}    # variable shared name -> host copy of its value
        self.optimizer_variables: set = set()

    def resident(self) -> int:
        """Bytes it holds between steps: its arenas and its variables' values."""
        arenas = sum(step.arena.nbytes for _, step in self.owner.steps.values())
        return arenas + sum(np.asarray(c.value).nbytes for c in self.owner.resources.values()
                            if isinstance(c, VariableCell) and c.value is not None)


class Heap:
    """A memory budget of ``budget_bytes`` shared by sessions created with
    ``ConfigProto(memory_heap=heap)`` (see the module docstring). ``evictions`` and
    ``restores`` record ``(session label, bytes)`` in order; labels are ``session 0``,
    ``session 1``... in order of first use."""

    def __init__(self, budget_bytes: int):
        if isinstance(budget_bytes, bool) or not isinstance(budget_bytes, int) \
                or budget_bytes < 0:
            raise ValueError(f"Heap(budget_bytes={budget_bytes!r}): expected a byte count >= 0")
        self.budget_bytes = budget_bytes
        self._tenants: dict = {}
        self._clock = itertools.count(1)
        self.evictions: list = []
        self.restores: list = []
        # The sessions' planned steps run under it, one at a time (an eviction must
        # not move a running session's zones).
        self.lock = threading.RLock()

    def resident_bytes(self) -> int:
        """What the sessions hold between steps: their arenas and variables."""
        return sum(t.resident() for t in self._tenants.values())

    def admit(self, owner, step) -> None:
        """Make room for ``step`` of the session whose arena cache is ``owner``, restoring
        that session first if it was evicted (called by the runtime before each step)."""
        tenant = self._tenants.get(id(owner))
        if tenant is None:
            tenant = self._tenants[id(owner)] = _Tenant(owner, f"session {len(self._tenants)}")
        tenant.last_run = next(self._clock)
        tenant.optimizer_variables.update(step.optimizer_variables)
        if tenant.evicted:
            self._restore(tenant)
        self._restore_arena(tenant, owner, step)
        need = step.plan.peak_bytes
        while self._others(tenant) + need > self.budget_bytes:
            victim = min((t for t in self._tenants.values()
                          if t is not tenant and not t.evicted),
                         key=lambda t: t.last_run, default=None)
            if victim is None:
                raise errors.ResourceExhaustedError(
                    None, None, f"Heap(budget_bytes={self.budget_bytes}): {tenant.label}'s "
                    f"step needs {need} bytes (its plan's peak) and the other "
                    f"sessions hold {self._others(tenant)} bytes after evicting their "
                    "gradient and optimizer zones; nothing was run")
            self._evict(victim)

    def forget(self, owner) -> None:
        """Drop a session (closed): what it held is free."""
        self._tenants.pop(id(owner), None)

    def _others(self, tenant) -> int:
        return sum(t.resident() for t in self._tenants.values() if t is not tenant)

    # -- moving zones ----------------------------------------------------------------
    def _evict(self, tenant) -> None:
        to_host, _ = _transfers()
        owner = tenant.owner
        freed = 0
        for key, (_plan, step) in list(owner.steps.items()):
            tenant.saved_arenas[key] = to_host(step.arena)
            freed += step.arena.nbytes
        owner.steps.clear()          # the arenas and every view of them go
        for name in sorted(tenant.optimizer_variables):
            cell = owner.resources.get(name)
            if cell is None or cell.value is None:
                continue
            tenant.saved_cells[name] = to_host(cell.value)
            freed += np.asarray(cell.value).nbytes
            cell.value = None        # released; _restore puts it back before a step
        tenant.evicted = True
        self.evictions.append((tenant.label, freed))

    def _restore(self, tenant) -> None:
        _, to_device = _transfers()
        restored = 0
        for name, host in tenant.saved_cells.items():
            cell = tenant.owner.resources.get(name)
            if cell is None:
                continue
            value = to_device(host)
            if isinstance(value, np.ndarray):
                value.setflags(write=False)
            cell.value = value
            restored += np.asarray(host).nbytes
        tenant.saved_cells.clear()
        tenant.evicted = False
        restored += sum(a.nbytes for a in tenant.saved_arenas.values())
        self.restores.append((tenant.label, restored))

    @staticmethod
    def _restore_arena(tenant, owner, step) -> None:
        """A step rebuilt after its session was evicted gets its arena's bytes back."""
        for key, (_plan, s) in owner.steps.items():
            if s is step and key in tenant.saved_arenas:
                _, to_device = _transfers()
                host = tenant.saved_arenas.pop(key)
                if host.nbytes == step.arena.nbytes:
                    step.arena[...] = to_device(host)
