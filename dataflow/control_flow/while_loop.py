"""``while_loop``, compiled to Enter, Merge, Switch, NextIteration and Exit.

This follows the design note "Implementation of Control Flow in TensorFlow" (Yuan Yu,
2016), section 3 "Compilation of control-flow constructs", 3.2 "While loop" (its
figure 3 draws the example below); the frames and iterations the executor gives these
ops are its section 4 "Implementation". For one loop variable with initial value
``x0`` and a tensor ``c`` captured from outside, the emitted subgraph is::

      x0                                   c (defined outside the loop)
      |                                    |
    Enter(frame)                         Enter(frame, is_constant=True)
      |                                    |   the same value in every iteration
      v                                    v   (loop invariant), read by cond/body
    Merge(Enter, NextIteration) <-----------------------------------+
      |                                                             |
      +--> cond(...) --> LoopCond  (the loop's predicate)           |
      |                     |                                       |
      +--> Switch(Merge, LoopCond)                                  | back edge:
             :0 |         :1 |                                      | Merge input 1
              Exit        Identity  (the first one: body pivot)     |
                |            |                                      |
              result      body(...) --> NextIteration --------------+

Each loop variable gets its own Enter, Merge, Switch, Identity, NextIteration and Exit;
all Switches share the one LoopCond. The Merge is built as ``Merge([Enter, Enter])``
and its input 1 is replaced by the NextIteration once the body exists (TF's
``_update_input``), closing the cycle. Ops without a data input inside the frame
(constants) take a control edge from the first Merge when ``cond`` builds them and
from the body pivot when ``body`` does, so they run once per iteration in the frame.

``maximum_iterations=n`` adds a counter as loop variable 0, and its test to the
predicate; the counter's Exit is dropped from the result::

    Const 0 --> Enter --> Merge <--------------------------------- NextIteration
                            |                                            ^
                            +--> Less(i, Enter(n, is_constant=True))     |
                            |        |                                   |
                            |    LogicalAnd(<-- cond(...)) --> LoopCond  |
                            |                                     |      |
                            +--> Switch(Merge, LoopCond) <--------+      |
                                   :0 |        :1 |                      |
                                 Exit       Identity --> AddV2(i, 1) ----+

A loop nested in another loop's body whose variable starts from an outer loop
invariant gets the outer-pivot edge: the inner loop-variable Enter takes a control
edge from the outer loop's body pivot. A constant Enter hands its value to every
iteration of the outer frame, including the last one, whose predicate is false and
whose body does not run; the edge keeps the inner loop from starting there::

    c --> Enter(outer frame, is_constant=True) --> Enter(inner frame) --> Merge ...
                                                     ^
    outer Switch --:1--> Identity (outer body pivot) + (control edge)

>>> with df.Graph().as_default() as g:
...     i = while_loop(lambda i: i < 10, lambda i: df.add(i, 1), [0])
...     [op.type for op in g.get_operations()]
['Const', 'Enter', 'Merge', 'Const', 'Less', 'LoopCond', 'Switch', 'Identity', 'Const',
 'AddV2', 'NextIteration', 'Exit']
"""
from __future__ import annotations

from ..framework.convert import constant, convert_to_tensor
from ..framework.eager import executing_eagerly
from ..framework.graph import Tensor, get_default_graph
from ..framework.tensor_shape import TensorShape, as_shape
from ..ops.array_ops import identity
from ..ops.control_flow_ops import exit as exit_op
from ..ops.control_flow_ops import loop_cond, merge, next_iteration, switch
from ..ops.math_ops import logical_and
from ..ops.tensor_array_ops import flow_of, is_tensor_array, with_flow
from ..util import nest
from .context import WhileContext, is_loop_constant_enter
from .eager_control import eager_while_loop

__all__ = ["while_loop"]


def _shape_less_equal(a: TensorShape, b: TensorShape) -> bool:
    """True if every shape ``a`` may take is allowed by invariant ``b``."""
    if b.ndims is None:
        return True
    if a.ndims != b.ndims:
        return False
    return all(y is None or x == y for x, y in zip(a.dims, b.dims))


