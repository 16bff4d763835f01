"""Device partitioning: placement, Send/Recv pairs and per-partition control loops.

>>> part = df.partition(graph, [y])          # one subgraph per device
>>> part.partitions, part.send_recv_pairs, part.control_loops
"""
from .control_loop import ControlLoop  # noqa: F401
from .partition import PartitionResult, SendRecvPair, partition  # noqa: F401
from .placement import Placement, assign_devices  # noqa: F401
