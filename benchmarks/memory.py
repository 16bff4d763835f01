"""Static memory plans against measured peaks, and steps run from their plans.

    python -m benchmarks.memory [--steps 1000] [--repeats 7] [--only plans,prediction,speed,batch]

For each workload: the plan (``df.memory.plan``) of one step — its peak, the lower
bound under its order, the no-reuse figure and their ratios — and the step run
without a plan, its peak measured with tracemalloc (:func:`measure_step_peak`).
The measured run allocates a fresh NumPy array per op (the NumPy reference kernels,
no fusion, one thread, so every allocation is traced and the order is the
executor's), so it is compared with the part of the plan a run allocates: the arena,
the stacks and the fetched values (variables, constants and feeds exist before it).

Workloads: the digits MLP Adam step (1797 x 64, 64-64-64-10) and the tanh RNN
forward + gradient (T steps, batch 32, hidden 256) of ``benchmarks/workloads.py``,
a nested loop with a cond (forward + gradient), a 10-layer MLP inference, and two
random programs of the differential tests' generator (``tests/graph_gen.py``, one flat
and one starting with a nest of loops and conds) with vectors of 65536 elements
(:func:`random_array_program`), and the same generator's smallest programs with a loop
and a cond, whose values are scalars and 2-vectors (there a step's memory is the
executor's Python objects, a few KiB, which the plan bounds by ``runtime_bytes``
rather than predicts).

The other tables run steps from their plans (``ConfigProto(plan_memory=True)``):

* prediction (:func:`prediction_report`): the planned run's measured bytes (its arena,
  which it holds, plus the step's tracemalloc peak over what existed before it) against
  the plan's figure for the same things (arena, stacks, fetched values), with the
  unplanned run's measured peak beside it;
* speed (:func:`speed_report`): seconds per step planned and unplanned (same kernels,
  unfused; the default fused run too), interleaved, medians; page faults per step
  after the first (``resource.getrusage`` minflt);
* max batch (:func:`max_batch_report`): ``df.memory.max_batch_size`` under a budget,
  the batch run planned with its measured bytes, and the next batch's plan.
"""
from __future__ import annotations

import argparse
import gc
import resource
import statistics
import time
import tracemalloc

import numpy as np

import dataflow as df

from . import workloads

__all__ = ["WORKLOADS", "measure_step_peak", "planned_run_bytes", "random_array_program",
           "report"]


def measurement_config():
    """A Session whose every value is a NumPy array allocated when its op runs (loops
    interpreted: a compiled frame's values are allocated by Numba, outside tracemalloc)."""
    return df.ConfigProto(use_compiled_kernels=False, fuse_elementwise=False,
                          inter_op_parallelism_threads=1, compile_loops=False)


class TokenFetches(list):
    """Fetches that may be dead (a random program's): run with ``Session.run_tokens``."""


def _run(sess, fetches, feed_dict):
    if isinstance(fetches, TokenFetches):
        return sess.run_tokens(fetches, feed_dict)
    return sess.run(fetches, feed_dict)


def measure_step_peak(sess, fetches, feed_dict=None) -> int:
    """Bytes the step allocates at its peak, over what existed before it (tracemalloc);
    one warm-up run first, so caches and compiled plans are not counted. The warm-up
    runs traced: a step that replaces values made before it (an optimizer's new
    variable values) is then credited with freeing the old ones, which tracemalloc
    only sees for blocks it traced."""
    _run(sess, fetches, feed_dict)
    gc.collect()
    tracemalloc.start()
    try:
        _run(sess, fetches, feed_dict)
        gc.collect()
        base, _ = tracemalloc.get_traced_memory()
        tracemalloc.reset_peak()
        result = _run(sess, fetches, feed_dict)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    del result
    return peak - base


def planned_run_bytes(plan) -> int:
    """What a run allocates by the plan: the arena, the kernels' scratch outside it,
    the stacks, the fetched values and the runtime's own objects (``runtime_bytes``)."""
    return plan.arena_bytes + plan.scratch_bytes + plan.stack_bytes_for() \
        + plan.zones["fetches"] + plan.runtime_bytes


