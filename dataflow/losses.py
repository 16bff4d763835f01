"""``df.losses``: TF1's ``tf.losses`` basics with its reduction rules.

Each loss computes per-element losses, weights them (``weights`` broadcast to the
losses), reduces them by ``reduction`` (default ``SUM_BY_NONZERO_WEIGHTS``: the weighted
sum divided by the number of non-zero weights, 0 when there are none) and adds the result
to the graph collection ``loss_collection`` (``"losses"``, TF1's ``GraphKeys.LOSSES``).

>>> z = df.constant([[0.0, 0.0], [0.0, 0.0]])
>>> loss = df.losses.sparse_softmax_cross_entropy(labels=[0, 1], logits=z)
>>> df.losses.get_losses() == [loss]
True
"""
from __future__ import annotations

from . import dtypes as _dtypes
from .framework.convert import convert_to_tensor
from .framework.graph import get_default_graph, name_scope
from .ops import array_ops, math_ops, nn_extra_ops, nn_ops

__all__ = ["Reduction", "compute_weighted_loss", "mean_squared_error", "softmax_cross_entropy",
           "sparse_softmax_cross_entropy", "add_loss", "get_losses"]

LOSSES = "losses"   # TF1's GraphKeys.LOSSES


class Reduction:
    """How a loss reduces its weighted per-element losses (TF1's ``tf.losses.Reduction``)."""

    NONE = "none"
    SUM = "weighted_sum"
    SUM_OVER_BATCH_SIZE = "weighted_sum_over_batch_size"
    MEAN = "weighted_mean"
    SUM_BY_NONZERO_WEIGHTS = "weighted_sum_by_nonzero_weights"
    SUM_OVER_NONZERO_WEIGHTS = SUM_BY_NONZERO_WEIGHTS

    @classmethod
    def all(cls):
        return (cls.NONE, cls.SUM, cls.MEAN, cls.SUM_OVER_BATCH_SIZE,
                cls.SUM_OVER_NONZERO_WEIGHTS, cls.SUM_BY_NONZERO_WEIGHTS)

    @classmethod
    def validate(cls, key):
        if key not in cls.all():
            raise ValueError(f"Invalid Reduction Key {key}.")


def add_loss(loss, loss_collection=LOSSES):
    """Add ``loss`` to the graph collection ``loss_collection`` (nothing when it is None)."""
    if loss_collection:
        get_default_graph().add_to_collection(loss_collection, loss)


def get_losses(scope=None, loss_collection=LOSSES):
    """The losses added to ``loss_collection``."""
    return get_default_graph().get_collection(loss_collection, scope)


def _check_not_none(**arguments):
    """TF1's ValueError for the first of the loss's ``arguments`` (in order) that is None."""
    for name, value in arguments.items():
        if value is None:
            raise ValueError(f"{name} must not be None.")


def _div_no_nan(x, y):
    """``x / y``, 0 where ``y`` is 0 (the denominator is guarded so no NaN gradient flows
    from the branch the select drops)."""
    zero = math_ops.equal(y, 0.0)
    safe = array_ops.where(zero, array_ops.ones_like(y), y)
    return array_ops.where(zero, array_ops.zeros_like(x), x / safe)


def _num_elements(losses):
    return math_ops.cast(array_ops.size(losses), losses.dtype)


def _num_present(losses, weights):
    """The number of elements of ``losses`` with a non-zero weight."""
    if weights.shape.ndims == 0:
        return array_ops.where(math_ops.equal(weights, 0.0), array_ops.zeros_like(weights),
                               _num_elements(losses))
    present = array_ops.where(math_ops.equal(weights, 0.0), array_ops.zeros_like(weights),
                              array_ops.ones_like(weights))
    return math_ops.reduce_sum(present * array_ops.ones_like(losses))


