"""The devices of one Session and where each op runs (TF's ``DeviceSet`` + placer).

A :class:`DeviceSet` knows which devices a session has, as ``(type, index)`` pairs:
the ones declared with ``Session(devices=[...])``, or else every CPU the graph names
(at least ``device_count["CPU"]``) plus, per other type in ``device_count``, as many
as the machine has (a declared type the machine counts, the GPU) or as asked for (a
simulated type). :meth:`DeviceSet.place` puts an op on one of them: its requested
device, or ``/cpu:0`` with soft placement, else an ``InvalidArgumentError`` naming
the op. Device types come from the one registry,
:func:`dataflow.kernels.registry.register_device_type`.

>>> import dataflow as df
>>> with df.Graph().as_default() as g:
...     with df.device("/cpu:1"):
...         x = df.constant(1.0)
>>> devices = DeviceSet(g, device_count={}, allow_soft_placement=False)
>>> devices.list_devices()
['/device:CPU:0', '/device:CPU:1']
>>> devices.place(x.op)
('CPU', 1)
"""
from __future__ import annotations

from .. import errors
from .devices import (available_device_count, host_copy_function, known_device_types,
                      parse_device, unavailable_hint)

__all__ = ["DeviceSet"]

CPU0 = ("CPU", 0)


class DeviceSet:
    """The devices of one session (``(type, index)`` pairs) and op placement.

    ``device_count`` is ``ConfigProto.device_count``; ``declared`` the device names of
    ``Session(devices=...)`` (then no other device exists).
    """

    def __init__(self, graph, device_count: dict, allow_soft_placement: bool,
                 declared=None):
        self._graph = graph
        self._counts = {k.upper(): int(v) for k, v in (device_count or {}).items()}
        self.allow_soft_placement = allow_soft_placement
        self.devices: set = (self._from_graph() if declared is None
                             else _parse_devices(declared))
        self._memory_kinds = None   # (graph version, kinds): see memory_kinds()

    def __len__(self) -> int:
        return len(self.devices)

    def list_devices(self) -> list:
        """The device names this session created."""
        return sorted(f"/device:{t}:{i}" for t, i in self.devices)

    def _from_graph(self) -> set:
        counts = self._counts
        cpus = max(counts.get("CPU", 1), 1)
        used = {parse_device(op.device).device_index or 0 for op in self._graph._ops
                if op.device and (parse_device(op.device).device_type or "CPU") == "CPU"}
        if not counts.get("CPU"):
            cpus = max([cpus] + [i + 1 for i in used])
        devices = {("CPU", i) for i in range(cpus)}
        for kind, n in counts.items():  # GPUs and any other declared device type
            if kind != "CPU":
                devices |= {(kind, i) for i in range(_device_limit(kind, n))}
        return devices

    def _add_available(self, dev) -> bool:
        """Create device ``dev`` on first use when the machine has it (GPUs are counted
        only when a graph asks for one: counting imports the CUDA runtime)."""
        kind, index = dev
        if kind == "CPU" or kind not in known_device_types():
            return False
        limit = self._counts.get(kind)
        if index >= _device_limit(kind, index + 1 if limit is None else limit):
            return False
        self.devices.add(dev)
        return True

    # -- placement -----------------------------------------------------------------------------
    def place(self, op) -> tuple:
        """``(device type, index)`` where ``op`` runs; InvalidArgumentError naming the op
        when its device does not exist here and soft placement is off."""
        if not op.device:
            return CPU0
        spec = parse_device(op.device)
        dev = (spec.device_type or "CPU", spec.device_index or 0)
        if dev in self.devices or self._add_available(dev):
            return dev
        if self.allow_soft_placement:
            return CPU0
        hint = unavailable_hint(dev[0]) if dev[0] in known_device_types() and \
            not available_device_count(dev[0]) else ""
        raise errors.InvalidArgumentError(
            None, op, f"Cannot assign a device for operation {op.name}: {op.device} was "
            f"explicitly assigned but this session has only {self.list_devices()}"
            f"{' (' + hint + ')' if hint else ''}. Pass "
            "config=df.ConfigProto(allow_soft_placement=True) to place it on /cpu:0.")

    def declared_place(self, op):
        """:meth:`place`, or None for an undeclared device (the plan's kernel lookup
        then reports it, naming the op that needs the kernel)."""
        try:
            return self.place(op)
        except errors.InvalidArgumentError:
            return None

    def device_name(self, op) -> str:
        """The canonical name of the device ``op`` is placed on."""
        return "/device:{}:{}".format(*self.place(op))

    # -- memory ---------------------------------------------------------------------------------
    def memory_kinds(self) -> frozenset:
        """The device types named in the graph whose memory is not the host's (cached
        per graph version: plan building asks once per CPU op)."""
        cached = self._memory_kinds
        graph = self._graph
        if cached is not None and cached[0] == graph.version:
            return cached[1]
        kinds = {parse_device(o.device).device_type for o in graph._ops if o.device}
        found = frozenset(k for k in kinds - {None, "CPU"} if host_copy_function([k]))
        self._memory_kinds = (graph.version, found)
        return found

    def fetch_to_host(self):
        """``to_host(value)`` for fetched values when a device of this session has memory
        of its own (a value left in a GPU's memory comes back as NumPy), else None."""
        if len(self.devices) < 2:
            return None
        return host_copy_function({kind for kind, _ in self.devices})


def _device_limit(kind, requested):
    """How many ``kind`` devices exist: a device type the machine counts (GPU) has
    what the machine has, at most ``requested``; others are simulated."""
    if kind not in known_device_types():
        return requested
    return min(requested, available_device_count(kind))


def _parse_devices(names) -> set:
    """``Session(devices=["/cpu:0", "/cpu:1"])``: the declared devices as (type, index)."""
    out = set()
    for name in names:
        spec = parse_device(name)
        out.add((spec.device_type or "CPU", spec.device_index or 0))
    return out or {CPU0}
