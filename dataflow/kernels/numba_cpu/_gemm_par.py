"""The own float32 GEMM's entry points, and its products shared on two cores: one helper
thread takes chunks of a product's output from the thread that asked for it (imports
Numba). :func:`matmul_into` and :func:`matmul` serve the interpreter's MatMul
(:mod:`.gemm`); compiled loops call :func:`matmul_into_par` with a helper's control block
(:mod:`dataflow.loopc.nbhelpers`).

**Routes** (``A`` as ``(m, k)``, ``B`` as ``(k, n)``, any strides that are whole
elements), all to the tiles of :mod:`._gemm_jit`, so the bits are its FMA chain:

* ``B``'s rows contiguous (NN, TN): tiles read ``B`` in place and broadcast ``A`` from any
  strides (``A^T`` included);
* ``B`` column-contiguous (NT: ``B`` is ``W^T`` of a row-major ``W``): ``C^T = B^T A^T``
  through the same tiles, ``B^T`` broadcast in place and ``A^T`` (small when ``m`` is)
  packed, then ``C^T`` transposed into ``C``, when that moves fewer elements than packing
  ``B``; otherwise, and for other strides, ``B`` packed row-major.

>>> a = np.arange(6, dtype=np.float32).reshape(2, 3)
>>> b = np.ones((3, 4), np.float32)
>>> matmul(a, b, False, False).tolist()
[[3.0, 3.0, 3.0, 3.0], [12.0, 12.0, 12.0, 12.0]]
>>> bool((matmul(a.T.copy(), b, True, False) == a @ b).all())
True

**Why a helper thread and not Numba's ``parallel=True``:** a parallel region costs 5-60 µs
to start with the ``workqueue`` and ``omp`` layers, as much as the 32x256x256 product it
would split (16 µs on one core), and its pool threads spin or sleep outside our control.
Here one thread spins only while products keep coming and the caller never waits for it
blindly.

**The protocol.** A control block ``ctl`` (int64 slots, see the ``_SLOT`` names) is
shared by the callers and the helper. A caller that wins ``LOCK`` writes the product's
parameters, then publishes ``WORD``::

    WORD = seq << 33 | mode << 32 | chunks << 16 | next

Both threads then *claim* chunks by compare-and-swap of ``next -> next + 1``, compute the
claimed chunk's tile block and count it in ``DONE``. The caller keeps claiming until
none is left and then waits only for chunks the helper has already claimed, so a
helper that is asleep, descheduled or absent (after ``fork``) costs nothing but the
claims; the caller never waits for a chunk nobody holds. ``seq`` makes a stale read of
an earlier product's word fail its compare-and-swap, and the parameters are stable
while a claimed chunk is outstanding (the caller overwrites them only after ``DONE``).

**Same bits.** A chunk is a block of columns (or of rows) of the output, computed by
the same tiles as the whole product: each ``C[i, j]`` stays the FMA chain over ``k`` of
:mod:`._gemm_jit`, whichever thread computes it. The helper takes only products posted
in its own float mode (``mode`` is the caller's flush-to-zero bit, read from its
control register), so flushing subnormals never depends on who ran a chunk.

**Lifetime.** :meth:`GemmHelper.wake` starts (once) and wakes the helper; it then spins
in compiled code, with no GIL, until it has polled for about a millisecond (cycle
counter; time the OS took it off its core does not count) without a product to share,
or until :meth:`GemmHelper.stop`.

>>> helper = GemmHelper()
>>> a, b = np.ones((32, 64), np.float32), np.ones((64, 256), np.float32)
>>> out = np.empty((32, 256), np.float32)
>>> helper.wake(False)
>>> matmul_into_par(a, b, False, False, out, helper.ctl)
>>> float(out[0, 0]), float(out[31, 255])
(64.0, 64.0)
>>> helper.stop()
"""
from __future__ import annotations

import os
import threading

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic

from ._gemm_jit import _element_strides, _keep_alive, _tiles

__all__ = ["GemmHelper", "matmul", "matmul_into", "matmul_into_par", "idle_control",
           "shared_helper", "SLOTS"]

