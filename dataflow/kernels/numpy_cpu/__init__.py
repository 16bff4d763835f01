"""NumPy reference kernels for the CPU: the fallback for every op and the test oracle.

Scalar (0-d) values travel as NumPy scalars, and elementwise kernels use Python
operators where they can: ``np.int32(1) + np.int32(2)`` costs ~60 ns, ``np.add`` on
the same scalars over 1 µs, and the scalar while loop lives on such calls.
"""
from . import (array, control_flow, data_flow, grad, logging, math, nn, state,  # noqa: F401
               training)
from . import conv, extra_array, nn_extra  # noqa: F401,E402
from . import linalg, random  # noqa: F401
from . import sequence, tensor_array  # noqa: F401
