"""More of ``tf.nn`` and TF1's clipping ops, under TF1's names and formulas.

``sparse_softmax_cross_entropy_with_logits`` is an op of its own (loss and backprop in one
kernel, as TF), and so is ``l2_loss`` (TF1's ``L2Loss``); the rest are composed from existing ops exactly as TF1 composes them,
so their gradients (and their behaviour at ties and zeros) follow from those ops':
``clip_by_value`` is ``maximum(minimum(t, hi), lo)``, ``clip_by_norm`` guards the zero
norm with a select, ``moments`` stops the gradient through the mean inside the variance.

>>> z = df.constant([[2.0, 0.0, 0.0], [0.0, 0.0, 2.0]])
>>> loss = df.reduce_mean(sparse_softmax_cross_entropy_with_logits(labels=[0, 1], logits=z))
>>> grads, norm = clip_by_global_norm([df.constant([30.0, 40.0])], 5.0)
>>> with df.Session() as sess:
...     sess.run([loss, norm, grads[0]])
[np.float32(1.2395449), np.float32(50.0), array([2.9999998, 3.9999998], dtype=float32)]
"""
from __future__ import annotations

import numpy as np

from .. import dtypes as _dtypes
from ..framework.convert import convert_to_tensor
from ..framework.graph import Tensor, get_default_graph, name_scope
from ..framework.indexed_slices import IndexedSlices
from ..framework.op_registry import register_op
from ..framework.tensor_shape import TensorShape
from . import array_ops, math_ops

__all__ = ["sparse_softmax_cross_entropy_with_logits", "sigmoid_cross_entropy_with_logits",
           "l2_loss", "l2_normalize", "moments", "batch_normalization", "bias_add",
           "embedding_lookup", "clip_by_value", "clip_by_norm", "global_norm",
           "clip_by_global_norm"]


# -- SparseSoftmaxCrossEntropyWithLogits -----------------------------------------------------------

@register_op("SparseSoftmaxCrossEntropyWithLogits")
def _sparse_xent_infer(op):
    logits, labels = op.inputs
    if not logits.dtype.is_floating:
        raise TypeError(f"SparseSoftmaxCrossEntropyWithLogits '{op.name}': logits must be "
                        f"floating point, got {logits.dtype.name}")
    if labels.dtype not in (_dtypes.int32, _dtypes.int64):
        raise TypeError(f"SparseSoftmaxCrossEntropyWithLogits '{op.name}': labels must be "
                        f"int32 or int64, got {labels.dtype.name}")
    ls, gs = logits.shape, labels.shape
    if ls.ndims is not None and gs.ndims is not None:
        if gs.ndims != ls.ndims - 1:
            raise ValueError(f"Rank mismatch: Rank of labels (received {gs.ndims}) should equal "
                             f"rank of logits minus 1 (received {ls.ndims}).")
        if not gs.is_compatible_with(ls[:-1]):
            raise ValueError(f"Shape mismatch: The shape of labels (received {gs}) should "
                             f"equal the shape of logits except for the last dimension "
                             f"(received {ls}).")
        return [(logits.dtype, gs.merge_with(ls[:-1])), (logits.dtype, ls)]
    if ls.ndims == 0:
        raise ValueError(f"SparseSoftmaxCrossEntropyWithLogits '{op.name}': logits must have "
                         "at least one dimension")
    return [(logits.dtype, ls[:-1] if ls.ndims is not None else gs), (logits.dtype, ls)]


def sparse_softmax_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None,
                                             name=None):
    """Per-example cross-entropy of ``softmax(logits)`` at the integer class ``labels``
    (shape: ``logits`` without its last dimension). A label outside ``[0, classes)`` is an
    InvalidArgumentError at run time, as on TF's CPU.

    >>> z = df.constant([[0.0, 0.0], [0.0, 100.0]])
    >>> df.Session().run(sparse_softmax_cross_entropy_with_logits(labels=[0, 1], logits=z))
    array([ 0.6931472, -0.       ], dtype=float32)
    """
    if _sentinel is not None:
        raise ValueError("Only call `sparse_softmax_cross_entropy_with_logits` with named "
                         "arguments (labels=..., logits=..., ...)")
    if labels is None or logits is None:
        raise ValueError("Both labels= and logits= must be given")
    logits = convert_to_tensor(logits)
    labels = convert_to_tensor(labels)
    op = get_default_graph().create_op("SparseSoftmaxCrossEntropyWithLogits", [logits, labels],
                                       name=name or "SparseSoftmaxCrossEntropyWithLogits")
    return op.outputs[0]


# -- composed nn functions -------------------------------------------------------------------------

