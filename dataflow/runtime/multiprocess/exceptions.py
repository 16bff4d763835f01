"""Errors crossing processes: a worker's exception, re-raised in the Session's process.

An OpError carries the Operation that failed, which cannot be pickled; it travels as
``(class name, message, node name, op type)`` and the receiving side finds the op
again by name (a partition's copy, or the user's op), or stands in a
:class:`RemoteOp` for an op that exists only in another process (a Send, a Recv).

>>> from dataflow import errors
>>> packed = pack_exception(errors.OutOfRangeError(None, None, "empty"))
>>> type(unpack_exception(packed)).__name__
'OutOfRangeError'
"""
from __future__ import annotations

import pickle

from ... import errors

__all__ = ["RemoteOp", "pack_exception", "unpack_exception"]


def pack_exception(exc: BaseException):
    """A picklable description of ``exc``."""
    op = getattr(exc, "op", None)
    if isinstance(exc, errors.OpError):
        return ("op", type(exc).__name__, exc.message, getattr(op, "name", None),
                getattr(op, "type", None))
    try:
        pickle.dumps(exc)
        return ("pickle", exc)
    except Exception:  # noqa: BLE001 - any unpicklable exception is described instead
        return ("op", "UnknownError", f"{type(exc).__name__}: {exc}", None, None)


class RemoteOp:
    """Stands in for an Operation that exists only in another process (a Send, a Recv)."""

    graph = None

    def __init__(self, name, op_type):
        self.name, self.type = name, op_type

    def __repr__(self):
        return f"<RemoteOp '{self.name}' type={self.type}>"


def unpack_exception(packed, find_op=None) -> BaseException:
    """The exception ``pack_exception`` described; ``find_op(name)`` finds the op."""
    if packed[0] == "pickle":
        return packed[1]
    _, cls_name, message, op_name, op_type = packed
    cls = getattr(errors, cls_name, None)
    if not (isinstance(cls, type) and issubclass(cls, errors.OpError)):
        cls = errors.UnknownError
    op = None
    if op_name is not None:
        op = find_op(op_name) if find_op is not None else None
        if op is None:
            op = RemoteOp(op_name, op_type)
    return cls(None, op, message)