def _mlp_step():
    data, labels, init = workloads.mlp_data(0)
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [None, 64])
        y = df.placeholder(df.float32, [None, 10])
        h = x
        for k, w0 in enumerate(init):
            h = df.matmul(h, df.Variable(w0)) + df.Variable(np.zeros(w0.shape[1], np.float32))
            if k < len(init) - 1:
                h = df.sigmoid(h)
        loss = df.reduce_mean(df.nn.softmax_cross_entropy_with_logits(labels=y, logits=h))
        step = df.train.AdamOptimizer(0.001).minimize(loss)
        init_op = df.global_variables_initializer()
    return g, step, {x: data, y: labels}, init_op


def _rnn_grad(steps):
    w, x, h0 = workloads.rnn_data(32, 256, 0)
    g = df.Graph()
    with g.as_default():
        wt = df.placeholder(df.float32, [256, 256])
        xt = df.placeholder(df.float32, [32, 256])
        _, h = df.while_loop(lambda i, h: i < steps,
                             lambda i, h: (i + 1, df.tanh(df.matmul(h, wt) + xt)),
                             (0, df.constant(h0)))
        (grad_w,) = df.gradients(df.reduce_sum(h), [wt])
    return g, grad_w, {wt: w, xt: x}, None


def _nested_loop_cond(outer=8, inner=6, batch=64, width=256):
    """A while loop in a while loop with a cond in the inner body, and its gradient."""
    rng = np.random.default_rng(0)
    g = df.Graph()
    with g.as_default():
        w = df.placeholder(df.float32, [width, width])
        x = df.placeholder(df.float32, [batch, width])

        def inner_body(j, h):
            h = df.tanh(df.matmul(h, w))
            return j + 1, df.cond(j % 2 < 1, lambda: h * 0.5, lambda: df.sigmoid(h) + x)

        def outer_body(i, h):
            _, h = df.while_loop(lambda j, h: j < inner, inner_body, (0, h))
            return i + 1, h + x
        _, h = df.while_loop(lambda i, h: i < outer, outer_body, (0, x))
        (grad_w,) = df.gradients(df.reduce_sum(h), [w])
    feed = {w: (rng.standard_normal((width, width)) / 16).astype(np.float32),
            x: rng.standard_normal((batch, width)).astype(np.float32)}
    return g, grad_w, feed, None


def _random_scalar_program(nested):
    """A fixed program of the differential generator with a while loop and a cond
    (Hypothesis' smallest such program, found with a fixed seed): its values are
    scalars and 2-vectors, so a run's memory is the executor's Python objects."""
    from hypothesis import HealthCheck, find, settings
    from tests.graph_gen import programs, quiet_numpy
    program = find(programs(max_statements=10, nested=nested),
                   lambda p: "while_loop" in p.source and "cond(" in p.source
                   and p.source.count("\n") >= 12,
                   settings=settings(database=None, derandomize=True, max_examples=2000,
                                     suppress_health_check=list(HealthCheck)))
    with quiet_numpy():
        g, fetches, feeds = program.build()
    return g, TokenFetches(fetches), feeds, None


# The random array programs' vectors: 65536 elements (512 KiB of float64, 256 KiB of int32).
RANDOM_PROGRAM_SIZE = 1 << 16
# A random program counts as an array program when its plan's arrays (arena + fetched
# values) are at least this many times the runtime's own bytes.
ARRAY_DOMINANCE = 16


def random_array_program(nested, size=RANDOM_PROGRAM_SIZE, max_examples=500):
    """The first program the differential generator draws (derandomized, 10 statements
    at most, vectors of ``size`` elements; ``nested``: starting with a nest of loops and
    conds) that has a while loop and a cond and whose plan is mostly arrays (arena +
    fetched values >= ARRAY_DOMINANCE x its runtime bytes). Chosen on the program and its
    plan only, before anything runs. Returns ``(program, graph, fetches, feeds)``."""
    from hypothesis import HealthCheck, Phase, given, settings
    from tests.graph_gen import programs, quiet_numpy
    found = []

    @settings(database=None, derandomize=True, max_examples=max_examples, deadline=None,
              phases=[Phase.generate], suppress_health_check=list(HealthCheck))
    @given(programs(max_statements=10, nested=nested, size=size))
    def search(program):
        if found or "while_loop" not in program.source or "cond(" not in program.source:
            return
        with quiet_numpy():
            g, fetches, feeds = program.build()
            p = df.memory.plan(TokenFetches(fetches), feed_dict=feeds, graph=g)
        if p.arena_bytes + p.zones["fetches"] >= ARRAY_DOMINANCE * p.runtime_bytes:
            found.append((program, g, TokenFetches(fetches), feeds))

    search()
    if not found:
        raise ValueError(f"no array program with a loop and a cond in {max_examples} draws")
    return found[0]


