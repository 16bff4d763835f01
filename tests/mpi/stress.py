"""Stress the MPI fault paths (not run in CI): launch ``tests/mpi/main.py MODE`` again and
again under ``dataflow mpirun``, optionally with busy loops loading the cores, each run
under a time limit. A run that overstays it is a hang: every rank's Python threads
(faulthandler, SIGUSR1) and native stacks (gdb, when installed) are written to the log
before the job is killed.

::

    python -m tests.mpi.stress --mode faults --runs 200 --load 2 --log /tmp/stress.log

Each run gets its own seed (``--seed`` + run index): in ``faults`` mode rank 0 picks the
victims, the signals and their moments from it, so a failing run can be replayed alone
(``--seed S --runs 1``); ``--fault kill|stop|stop_and_kill|assert|deadline`` fixes the
kind. ``orphan`` kills ``mpiexec`` itself mid-step: every rank must be gone within
:data:`ORPHAN_LIMIT_S`. Every run must leave no process of its session (tests/mpi/procs.py); what
is left is killed and counted as a failure.
"""
from __future__ import annotations

import argparse
import multiprocessing
import os
import pickle
import signal
import subprocess
import sys
import tempfile
import time

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.path.insert(0, ROOT)

from dataflow.cli import mpirun_command, mpirun_env  # noqa: E402
from tests.mpi.procs import kill_session, left_behind  # noqa: E402

MAIN = os.path.join(ROOT, "tests", "mpi", "main.py")
ORPHAN_LIMIT_S = 5.0


def _busy(stop):
    while not stop.is_set():
        pass


