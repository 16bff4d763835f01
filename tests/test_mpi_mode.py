"""``ConfigProto(partition_mode="mpi")`` under real ``mpiexec`` runs (``dataflow mpirun``,
3 ranks oversubscribed on this host): tests/mpi/main.py runs the partition scenarios of
tests/mpi/scenarios.py on tasks 0-2, the faults, and random spec programs; the results
must equal a single-process Session's (and the reference interpreter's)."""
from __future__ import annotations

import os
import pickle
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest

import dataflow as df
from dataflow.cli import mpirun_command, mpirun_env, remove_stale_session_dirs
from tests.mpi.procs import kill_session, left_behind
from tests.mpi.scenarios import SCENARIOS

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MAIN = os.path.join(ROOT, "tests", "mpi", "main.py")
LAUNCH_TIMEOUT_S = 180


def run_job(cmd, timeout=LAUNCH_TIMEOUT_S, ranks=3):
    """Run an ``mpiexec`` command line in a session of its own; the completed process.
    Fails when the job overstays ``timeout`` or leaves any process of its session behind
    (a rank, the launcher): those are killed first, so no test leaks one."""
    remove_stale_session_dirs()   # a killed launcher's files would stop a reused pid
    proc = subprocess.Popen(cmd, env=mpirun_env(ranks=ranks), cwd=ROOT, text=True,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        stdout, stderr = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        killed = kill_session(proc.pid)
        proc.communicate()
        pytest.fail(f"the MPI job overstayed {timeout} s; killed {killed}")
    left = left_behind(proc.pid)
    kill_session(proc.pid)
    assert not left, f"processes of the job left behind: {left}\n{stdout}{stderr}"
    return subprocess.CompletedProcess(cmd, proc.returncode, stdout, stderr)


def launch(tmp_path, ranks, *args):
    """Run tests/mpi/main.py on ``ranks`` ranks; returns rank 0's pickled results."""
    out = tmp_path / "results.pkl"
    cmd = mpirun_command(ranks, [MAIN, args[0], str(out)] + [str(a) for a in args[1:]])
    proc = run_job(cmd, ranks=ranks)
    assert proc.returncode == 0 and out.exists(), proc.stdout + proc.stderr
    with open(out, "rb") as f:
        return pickle.load(f)


@pytest.fixture(scope="module")
def scenario_results(tmp_path_factory):
    return launch(tmp_path_factory.mktemp("mpi"), 3, "scenarios")


def assert_same(actual, expected, name):
    assert type(actual) is type(expected) or isinstance(actual, (np.ndarray, np.generic)), \
        (name, actual, expected)
    if isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), name
        for a, e in zip(actual, expected):
            assert_same(a, e, name)
        return
    a, e = np.asarray(actual), np.asarray(expected)
    assert a.dtype == e.dtype, (name, a.dtype, e.dtype)
    np.testing.assert_array_equal(a, e, err_msg=name, strict=True)


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_scenario_matches_a_single_process(scenario_results, name):
    expected = SCENARIOS[name](df.Session)
    assert_same(scenario_results[name], expected, name)
    assert scenario_results["size"] == 3


def test_scenarios_are_not_trivial(scenario_results):
    """The loops really ran their iterations, across ranks."""
    assert [int(scenario_results[f"loop_{n}"][0]) for n in (0, 1, 7)] == [0, 1, 7]
    cond = scenario_results["cond_dead_branch"]
    assert cond[3] is True                      # the fetch on the untaken branch is dead
    first, second, v, w = scenario_results["variables"]
    assert float(second) == float(first) + 5 * 6.0   # two bumps of 3 elements, 5 iterations
    np.testing.assert_array_equal(v, [2.0, 3.0, 4.0])
    assert float(w) == 20.0                        # 0+1+2+3+4, twice


def test_a_traced_step_has_every_task_in_its_step_stats(scenario_results):
    traced = scenario_results["traced"]
    assert float(traced["value"]) == 128.0
    assert traced["devices"] == ["/job:worker/replica:0/task:0/device:CPU:0",
                                 "/job:worker/replica:0/task:1/device:CPU:0"]
    assert traced["double_iterations"] == list(range(7))
    assert traced["double_dead"] == [7]     # the last iteration's dead tokens
    assert traced["flows"] >= 2 * 7      # a Send -> Recv arrow per iteration at least


def test_an_assert_on_one_task_cancels_the_step_everywhere(scenario_results):
    kind, cls, message, seconds = scenario_results["assert"]
    assert (kind, cls) == ("error", "InvalidArgumentError")
    assert "x_is_small" in message and "op type Assert" in message
    assert "task 1" in message and "500" in message
    assert seconds < 10.0        # the loop on task 2 did not hold the step up
    assert float(scenario_results["after_assert"]) == 2.0 + 51.0   # the session goes on


