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
