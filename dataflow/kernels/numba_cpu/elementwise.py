"""Numba kernels of the elementwise ops: unary math, activations, binary arithmetic
with the common broadcasts, the activation gradients, and SelectV2.

The ops are the rows of the elementwise op table (:mod:`dataflow.framework.elementwise_table`)
with scalar code from floats to floats; their scalar functions come from the table too.

float32 and float64 are compiled; other dtypes keep the NumPy kernels. Arithmetic
results equal NumPy's bit for bit; Exp, Log, Tanh, Sigmoid use :mod:`dataflow.kernels.approx`
on the compiled path (error bounds there). Broadcasts compiled: same shape, array
with a scalar (or a size-1 array of no higher rank), ``(..., n)`` with an ``n``-row,
``(..., m, n)`` with an ``(..., m, 1)`` column, either operand first; anything else,
non-contiguous arrays, and values below the size thresholds use the NumPy kernel.

>>> x = df.constant(np.zeros((2, 3), np.float32))
>>> b = df.constant(np.arange(3, dtype=np.float32))
>>> y = df.tanh(x) + b                          # Tanh, AddV2 (row broadcast)
>>> df.Session().run(y).tolist()
[[0.0, 1.0, 2.0], [0.0, 1.0, 2.0]]
"""
from __future__ import annotations

import numpy as np

from ...framework.elementwise_table import ELEMENTWISE
from . import _dispatch
from ._dispatch import FLOAT_TYPES, lazy, register_numba

_ndarray = np.ndarray

# The ops compiled here: the table's rows with scalar code from floats to the same float.
_ROWS = {r.name: r for r in ELEMENTWISE.values() if r.fusable}
UNARY_OPS = tuple(name for name, r in _ROWS.items() if r.arity == 1)
BINARY_OPS = tuple(name for name, r in _ROWS.items() if r.arity == 2)
PATTERNS = ("vv", "vs", "sv", "rows", "rows_rev", "cols", "cols_rev")


def _np_dtype(dtype):
    return np.dtype(dtype.as_numpy_dtype)


def _min_size(name):
    """The size threshold of op ``name`` on the same-shape (or scalar) path."""
    row = _ROWS[name]
    if row.transcendental:
        return _dispatch.TRANSCENDENTAL_MIN_SIZE
    if row.numpy_passes > 1:   # NumPy makes 2+ passes over memory, the loop one
        return _dispatch.MULTIPASS_MIN_SIZE
    return _dispatch.ELEMENTWISE_MIN_SIZE


def _unary(ctx, ref):
    """Compiled ``out[i] = op(x[i])`` for large C-contiguous arrays."""
    name, dt = ctx.op.type, _np_dtype(ctx.input_dtypes[0])
    threshold = _min_size(name)
    loop = lazy("_elementwise_jit", "unary_loop", name)

    def unary(x):
        if type(x) is _ndarray and x.size >= threshold and x.dtype is dt \
                and x.flags.c_contiguous:
            out = np.empty(x.shape, dt)
            loop(x.reshape(-1), out.reshape(-1))
            return out
        return ref(x)
    return unary


def _unary_out(ctx, ref_out):
    """``_unary`` writing into ``out`` (the same compiled loop, or the NumPy variant)."""
    dt = _np_dtype(ctx.input_dtypes[0])
    threshold = _min_size(ctx.op.type)
    loop = lazy("_elementwise_jit", "unary_loop", ctx.op.type)
    inplace = lazy("_elementwise_jit", "unary_inplace_loop", ctx.op.type)

    def unary_out(x, out):
        if type(x) is _ndarray and x.size >= threshold and x.dtype is dt \
                and x.flags.c_contiguous:
            if np.may_share_memory(x, out):   # the planner's in-place reuse: x is out
                inplace(out.reshape(-1))
            else:
                loop(x.reshape(-1), out.reshape(-1))
        else:
            ref_out(x, out)
    return unary_out


def _out_ok(name) -> bool:
    """Whether the NumPy kernel of ``name`` has an out variant (the compiled one's
    fallback)."""
    from dataflow.kernels.numpy_cpu import math as _math
    return name in _math._UFUNC_OUT or name in _math._OTHER_OUT


for _name in UNARY_OPS:
    register_numba(_name, out=_unary_out if _out_ok(_name) else None)(_unary)


def _binary(ctx, ref):
    """Compiled binary op for large arrays in one of the broadcast patterns."""
    name, dt = ctx.op.type, _np_dtype(ctx.input_dtypes[0])
    loops = {p: lazy("_elementwise_jit", "binary_loop", name, p) for p in PATTERNS}
    same_min = _min_size(name)               # same shape or with a scalar
    low = min(same_min, _dispatch.MULTIPASS_MIN_SIZE)   # row/column broadcasts

    def binary(x, y):
        if (type(x) is _ndarray and x.size >= low) or (type(y) is _ndarray and y.size >= low):
            out = _broadcast_call(loops, dt, x, y, same_min)
            if out is not None:
                return out
        return ref(x, y)
    return binary


