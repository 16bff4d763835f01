"""Optimizer update kernels."""
from __future__ import annotations

import functools
import math

import numpy as np
from numba import cuda

__all__ = ["adam_kernel"]


@functools.lru_cache(maxsize=None)
def adam_kernel(dtype: np.dtype):
    """One Adam step over flat arrays, writing fresh ``var``, ``m``, ``v`` arrays (the
    old ones may still be read by other ops of the step): TF1's update with the
    bias-corrected step size ``lr_t`` computed on the host."""
    one = dtype.type(1)

    @cuda.jit
    def adam(var, m, v, grad, lr_t, beta1, beta2, epsilon, var_out, m_out, v_out):
        for i in range(cuda.grid(1), var.size, cuda.gridsize(1)):
            g = grad[i]
            m_new = beta1 * m[i] + (one - beta1) * g
            v_new = beta2 * v[i] + (one - beta2) * g * g
            m_out[i] = m_new
            v_out[i] = v_new
            var_out[i] = var[i] - lr_t * m_new / (math.sqrt(v_new) + epsilon)
    return adam
