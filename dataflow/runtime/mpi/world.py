"""The MPI world of this process: mpi4py imported on first use, the communicators.

Nothing here imports ``mpi4py`` at module import: ``import dataflow`` must work
without it. :func:`world` initializes MPI once (thread level ``multiple``: the
executor's thread and the pumping thread of a waiting Recv both call MPI) and
duplicates ``COMM_WORLD`` twice, so the step values (``data``) and the session's
control messages (``control``) never match each other's probes.

Run under ``mpiexec -n K`` (or ``dataflow mpirun -n K``) every process is one task;
a plain ``python script.py`` is a world of one (task 0 only).

Finalization is ours, not mpi4py's: ``MPI_Finalize`` is collective over the whole job
(Open MPI 5 ends it with a PMIx fence over every process), and once a rank has died
that fence may never complete: under PRRTE with ``--enable-recovery`` the survivors
then wait in ``ompi_mpi_finalize`` forever and ``mpiexec`` never returns (5 hangs in
20 runs of a 3-rank job whose rank 1 was killed before the others finalized). So
every rank finalizes at exit only while the job is whole; once a rank is known dead
or unresponsive (:meth:`World.forgo_finalize`), the survivors exit without it, which
``mpiexec --enable-recovery`` accepts.

One failure stays out of a thread's reach: Open MPI's shared-memory transport
appends to a receiver's queue in two steps (swap the tail, then link the previous
item), and a sender killed between them leaves the queue half-linked; the receiver's
next MPI call then spins in ``opal_progress`` forever (shown with gdb holding rank 1
at that instruction: rank 0 never returned from ``Iprobe``, its step deadline never
fired). Rank 0 runs each step on a thread of its own and watches it from the caller
(``mode.py``): a step thread stuck that way is given up, the world is marked
:meth:`World.broken` (no thread of this process calls MPI again) and ``run`` raises
``AbortedError``. On a serving rank, where nothing is left to do, :class:`Watchdog`
turns the endless spin into an exit with a message naming the dead task.

A rank whose launcher died (``mpiexec`` killed: the rank's parent process changes) has
no job left. Open MPI 5 itself ends such ranks about 1 s later (measured with this
check off); the :class:`Watchdog` also ends one (status :data:`ORPHANED_EXIT_CODE`)
once it sees its parent change, for a launcher or an MPI library that does not.
"""
from __future__ import annotations

import atexit
import os
import pickle
import sys
import threading
import time

from ... import errors

__all__ = ["World", "Watchdog", "available", "world"]

_WORLD: list = []
WEDGED_AFTER_S = 3.0     # an MPI call this old, with a peer dead, is the endless spin
WEDGED_EXIT_CODE = 75
ORPHANED_EXIT_CODE = 76  # the launcher (mpiexec) died: the job is over


def available() -> bool:
    """Whether mpi4py can be imported here."""
    try:
        import mpi4py  # noqa: F401
    except ImportError:
        return False
    return True


class World:
    """This process's rank, the world size and the two communicators."""

    def __init__(self):
        try:
            import mpi4py
            if "mpi4py.MPI" not in sys.modules:
                mpi4py.rc.finalize = False     # _finalize_at_exit decides (module docstring)
                self.owns_finalize = True
            else:      # the script initialized MPI itself: mpi4py finalizes it
                self.owns_finalize = False
            from mpi4py import MPI
        except ImportError as e:
            raise errors.UnimplementedError(
                None, None, "partition_mode='mpi' needs mpi4py and an MPI library: "
                "pip install 'dataflow[mpi]'") from e
        self.MPI = MPI
        comm = MPI.COMM_WORLD
        self.rank = comm.Get_rank()
        self.size = comm.Get_size()
        self.data = comm.Dup()
        self.control = comm.Dup()
        # Every rank's host and pid: rank 0 watches the workers on its host for death
        # (Open MPI, run with --enable-recovery, lets the others live on).
        self.places = comm.allgather((os.uname().nodename, os.getpid()))
        self.finalize_at_exit = True
        # thread id -> when it entered an MPI call (the transport marks its calls)
        self.in_mpi: dict = {}
        # Threads whose stuck calls someone else watches (rank 0's step threads).
        self.supervised: set = set()
        self.broken_by: str | None = None
        self.launcher = os.getppid()
        if self.size > 1:
            Watchdog(self).start()

    def break_(self, reason: str):
        """A thread of this process is stuck inside MPI for good (``reason`` says why):
        no thread calls MPI again (it could spin on the same queue), nor finalizes it."""
        if self.broken_by is None:
            self.broken_by = reason
        self.forgo_finalize()

    @property
    def broken(self) -> bool:
        return self.broken_by is not None

    def forgo_finalize(self):
        """Exit without ``MPI_Finalize``: a rank of the job died or stopped answering,
        and the job-wide fence that ends finalization would wait for it forever."""
        self.finalize_at_exit = False

    def alive(self, rank: int) -> bool:
        """False when ``rank`` is known to be dead (it runs on this host and its pid is gone)."""
        host, pid = self.places[rank]
        if host != os.uname().nodename:
            return True
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return False
        except PermissionError:
            return True
        try:   # a zombie (killed, not yet reaped by mpiexec) is dead too
            with open(f"/proc/{pid}/stat", "rb") as f:
                return f.read().rsplit(b")", 1)[1].split()[0] != b"Z"
        except OSError:
            return True


