"""The processes partition mode: message latency, large-array transfer, loop overhead.

    python -m benchmarks.process_table [--repeats 7] [--n 2000]

Three measurements, each with a baseline taken in the same run, medians reported:

* **control round trip**: a control dummy (a float32 scalar) goes from device A's
  process to B's and back through the rendezvous (pipes); baseline: a bare
  ``multiprocessing`` pipe echo between two processes;
* **100 MB crossing**: a float32 array of 100 MB sent by A, received by B (through a
  shared-memory segment), timed from before the send to after the receive; baselines:
  the same array pickled through a pipe, and one ``np.copy`` of it (a memory copy);
* **loop per iteration**: the 2- and 4-device scalar loops of
  ``benchmarks.partition_table`` (predicate on ``/cpu:0``, one loop variable on each
  other device), processes vs threads vs every device cleared (one executor).
"""
from __future__ import annotations

import argparse
import multiprocessing
import statistics
import time

import numpy as np

import dataflow as df
from dataflow.runtime.multiprocess.runner import ProcessRunner

from .partition_table import build_loop

TARGET_ROUND_TRIP_US = 100.0
TARGET_100MB_MS = 50.0
A, B = "/device:CPU:0", "/device:CPU:1"


class _PingPong:
    """A worker program: A sends ``n`` dummies to B and waits for each echo."""

    def run_partition(self, device, n, rendezvous, deadline, pool):
        dummy = np.float32(1.0)
        if device == A:
            t0 = time.perf_counter()
            for k in range(n):
                rendezvous.send((A, B, "^ping", (("f", k),)), dummy, False)
                rendezvous.recv((B, A, "^pong", (("f", k),)))
            return (time.perf_counter() - t0) / n
        for k in range(n):
            value, _ = rendezvous.recv((A, B, "^ping", (("f", k),)))
            rendezvous.send((B, A, "^pong", (("f", k),)), value, False)
        return None


class _Crossing:
    """A worker program: A sends one large array, B reports when it has it."""

    def __init__(self, nbytes):
        self.array = np.ones(nbytes // 4, np.float32)

    def run_partition(self, device, _, rendezvous, deadline, pool):
        if device == A:
            t_send = time.perf_counter()   # CLOCK_MONOTONIC: comparable across processes
            rendezvous.send((A, B, "big", ()), self.array, False)
            return t_send
        value, _ = rendezvous.recv((A, B, "big", ()))
        t_recv = time.perf_counter()
        assert value.nbytes == self.array.nbytes
        return t_recv


def _echo(conn):
    while True:
        msg = conn.recv()
        if msg is None:
            return
        conn.send(msg)


def pipe_round_trip(n) -> float:
    """Seconds per round trip of a small message through a bare pipe, two processes."""
    ctx = multiprocessing.get_context("fork")
    here, there = ctx.Pipe()
    proc = ctx.Process(target=_echo, args=(there,), daemon=True)
    proc.start()
    msg = np.float32(1.0).item()
    here.send(msg)
    here.recv()
    t0 = time.perf_counter()
    for _ in range(n):
        here.send(msg)
        here.recv()
    dt = (time.perf_counter() - t0) / n
    here.send(None)
    proc.join()
    return dt


def pickled_crossing(array) -> float:
    """Seconds to pickle ``array`` through a pipe to another process (and back as a
    byte count)."""
    ctx = multiprocessing.get_context("fork")
    here, there = ctx.Pipe()
    proc = ctx.Process(target=_count_bytes, args=(there,), daemon=True)
    proc.start()
    t0 = time.perf_counter()
    here.send(array)
    assert here.recv() == array.nbytes
    dt = time.perf_counter() - t0
    proc.join()
    return dt


def _count_bytes(conn):
    conn.send(conn.recv().nbytes)


def measure_messages(repeats, n=2000):
    runner = ProcessRunner([A, B], resources={})
    try:
        program = _PingPong()
        runner.run(program, {A: 100, B: 100})      # warm-up (fork)
        ours = [runner.run(program, {A: n, B: n})[A] for _ in range(repeats)]
    finally:
        runner.close()
    base = [pipe_round_trip(n) for _ in range(repeats)]
    return statistics.median(ours), statistics.median(base)


def measure_crossing(repeats, nbytes=100 * 2**20):
    program = _Crossing(nbytes)
    runner = ProcessRunner([A, B], resources={})
    try:
        samples = []
        for _ in range(repeats + 1):   # the first one creates the segment
            out = runner.run(program, {A: None, B: None})
            samples.append(out[B] - out[A])
        first, warm = samples[0], samples[1:]
    finally:
        runner.close()
    pickled = [pickled_crossing(program.array) for _ in range(max(3, repeats // 2))]
    copies = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        program.array.copy()
        copies.append(time.perf_counter() - t0)
    return first, statistics.median(warm), statistics.median(pickled), statistics.median(copies)


def measure_loop(repeats, n, devices=2):
    """Seconds per iteration: {processes, threads, single: median}."""
    g, fetches = build_loop(devices, n)
    gs, fetches_s = build_loop(devices, n, placed=False)
    procs = df.Session(graph=g, config=df.ConfigProto(device_count={"CPU": devices},
                                                      partition_mode="processes"))
    threads = df.Session(graph=g, config=df.ConfigProto(device_count={"CPU": devices}))
    single = df.Session(graph=gs)
    with procs, threads, single:
        expected = single.run(fetches_s)
        assert procs.run(fetches) == threads.run(fetches) == expected
        samples = {"processes": [], "threads": [], "single": []}
        for _ in range(repeats):   # interleaved, so drift hits all three alike
            for name, sess, f in (("processes", procs, fetches), ("threads", threads, fetches),
                                  ("single", single, fetches_s)):
                t0 = time.perf_counter()
                sess.run(f)
                samples[name].append((time.perf_counter() - t0) / n)
    return {k: statistics.median(v) for k, v in samples.items()}


def format_table(messages, crossing, loops) -> str:
    rt, pipe = messages
    first, warm, pickled, copy = crossing
    lines = [
        "| measurement | processes mode (median) | baseline (median) | target | met |",
        "|---|---|---|---|---|",
        (f"| control message round trip | {rt * 1e6:.0f} µs | bare pipe echo "
         f"{pipe * 1e6:.0f} µs | < {TARGET_ROUND_TRIP_US:.0f} µs | "
         f"{'yes' if rt * 1e6 < TARGET_ROUND_TRIP_US else 'no'} |"),
        (f"| 100 MB float32 crossing (segment reused) | {warm * 1e3:.1f} ms | pickled through "
         f"a pipe {pickled * 1e3:.0f} ms; one np.copy {copy * 1e3:.1f} ms | "
         f"< {TARGET_100MB_MS:.0f} ms | {'yes' if warm * 1e3 < TARGET_100MB_MS else 'no'} |"),
        f"| 100 MB float32 crossing (first, new segment) | {first * 1e3:.1f} ms | | | |",
    ]
    for devices, loop in loops.items():
        lines.append(
            f"| {devices}-device scalar loop, per iteration | {loop['processes'] * 1e6:.1f} µs "
            f"| threads {loop['threads'] * 1e6:.1f} µs; one executor "
            f"{loop['single'] * 1e6:.1f} µs | | |")
    return "\n".join(lines)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--n", type=int, default=2000, help="loop iterations")
    args = parser.parse_args(argv)
    messages = measure_messages(args.repeats)
    crossing = measure_crossing(args.repeats)
    loops = {d: measure_loop(args.repeats, args.n, d) for d in (2, 4)}
    print(format_table(messages, crossing, loops))


if __name__ == "__main__":
    main()
