"""The fused elementwise chain against NumPy and the machine's copy bandwidth.

    python -m benchmarks.fusion_table [--repeats 9] [--quick]

``tanh(a*b + c) * 0.5 + a`` on 10^7 float32 through a Session (the fusion pass turns
it into one generated loop), through a Session with fusion off, and as the same NumPy
expression; in GB/s counting 3 inputs read and 1 output written (16 bytes/element).
The ceiling is ``np.copyto`` of a 10^7 float32 array (read + write counted). Also the
first call of a cached fused kernel in a fresh process (``import dataflow`` excluded).
Each figure is a median of interleaved repeats.
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import textwrap
import time

import numpy as np

import dataflow as df

TARGETS = {"GB/s": 20.0, "× NumPy": 2.5, "first call": 0.3}


def _chain(x, y, z):
    return df.tanh(x * y + z) * 0.5 + x


def _session_run(n, fuse):
    g = df.Graph()
    with g.as_default():
        a, b, c = (df.placeholder(df.float32, [n]) for _ in range(3))
        out = _chain(a, b, c)
    sess = df.Session(graph=g, config=df.ConfigProto(fuse_elementwise=fuse))
    return lambda av, bv, cv: sess.run(out, feed_dict={a: av, b: bv, c: cv})


def _medians(fns, repeats):
    samples = {k: [] for k in fns}
    for fn in fns.values():
        fn()  # warm-up: plan, compilation
    for _ in range(repeats):  # interleaved, so drift hits every row alike
        for k, fn in fns.items():
            t0 = time.perf_counter()
            fn()
            samples[k].append(time.perf_counter() - t0)
    return {k: statistics.median(v) for k, v in samples.items()}


_FIRST_CALL = textwrap.dedent("""
    import time, numpy as np
    import dataflow as df
    x = np.ones({n}, np.float32)
    times = []
    for make in (lambda a, b, c: df.exp(a * 2.0) - b * c,      # pays Numba's start-up
                 lambda a, b, c: df.tanh(a * b + c) * 0.5 + a):  # the chain
        with df.Graph().as_default():
            a, b, c = (df.placeholder(df.float32, [{n}]) for _ in range(3))
            y = make(a, b, c)
            with df.Session() as sess:
                t0 = time.perf_counter()
                sess.run(y, feed_dict={{a: x, b: x, c: x}})
                times.append(time.perf_counter() - t0)
    print(*times)
""")


def first_call_seconds(n=100_000):
    """``(first fused run in a new process, first run of the chain after it)``: seconds,
    kernels already in the disk cache (a warm-up process fills it). The first includes
    Numba's one-time start-up in the process (its typing registries, which import SciPy
    when it is installed); the second is what loading one more cached kernel costs."""
    code = _FIRST_CALL.format(n=n)
    for _ in range(2):
        out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                             check=True)
    first, chain = (float(v) for v in out.stdout.split()[-2:])
    return first, chain


def measure(repeats=9, quick=False) -> dict:
    n = 10 ** 5 if quick else 10 ** 7
    rng = np.random.default_rng(0)
    a, b, c = (rng.standard_normal(n).astype(np.float32) for _ in range(3))
    half = np.float32(0.5)
    dst = np.empty_like(a)
    fused, unfused = _session_run(n, True), _session_run(n, False)
    np.testing.assert_allclose(fused(a, b, c), np.tanh(a * b + c) * half + a, atol=1e-5)
    t = _medians({
        "copy": lambda: np.copyto(dst, a),
        "numpy": lambda: np.tanh(a * b + c) * half + a,
        "fused": lambda: fused(a, b, c),
        "unfused": lambda: unfused(a, b, c),
    }, repeats)
    gbs = {k: (8 if k == "copy" else 16) * n / v / 1e9 for k, v in t.items()}
    return {"n": n, "seconds": t, "gbs": gbs, "first_call": first_call_seconds()}


def format_table(m) -> str:
    g, t = m["gbs"], m["seconds"]
    first, chain = m["first_call"]
    ratio = g["fused"] / g["numpy"]
    full = m["n"] == 10 ** 7  # the targets are for 10^7 elements
    met = ("yes" if g["fused"] >= TARGETS["GB/s"] and ratio >= TARGETS["× NumPy"] else "NO"
           ) if full else "n/a"
    lines = [
        f"n = {m['n']:.0e} float32; GB/s count 16 bytes/element (copy: 8)",
        "",
        "| what | ms (median) | GB/s | vs NumPy | target | met |",
        "|---|---|---|---|---|---|",
        f"| fused chain through a Session | {t['fused'] * 1e3:.2f} | {g['fused']:.1f} | "
        f"{ratio:.2f}× | ≥ {TARGETS['GB/s']:g} GB/s, ≥ {TARGETS['× NumPy']:g}× | {met} |",
        f"| same graph, fusion off | {t['unfused'] * 1e3:.2f} | {g['unfused']:.1f} | "
        f"{g['unfused'] / g['numpy']:.2f}× | | |",
        f"| NumPy expression | {t['numpy'] * 1e3:.2f} | {g['numpy']:.1f} | 1.00× | | |",
        f"| np.copyto (ceiling) | {t['copy'] * 1e3:.2f} | {g['copy']:.1f} | | | |",
        f"| new process: first fused run, cached kernel (Numba start-up included) | "
        f"{first * 1e3:.0f} | | | ≤ {TARGETS['first call'] * 1e3:.0f} ms | "
        f"{'yes' if first <= TARGETS['first call'] else 'NO'} |",
        f"| new process: first run of the chain's cached kernel after that | "
        f"{chain * 1e3:.1f} | | | | |",
    ]
    return "\n".join(lines)


def table(repeats=9, quick=False) -> str:
    """The fusion table as Markdown (``benchmarks.compare`` prints it)."""
    return format_table(measure(repeats, quick))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__,
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeats", type=int, default=9)
    ap.add_argument("--quick", action="store_true", help="10^5 elements")
    args = ap.parse_args(argv)
    print(table(args.repeats, args.quick))


if __name__ == "__main__":
    main()
