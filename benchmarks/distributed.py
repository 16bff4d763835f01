"""The MPI partition mode: message latency, large-array transfer, loop overhead, and
weak scaling of a data-parallel MLP step.

    python -m benchmarks.distributed [--repeats 5] [--n 2000]

Run without mpiexec it measures the processes mode's figures in this process, then
launches itself under ``dataflow mpirun`` (2 ranks for the transport and loop
figures, then K = 1, 2, 4 ranks for the scaling) and prints one table. Under
``mpiexec -n K`` directly it prints the MPI figures of that world only.

* **control round trip**: a float32 scalar from rank 0 to rank 1 and back through the
  step rendezvous (:mod:`dataflow.runtime.mpi.transport`); baseline: a bare mpi4py
  ``Send``/``Recv`` of 4 bytes;
* **100 MB crossing**: a float32 array of 100 MB sent by rank 0, received by rank 1,
  from before the send to after the receive (CLOCK_MONOTONIC, one host); baselines: a
  bare mpi4py ``Send``/``Recv`` of the buffer, one ``np.copy``;
* **loop per iteration**: the 2-device scalar loop of ``benchmarks.partition_table``
  on tasks 0 and 1 in ``partition_mode="mpi"`` vs the processes mode;
* **weak scaling**: one gradient-descent step of the digits-shaped 64-64-64-10 MLP
  replicated on K tasks, each on its own 1797 x 64 batch, gradients averaged with
  :func:`dataflow.distributed.all_reduce`: seconds per step for K = 1, 2, 4.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

import numpy as np

import dataflow as df

from .partition_table import build_loop
from .workloads import mlp_data

TARGET_ROUND_TRIP_US = 20.0
TARGET_100MB_MS = 30.0
TARGET_LOOP_RATIO = 2.0


def task(k):
    return df.device(f"/job:worker/task:{k}/device:CPU:0")


# -- under mpiexec: the transport (every rank runs these) ---------------------------------------
def transport_figures(repeats, n=2000):
    from dataflow.runtime.mpi.mode import rank_of_device, task_device
    from dataflow.runtime.mpi.transport import Endpoint
    from dataflow.runtime.mpi.world import world
    w = world()
    MPI, comm = w.MPI, w.data
    endpoint = Endpoint(w, rank_of_device)
    a, b = task_device(0), task_device(1)
    dummy = np.float32(1.0)
    out = {}
    samples = []
    for r in range(repeats + 1):
        step = 10_000 + r
        rv = endpoint.rendezvous(step)
        comm.Barrier()
        t0 = time.perf_counter()
        for k in range(n):
            key = (("f", k),)
            if w.rank == 0:
                rv.send((a, b, "ping", key), dummy, False)
                rv.recv((b, a, "pong", key))
            elif w.rank == 1:
                value, _ = rv.recv((a, b, "ping", key))
                rv.send((b, a, "pong", key), value, False)
        samples.append((time.perf_counter() - t0) / n)
        endpoint.close_step(step)
    out["round_trip"] = statistics.median(samples[1:])
    raw, buf = [], np.zeros(1, np.float32)
    for _ in range(repeats):
        comm.Barrier()
        t0 = time.perf_counter()
        for _ in range(n):
            if w.rank == 0:
                comm.Send(buf, 1, 1)
                comm.Recv(buf, 1, 1)
            elif w.rank == 1:
                comm.Recv(buf, 0, 1)
                comm.Send(buf, 0, 1)
        raw.append((time.perf_counter() - t0) / n)
    out["raw_round_trip"] = statistics.median(raw)
    array = np.ones(100 * 2**20 // 4, np.float32)
    crossing, bare = [], []
    for r in range(repeats + 1):
        step = 20_000 + r
        rv = endpoint.rendezvous(step)
        comm.Barrier()
        if w.rank == 0:
            t_send = time.perf_counter()
            rv.send((a, b, "big", ()), array, False)
            t_recv = comm.recv(source=1, tag=5)
            crossing.append(t_recv - t_send)
            endpoint.pump()
        elif w.rank == 1:
            value, _ = rv.recv((a, b, "big", ()))
            t_recv = time.perf_counter()
            assert value.nbytes == array.nbytes
            comm.send(t_recv, dest=0, tag=5)
        endpoint.close_step(step)
        comm.Barrier()
        target = np.empty_like(array)
        t0 = time.perf_counter()
        if w.rank == 0:
            comm.Send([array, MPI.BYTE], 1, 6)
            comm.Recv(np.empty(1), 1, 7)
            bare.append(time.perf_counter() - t0)
        elif w.rank == 1:
            comm.Recv([target, MPI.BYTE], 0, 6)
            comm.Send(np.empty(1), 0, 7)
    out["crossing_first"] = crossing[0] if crossing else None
    out["crossing"] = statistics.median(crossing[1:]) if crossing else None
    out["raw_crossing"] = statistics.median(bare[1:]) if bare else None
    copies = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        array.copy()
        copies.append(time.perf_counter() - t0)
    out["copy"] = statistics.median(copies)
    return out


def mpi_loop(repeats, n):
    """Seconds per iteration of the 2-task scalar loop in partition_mode='mpi'."""
    g, fetches = _loop_on_tasks(n)
    sess = df.Session(graph=g, config=df.ConfigProto(partition_mode="mpi"))
    with sess:
        sess.run(fetches)
        samples = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            sess.run(fetches)
            samples.append((time.perf_counter() - t0) / n)
    return statistics.median(samples)


def _loop_on_tasks(n):
    """build_loop(2, n) with /cpu:k renamed to task k."""
    g, fetches = build_loop(2, n)
    for op in g.get_operations():
        if op.device:
            k = df.framework.device_spec.parse_device(op.device).device_index or 0
            op._set_device(f"/job:worker/task:{k}/device:CPU:0")
    return g, fetches


def mlp_step_graph(tasks, lr=0.1):
    """The data-parallel MLP: weights replicated on each task, each task's gradients on
    its own batch, averaged with all_reduce, applied to every replica."""
    data, labels, init = mlp_data(0)
    g = df.Graph()
    with g.as_default():
        grads_by_task, weights_by_task, losses = [], [], []
        for k in range(tasks):
            with task(k):
                x = df.constant(data)
                y = df.constant(labels)
                h, weights = x, []
                for i, w0 in enumerate(init):
                    w = df.Variable(w0, name=f"w{i}_task{k}")
                    b = df.Variable(np.zeros(w0.shape[1], np.float32), name=f"b{i}_task{k}")
                    weights += [w, b]
                    h = df.matmul(h, w) + b
                    if i < len(init) - 1:
                        h = df.sigmoid(h)
                loss = df.reduce_mean(df.nn.softmax_cross_entropy_with_logits(labels=y,
                                                                              logits=h))
                grads_by_task.append(df.gradients(loss, weights))
                weights_by_task.append(weights)
                losses.append(loss)
        updates = []
        for i in range(len(weights_by_task[0])):
            averaged = df.distributed.all_reduce([gs[i] for gs in grads_by_task],
                                                 name=f"all_reduce_{i}")
            for k in range(tasks):
                with task(k):
                    updates.append(weights_by_task[k][i].assign_sub(lr * averaged[k]))
        step = df.group(*updates)
        init_op = df.global_variables_initializer()
    return g, step, init_op, losses


def mlp_step_time(repeats, steps=5):
    tasks = df.distributed.size()
    g, step, init_op, losses = mlp_step_graph(tasks)
    with df.Session(graph=g, config=df.ConfigProto(partition_mode="mpi")) as sess:
        sess.run(init_op)
        sess.run(step)
        samples = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            for _ in range(steps):
                sess.run(step)
            samples.append((time.perf_counter() - t0) / steps)
        final = sess.run(losses)
    assert np.allclose(final, final[0], rtol=1e-5), final   # the replicas stayed equal
    return statistics.median(samples)


def under_mpi(args):
    """The MPI figures of this world (rank 0 prints them as JSON)."""
    size = df.distributed.size()
    out = {"size": size}
    if args.part in ("all", "transport") and size >= 2:
        out.update(transport_figures(args.repeats))
    if args.part in ("all", "transport") and size >= 2:
        out["mpi_loop"] = mpi_loop(args.repeats, args.n)
    if args.part in ("all", "scaling"):
        out["mlp_step"] = mlp_step_time(args.repeats)
    if df.distributed.is_chief():
        text = json.dumps(out)
        if args.json:
            with open(args.json, "w") as f:
                f.write(text)
        print(text)


# -- without mpiexec: the processes mode, then the MPI jobs ------------------------------------
def processes_loop(repeats, n):
    g, fetches = build_loop(2, n)
    with df.Session(graph=g, config=df.ConfigProto(device_count={"CPU": 2},
                                                   partition_mode="processes")) as sess:
        sess.run(fetches)
        samples = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            sess.run(fetches)
            samples.append((time.perf_counter() - t0) / n)
    return statistics.median(samples)


def launch(ranks, part, args):
    from dataflow.cli import mpirun_command, mpirun_env
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "out.json")
        cmd = mpirun_command(ranks, ["-m", "benchmarks.distributed", "--part", part,
                                     "--repeats", str(args.repeats), "--n", str(args.n),
                                     "--json", path])
        # One BLAS thread per task for every K: weak scaling gives each task the same share.
        single = {v: "1" for v in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")}
        subprocess.run(cmd, env=mpirun_env(dict(os.environ, **single), ranks=ranks), check=True, stdout=subprocess.DEVNULL)
        with open(path) as f:
            return json.load(f)


def format_table(transport, proc_loop, scaling) -> str:
    t = transport
    ratio = t["mpi_loop"] / proc_loop
    lines = [
        "| measurement | MPI mode (median) | baseline (median) | target | met |",
        "|---|---|---|---|---|",
        (f"| control message round trip | {t['round_trip'] * 1e6:.1f} µs | bare mpi4py "
         f"Send/Recv {t['raw_round_trip'] * 1e6:.1f} µs | <= {TARGET_ROUND_TRIP_US:.0f} µs "
         f"| {'yes' if t['round_trip'] * 1e6 <= TARGET_ROUND_TRIP_US else 'no'} |"),
        (f"| 100 MB float32 crossing | {t['crossing'] * 1e3:.1f} ms (first "
         f"{t['crossing_first'] * 1e3:.1f} ms) | bare mpi4py Send/Recv "
         f"{t['raw_crossing'] * 1e3:.1f} ms; one np.copy {t['copy'] * 1e3:.1f} ms | <= "
         f"{TARGET_100MB_MS:.0f} ms | {'yes' if t['crossing'] * 1e3 <= TARGET_100MB_MS else 'no'} |"),
        (f"| 2-task scalar loop, per iteration | {t['mpi_loop'] * 1e6:.1f} µs | processes "
         f"mode {proc_loop * 1e6:.1f} µs (ratio {ratio:.2f}) | <= {TARGET_LOOP_RATIO:.0f}x "
         f"| {'yes' if ratio <= TARGET_LOOP_RATIO else 'no'} |"),
    ]
    base = scaling[1]
    for k, sec in scaling.items():
        lines.append(f"| MLP step, K = {k} tasks (weak scaling) | {sec * 1e3:.1f} ms | "
                     f"efficiency t1/tK {base / sec:.2f} | | |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--n", type=int, default=2000, help="loop iterations")
    parser.add_argument("--part", choices=("all", "transport", "scaling"), default="all")
    parser.add_argument("--json", help="under mpiexec: write rank 0's figures here")
    args = parser.parse_args(argv)
    if any(v in os.environ for v in ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK")):
        under_mpi(args)
        return
    proc_loop = processes_loop(args.repeats, args.n)
    transport = launch(2, "transport", args)
    scaling = {k: launch(k, "scaling", args)["mlp_step"] for k in (1, 2, 4)}
    print(format_table(transport, proc_loop, scaling))


if __name__ == "__main__":
    sys.exit(main())