def test_a_step_past_its_deadline_raises_on_time(scenario_results):
    kind, cls, message, seconds = scenario_results["deadline"]
    assert (kind, cls) == ("error", "DeadlineExceededError")
    assert 0.5 <= seconds < 1.5
    assert float(scenario_results["after_deadline"]) == 6.0


def test_concurrent_steps_of_one_session_are_refused(scenario_results):
    kind, cls, message, seconds = scenario_results["concurrent"]
    assert (kind, cls) == ("error", "FailedPreconditionError")
    assert "one at a time" in message
    assert scenario_results["concurrent_first"][1] == "DeadlineExceededError"


def test_a_hung_or_killed_rank_fails_the_step_and_leaves_no_process(tmp_path):
    start = time.monotonic()
    results = launch(tmp_path, 3, "kill")
    assert time.monotonic() - start < 60
    kind, cls, _, seconds = results["hang"]
    # Raised at the 0.8 s deadline, not before; the upper bound leaves room for a loaded
    # machine (without the deadline the step would never end: rank 2 is stopped).
    assert cls == "DeadlineExceededError" and 0.8 <= seconds < 5.0
    assert float(results["after_hang"]) == 10.0      # continued, rank 2 serves again
    kind, cls, message, seconds = results["killed"]
    assert cls == "AbortedError" and "Task 1" in message and seconds < 5.0
    assert float(results["local"]) == 3.0
    # MPI_Finalize's job-wide fence can wait for a dead rank forever (the hang this test
    # once showed): after a death the ranks exit without it.
    assert results["finalize_at_exit"] is False
    for pid in results["pids"]:
        assert not os.path.exists(f"/proc/{pid}"), f"rank process {pid} is still there"


def test_a_job_that_lost_no_rank_finalizes_mpi(scenario_results):
    assert scenario_results["finalize_at_exit"] is True


@pytest.mark.parametrize("run", range(2))
def test_a_fault_at_a_random_moment_of_traffic_never_hangs(tmp_path, run):
    """A rank killed, stopped, or one stopped and the other killed, at a random moment of
    a scalar or an array loop (tests/mpi/main.py random_faults; tests/mpi/stress.py runs
    it hundreds of times): the step raises the right error in time, task 0 still runs,
    the job ends and leaves no process."""
    seed = int(os.environ.get("DATAFLOW_TEST_SEED", "0")) * 2 + run
    start = time.monotonic()
    results = launch(tmp_path, 3, "faults", seed)
    assert time.monotonic() - start < 60
    assert results["problems"] == [], (results["summary"], results["problems"])
    for pid in results["pids"]:
        assert not os.path.exists(f"/proc/{pid}"), f"rank process {pid} is still there"


def test_a_rank_killed_while_task_0_is_stuck_in_mpi_fails_the_step(tmp_path):
    """Rank 1 is killed while rank 0's step thread sits in an MPI call that never returns
    (what a peer killed mid-send does to Open MPI's shared-memory queue): ``run`` still
    raises AbortedError naming task 1, steps on task 0 alone run on, steps that need MPI
    are refused, and the job ends leaving no process."""
    from dataflow.runtime.mpi.mode import WEDGE_GRACE_S
    results = launch(tmp_path, 3, "wedge")
    assert float(results["before"]) == 10.0
    assert results["wedged"] is True      # the step thread really was stuck in the call
    kind, cls, message, seconds = results["killed"]
    assert cls == "AbortedError" and "Task 1" in message and "stuck inside Open MPI" in message
    assert WEDGE_GRACE_S <= seconds < WEDGE_GRACE_S + 4.0
    assert float(results["local"]) == 3.0
    kind, cls, message, _ = results["task_2"]
    assert cls == "AbortedError" and "Task 1" in message and "Restart the job" in message
    assert results["broken"] is True and results["finalize_at_exit"] is False


@pytest.mark.parametrize("victim", ["mpiexec", "rank 0"])
def test_killing_mpiexec_or_rank_0_mid_step_ends_every_rank(tmp_path, victim):
    """mpiexec (or rank 0) dies (SIGKILL) while the ranks run an endless step without a
    deadline: every rank notices that its launcher (or rank 0) is gone and exits within a
    few seconds."""
    out = tmp_path / "pids.pkl"
    cmd = mpirun_command(3, [MAIN, "orphan", str(out)])
    remove_stale_session_dirs()
    proc = subprocess.Popen(cmd, env=mpirun_env(ranks=3), cwd=ROOT, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, start_new_session=True)
    try:
        limit = time.monotonic() + LAUNCH_TIMEOUT_S
        while not out.exists() and proc.poll() is None and time.monotonic() < limit:
            time.sleep(0.05)
        assert out.exists(), proc.poll()
        with open(out, "rb") as f:
            pids = pickle.load(f)["pids"]
        time.sleep(0.3)                       # into the step
        assert all(os.path.exists(f"/proc/{p}") for p in pids)
        if victim == "mpiexec":
            proc.kill()
        else:
            os.kill(pids[0], signal.SIGKILL)
        killed_at = time.monotonic()
        left = left_behind(proc.pid, wait_s=6.0)     # mpiexec included
        seconds = time.monotonic() - killed_at
    finally:
        kill_session(proc.pid)
        proc.wait()
    # (their farewell on stderr went to the dead launcher: only their exit is seen here)
    assert not left, f"ranks still running {seconds:.1f} s after mpiexec was killed: {left}"


