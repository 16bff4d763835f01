"""Run under ``dataflow mpirun -n K tests/mpi/main.py MODE OUT``: the MPI side of
tests/test_mpi_mode.py. Ranks other than 0 serve from their first Session on; rank 0
runs MODE's checks and pickles what it saw to OUT (errors as their type name, message
and the seconds the failing run took)."""
from __future__ import annotations

import faulthandler
import os
import pickle
import random
import signal
import sys
import threading
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


import numpy as np  # noqa: E402

import dataflow as df  # noqa: E402
from tests.mpi.scenarios import SCENARIOS, task  # noqa: E402

CONFIG = df.ConfigProto(partition_mode="mpi")
_START = time.monotonic()


def phase(name):
    """With DATAFLOW_MPI_PHASES=1 (tests/mpi/stress.py), say on stderr when rank 0 reaches
    ``name``: a hung job's output then shows the last phase it reached."""
    if os.environ.get("DATAFLOW_MPI_PHASES"):
        print(f"[rank 0 +{time.monotonic() - _START:.2f} s] {name}", file=sys.stderr, flush=True)


def mpi_session():
    return df.Session(config=CONFIG)


def attempt(fn):
    """fn()'s value, or ("error", type name, message, seconds)."""
    start = time.monotonic()
    try:
        return fn()
    except Exception as e:  # noqa: BLE001 - recorded for the test to judge
        return ("error", type(e).__name__, str(e), time.monotonic() - start)


def endless_loop(on_task):
    """A loop that never ends, its body on ``on_task`` and its predicate on task 0."""
    with task(0):
        def body(i):
            with task(on_task):
                return i + 1
        return df.while_loop(lambda i: i >= 0, body, [df.constant(0)])


def faults():
    out = {}
    with df.Graph().as_default():
        x = df.placeholder(df.float32, [], name="x")
        with task(1):
            check = df.Assert(x < 100.0, [x], name="x_is_small")
            with df.control_dependencies([check]):
                y = x * 2.0
        with task(2):
            z = df.while_loop(lambda i, a: i < 50, lambda i, a: (i + 1, a + 1.0), (0, x))[1]
        with task(0):
            r = y + z
        with mpi_session() as sess:
            out["assert"] = attempt(lambda: sess.run(r, {x: 500.0}))
            out["after_assert"] = sess.run(r, {x: 1.0})
    with df.Graph().as_default():
        forever = endless_loop(1)
        with task(2):
            quick = df.constant(3.0) * 2.0
        with mpi_session() as sess:
            opts = df.RunOptions(timeout_in_ms=500)
            out["deadline"] = attempt(lambda: sess.run(forever, options=opts))
            out["after_deadline"] = sess.run(quick)
            # A second step while one runs is refused.
            slow = df.RunOptions(timeout_in_ms=1500)
            first = {}
            th = threading.Thread(target=lambda: first.setdefault(
                "r", attempt(lambda: sess.run(forever, options=slow))))
            th.start()
            time.sleep(0.4)
            out["concurrent"] = attempt(lambda: sess.run(quick))
            th.join()
            out["concurrent_first"] = first["r"]
    return out


def traced():
    """A traced step of a loop split over tasks 0 and 1: step_stats has both tasks, the
    body's node runs once per iteration on task 1, and the Chrome trace draws the
    Send -> Recv flows between the ranks."""
    import json
    with df.Graph().as_default():
        with task(0):
            def body(i, a):
                with task(1):
                    b = df.multiply(a, 2.0, name="double")
                return i + 1, b
            _, a = df.while_loop(lambda i, a: i < 7, body, (0, 1.0))
        with mpi_session() as sess:
            md = df.RunMetadata()
            value = sess.run(a, options=df.RunOptions(trace_level=df.RunOptions.FULL_TRACE),
                             run_metadata=md)
    doubles = [n for d in md.step_stats.dev_stats for n in d.node_stats
               if n.node_name == "while/double"]
    trace = json.loads(df.timeline.Timeline(md.step_stats).generate_chrome_trace_format())
    return {"value": value,
            "devices": sorted({d.device for d in md.step_stats.dev_stats}),
            "double_iterations": sorted(n.iteration_id for n in doubles if not n.is_dead),
            "double_dead": sorted(n.iteration_id for n in doubles if n.is_dead),
            "flows": sum(1 for e in trace["traceEvents"] if e.get("ph") in ("s", "f"))}