def sigmoid_cross_entropy_with_logits(_sentinel=None, labels=None, logits=None, name=None):
    """``max(x, 0) - x * z + log(1 + exp(-|x|))`` for logits ``x`` and labels ``z``: the
    numerically stable form of the logistic loss (TF1's formula).

    >>> df.Session().run(sigmoid_cross_entropy_with_logits(labels=[1.0, 0.0], logits=[2.0, -1.0]))
    array([0.126928  , 0.31326163], dtype=float32)
    """
    if _sentinel is not None:
        raise ValueError("Only call `sigmoid_cross_entropy_with_logits` with named arguments "
                         "(labels=..., logits=..., ...)")
    if labels is None or logits is None:
        raise ValueError("Both labels= and logits= must be given")
    with name_scope(name or "logistic_loss"):
        logits = convert_to_tensor(logits, name="logits")
        labels = convert_to_tensor(labels, dtype=logits.dtype, name="labels")
        if not logits.shape.is_compatible_with(labels.shape):
            raise ValueError(f"logits and labels must have the same shape ({logits.shape} vs "
                             f"{labels.shape})")
        zeros = array_ops.zeros_like(logits)
        positive = math_ops.greater_equal(logits, zeros)
        relu_logits = array_ops.where(positive, logits, zeros)
        neg_abs_logits = array_ops.where(positive, -logits, logits)
        return math_ops.add(relu_logits - logits * labels,
                            math_ops.log1p(math_ops.exp(neg_abs_logits)))


@register_op("L2Loss")
def _l2_loss_infer(op):
    (t,) = op.inputs
    if not t.dtype.is_floating:
        raise TypeError(f"L2Loss '{op.name}': t must be floating point, got {t.dtype.name}")
    return [(t.dtype, TensorShape([]))]


def l2_loss(t, name=None):
    """``sum(t ** 2) / 2`` (a scalar), one ``L2Loss`` op as in TF1.

    >>> df.Session().run(l2_loss(df.constant([3.0, 4.0])))
    np.float32(12.5)
    """
    t = convert_to_tensor(t)
    return get_default_graph().create_op("L2Loss", [t], name=name or "L2Loss").outputs[0]


def l2_normalize(x, axis=None, epsilon=1e-12, name=None, dim=None):
    """``x / sqrt(max(sum(x ** 2, axis), epsilon))``.

    >>> df.Session().run(l2_normalize(df.constant([3.0, 4.0]), axis=0))
    array([0.6, 0.8], dtype=float32)
    """
    axis = dim if axis is None else axis
    with name_scope(name or "l2_normalize"):
        x = convert_to_tensor(x, name="x")
        square_sum = math_ops.reduce_sum(math_ops.square(x), axis, keepdims=True)
        inv_norm = math_ops.rsqrt(math_ops.maximum(square_sum, epsilon))
        return math_ops.multiply(x, inv_norm)


def moments(x, axes, shift=None, name=None, keep_dims=None, keepdims=None):
    """Mean and variance of ``x`` over ``axes`` (``shift`` is unused, as in TF1).

    >>> x = df.constant([[1.0, 2.0], [3.0, 6.0]])
    >>> mean, variance = moments(x, axes=[0])
    >>> df.Session().run([mean, variance])
    [array([2., 4.], dtype=float32), array([1., 4.], dtype=float32)]
    """
    keep = bool(keepdims if keepdims is not None else keep_dims)
    with name_scope(name or "moments"):
        x = convert_to_tensor(x)
        axes = list(axes)
        mean = math_ops.reduce_mean(x, axes, keepdims=True, name="mean")
        variance = math_ops.reduce_mean(
            math_ops.squared_difference(x, array_ops.stop_gradient(mean)), axes,
            keepdims=True, name="variance")
        if not keep:
            mean = array_ops.squeeze(mean, axes)
            variance = array_ops.squeeze(variance, axes)
        return mean, variance


def batch_normalization(x, mean, variance, offset, scale, variance_epsilon, name=None):
    """``scale * (x - mean) / sqrt(variance + variance_epsilon) + offset`` (offset and
    scale may be None), computed as TF1 does: ``x * inv + (offset - mean * inv)``.

    >>> x = df.constant([[1.0, 3.0]])
    >>> y = batch_normalization(x, mean=[2.0, 2.0], variance=[1.0, 4.0], offset=[0.0, 10.0],
    ...                         scale=[1.0, 2.0], variance_epsilon=0.0)
    >>> df.Session().run(y)
    array([[-1., 11.]], dtype=float32)
    """
    with name_scope(name or "batchnorm"):
        x = convert_to_tensor(x)
        mean = convert_to_tensor(mean, dtype=x.dtype)
        variance = convert_to_tensor(variance, dtype=x.dtype)
        inv = math_ops.rsqrt(variance + variance_epsilon)
        if scale is not None:
            inv = inv * convert_to_tensor(scale, dtype=x.dtype)
        shift = -mean * inv if offset is None else \
            convert_to_tensor(offset, dtype=x.dtype) - mean * inv
        return x * inv + shift


