"""``gradients``: reverse-mode differentiation of a graph (``tf.compat.v1.gradients``).

The backward walk visits the ops between ``xs`` and ``ys`` in reverse
dependency order. An op is processed once the gradients of all its outputs
that lead to ``ys`` have arrived; its registered gradient function then builds
the gradients of its inputs, which are summed (``add_n``) where an input feeds
several consumers.

>>> x = df.placeholder(df.float32)
>>> y = x * x + 3.0 * x
>>> dy_dx, = gradients(y, [x])      # 2x + 3
>>> float(df.Session().run(dy_dx, {x: 2.0}))
7.0
"""
from __future__ import annotations

import collections
import enum

from .. import dtypes as _dtypes
from ..framework.convert import convert_to_tensor
from ..framework.graph import Operation, Tensor, get_default_graph
from ..framework.indexed_slices import IndexedSlices
from ..control_flow.context import is_loop_exit
from .loop_state import forward_while_context, is_loop_switch, maybe_create_control_flow_state
from .loop_state import stack_pops_of, stack_pushed_values
from .registry import accepts_indexed_slices, get_gradient_function, is_not_differentiable

__all__ = ["gradients", "UnconnectedGradients"]

def _as_list(x):
    return list(x) if isinstance(x, (list, tuple)) else [x]


def _backpropagatable(t: Tensor) -> bool:
    """Tensors a gradient can flow along: floating point, and resource handles."""
    return t.dtype.is_floating or t.dtype is _dtypes.resource


def _as_source(x) -> Tensor:
    """A differentiation source: a tensor, or a Variable's handle (all its reads)."""
    handle = getattr(x, "handle", None)
    if handle is not None and isinstance(handle, Tensor):
        return handle
    return convert_to_tensor(x)


def _inputs_of(op: Operation) -> list:
    """``op``'s inputs, and for a stack pop the values pushed onto its stack: the edge a
    gradient loop's history carries, which a second-order gradient differentiates."""
    if op.type != "StackPop":
        return op._inputs
    return list(op._inputs) + stack_pushed_values(op)


def _reached_from(xs) -> set:
    """Ops reachable from ``xs`` along backpropagatable tensors."""
    reached, stack = set(), [x.op for x in xs]
    while stack:
        op = stack.pop()
        if op in reached:
            continue
        reached.add(op)
        for t in op._outputs:
            if _backpropagatable(t):
                stack.extend(c for c in t._consumers if c not in reached)
        if op.type == "StackPush":
            stack.extend(stack_pops_of(op))
    return reached


def _between(ys, reached) -> list[Operation]:
    """Ops on a path from ``xs`` to ``ys`` (``reached`` holds those reachable from xs)."""
    between, seen, stack = [], set(), [y.op for y in ys]
    while stack:
        op = stack.pop()
        if op in seen or op not in reached:
            continue
        seen.add(op)
        between.append(op)
        stack.extend(t.op for t in _inputs_of(op))
    return between


def _aggregate(grads):
    """The sum of the gradients reaching one tensor, as TF1 sums them: sparse gradients
    (IndexedSlices) alone stay sparse, their rows and indices concatenated; with any
    dense gradient among them, all are densified and added."""
    if not grads:
        return None
    if len(grads) == 1:
        return grads[0]
    from ..ops.array_ops import concat
    from ..ops.math_ops import add_n
    if all(isinstance(gr, IndexedSlices) for gr in grads):
        return IndexedSlices(concat([gr.values for gr in grads], 0),
                             concat([gr.indices for gr in grads], 0), grads[0].dense_shape)
    return add_n([convert_to_tensor(gr) for gr in grads])


def _dense_for(op: Operation, grad):
    """``grad`` as ``op``'s gradient function takes it: densified unless it accepts
    IndexedSlices (TF's gradient functions see them densified by their first op)."""
    if isinstance(grad, IndexedSlices) and not accepts_indexed_slices(op.type):
        return convert_to_tensor(grad)
    return grad


def _zeros_for(op: Operation, index: int) -> Tensor:
    """A zero gradient for output ``index`` of ``op``.

    For a Switch inside a cond branch, the zeros are made on the *other* branch
    (behind a Switch of the same predicate): they exist exactly when that branch is
    taken, so the gradient Merge of the Switch always has one live input.
    """
    from ..ops.array_ops import fill, identity, shape, zeros_like
    from ..ops.control_flow_ops import switch
    out = op._outputs[index]
    ctx = op._control_flow_context
    if op.type == "Switch" and ctx is not None and ctx.IsCondContext():
        other = switch(op._inputs[0], ctx.pred)[1 - ctx.branch]
        if out.dtype is _dtypes.resource:
            # A variable handle: its gradient is shaped like the variable's value.
            other = _read_handle(other)
        pivot = identity(other)
        with get_default_graph().control_dependencies([pivot]):
            zero = convert_to_tensor(0, dtype=other.dtype)
        return fill(shape(other), zero)
    if out.dtype is _dtypes.resource:
        return zeros_like(_read_handle(out))
    return zeros_like(out)