def kill():
    """Rank 2 hangs (SIGSTOP) during a step with a deadline: the step raises at its
    deadline; continued, rank 2 serves the next step. Rank 1 is killed during a step
    without a deadline: the step raises AbortedError; task 0 alone still runs."""
    from dataflow.runtime.mpi.world import world
    pids = [pid for _, pid in world().places]
    out = {"pids": pids}
    with df.Graph().as_default():
        on2 = endless_loop(2)
        on1 = endless_loop(1)
        with task(0):
            local = df.constant(2.0) + 1.0
        with task(2):
            on2_quick = df.constant(5.0) * 2.0
        with mpi_session() as sess:
            os.kill(pids[2], signal.SIGSTOP)
            phase("rank 2 stopped")
            out["hang"] = attempt(lambda: sess.run(on2, options=df.RunOptions(
                timeout_in_ms=800)))
            os.kill(pids[2], signal.SIGCONT)
            phase(f"hang step: {out['hang'][:2]}; rank 2 continued")
            out["after_hang"] = attempt(lambda: sess.run(on2_quick))   # it recovered
            phase(f"after_hang: {out['after_hang']}")
            timer = threading.Timer(0.5, os.kill, (pids[1], signal.SIGKILL))
            timer.start()
            out["killed"] = attempt(lambda: sess.run(on1))
            timer.join()
            phase(f"killed step: {out['killed'][:2]}")
            out["local"] = sess.run(local)
    # A rank died: no rank may finalize MPI at exit (its fence would wait for rank 1).
    out["finalize_at_exit"] = world().finalize_at_exit
    return out


def array_loop(on_task, width=512):
    """A loop carrying a float32[width] array (2 KB: past Open MPI's inline size, so each
    crossing is a fragment the receiver hands back) between task 0 and ``on_task``; the
    predicate reads the array, so every iteration waits for ``on_task``."""
    with task(0):
        def body(i, a):
            with task(on_task):
                b = a + 1.0
            return i + 1, b
        return df.while_loop(lambda i, a: a[0] >= 0.0, body, (0, df.zeros([width])))[0]


FAULTS = ["kill", "stop", "stop_and_kill", "assert", "deadline"]


