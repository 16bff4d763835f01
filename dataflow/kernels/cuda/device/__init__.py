"""CUDA kernel sources (``numba.cuda``).

Every module in this subpackage imports ``numba.cuda`` at import time, so the
registration modules of :mod:`dataflow.kernels.cuda` import them only inside kernel
factories (plan time), never at ``import dataflow``.
"""
