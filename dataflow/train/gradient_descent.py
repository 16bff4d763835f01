"""``GradientDescentOptimizer``: ``var -= learning_rate * grad``.

>>> w = df.Variable(1.0)
>>> train_op = GradientDescentOptimizer(0.1).minimize(df.square(w))   # w -= 0.1 * 2w
>>> with df.Session() as sess:
...     sess.run(df.global_variables_initializer())
...     _ = sess.run(train_op)
...     round(float(sess.run(w)), 6)
0.8
"""
from __future__ import annotations

from ..ops.training_ops import resource_scatter_add
from .optimizer import Optimizer


class GradientDescentOptimizer(Optimizer):
    """Plain gradient descent (``tf.compat.v1.train.GradientDescentOptimizer``).

    Each step: ``var -= learning_rate * grad``; a sparse gradient (IndexedSlices, e.g. of a
    ``gather``) subtracts ``learning_rate * values`` from the rows ``indices`` only.

    >>> w = df.Variable(0.0)
    >>> opt = GradientDescentOptimizer(learning_rate=0.5)
    >>> train_op = opt.minimize(df.square(w - 3.0))   # one step lands on the minimum
    >>> with df.Session() as sess:
    ...     sess.run(df.global_variables_initializer())
    ...     _ = sess.run(train_op)
    ...     float(sess.run(w))
    3.0
    """

    def __init__(self, learning_rate, use_locking=False, name="GradientDescent"):
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate

    def _apply_dense(self, grad, var):
        lr = self._hyper("learning_rate", self._learning_rate, var.dtype)
        # TF's ApplyGradientDescent kernel: var -= grad * lr.
        return var.assign_sub(grad * lr).op

    def _apply_sparse_duplicate_indices(self, grad, var):
        # As TF: one scatter-add of -lr * rows; repeated indices add up in the kernel.
        lr = self._hyper("learning_rate", self._learning_rate, var.dtype)
        return resource_scatter_add(var.handle, grad.indices, -grad.values * lr)
