"""Stacks: the storage that carries forward values of a loop to its gradient loop.

``stack(elem_type)`` makes an empty stack and yields its handle (a resource
tensor); ``stack_push(handle, value)`` pushes and passes the value through;
``stack_pop(handle, elem_type)`` pops the newest entry. A fresh stack is made
each time the ``Stack`` op runs, so every step (and every instance of an
enclosing loop) gets its own. The autodiff package pushes one entry per forward
iteration and pops them in reverse in the backprop loop::

    h = stack(float32)
    pushed = stack_push(h, x)      # in the forward loop
    x_again = stack_pop(h, float32)  # in the gradient loop
"""
from __future__ import annotations

from .. import dtypes as _dtypes
from ..framework.convert import convert_to_tensor
from ..framework.graph import get_default_graph
from ..framework.op_registry import register_op
from ..framework.tensor_shape import TensorShape
from . import shape_fns

register_op("Stack", stateful=True)(shape_fns.scalar(_dtypes.resource))


@register_op("StackPush", stateful=True)
def _push_infer(op):
    return [(op.inputs[1].dtype, op.inputs[1].shape)]


@register_op("StackPop", stateful=True)
def _pop_infer(op):
    return [(op.get_attr("elem_type"), op.get_attr("shape"))]


register_op("StackSize", stateful=True)(shape_fns.scalar(_dtypes.int32))


def stack(elem_type, max_size=-1, name="Stack"):
    """A new, empty stack of ``elem_type`` values (at most ``max_size`` if positive)."""
    attrs = {"elem_type": _dtypes.as_dtype(elem_type), "max_size": int(max_size)}
    return get_default_graph().create_op("Stack", [], attrs, name=name).outputs[0]


def stack_push(handle, elem, swap_memory=False, name="StackPush"):
    """Push ``elem`` onto the stack; the result is ``elem`` (so pushes can be ordered)."""
    elem = convert_to_tensor(elem)
    return get_default_graph().create_op("StackPush", [handle, elem],
                                         {"swap_memory": bool(swap_memory)},
                                         name=name).outputs[0]


def stack_pop(handle, elem_type, shape=None, name="StackPop"):
    """Pop the newest entry (an error if the stack is empty)."""
    attrs = {"elem_type": _dtypes.as_dtype(elem_type), "shape": TensorShape(shape)}
    return get_default_graph().create_op("StackPop", [handle], attrs, name=name).outputs[0]


def stack_size(handle, name="StackSize"):
    """The number of entries on the stack."""
    return get_default_graph().create_op("StackSize", [handle], name=name).outputs[0]
