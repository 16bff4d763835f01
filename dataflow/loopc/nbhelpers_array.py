"""Numba helpers of the array lowerings (:mod:`.lowering_array`); imports Numba.

Generated loop functions import these beside :mod:`.nbhelpers`. Like those, each helper
takes scalars and arrays alike and raises :class:`~.nbhelpers.Fallback` where the
reference kernel would raise, so the interpreter raises its own error:

* ``softmax_nd``, ``log_softmax_nd``, ``xent_nd`` and ``sparse_xent_nd``: the compiled
  kernels of ``dataflow.kernels.numba_cpu`` (the interpreter's own for float32/float64)
  over the last axis, called on the input viewed as ``(rows, n)``; the same values as the
  interpreter's compiled kernel, and within its documented bounds of the NumPy kernel;
* ``floordiv_f`` and ``floormod_f``: NumPy's float ``floor_divide`` and ``remainder``
  (``npy_divmod`` in numpy/_core/src/npymath), bit for bit, elementwise with broadcasting;
* ``check_float_to_int``: hands back a float -> int cast whose value (or NaN) lies outside
  the integer type (C leaves it undefined; only NumPy's own cast says what comes out);
* ``check_pow_exponent``: integer ``Pow`` to a negative power (NumPy raises).
"""
from __future__ import annotations

import numpy as np
from numba import njit, types
from numba.extending import overload
from numba.np.numpy_support import as_dtype

from dataflow.kernels.numba_cpu._nn_jit import (log_softmax_rows, softmax_rows,
                                                sparse_xent_rows, xent_rows,
                                                xent_short_rows)
from dataflow.kernels.numba_cpu.nn import SHORT_ROW

from .nbhelpers import Fallback

__all__ = ["softmax_nd", "log_softmax_nd", "xent_nd", "sparse_xent_nd", "floordiv_f",
           "floormod_f", "check_float_to_int", "check_pow_exponent"]


def _stub(*args):
    raise TypeError("compiled code only")


# -- softmax and cross-entropy ----------------------------------------------------------------

def softmax_nd(x):
    return _stub(x)


def log_softmax_nd(x):
    return _stub(x)


def _rowwise(kernel):
    def impl(x):
        if not isinstance(x, types.Array) or x.ndim == 0:
            return None

        def rows(x):
            n = x.shape[-1]
            if n == 0:
                raise Fallback()
            c = np.ascontiguousarray(x)
            out = np.empty(c.shape, c.dtype)
            kernel(c.reshape(-1, n), out.reshape(-1, n))
            return out
        return rows
    return impl


overload(softmax_nd)(_rowwise(softmax_rows))
overload(log_softmax_nd)(_rowwise(log_softmax_rows))


def xent_nd(logits, labels):
    return _stub(logits, labels)


def _loss_of(ndim):
    """``finish(flat, shape)``: the per-row losses ``flat`` as the kernel returns them,
    shaped ``shape[:-1]`` (a scalar for rank-1 logits)."""
    if ndim == 1:
        return njit(lambda flat, shape: flat[0])
    return njit(lambda flat, shape: flat.reshape(shape[:-1]))


