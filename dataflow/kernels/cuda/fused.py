"""The GPU kernel of fused elementwise nodes (``FusedElementwise``): CUDA code generated
per expression.

The fusion pass (``dataflow/runtime/fusion.py``) describes a group of elementwise ops as
a :class:`~dataflow.framework.fused_expr.FusedExpr`: an SSA ``program`` over the group's
external inputs and scalar literals. This module writes the program out as one
scalar device function (each instruction calls the op's device function from
:mod:`dataflow.kernels.cuda.device.scalar`, literals are constants of the expression's dtype;
NVVM inlines it all, and ``math.tanh``/``math.exp`` are libdevice calls) and wraps it
in two grid-stride kernels: a flat one when every input has the output's shape, and a
broadcasting one that takes each input's element strides. One launch, one pass over
memory, no temporaries. Kernels are cached by ``(program, dtype)``.

Host scalars only (a loop's float bookkeeping) take the CPU fused kernel, as the
unfused GPU kernels do.

>>> program = (("Mul", (("input", 0), ("input", 1))), ("Tanh", (("value", 0),)))
>>> src = kernel_source(program, "float32", 2)      # tanh(x0 * x1)
>>> print(src.device_function)
def fused_expr(x0, x1):
    v0 = F0(x0, x1)
    v1 = F1(v0)
    return v1
"""
from __future__ import annotations

import functools
from typing import NamedTuple

import numpy as np

from ...framework.elementwise_table import fusable_ops
from ...framework.fused_expr import FUSED_OP_TYPE
from ..registry import find_kernel, register_kernel
from ._util import DeviceInput, broadcast_strides, flat, launch
from .runtime import device_empty, is_device_value, serialized

__all__ = ["FUSED_OP_TYPE", "KernelSource", "kernel_source", "fused_kernels", "sample_kernels"]

class KernelSource(NamedTuple):
    """Generated Python source: the scalar device function and the two kernels, plus
    the globals they refer to (scalar device functions ``F<i>``, literals ``C<i>``)."""

    device_function: str
    flat_kernel: str
    broadcast_kernel: str
    functions: tuple   # op types, in F0, F1, ... order
    constants: tuple   # literal values (float.hex), in C0, C1, ... order


def kernel_source(program, dtype: str, num_inputs: int) -> KernelSource:
    """The source of the fused kernels of ``program`` (``FusedExpr.program``)."""
    xs = [f"x{k}" for k in range(num_inputs)]
    functions, constants, lines = [], [], []

    def name_of(table, value, prefix):
        if value not in table:
            table.append(value)
        return f"{prefix}{table.index(value)}"

    for j, (op_type, args) in enumerate(program):
        f = name_of(functions, op_type, "F")
        operands = []
        for kind, v in args:
            if kind == "input":
                operands.append(xs[v])
            elif kind == "value":
                operands.append(f"v{v}")
            else:  # "const": a literal of the expression's dtype
                operands.append(name_of(constants, v, "C"))
        lines.append(f"    v{j} = {f}({', '.join(operands)})")
    device = "\n".join([f"def fused_expr({', '.join(xs)}):", *lines,
                        f"    return v{len(program) - 1}"]) + "\n"
    loop = "    for i in range(cuda.grid(1), out.size, cuda.gridsize(1)):\n"
    flat_src = (f"def fused_flat({', '.join(xs + ['out'])}):\n" + loop +
                f"        out[i] = fused_expr({', '.join(x + '[i]' for x in xs)})\n")
    strided = [f"{x}, s{k}" for k, x in enumerate(xs)]
    offsets = "".join(f"            o{k} += c * s{k}[d]\n" for k in range(num_inputs))
    elements = ", ".join(f"x{k}[o{k}]" for k in range(num_inputs))
    bcast_src = (f"def fused_broadcast({', '.join(strided + ['shape', 'out'])}):\n" + loop +
                 "        r = i\n" +
                 "".join(f"        o{k} = 0\n" for k in range(num_inputs)) +
                 "        for d in range(len(shape) - 1, -1, -1):\n"
                 "            c = r % shape[d]\n"
                 "            r //= shape[d]\n" + offsets +
                 f"        out[i] = fused_expr({elements})\n")
    return KernelSource(device, flat_src, bcast_src, tuple(functions), tuple(constants))


