"""Per-iteration cost of a while loop partitioned over 2 and 4 devices (threads mode).

    python -m benchmarks.partition_table [--repeats 7] [--n 20000]

The workload is the scalar loop with one more loop variable per extra device::

    while i < n:  i = i + 1;  a_k = a_k + i   (k = 1..D-1, a_k's loop on device k)

The counter and the predicate run on ``/cpu:0``; each ``a_k`` (its Enter, Merge,
Switch, NextIteration, Exit and its add) on ``/cpu:k``. Per iteration, every other
device receives the predicate (for its control loop and its Switch) and ``i``: the
construction's ``2 * (D - 1)`` rendezvous messages, counted here from the rendezvous.
The baseline is the same graph with every device cleared (one executor), timed
interleaved in the same process; the table reports medians of wall time, and of CPU
time (``time.process_time``, all threads): on a loaded machine the CPU-time ratio is
the steadier figure, since a run with two threads waits longer for a core.
"""
from __future__ import annotations

import argparse
import statistics
import time

import dataflow as df
from dataflow.runtime.partitioned import register_partition_mode, run_on_threads
from dataflow.runtime.rendezvous import LocalRendezvous

TARGET_2_DEVICES = 2.5   # partitioned / single-device per-iteration time, 2 devices


class CountingRendezvous(LocalRendezvous):
    """A LocalRendezvous that keeps the message count of the last step."""

    last = None

    def __init__(self):
        super().__init__()
        CountingRendezvous.last = self


register_partition_mode("counting", CountingRendezvous, run_on_threads)


def build_loop(devices: int, n: int, placed: bool = True):
    """The workload graph and its fetches (see the module docstring)."""
    g = df.Graph()
    with g.as_default():
        def dev(k):
            return df.device(f"/cpu:{k}" if placed else None)

        with dev(0):
            i0 = df.constant(0)
        inits = [i0]
        for k in range(1, devices):
            with dev(k):
                inits.append(df.constant(0))

        def cond(i, *acc):
            with dev(0):
                return i < n

        def body(i, *acc):
            with dev(0):
                i2 = i + 1
            out = [i2]
            for k, a in enumerate(acc, start=1):
                with dev(k):
                    out.append(a + i)
            return tuple(out)

        fetches = df.while_loop(cond, body, tuple(inits))
    return g, list(fetches)


def _timed(fn, n):
    w0, c0 = time.perf_counter(), time.process_time()
    fn()
    return (time.perf_counter() - w0) / n, (time.process_time() - c0) / n


def measure(devices: int, n: int, repeats: int):
    """``(partitioned s/iter, single s/iter, messages per iteration, partitioned CPU
    s/iter, single CPU s/iter)``, medians."""
    g, fetches = build_loop(devices, n)
    gs, fetches_s = build_loop(devices, n, placed=False)
    config = df.ConfigProto(device_count={"CPU": devices}, partition_mode="counting")
    with df.Session(graph=g, config=config) as sess, df.Session(graph=gs) as single:
        expected = single.run(fetches_s)
        assert sess.run(fetches) == expected            # warm-up and check
        messages = CountingRendezvous.last.messages
        part_s, single_s = [], []
        for _ in range(repeats):   # interleaved, so drift hits both alike
            part_s.append(_timed(lambda: sess.run(fetches), n))
            single_s.append(_timed(lambda: single.run(fetches_s), n))
    med = [statistics.median(x[k] for x in s) for s in (part_s, single_s) for k in (0, 1)]
    # n + 1 iterations run (the last one only decides to stop)
    return med[0], med[2], messages / (n + 1), med[1], med[3]


def format_table(rows) -> str:
    lines = [("| devices | partitioned µs/iter | single-device µs/iter | ratio | CPU ratio"
              " | messages/iter | target (wall ratio) |"),
             "|---|---|---|---|---|---|---|"]
    for devices, part, single, msgs, part_cpu, single_cpu in rows:
        ratio = part / single
        target = f"≤ {TARGET_2_DEVICES}× ({'yes' if ratio <= TARGET_2_DEVICES else 'NO'})" \
            if devices == 2 else "-"
        lines.append(f"| {devices} | {part * 1e6:.2f} | {single * 1e6:.2f} | {ratio:.2f}× | "
                     f"{part_cpu / single_cpu:.2f}× | {msgs:.2f} | {target} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--n", type=int, default=20_000)
    args = ap.parse_args()
    rows = [(d, *measure(d, args.n, args.repeats)) for d in (2, 4)]
    print(format_table(rows))


if __name__ == "__main__":
    main()
