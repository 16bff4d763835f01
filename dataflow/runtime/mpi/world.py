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
"""
from __future__ import annotations

import atexit
import os
import pickle
import sys

from ... import errors

__all__ = ["World", "available", "world"]

_WORLD: list = []


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