_JIT = {"nogil": True, "cache": True, "error_model": "numpy"}
_I64 = ir.IntType(64)
_I32 = ir.IntType(32)
_P64 = _I64.as_pointer()

# Control-block slots (int64 each; the ones written by different threads sit on
# different 64-byte lines).
LOCK = 0          # 0 free, 1 held by the caller that posted the current product
WORD = 8          # the published product: seq << 33 | mode << 32 | chunks << 16 | next
DONE = 16         # chunks finished of the current product
SEQ = 17          # the last seq posted (written under LOCK)
PARAMS = 24       # pa, sai, sak, pb, ldb, pc, ldc, m, n, k, axis, size (12 slots)
ACTIVE = 40       # 1 while the helper spins in worker_loop
STOP = 48         # set to make the helper leave worker_loop
HELPER_CHUNKS = 56    # chunks the helper computed (a running count, for tests and stats)
HELPER_PRODUCTS = 57  # products in which the helper computed at least one chunk
SLOTS = 64

# Products below this many multiply-adds run whole on the caller: a chunk handed over
# costs ~0.2-0.5 µs of cache-line traffic, more than splitting saves for small ones.
PAR_MIN_MKN = 1 << 18
_COLUMN_CHUNK = 32        # columns per chunk (the narrow tile's width)
_ROW_CHUNK = 8            # rows per chunk when the output is too narrow to split
_IDLE_CYCLES = 3_000_000  # ~1 ms at 3 GHz polling without a product: the helper sleeps
_MAX_POLL_CYCLES = 30_000  # the most one poll adds to that (a preempted one: ~10 µs)
_FLUSH_MASK_X86 = (1 << 15) | (1 << 6)


def _ptr(builder, base, slot):
    addr = builder.add(base, builder.mul(slot, ir.Constant(_I64, 8)))
    return builder.inttoptr(addr, _P64)


@intrinsic
def _load_acquire(typingctx, base, slot):
    """``ctl[slot]`` read with acquire ordering (``base`` the block's address)."""
    def codegen(context, builder, signature, args):
        return builder.load_atomic(_ptr(builder, *args), "acquire", 8)
    return types.int64(types.int64, types.int64), codegen


@intrinsic
def _store_release(typingctx, base, slot, value):
    """``ctl[slot] = value`` with release ordering."""
    def codegen(context, builder, signature, args):
        builder.store_atomic(args[2], _ptr(builder, args[0], args[1]), "release", 8)
        return context.get_dummy_value()
    return types.void(types.int64, types.int64, types.int64), codegen


@intrinsic
def _cas(typingctx, base, slot, expected, new):
    """Compare-and-swap ``ctl[slot]`` from ``expected`` to ``new`` (sequentially
    consistent); the value found."""
    def codegen(context, builder, signature, args):
        pair = builder.cmpxchg(_ptr(builder, args[0], args[1]), args[2], args[3],
                               "seq_cst", "seq_cst")
        return builder.extract_value(pair, 0)
    return types.int64(types.int64, types.int64, types.int64, types.int64), codegen


@intrinsic
def _fetch_add(typingctx, base, slot, value):
    """``ctl[slot] += value`` atomically (sequentially consistent); the old value."""
    def codegen(context, builder, signature, args):
        return builder.atomic_rmw("add", _ptr(builder, args[0], args[1]), args[2], "seq_cst")
    return types.int64(types.int64, types.int64, types.int64), codegen


@intrinsic
def _spin_pause(typingctx):
    """The x86 ``pause`` hint for a spin-wait loop."""
    def codegen(context, builder, signature, args):
        fn = builder.module.declare_intrinsic("llvm.x86.sse2.pause", fnty=ir.FunctionType(
            ir.VoidType(), []))
        builder.call(fn, [])
        return context.get_dummy_value()
    return types.void(), codegen


@intrinsic
def _cycles(typingctx):
    """The CPU's cycle counter (``rdtsc``)."""
    def codegen(context, builder, signature, args):
        fn = builder.module.declare_intrinsic("llvm.readcyclecounter",
                                              fnty=ir.FunctionType(_I64, []))
        return builder.call(fn, [])
    return types.int64(), codegen


