"""GPU kernels of the elementwise ops (unary, binary with broadcasting, cast).

Values arrive in host or device memory and results stay on the device. Two
exceptions keep control flow cheap, as TF's host-memory int32 scalars do: an
op whose inputs are all host scalars computes on the host (a loop counter's
``i + 1`` and ``i < n`` launch nothing), and a 0-d boolean result is returned in
host memory (it is usually a Switch predicate, which the executor reads).

>>> x = df.placeholder(df.float32, [3])
>>> with df.device("/gpu:0"):
...     y = df.tanh(x) * 2.0          # Tanh, Mul: device kernels, y stays on the GPU
>>> df.Session().run(y, {x: np.zeros(3, np.float32)})
array([0., 0., 0.], dtype=float32)
"""
from __future__ import annotations

import numpy as np

from ...framework.elementwise_table import ELEMENTWISE, cuda_dtypes
from ..registry import register_kernel
from ._util import DeviceInput, broadcast_strides, flat, host_kernel, launch, np_dtype
from .runtime import device_empty, is_device_value, serialized, to_host

__all__ = ["UNARY_OPS", "BINARY_OPS", "FLOAT", "NUMERIC"]

FLOAT = ("float32", "float64")
NUMERIC = FLOAT + ("int32", "int64")

#: Unary op types and the dtypes their GPU kernels take: the rows of the elementwise op
#: table with scalar code.
UNARY_OPS = {r.name: cuda_dtypes(r) for r in ELEMENTWISE.values()
             if r.cuda_scalar is not None and r.arity == 1}
#: Binary op types and the dtypes of their inputs.
BINARY_OPS = {r.name: cuda_dtypes(r) for r in ELEMENTWISE.values()
              if r.cuda_scalar is not None and r.arity == 2}
CAST_DTYPES = NUMERIC + ("bool",)


def _host_scalar(x) -> bool:
    return not is_device_value(x) and np.ndim(x) == 0


def _finish(out, to_host_scalar: bool):
    """A 0-d boolean result goes back to the host (see the module docstring)."""
    return to_host(out) if to_host_scalar and out.ndim == 0 else out


def unary_factory(ctx, op_type=None, in_dtype=None):
    """The GPU kernel of a unary elementwise op (``op_type`` overrides ``ctx.op.type``:
    Cast uses the ``"Cast"`` scalar function)."""
    from .device import elementwise as K
    op_type = op_type or ctx.op.type
    in_dt = in_dtype or np_dtype(ctx.input_dtypes[0])
    out_dt = np_dtype(ctx.output_dtypes[0])
    kernel = K.unary_kernel(op_type, in_dt)
    host_fn = host_kernel(ctx)
    conv = DeviceInput()
    bool_out = out_dt == np.bool_

    def unary(x):
        if _host_scalar(x):
            return host_fn(x)
        x = conv(x)
        out = device_empty(x.shape, out_dt)
        if out.size:
            launch(kernel, out.size, flat(x), flat(out))
        return _finish(out, bool_out)
    return serialized(unary)


def binary_factory(ctx):
    """The GPU kernel of a binary elementwise op with NumPy broadcasting."""
    from .device import elementwise as K
    op_type = ctx.op.type
    in_dt = np_dtype(ctx.input_dtypes[0])
    out_dt = np_dtype(ctx.output_dtypes[0])
    same = K.binary_same_kernel(op_type, in_dt)
    bcast = K.binary_broadcast_kernel(op_type, in_dt)
    scalar_a = K.binary_scalar_kernel(op_type, in_dt, True)
    scalar_b = K.binary_scalar_kernel(op_type, in_dt, False)
    host_fn = host_kernel(ctx)
    conv_a, conv_b = DeviceInput(), DeviceInput()
    bool_out = out_dt == np.bool_
    scalar_of = in_dt.type

    def binary(a, b):
        a_scalar, b_scalar = _host_scalar(a), _host_scalar(b)
        if a_scalar and b_scalar:
            return host_fn(a, b)
        sa, sb = np.shape(a), np.shape(b)
        shape = np.broadcast_shapes(sa, sb)
        out = device_empty(shape, out_dt)
        n = out.size
        if not n:
            return out
        if b_scalar and sa == shape:
            launch(scalar_b, n, scalar_of(b), flat(conv_a(a)), flat(out))
        elif a_scalar and sb == shape:
            launch(scalar_a, n, scalar_of(a), flat(conv_b(b)), flat(out))
        elif sa == sb:
            launch(same, n, flat(conv_a(a)), flat(conv_b(b)), flat(out))
        else:
            launch(bcast, n, flat(conv_a(a)), broadcast_strides(sa, shape),
                   flat(conv_b(b)), broadcast_strides(sb, shape), tuple(shape), flat(out))
        return _finish(out, bool_out)
    return serialized(binary)


def cast_factory(ctx):
    """Cast: the identity scalar function, converted by the store into the output."""
    return unary_factory(ctx, "Cast")


for _t, _dts in UNARY_OPS.items():
    register_kernel(_t, device="GPU", dtypes=_dts)(unary_factory)
for _t, _dts in BINARY_OPS.items():
    register_kernel(_t, device="GPU", dtypes=_dts)(binary_factory)
register_kernel("Cast", device="GPU", dtypes=CAST_DTYPES)(cast_factory)


@register_kernel("SelectV2", device="GPU")
def _select(ctx):
    """``where(condition, x, y)`` with the three inputs broadcast against each other."""
    from .device import elementwise as K
    out_dt = np_dtype(ctx.output_dtypes[0])
    convs = (DeviceInput(), DeviceInput(), DeviceInput())

    def select(c, x, y):
        shapes = [tuple(np.shape(v)) for v in (c, x, y)]
        shape = np.broadcast_shapes(*shapes)
        out = device_empty(shape, out_dt)
        if out.size:
            c, x, y = (conv(v) for conv, v in zip(convs, (c, x, y)))
            strides = [broadcast_strides(s, shape) if shape else () for s in shapes]
            launch(K.select_kernel, out.size, flat(c), strides[0] or (0,), flat(x),
                   strides[1] or (0,), flat(y), strides[2] or (0,), tuple(shape) or (1,),
                   flat(out))
        return out
    return serialized(select)


@register_kernel("AddN", device="GPU", dtypes=NUMERIC)
def _add_n(ctx):
    """The sum of same-shape tensors (gradient accumulation), by pairwise adds."""
    from .device import elementwise as K
    dt = np_dtype(ctx.output_dtypes[0])
    add = K.binary_same_kernel("AddV2", dt)
    convs = [DeviceInput() for _ in ctx.op.inputs]

    def add_n(*values):
        shape = tuple(np.shape(values[0]))
        if any(tuple(np.shape(v)) != shape for v in values):
            raise ValueError(f"AddN inputs must all have one shape, got "
                             f"{[tuple(np.shape(v)) for v in values]}")
        values = [conv(v) for conv, v in zip(convs, values)]
        if len(values) == 1:
            return values[0]
        total = values[0]
        for v in values[1:]:
            out = device_empty(shape, dt)
            if out.size:
                launch(add, out.size, flat(total), flat(v), flat(out))
            total = out
        return total
    return serialized(add_n)
