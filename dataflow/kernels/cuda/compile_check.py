"""Compile every CUDA kernel to PTX with the real compiler, without a GPU.

The simulator runs kernels as Python and accepts code the CUDA compiler rejects
(untyped constructs, float64 leaks, unsupported calls), so CI also compiles each
kernel for compute capability 7.5 with ``cuda.compile_ptx``. That needs NVVM, from
the ``cuda`` extra (``numba-cuda[cu13]``), and the simulator off::

    python -m dataflow.kernels.cuda.compile_check          # prints one line per kernel
    python -m dataflow.kernels.cuda.compile_check -q       # only failures and the summary

Every op's scalar code is compiled for its first dtype and every dtype for one op;
kernel variants that differ only in indexing (scalar operands, broadcasting) are
compiled once per dtype. That covers each (code path, dtype) pair without compiling
the full product (which takes minutes).
"""
from __future__ import annotations

import sys
import time

import numpy as np

from ...framework.elementwise_table import ELEMENTWISE

__all__ = ["kernel_signatures", "main"]

_NB = {"float32": "float32", "float64": "float64", "int32": "int32", "int64": "int64",
       "bool": "boolean"}


def _arr(dtype, ndim=1):
    return f"{_NB[np.dtype(dtype).name]}[{', '.join([':'] * (ndim - 1) + ['::1'])}]"


def _scalar(dtype):
    return _NB[np.dtype(dtype).name]


def _cases(table):
    """(op, dtype) pairs: each op with its first dtype, plus every dtype of the table
    once (with the first op that takes it)."""
    seen, cases = set(), []
    for op, dtypes in table.items():
        cases.append((op, dtypes[0]))
        seen.add(dtypes[0])
    for op, dtypes in table.items():
        for dt in dtypes:
            if dt not in seen:
                seen.add(dt)
                cases.append((op, dt))
    return cases


def _pairs(dtypes):
    """Cast pairs: every dtype from and to the first one, and each to itself."""
    first = dtypes[0]
    return sorted({(first, d) for d in dtypes} | {(d, first) for d in dtypes}
                  | {(d, d) for d in dtypes})