class Watchdog(threading.Thread):
    """Ends this process when one of its MPI calls has not returned for
    :data:`WEDGED_AFTER_S` while a peer rank is dead: Open MPI's shared-memory queue was
    left half-linked by that peer and the call spins forever (module docstring). A call
    stuck while every peer lives (a stopped peer, say) is left alone: it resumes with
    the peer. :class:`World` starts one when the job has more than one rank::

        Watchdog(world()).start()
    """

    def __init__(self, w: World, period_s: float = 0.25):
        super().__init__(name="dataflow-mpi-watchdog", daemon=True)
        self.w = w
        self.period_s = period_s

    def run(self):
        while True:
            time.sleep(self.period_s)
            if self.orphaned():
                self.leave_orphaned()
            dead = self.wedged_by()
            if dead:
                self.give_up(dead)

    def orphaned(self) -> bool:
        """Whether the launcher that started this rank is gone (this process was
        re-parented): ``mpiexec`` was killed, and nothing will end this job."""
        launcher = getattr(self.w, "launcher", None)
        return launcher is not None and os.getppid() != launcher

    def leave_orphaned(self):
        sys.stderr.write(
            f"dataflow: MPI rank {self.w.rank} lost its launcher (mpiexec, pid "
            f"{self.w.launcher}, is gone): the job is over; this rank exits (status "
            f"{ORPHANED_EXIT_CODE}).\n")
        sys.stderr.flush()
        os._exit(ORPHANED_EXIT_CODE)

    def wedged_by(self) -> list:
        """The dead peers, if an MPI call of this process (one nobody else watches) is
        older than WEDGED_AFTER_S."""
        supervised = getattr(self.w, "supervised", ())
        started = [t for tid, t in list(self.w.in_mpi.items()) if tid not in supervised]
        if not started or time.monotonic() - min(started) < WEDGED_AFTER_S:
            return []
        return [r for r in range(self.w.size) if r != self.w.rank and not self.w.alive(r)]

    def give_up(self, dead):
        tasks = ", ".join(str(r) for r in dead)
        sys.stderr.write(
            f"dataflow: MPI rank {self.w.rank} is stuck inside Open MPI (a call has not "
            f"returned for {WEDGED_AFTER_S:.0f} s) and task(s) {tasks} died: a rank killed "
            "in the middle of a shared-memory send leaves its receiver's queue half-linked, "
            "and Open MPI waits on it forever. Nothing in this process can recover; it "
            f"exits (status {WEDGED_EXIT_CODE}) so that the job ends. Restart the job.\n")
        sys.stderr.flush()
        os._exit(WEDGED_EXIT_CODE)


@atexit.register
def _finalize_at_exit():
    """``MPI_Finalize`` at interpreter exit, unless the job lost a rank. Registered at
    import, before ``mode`` registers its goodbye, so it runs after it (atexit is LIFO):
    the serving ranks are told to exit first."""
    if not _WORLD or not _WORLD[0].owns_finalize:
        return
    w = _WORLD[0]
    MPI = w.MPI
    if MPI.Is_finalized():
        return
    if w.finalize_at_exit:
        MPI.Finalize()
    else:
        for stream in (sys.stdout, sys.stderr):   # what a finalize would have flushed
            try:
                stream.flush()
            except (OSError, ValueError):
                pass


def world() -> World:
    """The process's :class:`World` (MPI initialized on the first call)."""
    if not _WORLD:
        _WORLD.append(World())
    return _WORLD[0]


def dumps(obj) -> tuple[bytes, list]:
    """``obj`` pickled with NumPy arrays out of band: (pickle bytes, raw buffers)."""
    buffers: list = []
    data = pickle.dumps(obj, 5, buffer_callback=buffers.append)
    return data, [b.raw() for b in buffers]


def loads(data, buffers) -> object:
    return pickle.loads(data, buffers=buffers)
