"""Gradients of the control-flow primitives, as the design note describes.

In a cond:

* the gradient of a Merge is a Switch of the incoming gradient on the cond's
  predicate, so each branch receives it only when it was taken;
* the gradient of a branch's Switch is a Merge of its output gradients: the
  taken side's real gradient and, on the other side, zeros that exist only when
  that side is taken, so the Merge always has exactly one live input.

In a while loop (the gradient loop is built by :mod:`.loop_state`):

* Exit -> Enter into the gradient loop's frame;
* Switch -> a Merge whose back edge (a NextIteration) is closed when the body's
  gradient arrives (the walk visits a loop Switch twice);
* Merge -> a Switch on the gradient loop's predicate;
* NextIteration -> identity;
* Enter -> Exit from the gradient loop for a loop variable, and for a loop
  invariant an accumulator loop variable that sums the gradient of every iteration.
"""
from __future__ import annotations

from ..control_flow.context import get_output_context
from ..framework.graph import get_default_graph
from ..ops.control_flow_ops import exit as exit_op
from ..ops.control_flow_ops import enter as enter_op
from ..ops.control_flow_ops import merge, next_iteration, switch
from ..ops.math_ops import add, equal
from .loop_state import in_context
from .registry import NotDifferentiable, RegisterGradient


def _grad_context():
    ctx = get_default_graph()._get_control_flow_context()
    return ctx.GetWhileContext() if ctx is not None else None


@RegisterGradient("Switch")
def _switch_grad(op, grad_false, grad_true):
    ctx = op._control_flow_context
    if ctx is not None and ctx.IsWhileContext():
        grad_state = _grad_context().grad_state
        merge_grad = grad_state.switch_map.get(op)
        if merge_grad is not None:
            # Second visit, from the body: close the gradient loop's back edge.
            if grad_true is not None:
                nxt = next_iteration(grad_true)
                merge_grad.op._update_input(1, nxt)
            return [None, None]
        if grad_false is not None:
            # First visit, from the Exit: input 1 of this Merge is replaced later.
            merge_grad = merge([grad_false, grad_false], name="b_switch")[0]
            grad_state.switch_map[op] = merge_grad
            return [merge_grad, None]
        return [None, None]
    if ctx is not None and ctx.IsCondContext():
        zero_side = (grad_false, grad_true)[1 - ctx.branch]
        if zero_side is None:
            return [None, None]
        return [merge([grad_false, grad_true], name="cond_grad")[0], None]
    # A raw Switch outside any cond: route each side's gradient back on the same pred.
    pred = op.inputs[1]
    back_false = switch(grad_false, pred)[0]
    back_true = switch(grad_true, pred)[1]
    return [merge([back_false, back_true])[0], None]


@RegisterGradient("Merge")
def _merge_grad(op, grad, _value_index_grad):
    ctx = get_output_context(op.inputs[0].op)
    if ctx is not None and ctx.IsWhileContext():
        g_false, g_true = switch(grad, _grad_context().pivot)
        return [g_false, g_true]
    if ctx is not None and ctx.IsCondContext():
        grad_ctx = _grad_context()
        state = grad_ctx.grad_state if grad_ctx is not None else None
        if state is not None and state.forward_context is ctx.GetWhileContext():
            # A cond inside a loop: each branch's gradient starts from a Switch on the
            # predicate's history, made in that branch's gradient cond.
            return [_switch_into(state, ctx, branch, grad) for branch in (0, 1)]
        g_false, g_true = switch(grad, ctx.pred, name="cond_grad")
        return [g_false, g_true]
    # A raw Merge: input i gets the gradient when it was the one forwarded.
    index = op.outputs[1]
    return [switch(grad, equal(index, i))[1] for i in range(len(op.inputs))]


def _switch_into(state, cond_ctx, branch, grad):
    """``grad`` as seen inside the gradient cond of branch ``branch`` of ``cond_ctx``."""
    gctx = state.grad_cond_context(cond_ctx, branch)
    gctx.Enter()
    try:
        return gctx.AddValue(grad)
    finally:
        gctx.Exit()


@RegisterGradient("Exit")
def _exit_grad(op, grad):
    grad_ctx = _grad_context()
    if not grad_ctx.back_prop:
        return [None]
    grad_ctx.AddName(grad)
    g = get_default_graph()
    with g.control_dependencies(None):
        result = enter_op(grad, grad_ctx.name, is_constant=False,
                          parallel_iterations=grad_ctx.parallel_iterations, name="b_exit")
    result.op._set_control_flow_context(grad_ctx)
    grad_ctx.loop_enters.append(result)
    return [result]


@RegisterGradient("NextIteration")
def _next_iteration_grad(op, grad):
    return [grad]


@RegisterGradient("Enter")
def _enter_grad(op, grad):
    grad_ctx = _grad_context()
    if grad_ctx is None or not grad_ctx.back_prop or grad_ctx.grad_state is None:
        return [grad]
    if op.get_attr("is_constant"):
        return [_accumulate(grad_ctx, op, grad)]
    result = exit_op(grad)
    grad_ctx.loop_exits.append(result)
    grad_ctx.ExitResult([result])
    return [result]


def _accumulate(grad_ctx, op, grad):
    """The gradient of a loop invariant: ``acc = 0; while ...: acc += grad``."""
    from ..ops.array_ops import shape as shape_of
    from ..ops.array_ops import zeros
    value = op.inputs[0]
    outer = grad_ctx.outer_context
    grad_ctx.Exit()
    try:
        if grad.shape.is_fully_defined():
            acc = in_context(outer, lambda: zeros(grad.shape.as_list(), grad.dtype, name="b_acc"))
        else:
            outer_while = outer.GetWhileContext() if outer is not None else None
            if outer_while is not None and outer_while.grad_state is not None:
                # Nested: the invariant's shape per outer iteration comes from history.
                forward = grad_ctx.grad_state.forward_context
                zeros_shape = in_context(forward.outer_context, lambda: shape_of(value))
                outer_state = grad_ctx.grad_state.outer_grad_state
                history = outer_state.add_forward_accumulator(zeros_shape)
                def make():
                    real = outer_state.add_backprop_accumulated_value(history, zeros_shape)
                    return zeros(real, grad.dtype)
                acc = in_context(outer, make)
            else:
                acc = in_context(outer, lambda: zeros(shape_of(value), grad.dtype))
    finally:
        grad_ctx.Enter()
    grad_ctx.AddName(acc)
    g = get_default_graph()
    with g.control_dependencies(None):
        enter_acc = enter_op(acc, grad_ctx.name, is_constant=False,
                             parallel_iterations=grad_ctx.parallel_iterations, name="b_acc")
    enter_acc.op._set_control_flow_context(grad_ctx)
    grad_ctx.loop_enters.append(enter_acc)
    merge_acc = merge([enter_acc, enter_acc], name="b_acc")[0]
    acc_false, acc_true = switch(merge_acc, grad_ctx.pivot)
    next_acc = next_iteration(add(acc_true, grad))
    merge_acc.op._update_input(1, next_acc)
    result = exit_op(acc_false, name="b_acc")
    grad_ctx.loop_exits.append(result)
    grad_ctx.ExitResult([result])
    return result


@RegisterGradient("Identity")
def _identity_grad(op, grad):
    return [grad]


@RegisterGradient("Snapshot")
def _snapshot_grad(op, grad):
    return [grad]


NotDifferentiable("LoopCond")
NotDifferentiable("ControlTrigger")
NotDifferentiable("NoOp")
NotDifferentiable("StopGradient")