def random_faults(seed, fault=None):
    """One fault at a random moment of a step's traffic, chosen by ``seed``
    (tests/mpi/stress.py runs it again and again): a rank killed, stopped, or one
    stopped and the other killed, an Assert failing on one task, or the deadline of an
    endless loop, during a scalar or an array loop (``fault`` forces the kind). The step
    must raise the right error in time, naming the task, a step on task 0 must still
    run, and the job must end. Anything else is listed in ``problems``."""
    from dataflow.runtime.mpi.world import world
    rng = random.Random(seed)
    pids = [pid for _, pid in world().places]
    fault = rng.choice(FAULTS[:3]) if fault is None else fault
    victim = rng.choice([1, 2])
    other = 3 - victim
    traffic = rng.choice(["scalar", "array"])
    at = rng.uniform(0.0, 0.6)
    out = {"pids": pids, "problems": [],
           "summary": f"{fault} task {victim} at {at:.2f} s of a {traffic} loop"}
    problems = out["problems"]
    with df.Graph().as_default():
        make = endless_loop if traffic == "scalar" else array_loop
        step = make(victim)
        both = [step, make(other)]
        with task(0):
            local = df.constant(2.0) + 1.0
        with mpi_session() as sess:
            sess.run(local)
            if fault == "kill":
                timer = threading.Timer(at, os.kill, (pids[victim], signal.SIGKILL))
                timer.start()
                kind, cls, message, seconds = attempt(lambda: sess.run(step))
                timer.join()
                if cls != "AbortedError" or f"Task {victim}" not in message or seconds > 5 + at:
                    problems.append(("killed", cls, message, seconds))
            elif fault == "stop":
                timer = threading.Timer(at, os.kill, (pids[victim], signal.SIGSTOP))
                timer.start()
                kind, cls, message, seconds = attempt(lambda: sess.run(
                    step, options=df.RunOptions(timeout_in_ms=1000)))
                timer.join()
                os.kill(pids[victim], signal.SIGCONT)
                if cls != "DeadlineExceededError" or not 1.0 <= seconds < 6.0:
                    problems.append(("stopped", cls, message, seconds))
            elif fault == "assert":
                limit = df.placeholder(df.int32, [], name="limit")
                with task(victim):
                    check = df.Assert(limit > 100, [limit], name="limit_is_large")
                with task(0), df.control_dependencies([check]):
                    checked = df.identity(limit)
                kind, cls, message, seconds = attempt(lambda: sess.run(
                    [both, checked], {limit: 7}))
                if cls != "InvalidArgumentError" or f"task {victim}" not in message \
                        or "limit_is_large" not in message or seconds > 5.0:
                    problems.append(("assert", cls, message, seconds))
            elif fault == "deadline":
                kind, cls, message, seconds = attempt(lambda: sess.run(
                    both, options=df.RunOptions(timeout_in_ms=700)))
                if cls != "DeadlineExceededError" or not 0.7 <= seconds < 5.0:
                    problems.append(("deadline", cls, message, seconds))
            else:   # the victim stopped, then the other killed, while both loops run
                def stop_then_kill():
                    os.kill(pids[victim], signal.SIGSTOP)
                    time.sleep(0.05)
                    os.kill(pids[other], signal.SIGKILL)
                timer = threading.Timer(at, stop_then_kill)
                timer.start()
                kind, cls, message, seconds = attempt(lambda: sess.run(
                    both, options=df.RunOptions(timeout_in_ms=3000)))
                timer.join()
                os.kill(pids[victim], signal.SIGCONT)
                if cls not in ("AbortedError", "DeadlineExceededError") or seconds > 8.0:
                    problems.append(("stopped and killed", cls, message, seconds))
            value = attempt(lambda: sess.run(local))
            if not isinstance(value, (float, np.floating)) or float(value) != 3.0:
                problems.append(("task 0 afterwards", value))
    return out


class _WedgingComm:
    """A communicator whose ``Iprobe``, once armed, never returns (without the
    interpreter lock): what Open MPI does when a peer killed mid-send left the
    shared-memory queue half-linked (benchmarks/RESULTS.md, issue 16: shown with gdb)."""

    def __init__(self, comm):
        self._comm = comm
        self.armed = threading.Event()
        self.entered = threading.Event()

    def Iprobe(self, *args):
        if self.armed.is_set():
            self.entered.set()
            threading.Event().wait()       # for good
        return self._comm.Iprobe(*args)

    def __getattr__(self, name):
        return getattr(self._comm, name)


def wedge():
    """Rank 1 is killed while rank 0's step thread sits in an MPI call that never returns:
    ``run`` raises AbortedError naming task 1, a step on task 0 alone still runs, a step
    with task 2 is refused (the world is broken), and the job ends."""
    from dataflow.runtime.mpi import mode
    from dataflow.runtime.mpi.world import world
    pids = [pid for _, pid in world().places]
    out = {"pids": pids}
    with df.Graph().as_default():
        on1 = endless_loop(1)
        with task(0):
            local = df.constant(2.0) + 1.0
        with task(2):
            on2 = df.constant(5.0) * 2.0
        with mpi_session() as sess:
            out["before"] = sess.run(on2)
            client = mode._Client.get()
            wedging = client.endpoint.comm = _WedgingComm(client.endpoint.comm)

            def wedge_then_kill():
                wedging.armed.set()
                wedging.entered.wait(5.0)
                os.kill(pids[1], signal.SIGKILL)
            timer = threading.Timer(0.3, wedge_then_kill)
            timer.start()
            out["killed"] = attempt(lambda: sess.run(on1))
            timer.join()
            out["wedged"] = wedging.entered.is_set()
            out["local"] = attempt(lambda: sess.run(local))
            out["task_2"] = attempt(lambda: sess.run(on2))
    out["broken"] = world().broken
    out["finalize_at_exit"] = world().finalize_at_exit
    return out


