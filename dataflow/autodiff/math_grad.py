"""Gradients of the math ops: elementwise, reductions, matmul, cast (TF's math_grad).

Binary elementwise ops broadcast (NumPy rules), so each input's gradient is summed
back to that input's shape with :func:`_unbroadcast`; reductions broadcast the
output gradient back over the reduced axes with :func:`_unreduce`. Both use
run-time shapes, since static shapes may be partly unknown.

Elementwise gradients are the ``grad`` entries of the elementwise op table
(:mod:`dataflow.framework.elementwise_table`), registered here for every row; the few
marked ``CUSTOM`` are written out below.
"""
from __future__ import annotations

from types import SimpleNamespace

from .. import dtypes as _dtypes
from ..framework.elementwise_table import CUSTOM, ELEMENTWISE
from ..ops import array_ops, grad_ops, math_ops
from ..ops.array_ops import shape
from ..ops.math_ops import cast, reduce_sum
from .registry import NotDifferentiable, RegisterGradient

# -- helpers ---------------------------------------------------------------------------------

def _same_static_shape(a, b) -> bool:
    return a.shape.is_fully_defined() and b.shape.is_fully_defined() and a.shape == b.shape


def _keeps_its_shape(x, others) -> bool:
    """Whether broadcasting ``x`` against ``others`` provably leaves ``x``'s shape as it
    is, even with unknown dimensions: every axis of the others is absent, statically 1,
    or faces a known dimension of ``x`` other than 1 (which a broadcast cannot change).
    A bias add ``(?, 64) + (64,)`` is the common case."""
    xs = x.shape
    if xs.ndims is None:
        return False
    for other in others:
        ys = other.shape
        if ys.ndims is None or ys.ndims > xs.ndims:
            return False
        for a, b in zip(reversed(xs.as_list()), reversed(ys.as_list())):
            if b != 1 and (a is None or a == 1):
                return False
    return True


def _unbroadcast(grad, x, others, out):
    """``grad`` (shaped like ``out``, computed from ``x`` and the tensors ``others``
    broadcast together) summed back to the shape of ``x``."""
    if grad is None:
        return None
    if _same_static_shape(x, out) or _keeps_its_shape(x, others):
        return grad  # nothing was broadcast: skip the run-time reduction
    return grad_ops.sum_to_shape(grad, shape(x))


def _binary_grads(op, gx, gy):
    """The gradients of a broadcasting binary op's two inputs, reduced to their shapes."""
    x, y = op.inputs
    out = op.outputs[0]
    return [_unbroadcast(gx, x, (y,), out), _unbroadcast(gy, y, (x,), out)]


def _unreduce(op, grad):
    """The gradient of a reduction's output broadcast back to its input's shape."""
    x = op.inputs[0]
    x_shape = shape(x)
    axis = op.get_attr("axis")
    if not op.get_attr("keep_dims") and axis is not None:
        # Put the dropped axes back as size 1, so broadcasting lines them up again.
        grad = array_ops.reshape(grad, grad_ops.reduced_shape(x_shape, axis))
    # With axis=None the gradient is a scalar (or all ones): it broadcasts as it is.
    return grad_ops.broadcast_to(grad, x_shape)


def _keepdims_value(op, value):
    """A reduction's output ``value`` with its reduced axes restored as size 1."""
    if op.get_attr("keep_dims") or op.get_attr("axis") is None:
        return value
    return array_ops.reshape(value, grad_ops.reduced_shape(shape(op.inputs[0]),
                                                         op.get_attr("axis")))


def _zeros(t):
    return array_ops.zeros_like(t)


# -- elementwise: from the table's gradient entries ----------------------------------------------

def _select_grads(x_wins, grad):
    """``grad`` routed to x where ``x_wins``, to y elsewhere (Maximum, Minimum)."""
    zeros = _zeros(grad)
    return [array_ops.where(x_wins, grad, zeros), array_ops.where(x_wins, zeros, grad)]


# What a table gradient may build with (the table sits below ops and cannot import them).
_GRAD_OPS = SimpleNamespace(
    activation_grad=grad_ops.activation_grad, cos=math_ops.cos, sin=math_ops.sin,
    sign=math_ops.sign, greater_equal=math_ops.greater_equal, less_equal=math_ops.less_equal,
    zeros_like=array_ops.zeros_like, select_grads=_select_grads)


def _table_gradient(row):
    """The registered gradient function of table row ``row``: its ``grad`` entry applied
    to the op's inputs and output, each binary gradient summed back to its input's
    shape when the op broadcasts."""
    def gradient(op, grad):
        grads = row.grad(_GRAD_OPS, grad, *op.inputs, op.outputs[0])
        if row.shape == "broadcast":
            return _binary_grads(op, *grads)
        return list(grads)
    gradient.__name__ = f"_{row.name.lower()}_grad"
    gradient.__doc__ = f"Gradient of {row.name} (from the elementwise op table)."
    return gradient