def _binary_out(ctx, ref_out):
    """``_binary`` writing into ``out`` (the same compiled loops, or the NumPy variant).
    Where the planner put ``out`` over an operand (in place) the loops writing that
    operand run instead (``binary_inplace_loop``: one array, so they vectorize)."""
    name, dt = ctx.op.type, _np_dtype(ctx.input_dtypes[0])
    loops = {p: lazy("_elementwise_jit", "binary_loop", name, p) for p in PATTERNS}
    over = {operand: {**loops, **{p: _inplace_call(name, operand, p) for p in PATTERNS
                                  if p in _INPLACE_PATTERNS[operand]}}
            for operand in ("x", "y")}
    same_min = _min_size(name)
    low = min(same_min, _dispatch.MULTIPASS_MIN_SIZE)

    def binary_out(x, y, out):
        if (type(x) is _ndarray and x.size >= low) or (type(y) is _ndarray and y.size >= low):
            chosen = loops
            if type(x) is _ndarray and x.shape == out.shape and np.may_share_memory(x, out):
                chosen = over["x"]
            elif type(y) is _ndarray and y.shape == out.shape \
                    and np.may_share_memory(y, out):
                chosen = over["y"]
            if _broadcast_call(chosen, dt, x, y, same_min, out) is not None:
                return
        ref_out(x, y, out)
    return binary_out


# the broadcast patterns whose result has the shape of operand x (or y)
_INPLACE_PATTERNS = {"x": ("vv", "vs", "rows", "cols"), "y": ("vv", "sv", "rows_rev", "cols_rev")}


def _inplace_call(name, operand, pattern):
    """``call(a, b, out)`` running the in-place loop that writes ``operand`` (which is
    ``out``'s memory): the loop gets that array once."""
    loop = lazy("_elementwise_jit", "binary_inplace_loop", name, operand, pattern)
    return lambda a, b, out: loop(a, b)


for _name in BINARY_OPS:
    register_numba(_name, out=_binary_out if _out_ok(_name) else None)(_binary)


def _broadcast_call(loops, dt, x, y, same_min, dst=None):
    """Run the compiled loop matching how ``x`` and ``y`` broadcast, or return None
    (also for same-shape or scalar operands below ``same_min`` elements); the result
    goes into ``dst`` when given (an array of the result's shape and dtype)."""
    if type(x) is not _ndarray:
        if y.size < same_min or type(x) is not dt.type or y.dtype is not dt \
                or not y.flags.c_contiguous:
            return None
        out = np.empty(y.shape, dt) if dst is None else dst
        loops["sv"](x, y.reshape(-1), out.reshape(-1))
        return out
    if type(y) is not _ndarray:
        if x.size < same_min or type(y) is not dt.type or x.dtype is not dt \
                or not x.flags.c_contiguous:
            return None
        out = np.empty(x.shape, dt) if dst is None else dst
        loops["vs"](x.reshape(-1), y, out.reshape(-1))
        return out
    if x.dtype is not dt or y.dtype is not dt or not (x.flags.c_contiguous
                                                      and y.flags.c_contiguous):
        return None
    if x.shape == y.shape:
        if x.size < same_min:
            return None
        out = np.empty(x.shape, dt) if dst is None else dst
        loops["vv"](x.reshape(-1), y.reshape(-1), out.reshape(-1))
        return out
    if x.size >= y.size:
        return _array_with_smaller(loops, dt, x, y, "vs", "rows", "cols", False, same_min,
                                   dst)
    return _array_with_smaller(loops, dt, y, x, "sv", "rows_rev", "cols_rev", True, same_min,
                               dst)


def _array_with_smaller(loops, dt, big, small, scalar_p, rows_p, cols_p, small_first,
                        same_min, dst=None):
    """``big`` op ``small`` (or ``small`` op ``big``) where ``small`` broadcasts as a
    scalar, a row or a column of ``big``; None for other shapes."""
    if small.ndim > big.ndim or big.ndim == 0:
        return None
    if small.size == 1:
        if big.size < same_min:
            return None
        out = np.empty(big.shape, dt) if dst is None else dst
        s = small.reshape(-1)[0]
        args = (s, big.reshape(-1)) if small_first else (big.reshape(-1), s)
        loops[scalar_p](*args, out.reshape(-1))
        return out
    n = big.shape[-1]
    if big.ndim < 2 or n == 0:
        return None
    if small.size == n and small.shape[-1] == n:
        vec = small.reshape(n)
    elif small.shape == big.shape[:-1] + (1,):
        vec, rows_p = small.reshape(-1), cols_p
    else:
        return None
    b2 = big.reshape(-1, n)
    out = np.empty(big.shape, dt) if dst is None else dst
    loops[rows_p](*((vec, b2) if small_first else (b2, vec)), out.reshape(-1, n))
    return out


@register_numba("SelectV2", dtypes=("bool",))
def _select(ctx, ref):
    """Compiled ``where(c, x, y)`` for large float arrays of one shape."""
    dt = _np_dtype(ctx.output_dtypes[0])
    if dt.name not in FLOAT_TYPES:
        return ref
    loop = lazy("_elementwise_jit", "select_loop")

    def select(c, x, y):
        if type(x) is _ndarray and x.size >= _dispatch.SELECT_MIN_SIZE and type(c) is _ndarray \
                and type(y) is _ndarray and c.shape == x.shape == y.shape \
                and x.dtype is dt and y.dtype is dt and c.dtype == np.bool_ \
                and c.flags.c_contiguous and x.flags.c_contiguous and y.flags.c_contiguous:
            out = np.empty(x.shape, dt)
            loop(c.reshape(-1), x.reshape(-1), y.reshape(-1), out.reshape(-1))
            return out
        return ref(c, x, y)
    return select