def compute_weighted_loss(losses, weights=1.0, scope=None, loss_collection=LOSSES,
                          reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Weight ``losses`` and reduce them by ``reduction``; the loss joins ``loss_collection``.

    >>> per_example = df.constant([1.0, 2.0, 3.0])
    >>> mask = df.constant([1.0, 1.0, 0.0])
    >>> df.Session().run(compute_weighted_loss(per_example, weights=mask))
    np.float32(1.5)
    """
    Reduction.validate(reduction)
    with name_scope(scope or "weighted_loss"):
        losses = convert_to_tensor(losses)
        input_dtype = losses.dtype
        losses = math_ops.cast(losses, _dtypes.float32) if not input_dtype.is_floating \
            else losses
        weights = math_ops.cast(convert_to_tensor(weights), losses.dtype)
        weighted = math_ops.multiply(losses, weights)
        if not weighted.shape.is_compatible_with(losses.shape) or (
                losses.shape.ndims is not None and weighted.shape.ndims != losses.shape.ndims):
            raise ValueError(f"weights can not be broadcast to values. weights.shape="
                             f"{weights.shape}, values.shape={losses.shape}")
        if reduction == Reduction.NONE:
            loss = weighted
        else:
            loss = math_ops.reduce_sum(weighted)
            if reduction == Reduction.MEAN:
                loss = _div_no_nan(loss, math_ops.reduce_sum(array_ops.ones_like(losses)
                                                             * weights))
            elif reduction == Reduction.SUM_BY_NONZERO_WEIGHTS:
                loss = _div_no_nan(loss, _num_present(losses, weights))
            elif reduction == Reduction.SUM_OVER_BATCH_SIZE:
                loss = _div_no_nan(loss, _num_elements(losses))
        loss = math_ops.cast(loss, input_dtype)
        add_loss(loss, loss_collection)
        return loss


def mean_squared_error(labels, predictions, weights=1.0, scope=None, loss_collection=LOSSES,
                       reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Weighted mean of ``(predictions - labels) ** 2`` (float32).

    >>> y = df.constant([1.0, 2.0])
    >>> p = df.constant([2.0, 4.0])
    >>> df.Session().run(mean_squared_error(labels=y, predictions=p))
    np.float32(2.5)
    """
    _check_not_none(labels=labels, predictions=predictions)
    with name_scope(scope or "mean_squared_error") as s:
        predictions = math_ops.cast(convert_to_tensor(predictions), _dtypes.float32)
        labels = math_ops.cast(convert_to_tensor(labels), _dtypes.float32)
        if not predictions.shape.is_compatible_with(labels.shape):
            raise ValueError(f"Shapes {predictions.shape} and {labels.shape} are incompatible")
        losses = math_ops.squared_difference(predictions, labels)
        return compute_weighted_loss(losses, weights, s, loss_collection, reduction)


def softmax_cross_entropy(onehot_labels, logits, weights=1.0, label_smoothing=0, scope=None,
                          loss_collection=LOSSES, reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Weighted softmax cross-entropy with one-hot labels, optionally smoothed towards
    ``label_smoothing / classes``; no gradient flows into the labels.

    >>> y1h = df.constant([[1.0, 0.0]])
    >>> z = df.constant([[0.0, 0.0]])
    >>> df.Session().run(softmax_cross_entropy(onehot_labels=y1h, logits=z, label_smoothing=0.1))
    np.float32(0.6931472)
    """
    _check_not_none(onehot_labels=onehot_labels, logits=logits)
    with name_scope(scope or "softmax_cross_entropy_loss") as s:
        logits = convert_to_tensor(logits)
        labels = math_ops.cast(convert_to_tensor(onehot_labels), logits.dtype)
        if not logits.shape.is_compatible_with(labels.shape):
            raise ValueError(f"Shapes {logits.shape} and {labels.shape} are incompatible")
        if label_smoothing > 0:
            classes = math_ops.cast(array_ops.shape(labels)[-1], logits.dtype)
            labels = labels * (1.0 - label_smoothing) + label_smoothing / classes
        labels = array_ops.stop_gradient(labels, name="labels_stop_gradient")
        losses = nn_ops.softmax_cross_entropy_with_logits(labels=labels, logits=logits,
                                                          name="xentropy")
        return compute_weighted_loss(losses, weights, s, loss_collection, reduction)


def _squeeze_last(t, expected_rank):
    """``t`` without a trailing size-1 dimension when it has one more than expected."""
    if t.shape.ndims is not None and t.shape.ndims == expected_rank + 1 \
            and t.shape[-1] == 1:
        return array_ops.squeeze(t, [-1])
    return t


def sparse_softmax_cross_entropy(labels, logits, weights=1.0, scope=None,
                                 loss_collection=LOSSES,
                                 reduction=Reduction.SUM_BY_NONZERO_WEIGHTS):
    """Weighted softmax cross-entropy with integer class ``labels`` (``[batch]`` or
    ``[batch, 1]``).

    >>> y = df.constant([0, 1])
    >>> z = df.constant([[0.0, 0.0], [0.0, 0.0]])
    >>> df.Session().run(sparse_softmax_cross_entropy(labels=y, logits=z))
    np.float32(0.6931472)
    """
    _check_not_none(labels=labels, logits=logits)
    with name_scope(scope or "sparse_softmax_cross_entropy_loss") as s:
        logits = convert_to_tensor(logits)
        labels = convert_to_tensor(labels)
        if logits.shape.ndims is not None:
            labels = _squeeze_last(labels, logits.shape.ndims - 1)
        weights = convert_to_tensor(weights)
        if weights.shape.ndims and labels.shape.ndims is not None:
            weights = _squeeze_last(weights, labels.shape.ndims)
        losses = nn_extra_ops.sparse_softmax_cross_entropy_with_logits(
            labels=labels, logits=logits, name="xentropy")
        return compute_weighted_loss(losses, weights, s, loss_collection, reduction)
