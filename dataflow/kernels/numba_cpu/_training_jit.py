"""Compiled optimizer updates (imports Numba).

>>> w, m, v, g = np.ones(3), np.zeros(3), np.zeros(3), np.full(3, 0.5)
>>> w_out, m_out, v_out = np.empty(3), np.empty(3), np.empty(3)
>>> b1, b2, eps, lr_t = 0.9, 0.999, 1e-8, 0.001
>>> adam(w, m, v, g, w_out, m_out, v_out, lr_t, b1, 1 - b1, b2, 1 - b2, eps)
>>> m_out.round(6).tolist(), v_out.round(6).tolist()
([0.05, 0.05, 0.05], [0.00025, 0.00025, 0.00025])
"""
from __future__ import annotations

import numpy as np
from numba import njit

_JIT = {"nogil": True, "cache": True, "error_model": "numpy"}


@njit(**_JIT)
def adam(w, m, v, g, w_out, m_out, v_out, lr_t, b1, one_minus_b1, b2, one_minus_b2, eps):
    """One Adam step over 1-D arrays into fresh outputs, in the NumPy kernel's order of
    operations (so the results are bitwise equal)."""
    for i in range(g.size):
        mi = b1 * m[i] + one_minus_b1 * g[i]
        vi = b2 * v[i] + one_minus_b2 * g[i] * g[i]
        m_out[i] = mi
        v_out[i] = vi
        w_out[i] = w[i] - lr_t * mi / (np.sqrt(vi) + eps)


def kernel(name):
    """The compiled kernel called ``name`` (for :func:`._dispatch.lazy`)."""
    return globals()[name]
