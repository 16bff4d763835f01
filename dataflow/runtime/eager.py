"""The kernels of eager execution: installs the kernel builder that
:mod:`dataflow.framework.eager` calls once per op signature.

An eager op runs on the CPU with the kernel a Session would choose for it (compiled
kernels preferred), built with the eager graph's resources (variable cells, random
streams), so eager and graph mode compute with the same code.

>>> with df.eager_mode():
...     float(df.constant(2.0) * 4.0)
8.0
"""
from __future__ import annotations

from .. import errors
from ..framework import eager as _eager
from ..kernels.registry import KernelContext, find_kernel

__all__ = ["build_kernel"]


def build_kernel(op, resources):
    """The kernel callable of eager ``op`` on the CPU; NotFoundError naming the op when
    none is registered."""
    factory = find_kernel(op, "CPU")
    if factory is None:
        raise errors.NotFoundError(
            None, op, f"No kernel registered for op type {op.type} on device type CPU "
            f"(dtype {op.inputs[0].dtype.name if op.inputs else '-'})")
    ctx = KernelContext(op=op, device=_eager.DEVICE, device_type="CPU", resources=resources)
    try:
        return factory(ctx)
    except errors.OpError:
        raise
    except Exception as e:
        raise errors.InvalidArgumentError(None, op, f"Cannot build kernel: {e}") from e


_eager.set_kernel_builder(build_kernel)