def _random_program(nested):
    _program, g, fetches, feeds = random_array_program(nested)
    return g, fetches, feeds, None


def _deep_mlp(layers=10, batch=512, width=256):
    rng = np.random.default_rng(0)
    g = df.Graph()
    with g.as_default():
        x = df.placeholder(df.float32, [None, width])
        h = x
        for _ in range(layers):
            w = df.constant((rng.standard_normal((width, width)) / 16).astype(np.float32))
            h = df.nn.relu(df.matmul(h, w) + 0.1)
        out = df.reduce_sum(h, axis=1)
    return g, out, {x: rng.random((batch, width), np.float32)}, None


WORKLOADS = {
    "digits MLP Adam step (1797 x 64)": lambda steps: _mlp_step(),
    "tanh RNN fwd+grad (T steps, 32 x 256)": _rnn_grad,
    "nested loop with a cond, fwd+grad (8 x 6, 64 x 256)": lambda steps: _nested_loop_cond(),
    "10-layer MLP inference (512 x 256)": lambda steps: _deep_mlp(),
    "random program (generator, flat, 65536-element vectors)": lambda steps: _random_program(False),
    "random program (generator, nested, 65536-element vectors)": lambda steps: _random_program(True),
    "random program (generator, flat, scalars)": lambda steps: _random_scalar_program(False),
    "random program (generator, nested, scalars)": lambda steps: _random_scalar_program(True),
}


def report(steps=1000) -> list:
    """One row per workload: the plan's figures and the measured peak (bytes)."""
    rows = []
    for name, make in WORKLOADS.items():
        g, fetch, feed, init = make(steps)
        plan = df.memory.plan(fetch, feed_dict=feed, graph=g)
        sess = df.Session(graph=g, config=measurement_config())
        if init is not None:
            sess.run(init)
        measured = measure_step_peak(sess, fetch, feed)
        sess.close()
        rows.append({
            "workload": name.replace("T steps", f"T={steps}"),
            "peak": plan.peak_bytes, "lower_bound": plan.lower_bound_bytes,
            "naive": plan.naive_bytes, "arena": plan.arena_bytes,
            "arena_lower_bound": plan.lower_bound_arena,
            "stacks": plan.stack_bytes_for(), "planned_run": planned_run_bytes(plan),
            "measured_run": measured,
        })
    return rows


def _arena_of(sess, before=()):
    """The arena step a plan_memory session built for its step (not those in ``before``)."""
    (step,) = [s for key, (_plan, s) in sess._arena.steps.items() if key not in before]
    return step


def measure_planned(g, fetch, feed, init, config) -> dict:
    """The planned run's bytes: the arena it holds, the step's tracemalloc peak over
    what existed before it (after a warm-up step that built the plan and the arena)."""
    sess = df.Session(graph=g, config=config)
    if init is not None:
        sess.run(init)
    before = set(sess._arena.steps)
    transient = measure_step_peak(sess, fetch, feed)
    step = _arena_of(sess, before)
    out = {"arena_held": step.arena.nbytes, "transient": transient,
           "copied": list(step.copied)}
    sess.close()
    return out


def _prediction_config(plan_memory):
    """The default (compiled) kernels, unfused, one thread, loops interpreted (a planned
    step runs them so; a compiled frame allocates outside tracemalloc's view); planned
    or not."""
    return df.ConfigProto(fuse_elementwise=False, inter_op_parallelism_threads=1,
                          plan_memory=plan_memory, compile_loops=False)


def prediction_report(steps=1000) -> list:
    """Per workload: the plan's arena + stacks + fetched values against the planned
    run's measured bytes, and the unplanned run's measured peak (the same kernels: the
    default compiled ones, unfused, one thread)."""
    rows = []
    for name, make in WORKLOADS.items():
        g, fetch, feed, init = make(steps)
        plan = df.memory.plan(fetch, feed_dict=feed, graph=g)
        planned = measure_planned(g, fetch, feed, init, _prediction_config(True))
        sess = df.Session(graph=g, config=_prediction_config(False))
        if init is not None:
            sess.run(init)
        unplanned = measure_step_peak(sess, fetch, feed)
        sess.close()
        measured = planned["arena_held"] + planned["transient"]
        rows.append({"workload": name.replace("T steps", f"T={steps}"),
                     "plan_run": planned_run_bytes(plan), "measured_planned": measured,
                     "measured_unplanned": unplanned, "peak": plan.peak_bytes,
                     "lower_bound": plan.lower_bound_bytes, "copied": planned["copied"]})
    return rows


