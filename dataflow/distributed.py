"""Tasks of a job run under MPI: ``df.distributed``.

Under ``dataflow mpirun -n K script.py`` the script runs on K ranks; task K of
``/job:worker/task:K`` is rank K. A Session created with
``ConfigProto(partition_mode="mpi")`` makes rank 0 the client and the other ranks
serve their partitions (they exit when rank 0's script ends), so code after the
Session's creation runs on rank 0 only; code before it runs on every rank.

>>> df.distributed.rank(), df.distributed.is_chief()     # outside mpirun: one task
(0, True)
>>> df.distributed.task_device(1)
'/job:worker/replica:0/task:1/device:CPU:0'
"""
from __future__ import annotations

import os

from .ops.math_ops import add_n
from .ops.array_ops import identity
from .framework.graph import device as _device
from .runtime.mpi.mode import task_device
from .runtime.mpi.world import world

__all__ = ["all_reduce", "is_chief", "rank", "size", "task_device"]

# Set by mpiexec in every rank's environment (Open MPI, and the PMI of other MPIs).
_RANK_VARS = ("OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK")
_SIZE_VARS = ("OMPI_COMM_WORLD_SIZE", "PMI_SIZE")


def _launched() -> bool:
    return any(v in os.environ for v in _RANK_VARS)


def rank() -> int:
    """This process's MPI rank (its task); 0 when not launched by mpiexec."""
    return world().rank if _launched() else 0


def size() -> int:
    """The number of ranks (tasks); 1 when not launched by mpiexec."""
    return world().size if _launched() else 1


def is_chief() -> bool:
    """Whether this process is rank 0, the client that runs the Session's steps."""
    return rank() == 0


def all_reduce(tensors, op="mean", name="all_reduce"):
    """Sum or average ``tensors`` (one per task, each placed on its task) and give
    every task the result: a list with the reduced value placed on each input's device.

    The reduction runs on the first tensor's device: each other task sends its
    tensor there and receives the result (2 (K - 1) transfers, through the
    partitioner's Send/Recv, so it works in every partition mode).

    >>> with df.device("/cpu:0"):
    ...     a = df.constant([1.0, 2.0])
    >>> with df.device("/cpu:1"):
    ...     b = df.constant([3.0, 4.0])
    >>> ra, rb = df.distributed.all_reduce([a, b])
    >>> with df.Session() as sess:
    ...     print(sess.run([ra, rb]))
    [array([2., 3.], dtype=float32), array([2., 3.], dtype=float32)]
    """
    if op not in ("mean", "sum"):
        raise ValueError(f"all_reduce op must be 'mean' or 'sum', got {op!r}")
    tensors = list(tensors)
    if not tensors:
        raise ValueError("all_reduce needs at least one tensor")
    with _device(tensors[0].device):
        total = add_n(tensors, name=f"{name}_sum") if len(tensors) > 1 else tensors[0]
        if op == "mean" and len(tensors) > 1:
            total = total * (1.0 / len(tensors))
    out = []
    for i, t in enumerate(tensors):
        with _device(t.device):
            out.append(identity(total, name=f"{name}_{i}"))
    return out
