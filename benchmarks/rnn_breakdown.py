"""Where one step of the compiled tanh RNN goes (T=1000, B=32, H=256, float32), in µs.

    python -m benchmarks.rnn_breakdown [--repeats 7] [--threads 1,2]
    env -u OPENBLAS_CORETYPE python -m benchmarks.rnn_breakdown    # OpenBLAS's own choice

Each part of a step is timed as the generated code runs it -- the helpers of
:mod:`dataflow.loopc.nbhelpers` called 1000 times inside one Numba function, so no
Python call is counted -- next to the NumPy expression the hand-written baselines of
:mod:`benchmarks.workloads` use for it, for each BLAS thread count (``threadpoolctl``
sets NumPy's OpenBLAS pool, which compiled loops share). The last rows are whole steps:
the forward cell as the loop compiler generates it now (one loop for ``tanh(z + x)``
after the GEMM) and as it was before (``z + x`` and ``tanh`` as two array
expressions).
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np
from numba import njit
from threadpoolctl import threadpool_limits

import dataflow  # noqa: F401  (the runtime's malloc settings, as in a session)
from dataflow.loopc.nbhelpers import acc_add, cst, ew1, ew2, gemm, stack_push
from dataflow.runtime.host_memory import retain_freed_memory

from .blas_config import blas_label

B, H, N = 32, 256, 1000


@njit(nogil=True, error_model="numpy")
def _gemm_loop(a, b, ta, tb, n):
    out = gemm(a, b, ta, tb)
    for _ in range(n - 1):
        out = gemm(a, b, ta, tb)
    return out


@njit(nogil=True, error_model="numpy")
def _add_loop(a, b, n):
    out = cst(a + b, "float32")
    for _ in range(n - 1):
        out = cst(a + b, "float32")
    return out


@njit(nogil=True, error_model="numpy")
def _tanh_loop(a, n):
    out = cst(ew1("Tanh", a), "float32")
    for _ in range(n - 1):
        out = cst(ew1("Tanh", a), "float32")
    return out


@njit(nogil=True, error_model="numpy")
def _fused_loop(z, x, n):
    """``tanh(z + x)`` as the code generator now writes it: one flat loop."""
    out = np.empty(z.shape, np.float32)
    for _ in range(n):
        out = np.empty(z.shape, np.float32)
        flat, zf, xf = out.reshape(out.size), z.ravel(), x.ravel()
        for i in range(flat.size):
            flat[i] = np.float32(ew1("Tanh", np.float32(zf[i] + xf[i])))
    return out


@njit(nogil=True, error_model="numpy")
def _tanh_grad_loop(y, dy, n):
    out = cst(ew2("TanhGrad", y, dy), "float32")
    for _ in range(n - 1):
        out = cst(ew2("TanhGrad", y, dy), "float32")
    return out


@njit(nogil=True, error_model="numpy")
def _push_loop(buf, v, n):
    for k in range(n):
        buf = stack_push(buf, k, v)
    return buf


@njit(nogil=True, error_model="numpy")
def _acc_out_of_place(total, v, n):
    for _ in range(n):
        total = cst(total + v, "float32")
    return total


@njit(nogil=True, error_model="numpy")
def _acc_in_place(total, v, n):
    total = total.copy()
    own = False
    for _ in range(n):
        total = acc_add(total, v, own, True)
        own = True
    return total


@njit(nogil=True, error_model="numpy")
def _step_before(h, w, x, n):
    for _ in range(n):
        h = cst(ew1("Tanh", cst(gemm(h, w, False, False) + x, "float32")), "float32")
    return h


@njit(nogil=True, error_model="numpy")
def _step_now(h, w, x, n):
    for _ in range(n):
        z = gemm(h, w, False, False)
        out = np.empty(z.shape, np.float32)
        flat, zf, xf = out.reshape(out.size), z.ravel(), x.ravel()
        for i in range(flat.size):
            flat[i] = np.float32(ew1("Tanh", np.float32(zf[i] + xf[i])))
        h = out
    return h


def _per_step(fn, args, repeats):
    fn(*args, 2)
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(*args, N)
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) / N * 1e6


def _numpy_per_step(fn, repeats):
    fn()
    samples = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(N):
            fn()
        samples.append(time.perf_counter() - t0)
    return statistics.median(samples) / N * 1e6


def rows(repeats: int) -> list:
    """``[(part, compiled µs or None, NumPy µs or None)]`` with the pool as it is set."""
    rng = np.random.default_rng(0)
    w = (rng.standard_normal((H, H)) * 0.05).astype(np.float32)
    x = rng.standard_normal((B, H)).astype(np.float32)
    h = np.tanh(rng.standard_normal((B, H))).astype(np.float32)
    dz = (0.1 * h).astype(np.float32)
    wt = np.ascontiguousarray(w.T)
    dw = np.zeros((H, H), np.float32)
    buf = np.empty((N + 2, B, H), np.float32)
    c, n = _per_step, _numpy_per_step
    return [
        ("GEMM h @ W (32x256x256)", c(_gemm_loop, (h, w, False, False), repeats),
         n(lambda: h @ w, repeats)),
        ("GEMM h^T dz (dW term)", c(_gemm_loop, (h, dz, True, False), repeats),
         n(lambda: h.T @ dz, repeats)),
        ("GEMM dz W^T (dh)", c(_gemm_loop, (dz, w, False, True), repeats),
         n(lambda: dz @ w.T, repeats)),
        # The same product as NN on a contiguous copy of W^T (what hoisting the transpose
        # of a loop-invariant W would run; not generated: its bits differ from NT's on
        # some BLAS paths, see RESULTS.md, issue 13, "Peers: BLAS kernels ...").
        ("GEMM dz (W^T copy), NN", c(_gemm_loop, (dz, wt, False, False), repeats),
         n(lambda: dz @ wt, repeats)),
        ("copy of W^T (256x256), NumPy", None, n(lambda: np.ascontiguousarray(w.T), repeats)),
        ("z + x, array expression", c(_add_loop, (h, x), repeats), n(lambda: h + x, repeats)),
        ("tanh, array expression", c(_tanh_loop, (h,), repeats), n(lambda: np.tanh(h), repeats)),
        ("tanh(z + x), one loop", c(_fused_loop, (h, x), repeats),
         n(lambda: np.tanh(h + x), repeats)),
        ("TanhGrad dz = dh (1 - y^2)", c(_tanh_grad_loop, (h, dz), repeats),
         n(lambda: dz * (1 - h * h), repeats)),
        ("stack push of h (copy)", c(_push_loop, (buf, h), repeats), None),
        ("dW + v out of place (256x256)", c(_acc_out_of_place, (dw, w), repeats),
         n(lambda: dw + w, repeats)),
        ("dW += v in place (acc_add)", c(_acc_in_place, (dw, w), repeats),
         n(lambda: dw.__iadd__(w), repeats)),
        ("forward step, before", c(_step_before, (h, w, x), repeats),
         n(lambda: np.tanh(h @ w + x), repeats)),
        ("forward step, now", c(_step_now, (h, w, x), repeats), None),
    ]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--threads", default="2,1", help="BLAS thread counts, comma-separated")
    args = ap.parse_args(argv)
    retain_freed_memory()
    counts = [int(t) for t in args.threads.split(",")]
    print(f"load average: {os.getloadavg()[0]:.2f} {os.getloadavg()[1]:.2f}")
    print(f"BLAS: {blas_label()}\n")
    table = {}
    for threads in counts:
        with threadpool_limits(threads, "blas"):
            table[threads] = rows(args.repeats)
    head = "| part of a step (µs) | " + " | ".join(
        f"compiled, {t} thread{'s' * (t > 1)} | NumPy, {t} thread{'s' * (t > 1)}" for t in counts)
    print(head + " |")
    print("|---|" + "---|---|" * len(counts))
    for k, (part, *_) in enumerate(table[counts[0]]):
        cells = []
        for t in counts:
            _, ours, theirs = table[t][k]
            cells += ["-" if ours is None else f"{ours:.2f}",
                      "-" if theirs is None else f"{theirs:.2f}"]
        print(f"| {part} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
