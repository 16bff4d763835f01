"""``MomentumOptimizer``: gradient descent with an accumulated velocity.

>>> w = df.Variable(1.0)
>>> train_op = MomentumOptimizer(0.1, momentum=0.9).minimize(df.square(w))
>>> with df.Session() as sess:
...     sess.run(df.global_variables_initializer())
...     _ = sess.run(train_op)
...     round(float(sess.run(w)), 6)
0.8
"""
from __future__ import annotations

from ..ops.control_flow_ops import group
from ..ops.training_ops import resource_sparse_apply_momentum
from .optimizer import Optimizer


class MomentumOptimizer(Optimizer):
    """Momentum (``tf.compat.v1.train.MomentumOptimizer``), TF1's formulas:

    ``accum = momentum * accum + grad``, then ``var -= learning_rate * accum``, or with
    ``use_nesterov=True``: ``var -= learning_rate * (grad + momentum * accum)``
    (using the new ``accum``). ``accum`` is the slot ``"momentum"``, starting at zero.
    A sparse gradient (IndexedSlices) updates only its rows of ``accum`` and ``var``
    (repeated indices summed first), as TF1's SparseApplyMomentum.

    >>> w = df.Variable(1.0)
    >>> opt = MomentumOptimizer(learning_rate=0.1, momentum=0.9, use_nesterov=True)
    >>> train_op = opt.minimize(df.square(w))
    >>> opt.get_slot(w, "momentum") is not None
    True
    """

    def __init__(self, learning_rate, momentum, use_locking=False, name="Momentum",
                 use_nesterov=False):
        super().__init__(use_locking, name)
        self._learning_rate = learning_rate
        self._momentum = momentum
        self._use_nesterov = use_nesterov

    def _create_slots(self, var_list):
        for v in var_list:
            self._zeros_slot(v, "momentum", self._name)

    def _apply_dense(self, grad, var):
        lr = self._hyper("learning_rate", self._learning_rate, var.dtype)
        momentum = self._hyper("momentum", self._momentum, var.dtype)
        accum = self.get_slot(var, "momentum")
        # As TF's ApplyMomentum kernel: accum = accum * momentum + grad.
        accum_t = accum.assign(accum * momentum + grad)
        if self._use_nesterov:
            var_t = var.assign_sub(grad * lr + accum_t * momentum * lr)
        else:
            var_t = var.assign_sub(accum_t * lr)
        return group(var_t, accum_t)

    def _apply_sparse(self, grad, var):
        # TF's SparseApplyMomentum: only the gradient's rows of accum and var move.
        lr = self._hyper("learning_rate", self._learning_rate, var.dtype)
        momentum = self._hyper("momentum", self._momentum, var.dtype)
        accum = self.get_slot(var, "momentum")
        return resource_sparse_apply_momentum(var.handle, accum.handle, lr, grad.values,
                                              grad.indices, momentum, self._use_nesterov)
