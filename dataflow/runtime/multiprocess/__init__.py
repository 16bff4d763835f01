"""The multi-process transport: ``ConfigProto(partition_mode="processes")``.

Each device's partition runs in a worker process of its own, forked by the Session;
the workers exchange tensors directly. The layers, bottom up:

* :mod:`.segments`: shared-memory segments for large arrays (a per-process
  :class:`~.segments.SegmentPool` of reusable segments, one-shot segments for feeds
  and fetches, sweeping after failures);
* :mod:`.exceptions`: errors crossing processes (the failing op found again by name);
* :mod:`.pipes`: the pipe protocol between device processes (message tags, the
  :class:`~.pipes.Endpoint` that pumps the pipes, the per-step
  :class:`~.pipes.ProcessRendezvous`);
* :mod:`.runner`: the :class:`~.runner.ProcessRunner` that forks, steps and stops
  the workers of one Session;
* :mod:`.mode`: the ``"processes"`` partition mode, registered on import.

>>> import dataflow as df
>>> sess = df.Session(config=df.ConfigProto(partition_mode="processes"))
>>> sess.close()
"""
from . import mode  # noqa: F401  registers the "processes" partition mode