@intrinsic
def _flush_mode(typingctx):
    """1 when this thread flushes subnormals (MXCSR's FTZ or DAZ bit), else 0."""
    def codegen(context, builder, signature, args):
        fn = builder.module.declare_intrinsic("llvm.x86.sse.stmxcsr", fnty=ir.FunctionType(
            ir.VoidType(), [ir.IntType(8).as_pointer()]))
        slot = builder.alloca(_I32)
        builder.call(fn, [builder.bitcast(slot, ir.IntType(8).as_pointer())])
        bits = builder.and_(builder.load(slot), ir.Constant(_I32, _FLUSH_MASK_X86))
        return builder.zext(builder.icmp_unsigned("!=", bits, ir.Constant(_I32, 0)), _I64)
    return types.int64(), codegen


@njit(**_JIT)
def _run_chunk(base, c):
    """Compute chunk ``c`` of the posted product (its parameters read from the block)."""
    pa = _load_acquire(base, PARAMS)
    sai = _load_acquire(base, PARAMS + 1)
    sak = _load_acquire(base, PARAMS + 2)
    pb = _load_acquire(base, PARAMS + 3)
    ldb = _load_acquire(base, PARAMS + 4)
    pc = _load_acquire(base, PARAMS + 5)
    ldc = _load_acquire(base, PARAMS + 6)
    m = _load_acquire(base, PARAMS + 7)
    n = _load_acquire(base, PARAMS + 8)
    k = _load_acquire(base, PARAMS + 9)
    axis = _load_acquire(base, PARAMS + 10)
    size = _load_acquire(base, PARAMS + 11)
    lo = c * size
    if axis == 1:       # a block of columns
        _tiles(pa, sai, sak, pb + 4 * lo, ldb, pc + 4 * lo, ldc, m, min(size, n - lo), k)
    else:               # a block of rows
        _tiles(pa + 4 * lo * sai, sai, sak, pb, ldb, pc + 4 * lo * ldc, ldc,
               min(size, m - lo), n, k)


@njit(**_JIT)
def _claim(base, seq):
    """Claim the next chunk of product ``seq``: its index, or -1 when none is left (or
    the word is another product's)."""
    while True:
        word = _load_acquire(base, WORD)
        if (word >> 33) != seq:
            return -1
        nxt = word & 0xFFFF
        if nxt >= (word >> 16) & 0xFFFF:
            return -1
        if _cas(base, WORD, word, word + 1) == word:
            return nxt


@njit(**_JIT)
def tiles_par(ctl, pa, sai, sak, pb, ldb, pc, ldc, m, n, k):
    """:func:`._gemm_jit._tiles` with the helper taking chunks when it is spinning (and the
    product is big enough and no other caller holds the block); else on this thread."""
    if ctl.size < SLOTS or m * n * k < PAR_MIN_MKN:
        _tiles(pa, sai, sak, pb, ldb, pc, ldc, m, n, k)
        return
    base = ctl.ctypes.data
    if _load_acquire(base, ACTIVE) == 0 or _cas(base, LOCK, 0, 1) != 0:
        _tiles(pa, sai, sak, pb, ldb, pc, ldc, m, n, k)
        return
    if n >= 2 * _COLUMN_CHUNK:
        axis, size = 1, _COLUMN_CHUNK
        chunks = (n + size - 1) // size
    else:
        axis, size = 0, _ROW_CHUNK
        chunks = (m + size - 1) // size
    if chunks < 2 or chunks > 0xFFFF:
        _store_release(base, LOCK, 0)
        _tiles(pa, sai, sak, pb, ldb, pc, ldc, m, n, k)
        return
    # (through the block's address, so that a read-only block types too)
    _store_release(base, PARAMS, np.int64(pa))
    _store_release(base, PARAMS + 1, np.int64(sai))
    _store_release(base, PARAMS + 2, np.int64(sak))
    _store_release(base, PARAMS + 3, np.int64(pb))
    _store_release(base, PARAMS + 4, np.int64(ldb))
    _store_release(base, PARAMS + 5, np.int64(pc))
    _store_release(base, PARAMS + 6, np.int64(ldc))
    _store_release(base, PARAMS + 7, np.int64(m))
    _store_release(base, PARAMS + 8, np.int64(n))
    _store_release(base, PARAMS + 9, np.int64(k))
    _store_release(base, PARAMS + 10, np.int64(axis))
    _store_release(base, PARAMS + 11, np.int64(size))
    _store_release(base, DONE, 0)
    seq = (_load_acquire(base, SEQ) + 1) & 0x3FFFFFFF
    _store_release(base, SEQ, seq)
    _store_release(base, WORD, (seq << 33) | (_flush_mode() << 32) | (chunks << 16))
    mine = 0
    while True:
        c = _claim(base, seq)
        if c < 0:
            break
        _run_chunk(base, c)
        mine += 1
    if mine < chunks:
        _fetch_add(base, DONE, mine)
        while _load_acquire(base, DONE) < chunks:
            _spin_pause()
    _store_release(base, LOCK, 0)


