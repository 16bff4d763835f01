"""Numba helpers the generated loop functions call (imports Numba; loaded on first compile).

Every helper is written once for both scalars and arrays (an ``overload`` picks the code
from the argument types), so a lowering emits one spelling whatever the static shapes:

* ``cst(x, "int32")``: ``x`` as the graph's dtype. Numba widens scalar integer arithmetic
  to 64 bits where NumPy keeps int32 (and wraps), so every scalar result is cast back:
  truncating the 64-bit result gives NumPy's wrapped value;
* ``ew1(name, x)`` / ``ew2(name, x, y)``: the scalar function of an elementwise-table row
  (``dataflow.kernels.numba_cpu._scalar``: exact arithmetic, the approximations of
  ``dataflow.kernels.approx`` for exp/log/tanh/sigmoid), elementwise over arrays;
* ``psum(x)``: the sum of every element in NumPy's order (pairwise blocks of 8 over the
  flattened array, as ``np.add.reduce`` does), so float sums are bitwise NumPy's;
* ``gemm(a, b, ta, tb)``: ``op(a) @ op(b)`` by the kernel the interpreter's MatMul runs
  for the same shapes, so the same bits: the own float32 GEMM
  (:mod:`dataflow.kernels.numba_cpu.gemm`) in its range, else the ``cblas_?gemm`` of the
  BLAS NumPy itself links (see :func:`numpy_blas`): one thread pool for NumPy and
  compiled loops (Numba's own ``np.dot`` calls SciPy's OpenBLAS, a second pool that
  fought NumPy's for the cores and that the denormals setting did not reach), with the
  interpreter's arguments; ``gemm_par(a, b, ta, tb, par)`` is the same product, whose
  own-GEMM tiles the helper thread of control block ``par`` may share
  (:mod:`dataflow.kernels.numba_cpu._gemm_par`: same bits, whoever computes a chunk);
  ``gemm_packed(a, b, bt, ta, par)`` is ``gemm_par(a, b, ta, True, par)`` given
  ``bt = gemm_pack_b(b)`` computed once before the loop (a contiguous ``b^T`` when
  the own GEMM is on), which its tiles read in place of packing per call;
* ``acc_add(total, v, own, total_first)``: ``total + v`` written into ``total`` when
  the loop owns that buffer (the code generator's accumulation in place), and
  ``acc_start(x)``, the loop variable's first value typed writable;
* ``truth(p)``, ``where3(c, x, y)``, ``stack_push``/``stack_take`` (growing stacks),
  ``check_index`` and ``check_divisor`` (raising :class:`Fallback`).

:class:`Fallback` means "the interpreter must run this frame": the runner catches it and
re-runs the frame interpreted from its inputs (nothing is committed before the compiled
code returns), so the interpreter raises its own error, with its own message.
"""
from __future__ import annotations

import numpy as np
from llvmlite import binding as llvm
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload
from numba.np.numpy_support import from_dtype

from dataflow.kernels.numba_cpu import _gemm_jit as own_gemm_jit
from dataflow.kernels.numba_cpu import _gemm_par as own_gemm_par
from dataflow.kernels.numba_cpu.gemm import own_gemm_enabled

from .blas import numpy_gemm


__all__ = ["Fallback", "Deadline", "cst", "ew1", "ew2", "psum", "gemm", "gemm_par", "gemm_pack_b",
           "gemm_packed", "truth", "where3",
           "acc_add", "acc_start",
           "stack_push", "stack_take", "check_index", "check_divisor", "axis_sum",
           "one_hot", "check_same_shape"]


class Fallback(Exception):
    """Raised by compiled code for anything the interpreter must decide (an error, a
    dead token where the loop shape says live, ...)."""


class Deadline(Exception):
    """Raised by compiled code when the run's deadline flag was set."""


def _stub(*args):
    raise TypeError("compiled code only")


def cst(x, name):
    return _stub(x, name)


@overload(cst)
def _cst(x, name):
    if not isinstance(name, types.StringLiteral):
        return None
    dt = np.dtype(name.literal_value)
    if isinstance(x, types.Array):
        if x.dtype == from_dtype(dt):
            return lambda x, name: x
        return lambda x, name: x.astype(dt)
    if dt == np.bool_:
        return lambda x, name: x != 0
    scalar = dt.type
    return lambda x, name: scalar(x)


def ew1(name, x):
    return _stub(name, x)


