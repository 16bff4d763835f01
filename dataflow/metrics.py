"""``df.metrics``: TF1's streaming ``accuracy`` (and the ``mean`` it is built on).

A metric keeps running totals in *local* variables (collections ``"local_variables"``
and ``"metric_variables"``, not trainable, not in ``global_variables()``): run the
``update_op`` on each batch, then read the metric tensor. Initialize the totals with
``df.variables_initializer(df.get_default_graph().get_collection("local_variables"))``
(TF1's ``local_variables_initializer()``).

>>> y = df.placeholder(df.int64, [None])
>>> z = df.placeholder(df.float32, [None, 2])
>>> acc, update = df.metrics.accuracy(labels=y, predictions=df.argmax(z, 1))
>>> with df.Session() as sess:
...     sess.run(df.local_variables_initializer())
...     sess.run(update, {y: [0, 1], z: [[1.0, 0.0], [1.0, 0.0]]})   # 1 of 2 right
...     sess.run(update, {y: [1, 1], z: [[0.0, 1.0], [0.0, 1.0]]})   # 3 of 4 right
...     sess.run(acc)
np.float32(0.5)
np.float32(0.75)
np.float32(0.75)
"""
from __future__ import annotations

import numpy as np

from . import dtypes as _dtypes
from .framework.convert import convert_to_tensor
from .framework.graph import control_dependencies, get_default_graph, name_scope
from .losses import _div_no_nan
from .ops import array_ops, math_ops
from .ops.state_ops import Variable

__all__ = ["accuracy", "mean"]

LOCAL_VARIABLES = "local_variables"     # TF1's GraphKeys.LOCAL_VARIABLES
METRIC_VARIABLES = "metric_variables"   # TF1's GraphKeys.METRIC_VARIABLES


def _metric_variable(name):
    return Variable(np.float32(0.0), trainable=False, name=name,
                    collections=[LOCAL_VARIABLES, METRIC_VARIABLES])


def _add(collections, value):
    for c in collections or ():
        get_default_graph().add_to_collection(c, value)


def mean(values, weights=None, metrics_collections=None, updates_collections=None, name=None):
    """The running (weighted) mean of ``values``: returns ``(mean, update_op)``.

    >>> batch_losses = df.placeholder(df.float32, [None])
    >>> m, update = mean(batch_losses)
    >>> with df.Session() as sess:
    ...     sess.run(df.local_variables_initializer())
    ...     sess.run(update, {batch_losses: [1.0, 2.0]})
    ...     sess.run(update, {batch_losses: [6.0]})
    np.float32(1.5)
    np.float32(3.0)
    """
    with name_scope(name or "mean"):
        values = math_ops.cast(convert_to_tensor(values), _dtypes.float32)
        total = _metric_variable("total")
        count = _metric_variable("count")
        if weights is None:
            num_values = math_ops.cast(array_ops.size(values), _dtypes.float32)
        else:
            weights = math_ops.cast(convert_to_tensor(weights), _dtypes.float32)
            weights = weights * array_ops.ones_like(values)   # broadcast to the values
            values = values * weights
            num_values = math_ops.reduce_sum(weights)
        update_total = total.assign_add(math_ops.reduce_sum(values))
        with control_dependencies([values]):
            update_count = count.assign_add(num_values)
        mean_t = _div_no_nan(total.read_value(), math_ops.maximum(count.read_value(), 0.0))
        mean_t = array_ops.identity(mean_t, name="value")
        update_op = array_ops.identity(
            _div_no_nan(update_total, math_ops.maximum(update_count, 0.0)), name="update_op")
        _add(metrics_collections, mean_t)
        _add(updates_collections, update_op)
        return mean_t, update_op


def accuracy(labels, predictions, weights=None, metrics_collections=None,
             updates_collections=None, name=None):
    """How often ``predictions`` equals ``labels``, as a running mean: returns
    ``(accuracy, update_op)``; ``update_op`` adds a batch and returns the new accuracy.

    >>> y = df.constant([0, 1, 1])
    >>> logits = df.constant([[2.0, 1.0], [0.0, 3.0], [5.0, 4.0]])
    >>> acc, update = accuracy(labels=y, predictions=df.argmax(logits, 1))
    >>> with df.Session() as sess:
    ...     sess.run(df.local_variables_initializer())
    ...     sess.run(update)
    np.float32(0.6666667)
    """
    predictions = convert_to_tensor(predictions)
    labels = convert_to_tensor(labels)
    if not predictions.shape.is_compatible_with(labels.shape):
        raise ValueError(f"Shapes {predictions.shape} and {labels.shape} are incompatible")
    if labels.dtype is not predictions.dtype:
        predictions = math_ops.cast(predictions, labels.dtype)
    with name_scope(name or "accuracy") as scope:
        is_correct = math_ops.cast(math_ops.equal(predictions, labels), _dtypes.float32)
    return mean(is_correct, weights, metrics_collections, updates_collections,
                name=scope)