@njit(**_JIT)
def worker_loop(ctl, idle_cycles):
    """The helper's spin: claim and compute chunks of products posted in this thread's
    float mode; return after polling ``idle_cycles`` cycles without one, or on ``STOP``."""
    base = ctl.ctypes.data
    mode = _flush_mode()
    _store_release(base, ACTIVE, 1)
    idle = 0
    prev = _cycles()
    last_seq = -1
    while True:
        if _load_acquire(base, STOP) != 0:
            break
        word = _load_acquire(base, WORD)
        if ((word >> 32) & 1) == mode and (word & 0xFFFF) < ((word >> 16) & 0xFFFF):
            seq = word >> 33
            c = _claim(base, seq)
            if c >= 0:
                _run_chunk(base, c)
                _fetch_add(base, HELPER_CHUNKS, 1)
                if seq != last_seq:
                    _fetch_add(base, HELPER_PRODUCTS, 1)
                    last_seq = seq
                _fetch_add(base, DONE, 1)
                idle = 0
                prev = _cycles()
                continue
        # Idle time is time spent polling: one poll counts at most _MAX_POLL_CYCLES, so
        # a helper the OS descheduled for a while does not give up on coming back.
        now = _cycles()
        idle += min(now - prev, _MAX_POLL_CYCLES)
        prev = now
        if idle > idle_cycles:
            break
        _spin_pause()
    _store_release(base, ACTIVE, 0)


@njit(**_JIT)
def matmul_into_par(a, b, ta, tb, out, ctl):
    """``out[...] = op(a) @ op(b)`` (``op`` transposes when ``ta``/``tb``), float32, 2-D,
    ``out`` C-contiguous of the product's shape, by the routes above; the tile pass may
    share chunks with the helper of control block ``ctl`` (the same bits whoever
    computes a chunk; a block of size 0 or one no helper serves: this thread alone)."""
    as0, as1 = _element_strides(a)
    if as0 < 0:
        a = np.ascontiguousarray(a)
        as0, as1 = _element_strides(a)
    bs0, bs1 = _element_strides(b)
    if bs0 < 0:
        b = np.ascontiguousarray(b)
        bs0, bs1 = _element_strides(b)
    if ta:
        k, m, sak, sai = a.shape[0], a.shape[1], as0, as1
    else:
        m, k, sai, sak = a.shape[0], a.shape[1], as0, as1
    if tb:
        n, sbj, sbk = b.shape[0], bs0, bs1
    else:
        n, sbk, sbj = b.shape[1], bs0, bs1
    if m == 0 or n == 0:
        return
    if k == 0:
        out[:] = 0
        return
    pa, pb, pc = a.ctypes.data, b.ctypes.data, out.ctypes.data
    if sbj == 1 or n == 1:
        tiles_par(ctl, pa, sai, sak, pb, sbk, pc, n, m, n, k)
        _keep_alive(a, b, out)
        return
    packed_a = 0 if sai == 1 or m == 1 else m * k
    if sbk == 1 and packed_a + m * n < k * n:
        at = np.empty((k, m) if packed_a else (0, 0), np.float32)
        for kk in range(at.shape[0]):
            for i in range(at.shape[1]):
                at[kk, i] = (a[kk, i] if ta else a[i, kk])
        pat, ldat = (at.ctypes.data, m) if packed_a else (pa, sak)
        ct = np.empty((n, m), np.float32)
        tiles_par(ctl, pb, sbj, sbk, pat, ldat, ct.ctypes.data, m, n, m, k)
        out[:] = ct.T
        _keep_alive(a, b, at)
        return
    bp = np.empty((k, n), np.float32)
    for kk in range(k):
        for j in range(n):
            bp[kk, j] = (b[j, kk] if tb else b[kk, j])
    tiles_par(ctl, pa, sai, sak, bp.ctypes.data, n, pc, n, m, n, k)
    _keep_alive(a, b, bp, out)