@overload(ew1)
def _ew1(name, x):
    if not isinstance(name, types.StringLiteral):
        return None
    from dataflow.kernels.numba_cpu._scalar import UNARY   # at typing: loading a cached
    f = UNARY[name.literal_value]                          # frame needs none of its 43 njits
    if isinstance(x, types.Array):
        def apply(name, x):
            flat = np.ascontiguousarray(x).ravel()
            out = np.empty_like(flat)
            for i in range(flat.size):
                out[i] = f(flat[i])
            return out.reshape(x.shape)
        return apply
    return lambda name, x: f(x)


def ew2(name, x, y):
    return _stub(name, x, y)


@overload(ew2)
def _ew2(name, x, y):
    if not isinstance(name, types.StringLiteral):
        return None
    from dataflow.kernels.numba_cpu._scalar import BINARY
    f = BINARY[name.literal_value]
    if isinstance(x, types.Array) or isinstance(y, types.Array):
        def apply(name, x, y):
            bx, by = np.broadcast_arrays(np.asarray(x), np.asarray(y))
            cx, cy = np.ascontiguousarray(bx).ravel(), np.ascontiguousarray(by).ravel()
            out = np.empty_like(cx)
            for i in range(cx.size):
                out[i] = f(cx[i], cy[i])
            return out.reshape(bx.shape)
        return apply
    return lambda name, x, y: f(x, y)


@njit(cache=True)
def _block(a, lo, n):
    """NumPy's pairwise_sum leaf (numpy/_core/src/umath/loops_utils.h.src): 8
    accumulators over a[lo:lo+n], 8 <= n <= 128."""
    r0, r1, r2, r3 = a[lo], a[lo + 1], a[lo + 2], a[lo + 3]
    r4, r5, r6, r7 = a[lo + 4], a[lo + 5], a[lo + 6], a[lo + 7]
    i = 8
    while i < n - (n % 8):
        r0 += a[lo + i]
        r1 += a[lo + i + 1]
        r2 += a[lo + i + 2]
        r3 += a[lo + i + 3]
        r4 += a[lo + i + 4]
        r5 += a[lo + i + 5]
        r6 += a[lo + i + 6]
        r7 += a[lo + i + 7]
        i += 8
    res = ((r0 + r1) + (r2 + r3)) + ((r4 + r5) + (r6 + r7))
    while i < n:
        res += a[lo + i]
        i += 1
    return res


@njit(cache=True)
def _pairwise(a, lo, n):
    """NumPy's pairwise sum of a[lo:lo+n] (n >= 8): blocks of at most 128 elements,
    halves split at a multiple of 8, added in the same tree (an explicit stack instead
    of recursion)."""
    if n <= 128:
        return _block(a, lo, n)
    flo = np.empty(64, np.int64)
    fn = np.empty(64, np.int64)
    fst = np.zeros(64, np.int64)
    res = np.empty(64, a.dtype)
    sp, rp = 0, 0
    flo[0], fn[0] = lo, n
    while sp >= 0:
        start, m, st = flo[sp], fn[sp], fst[sp]
        if m <= 128:
            res[rp] = _block(a, start, m)
            rp += 1
            sp -= 1
            continue
        half = m // 2
        half -= half % 8
        if st == 0:
            fst[sp] = 1
            sp += 1
            flo[sp], fn[sp], fst[sp] = start, half, 0
        elif st == 1:
            fst[sp] = 2
            sp += 1
            flo[sp], fn[sp], fst[sp] = start + half, m - half, 0
        else:
            res[rp - 2] = res[rp - 2] + res[rp - 1]
            rp -= 1
            sp -= 1
    return res[0]


@njit(cache=True)
def _sum_flat(a):
    """np.add.reduce of a contiguous 1-D float array, bit for bit: a running sum below 8
    elements, the pairwise sum from 8."""
    n = a.size
    if n == 0:
        return np.zeros(1, a.dtype)[0]
    if n < 8:
        res = a[0]
        for i in range(1, n):
            res += a[i]
        return res
    return _pairwise(a, 0, n)


def psum(x):
    return _stub(x)


@overload(psum)
def _psum(x):
    if isinstance(x, types.Array):
        if isinstance(x.dtype, types.Float):
            def total(x):
                return _sum_flat(np.ascontiguousarray(x).ravel())
            return total

        # Integer sums do not depend on the order (wrapping is modular).
        return lambda x: np.ascontiguousarray(x).ravel().sum()
    return lambda x: x


