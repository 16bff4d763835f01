"""The host round trip: the GPU "kernel" of every op without a CUDA kernel.

Registered as the GPU's fallback (:func:`dataflow.kernels.registry.register_fallback`),
so it is resolved when a kernel is looked up: any op type with a CPU kernel and no
CUDA kernel for its dtype gets it, including op types registered after this module
was imported. Device inputs are copied to the host, the CPU kernel runs, and its
results stay in host memory (GPU consumers copy them back when they need them). It is
explicit and slow on purpose; :func:`fallback_op_types` lists the op types that have
no CUDA kernel at all.

>>> "ConcatV2" in fallback_op_types()
True
"""
from __future__ import annotations

from dataflow.framework import op_registry

from ..registry import find_kernel, has_kernel, register_fallback
from .runtime import to_host

__all__ = ["host_round_trip", "fallback_op_types", "gpu_fallback"]

# The control-flow primitives have no kernels: the executor runs them itself.
_NO_KERNEL_ROLES = (op_registry.SWITCH, op_registry.MERGE, op_registry.ENTER,
                    op_registry.EXIT, op_registry.NEXT_ITERATION)


def host_round_trip(ctx):
    """Run ``ctx.op``'s CPU kernel on host copies of its inputs."""
    cpu = find_kernel(ctx.op, "CPU")(ctx)

    def on_host(*args):
        return cpu(*[to_host(a) for a in args])
    return on_host


def _runs_kernels(op_type) -> bool:
    """A defined op type that is not a control-flow primitive. Kernel-only types (a
    fused node) have no definition: they get no fallback, so a device type without
    their kernel is simply not fused."""
    try:
        return op_registry.get_op_def(op_type).role not in _NO_KERNEL_ROLES
    except KeyError:
        return False


def gpu_fallback(op):
    """The GPU kernel factory of ``op`` when no CUDA kernel takes it: the host round
    trip if the CPU has a kernel for it, else None."""
    if not _runs_kernels(op.type) or find_kernel(op, "CPU") is None:
        return None
    return host_round_trip


def fallback_op_types() -> list:
    """Op types whose GPU kernel is the host round trip for every dtype."""
    return sorted(t for t in op_registry.registered_ops()
                  if _runs_kernels(t) and has_kernel(t, "CPU") and not has_kernel(t, "GPU"))


register_fallback("GPU", gpu_fallback)