def _children(pid):
    """Every descendant pid of ``pid`` (from /proc)."""
    parents = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    parents[int(entry)] = int(f.read().rsplit(b")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                pass
    found, frontier = [], [pid]
    while frontier:
        p = frontier.pop()
        kids = [c for c, pp in parents.items() if pp == p]
        found += kids
        frontier += kids
    return found


def _ranks(launcher_pid):
    """The rank processes (Python interpreters) under the launcher."""
    out = []
    for pid in _children(launcher_pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if MAIN.encode() in f.read():
                    out.append(pid)
        except OSError:
            pass
    return out


def _proc_line(pid):
    """``pid``'s state, kernel wait channel and command line (from /proc)."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as f:
            state = f.read().rsplit(b")", 1)[1].split()[0].decode()
        with open(f"/proc/{pid}/wchan") as f:
            wchan = f.read()
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            cmd = f.read().replace(b"\0", b" ").decode(errors="replace")[:160]
    except OSError:
        return f"pid {pid}: gone"
    return f"pid {pid}: state {state} wchan {wchan} cmd {cmd}"


def _native_stacks(pid, log):
    try:
        gdb = subprocess.run(["gdb", "-p", str(pid), "-batch", "-ex", "thread apply all bt 14"],
                             capture_output=True, text=True, timeout=60)
        log.write("\n".join(line[:200] for line in gdb.stdout.splitlines()
                            if line.startswith(("#", "Thread"))) + "\n")
    except (OSError, subprocess.TimeoutExpired) as e:
        log.write(f"(gdb: {e})\n")


def _dump_stacks(launcher_pid, log):
    """Every process of the job (launcher included): state, native stacks (gdb, when
    installed), then the ranks' Python stacks (SIGUSR1: faulthandler, registered by main.py)."""
    pids = [launcher_pid] + _children(launcher_pid)
    for pid in pids:
        log.write(f"--- {_proc_line(pid)}\n")
    for pid in pids:
        log.write(f"--- native stacks of {_proc_line(pid)}\n")
        _native_stacks(pid, log)
    for pid in _ranks(launcher_pid):
        try:
            os.kill(pid, signal.SIGUSR1)
        except ProcessLookupError:
            pass
    time.sleep(2.0)


def _wait_for(path, proc, limit_s):
    limit = time.monotonic() + limit_s
    while not os.path.exists(path):
        if proc.poll() is not None or time.monotonic() > limit:
            return None
        time.sleep(0.05)
    time.sleep(0.05)
    with open(path, "rb") as f:
        return pickle.load(f)


def run_once(mode, ranks, seed, limit_s, log, extra_env, fault=None):
    with tempfile.TemporaryDirectory() as tmp:
        out = os.path.join(tmp, "results.pkl")
        cmd = mpirun_command(ranks, [MAIN, mode, out, str(seed)] + ([fault] if fault else []))
        env = mpirun_env(ranks=ranks)
        env.update(extra_env)
        start = time.monotonic()
        proc = subprocess.Popen(cmd, env=env, cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.STDOUT, text=True,
                                start_new_session=True)
        if mode == "orphan":
            return _orphan_once(proc, out, seed, limit_s, log, start)
        try:
            text, _ = proc.communicate(timeout=limit_s)
            hung = False
        except subprocess.TimeoutExpired:
            hung = True
            log.write(f"=== seed {seed}: HUNG past {limit_s} s; results written: "
                      f"{os.path.exists(out)}; stacks:\n")
            _dump_stacks(proc.pid, log)
            kill_session(proc.pid)      # the ranks: each in a process group of its own
            text, _ = proc.communicate()
        seconds = time.monotonic() - start
        results = None
        if os.path.exists(out):
            with open(out, "rb") as f:
                results = pickle.load(f)
        left = left_behind(proc.pid)
        kill_session(proc.pid)
        if hung:
            log.write(f"=== seed {seed}: job output:\n{text[-6000:]}\n")
        ok = not hung and proc.returncode == 0 and results is not None and \
            not results.get("problems") and not left
        if not ok:
            log.write(f"=== seed {seed}: rc {proc.returncode} hung {hung} left {left} "
                      f"problems {(results or {}).get('problems')}\n{text[-4000:]}\n")
        log.flush()
        return ok, hung, seconds, results


def _orphan_once(proc, out, seed, limit_s, log, start):
    """Kill ``mpiexec`` 0.3 s into the endless step of main.py's ``orphan`` mode; every
    process of the job must be gone within ORPHAN_LIMIT_S."""
    results = _wait_for(out, proc, limit_s)
    if results is None:
        kill_session(proc.pid)
        text, _ = proc.communicate()
        log.write(f"=== seed {seed}: orphan: no pids (rc {proc.returncode})\n{text[-4000:]}\n")
        return False, False, time.monotonic() - start, None
    time.sleep(0.3)
    proc.kill()
    killed_at = time.monotonic()
    proc.communicate()
    left = left_behind(proc.pid, wait_s=ORPHAN_LIMIT_S)
    gone_s = time.monotonic() - killed_at
    if left:
        log.write(f"=== seed {seed}: orphan: left {[_proc_line(p) for p in left]}\n")
        _dump_stacks(left[0], log)
        kill_session(proc.pid)
    results["summary"] = f"mpiexec killed; ranks gone after {gone_s:.1f} s"
    log.flush()
    return not left, bool(left), time.monotonic() - start, results


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--mode", default="faults")
    parser.add_argument("--ranks", type=int, default=3)
    parser.add_argument("--runs", type=int, default=50)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--load", type=int, default=0, help="busy loops beside the job")
    parser.add_argument("--limit", type=float, default=90.0, help="seconds before a run is a hang")
    parser.add_argument("--log", default="mpi_stress.log")
    parser.add_argument("--env", action="append", default=[], help="NAME=VALUE for the ranks")
    parser.add_argument("--fault", default=None, help="faults mode: this kind in every run")
    args = parser.parse_args(argv)
    extra_env = dict(e.split("=", 1) for e in args.env)
    stop = multiprocessing.Event()
    loads = [multiprocessing.Process(target=_busy, args=(stop,), daemon=True)
             for _ in range(args.load)]
    for p in loads:
        p.start()
    failures, hangs, times = [], 0, []
    try:
        with open(args.log, "a") as log:
            for i in range(args.runs):
                seed = args.seed + i
                ok, hung, seconds, results = run_once(args.mode, args.ranks, seed,
                                                      args.limit, log, extra_env, args.fault)
                times.append(seconds)
                hangs += hung
                if not ok:
                    failures.append(seed)
                summary = (results or {}).get("summary", "")
                print(f"run {i + 1}/{args.runs} seed {seed}: {'ok' if ok else 'FAIL'} "
                      f"{seconds:.1f} s {summary}", flush=True)
    finally:
        stop.set()
        for p in loads:
            p.join()
    times.sort()
    print(f"{args.runs} runs, {len(failures)} failed (seeds {failures}), {hangs} hung; "
          f"median {times[len(times) // 2]:.1f} s, max {times[-1]:.1f} s")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