def test_the_watchdog_sees_a_rank_orphaned_by_its_launcher():
    from dataflow.runtime.mpi.world import Watchdog
    world = _FakeWorld()
    world.launcher = os.getppid()
    assert Watchdog(world).orphaned() is False
    world.launcher = os.getppid() + 100_000     # not our parent: re-parented
    assert Watchdog(world).orphaned() is True


def test_serving_ranks_exit_when_rank_0_fails(tmp_path):
    """Rank 0 raises before any step: the serving ranks are told to exit, so mpiexec
    returns (MPI's finalize would otherwise wait for them forever)."""
    start = time.monotonic()
    cmd = mpirun_command(3, [MAIN, "crash", str(tmp_path / "none.pkl")])
    proc = run_job(cmd)
    assert "rank 0 fails before running a step" in proc.stderr
    assert time.monotonic() - start < 30


def test_random_programs_on_three_tasks_agree_with_the_spec(tmp_path):
    seed = int(os.environ.get("DATAFLOW_TEST_SEED", "0")) % 1000
    results = launch(tmp_path, 3, "random", 25, seed)
    assert results["checked"] == 25


def test_a_world_of_one_runs_task_0_and_names_missing_tasks(tmp_path):
    """Without mpiexec the world has one rank: task 0 runs, task 1 is refused naming the op."""
    out = tmp_path / "results.pkl"
    proc = subprocess.run([sys.executable, MAIN, "single", str(out)], cwd=ROOT,
                          env=mpirun_env(), capture_output=True, text=True,
                          timeout=LAUNCH_TIMEOUT_S)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    with open(out, "rb") as f:
        results = pickle.load(f)
    assert results["size"] == 1
    assert float(results["task0"]) == 7.0
    kind, cls, message, _ = results["task1"]
    assert cls == "InvalidArgumentError" and "Cannot assign a device for operation" in message
    assert "names task 1" in message
    assert "mpirun -n 2" in message


