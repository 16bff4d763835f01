"""GPU MatMul: a tiled shared-memory kernel (:mod:`dataflow.kernels.cuda.device.matmul`), or
cuBLAS through CuPy when CuPy is importable (an optional fast path; never under the
simulator).

>>> x = df.constant(np.ones((2, 3), np.float32))
>>> w = df.constant(np.full((4, 3), 0.5, np.float32))
>>> with df.device("/gpu:0"):
...     y = df.matmul(x, w, transpose_b=True)
>>> df.Session().run(y).tolist()
[[1.5, 1.5, 1.5, 1.5], [1.5, 1.5, 1.5, 1.5]]
"""
from __future__ import annotations

from ..registry import register_kernel
from ._util import DeviceInput, np_dtype
from .elementwise import FLOAT
from .runtime import cuda, device_empty, launch_tile, serialized, simulator_enabled

__all__ = ["cupy_module"]

_CUPY = None


def cupy_module():
    """CuPy, when installed and usable (not under the simulator), else None."""
    global _CUPY
    if _CUPY is None:
        _CUPY = False
        if not simulator_enabled():
            try:
                import cupy
                _CUPY = cupy
            except Exception:  # not installed, or no usable CUDA runtime for it
                pass
    return _CUPY or None


def _shapes(a, b, ta, tb):
    m, k = (a.shape[1], a.shape[0]) if ta else a.shape
    k2, n = (b.shape[1], b.shape[0]) if tb else b.shape
    if k != k2:
        raise ValueError(f"Matrix size-incompatible: In[0]: {list(a.shape)}, "
                         f"In[1]: {list(b.shape)} (transpose_a={ta}, transpose_b={tb})")
    return m, n


@register_kernel("MatMul", device="GPU", dtypes=FLOAT)
def _matmul(ctx):
    from .device import matmul as K
    ta, tb = bool(ctx.attr("transpose_a")), bool(ctx.attr("transpose_b"))
    dt = np_dtype(ctx.output_dtypes[0])
    conv_a, conv_b = DeviceInput(), DeviceInput()
    cp = cupy_module()
    blocks_for, tile = launch_tile()
    kernel = K.matmul_kernel(dt, tile, ta, tb)

    def matmul(a, b):
        a, b = conv_a(a), conv_b(b)
        m, n = _shapes(a, b, ta, tb)
        if cp is not None:
            return _cublas(cp, a, b, ta, tb)
        out = device_empty((m, n), dt)
        if out.size:
            kernel[blocks_for(m, n), (tile, tile)](a, b, out)
        return out
    return serialized(matmul)


def _cublas(cp, a, b, ta, tb):
    """``op(a) @ op(b)`` by cuBLAS, sharing memory with the Numba arrays both ways."""
    x, y = cp.asarray(a), cp.asarray(b)
    out = (x.T if ta else x) @ (y.T if tb else y)
    return cuda().as_cuda_array(cp.ascontiguousarray(out))
