"""What every Numba CPU kernel wrapper shares: the NumPy fallback, lazy compiled
functions, and the size thresholds below which the NumPy kernel is faster.

A kernel factory here returns a small Python wrapper: NumPy scalars and arrays below
a threshold go to the NumPy reference kernel (a Numba dispatcher call costs about
0.5 µs before any work, more than NumPy needs for small arrays), larger C-contiguous
float arrays to the compiled function. The wrapper returns exactly what the
reference returns (dtype, shape, 0-d results as NumPy scalars).

How a kernel module registers one (``ctx`` the kernel context, ``ref`` the NumPy
kernel of the same node, called for small inputs)::

    @register_numba("Neg", FLOAT_TYPES)
    def _neg(ctx, ref):
        ...
"""
from __future__ import annotations

import glob
import hashlib
import importlib
import os

from .. import registry

__all__ = [
    "ARRAY_MIN_SIZE",
    "ELEMENTWISE_MIN_SIZE",
    "ENABLED",
    "FLOAT_TYPES",
    "MULTIPASS_MIN_SIZE",
    "REDUCTION_MIN_SIZE",
    "SELECT_MIN_SIZE",
    "SOFTMAX_MIN_SIZE",
    "TRANSCENDENTAL_MIN_SIZE",
    "lazy",
    "reference_kernel",
    "reference_out_kernel",
    "register_numba",
]

FLOAT_TYPES = ("float32", "float64")

#: ``DATAFLOW_NUMBA_KERNELS=0`` leaves the NumPy kernels in charge (for comparisons).
ENABLED = os.environ.get("DATAFLOW_NUMBA_KERNELS", "1") != "0"

# Sizes (elements of the largest input) from which the compiled path is used, measured
# with ``python -m benchmarks.kernels_table --thresholds`` (every threshold set to 0;
# the size where the compiled wrapper's median drops below the NumPy kernel's, float32,
# rounded to a power of two). A wrapper call costs ~1 µs more than a NumPy call (the
# dispatcher ~0.35 µs, the output allocation and reshapes the rest).
ELEMENTWISE_MIN_SIZE = 16384     # one NumPy pass (add, neg, ...): both end memory-bound
MULTIPASS_MIN_SIZE = 4096        # NumPy needs 2+ passes or broadcasts: grads, bias adds
TRANSCENDENTAL_MIN_SIZE = 512    # exp, log, tanh, sigmoid
REDUCTION_MIN_SIZE = 64          # the NumPy reduction kernels cost 3.5 µs at any size
SOFTMAX_MIN_SIZE = 16            # the compiled row loop wins at every size measured
ARRAY_MIN_SIZE = 4096            # gather, one_hot (elements of the output)
SELECT_MIN_SIZE = 16384


def register_numba(op_type, dtypes=FLOAT_TYPES, parallel=False, out=None, out_alias_safe=True):
    """Register ``factory(ctx, ref)`` for ``op_type`` over the NumPy kernel (priority 1).

    ``parallel`` as for :func:`dataflow.kernels.registry.register_kernel` (a bool, or a
    function of the op).

    ``ref`` is the NumPy reference kernel of the same node, for the fallback path.
    ``out(ctx, ref_out)``, when given, builds the kernel's ``out=`` variant
    (:func:`dataflow.kernels.registry.register_out_variant`); ``ref_out`` is the NumPy
    kernel's out variant (None when it has none), for the same fallback;
    ``out_alias_safe`` as for ``register_out_variant``.
    Nothing is registered when the Numba kernels are switched off.
    """
    def decorate(factory):
        def numba_factory(ctx):
            return factory(ctx, reference_kernel(ctx))
        numba_factory.numba_cpu = True
        numba_factory.__doc__ = factory.__doc__
        if ENABLED:
            registry.register_kernel(op_type, device="CPU", dtypes=dtypes, priority=1,
                                     parallel=parallel, compiled=True)(numba_factory)
            if out is not None:
                registry.register_out_variant(numba_factory, out_alias_safe)(
                    lambda ctx: out(ctx, reference_out_kernel(ctx)))
        return factory
    return decorate


def reference_out_kernel(ctx):
    """The out variant of ``ctx.op``'s NumPy reference kernel, or None."""
    variant = registry.out_variant(registry.reference_kernel(ctx.op))
    return variant[0](ctx) if variant is not None else None


def reference_kernel(ctx):
    """The NumPy reference kernel of ``ctx.op`` built for ``ctx`` (see
    :func:`dataflow.kernels.registry.reference_kernel`)."""
    factory = registry.reference_kernel(ctx.op)
    if factory is None:
        raise LookupError(f"no NumPy kernel for {ctx.op.type}")
    return factory(ctx)


# Numba keys a cached function on its own source file only. The compiled modules also
# compile code from these files, so a change there must drop their cache entries.
_JIT_MODULES = ("_elementwise_jit", "_reduction_jit", "_nn_jit", "_array_jit", "_training_jit",
                "_gemm_jit", "_gemm_par")
_DEPENDENCIES = ("../approx.py", "_scalar.py", "../../framework/elementwise_table.py")
_cache_checked = False


def refresh_disk_cache():
    """Delete this package's Numba cache files if kernels.approx, _scalar or the
    elementwise op table changed since they were written (a stamp file holds the hash
    of those sources)."""
    global _cache_checked
    if _cache_checked:
        return
    _cache_checked = True
    here = os.path.dirname(os.path.abspath(__file__))
    digest = hashlib.sha256()
    for rel in _DEPENDENCIES:
        with open(os.path.join(here, rel), "rb") as f:
            digest.update(f.read())
    cache = os.environ.get("NUMBA_CACHE_DIR") or os.path.join(here, "__pycache__")
    stamp = os.path.join(cache, "numba_cpu_dependencies.sha256")
    try:
        with open(stamp) as f:
            if f.read() == digest.hexdigest():
                return
    except OSError:
        pass
    try:
        for mod in _JIT_MODULES:
            for path in glob.glob(os.path.join(glob.escape(cache), f"**/{mod}.*.nb[ic]"),
                                  recursive=True):
                os.remove(path)
        os.makedirs(cache, exist_ok=True)
        with open(stamp, "w") as f:
            f.write(digest.hexdigest())
    except OSError:  # a read-only tree: Numba then does not cache either
        pass


def lazy(module, builder, *args):
    """A function that, on its first call, imports ``dataflow.kernels.numba_cpu.<module>`` and
    replaces itself by ``getattr(module, builder)(*args)`` (so importing dataflow and
    building plans import no Numba; only a large value reaching the kernel does)."""
    fn = None

    def call(*call_args):
        nonlocal fn
        if fn is None:
            refresh_disk_cache()
            mod = importlib.import_module(f"dataflow.kernels.numba_cpu.{module}")
            fn = getattr(mod, builder)(*args)
        return fn(*call_args)
    return call