def bias_add(value, bias, data_format=None, name=None):
    """``value + bias`` with the 1-D ``bias`` along the channel dimension (the last one for
    ``NHWC``/None, dimension 1 for ``NC...``).

    >>> h = df.zeros([2, 3])
    >>> df.Session().run(bias_add(h, [1.0, 2.0, 3.0]))
    array([[1., 2., 3.],
           [1., 2., 3.]], dtype=float32)
    """
    with name_scope(name or "BiasAdd") as scope:
        value = convert_to_tensor(value, name="input")
        bias = convert_to_tensor(bias, dtype=value.dtype, name="bias")
        if bias.shape.ndims not in (None, 1):
            raise ValueError(f"Shape must be rank 1 but is rank {bias.shape.ndims} for "
                             f"'BiasAdd' with input shapes: {value.shape}, {bias.shape}.")
        rank = value.shape.ndims
        if rank is not None and rank < 2:
            raise ValueError(f"Shape must be at least rank 2 but is rank {rank} for 'BiasAdd' "
                             f"with input shapes: {value.shape}, {bias.shape}.")
        channels_first = data_format is not None and data_format.startswith("NC")
        if data_format is not None and not channels_first and not data_format.startswith("N"):
            raise ValueError(f"bias_add: unknown data_format {data_format!r}")
        c = None if rank is None else value.shape[1 if channels_first else -1]
        if c is not None and bias.shape.ndims == 1 and bias.shape[0] not in (None, c):
            raise ValueError(f"Dimensions must be equal, but are {c} and {bias.shape[0]} for "
                             f"'BiasAdd' with input shapes: {value.shape}, {bias.shape}.")
        if channels_first:
            if rank is None:
                raise ValueError("bias_add with NC... data_format needs the rank of value")
            bias = array_ops.reshape(bias, [-1] + [1] * (rank - 2))
        # The sum takes the scope's own name, as TF's BiasAdd op does ("dense/BiasAdd").
        return math_ops.add(value, bias, name=scope)


def embedding_lookup(params, ids, partition_strategy="mod", name=None, validate_indices=True,
                     max_norm=None):
    """Rows of ``params`` at ``ids``. ``params`` may be a list of shards, split by
    ``partition_strategy`` ``"mod"`` (id ``i`` is row ``i // n`` of shard ``i % n``) or
    ``"div"`` (contiguous blocks); ``max_norm`` clips each looked-up row's L2 norm.

    >>> table = df.constant([[0.0, 0.0], [1.0, 1.0], [2.0, 2.0], [3.0, 3.0]])
    >>> df.Session().run(embedding_lookup(table, [3, 1]))
    array([[3., 3.],
           [1., 1.]], dtype=float32)
    """
    if partition_strategy not in ("mod", "div"):
        raise ValueError(f"Unrecognized partition strategy: {partition_strategy}")
    shards = list(params) if isinstance(params, (list, tuple)) else [params]
    if not shards:
        raise ValueError("Need at least one param")
    with name_scope(name or "embedding_lookup"):
        shards = [convert_to_tensor(p) for p in shards]
        ids = convert_to_tensor(ids, name="ids")
        if len(shards) == 1:
            result = array_ops.gather(shards[0], ids)
        else:
            table = array_ops.concat(shards, 0)
            if partition_strategy == "div":   # shards hold consecutive blocks of ids
                result = array_ops.gather(table, ids)
            else:
                n = len(shards)
                offsets = math_ops.cast(_row_offsets(shards), ids.dtype)
                shard = math_ops.floormod(ids, n)
                row = array_ops.gather(offsets, shard) + math_ops.floordiv(ids, n)
                result = array_ops.gather(table, row)
        if max_norm is not None:
            if result.shape.ndims is None or ids.shape.ndims is None:
                raise ValueError("embedding_lookup: max_norm needs the ranks of ids and params")
            axes = list(range(ids.shape.ndims, result.shape.ndims))
            result = clip_by_norm(result, max_norm, axes=axes)
        return result


def _row_offsets(shards):
    """Where each shard starts in their concatenation (from static sizes when known)."""
    sizes = [s.shape[0] if s.shape.ndims else None for s in shards]
    if None not in sizes:
        return convert_to_tensor(np.concatenate([[0], np.cumsum(sizes)[:-1]]).astype(np.int64))
    dims = array_ops.stack([array_ops.shape(s, out_type=_dtypes.int64)[0] for s in shards])
    from .extra_array_ops import cumsum
    return cumsum(dims, exclusive=True)


# -- clipping --------------------------------------------------------------------------------------

