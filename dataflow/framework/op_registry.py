"""Op definitions: one registered :class:`OpDef` per op type.

An op definition says how to infer the output dtypes and static shapes of an
op from its inputs and attributes, whether the op is stateful, and which of
the executor's built-in behaviours (the control-flow primitives, Send/Recv) it has.
Kernels live elsewhere (:mod:`dataflow.kernels`); gradients are registered the same way,
per op type, in :mod:`dataflow.autodiff`.

>>> @register_op("ExampleSquare")
... def _example_square(op):
...     return [(op.inputs[0].dtype, op.inputs[0].shape)]
>>> y = df.get_default_graph().create_op("ExampleSquare", [df.constant([1.0, 2.0])])
>>> y.type, y.outputs[0].shape.as_list()
('ExampleSquare', [2])
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

__all__ = ["OpDef", "register_op", "get_op_def", "registered_ops"]

# What the executor must do with a node instead of (or besides) calling a kernel.
# Declared here, on the op definition, so the executor never switches on op names.
NORMAL = "normal"
SWITCH = "switch"
MERGE = "merge"
ENTER = "enter"
EXIT = "exit"
NEXT_ITERATION = "next_iteration"
CONTROL_TRIGGER = "control_trigger"
# The cross-device transfer nodes (dataflow.ops.comm_ops): a Send runs even when its
# input is dead (it sends the dead bit); a Recv completes asynchronously.
SEND = "send"
RECV = "recv"
EXECUTOR_ROLES = (NORMAL, SWITCH, MERGE, ENTER, EXIT, NEXT_ITERATION, CONTROL_TRIGGER, SEND,
                  RECV)


@dataclass(frozen=True)
class OpDef:
    """Static description of an op type.

    ``infer(op)`` returns ``[(dtype, TensorShape), ...]``, one pair per output.
    ``role`` names the executor behaviour (``"normal"`` for ordinary ops).
    ``stateful`` ops are never constant-folded, deduplicated or pruned away
    when they are fetch targets. ``forwards_input`` marks ops whose single
    output is their single input (Identity, LoopCond...): the run plan wires
    their consumers straight to their producer. ``reads_shapes_only`` ops (Shape,
    Size, Rank) look at their inputs' shapes, never their values, so their cost does
    not grow with the inputs (the run plan never hands them to a worker thread).
    ``in_place`` ops are elementwise: their output may be written over an input of the
    same size that dies at this op (the memory planner, :mod:`dataflow.memory`, reuses
    that input's block, Owl's *inplace reuse*).
    """

    type: str
    infer: Callable
    stateful: bool = False
    role: str = NORMAL
    forwards_input: bool = False
    reads_shapes_only: bool = False
    in_place: bool = False


_REGISTRY: dict[str, OpDef] = {}


def register_op(op_type: str, *, stateful: bool = False, role: str = NORMAL,
                forwards_input: bool = False, reads_shapes_only: bool = False,
                in_place: bool = False):
    """Decorator registering ``infer`` as the shape/dtype function of ``op_type``."""
    if role not in EXECUTOR_ROLES:
        raise ValueError(f"unknown executor role {role!r}")

    def decorate(infer):
        if op_type in _REGISTRY:
            raise KeyError(f"Op type {op_type!r} is already registered")
        _REGISTRY[op_type] = OpDef(op_type, infer, stateful, role, forwards_input,
                                   reads_shapes_only, in_place)
        return infer

    return decorate


def get_op_def(op_type: str) -> OpDef:
    try:
        return _REGISTRY[op_type]
    except KeyError:
        raise KeyError(f"No op registered under type {op_type!r}") from None


def registered_ops() -> list[str]:
    return sorted(_REGISTRY)
