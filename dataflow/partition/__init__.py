"""Device partitioning: placement, Send/Recv pairs and per-partition control loops.

>>> with df.device("/cpu:0"):
...     x = df.constant(2.0)
>>> with df.device("/cpu:1"):
...     _, y = df.while_loop(lambda i, v: i < 3, lambda i, v: (i + 1, v * x), (0, 1.0))
>>> part = df.partition(df.get_default_graph(), [y])   # one subgraph per device
>>> sorted(part.partitions), len(part.send_recv_pairs), len(part.control_loops)
(['/device:CPU:0', '/device:CPU:1'], 1, 0)
"""
from .control_loop import ControlLoop  # noqa: F401
from .partition import PartitionResult, SendRecvPair, partition  # noqa: F401
from .placement import Placement, assign_devices  # noqa: F401