def clip_by_value(t, clip_value_min, clip_value_max, name=None):
    """``t`` with values below ``clip_value_min`` raised to it and those above
    ``clip_value_max`` lowered to it (a value at a bound keeps its gradient, as TF1).

    >>> df.Session().run(clip_by_value(df.constant([-2.0, 0.5, 3.0]), 0.0, 1.0))
    array([0. , 0.5, 1. ], dtype=float32)
    """
    with name_scope(name or "clip_by_value"):
        t = convert_to_tensor(t, name="t")
        t_min = math_ops.minimum(t, clip_value_max)
        _check_not_broadcast(t, t_min)
        t_max = math_ops.maximum(t_min, clip_value_min)
        _check_not_broadcast(t, t_max)
        return t_max


def _check_not_broadcast(t, result):
    """TF1 refuses bounds that would broadcast ``t`` to a larger shape."""
    if not t.shape.is_compatible_with(result.shape) or (
            t.shape.ndims is not None and result.shape.ndims != t.shape.ndims):
        raise ValueError(f"clip_by_value: the bounds would broadcast t from {t.shape} to "
                         f"{result.shape}")


def clip_by_norm(t, clip_norm, axes=None, name=None):
    """``t * clip_norm / max(l2norm(t, axes), clip_norm)``: rescaled so its L2 norm over
    ``axes`` (all when None) is at most ``clip_norm``.

    >>> df.Session().run(clip_by_norm(df.constant([3.0, 4.0]), 1.0))
    array([0.6, 0.8], dtype=float32)
    """
    with name_scope(name or "clip_by_norm"):
        t = convert_to_tensor(t, name="t")
        l2sum = math_ops.reduce_sum(t * t, axes, keepdims=True)
        positive = math_ops.greater(l2sum, 0.0)
        # The select keeps sqrt away from 0, whose gradient is infinite.
        l2sum_safe = array_ops.where(positive, l2sum, array_ops.ones_like(l2sum))
        l2norm = array_ops.where(positive, math_ops.sqrt(l2sum_safe), l2sum)
        clip_norm = convert_to_tensor(clip_norm, dtype=t.dtype)
        clipped = (t * clip_norm) / math_ops.maximum(l2norm, clip_norm)
        clipped.set_shape(t.shape)
        return array_ops.identity(clipped)


def _tensor_list(t_list, fn):
    if isinstance(t_list, (str, bytes, Tensor)) or not isinstance(t_list, (list, tuple)):
        raise TypeError(f"{fn}: t_list should be a sequence of tensors")
    # As TF, an IndexedSlices counts by its rows (repeated indices are not summed first).
    return [None if t is None else t.values if isinstance(t, IndexedSlices)
            else convert_to_tensor(t) for t in t_list]


def global_norm(t_list, name=None):
    """``sqrt(sum of squares of every element of every tensor)`` (None entries skipped).

    >>> df.Session().run(global_norm([df.constant([3.0]), df.constant([4.0])]))
    np.float32(5.0)
    """
    values = _tensor_list(t_list, "global_norm")
    with name_scope(name or "global_norm"):
        halves = [l2_loss(v) for v in values if v is not None]
        half_squared = math_ops.reduce_sum(array_ops.stack(halves))
        return math_ops.sqrt(half_squared * 2.0, name="global_norm")


def clip_by_global_norm(t_list, clip_norm, use_norm=None, name=None):
    """Scale every tensor by ``clip_norm / max(global_norm, clip_norm)``; returns the
    clipped list (None entries stay None, an IndexedSlices stays one with scaled rows)
    and the global norm. An infinite norm gives NaN values, as TF1.

    >>> grads = [df.constant([3.0, 0.0]), None, df.constant([4.0])]
    >>> clipped, norm = clip_by_global_norm(grads, 1.0)
    >>> clipped[1] is None
    True
    >>> df.Session().run([clipped[0], clipped[2], norm])
    [array([0.6, 0. ], dtype=float32), array([0.8], dtype=float32), np.float32(5.0)]
    """
    values = _tensor_list(t_list, "clip_by_global_norm")
    with name_scope(name or "clip_by_global_norm") as scope:
        if use_norm is None:
            use_norm = global_norm(values)
        use_norm = convert_to_tensor(use_norm)
        clip_norm = convert_to_tensor(clip_norm, dtype=use_norm.dtype)
        one = convert_to_tensor(1.0, dtype=use_norm.dtype)
        scale_for_finite = clip_norm * math_ops.minimum(one / use_norm, one / clip_norm)
        scale = scale_for_finite + (use_norm - use_norm)   # NaN when the norm is not finite
        base = scope.rstrip("/").split("/")[-1]
        clipped = [None if v is None else
                   array_ops.identity(v * math_ops.cast(scale, v.dtype), name=f"{base}_{i}")
                   for i, v in enumerate(values)]
    clipped = [IndexedSlices(c, t.indices, t.dense_shape) if isinstance(t, IndexedSlices)
               else c for c, t in zip(clipped, t_list)]
    return clipped, use_norm
