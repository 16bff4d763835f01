"""``dynamic_rnn`` with an LSTM cell: forward and forward+gradient, against TF1 and PyTorch.

The model of issue 14: ``BasicLSTMCell(256)`` over ``T=100`` steps of a batch of 32
inputs of width 256 (float32, batch-major), ``outputs = dynamic_rnn(...)``; the
forward fetches the outputs, the gradient the gradients of ``mean(outputs)`` with
respect to the kernel, the bias and the inputs. TF1 runs the same graph (graph mode,
control flow v1, cells from ``rnn_cell_impl``); PyTorch runs ``nn.LSTM`` (its fused
kernel) with ``backward``. Each framework runs in its own process (``--python``
interpreters for the ones not importable here) and reports the median of ``repeats``
runs after a warm-up. ``--threads N`` caps every framework's BLAS and op threads at
``N`` (on a shared machine multi-threaded BLAS calls can slow down thirtyfold)::

    python -m benchmarks.lstm_table --repeats 7 --tf-python /path/to/tfvenv/bin/python
"""
from __future__ import annotations

import argparse
import json
import os
import pathlib
import subprocess
import sys
import time

import numpy as np

T, B, H, D = 100, 32, 256, 256


def _data():
    return np.random.default_rng(0).standard_normal((B, T, D)).astype(np.float32)


def _median_ms(fn, repeats):
    fn()
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return 1e3 * float(np.median(times))


def _threads():
    value = os.environ.get("LSTM_TABLE_THREADS")
    return int(value) if value else None


def _graph_rnn(tf, cells, repeats, config=None):
    """Time the TF1-style graph in ``tf`` (dataflow or tensorflow.compat.v1)."""
    x = tf.placeholder(tf.float32, [B, T, D])
    cell = cells.BasicLSTMCell(H)
    outputs, _ = tf.nn.dynamic_rnn(cell, x, dtype=tf.float32)
    grads = tf.gradients(tf.reduce_mean(outputs), tf.trainable_variables() + [x])
    feed = {x: _data()}
    with tf.Session(config=config) as sess:
        sess.run(tf.global_variables_initializer())
        return {"forward": _median_ms(lambda: sess.run(outputs, feed), repeats),
                "forward+gradient": _median_ms(lambda: sess.run(grads, feed), repeats)}


def run_dataflow(repeats):
    import dataflow as df
    with df.Graph().as_default():
        return _graph_rnn(df, df.nn.rnn_cell, repeats)


def run_tensorflow(repeats):
    os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
    import tensorflow.compat.v1 as tf
    from tensorflow.python.ops import rnn_cell_impl
    tf.disable_eager_execution()
    tf.disable_control_flow_v2()
    n = _threads()
    config = tf.ConfigProto(intra_op_parallelism_threads=n, inter_op_parallelism_threads=n) \
        if n else None
    with tf.Graph().as_default():
        return _graph_rnn(tf, rnn_cell_impl, repeats, config)


def run_torch(repeats):
    import torch
    if _threads():
        torch.set_num_threads(_threads())
    lstm = torch.nn.LSTM(D, H, batch_first=True)
    x = torch.from_numpy(_data()).requires_grad_(True)

    def forward():
        with torch.no_grad():
            lstm(x)

    def backward():
        lstm.zero_grad()
        out, _ = lstm(x)
        out.mean().backward()
    return {"forward": _median_ms(forward, repeats),
            "forward+gradient": _median_ms(backward, repeats)}


RUNNERS = {"dataflow": run_dataflow, "tensorflow": run_tensorflow, "torch": run_torch}


def _in_process(framework, python, repeats, threads):
    """The framework's times from a fresh process (``python`` or this interpreter)."""
    root = pathlib.Path(__file__).resolve().parent.parent
    cmd = [python or sys.executable, "-m", "benchmarks.lstm_table", "--one", framework,
           "--repeats", str(repeats)]
    env = dict(os.environ)
    if threads:
        for var in ("LSTM_TABLE_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS",
                    "MKL_NUM_THREADS", "NUMBA_NUM_THREADS"):
            env[var] = str(threads)
    done = subprocess.run(cmd, cwd=root, env=env, capture_output=True, text=True,
                          check=False)
    if done.returncode != 0:
        return None
    return json.loads(done.stdout.strip().splitlines()[-1])


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--one", choices=sorted(RUNNERS), help=argparse.SUPPRESS)
    parser.add_argument("--tf-python", help="an interpreter with TensorFlow installed")
    parser.add_argument("--torch-python", help="an interpreter with PyTorch installed")
    parser.add_argument("--threads", type=int, help="threads per framework (default: all)")
    args = parser.parse_args(argv)
    if args.one:
        print(json.dumps(RUNNERS[args.one](args.repeats)))
        return 0
    pythons = {"dataflow": None, "tensorflow": args.tf_python, "torch": args.torch_python}
    results = {name: _in_process(name, pythons[name], args.repeats, args.threads)
               for name in RUNNERS}
    print(f"dynamic_rnn LSTM, T={T} B={B} H={H} D={D}, float32, median of {args.repeats} (ms), "
          f"threads: {args.threads or 'all'}")
    print(f"| | {' | '.join(RUNNERS)} | dataflow / TF1 |")
    print("|---|" + "---|" * (len(RUNNERS) + 1))
    for what in ("forward", "forward+gradient"):
        cells = [f"{r[what]:.1f}" if r else "n/a" for r in results.values()]
        df_ms, tf_ms = (results[k][what] if results[k] else None
                        for k in ("dataflow", "tensorflow"))
        ratio = f"{df_ms / tf_ms:.2f}×" if df_ms and tf_ms else "n/a"
        print(f"| {what} | {' | '.join(cells)} | {ratio} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