_NO_HELPER = np.zeros(0, np.int64)


@njit(**_JIT)
def matmul_into(a, b, ta, tb, out):
    """:func:`matmul_into_par` on this thread alone."""
    matmul_into_par(a, b, ta, tb, out, _NO_HELPER)


@njit(**_JIT)
def matmul(a, b, ta, tb):
    """``op(a) @ op(b)`` as a new C-contiguous float32 array (shapes must agree)."""
    m = a.shape[1] if ta else a.shape[0]
    n = b.shape[0] if tb else b.shape[1]
    out = np.empty((m, n), np.float32)
    matmul_into_par(a, b, ta, tb, out, _NO_HELPER)
    return out


def kernel(name):
    """The compiled function called ``name`` (for :func:`._dispatch.lazy`)."""
    return globals()[name]


def idle_control():
    """A control block no helper serves: products on it run on the calling thread."""
    return np.zeros(SLOTS, np.int64)


class GemmHelper:
    """One helper thread and its control block ``ctl`` (see the module docstring).

    ``wake(flush)`` makes the helper spin in float mode ``flush`` (starting its thread
    on first use); it sleeps again by itself after about a millisecond without work.
    """

    def __init__(self):
        self.ctl = np.zeros(SLOTS, np.int64)
        self._lock = threading.Lock()
        self._event = threading.Event()
        self._thread = None
        self._mode = None       # the float mode the helper spins in (True: flush)
        self._want = False

    def wake(self, flush: bool) -> None:
        """Have the helper spin in float mode ``flush`` from now on (cheap when it
        already does)."""
        flush = bool(flush)
        if self.ctl[ACTIVE] and self._mode is flush:
            return
        with self._lock:
            self._want = flush
            if self.ctl[ACTIVE] and self._mode is not flush:
                self.ctl[STOP] = 1      # leave the loop; it comes back in the new mode
            if self._thread is None or not self._thread.is_alive():
                self._thread = threading.Thread(target=self._serve, name="dataflow-gemm",
                                                daemon=True)
                self._thread.start()
            self._event.set()

    def stop(self) -> None:
        """Make a spinning helper return to sleep now."""
        self.ctl[STOP] = 1
        while self.ctl[ACTIVE]:
            self._event.wait(0.0005)

    def _serve(self):
        from dataflow.util.float_env import flush_denormals_on_this_thread
        while True:
            self._event.wait()
            self._event.clear()
            want = self._want
            flush_denormals_on_this_thread(want)
            self._mode = want
            self.ctl[STOP] = 0
            worker_loop(self.ctl, _IDLE_CYCLES)

    def _after_fork(self):
        """In a child process: no helper thread exists; start from a fresh block."""
        self.ctl = np.zeros(SLOTS, np.int64)
        self._lock = threading.Lock()
        self._event = threading.Event()
        self._thread = None
        self._mode = None


_helper = None
_helper_lock = threading.Lock()


def shared_helper() -> GemmHelper:
    """The process's helper (created on first use)."""
    global _helper
    with _helper_lock:
        if _helper is None:
            _helper = GemmHelper()
            if hasattr(os, "register_at_fork"):
                os.register_at_fork(after_in_child=_helper._after_fork)
        return _helper