def axis_sum(x, axis):
    return _stub(x, axis)


@overload(axis_sum)
def _axis_sum(x, axis):
    """The sum over one axis of a 2-D array, in NumPy's order: pairwise along the last
    (contiguous) axis, running sums of rows along the first."""
    if not isinstance(x, types.Array) or x.ndim != 2:
        return None

    def total(x, axis):
        c = np.ascontiguousarray(x)
        if axis == 1:
            out = np.empty(c.shape[0], c.dtype)
            for r in range(c.shape[0]):
                out[r] = _sum_flat(c[r])
            return out
        out = np.zeros(c.shape[1], c.dtype)
        if c.shape[0]:
            out[:] = c[0]
            for r in range(1, c.shape[0]):
                out += c[r]
        return out
    return total


def acc_add(total, v, own, total_first):
    return _stub(total, v, own, total_first)


@overload(acc_add)
def _acc_add(total, v, own, total_first):
    """``total + v`` (``v + total`` unless ``total_first``: the Add's own operand order),
    into ``total``'s buffer when ``own`` says nothing else can see it and the shapes
    match; else a new array, as the Add's lowering computes it. Arrays of one dtype and
    rank (the code generator checks)."""
    if not (isinstance(total, types.Array) and isinstance(v, types.Array)
            and total.dtype == v.dtype and total.ndim == v.ndim):
        return None
    in_place = total.layout == "C" and v.layout == "C" and total.mutable

    def add(total, v, own, total_first):
        if in_place and own and total.shape == v.shape:
            flat_total, flat_v = total.reshape(total.size), v.reshape(v.size)
            if total_first:
                for i in range(flat_total.size):
                    flat_total[i] = flat_total[i] + flat_v[i]
            else:
                for i in range(flat_total.size):
                    flat_total[i] = flat_v[i] + flat_total[i]
            return total
        return total + v if total_first else v + total
    return add


def acc_start(x):
    return _stub(x)


@overload(acc_start)
def _acc_start(x):
    """An accumulating loop variable's first value: as it is, or a copy when its type is
    read-only (Numba types a variable once: a read-only start would make the sums that
    follow read-only too, and none of them could be added into)."""
    if isinstance(x, types.Array) and not x.mutable:
        return lambda x: x.copy()
    return lambda x: x


def truth(p):
    return _stub(p)


@overload(truth)
def _truth(p):
    if isinstance(p, types.Array):
        def one(p):
            if p.size != 1:
                raise Fallback()
            return p.ravel()[0] != 0
        return one
    return lambda p: p != 0


def where3(c, x, y):
    return _stub(c, x, y)


@overload(where3)
def _where3(c, x, y):
    if any(isinstance(a, types.Array) for a in (c, x, y)):
        return lambda c, x, y: np.where(c, x, y)
    return lambda c, x, y: x if c else y


@njit(cache=True)
def stack_push(buf, n, v):
    """``buf`` (entries along axis 0) with ``v`` at index ``n``, grown by doubling when
    full (a new buffer; the old one is left as it was). Cached ``njit`` functions
    (compiled once per installation, not per generated frame; Numba prunes the branch
    on ``buf.ndim``), written with explicit loops: a slice assignment drags Numba's
    shape-error formatting (string code, seconds of compiling) into every frame."""
    if buf.ndim == 1:
        return _push_scalar(buf, n, v)
    return _push_array(buf, n, np.asarray(v))


@njit(cache=True)
def _push_scalar(buf, n, v):
    if n == buf.shape[0]:
        new = np.empty(max(16, 2 * n), buf.dtype)
        for i in range(n):
            new[i] = buf[i]
        buf = new
    buf[n] = v
    return buf


@njit(cache=True)
def _push_array(buf, n, v):
    same = buf.shape[1:] == v.shape
    if n and not same:
        raise Fallback()
    if n == buf.shape[0] or not same:
        new = np.empty((max(16, 2 * n),) + v.shape, buf.dtype)
        flat_new = new.reshape(new.size)
        flat_old = buf.reshape(buf.size)
        for i in range(n * v.size):
            flat_new[i] = flat_old[i]
        buf = new
    row = buf[n]
    flat_row = row.reshape(row.size)
    flat_v = np.ascontiguousarray(v).reshape(v.size)
    for i in range(v.size):
        flat_row[i] = flat_v[i]
    return buf