def _read_handle(handle: Tensor) -> Tensor:
    """A read of the variable behind ``handle`` (through Switch, Enter and Identity)."""
    op = handle.op
    while op.type != "VarHandleOp":
        if not op.inputs:
            raise TypeError(f"Cannot find the variable behind resource tensor {handle.name}")
        op = op.inputs[0].op
    return get_default_graph().create_op(
        "ReadVariableOp", [handle], {"dtype": op.get_attr("dtype"),
                                     "shape": op.get_attr("shape")}).outputs[0]


class UnconnectedGradients(enum.Enum):
    """What ``gradients`` returns for a source no path from ``ys`` reaches (TF's enum):
    ``NONE`` (None) or ``ZERO`` (zeros shaped as the source)."""

    NONE = "none"
    ZERO = "zero"


def gradients(ys, xs, grad_ys=None, name="gradients", colocate_gradients_with_ops=False,
              gate_gradients=False, aggregation_method=None, stop_gradients=None,
              unconnected_gradients=UnconnectedGradients.NONE):
    """Symbolic derivatives of ``sum(ys)`` with respect to each of ``xs``.

    Returns a list aligned with ``xs``: a tensor per source, ``None`` where no
    path leads from the source to ``ys``. ``grad_ys`` are the initial gradients
    (ones by default); ``stop_gradients`` are tensors treated as constants.
    A ``Variable`` in ``xs`` gets the gradient of all its reads.
    ``unconnected_gradients="zero"`` gives zeros instead of ``None``. TF1's
    ``colocate_gradients_with_ops``, ``gate_gradients`` and ``aggregation_method`` are
    accepted and change nothing (one Session step runs at a time; sums are ``add_n``).

    >>> x, z = df.constant([1.0, 2.0]), df.constant(3.0)
    >>> gradients(df.reduce_sum(x * x), [x, z], unconnected_gradients="zero")[1].op.type
    'ZerosLike'

    >>> w, b = df.Variable([1.0, 2.0]), df.Variable(0.5)
    >>> loss = df.reduce_sum(w * w) + 3.0 * b
    >>> dw, db = gradients(loss, [w, b])
    >>> with df.Session() as sess:
    ...     sess.run(df.global_variables_initializer())
    ...     print(sess.run(dw), sess.run(db))
    [2. 4.] 3.0
    """
    ys = [convert_to_tensor(y) for y in _as_list(ys)]
    xs = [_as_source(x) for x in _as_list(xs)]
    if grad_ys is None:
        grad_ys = [None] * len(ys)
    grad_ys = _as_list(grad_ys)
    if len(grad_ys) != len(ys):
        raise ValueError(f"Passed {len(grad_ys)} grad_ys for {len(ys)} ys")
    stop_ops = {convert_to_tensor(t).op for t in _as_list(stop_gradients or [])}
    g = ys[0].graph if ys else get_default_graph()
    unconnected = UnconnectedGradients(getattr(unconnected_gradients, "value",
                                               unconnected_gradients))
    with g.as_default(), g.name_scope(name):
        grads = _backward(ys, xs, grad_ys, stop_ops)
        if unconnected is UnconnectedGradients.ZERO:
            grads = [_zeros_for(x.op, x.value_index) if gr is None else gr
                     for x, gr in zip(xs, grads)]
        return grads


def _initial_grad(y: Tensor, gy):
    """The starting gradient of ``y``: ``grad_ys`` or ones, of ``y``'s dtype.

    As TF, an integer ``y`` gets integer ones: no gradient flows from it into float
    sources (integers are not backpropagatable), but ``gradients(i, i)`` is its grad_ys.
    """
    from ..ops.array_ops import ones_like
    if gy is None:
        if not (y.dtype.is_floating or y.dtype.is_integer):
            raise TypeError(f"Gradients of {y.dtype.name} tensor {y.name} need an explicit "
                            "grad_ys")
        return ones_like(y)
    # As TF: grad_ys converts on its own (a Python float is float32) and must then have
    # y's dtype (TF's graph fails to build otherwise).
    gy = convert_to_tensor(gy)
    if gy.dtype is not y.dtype:
        raise TypeError(f"grad_ys for {y.name} has dtype {gy.dtype.name}, expected "
                        f"{y.dtype.name} (the dtype of {y.name})")
    if not y.shape.is_compatible_with(gy.shape):
        raise ValueError(f"grad_ys shape {gy.shape} is incompatible with {y.name}'s "
                         f"shape {y.shape}")
    return gy


