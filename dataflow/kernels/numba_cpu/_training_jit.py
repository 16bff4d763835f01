"""Compiled optimizer updates (imports Numba).

>>> adam(w, m, v, g, w_out, m_out, v_out, lr_t, b1, 1 - b1, b2, 1 - b2, eps)  # doctest: +SKIP
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