@njit(cache=True)
def stack_take(buf, i):
    """Entry ``i``: a view, as the interpreter's StackPop hands back the pushed array
    itself (compiled code never writes into a value, nor into a buffer after its
    pushes)."""
    return buf[i]


def check_index(idx, n):
    return _stub(idx, n)


@overload(check_index)
def _check_index(idx, n):
    if isinstance(idx, types.Array):
        def check(idx, n):
            for v in idx.ravel():
                if v < 0 or v >= n:
                    raise Fallback()
        return check

    def check1(idx, n):
        if idx < 0 or idx >= n:
            raise Fallback()
    return check1


def check_divisor(y):
    return _stub(y)


@overload(check_divisor)
def _check_divisor(y):
    if isinstance(y, types.Array):
        def check(y):
            for v in y.ravel():
                if v == 0:
                    raise Fallback()
        return check

    def check1(y):
        if y == 0:
            raise Fallback()
    return check1


def one_hot(idx, depth, on, off):
    return _stub(idx, depth, on, off)


@overload(one_hot)
def _one_hot(idx, depth, on, off):
    if isinstance(idx, types.Array):
        def hot(idx, depth, on, off):
            flat = np.ascontiguousarray(idx).ravel()
            out = np.empty((flat.size, depth), np.asarray(on).dtype)
            for i in range(flat.size):
                for j in range(depth):
                    out[i, j] = on if flat[i] == j else off
            return out.reshape(idx.shape + (depth,))
        return hot

    def hot1(idx, depth, on, off):
        out = np.empty(depth, np.asarray(on).dtype)
        for j in range(depth):
            out[j] = on if idx == j else off
        return out
    return hot1


def check_same_shape(var, value):
    return _stub(var, value)


@overload(check_same_shape)
def _check_same_shape(var, value):
    if isinstance(var, types.Array) and isinstance(value, types.Array):
        if var.ndim != value.ndim:
            def never(var, value):
                raise Fallback()
            return never

        def check(var, value):
            if var.shape != value.shape:
                raise Fallback()
        return check
    if isinstance(var, types.Array) or isinstance(value, types.Array):
        def never2(var, value):
            raise Fallback()
        return never2
    return lambda var, value: None


# -- matmul through NumPy's BLAS -----------------------------------------------------------------

def numpy_blas():
    """``{"float32": (symbol, ilp64), "float64": ...}``: the ``cblas_?gemm`` of the BLAS
    NumPy links (:func:`.blas.numpy_gemm`), registered with LLVM under its own name so
    that compiled code, cached object code included, calls it by name. Empty where none
    is found (then ``gemm`` uses Numba's ``np.dot``).

    >>> sorted(numpy_blas()) in ([], ['float32', 'float64'])
    True
    """
    return {dt: (name, ilp64) for dt, (name, ilp64, _) in numpy_gemm().items()}


for _name, _ilp64, _address in numpy_gemm().values():
    llvm.add_symbol(_name, _address)
_BLAS_FOUND: dict = numpy_blas()

_ROW_MAJOR, _NO_TRANS, _TRANS = 101, 111, 112


def _gemm_function(dtype):
    """The ``cblas_?gemm`` of ``dtype`` as a Numba external function (None: not found)."""
    found = _BLAS_FOUND.get(dtype)
    if found is None:
        return None
    name, ilp64 = found
    integer = types.int64 if ilp64 else types.int32
    real = types.float32 if dtype == "float32" else types.float64
    enum = types.int32
    sig = types.void(enum, enum, enum, integer, integer, integer, real, types.voidptr,
                     integer, types.voidptr, integer, real, types.voidptr, integer)
    return types.ExternalFunction(name, sig)


@intrinsic
def _data_ptr(typingctx, arr):
    """The address of an array's first element, as ``void*``."""
    if not isinstance(arr, types.Array):
        return None

    def codegen(context, builder, signature, args):
        ary = context.make_array(arr)(context, builder, value=args[0])
        return builder.bitcast(ary.data, ir.IntType(8).as_pointer())
    return types.voidptr(arr), codegen


