"""Gradients of the TensorArray ops (TF1's ``tensor_array_grad``).

The gradient of a TensorArray is another TensorArray of the same size: the *gradient
array* of one ``gradients`` call (its *source*, the name scope of that call), found or
made by ``TensorArrayGradV3`` next to the forward array in each run. Each access's
gradient is the mirror access on the gradient array:

========  =================================
forward   gradient
========  =================================
read      write (writes to one index add up)
write     read
gather    scatter
scatter   gather
concat    split (by the lengths concat saw)
split     concat
========  =================================

The flows carry the order: the gradient of an access's output flow is the flow the
mirror access waits for, and the mirror access's flow is the gradient of the input
flow. In a while loop the forward handle is a loop invariant, so the gradient loop
reaches the same forward array (and through it, the same gradient array) in every
iteration.
"""
from __future__ import annotations

from ..framework.graph import get_default_graph
from ..ops.array_ops import identity
from ..ops.tensor_array_ops import TensorArray
from .registry import NotDifferentiable, RegisterGradient

for _t in ("TensorArrayV3", "TensorArrayGradV3", "TensorArraySizeV3", "TensorArrayCloseV3"):
    NotDifferentiable(_t)


def _grad_source(grad, op=None) -> str:
    """The name scope of the ``gradients`` call building ``grad`` (``gradients``,
    ``gradients_1``, possibly under outer scopes): one gradient array per call.

    ``gradients`` builds ``op``'s gradient in the scope ``<call scope>/<op name>_grad``,
    which gives the call's scope exactly, even when ``op`` is itself part of an earlier
    gradient (a second-order gradient: ``gradients_1/gradients/..._grad``). Otherwise
    the gradient tensor's name says it (TF's rule); when the gradient is a tensor the
    caller passed in (``grad_ys``), the name scope being built in does.
    """
    scope = get_default_graph().get_name_scope()
    if op is not None:
        at = scope.rfind("/" + op.name + "_grad")
        rest = scope[at + len(op.name) + 6:] if at >= 0 else None
        if rest == "" or (rest and rest[0] == "_" and rest[1:].isdigit()):
            return scope[:at]
    for name in (grad.name, scope):
        tokens = name.split("/")
        positions = [i for i, t in enumerate(tokens) if t.startswith("gradients")]
        if positions:
            return "/".join(tokens[:positions[-1] + 1])
    raise ValueError(f"Expected op/tensor name to start with gradients (excluding scope), "
                     f"got: {grad.name}")


def _gradient_array(op, dtype, flow, source) -> TensorArray:
    forward = TensorArray(dtype, handle=op.inputs[0], flow=flow,
                          colocate_with_first_write_call=False)
    return forward.grad(source=source, flow=flow)


def _gradient_array_after_write(op, flow):
    """The gradient array of a writing access ``op`` (write, scatter, split) and the
    flow its mirror read waits for: ``flow``, held until ``op``'s own output flow exists
    so the gradient array is not found or made before the forward write has run."""
    source = _grad_source(flow, op)
    flow_out = identity(op.outputs[0], name="flow_out")
    with get_default_graph().control_dependencies([flow_out]):
        flow = identity(flow, name="write_barrier")
    return _gradient_array(op, op.get_attr("T"), flow, source), flow


@RegisterGradient("TensorArrayReadV3")
def _read_grad(op, grad):
    """A read's gradient is written to the same index of the gradient array."""
    index, flow = op.inputs[1], op.inputs[2]
    g = _gradient_array(op, op.get_attr("dtype"), flow, _grad_source(grad, op))
    w = g.write(index, grad)
    return [None, None, w.flow]


@RegisterGradient("TensorArrayWriteV3")
def _write_grad(op, flow):
    """A write's value gets the gradient array's element at its index, read once every
    gradient of later reads of that index has been written."""
    index = op.inputs[1]
    ga, flow = _gradient_array_after_write(op, flow)
    grad = ga.read(index)
    grad.set_shape(op.inputs[2].shape)  # the static shape the written value had
    return [None, None, grad, flow]


@RegisterGradient("TensorArrayGatherV3")
def _gather_grad(op, grad):
    indices, flow = op.inputs[1], op.inputs[2]
    g = _gradient_array(op, op.get_attr("dtype"), flow, _grad_source(grad, op))
    return [None, None, g.scatter(indices, grad).flow]


@RegisterGradient("TensorArrayScatterV3")
def _scatter_grad(op, flow):
    indices = op.inputs[1]
    ga, flow = _gradient_array_after_write(op, flow)
    grad = ga.gather(indices)
    grad.set_shape(op.inputs[2].shape)
    return [None, None, grad, flow]


@RegisterGradient("TensorArrayConcatV3")
def _concat_grad(op, grad, unused_lengths_grad):
    flow, lengths = op.inputs[1], op.outputs[1]
    g = _gradient_array(op, op.get_attr("dtype"), flow, _grad_source(grad, op))
    return [None, g.split(grad, lengths=lengths).flow]


@RegisterGradient("TensorArraySplitV3")
def _split_grad(op, flow):
    ga, flow = _gradient_array_after_write(op, flow)
    grad = ga.concat()
    grad.set_shape(op.inputs[1].shape)
    return [None, grad, None, flow]
