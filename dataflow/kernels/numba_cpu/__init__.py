"""Numba-compiled CPU kernels, registered with a higher priority than the NumPy ones.

``fused`` generates the kernels of fused elementwise nodes (``FusedElementwise``).
``elementwise``, ``reduction``, ``nn``, ``array``, ``training`` and ``gemm`` register compiled
kernels for float32/float64 (the op list is in each module; ``_dispatch`` has the
size thresholds below which the NumPy kernel runs instead). ``DATAFLOW_NUMBA_KERNELS=0``
leaves those ops to the NumPy kernels.
Numba itself is imported only when a compiled kernel first runs.
"""
from . import fused  # noqa: F401
from . import array, elementwise, nn, reduction, training  # noqa: F401,E402
from . import conv  # noqa: F401,E402  (conv2d, depthwise, pools)
from . import gemm  # noqa: F401,E402  (float32 MatMul: own AVX-512 GEMM)
