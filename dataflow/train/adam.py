"""``AdamOptimizer``: adaptive moment estimation (Kingma & Ba), as TF1 computes it.

>>> w = df.Variable(1.0)
>>> train_op = AdamOptimizer(learning_rate=0.001).minimize(df.square(w))
>>> with df.Session() as sess:
...     sess.run(df.global_variables_initializer())
...     _ = sess.run(train_op)
...     round(float(sess.run(w)), 6)    # the first step moves w by the learning rate
0.999
"""
from __future__ import annotations

from ..ops.control_flow_ops import group
from ..ops.math_ops import cast, sqrt
from ..ops.training_ops import resource_apply_adam, resource_scatter_add
from .optimizer import Optimizer


class AdamOptimizer(Optimizer):
    """Adam (``tf.compat.v1.train.AdamOptimizer``), with TF1's update at step ``t``::

        lr_t = learning_rate * sqrt(1 - beta2^t) / (1 - beta1^t)
        m = beta1 * m + (1 - beta1) * g
        v = beta2 * v + (1 - beta2) * g * g
        var -= lr_t * m / (sqrt(v) + epsilon)

    ``m`` and ``v`` are zero-initialized slots (``"m"``, ``"v"``; variables
    ``<var>/Adam`` and ``<var>/Adam_1``). ``beta1^t`` and ``beta2^t`` are kept in
    the non-trainable variables ``beta1_power`` and ``beta2_power`` (starting at
    ``beta1`` and ``beta2``), multiplied by the betas after every step's updates.

    >>> w = df.Variable([1.0, -1.0])
    >>> opt = AdamOptimizer(learning_rate=0.01)
    >>> train_op = opt.minimize(df.reduce_sum(df.square(w)))
    >>> beta1_power, beta2_power = opt._get_beta_accumulators()
    >>> sorted(opt.get_slot_names())
    ['m', 'v']
    """

    def __init__(self, learning_rate=0.001, beta1=0.9, beta2=0.999, epsilon=1e-8,
                 use_locking=False, name="Adam"):
        super().__init__(use_locking, name)
        self._lr = learning_rate
        self._beta1 = beta1
        self._beta2 = beta2
        self._epsilon = epsilon

    def _get_beta_accumulators(self):
        return self._get_non_slot("beta1_power"), self._get_non_slot("beta2_power")

    def _create_slots(self, var_list):
        # As TF: the beta powers take the dtype of the first variable by name.
        first_var = min(var_list, key=lambda v: v.name)
        self._get_or_make_non_slot(self._beta1, "beta1_power", first_var)
        self._get_or_make_non_slot(self._beta2, "beta2_power", first_var)
        for v in var_list:
            self._zeros_slot(v, "m", self._name)
            self._zeros_slot(v, "v", self._name)

    def _apply_dense(self, grad, var):
        dtype = var.dtype
        lr = self._hyper("learning_rate", self._lr, dtype)
        beta1 = self._hyper("beta1", self._beta1, dtype)
        beta2 = self._hyper("beta2", self._beta2, dtype)
        epsilon = self._hyper("epsilon", self._epsilon, dtype)
        beta1_power, beta2_power = self._get_beta_accumulators()
        beta1_power = cast(beta1_power, dtype)
        beta2_power = cast(beta2_power, dtype)
        m, v = self.get_slot(var, "m"), self.get_slot(var, "v")
        # One fused op per variable (TF's ResourceApplyAdam): the update formulas of
        # the class docstring in a single kernel instead of a dozen graph ops.
        return resource_apply_adam(var.handle, m.handle, v.handle, beta1_power, beta2_power,
                                   lr, beta1, beta2, epsilon, grad)

    def _apply_sparse(self, grad, var):
        """TF1's sparse Adam: every row of ``m`` and ``v`` decays, the gradient's rows
        are added, and every row of ``var`` moves by ``lr_t * m / (sqrt(v) + epsilon)``."""
        dtype = var.dtype
        beta1 = self._hyper("beta1", self._beta1, dtype)
        beta2 = self._hyper("beta2", self._beta2, dtype)
        epsilon = self._hyper("epsilon", self._epsilon, dtype)
        beta1_power, beta2_power = (cast(p, dtype) for p in self._get_beta_accumulators())
        lr = self._hyper("learning_rate", self._lr, dtype) * sqrt(1 - beta2_power) \
            / (1 - beta1_power)
        m_t = _decay_then_add(self.get_slot(var, "m"), beta1, grad.indices,
                              grad.values * (1 - beta1))
        v_t = _decay_then_add(self.get_slot(var, "v"), beta2, grad.indices,
                              grad.values * grad.values * (1 - beta2))
        var_update = var.assign_sub(lr * m_t / (sqrt(v_t) + epsilon))
        return group(var_update, m_t, v_t)

    def _finish(self, update_ops, name_scope):
        beta1_power, beta2_power = self._get_beta_accumulators()
        graph = beta1_power.graph
        # The powers advance only after every variable's update has read them.
        with graph.control_dependencies(update_ops):
            beta1 = self._hyper("beta1", self._beta1, beta1_power.dtype)
            beta2 = self._hyper("beta2", self._beta2, beta2_power.dtype)
            update_beta1 = beta1_power.assign(beta1_power * beta1)
            update_beta2 = beta2_power.assign(beta2_power * beta2)
        return group(*update_ops, update_beta1, update_beta2, name=name_scope)


def _decay_then_add(slot, decay, indices, rows):
    """``slot *= decay`` (every row), then ``rows`` added at ``indices``; the new value."""
    graph = slot.graph
    decayed = slot.assign(slot * decay)
    with graph.control_dependencies([decayed]):
        added = resource_scatter_add(slot.handle, indices, rows)
    with graph.control_dependencies([added]):
        return slot.read_value()