def while_loop(cond, body, loop_vars, shape_invariants=None, parallel_iterations=10,
               back_prop=True, swap_memory=False, name=None, maximum_iterations=None,
               return_same_structure=False):
    """Repeat ``body`` while ``cond`` is true (``tf.compat.v1.while_loop``).

    ``loop_vars`` is a list/tuple (or any nest of tuples, lists, dicts,
    namedtuples) of tensors; ``cond(*loop_vars)`` returns a scalar bool tensor
    and ``body(*loop_vars)`` returns the same structure. A single loop variable
    comes back bare unless ``return_same_structure``. ``shape_invariants``
    relaxes the static shapes a variable may take across iterations;
    ``maximum_iterations`` stops the loop after that many iterations.

    >>> i, acc = while_loop(lambda i, a: i < 5, lambda i, a: (i + 1, a * 2.0), (0, 1.0))
    >>> capped = while_loop(lambda a: a < 1e6, lambda a: a * 2.0, [1.0], maximum_iterations=3)
    >>> with df.Session() as sess:
    ...     [float(v) for v in sess.run([i, acc, capped])]
    [5.0, 32.0, 8.0]
    """
    if not callable(cond):
        raise TypeError("cond must be callable.")
    if not callable(body):
        raise TypeError("body must be callable.")
    if isinstance(parallel_iterations, bool) or not isinstance(parallel_iterations, int) \
            or parallel_iterations < 1:
        raise TypeError("parallel_iterations must be a positive integer.")
    if loop_vars is None or (nest.is_sequence(loop_vars) and not nest.flatten(loop_vars)):
        raise ValueError("No loop variables provided")
    wrapped = not isinstance(loop_vars, (list, tuple))
    if wrapped:  # a bare tensor or a dict: one loop argument
        loop_vars = [loop_vars]
    if executing_eagerly():
        return eager_while_loop(cond, body, loop_vars, maximum_iterations, wrapped,
                                return_same_structure)
    g = get_default_graph()
    with g.name_scope(name or "while"):
        try_to_pack = len(loop_vars) == 1 and not return_same_structure \
            and isinstance(loop_vars, (list, tuple))
        if maximum_iterations is not None:
            max_iter = convert_to_tensor(maximum_iterations, name="maximum_iterations")
            if max_iter.shape.ndims != 0:
                raise ValueError(f"maximum_iterations must be a scalar, saw shape: "
                                 f"{max_iter.shape}")
            if not max_iter.dtype.is_integer:
                raise TypeError("maximum_iterations must be an integer tensor")
            counter = constant(0, dtype=max_iter.dtype, name="iteration_counter")
            user_cond, user_body = cond, body
            if try_to_pack:
                loop_vars = (counter, loop_vars[0])
                cond = lambda i, lv: logical_and(i < max_iter, user_cond(lv))  # noqa: E731
                body = lambda i, lv: (i + 1, user_body(lv))  # noqa: E731
            else:
                loop_vars = (counter, loop_vars)
                cond = lambda i, lv: logical_and(i < max_iter, user_cond(*lv))  # noqa: E731
                body = lambda i, lv: (i + 1, user_body(*lv))  # noqa: E731
            if shape_invariants is not None:
                shape_invariants = (TensorShape([]), shape_invariants[0] if try_to_pack
                                    and isinstance(shape_invariants, (list, tuple))
                                    and len(shape_invariants) == 1 else shape_invariants)
            try_to_pack = False
        else:
            max_iter = None
        ctx = WhileContext(parallel_iterations=parallel_iterations, back_prop=back_prop,
                           swap_memory=swap_memory, maximum_iterations=max_iter)
        body_result, exits = _build_loop(ctx, cond, body, loop_vars, shape_invariants)
        packed = nest.pack_sequence_as(body_result, exits)
        if maximum_iterations is not None:
            packed = packed[1]
            exits = exits[1:]
        if wrapped:
            return packed[0]
        if return_same_structure:
            return packed
        if len(exits) == 1:
            return exits[0]
        return packed