def test_mpirun_wraps_mpiexec_for_one_host():
    cmd = mpirun_command(4, ["script.py", "--flag"])
    assert os.path.basename(cmd[0]) == "mpiexec"
    assert cmd[1:3] == ["-n", "4"]
    assert "--oversubscribe" in cmd and "--enable-recovery" in cmd
    assert cmd[-3:] == ["-u", "script.py", "--flag"] and cmd[-4] == sys.executable
    env = mpirun_env({}, ranks=4)
    if os.geteuid() == 0:
        assert env["OMPI_ALLOW_RUN_AS_ROOT"] == "1"
    assert env["OPENBLAS_NUM_THREADS"] == str(max(1, os.cpu_count() // 4))
    assert mpirun_env({"OMP_NUM_THREADS": "3"}, ranks=4)["OMP_NUM_THREADS"] == "3"


class _FakeWorld:
    """The parts of a World the Watchdog reads: rank, size, in_mpi, alive()."""

    def __init__(self, dead=(), entered_s_ago=None):
        self.rank, self.size = 0, 3
        self.dead = set(dead)
        self.in_mpi = {} if entered_s_ago is None else {1: time.monotonic() - entered_s_ago}

    def alive(self, rank):
        return rank not in self.dead


def test_the_watchdog_gives_up_only_on_an_old_mpi_call_with_a_dead_peer():
    """Open MPI's shared-memory queue, half-linked by a peer killed mid-send, makes the
    receiver's MPI call spin forever: the watchdog sees an old call and a dead peer."""
    from dataflow.runtime.mpi.world import WEDGED_AFTER_S, Watchdog
    old = WEDGED_AFTER_S + 1.0
    assert Watchdog(_FakeWorld(dead={1}, entered_s_ago=old)).wedged_by() == [1]
    assert Watchdog(_FakeWorld(dead={2}, entered_s_ago=old)).wedged_by() == [2]
    # every peer alive (a stopped one resumes), no call in MPI, or a recent call: wait
    assert Watchdog(_FakeWorld(entered_s_ago=old)).wedged_by() == []
    assert Watchdog(_FakeWorld(dead={1})).wedged_by() == []
    assert Watchdog(_FakeWorld(dead={1}, entered_s_ago=0.1)).wedged_by() == []


def test_a_wedged_rank_exits_naming_the_dead_task():
    code = ("from dataflow.runtime.mpi.world import Watchdog; "
            "from tests.test_mpi_mode import _FakeWorld; "
            "Watchdog(_FakeWorld(dead={2}, entered_s_ago=10)).give_up([2])")
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True,
                          text=True, timeout=LAUNCH_TIMEOUT_S)
    from dataflow.runtime.mpi.world import WEDGED_EXIT_CODE
    assert proc.returncode == WEDGED_EXIT_CODE
    assert "task(s) 2 died" in proc.stderr and "half-linked" in proc.stderr


class _FakeClient:
    """The parts of rank 0's client that _supervise and _step_thread use."""

    def __init__(self, world):
        self.w = world
        self.step_thread = None
        self.stuck = None


class _BreakableWorld(_FakeWorld):
    def __init__(self, dead=()):
        super().__init__(dead=dead)
        self.supervised = set()
        self.broken_by = None
        self.finalize_at_exit = True

    def break_(self, reason):
        self.broken_by = reason
        self.finalize_at_exit = False

    def forgo_finalize(self):
        self.finalize_at_exit = False


def _stuck_job(client):
    """A job on the client's step thread that blocks (without the interpreter lock, as a
    spinning MPI call does) until the returned event is set."""
    from dataflow.runtime.mpi.mode import _step_thread
    release = threading.Event()
    job = _step_thread(client).submit(lambda: release.wait() and "finished")
    return job, release


def test_a_step_thread_stuck_past_its_deadline_raises_and_blocks_the_next_step():
    from dataflow.runtime.mpi.mode import WEDGE_GRACE_S, _step_thread, _supervise
    client = _FakeClient(_BreakableWorld())
    job, release = _stuck_job(client)
    start = time.monotonic()
    with pytest.raises(df.errors.DeadlineExceededError, match="stuck inside an MPI call"):
        _supervise(client, job, start + 0.1)
    assert 0.1 + WEDGE_GRACE_S <= time.monotonic() - start < 0.1 + WEDGE_GRACE_S + 2.0
    with pytest.raises(df.errors.AbortedError, match="has not returned yet"):
        _step_thread(client)
    release.set()
    job.wait(5.0)
    fresh = _step_thread(client).submit(lambda: 7)      # it returned: steps run again
    assert _supervise(client, fresh, None) == 7
    assert client.w.broken_by is None


def test_a_step_thread_stuck_after_a_peer_died_breaks_the_world():
    from dataflow.runtime.mpi.mode import _LOST, WEDGE_GRACE_S, _step_thread, _supervise
    client = _FakeClient(_BreakableWorld(dead={2}))
    job, release = _stuck_job(client)
    thread = client.step_thread.thread
    start = time.monotonic()
    try:
        with pytest.raises(df.errors.AbortedError, match=r"Task 2 \(MPI rank 2\) died"):
            _supervise(client, job, None)
        assert WEDGE_GRACE_S <= time.monotonic() - start < WEDGE_GRACE_S + 2.0
        assert client.w.broken_by is not None and client.w.finalize_at_exit is False
        assert os.sched_getscheduler(thread.native_id) == os.SCHED_IDLE   # parked
        with pytest.raises(df.errors.AbortedError, match="Restart the job"):
            _step_thread(client)
    finally:
        _LOST.discard(2)
        release.set()


def test_a_step_that_ends_after_a_peer_died_keeps_its_own_outcome():
    """A dead peer alone is no reason to give a step up: the step's own checks raise
    (or it finishes) within the grace."""
    from dataflow.runtime.mpi.mode import _step_thread, _supervise
    client = _FakeClient(_BreakableWorld(dead={1}))
    job = _step_thread(client).submit(lambda: time.sleep(0.2) or "result")
    assert _supervise(client, job, None) == "result"
    assert client.w.broken_by is None


def test_stale_session_dirs_of_dead_launchers_are_removed_and_live_ones_kept(tmp_path):
    """A launcher killed mid-job leaves ``ompi.<pid>``; once its pid is reused, the new
    mpiexec fails ("PMIx server's listener thread failed to start"). Dead launchers'
    directories go, a running process's directory and other names stay."""
    done = subprocess.Popen([sys.executable, "-c", "pass"])
    done.wait()
    dead, alive = tmp_path / f"ompi.{done.pid}", tmp_path / f"ompi.{os.getpid()}"
    for d in (dead, alive, tmp_path / "ompi.notapid", tmp_path / "other.1"):
        (d / "0").mkdir(parents=True)
        (d / "pmix.vm.tool").write_text("stale")
    removed = remove_stale_session_dirs(str(tmp_path))
    assert removed == [str(dead)]
    assert not dead.exists()
    assert alive.exists() and (tmp_path / "ompi.notapid").exists()
    assert (tmp_path / "other.1").exists()
