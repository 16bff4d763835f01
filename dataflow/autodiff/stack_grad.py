"""Gradients of stack pushes and pops: what a second-order gradient through a while
loop differentiates (see ``dataflow/spec/SECOND_ORDER.md``).

A first-order gradient loop ``B`` reads the forward loop ``F``'s values from stacks:
``F`` pushes in iterations 0..N-1, ``B`` pops them in reverse. Differentiating ``B``
builds its own gradient loop ``GB``, which runs ``B`` backwards, that is in ``F``'s
order; the gradient of ``F`` itself (``GF``) runs in reverse of ``F``. So the gradient
of each pop (made in ``GB``, in F-order) must reach its push (in ``GF``, in reverse
F-order): it goes through a new stack, pushed in ``GB`` and popped in ``GF`` once
``GB`` has finished. The gradient of a pop is that push; the gradient of a push is its
value's pass-through gradient plus that pop (``gradients`` delivers it, because it
treats a pop as reading the values pushed onto its stack). In a nest of loops the stack
lives outside the nest, as a forward loop's history does (``_outermost``); a pop inside
a gradient cond has its gradient pushed only in the iterations its branch ran.
"""
from __future__ import annotations

from ..control_flow.context import CondContext
from ..framework.graph import get_default_graph
from ..ops import data_flow_ops
from ..ops.array_ops import identity
from .loop_state import forward_while_context, stack_pushed_values
from .registry import RegisterGradient


@RegisterGradient("StackPush")
def _stack_push_grad(op, grad):
    """A push passes its value through: the value's gradient is the output's."""
    return [None, grad]


@RegisterGradient("StackPop")
def _stack_pop_grad(op, grad):
    """Save this pop's gradient (one per iteration of the gradient loop differentiated
    here) and give it back, in reverse, to the push that fed the pop."""
    pushed = stack_pushed_values(op)
    if not pushed:
        return [None]
    g = get_default_graph()
    grad_ctx = g._get_control_flow_context().GetWhileContext()
    pop_state = grad_ctx.grad_state            # differentiates the pop's loop (B)
    result = [None]
    for value in pushed:
        push_state = pop_state.control_flow_state.state_of(forward_while_context(value.op))
        result.append(_route_to_push(grad, value, pop_state, push_state))
    return result


def _route_to_push(grad, value, pop_state, push_state):
    """Push ``grad`` in the pop's gradient loop; pop it in the push's gradient loop."""
    g = get_default_graph()
    grad_ctx = pop_state.grad_context
    # The stack lives outside the outermost gradient loop around these pushes that does
    # not also hold the pops: in a nest, one stack serves every run of the inner loop.
    top = _outermost(pop_state, push_state)
    outer = top.grad_context.outer_context
    current = g._get_control_flow_context()
    with g.control_dependencies(None):
        handle = _in_exactly(outer, lambda: data_flow_ops.stack(grad.dtype, name="b_pop_grad"))
        grad_ctx.Enter()
        try:
            push = data_flow_ops.stack_push(grad_ctx.AddValue(handle), grad,
                                            swap_memory=grad_ctx.swap_memory)
        finally:
            grad_ctx.Exit()
    if isinstance(current, CondContext):
        # In a gradient cond (a pop of a value saved in a cond): pushed when it runs.
        push.op._set_control_flow_context(current)
    # Pushes in iteration order: after this iteration's counter step, before the next's.
    push.op._add_control_input(pop_state.grad_index.op.inputs[0].op)
    pop_state.grad_sync._add_control_input(push.op)
    # The push's gradient loop pops only once every push is done: once the outermost
    # gradient loop around the pushes has counted down (its counter Exit).
    done = top.grad_context.loop_exits[0]

    def after_pushes():
        with g.control_dependencies([done.op]):
            return identity(handle, name="b_pop_grad_done")
    history = _in_exactly(outer, after_pushes)
    # Entered into the push's gradient loop, guarded by the push's cond predicate if
    # any: a push inside a cond was popped inside the gradient cond, so its gradient
    # is pushed here only in the iterations that pushed.
    return push_state.add_backprop_accumulated_value(history, value)


def _outermost(pop_state, push_state):
    """The outermost gradient loop around the pushes (``pop_state``'s) that does not
    also enclose the pops (``push_state``'s). The stack lives just outside it: a nest
    pushes in every run of its inner loop onto one stack, as a forward loop's history
    does, and a loop enclosing both ends (``gradients`` called in a loop's body, then
    differentiated from outside) runs pushes and pops in one of its iterations."""
    around_pops, state = set(), push_state
    while state is not None:
        around_pops.add(state.grad_context)
        state = state.outer_grad_state
    state = pop_state
    while state.outer_grad_state is not None \
            and state.outer_grad_state.grad_context not in around_pops:
        state = state.outer_grad_state
    return state


def _in_exactly(ctx, fn):
    """``fn()`` built in control-flow context ``ctx`` (None: outside every loop)."""
    g = get_default_graph()
    saved = g._get_control_flow_context()
    g._set_control_flow_context(ctx)
    try:
        return fn()
    finally:
        g._set_control_flow_context(saved)