@functools.lru_cache(maxsize=256)
def fused_kernels(program, dtype: str, num_inputs: int):
    """``(flat, broadcast)`` CUDA kernels of ``program`` on ``dtype`` (compiled lazily by
    Numba on first launch, per argument types)."""
    from numba import cuda

    from .device.scalar import scalar_fn
    src = kernel_source(program, dtype, num_inputs)
    dt = np.dtype(dtype)
    namespace = {"cuda": cuda}
    namespace.update({f"F{i}": scalar_fn(t, dt) for i, t in enumerate(src.functions)})
    namespace.update({f"C{i}": dt.type(float.fromhex(c)) for i, c in enumerate(src.constants)})
    exec(compile(src.device_function, "<fused_expr>", "exec"), namespace)
    namespace["fused_expr"] = cuda.jit(device=True)(namespace["fused_expr"])
    exec(compile(src.flat_kernel, "<fused_flat>", "exec"), namespace)
    exec(compile(src.broadcast_kernel, "<fused_broadcast>", "exec"), namespace)
    return cuda.jit(namespace["fused_flat"]), cuda.jit(namespace["fused_broadcast"])


@register_kernel(FUSED_OP_TYPE, device="GPU", dtypes=("float32", "float64"))
def _fused(ctx):
    expr = ctx.op.expr
    dt = np.dtype(expr.dtype)
    n = expr.num_inputs
    flat_kernel, bcast_kernel = fused_kernels(expr.program, expr.dtype, n)
    cpu = find_kernel(ctx.op, "CPU")
    host_fn = cpu(ctx) if cpu is not None else None
    convs = [DeviceInput() for _ in range(n)]

    def fused(*values):
        if host_fn is not None and not any(is_device_value(v) or np.ndim(v) for v in values):
            return host_fn(*values)
        shapes = [tuple(np.shape(v)) for v in values]
        shape = tuple(np.broadcast_shapes(*shapes))
        out = device_empty(shape, dt)
        if not out.size:
            return out
        arrays = [flat(conv(v)) for conv, v in zip(convs, values)]
        if all(s == shape for s in shapes):
            launch(flat_kernel, out.size, *arrays, flat(out))
        else:
            args = []
            for a, s in zip(arrays, shapes):
                args += [a, broadcast_strides(s, shape) if shape else (0,)]
            launch(bcast_kernel, out.size, *args, shape or (1,), flat(out))
        return out
    return serialized(fused)


def sample_kernels():
    """``[(name, kernel, signature)]`` of fused kernels using every fusable op type, for
    the PTX compile check (:mod:`dataflow.kernels.cuda.compile_check`)."""
    out = []
    for dtype in ("float32", "float64"):
        program, k = [], 0
        for op_type, arity in fusable_ops().items():
            if not program:
                args = (("input", 0),) * arity
            elif arity == 1:
                args = (("value", k - 1),)
            else:
                args = (("value", k - 1), ("input", 1) if k % 2 else ("const", "0x1.8p-1"))
            program.append((op_type, args))
            k += 1
        flat_k, bcast_k = fused_kernels(tuple(program), dtype, 2)
        arr = f"{dtype}[::1]"
        tup = "UniTuple(int64, 2)"
        out.append((f"fused flat {dtype}", flat_k, f"void({arr}, {arr}, {arr})"))
        out.append((f"fused broadcast {dtype}", bcast_k,
                    f"void({arr}, {tup}, {arr}, {tup}, {tup}, {arr})"))
    return out
