"""The cost of eager dispatch: one small op from the Python call to the returned tensor.

    python -m benchmarks.eager [--calls N] [--samples N]

Times ``x + y`` (the Tensor operator), ``df.add(x, y)`` and ``df.multiply`` on float32
scalars and 10-element vectors in eager mode, beside NumPy's own ``a + b`` on the same
values, and one step of a small GradientTape MLP (16x64x10, Adam) beside nothing (its
absolute cost). Each figure is the median over ``samples`` batches of ``calls`` calls,
divided by ``calls``: a batch long enough for the clock, the median against drift on a
shared machine. The target (issue 11) is at most 5 us per small op.
"""
from __future__ import annotations

import argparse
import statistics
import time

import numpy as np

import dataflow as df


def per_call(fn, calls, samples):
    """Seconds per call of ``fn()`` over ``samples`` batches of ``calls`` calls:
    ``(median, best)`` (the best batch is what the code costs when no other process
    takes the core; on a shared machine the median carries the others' load)."""
    fn()  # the first call of a signature builds its kernel: not part of the steady state
    times = []
    for _ in range(samples):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        times.append((time.perf_counter() - t0) / calls)
    return statistics.median(times), min(times)


def _mlp_step(rng):
    x = df.constant(rng.standard_normal((16, 64)).astype(np.float32))
    y = df.one_hot(rng.integers(0, 10, 16), 10)
    w1 = df.Variable(rng.standard_normal((64, 64)).astype(np.float32) * 0.1)
    w2 = df.Variable(rng.standard_normal((64, 10)).astype(np.float32) * 0.1)
    opt = df.train.AdamOptimizer(0.01)

    def step():
        with df.GradientTape() as tape:
            logits = df.matmul(df.nn.relu(df.matmul(x, w1)), w2)
            loss = df.reduce_mean(df.nn.softmax_cross_entropy_with_logits(labels=y,
                                                                          logits=logits))
        opt.apply_gradients(zip(tape.gradient(loss, [w1, w2]), [w1, w2]))
        return loss
    return step


def measure(calls=2000, samples=51, mlp_steps=20):
    """Rows ``(name, eager (median, best) seconds per call, NumPy's or None)``."""
    rng = np.random.default_rng(0)
    rows = []
    with df.eager_mode():
        for label, value in (("scalar", np.float32(1.5)),
                             ("10 elements", rng.standard_normal(10).astype(np.float32))):
            a, b = value, value * np.float32(2)
            x, y = df.constant(a), df.constant(b)
            numpy_add = per_call(lambda: a + b, calls, samples)
            rows.append((f"x + y, {label}", per_call(lambda: x + y, calls, samples),
                         numpy_add))
            rows.append((f"df.add(x, y), {label}",
                         per_call(lambda: df.add(x, y), calls, samples), numpy_add))
            rows.append((f"df.multiply(x, y), {label}",
                         per_call(lambda: df.multiply(x, y), calls, samples),
                         per_call(lambda: a * b, calls, samples)))
        step = _mlp_step(rng)
        rows.append(("GradientTape MLP step (Adam)",
                     per_call(step, max(1, mlp_steps // 5), 5), None))
    return rows


def format_rows(rows) -> str:
    """The table: median and best batch per call, eager and NumPy."""
    lines = [f"{'op (per call)':32s} {'eager median':>13s} {'eager best':>11s} "
             f"{'NumPy median':>13s}"]
    for name, (median, best), numpy_s in rows:
        np_text = f"{numpy_s[0] * 1e6:11.2f}us" if numpy_s else f"{'-':>13s}"
        lines.append(f"{name:32s} {median * 1e6:11.2f}us {best * 1e6:9.2f}us {np_text}")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--calls", type=int, default=2000)
    parser.add_argument("--samples", type=int, default=51)
    args = parser.parse_args(argv)
    print(format_rows(measure(args.calls, args.samples)))


if __name__ == "__main__":
    main()
