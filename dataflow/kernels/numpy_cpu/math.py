"""Elementwise math, comparisons, reductions, matmul and cast.

Elementwise kernels are the NumPy functions of the elementwise op table
(:mod:`dataflow.framework.elementwise_table`).
"""
from __future__ import annotations

import operator

import numpy as np

from ...framework.elementwise_table import ELEMENTWISE, INT_DTYPES
from ..registry import register_kernel, register_out_variant
from ._util import const, np_dtype, scalarize

# The out= variants of the elementwise rows (ConfigProto(plan_memory=True) writes into
# the planned arena): the same NumPy ufunc calls as the row's function, in the same
# order and dtypes, so the values are bit-identical, and safe when ``out`` is the memory
# of an input of its shape (the planner's in-place reuse).
_UFUNC_OUT = {
    "Neg": np.negative, "Sqrt": np.sqrt, "Abs": np.absolute, "Exp": np.exp, "Log": np.log,
    "Tanh": np.tanh, "Log1p": np.log1p, "Sign": np.sign, "Floor": np.floor,
    "Ceil": np.ceil, "Sin": np.sin, "Cos": np.cos, "LogicalNot": np.logical_not,
    "AddV2": np.add, "Sub": np.subtract, "Mul": np.multiply, "RealDiv": np.true_divide,
    "Maximum": np.maximum, "Minimum": np.minimum, "Less": np.less,
    "LessEqual": np.less_equal, "Greater": np.greater, "GreaterEqual": np.greater_equal,
    "Equal": np.equal, "NotEqual": np.not_equal, "LogicalAnd": np.logical_and,
    "LogicalOr": np.logical_or,
}


def _square_out(x, out):
    np.multiply(x, x, out=out)


def _relu_out(x, out):                   # np.maximum(x, 0), NaN kept
    np.maximum(x, 0, out=out)


def _sigmoid_out(x, out):                 # 1 / (1 + exp(-x)); reads x in its first pass only
    with np.errstate(over="ignore"):
        np.negative(x, out=out)
        np.exp(out, out=out)
    np.add(1, out, out=out)
    np.true_divide(1, out, out=out)


def _tanh_grad_out(y, dy, out):          # dy * (1 - y * y)
    np.multiply(y, y, out=out)
    np.subtract(1, out, out=out)
    np.multiply(dy, out, out=out)


def _sigmoid_grad_out(y, dy, out):       # dy * (y * (1 - y))
    np.subtract(1, y, out=out)
    np.multiply(y, out, out=out)
    np.multiply(dy, out, out=out)


def _unless_aliased(passes, ref):
    """``passes`` (several passes over ``out`` that read the inputs again) when ``out``
    shares no memory with an input; otherwise the reference result, copied into it."""
    def out_fn(*args):
        out = args[-1]
        for a in args[:-1]:
            if type(a) is np.ndarray and np.may_share_memory(a, out):
                np.copyto(out, ref(*args[:-1]))
                return
        passes(*args)
    return out_fn


# name -> out function (every one safe when ``out`` is an input's memory of its shape)
_OTHER_OUT = {"Square": _square_out, "Relu": _relu_out, "Sigmoid": _sigmoid_out,
              "TanhGrad": _unless_aliased(_tanh_grad_out, ELEMENTWISE["TanhGrad"].numpy),
              "SigmoidGrad": _unless_aliased(_sigmoid_grad_out,
                                             ELEMENTWISE["SigmoidGrad"].numpy)}


def _ufunc_out(ufunc):
    return lambda *args: ufunc(*args[:-1], out=args[-1])


def _register_elementwise():
    """The reference kernel of every row of the elementwise op table: its NumPy function,
    and for integer inputs its integer variant where it has one; the out variants of
    the float (non-integer-variant) kernels."""
    for row in ELEMENTWISE.values():
        factory = register_kernel(row.name)(const(row.numpy))
        if row.name in _UFUNC_OUT:
            register_out_variant(factory)(const(_ufunc_out(_UFUNC_OUT[row.name])))
        elif row.name in _OTHER_OUT:
            register_out_variant(factory)(const(_OTHER_OUT[row.name]))
        if row.numpy_int is not None:
            register_kernel(row.name, dtypes=INT_DTYPES)(const(row.numpy_int))


_register_elementwise()


@register_kernel("AddN")
def _add_n(ctx):
    def add_n(*xs):
        total = xs[0] + xs[1]
        for x in xs[2:]:
            total = total + x
        return total
    return add_n


@register_out_variant(_add_n, alias_safe=False)   # a later input may share out's memory
def _add_n_out(ctx):
    """AddN into ``out`` (``plan_memory``): the same additions, in the same order."""
    def add_n_out(*xs_out):
        *xs, out = xs_out
        np.add(xs[0], xs[1], out=out)
        for x in xs[2:]:
            np.add(out, x, out=out)
    return add_n_out


