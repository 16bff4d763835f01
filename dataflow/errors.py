"""Run-time errors, mirroring ``tf.errors``.

Every error raised while running a step is an :class:`OpError` that names the
node and its op type and carries the :class:`~dataflow.framework.graph.Operation`
in ``.op``::

    try:
        sess.run(y, feed_dict={x: 1.5})
    except df.errors.InvalidArgumentError as e:
        print(e.op.name, e.op.type)
"""
from __future__ import annotations

__all__ = ["OpError", "CancelledError", "InvalidArgumentError", "NotFoundError",
           "FailedPreconditionError", "DeadlineExceededError", "InternalError",
           "OutOfRangeError", "UnimplementedError", "ResourceExhaustedError", "UnknownError",
           "AbortedError", "DataLossError"]


class OpError(Exception):
    """Base class of run-time errors. ``node_def``-style info: ``op``, ``message``."""

    def __init__(self, node_def=None, op=None, message: str = ""):
        if op is None and node_def is not None and hasattr(node_def, "type"):
            op = node_def
        self.op = op
        self.message = message
        if op is not None:
            text = f"{message}\n\t [[node {op.name} (op type {op.type})]]"
        else:
            text = message
        super().__init__(text)

    @property
    def node_def(self):
        return self.op


class CancelledError(OpError):
    """The step was cancelled because another part of it failed."""


class InvalidArgumentError(OpError, ValueError):
    """Bad input: a wrong feed, a dead fetch, a failed assertion, a bad argument to a kernel."""


class NotFoundError(OpError):
    """Something named does not exist (an op or tensor name, a kernel)."""


class FailedPreconditionError(OpError):
    """The system is not in a state to run the op (e.g. an uninitialized variable)."""


class DeadlineExceededError(OpError):
    """The step ran past ``RunOptions.timeout_in_ms``."""


class InternalError(OpError):
    """An invariant of the runtime was broken."""


class OutOfRangeError(OpError):
    """An operation was attempted past a valid range (e.g. popping an empty stack)."""


class UnimplementedError(OpError):
    """The operation is not implemented (e.g. no kernel for this device)."""


class ResourceExhaustedError(OpError):
    """Some resource (memory) ran out."""


class UnknownError(OpError):
    """An error that fits no other class."""


class AbortedError(OpError):
    """The operation was aborted."""


class DataLossError(OpError):
    """Unrecoverable data loss or corruption (e.g. a truncated checkpoint file)."""