def _timed(fn, repeats):
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return times


def _faults_per_step(run, steps=5) -> float:
    run()
    before = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
    for _ in range(steps):
        run()
    return (resource.getrusage(resource.RUSAGE_SELF).ru_minflt - before) / steps


def speed_report(steps=1000, repeats=7) -> list:
    """Seconds per step of the MLP Adam step and the RNN fwd+grad: planned, unplanned
    with the same kernels (unfused), and unplanned fused, loops interpreted in all,
    run interleaved (medians and minima), one BLAS thread each; page faults per step
    after the first."""
    rows = []
    for name, make in (("digits MLP Adam step", lambda: _mlp_step()),
                       (f"tanh RNN fwd+grad (T={steps})", lambda: _rnn_grad(steps))):
        g, fetch, feed, init = make()
        # One BLAS thread each: on the shared two-core machine multi-threaded BLAS calls
        # wait on each other's threads (a 1797 x 64 x 64 matmul took 1-35 ms).
        # Loops interpreted in all three: a planned step runs its loops interpreted
        # (the loop compiler's frames allocate outside the arena), so the unplanned
        # ones do too, like for like.
        configs = {"planned": df.ConfigProto(plan_memory=True, intra_op_parallelism_threads=1),
                   "unplanned, unfused": df.ConfigProto(fuse_elementwise=False,
                                                        intra_op_parallelism_threads=1,
                                                        compile_loops=False),
                   "unplanned, default (fused)": df.ConfigProto(
                       intra_op_parallelism_threads=1, compile_loops=False)}
        sessions, runs = {}, {}
        for key, config in configs.items():
            sess = sessions[key] = df.Session(graph=g, config=config)
            if init is not None:
                sess.run(init)
            runs[key] = (lambda s=sess: s.run(fetch, feed))
            for _ in range(3):   # the first steps compile kernels and settle allocations
                runs[key]()
        times = {key: [] for key in configs}
        for _ in range(repeats):
            for key in configs:
                times[key] += _timed(runs[key], 1)
        faults = {key: _faults_per_step(runs[key]) for key in ("planned", "unplanned, unfused")}
        for sess in sessions.values():
            sess.close()
        med = {key: statistics.median(v) for key, v in times.items()}
        best = {f"min {key}": min(v) for key, v in times.items()}
        rows.append({"workload": name, **{f"t {k}": v for k, v in med.items()}, **best,
                     "faults planned": faults["planned"],
                     "faults unplanned": faults["unplanned, unfused"]})
    return rows


def _mlp_batch_graph():
    g, step, feed, init_op = _mlp_step()
    x, y = list(feed)
    return g, step, (x, y), init_op


def max_batch_report(steps=100) -> list:
    """For the MLP step and the RNN fwd+grad under a budget: the batch
    ``max_batch_size`` returns, that batch's plan peak and its measured bytes when run
    planned (arena + the step's peak over what existed before + variables and feeds
    held), and the next batch's plan peak."""
    rows = []
    g, step, (x, y), init = _mlp_batch_graph()
    cases = [("digits MLP Adam step", g, step, {x: [None, 64], y: [None, 10]}, init,
              3 << 20, None,
              lambda b, rng: {x: rng.random((b, 64), np.float32),
                              y: np.eye(10, dtype=np.float32)[rng.integers(0, 10, b)]})]
    w, xr, _h0 = workloads.rnn_data(32, 256, 0)
    gr = df.Graph()
    with gr.as_default():
        wt = df.placeholder(df.float32, [256, 256])
        xt = df.placeholder(df.float32, [None, 256])
        h0 = df.zeros_like(xt)
        _, h = df.while_loop(lambda i, h: i < steps,
                             lambda i, h: (i + 1, df.tanh(df.matmul(h, wt) + xt)), (0, h0))
        (grad_w,) = df.gradients(df.reduce_sum(h), [wt])
    cases.append((f"tanh RNN fwd+grad (T={steps})", gr, grad_w, {wt: [256, 256],
                  xt: [None, 256]}, None, 16 << 20, None,
                  lambda b, rng: {wt: w, xt: rng.standard_normal((b, 256)).astype(np.float32)}))
    rng = np.random.default_rng(0)
    for name, graph, fetch, shapes, init, budget, trips, feed_of in cases:
        b = df.memory.max_batch_size(fetch, shapes, budget, graph=graph, trip_counts=trips)
        feed = feed_of(b, rng)
        plan_b = df.memory.plan(fetch, feed_dict=feed, graph=graph)
        next_shapes = {t: [b + 1] + list(s[1:]) if s[0] is None else s
                       for t, s in shapes.items()}
        plan_next = df.memory.plan(fetch, feed_shapes=next_shapes, graph=graph)
        config = df.ConfigProto(plan_memory=True, memory_budget_bytes=budget)
        planned = measure_planned(graph, fetch, feed, init, config)
        held = sum(np.asarray(v).nbytes for v in feed.values()) + plan_b.zones["variables"]
        measured = planned["arena_held"] + planned["transient"] + held
        rows.append({"workload": name, "budget": budget, "b": b, "plan_b": plan_b.peak_bytes,
                     "measured_b": measured, "plan_b1": plan_next.peak_bytes})
    return rows


