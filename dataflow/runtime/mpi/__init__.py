"""The MPI transport: ``ConfigProto(partition_mode="mpi")``, one task per MPI rank.

* :mod:`.world`: mpi4py imported on first use, the rank, the communicators;
* :mod:`.transport`: step values between ranks (raw array buffers behind small
  headers, a tag space per step, the pumping completion queue);
* :mod:`.mode`: the ``"mpi"`` partition mode (rank 0 the client, the other ranks
  serving), registered on import.

Run a script on K ranks with ``dataflow mpirun -n K script.py``.
"""
from . import mode  # noqa: F401  registers the "mpi" partition mode
