"""Fused optimizer kernels."""
from __future__ import annotations

import numpy as np

from ..registry import register_kernel


@register_kernel("ResourceApplyAdam")
def _apply_adam(ctx):
    def apply(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad):
        lr_t = lr * np.sqrt(1 - beta2_power) / (1 - beta1_power)
        m_new = beta1 * m.read() + (1 - beta1) * grad
        v_new = beta2 * v.read() + (1 - beta2) * grad * grad
        var.store_owned(var.read() - lr_t * m_new / (np.sqrt(v_new) + epsilon))
        m.store_owned(m_new)
        v.store_owned(v_new)
    return apply
