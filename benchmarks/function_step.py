"""One training step eager against ``df.function`` (Terra's co-execution).

    python -m benchmarks.function_step [--steps N] [--rounds N]

The digits-size MLP (64 -> 64 -> 10, batch 64, ReLU, softmax cross-entropy) trained with
a GradientTape and Adam, the same step object run three ways in one process: eagerly,
under ``df.function`` (co-execution: the Python skeleton and the generated graph), and
the generated graph alone (the executor replaying one step's recorded feeds, no Python
side: what the graph costs by itself). Rounds alternate the ways so that a load change
on the shared machine hits all of them; each figure is the median over rounds of the
median step time in a round. The losses of the two step ways are compared too.
"""
from __future__ import annotations

import argparse
import os
import statistics
import time

import numpy as np

import dataflow as df
from dataflow.runtime.executor import Executor
from dataflow.runtime.rendezvous import LocalRendezvous


class MLP:
    def __init__(self, seed):
        r = np.random.RandomState(seed)
        self.w1 = df.Variable((r.randn(64, 64) * 0.1).astype(np.float32))
        self.b1 = df.Variable(np.zeros(64, np.float32))
        self.w2 = df.Variable((r.randn(64, 10) * 0.1).astype(np.float32))
        self.b2 = df.Variable(np.zeros(10, np.float32))
        self.opt = df.train.AdamOptimizer(0.01)

    def step(self, x, y):
        variables = [self.w1, self.b1, self.w2, self.b2]
        with df.GradientTape() as tape:
            h = df.nn.relu(df.matmul(x, self.w1) + self.b1)
            logits = df.matmul(h, self.w2) + self.b2
            loss = df.reduce_mean(df.nn.sparse_softmax_cross_entropy_with_logits(
                labels=y, logits=logits))
        self.opt.apply_gradients(zip(tape.gradient(loss, variables), variables))
        return loss


def _recorded_feeds(f, x, y):
    """The values one co-executed step sends to the graph (for the graph-alone runs)."""
    sent = []
    original = LocalRendezvous.send

    def recording(self, key, value, is_dead):
        if "PYTHON" in key[0]:
            sent.append((key, value, is_dead))
        return original(self, key, value, is_dead)

    LocalRendezvous.send = recording
    try:
        f(x, y)
    finally:
        LocalRendezvous.send = original
    return sent


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=50, help="steps per round")
    parser.add_argument("--rounds", type=int, default=7)
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    with df.eager_mode():
        x = df.constant(rng.standard_normal((64, 64)).astype(np.float32))
        y = df.constant(rng.integers(0, 10, 64).astype(np.int32))
        steps = {mode: df.function(MLP(1).step, mode=mode) for mode in ("eager", "graph")}
        losses = {mode: [float(f(x, y)) for _ in range(5)] for mode, f in steps.items()}
        plan = steps["graph"]._step.plan
        sent = _recorded_feeds(steps["graph"], x, y)

        def graph_alone():
            rv = LocalRendezvous()
            for key, value, dead in sent:
                rv.send(key, value, dead)
            Executor(plan, None, None, rv).run()

        ways = {"eager": lambda: steps["eager"](x, y), "df.function": lambda: steps["graph"](x, y),
                "graph alone": graph_alone}
        medians = {name: [] for name in ways}
        for _ in range(args.rounds):
            for name, fn in ways.items():
                times = []
                for _ in range(args.steps):
                    t0 = time.perf_counter()
                    fn()
                    times.append(time.perf_counter() - t0)
                medians[name].append(statistics.median(times))
    load = os.getloadavg()[0]
    eager = statistics.median(medians["eager"])
    print(f"load average {load:.2f}; {args.rounds} rounds of {args.steps} steps; "
          f"df.function stats {steps['graph'].stats}")
    print(f"losses equal (5 steps): {np.allclose(losses['eager'], losses['graph'], rtol=1e-5)}")
    print("| way | ms per step (median) | speedup over eager |")
    print("|---|---|---|")
    for name, ms in medians.items():
        m = statistics.median(ms)
        print(f"| {name} | {m * 1e3:.3f} | {eager / m:.2f}x |")


if __name__ == "__main__":
    main()
