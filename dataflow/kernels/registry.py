"""The kernel registry: (op type, device type, dtype) -> kernel factory.

A *factory* is called once per node when a run plan is built, with a
:class:`KernelContext`; it returns the callable the executor invokes for every
execution of that node: ``fn(*input_values) -> output`` (a single value for
one-output ops, a tuple for several, ``None`` for none).

>>> @register_kernel("Square", device="CPU")
... def _square(ctx):
...     return lambda x: x * x

Lookup prefers an exact dtype match, then a dtype-generic kernel, and among
equals the highest ``priority`` (so compiled kernels can override NumPy ones).
Kernels registered with ``compiled=True`` are faster versions of a reference kernel
of the same op; ``find_kernel(..., reference=True)`` (or :func:`reference_kernel`)
skips them, for oracles and comparisons. A device type without a kernel for an op
can name a fallback (:func:`register_fallback`), resolved when the kernel is looked up.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Callable

__all__ = ["KernelContext", "register_kernel", "find_kernel", "has_kernel", "kernel_dtype",
           "registered_device_types", "register_device_type", "device_type_info",
           "declared_device_types", "device_memory", "kernel_is_parallel",
           "kernel_is_constant", "DeviceType", "register_out_variant", "out_variant"]


@dataclass
class KernelContext:
    """What a kernel factory may look at: the op, its device, and session state."""

    op: Any
    device: str = ""
    device_type: str = "CPU"
    resources: dict = field(default_factory=dict)
    options: Any = None

    def attr(self, name):
        return self.op.get_attr(name)

    @property
    def input_dtypes(self):
        return [t.dtype for t in self.op.inputs]

    @property
    def output_dtypes(self):
        return [t.dtype for t in self.op.outputs]


@dataclass(frozen=True)
class _Entry:
    dtypes: frozenset | None
    priority: int
    factory: Callable
    parallel: bool | Callable = False
    compiled: bool = False
    constant: bool = False


_REGISTRY: dict[tuple[str, str], list[_Entry]] = {}


def register_kernel(op_type: str, device: str = "CPU", dtypes=None, priority: int = 0,
                    parallel: bool | Callable = False, compiled: bool = False, constant: bool = False):
    """Decorator registering a kernel factory for ``op_type`` on ``device`` type.

    ``parallel`` marks kernels that use every core themselves (BLAS matmul): the
    executor then never hands them to a worker thread. It may also be a function of
    the op, for a kernel that calls BLAS for some shapes only (the own float32 GEMM). ``compiled`` marks a faster
    version of a reference kernel registered for the same op (reference lookups skip it).
    ``constant`` marks kernels that take no inputs and return the same object on every
    call of one built kernel (a variable's handle): the run plan calls them once and
    folds the value into their consumers, as it folds a ``Const``.
    """
    from dataflow import dtypes as _dt
    dset = None if dtypes is None else frozenset(_dt.as_dtype(d) for d in dtypes)

    def decorate(factory):
        entries = _REGISTRY.setdefault((op_type, device.upper()), [])
        entries.append(_Entry(dset, priority, factory, parallel, compiled, constant))
        entries.sort(key=lambda e: (e.dtypes is None, -e.priority))
        return factory

    return decorate


# kernel factory -> (out factory, alias_safe): the kernels that can write into a given
# array (the memory planner's arena, ConfigProto(plan_memory=True)).
_OUT_VARIANTS: dict = {}


def register_out_variant(kernel_factory, alias_safe: bool = True):
    """Declare the ``out=`` variant of the kernel ``kernel_factory`` makes: the decorated
    ``out_factory(ctx)`` returns ``fn(*inputs, out)``, which writes into ``out`` (an
    array of the output's shape and dtype) exactly the values the kernel would return,
    bit for bit. ``alias_safe`` says ``out`` may be the memory of one of the inputs
    (a single elementwise pass reads each element before writing it); a variant making
    several passes over ``out`` is registered with ``alias_safe=False``. The variant of a
    kernel with several outputs gets ``out`` as a tuple of arrays, one per output.

    >>> import numpy as np
    >>> neg = lambda ctx: np.negative
    >>> @register_out_variant(neg)
    ... def _neg_out(ctx):
    ...     return lambda x, out: np.negative(x, out=out)
    >>> out = np.empty(2)
    >>> _ = out_variant(neg)[0](None)(np.array([1.0, 2.0]), out)
    >>> out
    array([-1., -2.])
    """
    def decorate(out_factory):
        _OUT_VARIANTS[kernel_factory] = (out_factory, alias_safe)
        return out_factory
    return decorate


def out_variant(kernel_factory):
    """``(out_factory, alias_safe)`` registered for ``kernel_factory``, or None."""
    return _OUT_VARIANTS.get(kernel_factory)


def kernel_dtype(op):
    """The dtype that selects a kernel: input 0's, else output 0's, else None."""
    if op.inputs:
        return op.inputs[0].dtype
    if op.outputs:
        return op.outputs[0].dtype
    return None


def _find_entry(op, device_type, max_priority=None, reference=False):
    entries = _REGISTRY.get((op.type, device_type.upper()))
    if not entries:
        return None
    dt = kernel_dtype(op)
    for e in entries:
        if max_priority is not None and e.priority > max_priority:
            continue
        if reference and e.compiled:
            continue
        if e.dtypes is None or dt in e.dtypes:
            return e
    return None


def find_kernel(op, device_type: str = "CPU", max_priority=None, reference: bool = False):
    """The best registered factory for ``op`` on ``device_type``, or None.

    ``max_priority=0`` restricts the choice to the kernels of priority 0, which is how
    a Session runs without compiled kernels; ``reference=True`` to the kernels not
    registered as ``compiled`` (on the CPU: the NumPy reference kernels). When
    ``device_type`` has no kernel for ``op``, its fallback (:func:`register_fallback`)
    is asked for one.

    >>> find_kernel(op, "CPU", reference=True)          # doctest: +SKIP
    """
    entry = _find_entry(op, device_type, max_priority, reference)
    if entry is not None:
        return entry.factory
    fallback = _FALLBACKS.get(device_type.upper())
    return fallback(op) if fallback is not None else None


def reference_kernel(op):
    """The reference kernel factory of ``op`` on the CPU (the NumPy kernel, never a
    compiled one), or None: the oracle for tests and the spec interpreter.

    >>> fn = reference_kernel(op)(KernelContext(op=op))   # doctest: +SKIP
    """
    return find_kernel(op, "CPU", reference=True)


_FALLBACKS: dict[str, Callable] = {}


def register_fallback(device_type: str, fallback: Callable) -> None:
    """Let ``fallback(op)`` answer for ``device_type`` when it has no kernel for ``op``:
    it returns a kernel factory (e.g. the CPU kernel on host copies of the inputs) or
    None. Consulted at every lookup, so ops registered later are covered too.

    >>> register_fallback("XPU", lambda op: None)
    """
    _FALLBACKS[device_type.upper()] = fallback


__all__ += ["reference_kernel", "register_fallback"]


def kernel_is_parallel(op, device_type: str = "CPU") -> bool:
    """True if ``op``'s kernel on ``device_type`` uses every core by itself."""
    entry = _find_entry(op, device_type)
    if entry is None:
        return False
    parallel = entry.parallel
    return bool(parallel(op)) if callable(parallel) else parallel


def kernel_is_constant(op, device_type: str = "CPU") -> bool:
    """True if ``op``'s kernel on ``device_type`` was registered ``constant``."""
    entry = _find_entry(op, device_type)
    return entry is not None and entry.constant


def has_kernel(op_type: str, device_type: str = "CPU") -> bool:
    return bool(_REGISTRY.get((op_type, device_type.upper())))


@dataclass(frozen=True)
class DeviceType:
    """A device type other than the CPU, as a kernel package declares it.

    ``count()`` says how many such devices the machine has (None: the type is
    simulated, a session creates as many as its ``device_count`` asks for);
    ``unavailable_hint`` tells users why there may be none. ``to_host(value)`` and
    ``to_device(value)``, for a type whose values live in memory of its own, copy a
    value out to host memory and back (``to_host`` returns any other value unchanged):
    CPU kernels and fetches reading that type's values, and stacks with
    ``swap_memory``, go through them.
    """

    name: str
    count: Callable | None = None
    unavailable_hint: str = ""
    to_host: Callable | None = None
    to_device: Callable | None = None

    @property
    def has_own_memory(self) -> bool:
        return self.to_host is not None


_DEVICE_TYPES: dict[str, DeviceType] = {}


def register_device_type(device_type: str, count: Callable | None = None,
                         unavailable_hint: str = "", *, to_host: Callable | None = None,
                         to_device: Callable | None = None) -> None:
    """Declare ``device_type`` (the one registry of device types; see :class:`DeviceType`).

    Registering a type again replaces its declaration. Counting is lazy: ``count`` is
    called only when a session needs a device of that type.

    >>> register_device_type("NPU", lambda: 2)
    >>> device_type_info("npu").count()
    2
    """
    name = device_type.upper()
    _DEVICE_TYPES[name] = DeviceType(name, count, unavailable_hint, to_host, to_device)


def device_type_info(device_type: str) -> DeviceType | None:
    """The declaration of ``device_type``, or None (the CPU, an undeclared type)."""
    return _DEVICE_TYPES.get(device_type.upper())


def declared_device_types() -> set[str]:
    """The device types declared with :func:`register_device_type`."""
    return set(_DEVICE_TYPES)


def device_memory(device_type: str):
    """The declaration of ``device_type`` when its memory is not the host's (declared
    with a ``to_host``; stacks with ``swap_memory`` also use its ``to_device``), else
    None."""
    info = _DEVICE_TYPES.get(device_type.upper())
    return info if info is not None and info.has_own_memory else None


def registered_device_types() -> set[str]:
    return {d for (_, d) in _REGISTRY}
