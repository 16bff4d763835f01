"""CUDA kernels (``numba.cuda``) for ``/gpu:N`` devices.

Importing this package only registers kernel factories and the GPU's memory and
device count; ``numba.cuda`` itself is imported the first time a session counts
GPUs or builds a GPU kernel, so ``import dataflow`` stays fast and works on
machines without a GPU. Under Numba's CUDA simulator (``NUMBA_ENABLE_CUDASIM=1``,
set before numba is first imported) ``/gpu:0`` exists without a GPU.

Layout: ``runtime`` (lazy import, device count, host/device copies, launch
lock), one registration module per op family (``elementwise``, ``reduction``,
``nn``, ``matmul``, ``array``, ``state``, ``fused``), ``device/`` the kernel sources,
``fallback`` the host round trip for ops without a CUDA kernel, ``compile_check``
the PTX compile check of every kernel.

>>> a = df.constant(np.eye(2, dtype=np.float32))
>>> with df.device("/gpu:0"):
...     y = df.matmul(a, a + 1.0)
>>> df.Session().run(y)                     # fetched back to the host
array([[2., 1.],
       [1., 2.]], dtype=float32)
"""
from ..registry import register_device_type
from . import runtime
from . import array, elementwise, fused, matmul, nn, reduction, state  # noqa: F401
from . import fallback  # noqa: F401  (the host round trip, found at lookup time)

register_device_type("GPU", runtime.gpu_count, runtime.NO_GPU_HINT, to_host=runtime.to_host,
                     to_device=runtime.to_device)