def kernel_signatures():
    """``[(name, kernel, signature)]`` for every CUDA kernel of :mod:`dataflow.kernels.cuda`."""
    from .device import array as A, elementwise as E, matmul as M, rows as R, training as T
    from .elementwise import BINARY_OPS, CAST_DTYPES, UNARY_OPS
    from .reduction import REDUCTION_OPS
    from .elementwise import FLOAT, NUMERIC
    out = []
    tup2 = "UniTuple(int64, 2)"
    for op, dt in _cases(UNARY_OPS):
        d = np.dtype(dt)
        out.append((f"unary {op} {dt}", E.unary_kernel(op, d),
                    f"void({_arr(d)}, {_arr(d)})"))
    for src, dst in _pairs(CAST_DTYPES):
        out.append((f"cast {src}->{dst}", E.unary_kernel("Cast", np.dtype(src)),
                    f"void({_arr(src)}, {_arr(dst)})"))
    # Every op's scalar function in the same-shape kernel; the scalar-operand and
    # broadcasting variants differ only in indexing: each dtype once, with one op.
    variants = {dt: op for op, dt in reversed(_cases(BINARY_OPS))}
    for op, dt in _cases(BINARY_OPS):
        d = np.dtype(dt)
        res = np.dtype(np.bool_) if ELEMENTWISE[op].output == "bool" else d
        a, r = _arr(d), _arr(res)
        out.append((f"binary {op} {dt}", E.binary_same_kernel(op, d),
                    f"void({a}, {a}, {r})"))
        if variants.get(dt) != op:
            continue
        for first in (True, False):
            out.append((f"binary-scalar {op} {dt} first={first}",
                        E.binary_scalar_kernel(op, d, first), f"void({_scalar(d)}, {a}, {r})"))
        out.append((f"binary-broadcast {op} {dt}", E.binary_broadcast_kernel(op, d),
                    f"void({a}, {tup2}, {a}, {tup2}, {tup2}, {r})"))
    for dt in NUMERIC + ("bool",):
        a = _arr(dt)
        out.append((f"strided-copy {dt}", E.strided_copy_kernel,
                    f"void({a}, {tup2}, {tup2}, {a})"))
        out.append((f"fill {dt}", E.fill_kernel, f"void({_scalar(dt)}, {a})"))
        out.append((f"select {dt}", E.select_kernel,
                    f"void({_arr('bool')}, {tup2}, {a}, {tup2}, {a}, {tup2}, {tup2}, {a})"))
    for dt in NUMERIC:
        a = _arr(dt)
        out.append((f"gather {dt}", A.gather_kernel,
                    f"void({a}, {_arr('int64')}, int64, int64, int64, {a})"))
        out.append((f"one-hot {dt}", A.one_hot_kernel,
                    f"void({_arr('int32')}, int64, {_scalar(dt)}, {_scalar(dt)}, {a})"))
    for op, dt in _cases({op: NUMERIC for op in REDUCTION_OPS}):
        d = np.dtype(dt)
        out.append((f"reduce {op} {dt}", R.reduce_kernel(op, d, d, 256),
                    f"void({_arr(d)}, int64, int64, {_arr(d)})"))
    out.append(("reduce Mean int32", R.reduce_kernel("Mean", np.dtype("int32"),
                                                     np.dtype("int32"), 256),
                f"void({_arr('int32')}, int64, int64, {_arr('int32')})"))
    for dt in FLOAT:
        d = np.dtype(dt)
        a = _arr(d)
        for log in (False, True):
            out.append((f"softmax log={log} {dt}", R.softmax_kernel(d, 256, log),
                        f"void({a}, int64, int64, {a})"))
        out.append((f"xent {dt}", R.xent_kernel(d, 256),
                    f"void({a}, {a}, int64, int64, {a}, {a})"))
        for ta in (False, True):
            for tb in (False, True):
                m = _arr(d, 2)
                out.append((f"matmul {dt} ta={ta} tb={tb}", M.matmul_kernel(d, 16, ta, tb),
                            f"void({m}, {m}, {m})"))
        s = _scalar(d)
        out.append((f"adam {dt}", T.adam_kernel(d),
                    f"void({a}, {a}, {a}, {a}, {s}, {s}, {s}, {s}, {a}, {a}, {a})"))
    out.extend(_fused_signatures())
    return out


def _fused_signatures():
    """A few generated fused kernels (the code generator's every instruction kind)."""
    try:
        from .fused import sample_kernels
    except ImportError:  # the fused code generator is optional
        return []
    return sample_kernels()


def _float64_leak(sig, ptx) -> bool:
    """True if a kernel on float32 data (no float64 argument) computes in float64: on
    most GPUs float64 runs at 1/32 to 1/64 of the float32 rate."""
    return "float32" in sig and "float64" not in sig and ".f64" in ptx


def _pretend_a_device(cc=(7, 5)):
    """``compile_ptx`` compiles the device functions a kernel calls for the *current*
    device, which needs a driver: here (only in this checking process) the current
    device is a stand-in reporting compute capability ``cc``."""
    from numba.cuda import dispatcher

    class StandIn:
        compute_capability = cc

    dispatcher.get_current_device = lambda: StandIn


def main(argv=None) -> int:
    from .runtime import simulator_enabled
    if simulator_enabled():
        print("compile_check: switch the CUDA simulator off (unset NUMBA_ENABLE_CUDASIM)",
              file=sys.stderr)
        return 2
    quiet = "-q" in (argv or ())
    from numba import cuda
    _pretend_a_device()
    failures = 0
    start = time.perf_counter()
    cases = kernel_signatures()
    for name, kernel, sig in cases:
        try:
            ptx, _ = cuda.compile_ptx(kernel.py_func, sig, cc=(7, 5))
            if _float64_leak(sig, ptx):
                raise TypeError("float64 arithmetic in a float32 kernel (a float literal or "
                                "an int/float division promotes; use dtype constants)")
            if not quiet:
                print(f"ok    {name}")
        except Exception as exc:  # report every failing kernel, not just the first
            failures += 1
            print(f"FAIL  {name}: {sig}\n      {type(exc).__name__}: {exc}")
    print(f"{len(cases) - failures}/{len(cases)} kernels compiled to PTX "
          f"in {time.perf_counter() - start:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
