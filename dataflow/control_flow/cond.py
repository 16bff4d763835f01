"""``cond`` and ``case``, compiled to Switch and Merge.

This follows the design note "Implementation of Control Flow in TensorFlow" (Yuan Yu,
2016), section 3 "Compilation of control-flow constructs", 3.1 "Conditional
expression" (its figure 2 draws the example below). ``cond(pred, true_fn,
false_fn)`` builds each branch in a :class:`CondContext`; every tensor a branch
captures from outside goes through one ``Switch(x, pred_id)`` (one per tensor and
branch, cached), the true branch reading output 1 and the false branch output 0, and
one Merge per output joins the two branch results (inputs ``[false, true]``). For
``cond(x < y, lambda: add(x, z), lambda: square(y))`` the emitted subgraph is::

    pred = Less(x, y)
      |
      +--> Switch(pred, pred) --:1--> Identity "switch_t"   pivot of the true branch
      |                       --:0--> Identity "switch_f"   pivot of the false branch
      +--> Identity "pred_id"          (the predicate input of every Switch below)

    x --> Switch(x, pred_id) --:1--+
                                   +--> AddV2 --------+ input 1
    z --> Switch(z, pred_id) --:1--+                  |
                                                      +--> Merge --> r
    y --> Switch(y, pred_id) --:0--> Square ---------+ input 0

Only the taken branch receives live values; the other receives dead tokens, skips its
ops and passes deadness on, and the Merge forwards its one live input. ``Switch(pred,
pred)`` makes the pivots: ``switch_t`` is live exactly when ``pred`` is true and
``switch_f`` when it is false. An op of a branch with no data input from the branch (a
constant) takes a control edge from its branch's pivot, so it is dead with the branch;
a branch that returns an Operation returns ``Identity(pivot)`` run after it. Nested
conds capture from the enclosing branch, so their Switches chain.

>>> with df.Graph().as_default() as g:
...     x, y, z = (df.placeholder(df.float32, [], name=n) for n in "xyz")
...     r = cond(x < y, lambda: df.add(x, z), lambda: df.square(y))
...     [op.type for op in g.get_operations()][3:]
['Less', 'Switch', 'Identity', 'Identity', 'Identity', 'AddV2', 'Switch', 'Switch',
 'Square', 'Switch', 'Merge']
"""
from __future__ import annotations

from ..framework.convert import convert_to_tensor
from ..framework.eager import executing_eagerly
from ..framework.graph import Operation, Tensor, get_default_graph
from ..ops.array_ops import identity
from ..ops.control_flow_ops import merge, switch
from ..ops.state_ops import set_cond_builder
from ..ops.tensor_array_ops import flow_of, with_flow
from ..util import nest
from .context import CondContext
from .eager_control import eager_case, eager_cond

__all__ = ["cond", "case"]


def _build_branch(ctx: CondContext, fn, which: str):
    ctx.Enter()
    try:
        original = fn()
        if original is None:
            raise ValueError(f"{which} must have a return value.")
        flat = [_branch_output(ctx, v) for v in nest.flatten(original)]
    finally:
        ctx.Exit()
    _exit_result(ctx, flat)
    return original, flat


def _exit_result(ctx: CondContext, flat):
    """Make the branch results known to the context the Merges are built in (TF's
    ``ExitResult``).

    Most results are already marked there, but not all: the Exit of a while loop
    built in the branch is only known to the branch, and a pass-through Switch only
    to its branch. Without this, the Merge would capture such a result again from
    the outer context -- through an extra Switch, or, when a loop lies in between,
    through an Enter of a tensor that lives inside that loop.
    """
    if ctx.outer_context is not None:
        for t in flat:
            ctx.outer_context.AddName(t)


def _branch_output(ctx: CondContext, v):
    g = get_default_graph()
    if isinstance(v, Operation):
        # An op result is represented by the pivot, run after the op.
        with g.control_dependencies([v]):
            return identity(ctx.pivot)
    if v is None:
        raise ValueError("cond branches must return tensors or operations, not None")
    return ctx.process_output(convert_to_tensor(flow_of(v)))  # a TensorArray: its flow


