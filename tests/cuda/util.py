"""Helpers of the simulator tests: run one op on /gpu:0, and the NumPy reference kernels."""
import numpy as np

import dataflow as df
from dataflow.kernels import registry

from ..op_harness import assert_within


def numpy_kernel(op):
    """The NumPy reference kernel (``dataflow.kernels.numpy_cpu``) of ``op``, bypassing any compiled
    CPU kernel registered at a higher priority: the tests' oracle."""
    factory = registry.reference_kernel(op)
    assert factory is not None, f"no NumPy kernel for {op.type}"
    assert factory.__module__.startswith("dataflow.kernels.numpy_cpu"), factory.__module__
    return factory(registry.KernelContext(op=op, device_type="CPU"))


def run_on_gpu(build, *inputs, config=None):
    """Build ``build(*placeholders)`` on /gpu:0 in a fresh graph and run it fed with
    ``inputs``; returns ``(fetched, reference)`` with the NumPy kernel's result on the
    same inputs as the reference. ``build`` may return a tensor or a list of tensors."""
    g = df.Graph()
    with g.as_default():
        phs = [df.placeholder(df.as_dtype(np.asarray(a).dtype), np.shape(a)) for a in inputs]
        with df.device("/gpu:0"):
            out = build(*phs)
        with df.Session(config=config) as sess:
            got = sess.run(out, dict(zip(phs, inputs)))
    op = (out[0] if isinstance(out, (list, tuple)) else out).op
    fed = dict(zip(phs, inputs))
    args = [np.asarray(fed[t]) if t in fed else t.op.get_attr("value") for t in op.inputs]
    return got, numpy_kernel(op)(*args)


def assert_close(got, ref, bound=None):
    """The result is a NumPy value with the reference's dtype and shape, equal to it
    within ``bound`` elementwise when given (a sum computed in another order: see
    ``tests.op_harness.sum_bound``), else within a few ulp of ``ref``'s float dtype
    (exact for ints and bools)."""
    ref = np.asarray(ref)
    assert isinstance(got, (np.ndarray, np.generic)), type(got)
    assert np.shape(got) == ref.shape
    assert np.asarray(got).dtype == ref.dtype, (np.asarray(got).dtype, ref.dtype)
    if ref.dtype.kind != "f":
        np.testing.assert_array_equal(got, ref)
    elif bound is not None:
        assert_within(got, ref, bound)
    else:
        tol = 2e-5 if ref.dtype == np.float32 else 1e-12
        np.testing.assert_allclose(got, ref, rtol=tol, atol=tol, equal_nan=True)