def _axes(ctx):
    axis = ctx.attr("axis")
    return axis if axis is None or isinstance(axis, int) else tuple(axis)


@register_kernel("Sum")
def _sum(ctx):
    axis, kd, dt = _axes(ctx), ctx.attr("keep_dims"), np_dtype(ctx.output_dtypes[0])
    return lambda x: scalarize(np.sum(x, axis=axis, keepdims=kd, dtype=dt))


@register_kernel("Prod")
def _prod(ctx):
    axis, kd, dt = _axes(ctx), ctx.attr("keep_dims"), np_dtype(ctx.output_dtypes[0])
    return lambda x: scalarize(np.prod(x, axis=axis, keepdims=kd, dtype=dt))


@register_out_variant(_sum)
def _sum_out(ctx):
    axis, kd, dt = _axes(ctx), ctx.attr("keep_dims"), np_dtype(ctx.output_dtypes[0])
    return lambda x, out: np.sum(x, axis=axis, keepdims=kd, dtype=dt, out=out)


@register_kernel("Mean")
def _mean(ctx):
    axis, kd, dt = _axes(ctx), ctx.attr("keep_dims"), np_dtype(ctx.output_dtypes[0])
    if dt.kind in "iu":
        def int_mean(x):
            x = np.asarray(x)
            n = x.size if axis is None else int(np.prod([x.shape[a] for a in np.atleast_1d(axis)]))
            total = np.sum(x, axis=axis, keepdims=kd, dtype=dt)
            return scalarize(_truncating_div(total, max(n, 1)).astype(dt, copy=False))
        return int_mean
    return lambda x: scalarize(np.mean(x, axis=axis, keepdims=kd, dtype=dt))


def _truncating_div(total, n):
    """Integer division rounding toward zero (C's ``/``, which TF's integer mean uses)."""
    q = total // n
    # Floor division rounds negative non-multiples down; step those back up by one.
    return q + ((q < 0) & (q * n != total))


def _extreme(np_fn, identity_attr):
    def factory(ctx):
        axis, kd = _axes(ctx), ctx.attr("keep_dims")
        dt = ctx.output_dtypes[0]
        fill = getattr(dt, identity_attr) if dt.is_numeric else None

        def reduce(x):
            if np.size(x) == 0:  # TF: the reduction of nothing is the dtype's identity
                return scalarize(np_fn(np.asarray(x), axis=axis, keepdims=kd, initial=fill))
            return scalarize(np_fn(x, axis=axis, keepdims=kd))
        return reduce
    return factory


register_kernel("Max")(_extreme(np.max, "min"))
register_kernel("Min")(_extreme(np.min, "max"))


@register_kernel("All")
def _all(ctx):
    axis, kd = _axes(ctx), ctx.attr("keep_dims")
    return lambda x: scalarize(np.all(x, axis=axis, keepdims=kd))


@register_kernel("Any")
def _any(ctx):
    axis, kd = _axes(ctx), ctx.attr("keep_dims")
    return lambda x: scalarize(np.any(x, axis=axis, keepdims=kd))


@register_kernel("MatMul", parallel=True)  # BLAS runs on every core already
def _matmul(ctx):
    ta, tb = ctx.attr("transpose_a"), ctx.attr("transpose_b")
    if not ta and not tb:
        return operator.matmul
    return lambda a, b: (a.T if ta else a) @ (b.T if tb else b)


@register_out_variant(_matmul, alias_safe=False)   # BLAS must not write over its inputs
def _matmul_out(ctx):
    ta, tb = ctx.attr("transpose_a"), ctx.attr("transpose_b")
    return lambda a, b, out: np.matmul(a.T if ta else a, b.T if tb else b, out=out)


@register_kernel("Cast")
def _cast(ctx):
    dt = np_dtype(ctx.attr("DstT"))
    to_scalar = dt.type

    def cast(x):
        if type(x) is np.ndarray:
            return x.astype(dt)  # C casting: floats to ints truncate toward zero
        # On NumPy scalars the scalar type's constructor is the same C cast, returns a
        # NumPy scalar, and is 2-6x faster than astype or a detour through a 0-d array.
        return to_scalar(x)
    return cast


# A cast to a type of another size must not write over its own input.
@register_out_variant(_cast, alias_safe=False)
def _cast_out(ctx):
    """The cast written into ``out``: ``np.copyto`` with unsafe casting runs the same
    C conversion loop as ``astype`` (bit-identical results), without a fresh array."""
    def cast_out(x, out):
        np.copyto(out, x, casting="unsafe")
    return cast_out
