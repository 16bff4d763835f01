"""The host round trip: the GPU "kernel" of every op without a CUDA kernel.

Registered at the lowest priority for every op type that has a CPU kernel (and
for the dtypes the CUDA kernels do not take): device inputs are copied to the
host, the CPU kernel runs, and its results stay in host memory (GPU consumers copy
them back when they need them). It is explicit and slow on purpose;
:func:`fallback_op_types` lists the op types that have no CUDA kernel at all.

>>> "ConcatV2" in fallback_op_types()
True
"""
from __future__ import annotations

from dataflow.framework import op_registry

from ..registry import find_kernel, has_kernel, register_kernel
from .runtime import to_host

__all__ = ["FALLBACK_PRIORITY", "host_round_trip", "fallback_op_types"]

FALLBACK_PRIORITY = -100
_NO_KERNEL_ROLES = (op_registry.SWITCH, op_registry.MERGE, op_registry.ENTER,
                    op_registry.EXIT, op_registry.NEXT_ITERATION)
_REGISTERED: list = []


def host_round_trip(ctx):
    """Run ``ctx.op``'s CPU kernel on host copies of its inputs."""
    cpu = find_kernel(ctx.op, "CPU")(ctx)

    def on_host(*args):
        return cpu(*[to_host(a) for a in args])
    return on_host


def fallback_op_types() -> list:
    """Op types whose GPU kernel is the host round trip for every dtype."""
    return sorted(t for t in _REGISTERED if not _has_cuda_kernel(t))


def _has_cuda_kernel(op_type) -> bool:
    from ..registry import _REGISTRY
    return any(e.factory is not host_round_trip for e in _REGISTRY.get((op_type, "GPU"), ()))


def _register_all():
    for op_type in op_registry.registered_ops():
        if op_registry.get_op_def(op_type).role in _NO_KERNEL_ROLES:
            continue
        if has_kernel(op_type, "CPU"):
            register_kernel(op_type, device="GPU", priority=FALLBACK_PRIORITY)(host_round_trip)
            _REGISTERED.append(op_type)


_register_all()
