"""Neural-network ops (``df.nn``): relu, softmax, softmax cross-entropy.

>>> loss = reduce_mean(softmax_cross_entropy_with_logits(labels=y, logits=z))
"""
from __future__ import annotations

from ..framework.convert import convert_to_tensor
from ..framework.graph import get_default_graph
from ..framework.op_registry import register_op
from ..framework.tensor_shape import TensorShape
from . import shape_fns

for _t in ("Relu", "Elu", "Softplus"):
    register_op(_t, in_place=True)(shape_fns.unchanged)


def _softmax_infer(op):
    logits = op.inputs[0]
    if logits.shape.ndims == 0:
        raise ValueError(f"{op.type} '{op.name}': logits must have at least one dimension, "
                         "got a scalar")
    return shape_fns.unchanged(op)


for _t in ("Softmax", "LogSoftmax"):
    register_op(_t)(_softmax_infer)


@register_op("SoftmaxCrossEntropyWithLogits")
def _xent_infer(op):
    logits, labels = op.inputs
    if logits.dtype is not labels.dtype:
        raise TypeError(f"softmax_cross_entropy_with_logits '{op.name}': labels and logits "
                        f"must share one dtype ({labels.dtype.name} vs {logits.dtype.name})")
    if not logits.shape.is_compatible_with(labels.shape):
        raise ValueError(f"softmax_cross_entropy_with_logits '{op.name}': logits and labels "
                         f"must have the same shape {logits.shape} vs {labels.shape}")
    shape = logits.shape.merge_with(labels.shape)
    if shape.ndims == 0:
        raise ValueError(f"softmax_cross_entropy_with_logits '{op.name}': logits and labels "
                         "must have at least one dimension")
    if shape.ndims is None:
        return [(logits.dtype, TensorShape(None)), (logits.dtype, shape)]
    return [(logits.dtype, shape[:-1]), (logits.dtype, shape)]


def _float_unary(op_type, x, name):
    x = convert_to_tensor(x)
    if op_type == "Relu":  # relu is defined on integers too, but not on bool
        if not x.dtype.is_numeric:
            raise TypeError(f"Relu requires a numeric tensor, got {x.dtype.name}")
    elif not x.dtype.is_floating:
        raise TypeError(f"{op_type} requires a floating-point tensor, got {x.dtype.name}")
    return get_default_graph().create_op(op_type, [x], name=name or op_type).outputs[0]


def relu(features, name=None):
    """``max(features, 0)``."""
    return _float_unary("Relu", features, name)


def elu(features, name=None):
    """``x if x > 0 else exp(x) - 1``."""
    return _float_unary("Elu", features, name)


def softplus(features, name=None):
    """``log(1 + exp(x))``."""
    return _float_unary("Softplus", features, name)


def softmax(logits, axis=None, name=None):
    """``exp(x) / sum(exp(x))`` over the last axis."""
    if axis not in (None, -1):
        raise ValueError("softmax: only the last axis is supported (axis=-1)")
    return _float_unary("Softmax", logits, name)


def log_softmax(logits, axis=None, name=None):
    """``x - log(sum(exp(x)))`` over the last axis."""
    if axis not in (None, -1):
        raise ValueError("log_softmax: only the last axis is supported (axis=-1)")
    return _float_unary("LogSoftmax", logits, name)


def sigmoid(x, name=None):
    from .math_ops import sigmoid as _sig
    return _sig(x, name=name)


def tanh(x, name=None):
    from .math_ops import tanh as _tanh
    return _tanh(x, name=name)


def softmax_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, dim=-1,
                                      name=None, axis=None):
    """Per-example cross-entropy between ``labels`` (probabilities) and ``softmax(logits)``.

    As in TF, call it with keyword arguments: ``(labels=..., logits=...)``.
    """
    if _sentinel is not None:
        raise ValueError("Only call softmax_cross_entropy_with_logits with named arguments "
                         "(labels=..., logits=...)")
    if labels is None or logits is None:
        raise ValueError("Both labels= and logits= must be given")
    if (axis if axis is not None else dim) != -1:
        raise ValueError("softmax_cross_entropy_with_logits: only the last axis is supported")
    logits = convert_to_tensor(logits)
    labels = convert_to_tensor(labels, dtype=logits.dtype)
    op = get_default_graph().create_op("SoftmaxCrossEntropyWithLogits", [logits, labels],
                                       name=name or "SoftmaxCrossEntropyWithLogits")
    return op.outputs[0]


softmax_cross_entropy_with_logits_v2 = softmax_cross_entropy_with_logits
