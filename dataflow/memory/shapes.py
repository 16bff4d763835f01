"""Static shapes of one step's values, for planning its memory before it runs.

A graph's own static shapes (``Tensor.shape``) are inferred once, when each op is
built, from whatever was known then: a placeholder declared ``[None, 64]`` leaves a
whole forward and gradient pass with an unknown batch dimension. A memory plan needs
every size, so :func:`infer_step_shapes` runs the ops' registered shape functions
again over the step's pruned graph, starting from the shapes of the fed values, and
also computes the *values* of the small integer tensors that shapes are made of
(``Shape``, ``Size``, ``Rank`` of a now fully known shape, and arithmetic on them
through the reference kernels), so that ``reshape(dy, shape(x))`` and the gradient
code's ``broadcast_gradient_args`` get exact sizes.

The shape functions see a *view* of each op whose inputs carry the refined shapes;
a tensor whose value is known looks like a constant to them (the same
``constant_value`` test they already make), so no shape function changes.

>>> import dataflow as df
>>> g = df.Graph()
>>> with g.as_default():
...     x = df.placeholder(df.float32, [None, 3], name="x")
...     y = df.reshape(x * 2.0, df.shape(x))
>>> shapes = infer_step_shapes(g.get_operations(), {x: (5, 3)})
>>> shapes.shape_of(y)
TensorShape([5, 3])
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dtypes
from .. import errors
from ..framework import op_registry as R
from ..framework.graph import Tensor
from ..framework.tensor_shape import TensorShape, as_shape
from ..kernels.registry import KernelContext, find_kernel

__all__ = ["VALUE_LIMIT", "StepShapes", "infer_step_shapes"]

# Integer tensors up to this many elements get their values computed (shape arithmetic).
VALUE_LIMIT = 64
# Loops: shapes flowing around a back edge need a few passes to settle (about two per
# nesting level); past this many the inference gives up with an error.
_MAX_PASSES = 32


class StepShapes:
    """The refined ``(dtype, TensorShape)`` of each tensor of a step, and the values
    of its small integer tensors that could be computed before running."""

    def __init__(self):
        self.shapes: dict = {}
        self.values: dict = {}

    def shape_of(self, t: Tensor) -> TensorShape:
        return self.shapes.get(t, t.shape)

    def nbytes(self, t: Tensor):
        """Bytes of ``t``'s value, or None when its shape is not fully known."""
        n = self.shape_of(t).num_elements()
        if n is None:
            return None
        return n * _itemsize(t.dtype)


def _itemsize(dtype) -> int:
    if dtype in (_dtypes.resource, getattr(_dtypes, "variant", None)):
        return 0
    try:
        return int(np.dtype(dtype.as_numpy_dtype).itemsize)
    except (TypeError, AttributeError):
        return 8  # string or object values: one pointer each


def infer_step_shapes(ops, feed_shapes=None, feed_values=None) -> StepShapes:
    """Refine the static shapes of ``ops`` (a pruned step) from the fed shapes.

    ``feed_shapes`` maps fed tensors to shapes, ``feed_values`` fed tensors to their
    values (their shapes are used, and small integer values propagate). Raises
    InvalidArgumentError naming the op when a shape function rejects a refined shape.
    """
    out = StepShapes()
    fed = {}
    for t, shape in (feed_shapes or {}).items():
        fed[t] = t.shape.merge_with(as_shape(shape)) if _compatible(t, shape) else None
        if fed[t] is None:
            raise errors.InvalidArgumentError(
                None, t.op, f"feed_shapes gives {list(as_shape(shape).dims or [])} for "
                f"'{t.name}', whose static shape is {t.shape}")
    for t, value in (feed_values or {}).items():
        value = np.asarray(value)
        fed[t] = TensorShape(value.shape)
        if _is_small_int(t.dtype, value.size):
            out.values[t] = value
    for t, shape in fed.items():
        out.shapes[t] = shape
    order = _topological(ops, fed)
    stacks = _stack_elements(ops)
    for _ in range(_MAX_PASSES):
        changed = False
        for op in order:
            changed |= _infer_op(op, out, fed, stacks)
        if not changed:
            return out
    raise errors.InternalError(
        None, None, f"static shape inference did not settle in {_MAX_PASSES} passes over "
        f"the loops of this step")


def _compatible(t, shape) -> bool:
    return t.shape.is_compatible_with(as_shape(shape))


def _is_small_int(dtype, size) -> bool:
    return (dtype.is_integer or dtype == _dtypes.bool) and size <= VALUE_LIMIT


def _topological(ops, fed) -> list:
    """``ops`` in dependency order, not following the back edges (NextIteration's
    output into a Merge): a Merge's shape starts from its loop entry."""
    needed = set(ops)
    done: set = set()
    order: list = []
    for root in ops:
        stack = [(root, False)]
        while stack:
            op, expanded = stack.pop()
            if op in done:
                continue
            if expanded:
                done.add(op)
                order.append(op)
                continue
            stack.append((op, True))
            for t in op._inputs:
                src = t.op
                if t in fed or src not in needed or src in done:
                    continue
                if src._op_def.role == R.NEXT_ITERATION:
                    continue
                stack.append((src, False))
            for c in op._control_inputs:
                if c in needed and c not in done:
                    stack.append((c, False))
    return order


def _stack_elements(ops) -> dict:
    """Each StackPop op -> the StackPush ops on the same stack (its element shape is
    theirs: the pop's own static shape is usually unknown)."""
    pushes: dict = {}
    pops = []
    for op in ops:
        if op.type == "StackPush":
            pushes.setdefault(stack_of(op._inputs[0]), []).append(op)
        elif op.type == "StackPop":
            pops.append(op)
    return {op: pushes.get(stack_of(op._inputs[0]), []) for op in pops}


