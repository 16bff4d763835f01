"""Numba CPU kernels against the NumPy reference kernels, per kernel family and size.

    python -m benchmarks.kernels_table [--repeats 7] [--sizes 1e3,1e5,1e6,1e7]
    python -m benchmarks.kernels_table --thresholds    # where the compiled path pays

Both sides are the registered kernel callables of the same node (ours: the Numba
kernel's wrapper, which picks the compiled path above its size threshold; NumPy: the
reference kernel), called on the same float32 inputs, interleaved, medians printed.
``table()`` returns the text for ``python -m benchmarks.compare``.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import dataflow as df
from dataflow.runtime.host_memory import retain_freed_memory
from dataflow.kernels.numba_cpu import _dispatch
from dataflow.kernels.numba_cpu._dispatch import reference_kernel
from dataflow.kernels.registry import KernelContext, find_kernel

SIZES = (10**3, 10**5, 10**6, 10**7)


def _matrix(n, cols=100):
    return max(n // cols, 1), cols


def _family_specs():
    """name -> (build(*placeholders), make_inputs(n, rng, dtype))."""
    f = np.float32

    def normal(n, rng, dt):
        return (rng.standard_normal(n).astype(dt),)

    def two(n, rng, dt):
        return rng.standard_normal(n).astype(dt), rng.standard_normal(n).astype(dt)

    def bias(n, rng, dt):
        r, c = _matrix(n)
        return rng.standard_normal((r, c)).astype(dt), rng.standard_normal(c).astype(dt)

    def mat(n, rng, dt):
        return (rng.standard_normal(_matrix(n)).astype(dt),)

    def xent(n, rng, dt):
        r, c = _matrix(n, 10)
        labels = np.eye(c, dtype=dt)[rng.integers(0, c, r)]
        return rng.standard_normal((r, c)).astype(dt), labels

    def gather(n, rng, dt):
        r, c = _matrix(n)
        return (rng.standard_normal((r, c)).astype(dt),
                rng.integers(0, r, r).astype(np.int32))

    def one_hot(n, rng, dt):
        return (rng.integers(0, 10, max(n // 10, 1)).astype(np.int32),)

    def select(n, rng, dt):
        return (rng.random(n) < 0.5, rng.standard_normal(n).astype(dt),
                rng.standard_normal(n).astype(dt))

    return {
        "neg": (lambda x: -x, normal),
        "tanh": (df.tanh, normal),
        "exp": (df.exp, normal),
        "sigmoid": (df.sigmoid, normal),
        "add (same shape)": (lambda x, y: x + y, two),
        "mul (same shape)": (lambda x, y: x * y, two),
        "add bias row": (lambda x, b: x + b, bias),
        "tanh_grad": (lambda y, dy: df.gradients(df.tanh(y), y, dy)[0], two),
        "sum all": (df.reduce_sum, normal),
        "sum axis 0": (lambda x: df.reduce_sum(x, axis=0), mat),
        "sum axis 1": (lambda x: df.reduce_sum(x, axis=1), mat),
        "mean all": (df.reduce_mean, normal),
        "max axis 1": (lambda x: df.reduce_max(x, axis=1), mat),
        "softmax": (df.nn.softmax, mat),
        "softmax_xent": (lambda z, y: df.nn.softmax_cross_entropy_with_logits(
            labels=y, logits=z), xent),
        "gather": (lambda p, i: df.gather(p, i), gather),
        "one_hot": (lambda i: df.one_hot(i, 10), one_hot),
        "select": (lambda c, x, y: df.where(c, x, y), select),
    }, f


def _kernels(build, inputs):
    """(ours, numpy) kernel callables of the op ``build`` makes from placeholders."""
    with df.Graph().as_default():
        ps = [df.placeholder(df.as_dtype(v.dtype)) for v in inputs]
        out = build(*ps)
        op = (out[0] if isinstance(out, (tuple, list)) else out).op
        ctx = KernelContext(op=op)
        return find_kernel(op, "CPU")(ctx), reference_kernel(ctx), op.type


def _time(fn, args, target_s=0.02):
    fn(*args)
    t0 = time.perf_counter()
    fn(*args)
    one = time.perf_counter() - t0
    inner = max(1, min(10000, int(target_s / max(one, 1e-7))))
    t0 = time.perf_counter()
    for _ in range(inner):
        fn(*args)
    return (time.perf_counter() - t0) / inner


def _interleaved(a, b, args, repeats):
    ta, tb = [], []
    for _ in range(repeats):
        ta.append(_time(a, args))
        tb.append(_time(b, args))
    return statistics.median(ta), statistics.median(tb)


def measure(sizes=SIZES, repeats=7, families=None, dtype=np.float32):
    """Rows ``(family, op type, n, ours_s, numpy_s)``: medians of interleaved repeats.

    Kernels run with the malloc settings a Session applies (both sides alike), as they
    would inside a session (see ``dataflow/runtime/host_memory.py``).
    """
    retain_freed_memory()
    specs, _ = _family_specs()
    rng = np.random.default_rng(0)
    rows = []
    for name, (build, make) in specs.items():
        if families and name not in families:
            continue
        for n in sizes:
            args = make(int(n), rng, dtype)
            ours, ref, op_type = _kernels(build, args)
            t_ours, t_ref = _interleaved(ours, ref, args, repeats)
            rows.append((name, op_type, int(n), t_ours, t_ref))
    return rows


def format_table(rows) -> str:
    lines = ["| kernel | op | elements | ours (µs) | NumPy (µs) | NumPy / ours |",
             "|---|---|---|---|---|---|"]
    for name, op_type, n, a, b in rows:
        lines.append(f"| {name} | {op_type} | {n:.0e} | {a * 1e6:.1f} | {b * 1e6:.1f} | "
                     f"{b / a:.2f}× |")
    return "\n".join(lines)


def table(repeats=7, sizes=SIZES) -> str:
    """The kernel table as Markdown (for ``benchmarks.compare``)."""
    return format_table(measure(sizes, repeats))




def thresholds(repeats=5, families=("neg", "add (same shape)", "add bias row", "tanh",
                                    "sum all", "sum axis 0", "softmax", "softmax_xent",
                                    "gather", "select")):
    """Rows of (family, n, compiled_s, numpy_s) with every size threshold set to 0, so
    the compiled path runs at every size."""
    saved = {k: getattr(_dispatch, k) for k in _dispatch.__all__ if k.endswith("_MIN_SIZE")}
    try:
        for k in saved:
            setattr(_dispatch, k, 0)
        sizes = [2 ** k for k in range(4, 17, 2)]
        return measure(sizes, repeats, families)
    finally:
        for k, v in saved.items():
            setattr(_dispatch, k, v)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--sizes", default="1e3,1e5,1e6,1e7")
    ap.add_argument("--thresholds", action="store_true")
    ap.add_argument("--families", default="")
    args = ap.parse_args()
    fams = [f for f in args.families.split(";") if f] or None
    if args.thresholds:
        print(format_table(thresholds(args.repeats)))
    else:
        sizes = [int(float(s)) for s in args.sizes.split(",")]
        print(format_table(measure(sizes, args.repeats, fams)))


if __name__ == "__main__":
    main()
