"""Numba kernel of ResourceApplyAdam: one pass over the variable, both moments and
the gradient (the NumPy kernel makes about ten), writing three fresh arrays.

Results equal the NumPy kernel's bit for bit. Any float32/float64 variable of one
C-contiguous array with scalar hyperparameters of its dtype takes the compiled path
at every size: the NumPy kernel's ten array operations cost more than one call even
for a bias of ten elements.

>>> w = df.Variable(np.ones(10, np.float32))
>>> step = df.train.AdamOptimizer(0.001).minimize(df.reduce_sum(w * w))  # ApplyAdam
>>> with df.Session() as sess:
...     sess.run(df.global_variables_initializer())
...     _ = sess.run(step)
...     [round(float(v), 4) for v in sess.run(w)[:3]]
[0.999, 0.999, 0.999]
"""
from __future__ import annotations

import numpy as np

from ._dispatch import lazy, register_numba

_ndarray = np.ndarray
_FLOATS = (np.dtype(np.float32), np.dtype(np.float64))


@register_numba("ResourceApplyAdam", dtypes=None)
def _apply_adam(ctx, ref):
    """Compiled Adam update of one variable."""
    fn = lazy("_training_jit", "kernel", "adam")

    def apply(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad):
        w, m0, v0 = var.read(), m.read(), v.read()
        dt = grad.dtype if type(grad) is _ndarray else None
        if dt not in _FLOATS or not (type(w) is type(m0) is type(v0) is _ndarray) \
                or not (w.dtype is m0.dtype is v0.dtype is dt) \
                or not (w.shape == m0.shape == v0.shape == grad.shape) \
                or not (w.flags.c_contiguous and m0.flags.c_contiguous
                        and v0.flags.c_contiguous and grad.flags.c_contiguous):
            return ref(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad)
        scalar = dt.type
        if not all(type(s) is scalar for s in (beta1_power, beta2_power, lr, beta1, beta2,
                                               epsilon)):
            return ref(var, m, v, beta1_power, beta2_power, lr, beta1, beta2, epsilon, grad)
        lr_t = lr * np.sqrt(1 - beta2_power) / (1 - beta1_power)   # as the NumPy kernel
        w1, m1, v1 = np.empty(w.shape, dt), np.empty(w.shape, dt), np.empty(w.shape, dt)
        fn(w.reshape(-1), m0.reshape(-1), v0.reshape(-1), grad.reshape(-1), w1.reshape(-1),
           m1.reshape(-1), v1.reshape(-1), lr_t, beta1, 1 - beta1, beta2, 1 - beta2, epsilon)
        var.store_owned(w1)
        m.store_owned(m1)
        v.store_owned(v1)
    return apply
