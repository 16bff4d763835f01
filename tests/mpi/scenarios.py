"""Partition scenarios over MPI tasks, each a function ``scenario(session_factory)`` that
builds its graph in a fresh Graph and returns what it fetched: run once under
``dataflow mpirun`` in ``partition_mode="mpi"`` (tests/mpi/main.py) and once in a plain
Session of the test process (every task device is then the one CPU), the results must agree.
"""
from __future__ import annotations

import numpy as np

import dataflow as df


def task(k):
    return df.device(f"/job:worker/task:{k}/device:CPU:0")


def loop_split(iterations):
    """A loop whose predicate and counter run on task 0 and body on task 1, with the
    gradient of the result through the partitioned loop."""
    def scenario(session):
        with df.Graph().as_default():
            x = df.placeholder(df.float64, [], name="x")
            with task(0):
                n = df.constant(iterations)

                def body(i, a):
                    with task(1):
                        b = a * x + df.sin(a)
                    with df.device("/job:worker/replica:0/task:0/cpu:0"):
                        return i + 1, b
                i, a = df.while_loop(lambda i, a: i < n, body,
                                     (df.constant(0), df.constant(0.5, df.float64)))
                g = df.gradients(a, x)[0]
            with session() as sess:
                return sess.run([i, a, g if g is not None else a], {x: 1.1})
    return scenario


def cond_dead_branch(session):
    """A cond whose branches run on tasks 1 and 2: the untaken branch's tokens are dead,
    across ranks too; a fetch inside it is reported dead."""
    with df.Graph().as_default():
        p = df.placeholder(df.bool, [], name="p")
        x = df.placeholder(df.float32, [3], name="x")
        inside = []

        def yes():
            with task(1):
                t = df.exp(x) * 2.0
                inside.append(t)
                return t

        def no():
            with task(2):
                return df.reduce_sum(x) - x

        with task(0):
            r = df.cond(p, yes, no)
            out = r + 1.0
        xs = np.array([0.5, -1.0, 2.0], np.float32)
        with session() as sess:
            a = sess.run(out, {p: True, x: xs})
            b = sess.run(out, {p: False, x: xs})
            tokens = sess.run_tokens([out, inside[0]], {p: False, x: xs})
    return [a, b, tokens[0][0], tokens[1][1]]


def nested_loops(session):
    """An outer loop on task 0 whose body runs an inner loop on task 1 that reads a
    value computed on task 2 in every outer iteration."""
    with df.Graph().as_default():
        x = df.placeholder(df.float32, [2], name="x")

        def outer(i, acc):
            with task(2):
                scale = df.cast(i, df.float32) + x

            def inner(j, s):
                with task(1):
                    return j + 1, s * 0.5 + scale
            with task(1):
                _, s = df.while_loop(lambda j, s: j < i + 1, inner, (0, acc))
            with task(0):
                return i + 1, s + 1.0

        with task(0):
            i, acc = df.while_loop(lambda i, a: i < 4, outer,
                                   (0, df.zeros([2], df.float32)))
        with session() as sess:
            return sess.run([i, acc], {x: np.array([1.0, -2.0], np.float32)})


def variables(session):
    """Variables live on their task: one updated on task 1, one inside a loop on task 2;
    the next step sees the updates."""
    with df.Graph().as_default():
        with task(1):
            v = df.Variable(np.arange(3, dtype=np.float32), name="v")
            bump = v.assign_add(np.ones(3, np.float32))
            total = df.reduce_sum(v)
        with task(2):
            w = df.Variable(0.0, name="w")
        with task(0):
            def body(i, a):
                with task(2):
                    up = w.assign_add(df.cast(i, df.float32))
                with task(0):
                    with df.control_dependencies([up]):
                        return i + 1, a + total
            i, a = df.while_loop(lambda i, a: i < 5, body, (0, 0.0))
        with session() as sess:
            sess.run(df.global_variables_initializer())
            first = sess.run(a)
            sess.run(bump)
            sess.run(bump)
            return [first, sess.run(a), sess.run(v), sess.run(w)]


def all_reduce(session):
    """df.distributed.all_reduce: the mean of one tensor per task, on every task."""
    with df.Graph().as_default():
        parts = []
        for k in range(3):
            with task(k):
                parts.append(df.constant(np.arange(4, dtype=np.float32) * (k + 1)))
        means = df.distributed.all_reduce(parts)
        sums = df.distributed.all_reduce(parts, op="sum")
        with session() as sess:
            return sess.run(means + sums)


def large_array(session):
    """An array of 8 MB crossing ranks both ways (raw buffers), and one of every dtype."""
    with df.Graph().as_default():
        x = df.placeholder(df.float64, [None], name="x")
        with task(1):
            y = x * 2.0
            ints = df.cast(x[:5], df.int64) + 3
            flags = x[:4] > 1.0
        with task(0):
            z = y + 1.0
        data = np.linspace(0.0, 1.0, 1 << 20)
        with session() as sess:
            return sess.run([z, ints, flags], {x: data})


def subnormals(session):
    """Float32 products that are subnormal, made on tasks 1 and 2: every rank runs its
    kernels with them flushed to zero (ConfigProto(flush_denormals=True), the default),
    as a single process does."""
    with df.Graph().as_default():
        x = df.placeholder(df.float32, [4], name="x")
        with task(1):
            a = x * x
        with task(2):
            b = a * np.float32(1.0) + x * np.float32(1e-20)
        with session() as sess:
            return sess.run([a, b], {x: np.array([1e-20, -2e-20, 1e-18, 3.0], np.float32)})


SCENARIOS = {
    "loop_0": loop_split(0),
    "loop_1": loop_split(1),
    "loop_7": loop_split(7),
    "cond_dead_branch": cond_dead_branch,
    "nested_loops": nested_loops,
    "variables": variables,
    "all_reduce": all_reduce,
    "large_array": large_array,
    "subnormals": subnormals,
}