@njit(cache=True)
def _blas_layout(x):
    """``(transposed, leading dimension)`` of a 2-D array for CBLAS in row-major order,
    or ``(False, -1)`` when its strides are neither row- nor column-major."""
    rows, cols = x.shape
    item = x.itemsize
    s0, s1 = x.strides
    if (s1 == item or cols <= 1) and s0 % item == 0 and s0 // item >= max(1, cols):
        return False, s0 // item
    if (s0 == item or rows <= 1) and s1 % item == 0 and s1 // item >= max(1, rows):
        return True, s1 // item
    return False, -1


def gemm(a, b, ta, tb):
    return _stub(a, b, ta, tb)


@overload(gemm)
def _gemm(a, b, ta, tb):
    """``(a.T if ta else a) @ (b.T if tb else b)`` for 2-D float arrays (on this thread)."""
    return lambda a, b, ta, tb: gemm_par(a, b, ta, tb, _NO_HELPER)


_NO_HELPER = np.zeros(0, np.int64)


def gemm_par(a, b, ta, tb, par):
    return _stub(a, b, ta, tb, par)


@overload(gemm_par)
def _gemm_par(a, b, ta, tb, par):
    """``gemm(a, b, ta, tb)``; the own GEMM may share the product's chunks with the
    helper thread of control block ``par`` (:mod:`.._gemm_par`, the same bits)."""
    if not (isinstance(a, types.Array) and isinstance(b, types.Array) and a.ndim == 2
            and b.ndim == 2 and a.dtype == b.dtype and isinstance(a.dtype, types.Float)):
        return None
    dtype = str(a.dtype)
    call = _gemm_function(dtype)
    if call is None:
        def by_numba(a, b, ta, tb, par):
            return np.dot(a.T if ta else a, b.T if tb else b)
        return by_numba
    one, zero = np.dtype(dtype).type(1), np.dtype(dtype).type(0)
    own = dtype == "float32" and own_gemm_enabled()

    def by_numpy_blas(a, b, ta, tb, par):
        m, k = (a.shape[1], a.shape[0]) if ta else a.shape
        k2, n = (b.shape[1], b.shape[0]) if tb else b.shape
        if k != k2:
            raise Fallback()
        out = np.empty((m, n), a.dtype)
        if own and own_gemm_jit.applies(m, n, k, tb):
            own_gemm_par.matmul_into_par(a, b, ta, tb, out, par)
            return out
        if m == 0 or n == 0:
            return out
        if k == 0:
            out[:] = 0
            return out
        ca, la = _blas_layout(a)
        if la < 0:
            a = np.ascontiguousarray(a)
            ca, la = _blas_layout(a)
        cb, lb = _blas_layout(b)
        if lb < 0:
            b = np.ascontiguousarray(b)
            cb, lb = _blas_layout(b)
        call(_ROW_MAJOR, _TRANS if ta != ca else _NO_TRANS,
             _TRANS if tb != cb else _NO_TRANS, m, n, k, one, _data_ptr(a), la,
             _data_ptr(b), lb, zero, _data_ptr(out), max(1, n))
        return out
    return by_numpy_blas


def gemm_pack_b(b):
    return _stub(b)


def _own_gemm_of(x):
    return isinstance(x, types.Array) and x.ndim == 2 and x.dtype == types.float32 \
        and own_gemm_enabled()


@overload(gemm_pack_b)
def _gemm_pack_b(b):
    """A C-contiguous copy of ``b.T`` for the own GEMM, else ``b`` itself."""
    if _own_gemm_of(b):
        return lambda b: np.ascontiguousarray(b.T)
    return lambda b: b


def gemm_packed(a, b, bt, ta, par):
    return _stub(a, b, bt, ta, par)


@overload(gemm_packed)
def _gemm_packed(a, b, bt, ta, par):
    """``gemm(a, b, ta, True)``, the own GEMM reading ``bt = gemm_pack_b(b)`` (the same
    bits: its result does not depend on B's layout)."""
    if not (_own_gemm_of(a) and _own_gemm_of(b)):
        return lambda a, b, bt, ta, par: gemm_par(a, b, ta, True, par)

    def packed(a, b, bt, ta, par):
        m, k = (a.shape[1], a.shape[0]) if ta else a.shape
        n, k2 = b.shape
        if k != k2 or not own_gemm_jit.applies(m, n, k, True):
            return gemm_par(a, b, ta, True, par)
        out = np.empty((m, n), np.float32)
        own_gemm_par.matmul_into_par(a, bt, ta, False, out, par)
        return out
    return packed
