"""conv2d forward/backward on the 8x8-digits convnet's shapes: the NumPy reference kernel,
the Numba kernel (im2col + BLAS, the registered one) and a direct compiled loop, then
the convnet's whole forward+backward step with and without compiled kernels.

    python -m benchmarks.conv_table [--repeats 15] [--batch 64]

Layers: conv1 ``[B, 8, 8, 1] * [3, 3, 1, 16]`` SAME, 2x2 max pool, conv2
``[B, 4, 4, 16] * [3, 3, 16, 32]`` SAME, 2x2 max pool, dense 128 -> 10 (float32).
Each kernel is the registered callable of its node, called on the same inputs,
one after the other; the best of ``--repeats`` calls, in microseconds. ``table()`` returns the text
for ``python -m benchmarks.compare`` (TF1/PyTorch baselines are added there).
"""
from __future__ import annotations

import argparse
import time

import numpy as np

import dataflow as df
from dataflow.kernels.numba_cpu._dispatch import lazy, reference_kernel
from dataflow.kernels.numpy_cpu.conv import Geometry
from dataflow.kernels.registry import KernelContext, find_kernel
from dataflow.runtime.host_memory import retain_freed_memory

LAYERS = {"conv1": ((8, 8, 1), (3, 3, 1, 16)), "conv2": ((4, 4, 16), (3, 3, 16, 32))}


def _best_us(fn, args, repeats):
    """The fastest of ``repeats`` calls: on a shared machine the median mostly measures
    other processes (a descheduled call costs milliseconds)."""
    fn(*args)   # compile / warm caches
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn(*args)
        times.append(time.perf_counter() - t0)
    return min(times) * 1e6


def _direct_conv(ctx):
    """The direct compiled loop (no patch matrix), for comparison with im2col + BLAS."""
    fn = lazy("_conv_jit", "kernel", "conv_direct")

    def conv(x, w):
        g = Geometry(x.shape, w.shape[0], w.shape[1], ctx.attr("strides"),
                     ctx.attr("dilations"), ctx.attr("padding"))
        out = np.zeros((g.n, g.oh, g.ow, w.shape[3]), x.dtype)
        fn(x, w, out, (g.kh, g.kw, g.sh, g.sw, g.dh, g.dw, g.pt, g.pl, g.oh, g.ow))
        return out
    return conv


def kernel_rows(batch=64, repeats=15):
    """[(layer, op, numpy µs, numba im2col+BLAS µs, direct loop µs or None)], under the
    malloc settings a Session applies (freed memory kept: no page faults per call)."""
    retain_freed_memory()
    rng = np.random.default_rng(0)
    rows = []
    for name, (in_shape, w_shape) in LAYERS.items():
        x = rng.standard_normal((batch, *in_shape)).astype(np.float32)
        w = rng.standard_normal(w_shape).astype(np.float32)
        with df.Graph().as_default():
            px = df.placeholder(df.float32, x.shape)
            pw = df.placeholder(df.float32, w.shape)
            y = df.nn.conv2d(px, pw, [1, 1, 1, 1], "SAME")
            gx, gw = df.gradients(y, [px, pw])
            dy = rng.standard_normal(y.shape.as_list()).astype(np.float32)
            cases = [("forward", y.op, (x, w)),
                     ("backprop input", gx.op, (np.array(x.shape, np.int32), w, dy)),
                     ("backprop filter", gw.op, (x, np.array(w.shape, np.int32), dy))]
            for label, op, args in cases:
                ctx = KernelContext(op=op)
                ours, ref = find_kernel(op, "CPU")(ctx), reference_kernel(ctx)
                direct = _direct_conv(ctx) if label == "forward" else None
                r = _best_us(ref, args, repeats)
                o = _best_us(ours, args, repeats)
                d = _best_us(direct, args, repeats) if direct else None
                rows.append((name, label, r, o, d))
    return rows


def _convnet(batch):
    rng = np.random.default_rng(1)
    x = df.placeholder(df.float32, [None, 8, 8, 1])
    y = df.placeholder(df.int32, [None])
    w1 = df.Variable(rng.standard_normal((3, 3, 1, 16)).astype(np.float32) * 0.3)
    w2 = df.Variable(rng.standard_normal((3, 3, 16, 32)).astype(np.float32) * 0.1)
    w3 = df.Variable(rng.standard_normal((128, 10)).astype(np.float32) * 0.1)
    h = df.nn.max_pool(df.nn.relu(df.nn.conv2d(x, w1, [1, 1, 1, 1], "SAME")),
                       [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    h = df.nn.max_pool(df.nn.relu(df.nn.conv2d(h, w2, [1, 1, 1, 1], "SAME")),
                       [1, 2, 2, 1], [1, 2, 2, 1], "VALID")
    logits = df.matmul(df.reshape(h, [-1, 128]), w3)
    loss = df.reduce_mean(df.nn.sparse_softmax_cross_entropy_with_logits(labels=y,
                                                                         logits=logits))
    step = df.train.GradientDescentOptimizer(0.1).minimize(loss)
    feed = {x: rng.uniform(0, 1, (batch, 8, 8, 1)).astype(np.float32),
            y: rng.integers(0, 10, batch)}
    return step, feed


def step_rows(batch=64, repeats=15):
    """[(label, µs per training step)] with compiled kernels and with NumPy only."""
    rows = []
    for label, compiled in (("compiled kernels", True), ("NumPy kernels", False)):
        with df.Graph().as_default():
            step, feed = _convnet(batch)
            config = df.ConfigProto(use_compiled_kernels=compiled)
            with df.Session(config=config) as sess:
                sess.run(df.global_variables_initializer())
                rows.append((label, _best_us(lambda: sess.run(step, feed), (), repeats)))
    return rows


def table(batch=64, repeats=15):
    lines = [f"conv2d kernels, batch {batch}, float32 (best of repeats, µs)",
             f"{'layer':6} {'op':16} {'NumPy':>9} {'im2col+BLAS':>12} {'direct loop':>12}"]
    for name, label, r, o, d in kernel_rows(batch, repeats):
        direct = f"{d:12.1f}" if d is not None else f"{'':>12}"
        lines.append(f"{name:6} {label:16} {r:9.1f} {o:12.1f} {direct}")
    lines.append(f"convnet training step, batch {batch} (best of repeats, µs)")
    for label, us in step_rows(batch, repeats):
        lines.append(f"  {label:18} {us:9.1f}")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=15)
    ap.add_argument("--batch", type=int, default=64)
    args = ap.parse_args()
    print(table(args.batch, args.repeats))


if __name__ == "__main__":
    main()