def _mib(n):
    return f"{n / 2**20:.2f}"


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=1000, help="RNN trip count")
    parser.add_argument("--repeats", type=int, default=7, help="timed steps per variant")
    parser.add_argument("--only", default="plans,prediction,speed,batch",
                        help="tables to print (comma-separated)")
    args = parser.parse_args(argv)
    only = set(args.only.split(","))
    if "plans" in only:
        _plans_table(args.steps)
    if "prediction" in only:
        _prediction_table(args.steps)
    if "speed" in only:
        _speed_table(args.steps, args.repeats)
    if "batch" in only:
        _batch_table()


def _prediction_table(steps):
    print("\n| workload | plan: arena + stacks + fetches KiB | measured planned KiB | "
          "measured / plan | measured unplanned KiB | plan peak / lower bound | "
          "copying kernels |")
    print("|---|---|---|---|---|---|---|")
    for r in prediction_report(steps):
        print(f"| {r['workload']} | {r['plan_run'] / 1024:.1f} | "
              f"{r['measured_planned'] / 1024:.1f} | "
              f"{r['measured_planned'] / max(r['plan_run'], 1):.3f} | "
              f"{r['measured_unplanned'] / 1024:.1f} | "
              f"{r['peak'] / r['lower_bound']:.3f} | {len(r['copied'])} |")


def _speed_table(steps, repeats):
    print("\n| workload | planned ms | unplanned unfused ms | planned / unplanned | "
          "min planned / min unplanned | unplanned fused ms | faults/step planned | "
          "faults/step unplanned |")
    print("|---|---|---|---|---|---|---|---|")
    for r in speed_report(steps, repeats):
        p, u = r["t planned"], r["t unplanned, unfused"]
        ratio_min = r["min planned"] / r["min unplanned, unfused"]
        print(f"| {r['workload']} | {p * 1e3:.2f} | {u * 1e3:.2f} | {p / u:.3f} | "
              f"{ratio_min:.3f} | "
              f"{r['t unplanned, default (fused)'] * 1e3:.2f} | {r['faults planned']:.1f} | "
              f"{r['faults unplanned']:.1f} |")


def _batch_table():
    print("\n| workload | budget MiB | max batch b | plan(b) MiB | measured(b) MiB | "
          "plan(b+1) MiB |")
    print("|---|---|---|---|---|---|")
    for r in max_batch_report():
        print(f"| {r['workload']} | {_mib(r['budget'])} | {r['b']} | {_mib(r['plan_b'])} | "
              f"{_mib(r['measured_b'])} | {_mib(r['plan_b1'])} |")


def _plans_table(steps):
    print("| workload | plan peak MiB | lower bound MiB | peak / lower bound | no reuse MiB "
          "| no reuse / peak | arena MiB | arena / its lower bound | stacks MiB | planned run MiB | measured run "
          "(unplanned) MiB |")
    print("|---|---|---|---|---|---|---|---|---|---|---|")
    for r in report(steps):
        print(f"| {r['workload']} | {_mib(r['peak'])} | {_mib(r['lower_bound'])} | "
              f"{r['peak'] / r['lower_bound']:.3f} | {_mib(r['naive'])} | "
              f"{r['naive'] / r['peak']:.2f} | {_mib(r['arena'])} | "
              f"{r['arena'] / max(r['arena_lower_bound'], 1):.4f} | {_mib(r['stacks'])} | "
              f"{_mib(r['planned_run'])} | {_mib(r['measured_run'])} |")


if __name__ == "__main__":
    main()
