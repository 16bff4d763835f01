"""Device names: parsing ``"/cpu:0"``-style strings into one canonical spelling.

Graph construction records devices (``with df.device("/cpu:1")``) in canonical form,
so the parser lives here, below the runtime that places and runs ops on the devices
(as TF's ``device_spec.py`` sits beside its ``ops.py``).

>>> canonical_device("/cpu:1")
'/device:CPU:1'
>>> canonical_device("/job:worker/task:1/gpu:0")
'/job:worker/task:1/device:GPU:0'
>>> device_type("/gpu:0"), device_type("")
('GPU', 'CPU')
"""
from __future__ import annotations

from typing import NamedTuple

__all__ = ["DeviceSpec", "parse_device", "canonical_device", "device_type"]


class DeviceSpec(NamedTuple):
    job: str | None
    replica: int | None
    task: int | None
    device_type: str | None
    device_index: int | None

    def to_string(self) -> str:
        parts = []
        if self.job is not None:
            parts.append(f"/job:{self.job}")
        if self.replica is not None:
            parts.append(f"/replica:{self.replica}")
        if self.task is not None:
            parts.append(f"/task:{self.task}")
        if self.device_type is not None:
            idx = "*" if self.device_index is None else self.device_index
            parts.append(f"/device:{self.device_type}:{idx}")
        return "".join(parts)


def parse_device(name: str) -> DeviceSpec:
    """Parse ``/job:J/replica:R/task:T/device:TYPE:N`` (every part optional; ``/cpu:0`` too)."""
    if not isinstance(name, str):
        raise TypeError(f"Device name must be a string, got {name!r}")
    job = replica = task = dtype = index = None
    for part in filter(None, name.split("/")):
        key, _, rest = part.partition(":")
        low = key.lower()
        if low == "job":
            job = rest
        elif low == "replica":
            replica = int(rest)
        elif low == "task":
            task = int(rest)
        elif low == "device":
            t, _, i = rest.partition(":")
            dtype, index = t.upper(), (None if i in ("", "*") else int(i))
        elif low in ("cpu", "gpu"):
            dtype, index = low.upper(), (None if rest in ("", "*") else int(rest))
        else:
            raise ValueError(f"Invalid device name {name!r}: unknown part {part!r}")
    return DeviceSpec(job, replica, task, dtype, index)


def canonical_device(name: str) -> str:
    """The canonical spelling of a device name ('' stays '': no device requested)."""
    if not name:
        return ""
    return parse_device(name).to_string()


def device_type(name: str) -> str:
    """``"CPU"`` or ``"GPU"`` (CPU for an empty or typeless name)."""
    if not name:
        return "CPU"
    return parse_device(name).device_type or "CPU"
