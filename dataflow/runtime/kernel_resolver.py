"""Kernel resolution: the callable each node of a plan runs (TF's kernel creation).

A :class:`KernelResolver` belongs to one Session. Plan building calls
:meth:`KernelResolver.kernel_for` once per node: it places the op
(:class:`~dataflow.runtime.device_set.DeviceSet`), finds the best kernel factory
registered for the op on that device type (:func:`dataflow.kernels.registry.find_kernel`;
the NumPy reference kernels alone with ``use_compiled_kernels=False``; the CPU's
kernel under soft placement when the device type has none), builds it with the
session's resources, and, for a CPU kernel that may read a value held in a device's
own memory (a GPU's), wraps it so those inputs are copied to the host first.
Decided once per plan, so graphs without such devices pay nothing per node.

>>> import numpy as np, dataflow as df
>>> from dataflow.runtime.device_set import DeviceSet
>>> with df.Graph().as_default() as g:
...     y = df.negative(df.constant([1.0, 2.0]))
>>> config = df.ConfigProto(use_compiled_kernels=False)
>>> resolver = KernelResolver(DeviceSet(g, {}, False), config, resources={})
>>> resolver.kernel_for(y.op)(np.array([1.0, 2.0]))
array([-1., -2.])
"""
from __future__ import annotations

from .. import errors
from ..kernels.registry import KernelContext, find_kernel, out_variant
from .devices import host_copy_function, inputs_from_device_memory, with_host_inputs

__all__ = ["KernelResolver"]


class KernelResolver:
    """Finds and builds the kernel of each node for one session.

    ``config`` is the session's ConfigProto (kernels see it as ``ctx.options``);
    ``resources`` the session's resources (variables, stacks).
    ``devices_of_kernels`` remembers, by op name, the device type whose kernel was
    chosen (it differs from the placement under soft placement): the placement log
    reads it.
    """

    def __init__(self, devices, config, resources: dict):
        self._devices = devices
        self._config = config
        self._resources = resources
        # Without compiled kernels the CPU runs the NumPy reference kernels (priority 0).
        self._cpu_cap = None if config.use_compiled_kernels else 0
        self.devices_of_kernels: dict = {}
        # op -> (factory, context) of its CPU kernel, for its out= variant (plan_memory).
        self._built: dict = {}

    def kernel_for(self, op):
        """The callable the executor runs for ``op``; NotFoundError naming the op when no
        kernel is registered for it on its device."""
        device = self._devices.place(op)
        dtype = device[0]
        cap = self._cpu_cap
        factory = find_kernel(op, dtype, cap if dtype == "CPU" else None)
        if factory is None and self._devices.allow_soft_placement and dtype != "CPU":
            dtype, factory = "CPU", find_kernel(op, "CPU", cap)
        if factory is None:
            raise errors.NotFoundError(
                None, op, f"No kernel registered for op type {op.type} on device type "
                f"{dtype} (dtype {op.inputs[0].dtype.name if op.inputs else '-'})")
        self.devices_of_kernels[op.name] = (dtype, device[1] if dtype == device[0] else 0)
        ctx = KernelContext(op=op, device=op.device, device_type=dtype,
                            resources=self._resources, options=self._config)
        try:
            fn = factory(ctx)
        except errors.OpError:
            raise
        except Exception as e:
            raise errors.InvalidArgumentError(None, op, f"Cannot build kernel: {e}") from e
        if dtype == "CPU":
            self._built[op] = (factory, ctx)
            return self._with_host_copies(op, fn)
        return fn

    def out_kernel_for(self, op):
        """``(fn(*inputs, out), alias_safe)``: the ``out=`` variant of the CPU kernel
        :meth:`kernel_for` built for ``op`` (see
        :func:`dataflow.kernels.registry.register_out_variant`), or None when that
        kernel has none or its inputs may come from a device's own memory."""
        built = self._built.get(op)
        if built is None or self._devices.memory_kinds():
            return None
        variant = out_variant(built[0])
        if variant is None:
            return None
        return variant[0](built[1]), variant[1]

    def _with_host_copies(self, op, fn):
        """A CPU kernel whose inputs may come from a device with memory of its own (a
        GPU) copies those inputs to the host first (see ``devices.py``)."""
        memory_kinds = self._devices.memory_kinds()
        if not memory_kinds:
            return fn
        to_host = host_copy_function(memory_kinds)
        declared_place = self._devices.declared_place

        def in_device_memory(producer):
            place = declared_place(producer)
            return place is not None and place[0] in memory_kinds

        indices = inputs_from_device_memory(op, in_device_memory)
        return with_host_inputs(fn, indices, to_host) if indices else fn