def _build_loop(ctx: WhileContext, pred, body, loop_vars, shape_invariants):
    g = ctx._graph
    # A TensorArray travels through the loop as its flow and is rebuilt around it.
    templates = nest.flatten(loop_vars)
    flat_vars = [convert_to_tensor(flow_of(v)) for v in templates]
    if shape_invariants is None:
        flat_inv = [v.shape for v in flat_vars]
    else:
        try:
            nest.assert_same_structure(_as_structure(loop_vars), _invariant_structure(
                shape_invariants, loop_vars))
        except ValueError as e:
            raise ValueError(f"shape_invariants must have the structure of loop_vars: {e}") \
                from None
        flat_inv = [v.shape if is_tensor_array(t) else as_shape(s) for s, t, v in
                    zip(_flatten_invariants(shape_invariants, loop_vars), templates, flat_vars)]
    outer_deps = [c for ctrl in g._control_dependencies_stack for c in ctrl.control_inputs]

    # The ops of the loop do not take the control dependencies active around it: the
    # loop-variable Enters carry them (fix_enter_control_inputs) and every op of the
    # frame runs after an Enter. TF gets the same effect by marking the Enters as seen
    # by the outer controllers, so ops consuming them are "dominated"; without this, a
    # Merge would get an external control input to pull into the loop before the loop
    # has a pivot.
    with g.control_dependencies(None):
        ctx.Enter()
        try:
            real_vars = flat_vars
            if ctx.outer_context is not None:
                real_vars = [ctx.outer_context.AddValue(x) for x in flat_vars]
            enters = [ctx._enter(x, is_constant=False) for x in real_vars]
            _add_outer_pivot(ctx, enters)
            ctx.fix_enter_control_inputs(enters, outer_deps)
            for x, e, inv in zip(real_vars, enters, flat_inv):
                if not _shape_less_equal(x.shape, inv):
                    raise ValueError(
                        f"The shape invariant specified for {x.name} is not compatible with "
                        f"the initial shape of the loop variable. It enters the loop with "
                        f"shape {x.shape}, but the specified shape invariant is {inv}.")
                e._shape = inv
            ctx._values = set(enters)
            ctx.loop_enters = enters

            merges = [merge([e, e])[0] for e in enters]
            ctx.pivot_for_pred = merges[0]
            packed = nest.pack_sequence_as(_as_structure(loop_vars),
                                           [with_flow(t, m) for t, m in zip(templates, merges)])
            c = convert_to_tensor(pred(*packed))
            if not c.dtype.is_bool or c.shape.ndims not in (0, None):
                raise TypeError(f"while_loop: cond must return a scalar bool tensor, got "
                                f"{c.dtype.name} of shape {c.shape}")
            ctx.pivot = loop_cond(c, name="LoopCond")
            switches = [switch(m, ctx.pivot) for m in merges]
            body_vars = [identity(s[1]) for s in switches]
            ctx.pivot_for_body = body_vars[0]
            packed_body = nest.pack_sequence_as(
                _as_structure(loop_vars), [with_flow(t, v) for t, v in zip(templates, body_vars)])
            result = body(*packed_body)
            if not nest.is_sequence(result):
                result = [result]
            try:
                nest.assert_same_structure(list(packed_body), list(result))
            except ValueError as e:
                raise ValueError("while_loop: body must return the structure of loop_vars. "
                                 f"{e}") from None
            flat_result = [convert_to_tensor(flow_of(v)) for v in nest.flatten(result)]
            for m, v, x in zip(merges, flat_result, flat_vars):
                _add_next_and_back_edge(m, v, x)
            exits = [exit_op(s[0]) for s in switches]
            ctx.loop_exits = exits
        finally:
            ctx.Exit()
    if ctx.outer_context is not None:
        for e in exits:
            ctx.outer_context.AddName(e)
    return result, [with_flow(t, e) for t, e in zip(templates, exits)]


def _as_structure(loop_vars):
    return list(loop_vars) if isinstance(loop_vars, tuple) and not hasattr(
        loop_vars, "_fields") else loop_vars


def _invariant_structure(shape_invariants, loop_vars):
    """Shape invariants are leaves (TensorShape/list/None) in the structure of loop_vars."""
    flat = _flatten_invariants(shape_invariants, loop_vars)
    return nest.pack_sequence_as(_as_structure(loop_vars), [0] * len(flat)) \
        if len(flat) == len(nest.flatten(loop_vars)) else shape_invariants


def _flatten_invariants(shape_invariants, loop_vars):
    out = []

    def walk(inv, var):
        if not nest.is_sequence(var):
            out.append(inv)
            return
        if isinstance(var, dict):
            if not isinstance(inv, dict) or set(inv) != set(var):
                raise ValueError("shape_invariants must have the structure of loop_vars")
            for k in sorted(var, key=lambda k: (type(k).__name__, k)):
                walk(inv[k], var[k])
            return
        if not isinstance(inv, (list, tuple)) or len(inv) != len(var):
            raise ValueError("shape_invariants must have the structure of loop_vars")
        for i, v in zip(inv, var):
            walk(i, v)

    walk(shape_invariants, loop_vars)
    return out


def _add_outer_pivot(ctx: WhileContext, enters):
    """A loop-variable Enter fed by an outer loop invariant waits for the outer pivot."""
    outer = ctx.outer_context
    pivot = None
    while outer is not None and pivot is None:
        pivot = outer.GetControlPivot()
        outer = outer.outer_context
    if pivot is None:
        return
    for e in enters:
        if is_loop_constant_enter(e.op._inputs[0].op):
            e.op._add_control_input(pivot.op)


def _add_next_and_back_edge(m: Tensor, v: Tensor, initial: Tensor):
    if v.dtype is not m.dtype:
        raise TypeError(f"Loop variable '{initial.name}' enters the loop with dtype "
                        f"{m.dtype.name}, but the body returns dtype {v.dtype.name} for it.")
    nxt = next_iteration(v)
    if not _shape_less_equal(v.shape, m.shape):
        raise ValueError(
            f"Input tensor '{initial.name}' enters the loop with shape {m.shape}, but has "
            f"shape {v.shape} after one iteration. To allow the shape to vary across "
            "iterations, use the `shape_invariants` argument of while_loop to specify a "
            "less-specific shape.")
    m.op._update_input(1, nxt)
