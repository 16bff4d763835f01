"""Which ``cblas_?gemm`` NumPy itself calls (no Numba import: the runner puts the answer
in generated modules' names, since their cached object code calls it by name).

>>> sorted(numpy_gemm()) in ([], ['float32', 'float64'])
True
"""
from __future__ import annotations

import ctypes
import functools

__all__ = ["numpy_gemm"]

# Symbol spellings of cblas_?gemm: NumPy >= 2 wheels bundle scipy-openblas with prefixed
# ILP64 names ("64_": 64-bit integer arguments); other builds link a plain CBLAS.
_GEMM_SPELLINGS = (("scipy_cblas_{}gemm64_", True), ("cblas_{}gemm64_", True),
                   ("scipy_cblas_{}gemm", False), ("cblas_{}gemm", False))


@functools.lru_cache(maxsize=None)
def numpy_gemm() -> dict:
    """``{"float32": (symbol, ilp64, address), "float64": ...}`` for the BLAS that NumPy's
    ``_multiarray_umath`` links (``dlsym`` on that module searches the libraries it
    depends on); empty where none of the known spellings is exported."""
    try:
        from numpy._core import _multiarray_umath as umath
    except ImportError:   # NumPy 1.x
        from numpy.core import _multiarray_umath as umath
    try:
        lib = ctypes.CDLL(umath.__file__)
    except OSError:
        return {}
    for spelling, ilp64 in _GEMM_SPELLINGS:
        names = {dt: spelling.format(c) for dt, c in (("float32", "s"), ("float64", "d"))}
        try:
            return {dt: (name, ilp64, ctypes.cast(getattr(lib, name), ctypes.c_void_p).value)
                    for dt, name in names.items()}
        except AttributeError:
            continue
    return {}
