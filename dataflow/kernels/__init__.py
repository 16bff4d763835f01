"""Kernel implementations, registered per (op type, device type, dtype).

``dataflow.kernels.registry`` holds the registry; ``dataflow.kernels.numpy_cpu`` the NumPy
reference kernels for the CPU (the fallback for every op and the test oracle).
Importing this package registers the NumPy kernels; other device types add
their own subpackage without touching the executor.
"""
from . import registry  # noqa: F401
from . import numpy_cpu  # noqa: F401  (registers the reference kernels)
from . import numba_cpu  # noqa: F401  (compiled CPU kernels; imports no Numba yet)
# GPU kernels: registering them imports no numba.cuda (that waits for a GPU session).
from . import cuda  # noqa: F401
