"""Cost of second-order gradients through nested loops and conds in loops (issue 14).

For each workload: the forward step, the first gradient, and the second-order step
(the gradient of ``sum |grad|^2``), each the median of several runs of one Session
step. ``python -m benchmarks.second_order_table`` prints the table; run it from two
checkouts to compare them (the same workloads, the same machine).
"""
from __future__ import annotations

import statistics
import sys
import time

import numpy as np

import dataflow as df

N = 64  # vector width


def _nested(x, a, outer=20, inner=10):
    def outer_body(i, v):
        _, v = df.while_loop(lambda j, u: j < inner,
                             lambda j, u: (j + 1, df.sin(u * a) * 0.5 + u * 0.5), (0, v))
        return i + 1, v
    _, y = df.while_loop(lambda i, v: i < outer, outer_body, (0, x))
    return df.reduce_sum(y * y)


def _cond_in_loop(x, a, trips=200):
    _, y = df.while_loop(
        lambda i, v: i < trips,
        lambda i, v: (i + 1, df.cond(df.equal(i % 2, 0), lambda: df.tanh(v * a),
                                     lambda: v * a * 1.01)), (0, x))
    return df.reduce_sum(y * y)


def _single(x, a, trips=200):
    _, y = df.while_loop(lambda i, v: i < trips,
                         lambda i, v: (i + 1, df.sin(v * a) * 0.5 + v * 0.5), (0, x))
    return df.reduce_sum(y * y)


WORKLOADS = {"single loop, 200 trips": _single, "nested loops, 20 x 10 trips": _nested,
             "cond in a loop, 200 trips": _cond_in_loop}


def _median_seconds(sess, fetch, feed, repeats):
    sess.run(fetch, feed)  # warm: plan and kernels
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        sess.run(fetch, feed)
        times.append(time.perf_counter() - start)
    return statistics.median(times)


def measure(build, repeats=7):
    """(forward, first gradient, second order) median seconds of ``build``."""
    rng = np.random.default_rng(0)
    with df.Graph().as_default():
        x = df.placeholder(df.float64, [N])
        a = df.placeholder(df.float64, [])
        y = build(x, a)
        grads = df.gradients(y, [x, a])
        norm = df.add_n([df.reduce_sum(g * g) for g in grads])
        second = df.gradients(norm, [x, a])
        feed = {x: rng.standard_normal(N) * 0.5, a: 0.8}
        with df.Session() as sess:
            return tuple(_median_seconds(sess, f, feed, repeats) for f in (y, grads, second))


def main(argv=None) -> int:
    names = argv if argv else list(WORKLOADS)
    print("| workload | forward | first gradient | second order | second / first |")
    print("|---|---|---|---|---|")
    for name in names:
        fwd, first, second = measure(WORKLOADS[name])
        print(f"| {name} | {fwd * 1e3:.1f} ms | {first * 1e3:.1f} ms | "
              f"{second * 1e3:.1f} ms | {second / first:.2f}x |")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