def orphan(path):
    """Rank 0 writes the pids, then runs an endless step on tasks 1 and 2 for the test
    to kill ``mpiexec`` under it: every rank must notice and exit."""
    from dataflow.runtime.mpi.world import world
    with df.Graph().as_default():
        both = [endless_loop(1), endless_loop(2)]
        with mpi_session() as sess:
            with open(path + ".tmp", "wb") as f:
                pickle.dump({"pids": [pid for _, pid in world().places]}, f)
            os.rename(path + ".tmp", path)
            sess.run(both)
    raise AssertionError("the endless step ended")


def random_programs(count, seed):
    """Random spec programs, every op on a random task of 3: run_tokens must equal the
    reference interpreter's tokens."""
    from hypothesis import given, settings
    from hypothesis import strategies as st

    from tests.graph_gen import programs, quiet_numpy
    from tests.test_differential import NOT_COMPUTED, SETTINGS, assert_same_tokens, spec_tokens
    checked = []

    @settings(max_examples=count, **dict(SETTINGS, derandomize=True, database=None))
    @given(program=programs(max_statements=6), place_seed=st.integers(0, 2**32 - 1))
    def check(program, place_seed):
        graph, fetches, feeds = program.build()
        expected = spec_tokens(graph, fetches, feeds, seed)
        rng = random.Random(place_seed)
        for op in graph.get_operations():
            op._set_device(f"/job:worker/task:{rng.randrange(3)}/device:CPU:0")
        config = df.ConfigProto(partition_mode="mpi", fold_constants=program.fold_constants)
        with quiet_numpy(), df.Session(graph=graph, config=config) as sess:
            try:
                actual = sess.run_tokens(fetches, feeds,
                                         options=df.RunOptions(timeout_in_ms=30_000))
            except df.errors.InternalError as e:
                assert "without computing fetch" in str(e), e
                actual = NOT_COMPUTED
        assert_same_tokens(expected, actual, fetches)
        checked.append(program.source)

    check()
    return {"checked": len(checked)}


def main():
    # tests/mpi/stress.py asks a hung job's ranks for their Python stacks this way.
    faulthandler.register(signal.SIGUSR1, all_threads=True)
    if not df.distributed.is_chief():
        mpi_session()          # serves rank 0's sessions, then ends this process
        raise AssertionError("a serving rank returned from Session()")
    mode, path = sys.argv[1], sys.argv[2]
    if mode == "crash":
        raise RuntimeError("rank 0 fails before running a step")
    if mode == "scenarios":
        results = {name: fn(mpi_session) for name, fn in SCENARIOS.items()}
        results.update(faults())
        results["traced"] = traced()
        from dataflow.runtime.mpi.world import world
        results["finalize_at_exit"] = world().finalize_at_exit   # no rank lost: True
    elif mode == "kill":
        results = kill()
    elif mode == "single":
        with df.Graph().as_default():
            with task(0):
                a = df.constant(3.0) + 4.0
            with task(1):
                b = df.multiply(a, 2.0, name="on_task_1")
            with mpi_session() as sess:
                results = {"task0": sess.run(a), "task1": attempt(lambda: sess.run(b))}
    elif mode == "random":
        results = random_programs(int(sys.argv[3]), int(sys.argv[4]))
    elif mode == "faults":
        results = random_faults(int(sys.argv[3]), sys.argv[4] if len(sys.argv) > 4 else None)
    elif mode == "wedge":
        results = wedge()
    elif mode == "orphan":
        orphan(path)
    else:
        raise SystemExit(f"unknown mode {mode}")
    results["size"] = df.distributed.size()
    with open(path, "wb") as f:
        pickle.dump(results, f)
    phase("results written; exiting")


if __name__ == "__main__":
    main()