for _row in ELEMENTWISE.values():
    if _row.grad is None:
        NotDifferentiable(_row.name)
    elif _row.grad is not CUSTOM:
        RegisterGradient(_row.name)(_table_gradient(_row))


# Rows whose ``grad`` is CUSTOM: written out here (Relu's is in nn_grad).

@RegisterGradient("Pow")
def _pow_grad(op, grad):
    x, y = op.inputs
    z = op.outputs[0]
    gx = grad * y * math_ops.pow(x, y - 1)
    # d/dy x**y = x**y log(x), defined for x > 0; TF gives 0 elsewhere. Feeding log
    # a safe 1 where x <= 0 keeps NaNs out of the masked-away lanes (and their grads).
    positive = math_ops.greater(x, 0)
    safe_x = array_ops.where(positive, x, array_ops.ones_like(x))
    log_x = array_ops.where(positive, math_ops.log(safe_x), _zeros(x))
    return _binary_grads(op, gx, grad * z * log_x)


@RegisterGradient("FloorMod")
def _floor_mod_grad(op, grad):
    # x mod y = x - floor(x / y) * y, piecewise linear (as TF's _FloorModGrad).
    x, y = op.inputs
    if not x.dtype.is_floating:
        return [None, None]
    return _binary_grads(op, grad, grad * -math_ops.floor(x / y))


@RegisterGradient("Cast")
def _cast_grad(op, grad):
    # Only float -> float casts carry a gradient (TF: integer sources get None).
    src = op.inputs[0].dtype
    if not (src.is_floating and op.outputs[0].dtype.is_floating):
        return [None]
    return [cast(grad, src)]


@RegisterGradient("AddN")
def _add_n_grad(op, grad):
    return [grad] * len(op.inputs)


# -- reductions --------------------------------------------------------------------------------

@RegisterGradient("Sum")
def _sum_grad(op, grad):
    return [_unreduce(op, grad)]


@RegisterGradient("Mean")
def _mean_grad(op, grad):
    x, y = op.inputs[0], op.outputs[0]
    dtype = grad.dtype
    if x.shape.is_fully_defined() and y.shape.is_fully_defined():
        count = max(x.shape.num_elements(), 1) // max(y.shape.num_elements(), 1)
        return [_unreduce(op, grad) / float(count)]
    # Elements averaged per output: size(x) / size(grad), both known at run time.
    count = cast(array_ops.size(x), dtype) / cast(array_ops.size(grad), dtype)
    return [_unreduce(op, grad) / count]


def _extremum_grad(op, grad):
    """Max/Min: the gradient goes to the elements equal to the result, split equally
    among ties (as TF)."""
    x = op.inputs[0]
    y = _keepdims_value(op, op.outputs[0])
    chosen = cast(math_ops.equal(x, y), grad.dtype)
    axis = op.get_attr("axis")
    ties = reduce_sum(chosen, axis=axis, keepdims=True)
    return [_unreduce(op, grad) * chosen / ties]


RegisterGradient("Max")(_extremum_grad)
RegisterGradient("Min")(_extremum_grad)


@RegisterGradient("Prod")
def _prod_grad(op, grad):
    """d prod / d x_i is the product of the other elements. Dividing the product by x_i
    fails at zeros, so zeros are counted: with none it is prod / x_i, with exactly one
    the zero element gets the product of the nonzero ones and the rest 0, with more
    every element gets 0."""
    x = op.inputs[0]
    axis = op.get_attr("axis")
    is_zero = math_ops.equal(x, 0)
    safe_x = array_ops.where(is_zero, array_ops.ones_like(x), x)
    nonzero_prod = math_ops.reduce_prod(safe_x, axis=axis, keepdims=True)
    zero_count = reduce_sum(cast(is_zero, _dtypes.int32), axis=axis, keepdims=True)
    zeros = _zeros(x)
    others = array_ops.where(
        is_zero,
        array_ops.where(math_ops.equal(zero_count, 1), nonzero_prod, zeros),
        array_ops.where(math_ops.equal(zero_count, 0), nonzero_prod / safe_x, zeros))
    return [_unreduce(op, grad) * others]


# -- matmul ------------------------------------------------------------------------------------

@RegisterGradient("MatMul")
def _matmul_grad(op, grad):
    a, b = op.inputs
    ta, tb = op.get_attr("transpose_a"), op.get_attr("transpose_b")
    mm = math_ops.matmul
    if not ta and not tb:
        return [mm(grad, b, transpose_b=True), mm(a, grad, transpose_a=True)]
    if not ta and tb:
        return [mm(grad, b), mm(grad, a, transpose_a=True)]
    if ta and not tb:
        return [mm(b, grad, transpose_b=True), mm(a, grad)]
    return [mm(b, grad, transpose_a=True, transpose_b=True),
            mm(grad, a, transpose_a=True, transpose_b=True)]


# -- no gradient -------------------------------------------------------------------------------

# Reductions of booleans (the elementwise ones without a gradient are marked from the table).
for _t in ("All", "Any"):
    NotDifferentiable(_t)