def cond(pred, true_fn=None, false_fn=None, strict=False, name=None):
    """``true_fn()`` if ``pred`` else ``false_fn()``; only the taken branch runs.

    Both functions must return the same structure of tensors with the same
    dtypes. A single-element list or tuple comes back unpacked unless ``strict``.

    >>> x = df.placeholder(df.float32, [])
    >>> r = cond(x < 2.0, lambda: x + 10.0, lambda: x * x)
    >>> with df.Session() as sess:
    ...     [float(sess.run(r, {x: v})) for v in (1.0, 3.0)]
    [11.0, 9.0]
    """
    if isinstance(pred, bool):
        raise TypeError("pred must not be a Python bool; use a bool tensor")
    if not callable(true_fn) or not callable(false_fn):
        raise TypeError("true_fn and false_fn must be callable.")
    if executing_eagerly():
        return eager_cond(pred, true_fn, false_fn, strict)
    g = get_default_graph()
    with g.name_scope(name or "cond"):
        pred = convert_to_tensor(pred)
        if not pred.dtype.is_bool:
            raise TypeError(f"cond: pred must be a bool tensor, got {pred.dtype.name}")
        if pred.shape.ndims not in (None, 0):
            raise ValueError(f"cond: pred must be a scalar, got shape {pred.shape}")
        p_false, p_true = switch(pred, pred)
        pivot_t = identity(p_true, name="switch_t")
        pivot_f = identity(p_false, name="switch_f")
        pred_id = identity(pred, name="pred_id")

        ctx_t = CondContext(pred_id, pivot_t, branch=1)
        orig_t, res_t = _build_branch(ctx_t, true_fn, "true_fn")
        ctx_f = CondContext(pred_id, pivot_f, branch=0)
        orig_f, res_f = _build_branch(ctx_f, false_fn, "false_fn")

        try:
            nest.assert_same_structure(orig_t, orig_f)
        except ValueError as e:
            raise ValueError(f"cond: true_fn and false_fn must return the same structure. {e}") \
                from None
        for t, f in zip(res_t, res_f):
            if t.dtype is not f.dtype:
                raise ValueError(f"Outputs of true_fn and false_fn must have the same type: "
                                 f"{t.dtype.name}, {f.dtype.name}")
        merges = [merge([f, t])[0] for f, t in zip(res_f, res_t)]
    result = nest.pack_sequence_as(
        orig_t, [with_flow(t, m) for t, m in zip(nest.flatten(orig_t), merges)])
    if not strict and isinstance(result, (list, tuple)) and len(result) == 1 \
            and not hasattr(result, "_fields"):
        result = result[0]
    return result


def case(pred_fn_pairs, default=None, exclusive=False, strict=False, name="case"):
    """The result of the first ``fn`` whose ``pred`` is true, else ``default()``.

    Built as nested ``cond`` s in order. Without ``default``, the last pair acts
    as the default, guarded by an Assert that some predicate is true. With
    ``exclusive=True`` an Assert checks that at most one predicate is true.

    >>> x = df.placeholder(df.float32, [])
    >>> r = case([(x < 0, lambda: -x), (x > 10, lambda: x - 10)], default=lambda: x)
    >>> with df.Session() as sess:
    ...     [float(sess.run(r, {x: v})) for v in (-3.0, 15.0, 4.0)]
    [3.0, 5.0, 4.0]
    """
    from ..ops.array_ops import stack
    from ..ops.logging_ops import Assert
    from ..ops.math_ops import cast, less_equal, reduce_sum
    from .. import dtypes

    if isinstance(pred_fn_pairs, dict):
        pairs = list(pred_fn_pairs.items())
    else:
        pairs = list(pred_fn_pairs)
    if not pairs:
        raise ValueError("case: pred_fn_pairs must not be empty")
    for p in pairs:
        if not isinstance(p, (tuple, list)) or len(p) != 2:
            raise TypeError(f"case: each entry must be a (pred, fn) pair, got {p!r}")
        if not callable(p[1]):
            raise TypeError(f"case: fn for predicate {p[0]!r} must be callable")
    if default is not None and not callable(default):
        raise TypeError("case: default must be callable")
    if executing_eagerly():
        return eager_case(pairs, default, exclusive, strict)
    g = get_default_graph()
    with g.name_scope(name):
        preds = [convert_to_tensor(p) for p, _ in pairs]
        for p in preds:
            if not p.dtype.is_bool:
                raise TypeError(f"case: predicate {p.name} must be bool, got {p.dtype.name}")
        fns = [f for _, f in pairs]
        if default is None:
            *preds_rest, last_pred = preds
            *fns_rest, last_fn = fns
            all_preds = preds

            def default():
                check = Assert(last_pred, [stack(all_preds, name="preds_c")],
                               name="no_predicate_true")
                with g.control_dependencies([check]):
                    out = last_fn()
                    return nest.map_structure(
                        lambda v: identity(v) if isinstance(v, Tensor) else v, out)
            preds, fns = preds_rest, fns_rest

        fn = default
        for p, f in reversed(list(zip(preds, fns))):
            fn = _bind_cond(p, f, fn, strict)
        if exclusive and len(pairs) > 1:
            all_p = [convert_to_tensor(p) for p, _ in pairs]
            count = reduce_sum(cast(stack(all_p), dtypes.int32))
            check = Assert(less_equal(count, 1), [stack(all_p)], name="at_most_one_true")
            with g.control_dependencies([check]):
                return _identity_structure(fn())
        return fn()


def _identity_structure(x):
    return nest.map_structure(lambda v: identity(v) if isinstance(v, Tensor) else v, x)


def _bind_cond(pred, true_fn, false_fn, strict):
    return lambda: cond(pred, true_fn, false_fn, strict=strict)


set_cond_builder(cond)  # Variable.initialized_value builds one (ops sits below this layer)
