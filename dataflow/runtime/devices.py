"""Devices at run time: the device types a machine has, and host copies of values held
in a device's own memory. Device names are parsed by :mod:`dataflow.framework.device_spec`
(graph construction needs them); its names are re-exported here.

>>> canonical_device("/cpu:1")
'/device:CPU:1'
>>> canonical_device("/job:worker/task:1/gpu:0")
'/job:worker/task:1/device:GPU:0'
"""
from __future__ import annotations

# The parser lives in the framework (graph construction canonicalises device names);
# these names stay importable from here.
from ..framework.device_spec import DeviceSpec, canonical_device, device_type, parse_device

__all__ = ["DeviceSpec", "parse_device", "canonical_device", "device_type",
           "register_device_type", "known_device_types", "available_device_count",
           "unavailable_hint", "inputs_from_device_memory", "with_host_inputs",
           "host_copy_function"]

# Device types other than the CPU, with how many devices of each type this machine has.
# Kernel packages register them (``dataflow.kernels.cuda`` registers "GPU"); counting is lazy and
# happens only when a session needs a device of that type.
_DEVICE_COUNTERS: dict = {}
_UNAVAILABLE_HINTS: dict = {}
_HOST_COPIES: dict = {}


def register_device_type(kind: str, count, unavailable_hint: str = "", to_host=None) -> None:
    """Declare device type ``kind``; ``count()`` returns how many such devices exist, and
    ``unavailable_hint`` tells users why there may be none (for error messages).
    ``to_host(value)``, for a type whose values live in memory of its own, returns a
    host copy of a device value and any other value unchanged: CPU kernels and fetches
    reading values of that type go through it.

    >>> register_device_type("XPU", lambda: 2)
    >>> available_device_count("xpu")
    2
    """
    _DEVICE_COUNTERS[kind.upper()] = count
    _UNAVAILABLE_HINTS[kind.upper()] = unavailable_hint
    if to_host is not None:
        _HOST_COPIES[kind.upper()] = to_host


def known_device_types() -> set:
    """The device types registered with :func:`register_device_type`."""
    return set(_DEVICE_COUNTERS)


def unavailable_hint(kind: str) -> str:
    """Why a registered device type may have no devices ('' if unknown)."""
    return _UNAVAILABLE_HINTS.get(kind.upper(), "")


def available_device_count(kind: str) -> int:
    """How many devices of type ``kind`` this machine has (0 for unknown types)."""
    count = _DEVICE_COUNTERS.get(kind.upper())
    return int(count()) if count is not None else 0


# -- values crossing from a device's own memory to the host ----------------------------
# The one place that decides where host copies go: a CPU kernel whose input may carry
# a value in device memory gets its callable wrapped, at plan time, to copy such inputs
# to the host; CPU-only graphs never reach this. (Send/Recv pairs placed by a
# partitioning pass can replace it.)

def inputs_from_device_memory(op, in_device_memory) -> list:
    """Indices of ``op``'s inputs that may carry a value held in device memory.

    ``in_device_memory(producer_op)`` says whether a producer's kernel runs on a device
    with memory of its own. Values travel unchanged through the control-flow primitives
    and identity-like ops, so the walk looks through them; stateful producers (variable
    reads, stack pops) may return what a device op stored, so they count too.
    """
    from ..framework import op_registry as R
    passing = (R.SWITCH, R.MERGE, R.ENTER, R.EXIT, R.NEXT_ITERATION)

    def may_be_device(start) -> bool:
        seen, stack = {start}, [start]
        while stack:
            producer = stack.pop()
            op_def = producer._op_def
            if op_def.role in passing:
                srcs = producer._inputs[:1] if op_def.role == R.SWITCH else producer._inputs
            elif op_def.forwards_input:
                if in_device_memory(producer):
                    return True
                srcs = producer._inputs[:1]
            else:
                if in_device_memory(producer) or op_def.stateful:
                    return True
                continue
            for t in srcs:
                if t.op not in seen:
                    seen.add(t.op)
                    stack.append(t.op)
        return False

    return [i for i, t in enumerate(op.inputs) if may_be_device(t.op)]


def host_copy_function(kinds):
    """One ``to_host(value)`` for the device types ``kinds`` whose values live in memory
    of their own (registered with a ``to_host``), or None if none does."""
    copies = [_HOST_COPIES[k] for k in sorted({k.upper() for k in kinds}) if k in _HOST_COPIES]
    if not copies:
        return None
    if len(copies) == 1:
        return copies[0]

    def to_host(value):
        for copy in copies:
            value = copy(value)
        return value
    return to_host


def with_host_inputs(fn, indices, to_host):
    """``fn`` with the inputs at ``indices`` passed through ``to_host`` first (a no-op
    on values already in host memory).

    >>> f = with_host_inputs(lambda a, b: a + b, [1], lambda v: v * 10)
    >>> f(1, 2)
    21
    """
    indices = tuple(indices)

    def host_inputs(*args):
        args = list(args)
        for i in indices:
            args[i] = to_host(args[i])
        return fn(*args)
    host_inputs.__wrapped__ = fn
    return host_inputs
