"""The CUDA device's runtime side: lazy ``numba.cuda``, device count, memory, launches.

Nothing here imports Numba at module import: ``import dataflow`` must stay fast and
work on machines without a GPU. ``numba.cuda`` is imported the first time a GPU is
counted or a GPU kernel is built (plan time), never per node execution.

>>> from dataflow.kernels.cuda import runtime
>>> runtime.gpu_count()        # 0 without a GPU and without the simulator; 1 under it
1
>>> runtime.to_host(runtime.to_device(np.ones(3)))
array([1., 1., 1.])
"""
from __future__ import annotations

import os
import sys
import threading

import numpy as np

__all__ = ["cuda", "simulator_enabled", "gpu_count", "is_device_value", "to_device",
           "to_host", "host_array", "device_empty", "launch_config", "row_launch",
           "launch_tile", "serialized", "THREADS_PER_BLOCK", "NO_GPU_HINT"]

_cuda = None
_device_types: tuple = ()
_gpu_count = None
_count_lock = threading.Lock()


def cuda():
    """The ``numba.cuda`` module, imported on first use (the ``numba-cuda`` package's
    when installed, which takes over ``from numba import cuda``)."""
    global _cuda, _device_types
    if _cuda is None:
        from numba import cuda as module
        if simulator_enabled():
            from numba.cuda.simulator.cudadrv.devicearray import FakeCUDAArray
            _device_types = (FakeCUDAArray,)
        else:
            from numba.cuda.cudadrv.devicearray import DeviceNDArrayBase
            _device_types = (DeviceNDArrayBase,)
        _cuda = module
    return _cuda


def simulator_enabled() -> bool:
    """True when Numba's CUDA simulator is on. Numba reads ``NUMBA_ENABLE_CUDASIM`` once,
    at its first import, so after that its config is the truth, not the environment."""
    if "numba" in sys.modules:
        from numba.core import config
        return bool(config.ENABLE_CUDASIM)
    return os.environ.get("NUMBA_ENABLE_CUDASIM", "0") not in ("", "0")


NO_GPU_HINT = ("no CUDA GPU was found and Numba's CUDA simulator is off; set "
               "NUMBA_ENABLE_CUDASIM=1 before numba is first imported to run GPU ops in "
               "the simulator")


def gpu_count() -> int:
    """Number of usable GPUs: 1 under the simulator, else what the CUDA driver reports
    (0 without a driver or device). Counted once per process."""
    global _gpu_count
    if _gpu_count is None:
        with _count_lock:
            if _gpu_count is None:
                _gpu_count = _count_gpus()
    return _gpu_count


def _count_gpus() -> int:
    if simulator_enabled():
        return 1
    # Without a CUDA driver library there is no GPU: say so without importing numba.cuda
    # (a third of a second, and it leaves driver objects behind).
    import ctypes.util
    if ctypes.util.find_library("cuda") is None:
        return 0
    try:
        module = cuda()
        return len(module.gpus) if module.is_available() else 0
    except Exception:  # no driver, broken toolkit: no GPU, the session says so
        return 0


# -- memory ------------------------------------------------------------------------------
def is_device_value(value) -> bool:
    """True if ``value`` lives in GPU memory (a Numba device array)."""
    return bool(_device_types) and isinstance(value, _device_types)


def to_device(value):
    """``value`` in GPU memory: device arrays pass through, host values are copied."""
    if is_device_value(value):
        return value
    arr = np.asarray(value)
    if not arr.flags.c_contiguous:  # (np.ascontiguousarray would make 0-d arrays 1-d)
        arr = arr.copy(order="C")
    return cuda().to_device(arr)


def to_host(value):
    """``value`` in host memory: a device array is copied back (0-d ones as NumPy
    scalars, the executor's representation of scalars); host values pass through."""
    if is_device_value(value):
        host = value.copy_to_host()
        return host[()] if host.ndim == 0 else host
    return value


def host_array(value) -> np.ndarray:
    """``value`` as a host ndarray (for small shape/axis arguments that live in host
    memory, as TF's ``HostMemory`` inputs do)."""
    return np.asarray(to_host(value))


def device_empty(shape, dtype):
    """An uninitialised device array."""
    return cuda().device_array(tuple(shape), dtype=np.dtype(dtype))


# -- launches ----------------------------------------------------------------------------
#: Threads per block on a real GPU.
THREADS_PER_BLOCK = 256
# Grid-stride kernels need no more blocks than keep every SM busy.
_MAX_BLOCKS = 1024
# The simulator runs every CUDA thread as a Python thread: a small grid whose threads
# loop over many elements (grid-stride loops) is far faster there than one thread per
# element, and exercises the same code.
_SIM_THREADS, _SIM_BLOCKS = 32, 2


def launch_config(n: int, threads: int | None = None) -> tuple[int, int]:
    """``(blocks, threads)`` for a grid-stride kernel over ``n`` items."""
    if simulator_enabled():
        return min(_SIM_BLOCKS, max(1, -(-n // _SIM_THREADS))), _SIM_THREADS
    threads = threads or THREADS_PER_BLOCK
    return min(_MAX_BLOCKS, max(1, -(-n // threads))), threads


def row_launch(rows: int) -> tuple[int, int]:
    """``(blocks, threads)`` for the row kernels (one block per row at a time; the
    thread count is the compile-time shared-array size, a power of two)."""
    if simulator_enabled():
        return min(_SIM_BLOCKS, max(1, rows)), _SIM_THREADS
    return min(_MAX_BLOCKS * 64, max(1, rows)), THREADS_PER_BLOCK


def launch_tile():
    """``(blocks_for(m, n), tile)`` for the tiled matmul kernel: 16x16 threads per block
    on a GPU, 8x8 under the simulator (one Python thread per CUDA thread)."""
    if simulator_enabled():
        def sim_blocks(m, n):
            return (min(_SIM_BLOCKS, -(-n // 8)), min(_SIM_BLOCKS, -(-m // 8)))
        return sim_blocks, 8

    def blocks(m, n):
        return (min(65535, -(-n // 16)), min(65535, -(-m // 16)))
    return blocks, 16


_LAUNCH_LOCK = threading.Lock()


def serialized(fn):
    """``fn`` made safe to call from several host threads at once.

    The simulator cannot run kernels launched from two threads at the same time (its
    thread-local CUDA context and ``syncthreads`` barriers get mixed up), and the
    executor runs large kernels on worker threads. Under the simulator every GPU kernel
    callable is wrapped to take one process-wide lock; on a real GPU ``fn`` is
    returned unchanged (launches are asynchronous and thread-safe there).
    """
    if not simulator_enabled():
        return fn

    def locked(*args):
        with _LAUNCH_LOCK:
            return fn(*args)
    locked.__wrapped__ = fn
    return locked
