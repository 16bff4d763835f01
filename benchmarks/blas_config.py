"""Which BLAS kernels a benchmark ran, and the two BLAS configurations worth comparing.

NumPy's bundled OpenBLAS picks its kernels once, when it loads: by detecting the CPU, or
as ``OPENBLAS_CORETYPE`` names them. Some machines set that variable in the environment
(this project's build machine sets ``OPENBLAS_CORETYPE=Haswell``, so its Zen 5 CPU runs
the AVX2 kernels instead of the SkylakeX AVX-512 ones OpenBLAS detects by itself), and a
32x256x256 SGEMM then takes 40 µs instead of 26. A figure that does not say which kernels
ran cannot be compared with another, so the benchmarks label each column with
:func:`blas_label`, and ``--blas-coretype`` runs the NumPy-BLAS columns (dataflow and
NumPy) in worker processes whose environment is either the caller's (``env``) or the
caller's without ``OPENBLAS_CORETYPE`` (``native``: OpenBLAS detects the CPU), or both.

Only the benchmark's own worker processes get the changed environment: the library
never touches the user's BLAS settings.

>>> worker_env({"OPENBLAS_CORETYPE": "Haswell", "PATH": "/bin"}, "native")
{'PATH': '/bin'}
>>> configurations("both")
('env', 'native')
"""
from __future__ import annotations

CORETYPE = "OPENBLAS_CORETYPE"
MODES = ("env", "native", "both")

# Whose GEMM each column of the frameworks table runs: dataflow's MatMul (interpreted and
# compiled) its own float32 GEMM in that kernel's range (AVX-512 hosts;
# dataflow.kernels.numba_cpu.gemm) and NumPy's BLAS otherwise; the NumPy baseline calls
# NumPy's BLAS; the peers bring their own kernels, whatever BLAS libraries their process
# also loads (NumPy's, for one).
GEMM_OF = {"dataflow": "own float32 GEMM in its range, else NumPy's BLAS",
           "NumPy": "NumPy's BLAS", "TF1": "Eigen (TF's own)",
           "JAX": "XLA:CPU (its own)", "PyTorch": "PyTorch's BLAS"}


def configurations(mode: str) -> tuple:
    """The BLAS configurations ``--blas-coretype MODE`` measures, in order."""
    if mode not in MODES:
        raise ValueError(f"--blas-coretype must be one of {MODES}, not {mode!r}")
    return ("env", "native") if mode == "both" else (mode,)


def worker_env(base: dict, config: str) -> dict:
    """A copy of ``base`` (an environment) for a worker of BLAS configuration ``config``:
    unchanged for ``env``, without ``OPENBLAS_CORETYPE`` for ``native``."""
    env = dict(base)
    if config == "native":
        env.pop(CORETYPE, None)
    return env


def blas_libraries() -> list:
    """``[(library, version, kernel architecture, threads)]`` of the BLAS libraries loaded
    in this process (``threadpoolctl``; empty when it is not installed), NumPy's first."""
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        return []
    found = [i for i in threadpool_info() if i.get("user_api") == "blas"]
    # NumPy's wheels keep their OpenBLAS in numpy.libs (SciPy's, also often loaded, in
    # scipy.libs): sorting on that puts the library NumPy calls first.
    found.sort(key=lambda i: "numpy" not in str(i.get("filepath", "")))
    return [(i.get("internal_api"), i.get("version"), i.get("architecture"),
             i.get("num_threads")) for i in found]


def describe(libraries, coretype) -> str:
    """One line naming the BLAS kernels, NumPy's library first: ``"openblas 0.3.31
    Haswell x2 (OPENBLAS_CORETYPE=Haswell)"``; ``coretype`` None means OpenBLAS chose by
    detecting the CPU.

    >>> describe([("openblas", "0.3.31", "SkylakeX", 1)], None)
    'openblas 0.3.31 SkylakeX x1 (detected)'
    >>> describe([("openblas", "0.3.31", "Haswell", 2), ("openblas", "0.3.30", "Haswell", 2)],
    ...          "Haswell")
    'openblas 0.3.31 Haswell x2 (OPENBLAS_CORETYPE=Haswell); also loaded: openblas 0.3.30 Haswell x2'
    """
    names = [f"{api} {version} {arch} x{threads}" for api, version, arch, threads in libraries]
    first = (names[0] if names else "BLAS unknown") + (
        f" ({CORETYPE}={coretype})" if coretype else " (detected)")
    return first + ("; also loaded: " + ", ".join(names[1:]) if names[1:] else "")


def blas_label() -> str:
    """:func:`describe` for this process (NumPy, and so its BLAS, imported first)."""
    import os

    import numpy  # noqa: F401  (loads the BLAS threadpoolctl is to find)
    return describe(blas_libraries(), os.environ.get(CORETYPE))
