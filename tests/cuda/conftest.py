"""The CUDA simulator suite: run with ``NUMBA_ENABLE_CUDASIM=1 python -m pytest tests/cuda``.

Numba reads ``NUMBA_ENABLE_CUDASIM`` once, when it is first imported, so it is set
here before anything imports numba; if numba was imported earlier without it the run
stops with a usage error instead of testing real-GPU code paths on a machine without
one. The default ``python -m pytest`` does not recurse into this directory
(``norecursedirs`` in pyproject.toml); ``.ci/run`` runs it separately.
"""
import os
import sys

os.environ["NUMBA_ENABLE_CUDASIM"] = "1"
# The simulator runs each CUDA thread as a Python thread and synchronises them at every
# syncthreads: a short switch interval makes those hand-offs about 3x faster.
sys.setswitchinterval(1e-4)

import pytest  # noqa: E402

from numba.core import config  # noqa: E402

if not config.ENABLE_CUDASIM:
    raise pytest.UsageError(
        "numba was imported before tests/cuda/conftest.py could switch on the CUDA "
        "simulator: run NUMBA_ENABLE_CUDASIM=1 python -m pytest tests/cuda")

# The ``graph`` fixture and the run's seed come from tests/conftest.py.
