"""``gradients``: reverse-mode differentiation of a graph (``tf.compat.v1.gradients``).

The backward walk visits the ops between ``xs`` and ``ys`` in reverse
dependency order. An op is processed once the gradients of all its outputs
that lead to ``ys`` have arrived; its registered gradient function then builds
the gradients of its inputs, which are summed (``add_n``) where an input feeds
several consumers.

>>> x = placeholder(float32)
>>> y = x * x + 3.0 * x
>>> dy_dx, = gradients(y, [x])      # 2x + 3
"""
from __future__ import annotations

from .. import dtypes as _dtypes
from ..framework.convert import convert_to_tensor
from ..framework.graph import Operation, Tensor, get_default_graph
from .registry import get_gradient_function, is_not_differentiable

__all__ = ["gradients"]

# Ops of while loops: their gradients (stacks, gradient loops) are not built yet.
_LOOP_OPS = ("Enter", "Exit", "NextIteration")


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
        stack.extend(t.op for t in op._inputs)
    return between


def _aggregate(grads):
    if not grads:
        return None
    if len(grads) == 1:
        return grads[0]
    from ..ops.math_ops import add_n
    return add_n(grads)


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
        pivot = identity(other)
        with get_default_graph().control_dependencies([pivot]):
            zero = convert_to_tensor(0, dtype=out.dtype)
        return fill(shape(other), zero)
    return zeros_like(out)


def gradients(ys, xs, grad_ys=None, name="gradients", stop_gradients=None):
    """Symbolic derivatives of ``sum(ys)`` with respect to each of ``xs``.

    Returns a list aligned with ``xs``: a tensor per source, ``None`` where no
    path leads from the source to ``ys``. ``grad_ys`` are the initial gradients
    (ones by default); ``stop_gradients`` are tensors treated as constants.
    A ``Variable`` in ``xs`` gets the gradient of all its reads.

    >>> dw, db = gradients(loss, [w, b])
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
    with g.as_default(), g.name_scope(name):
        return _backward(ys, xs, grad_ys, stop_ops)


def _initial_grad(y: Tensor, gy):
    from ..ops.array_ops import ones_like
    if gy is None:
        if not y.dtype.is_floating:
            raise TypeError(f"Gradients of non-float tensor {y.name} ({y.dtype.name}) "
                            "need an explicit grad_ys")
        return ones_like(y)
    gy = convert_to_tensor(gy, dtype=y.dtype)
    if not y.shape.is_compatible_with(gy.shape):
        raise ValueError(f"grad_ys shape {gy.shape} is incompatible with {y.name}'s "
                         f"shape {y.shape}")
    return gy


def _backward(ys, xs, grad_ys, stop_ops):
    reached = _reached_from(xs)
    between = _between(ys, reached)
    between_set = set(between)
    for op in between:
        if op.type in _LOOP_OPS:
            raise ValueError(
                f"Gradients through while_loop are not available yet: '{op.name}' "
                f"({op.type}) lies between the sources and the targets.")
    pending = {op: 0 for op in between}
    for op in between:
        for t in op._inputs:
            if t.op in between_set:
                pending[t.op] += 1
    # A source whose own inputs lead nowhere from the sources is where the walk ends.
    stop_ops = set(stop_ops) | {x.op for x in xs
                                if not any(t.op in between_set for t in x.op._inputs)}

    grads: dict = {}
    for y, gy in zip(ys, grad_ys):
        grads.setdefault(y, []).append(_initial_grad(y, gy))

    ready = []
    for y in ys:
        if y.op in between_set and pending[y.op] == 0 and y.op not in ready:
            ready.append(y.op)
    while ready:
        op = ready.pop()
        in_grads = _input_grads(op, grads, stop_ops)
        for t, gi in zip(op._inputs, in_grads):
            if gi is not None and _backpropagatable(t):
                grads.setdefault(t, []).append(gi)
            if t.op in between_set:
                pending[t.op] -= 1
                if pending[t.op] == 0:
                    ready.append(t.op)
    return [_aggregate(grads.get(x)) for x in xs]


def _input_grads(op: Operation, grads: dict, stop_ops: set):
    """Build the gradients of ``op``'s inputs from its (aggregated) output gradients."""
    out_grads = [_aggregate(grads.get(t)) for t in op._outputs]
    none = [None] * len(op._inputs)
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
    with g.name_scope(op.name + "_grad"):
        out_grads = [gr if gr is not None or not t.dtype.is_floating else _zeros_for(op, i)
                     for i, (t, gr) in enumerate(zip(op._outputs, out_grads))]
        result = fn(op, *out_grads)
    result = list(result) if isinstance(result, (list, tuple)) else [result]
    if len(result) != len(op._inputs):
        raise ValueError(f"Gradient function of '{op.name}' ({op.type}) returned "
                         f"{len(result)} gradients for {len(op._inputs)} inputs")
    for t, gi in zip(op._inputs, result):
        if gi is not None and t.dtype.is_floating and gi.dtype is not t.dtype:
            raise TypeError(f"Gradient function of '{op.name}' ({op.type}) returned a "
                            f"{gi.dtype.name} gradient for {t.dtype.name} input {t.name}")
    return result
