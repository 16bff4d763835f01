"""Linear-algebra kernels: ``Qr`` and its gradient ``QrGrad``."""
from __future__ import annotations

import numpy as np

from ..registry import register_kernel


@register_kernel("Qr")
def _qr(ctx):
    mode = "complete" if ctx.attr("full_matrices") else "reduced"

    def kernel(x):
        q, r = np.linalg.qr(np.asarray(x), mode=mode)
        return q, r
    return kernel


def _t(x):
    return np.swapaxes(x, -1, -2)


def qr_grad(q, r, dq, dr):
    """The gradient of ``a`` for ``q, r = qr(a)`` (reduced, rows >= columns), TF's QrGrad:
    with ``M = tril(q'dq - dq'q + r dr' - dr r')``, ``da = q (dr + M r^-T) +
    (dq - q q'dq) r^-T``."""
    qdq = _t(q) @ dq
    rdr = r @ _t(dr)
    tril = np.tril(qdq - _t(qdq) + rdr - _t(rdr))

    def times_r_inv_t(x):  # x @ inv(r)^T, by solving r y' = x'
        return _t(np.linalg.solve(r, _t(x)))
    return q @ (dr + times_r_inv_t(tril)) + times_r_inv_t(dq - q @ qdq)


register_kernel("QrGrad")(lambda ctx: qr_grad)