@overload(xent_nd)
def _xent_nd(logits, labels):
    if not isinstance(logits, types.Array) or not isinstance(labels, types.Array) \
            or logits.ndim != labels.ndim or logits.dtype != labels.dtype:
        return None
    finish = _loss_of(logits.ndim)

    def xent(logits, labels):
        n = logits.shape[-1]
        if n == 0 or logits.shape != labels.shape:
            raise Fallback()
        x = np.ascontiguousarray(logits)
        y = np.ascontiguousarray(labels)
        backprop = np.empty(x.shape, x.dtype)
        loss = np.empty(x.size // n, x.dtype)
        if n < SHORT_ROW:
            xent_short_rows(x.reshape(-1, n), y.reshape(-1, n), loss, backprop.reshape(-1, n))
        else:
            xent_rows(x.reshape(-1, n), y.reshape(-1, n), loss, backprop.reshape(-1, n))
        return finish(loss, x.shape), backprop
    return xent


def sparse_xent_nd(logits, labels):
    return _stub(logits, labels)


@overload(sparse_xent_nd)
def _sparse_xent_nd(logits, labels):
    if not isinstance(logits, types.Array) or logits.ndim < 1:
        return None
    finish = _loss_of(logits.ndim)
    if isinstance(labels, types.Array):
        def flat_labels(labels):
            return np.ascontiguousarray(labels).reshape(-1)
    else:
        def flat_labels(labels):
            out = np.empty(1, np.int64)
            out[0] = labels
            return out
    flat_labels = njit(flat_labels)

    def sparse_xent(logits, labels):
        n = logits.shape[-1]
        x = np.ascontiguousarray(logits)
        lab = flat_labels(labels)
        rows = x.size // n if n else 0
        if n == 0 or lab.size != rows:
            raise Fallback()
        backprop = np.empty(x.shape, x.dtype)
        loss = np.empty(rows, x.dtype)
        if sparse_xent_rows(x.reshape(-1, n), lab, loss, backprop.reshape(-1, n)) >= 0:
            raise Fallback()   # a label out of range: the kernel's error
        return finish(loss, x.shape), backprop
    return sparse_xent


# -- float floor division and remainder (NumPy's npy_divmod) ----------------------------------

def _divmod_scalar(dt):
    """``(floordiv, mod)`` of two ``dt`` floats as npy_divmod computes them, with
    constants of ``dt`` (a bare 1.0 would compute float32 in float64)."""
    one, half, zero = dt.type(1), dt.type(0.5), dt.type(0)

    @njit(error_model="numpy")
    def divmod_(a, b):
        mod = np.fmod(a, b)
        if not b:
            return a / b, mod
        div = (a - mod) / b
        if mod:
            if (b < zero) != (mod < zero):
                mod += b
                div -= one
        else:
            mod = np.copysign(zero, b)
        if div:
            floordiv = np.floor(div)
            if div - floordiv > half:
                floordiv += one
        else:
            floordiv = np.copysign(zero, a / b)
        return floordiv, mod
    return divmod_


def _elementwise2(fn):
    """``fn(a, b)`` over two scalars or broadcast arrays."""
    def apply(a, b):
        ba, bb = np.broadcast_arrays(np.asarray(a), np.asarray(b))
        ca, cb = np.ascontiguousarray(ba).ravel(), np.ascontiguousarray(bb).ravel()
        out = np.empty(ca.size, ca.dtype)
        for i in range(ca.size):
            out[i] = fn(ca[i], cb[i])
        return out.reshape(ba.shape)
    return apply


def floordiv_f(a, b):
    return _stub(a, b)


def floormod_f(a, b):
    return _stub(a, b)


def _float_dtype(a, b):
    t = a.dtype if isinstance(a, types.Array) else a
    return as_dtype(t) if isinstance(t, types.Float) else None


def _divmod_overload(index):
    def impl(a, b):
        dt = _float_dtype(a, b)
        if dt is None:
            return None
        divmod_ = _divmod_scalar(dt)

        @njit(error_model="numpy")
        def part(a, b):
            return divmod_(a, b)[index]
        if isinstance(a, types.Array) or isinstance(b, types.Array):
            return _elementwise2(part)
        return lambda a, b: part(a, b)
    return impl


overload(floordiv_f)(_divmod_overload(0))
overload(floormod_f)(_divmod_overload(1))


# -- checks -------------------------------------------------------------------------------------

def check_float_to_int(x, lo, hi):
    return _stub(x, lo, hi)


@overload(check_float_to_int)
def _check_float_to_int(x, lo, hi):
    """Fallback unless every value of ``x`` truncates into the target type:
    ``lo < x < hi`` (float64 bounds; NaN fails both)."""
    if isinstance(x, types.Array):
        def check(x, lo, hi):
            for v in np.ascontiguousarray(x).ravel():
                if not (np.float64(v) > lo and np.float64(v) < hi):
                    raise Fallback()
        return check

    def check1(x, lo, hi):
        if not (np.float64(x) > lo and np.float64(x) < hi):
            raise Fallback()
    return check1


def check_pow_exponent(y):
    return _stub(y)


@overload(check_pow_exponent)
def _check_pow_exponent(y):
    if isinstance(y, types.Array):
        def check(y):
            for v in np.ascontiguousarray(y).ravel():
                if v < 0:
                    raise Fallback()
        return check

    def check1(y):
        if y < 0:
            raise Fallback()
    return check1


# -- TensorArrays ---------------------------------------------------------------------------------
#
# A TensorArray inside a compiled frame (see lowering_ta) is four values: ``buf``, its
# elements along axis 0 (all of one shape, ``buf.shape[1:]``), grown by doubling like the
# stacks; ``st``, one flag byte per element (TA_W: written, or its shape known as a
# gradient array's unwritten elements are; TA_V: ``buf`` holds its value; TA_R: read;
# TA_C: cleared after a read); ``es``, the array's partial element shape (-1: unknown); and
# ``m``, the array's scalars, indexed by the TA_* positions below. The helpers follow
# ``TensorArrayResource`` rule for rule and raise Fallback wherever it raises (or where
# elements of different shapes would be needed), so the interpreter raises its own error.

TA_W, TA_V, TA_R, TA_C = 1, 2, 4, 8
(TA_N, TA_FIXED, TA_EFD, TA_MADE, TA_DISALLOWED, TA_DYNAMIC, TA_CLEAR, TA_GRAD,
 TA_IDENTICAL) = range(9)
TA_META = 9

__all__ += ["ta_read", "ta_write", "ta_gather", "ta_scatter", "ta_made"]


def _ta_set_row(buf, i, v):
    return _stub(buf, i, v)


@overload(_ta_set_row)
def _ov_ta_set_row(buf, i, v):
    """``buf[i] = v`` (an explicit loop: slice assignment drags Numba's shape-error
    formatting into every frame)."""
    if buf.ndim == 1:
        def set1(buf, i, v):
            buf[i] = v
        return set1

    def set_row(buf, i, v):
        row = buf[i]
        flat = row.reshape(row.size)
        src = np.ascontiguousarray(np.asarray(v)).reshape(row.size)
        for k in range(row.size):
            flat[k] = src[k]
    return set_row


def _ta_add_row(buf, i, v):
    return _stub(buf, i, v)


@overload(_ta_add_row)
def _ov_ta_add_row(buf, i, v):
    """``buf[i] += v`` in the dtype (NumPy's ``np.add`` of two elements)."""
    if buf.ndim == 1:
        def add1(buf, i, v):
            buf[i] = buf[i] + v
        return add1

    def add_row(buf, i, v):
        row = buf[i]
        flat = row.reshape(row.size)
        src = np.ascontiguousarray(np.asarray(v)).reshape(row.size)
        for k in range(row.size):
            flat[k] = flat[k] + src[k]
    return add_row


def _ta_shape_ok(buf, es, m, v):
    return _stub(buf, es, m, v)


@overload(_ta_shape_ok)
def _ov_ta_shape_ok(buf, es, m, v):
    """Fallback unless ``v`` fits the element shape (``es``) and ``buf``'s rows (when
    their shape is fixed); returns ``buf``, reshaped to ``v``'s rows if not fixed yet,
    and records the shape (identical element shapes) as the kernel does."""
    if buf.ndim == 1:
        def scalar_ok(buf, es, m, v):
            m[TA_FIXED] = 1
            if m[TA_IDENTICAL] and not m[TA_EFD]:
                m[TA_EFD] = 1
            return buf
        return scalar_ok

    def shape_ok(buf, es, m, v):
        a = np.asarray(v)
        for d in range(a.ndim):
            if es[d] >= 0 and es[d] != a.shape[d]:
                raise Fallback()
        if m[TA_FIXED]:
            if buf.shape[1:] != a.shape:
                raise Fallback()
        else:
            buf = np.empty((buf.shape[0],) + a.shape, buf.dtype)
            m[TA_FIXED] = 1
        if m[TA_IDENTICAL] and not m[TA_EFD]:
            for d in range(a.ndim):
                es[d] = a.shape[d]
            m[TA_EFD] = 1
        return buf
    return shape_ok


@njit(cache=True)
def _ta_reserve(buf, st, need):
    """``(buf, st)`` with room for ``need`` elements (doubling; a new buffer keeps the
    old one's rows, the old one is left as it was)."""
    cap = buf.shape[0]
    if need <= cap:
        return buf, st
    cap = max(16, 2 * cap, need)
    new = np.empty((cap,) + buf.shape[1:], buf.dtype)
    old_flat = buf.reshape(buf.size)
    new_flat = new.reshape(new.size)
    for k in range(buf.size):
        new_flat[k] = old_flat[k]
    flags = np.zeros(cap, np.uint8)
    for k in range(st.shape[0]):
        flags[k] = st[k]
    return new, flags


@njit(cache=True)
def _ta_zero_row(buf, i):
    row = buf[i:i + 1]
    flat = row.reshape(row.size)
    for k in range(row.size):
        flat[k] = 0


@njit(cache=True)
def _ta_read(buf, st, m, i):
    """``TensorArrayResource.read``: ``(buf, st)`` after reading element ``i`` (whose
    value is then ``buf[i]``)."""
    n = m[TA_N]
    if i < 0 or (not m[TA_GRAD] and i >= n):
        raise Fallback()
    if i >= n or not st[i] & TA_W:
        # An unwritten element reads as zeros of the (fully defined) element shape.
        if not m[TA_EFD] or not m[TA_FIXED]:
            raise Fallback()
        if i >= n:
            buf, st = _ta_reserve(buf, st, i + 1)
            for k in range(n, i + 1):
                st[k] = TA_W
            m[TA_N] = i + 1
        st[i] |= TA_W
    f = st[i]
    if f & TA_C:
        raise Fallback()
    if not f & TA_V:
        _ta_zero_row(buf, i)
        f |= TA_V
    f |= TA_R
    if m[TA_CLEAR]:
        f = (f & ~TA_V) | TA_C
    st[i] = f
    return buf, st


def ta_read(buf, st, m, i):
    return _stub(buf, st, m, i)


@overload(ta_read)
def _ov_ta_read(buf, st, m, i):
    """``(buf, st, value)``: element ``i`` (a view of its row, or the scalar)."""
    def read(buf, st, m, i):
        buf, st = _ta_read(buf, st, m, np.int64(i))
        return buf, st, buf[np.int64(i)]
    return read


@njit(cache=True)
def _ta_write(buf, st, es, m, i, v):
    n = m[TA_N]
    if i < 0 or (not m[TA_DYNAMIC] and i >= n):
        raise Fallback()
    buf = _ta_shape_ok(buf, es, m, v)
    buf, st = _ta_reserve(buf, st, i + 1)
    if i >= n:
        m[TA_N] = i + 1
    f = st[i]
    if f & TA_R:
        raise Fallback()
    if f & TA_W and not m[TA_GRAD]:
        raise Fallback()
    if f & TA_W and f & TA_V:
        # A gradient array adds the partial gradients written to one index.
        _ta_add_row(buf, i, v)
        m[TA_DISALLOWED] = 1
    else:
        _ta_set_row(buf, i, v)
        st[i] = f | TA_W | TA_V
    return buf, st


def ta_write(buf, st, es, m, i, v):
    return _stub(buf, st, es, m, i, v)


@overload(ta_write)
def _ov_ta_write(buf, st, es, m, i, v):
    """``(buf, st)`` after writing ``v`` at ``i`` (``TensorArrayResource.write``)."""
    def write(buf, st, es, m, i, v):
        return _ta_write(buf, st, es, m, np.int64(i), v)
    return write


def ta_gather(buf, st, m, idx):
    return _stub(buf, st, m, idx)


@overload(ta_gather)
def _ov_ta_gather(buf, st, m, idx):
    """``(buf, st, stacked)``: the elements at ``idx`` read in order, stacked (an empty
    ``idx`` hands back: only the kernel knows the shape to give)."""
    def gather(buf, st, m, idx):
        flat = np.ascontiguousarray(idx).ravel()
        if flat.size == 0:
            raise Fallback()
        out = np.empty((flat.size,) + buf.shape[1:], buf.dtype)
        for j in range(flat.size):
            i = np.int64(flat[j])
            buf, st = _ta_read(buf, st, m, i)
            _ta_set_row(out, j, buf[i])
        return buf, st, out
    return gather


def ta_scatter(buf, st, es, m, idx, value):
    return _stub(buf, st, es, m, idx, value)


@overload(ta_scatter)
def _ov_ta_scatter(buf, st, es, m, idx, value):
    """``(buf, st)`` after writing ``value[j]`` at ``idx[j]`` in order (the kernel's
    checks of the lengths and the largest index first)."""
    def scatter(buf, st, es, m, idx, value):
        flat = np.ascontiguousarray(idx).ravel()
        if flat.size != value.shape[0]:
            raise Fallback()
        if not m[TA_DYNAMIC] and flat.size and flat.max() >= m[TA_N]:
            raise Fallback()
        for j in range(flat.size):
            buf, st = _ta_write(buf, st, es, m, np.int64(flat[j]), value[j])
        return buf, st
    return scatter


@njit
def ta_made(m):
    """A gradient array's TensorArrayGradV3 ran (the array exists from now on)."""
    m[TA_MADE] = 1


# -- GatherGrad ---------------------------------------------------------------------------------

__all__ += ["gather_grad0"]


def gather_grad0(g, idx, out):
    return _stub(g, idx, out)


@overload(gather_grad0)
def _ov_gather_grad0(g, idx, out):
    """``np.add.at(out, idx, g)`` along axis 0: row ``idx[j]`` of ``out`` gets row ``j`` of
    ``g`` added, in index order (repeats add up one after another, as NumPy does;
    negative indices wrap; one out of range hands back)."""
    if isinstance(idx, types.Array):
        def flat_indices(idx):
            return np.ascontiguousarray(idx).reshape(idx.size)
    else:
        def flat_indices(idx):
            one = np.empty(1, np.int64)
            one[0] = idx
            return one
    flat_indices = njit(flat_indices)

    def add_at(g, idx, out):
        flat = flat_indices(idx)
        rows = out.shape[0]
        width = out.size // rows if rows else 0
        src = np.ascontiguousarray(np.asarray(g))
        if src.size != flat.size * width:
            raise Fallback()
        src = src.reshape(src.size)
        dst = out.reshape(out.size)
        for j in range(flat.size):
            k = np.int64(flat[j])
            if k < 0:
                k += rows
            if k < 0 or k >= rows:
                raise Fallback()
            for c in range(width):
                dst[k * width + c] = dst[k * width + c] + src[j * width + c]
    return add_at


# -- stacks pushed and popped in one frame ----------------------------------------------------

__all__ += ["stack_take_copy"]


def stack_take_copy(buf, i):
    return _stub(buf, i)


@overload(stack_take_copy)
def _ov_stack_take_copy(buf, i):
    """Entry ``i`` of a stack buffer as a copy (a scalar as it is)."""
    if buf.ndim == 1:
        return lambda buf, i: buf[i]
    return lambda buf, i: buf[i].copy()
