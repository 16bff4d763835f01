"""``cond``, ``case`` and ``while_loop`` in eager mode: Python control flow on the
values, with the signatures and results of the graph builders (which call these when
:func:`~dataflow.framework.eager.executing_eagerly`).

>>> with df.eager_mode():
...     i, acc = df.while_loop(lambda i, a: i < 5, lambda i, a: (i + 1, a * 2.0), (0, 1.0))
...     r = df.cond(acc > 10.0, lambda: acc - 10.0, lambda: acc)
...     int(i), float(acc), float(r)
(5, 32.0, 22.0)
"""
from __future__ import annotations

from .. import errors
from ..framework.convert import convert_to_tensor
from ..framework.graph import Operation
from ..ops.tensor_array_ops import EagerTensorArray
from ..util import nest

__all__ = ["eager_cond", "eager_case", "eager_while_loop"]


def _as_tensor(v):
    if v is None or isinstance(v, (Operation, EagerTensorArray)):
        return v
    return convert_to_tensor(v)


def _loop_value(v):
    """A loop variable's value: a tensor, or an eager TensorArray as it is."""
    return v if isinstance(v, EagerTensorArray) else convert_to_tensor(v)


def _scalar_bool(pred, what):
    pred = convert_to_tensor(pred)
    if not pred.dtype.is_bool:
        raise TypeError(f"{what}: pred must be a bool tensor, got {pred.dtype.name}")
    if pred.shape.ndims != 0:
        raise ValueError(f"{what}: pred must be a scalar, got shape {pred.shape}")
    return bool(pred)


def _branch_result(out, strict):
    """A branch's result as the graph cond returns it: tensors (a single-element list
    or tuple unpacked unless ``strict``)."""
    if out is None:
        raise ValueError("cond branches must return tensors or operations, not None")
    result = nest.map_structure(_as_tensor, out)
    if not strict and isinstance(result, (list, tuple)) and len(result) == 1 \
            and not hasattr(result, "_fields"):
        result = result[0]
    return result


def eager_cond(pred, true_fn, false_fn, strict=False):
    """Run ``true_fn()`` or ``false_fn()`` by the value of ``pred``."""
    taken = true_fn if _scalar_bool(pred, "cond") else false_fn
    return _branch_result(taken(), strict)


def eager_case(pairs, default, exclusive, strict):
    """The first ``fn`` whose predicate holds, else ``default()``; the graph's Assert
    failures (no predicate true without a default, several with ``exclusive``) are
    InvalidArgumentErrors here too."""
    values = [_scalar_bool(p, "case") for p, _ in pairs]
    if exclusive and sum(values) > 1:
        raise errors.InvalidArgumentError(
            None, None, f"case: more than one predicate is true ({values}) with "
            "exclusive=True")
    for value, (_, fn) in zip(values, pairs):
        if value:
            return _branch_result(fn(), strict)
    if default is None:
        raise errors.InvalidArgumentError(
            None, None, "case: no predicate is true and there is no default")
    return _branch_result(default(), strict)


def eager_while_loop(cond, body, loop_vars, maximum_iterations, wrapped,
                     return_same_structure):
    """Iterate ``body`` in Python while ``cond`` holds (at most ``maximum_iterations``
    times); returns what the graph ``while_loop`` returns for the same arguments."""
    max_iter = None
    if maximum_iterations is not None:
        max_iter = convert_to_tensor(maximum_iterations)
        if max_iter.shape.ndims != 0:
            raise ValueError(f"maximum_iterations must be a scalar, saw shape: "
                             f"{max_iter.shape}")
        if not max_iter.dtype.is_integer:
            raise TypeError("maximum_iterations must be an integer tensor")
        max_iter = int(max_iter)
    structure = list(loop_vars) if isinstance(loop_vars, tuple) and not hasattr(
        loop_vars, "_fields") else loop_vars
    flat = [_loop_value(v) for v in nest.flatten(loop_vars)]
    current = nest.pack_sequence_as(structure, flat)
    result_structure = loop_vars   # the graph returns the body's structure: after no
    # iteration, the loop variables' own
    steps = 0
    while max_iter is None or steps < max_iter:
        c = convert_to_tensor(cond(*current))
        if not c.dtype.is_bool or c.shape.ndims != 0:
            raise TypeError(f"while_loop: cond must return a scalar bool tensor, got "
                            f"{c.dtype.name} of shape {c.shape}")
        if not bool(c):
            break
        result = body(*current)
        if not nest.is_sequence(result):
            result = [result]
        try:
            nest.assert_same_structure(list(current), list(result))
        except ValueError as e:
            raise ValueError("while_loop: body must return the structure of loop_vars. "
                             f"{e}") from None
        new_flat = [_loop_value(v) for v in nest.flatten(result)]
        for old, new in zip(flat, new_flat):
            if old.dtype is not new.dtype:
                raise TypeError(f"while_loop: a loop variable entered as {old.dtype.name} "
                                f"and the body returned {new.dtype.name}")
        flat = new_flat
        result_structure = result
        current = nest.pack_sequence_as(structure, flat)
        steps += 1
    packed = nest.pack_sequence_as(result_structure, flat)
    if wrapped:
        return packed[0]
    if return_same_structure:
        return packed
    if len(flat) == 1:
        return flat[0]
    return packed