def stack_of(handle: Tensor):
    """The Stack op a handle comes from, through Enters and identities."""
    op = handle.op
    while op.type != "Stack" and op._inputs and (
            op._op_def.forwards_input or op._op_def.role in (R.ENTER, R.SWITCH, R.EXIT)):
        op = op._inputs[0].op
    return op


def _infer_op(op, out: StepShapes, fed, stacks) -> bool:
    """Infer ``op``'s outputs into ``out``; True if anything changed."""
    if all(t in fed for t in op._outputs) and op._outputs:
        return False
    if op.type == "StackPop":
        results = _pop_shapes(op, out, stacks.get(op, []))
    elif op._op_def.role == R.MERGE:
        results = _merge_shapes(op, out)
    else:
        try:
            results = op._op_def.infer(_OpView(op, out))
        except (ValueError, TypeError) as e:
            raise errors.InvalidArgumentError(
                None, op, f"static shape inference of '{op.name}' ({op.type}) failed with "
                f"the fed shapes: {e}") from None
    changed = False
    for t, (_, shape) in zip(op._outputs, results):
        if t in fed:
            continue
        shape = as_shape(shape)
        if t.shape.is_compatible_with(shape):
            shape = shape.merge_with(t.shape)
        old = out.shapes.get(t)
        if old is None or old.dims != shape.dims:
            out.shapes[t] = shape
            changed = True
        if t not in out.values:
            value = (_popped_value(stacks.get(op, []), out) if op.type == "StackPop"
                     else _static_value(op, t, out))
            if value is not None:
                out.values[t] = value
                changed = True
    return changed


def _pop_shapes(op, out: StepShapes, pushes):
    """A StackPop's element shape: the shape of what its stack's pushes push."""
    shape = op.get_attr("shape")
    for push in pushes:
        shape = _most_specific(shape, out.shape_of(push._inputs[1]))
    return [(op.get_attr("elem_type"), shape)]


def _popped_value(pushes, out: StepShapes):
    """A pop's value when every push pushes the same known value (the gradient code
    saves shapes on stacks: a loop-invariant shape pops back as itself)."""
    values = [out.values.get(p._inputs[1]) for p in pushes]
    if not values or any(v is None for v in values):
        return None
    if all(v.shape == values[0].shape and np.array_equal(v, values[0]) for v in values):
        return values[0]
    return None


def _most_specific(a: TensorShape, b: TensorShape) -> TensorShape:
    if a.dims is None:
        return b
    if b.dims is None:
        return a
    return a.merge_with(b) if a.is_compatible_with(b) else a.most_specific_compatible_shape(b)


def _merge_shapes(op, out: StepShapes):
    """A Merge's shape: its known inputs' common shape (a loop variable whose shape
    changes from iteration to iteration ends up with unknown dims)."""
    known = [t for t in op._inputs if t in out.shapes or t.op._op_def.role != R.NEXT_ITERATION]
    shape = None
    for t in known:
        s = out.shape_of(t)
        shape = s if shape is None else (shape.most_specific_compatible_shape(s)
                                         if shape.dims != s.dims else shape)
    dtype = op._inputs[0].dtype
    return [(dtype, shape if shape is not None else TensorShape(None)),
            (_dtypes.int32, TensorShape([]))]


def _static_value(op, t: Tensor, out: StepShapes):
    """The value of the small integer tensor ``t`` if it can be computed now."""
    shape = out.shape_of(t)
    n = shape.num_elements()
    if n is None or not _is_small_int(t.dtype, n) or op._op_def.stateful:
        return None
    if op.type == "Const":
        return np.asarray(op.get_attr("value"))
    if op._op_def.reads_shapes_only:
        src = out.shape_of(op._inputs[0])
        if not src.is_fully_defined():
            return None
        dt = t.dtype.as_numpy_dtype
        return {"Shape": lambda: np.asarray(src.as_list(), dt),
                "Size": lambda: np.asarray(src.num_elements(), dt),
                "Rank": lambda: np.asarray(src.ndims, dt)}[op.type]()
    if op._op_def.role != R.NORMAL and not op._op_def.forwards_input:
        return None
    if not all(i in out.values for i in op._inputs):
        return None
    factory = find_kernel(op, "CPU", max_priority=0)
    if factory is None:
        return None
    try:
        result = factory(KernelContext(op=op))(*[out.values[i] for i in op._inputs])
    except Exception:  # noqa: BLE001 - a value we cannot compute is simply not known
        return None
    if isinstance(result, (tuple, list)):
        result = result[t.value_index]
    return np.asarray(result)


class _OpView:
    """``op`` as its shape function sees it during step inference: the same attributes,
    but inputs with the refined shapes (and known values looking like constants)."""

    def __init__(self, op, step: StepShapes):
        self._op = op
        self._step = step

    def __getattr__(self, name):
        return getattr(self._op, name)

    @property
    def inputs(self):
        return [_view(t, self._step) for t in self._op._inputs]


class _ConstView:
    """The producer of a tensor whose value is known: looks like a ``Const``."""

    type = "Const"

    def __init__(self, t: Tensor, value):
        self._t = t
        self._value = value
        self._graph = t.op._graph
        self.name = t.op.name
        self.inputs = []
        self.device = t.op.device

    def get_attr(self, name):
        if name == "value":
            return self._value
        if name == "dtype":
            return self._t.dtype
        return self._t.op.get_attr(name)


def _view(t: Tensor, step: StepShapes) -> Tensor:
    shape = step.shape_of(t)
    if t in step.values:
        return Tensor(_ConstView(t, step.values[t]), 0, t.dtype, shape)
    return Tensor(_OpView(t.op, step), t.value_index, t.dtype, shape)