def _backward(ys, xs, grad_ys, stop_ops):
    reached = _reached_from(xs)
    between = _between(ys, reached)
    between_set = set(between)
    loop_state = maybe_create_control_flow_state(between)
    if loop_state is not None:
        # Every Exit of a differentiated loop takes part (an unused one with zeros), so
        # each loop Switch gets its first, Exit-side gradient.
        for state in loop_state.states():
            for y in state.forward_loop_exits:
                if y.op not in between_set:
                    between_set.add(y.op)
                    between.append(y.op)
    pending = {op: 0 for op in between}
    for op in between:
        for t in _inputs_of(op):
            if t.op in between_set:
                pending[t.op] += 1
    # A source whose own inputs lead nowhere from the sources is where the walk ends.
    stop_ops = set(stop_ops) | {x.op for x in xs
                                if not any(t.op in between_set for t in x.op._inputs)}

    grads: dict = {}
    for y, gy in zip(ys, grad_ys):
        grads.setdefault(y, []).append(_initial_grad(y, gy))
    # Per tensor, the ids of the ops whose gradients made its terms (aligned with
    # grads[t] while every term came from a consumer): see _in_tape_order.
    makers: dict = {}

    # First in, first out (as TF): a loop's Exits are all processed, so every loop
    # Switch gets its first (Exit-side) gradient, before any body gradient reaches it.
    ready, targets = collections.deque(), set()
    for y in ys:
        if y.op in between_set and pending[y.op] == 0 and y.op not in targets:
            targets.add(y.op)
            ready.append(y.op)
    if loop_state is not None:
        for y in _unused_loop_exits(loop_state, pending, targets):
            if y.dtype.is_floating:
                grads.setdefault(y, []).append(loop_state.zeros_like_for_exit(y))
            ready.append(y.op)
    while ready:
        op = ready.popleft()
        in_grads = _input_grads(op, grads, stop_ops, loop_state, makers)
        for t, gi in zip(_inputs_of(op), in_grads):
            if gi is not None and _backpropagatable(t):
                grads.setdefault(t, []).append(gi)
                makers.setdefault(t, []).append(op._id)
        _update_pending(op, between_set, pending, ready, grads, loop_state)
    if loop_state is not None:
        _patch_ignored_loop_variables(loop_state)
    return [_aggregate(_in_tape_order(grads.get(x), makers.get(x))) for x in xs]


def _in_tape_order(terms, made_by):
    """The gradient terms reaching one tensor in the order a ``GradientTape`` adds them:
    by the op that made each, latest-created first (the tape walks its ops back from
    the last recorded), terms of one op in input order. The same program differentiated
    by the tape and by ``gradients`` then rounds its sums alike (float addition is not
    associative). Terms that did not all come from consumers (a loop's zeros, a second
    visit of a loop Switch) keep the order they came in, and so do sparse terms alone
    (concatenated, not added: nothing rounds, and TF1 gives its rows in this order)."""
    if terms is None or len(terms) < 2 or made_by is None or len(made_by) != len(terms):
        return terms
    if all(isinstance(gr, IndexedSlices) for gr in terms):
        return terms
    order = sorted(range(len(terms)), key=lambda i: -made_by[i])
    return [terms[i] for i in order]


def _update_pending(op, between_set, pending, ready, grads, loop_state):
    """Count ``op``'s inputs as done; queue the producers whose gradients are complete.

    In a while loop, a Switch is queued at its first gradient (from the Exit) and again
    at its last (from the body), and the Exits of a loop are processed together, once
    each has its gradient or is known to get none.
    """
    for t in _inputs_of(op):
        src = t.op
        if src not in between_set:
            continue
        pending[src] -= 1
        is_ready = pending[src] == 0
        if not is_ready and loop_state is not None:
            is_ready = pending[src] > 0 and is_loop_switch(src)
        if not is_ready:
            continue
        if loop_state is not None and is_loop_exit(src):
            _defer_exit(t, loop_state, ready, grads)
        else:
            ready.append(src)


def _defer_exit(t, loop_state, ready, grads):
    state = loop_state.get_grad_state(t.op, before=False)
    state.deferred_exits.append(t)
    state.pending_exits_count -= 1
    if state.pending_exits_count:
        return
    used = [y for y in state.deferred_exits if any(grads.get(o) for o in y.op._outputs)]
    state.unused_exits.extend(y for y in state.deferred_exits if y not in used)
    ready.extend(y.op for y in used)
    for y in state.unused_exits:
        if (used or state.reached_through_history) and y.dtype.is_floating:
            # Some exit (or, for a second-order gradient, a value the loop saved for
            # its gradient loop) has a gradient: the loop's gradient runs, and an
            # unused exit contributes zeros to it.
            grads.setdefault(y, []).append(loop_state.zeros_like_for_exit(y))
        ready.append(y.op)


