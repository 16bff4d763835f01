"""The five control-flow primitives and their companions, in TF's raw-op order.

* ``switch(data, pred) -> (output_false, output_true)``: forwards ``data`` to one output;
  the other is dead.
* ``merge(inputs) -> (output, value_index)``: forwards the first live input.
* ``enter(data, frame_name, is_constant, parallel_iterations)``: into a child frame.
* ``exit(data)``: back to the parent frame.
* ``next_iteration(data)``: into the next iteration of the current frame.

Plus ``loop_cond`` (marks a loop predicate), ``control_trigger``, ``no_op`` and ``group``.
A raw loop closes its back edge with ``merge_op.update_input(1, next_iteration_tensor)``::

    enter_i = enter(i0, "loop")
    ten = enter(constant(10), "loop", is_constant=True)   # every value used inside
    one = enter(constant(1), "loop", is_constant=True)    # the loop must enter it
    m, _ = merge([enter_i, enter_i])
    t_false, t_true = switch(m, loop_cond(m < ten))
    nxt = next_iteration(t_true + one)
    m.op.update_input(1, nxt)
    result = exit(t_false)
"""
from __future__ import annotations

from .. import dtypes as _dtypes
from ..framework import op_registry as _roles
from ..framework.convert import convert_to_tensor
from ..framework.graph import Operation, get_default_graph
from ..framework.op_registry import register_op
from ..framework.tensor_shape import TensorShape
from . import shape_fns


@register_op("Switch", role=_roles.SWITCH)
def _switch_infer(op):
    data, pred = op.inputs
    if not pred.dtype.is_bool:
        raise TypeError(f"Switch '{op.name}': pred must be a bool tensor, got {pred.dtype.name}")
    if pred.shape.ndims not in (None, 0):
        raise ValueError(f"Switch '{op.name}': pred must be a scalar, got shape {pred.shape}")
    return [(data.dtype, data.shape), (data.dtype, data.shape)]


@register_op("Merge", role=_roles.MERGE)
def _merge_infer(op):
    xs = op.inputs
    if not xs:
        raise ValueError(f"Merge '{op.name}' needs at least one input")
    shape = xs[0].shape
    for t in xs[1:]:
        if t.dtype is not xs[0].dtype:
            raise TypeError(f"Merge '{op.name}': all inputs must share one dtype "
                            f"({xs[0].dtype.name} vs {t.dtype.name})")
        shape = shape.most_specific_compatible_shape(t.shape)
    return [(xs[0].dtype, shape), (_dtypes.int32, TensorShape([]))]


register_op("Enter", role=_roles.ENTER)(shape_fns.unchanged)
register_op("Exit", role=_roles.EXIT)(shape_fns.unchanged)
register_op("NextIteration", role=_roles.NEXT_ITERATION)(shape_fns.unchanged)
register_op("ControlTrigger", role=_roles.CONTROL_TRIGGER)(shape_fns.no_outputs)
register_op("NoOp")(shape_fns.no_outputs)


@register_op("LoopCond", forwards_input=True)
def _loop_cond_infer(op):
    pred = op.inputs[0]
    if not pred.dtype.is_bool or pred.shape.ndims not in (None, 0):
        raise TypeError(f"LoopCond '{op.name}': the loop predicate must be a scalar bool, got "
                        f"{pred.dtype.name} of shape {pred.shape}")
    return [(_dtypes.bool, TensorShape([]))]


def _create(op_type, inputs, attrs=None, name=None) -> Operation:
    return get_default_graph().create_op(op_type, inputs, attrs, name=name or op_type)


def switch(data, pred, name=None):
    """``(output_false, output_true)``: ``data`` goes to ``output_true`` iff ``pred``."""
    data = convert_to_tensor(data)
    pred = convert_to_tensor(pred)
    op = _create("Switch", [data, pred], name=name)
    return op.outputs[0], op.outputs[1]


def merge(inputs, name=None):
    """``(output, value_index)``: the first live input and its index."""
    inputs = [convert_to_tensor(t) for t in inputs]
    op = _create("Merge", inputs, name=name)
    return op.outputs[0], op.outputs[1]


def enter(data, frame_name, is_constant=False, parallel_iterations=10, name=None):
    """Forward ``data`` into iteration 0 of the child frame ``frame_name`` (every iteration
    when ``is_constant``)."""
    if not isinstance(frame_name, str) or not frame_name:
        raise ValueError("enter: frame_name must be a non-empty string")
    if int(parallel_iterations) < 1:
        raise ValueError("enter: parallel_iterations must be a positive integer")
    attrs = {"frame_name": frame_name, "is_constant": bool(is_constant),
             "parallel_iterations": int(parallel_iterations)}
    return _create("Enter", [convert_to_tensor(data)], attrs, name).outputs[0]


def exit(data, name=None):  # noqa: A001 - TF's name
    """Forward ``data`` from a loop frame to its parent frame."""
    return _create("Exit", [convert_to_tensor(data)], name=name).outputs[0]


def next_iteration(data, name=None):
    """Forward ``data`` to the next iteration of the current frame."""
    return _create("NextIteration", [convert_to_tensor(data)], name=name).outputs[0]


def loop_cond(input, name=None):  # noqa: A002
    """Identity on the loop predicate; marks it for the partitioner and visualizer."""
    return _create("LoopCond", [convert_to_tensor(input)], name=name).outputs[0]


def control_trigger(name=None) -> Operation:
    """An op that does nothing and is never dead (a join point for control edges)."""
    return _create("ControlTrigger", [], name=name)


def no_op(name=None) -> Operation:
    """An op that does nothing; useful as a target with control inputs."""
    return _create("NoOp", [], name=name)


def group(*inputs, name=None) -> Operation:
    """A NoOp that runs after all ``inputs`` (ops or tensors)."""
    deps = []
    for x in inputs:
        if isinstance(x, (list, tuple)):
            deps.extend(x)
        else:
            deps.append(x)
    g = get_default_graph()
    with g.control_dependencies(deps):
        return no_op(name=name or "group_deps")


def tuple_(tensors, name=None, control_inputs=None):
    """Identities of ``tensors`` that are available only once all of them are."""
    tensors = [convert_to_tensor(t) if t is not None else None for t in tensors]
    gating = group(*[t for t in tensors if t is not None], *(control_inputs or []))
    from .array_ops import identity
    g = get_default_graph()
    with g.control_dependencies([gating]):
        return [identity(t) if t is not None else None for t in tensors]