def _unused_loop_exits(loop_state, pending, targets):
    """Exits that no gradient reaches: they get zeros once all of their loop's exits are
    accounted for (TF's ProcessUnusedLoopExits)."""
    exits = []
    for state in loop_state.states():
        for y in state.forward_loop_exits:
            if pending.get(y.op, 0) == 0:
                state.pending_exits_count -= 1
                if y.op not in targets:
                    state.unused_exits.append(y)
                if state.pending_exits_count == 0:
                    exits.extend(state.unused_exits)
    return exits


def _patch_ignored_loop_variables(loop_state):
    """A loop variable whose next value does not depend on its current one: its
    gradient for iterations after the first is zero."""
    from ..ops.array_ops import shape as shape_of
    from ..ops.array_ops import zeros
    from ..ops.control_flow_ops import next_iteration
    for state in loop_state.states():
        for b_merge in state.switch_map.values():
            first, second = b_merge.op.inputs
            if first is not second:
                continue
            if first.shape.is_fully_defined():
                state.grad_context.Enter()
                try:
                    nxt = next_iteration(zeros(first.shape.as_list(), first.dtype))
                finally:
                    state.grad_context.Exit()
            else:
                outer = state.grad_context.outer_context
                entered = first.op.inputs[0]
                if outer is not None:
                    outer.Enter()
                try:
                    zero = zeros(shape_of(entered), first.dtype)
                finally:
                    if outer is not None:
                        outer.Exit()
                state.grad_context.Enter()
                try:
                    nxt = next_iteration(zero)
                finally:
                    state.grad_context.Exit()
            b_merge.op._update_input(1, nxt)


def _input_grads(op: Operation, grads: dict, stop_ops: set, loop_state, makers=None):
    """Build the gradients of ``op``'s inputs from its (summed) output gradients.

    The sum is built where the output gradients live (for an Exit: the enclosing
    gradient loop); the gradient function runs in the gradient loop of ``op``'s own
    loop, if it has one.
    """
    entered = loop_state.enter_grad_context(op, before=True) if loop_state else []
    try:
        out_grads = [_aggregate(_in_tape_order(grads.get(t), makers and makers.get(t)))
                     for t in op._outputs]
        for t, gr in zip(op._outputs, out_grads):
            if gr is not None:  # summed once: a loop Switch's second visit reuses it
                grads[t] = [gr]
                if makers:
                    makers.pop(t, None)
        if op not in stop_ops and get_gradient_function(op) is not None:
            out_grads = [_dense_for(op, gr) for gr in out_grads]
    finally:
        if entered:
            loop_state.exit_grad_context(entered)
    inputs = _inputs_of(op)
    none = [None] * len(inputs)
    if op in stop_ops or all(g is None for g in out_grads):
        return none
    fn = get_gradient_function(op)
    if fn is None:
        if is_not_differentiable(op.type):
            return none
        raise LookupError(f"No gradient defined for operation '{op.name}' (op type: "
                          f"{op.type}). Register one with df.RegisterGradient('{op.type}') "
                          f"or declare it with df.NotDifferentiable('{op.type}').")
    g = op.graph
    entered = loop_state.enter_grad_context(op, before=False) if loop_state else []
    try:
        with g.name_scope(op.name + "_grad"):
            out_grads = [gr if gr is not None or not _backpropagatable(t)
                         else _missing_grad(op, i, loop_state)
                         for i, (t, gr) in enumerate(zip(op._outputs, out_grads))]
            result = fn(op, *out_grads)
    finally:
        if entered:
            loop_state.exit_grad_context(entered)
    result = list(result) if isinstance(result, (list, tuple)) else [result]
    if len(result) != len(inputs):
        raise ValueError(f"Gradient function of '{op.name}' ({op.type}) returned "
                         f"{len(result)} gradients for {len(inputs)} inputs")
    for t, gi in zip(inputs, result):
        if gi is not None and t.dtype.is_floating and gi.dtype is not t.dtype:
            raise TypeError(f"Gradient function of '{op.name}' ({op.type}) returned a "
                            f"{gi.dtype.name} gradient for {t.dtype.name} input {t.name}")
    return result


def _missing_grad(op, index, loop_state):
    """Zeros for an output nobody differentiates (None for a loop Switch's body side)."""
    if loop_state is not None and forward_while_context(op) is not None:
        if is_loop_switch(op):
            return None
        if op._outputs[index].dtype is _dtypes.resource:
            return _zeros_for(op, index)
        zero = loop_state.zeros_like(op, index)
        if zero is not None:
            return zero
    return _zeros_for(op, index)
