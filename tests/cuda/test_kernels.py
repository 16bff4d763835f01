"""Reduction, softmax, cross-entropy, matmul and array GPU kernels against the NumPy
reference kernels, under the simulator (small shapes: shared-memory kernels are slow
there)."""
import numpy as np
import pytest
from hypothesis import given, settings, strategies as st

import dataflow as df
from dataflow.ops import grad_ops
from dataflow.kernels.cuda.fallback import fallback_op_types

from ..op_harness import matmul_bound, reduction_bound
from .util import assert_close, run_on_gpu


def _floats(shape, dtype=np.float32, rng=None):
    """Normal values (sd 2); from NumPy's global generator, which tests/conftest.py seeds
    per test, unless ``rng`` is given."""
    values = np.random.standard_normal(shape) if rng is None else rng.standard_normal(shape)
    return (values * 2).astype(dtype)


REDUCERS = {"Sum": df.reduce_sum, "Mean": df.reduce_mean, "Max": df.reduce_max,
            "Min": df.reduce_min, "Prod": df.reduce_prod}


@settings(max_examples=25, deadline=None)
@given(op_type=st.sampled_from(sorted(REDUCERS)),
       shape=st.lists(st.integers(1, 5), min_size=1, max_size=3).map(tuple),
       dtype=st.sampled_from([np.float32, np.float64, np.int32]),
       data=st.data())
def test_reductions(op_type, shape, dtype, data):
    axis = data.draw(st.one_of(
        st.none(), st.integers(-len(shape), len(shape) - 1),
        st.lists(st.integers(0, len(shape) - 1), min_size=1, max_size=len(shape),
                 unique=True)))
    keep = data.draw(st.booleans())
    rng = np.random.default_rng(data.draw(st.integers(0, 2 ** 32 - 1)))
    x = (rng.integers(-5, 6, shape) if dtype == np.int32 else _floats(shape, rng=rng)
         ).astype(dtype)
    got, ref = run_on_gpu(lambda t: REDUCERS[op_type](t, axis=axis, keepdims=keep), x)
    assert_close(got, ref, bound=reduction_bound(op_type, x, axis, keep, dtype))


def test_reduction_of_a_long_row_uses_every_thread():
    # 1000 elements per row: every thread of the block folds several, then the tree.
    x = _floats((3, 1000))
    for op_type in ("Sum", "Max"):
        got, ref = run_on_gpu(lambda t, reduce=REDUCERS[op_type]: reduce(t, axis=1), x)
        assert_close(got, ref, bound=reduction_bound(op_type, x, 1, False, np.float32))


@pytest.mark.parametrize("shape", [(4, 10), (2, 3, 5), (7,)])
@pytest.mark.parametrize("fn", [df.nn.softmax, df.nn.log_softmax])
def test_softmax(fn, shape):
    got, ref = run_on_gpu(fn, _floats(shape))
    assert_close(got, ref)


@pytest.mark.parametrize("dtype", [np.float32, np.float64])
def test_softmax_cross_entropy(dtype):
    logits = _floats((6, 9), dtype)
    labels = np.eye(9, dtype=dtype)[np.random.randint(0, 9, 6)] * 0.7 + 0.3 / 9

    def build(z, y):
        loss = df.nn.softmax_cross_entropy_with_logits(labels=y, logits=z)
        return [loss, loss.op.outputs[1]]
    (loss, backprop), (ref_loss, ref_backprop) = run_on_gpu(build, logits, labels)
    assert_close(loss, ref_loss)
    assert_close(backprop, ref_backprop)


@settings(max_examples=12, deadline=None)
@given(m=st.integers(1, 20), k=st.integers(1, 20), n=st.integers(1, 20),
       ta=st.booleans(), tb=st.booleans(), dtype=st.sampled_from([np.float32, np.float64]),
       seed=st.integers(0, 2 ** 32 - 1))
def test_matmul(m, k, n, ta, tb, dtype, seed):
    # Each output is a length-k dot product summed in another order than BLAS's: the
    # bound is 2 * gamma_k * (|a| @ |b|), not a fixed atol (which failed on long rows
    # of large products).
    rng = np.random.default_rng(seed)
    a = _floats((k, m) if ta else (m, k), dtype, rng)
    b = _floats((n, k) if tb else (k, n), dtype, rng)
    got, ref = run_on_gpu(lambda x, y: df.matmul(x, y, transpose_a=ta, transpose_b=tb), a, b)
    assert_close(got, ref, bound=matmul_bound(a, b, dtype, ta, tb))


def test_matmul_shape_mismatch_names_the_node(graph):
    a, b = (df.placeholder(df.float32, [None, None]) for _ in range(2))
    with df.device("/gpu:0"):
        y = df.matmul(a, b, name="mm")
    with df.Session() as sess, pytest.raises(df.errors.InvalidArgumentError,
                                             match=r"mm \(op type MatMul\).*|size-incomp"):
        sess.run(y, {a: _floats((2, 3)), b: _floats((2, 3))})


@pytest.mark.parametrize("build,inputs", [
    (lambda x: df.transpose(x, [2, 0, 1]), [(2, 3, 4)]),
    (lambda x: df.transpose(x), [(2, 3, 4)]),            # no perm: reversed dimensions
    (lambda x: df.reshape(x, [4, -1]), [(2, 3, 4)]),
    (lambda x: df.expand_dims(x, -1), [(2, 3)]),
    (lambda x: df.squeeze(x), [(2, 1, 3)]),
    (lambda x: df.zeros_like(x), [(2, 3)]),
    (lambda x: df.ones_like(x), [(2, 3)]),
    (lambda x: df.shape(x), [(2, 3)]),
    (lambda x: grad_ops.broadcast_to(x, df.constant([3, 2, 4])), [(2, 1)]),
    (lambda x: grad_ops.sum_to_shape(x, df.constant([1, 4])), [(3, 2, 4)]),
    (lambda x: df.gather(x, df.constant([2, 0, 2])), [(4, 3)]),
    (lambda x: df.gather(x, df.constant([[1], [0]]), axis=1), [(2, 3, 2)]),
    (lambda x: df.concat([x, x], axis=0), [(2, 3)]),  # the host fallback
])
def test_array_ops(build, inputs):
    got, ref = run_on_gpu(build, *[_floats(s) for s in inputs])
    assert_close(got, ref)


def test_one_hot_and_gather_errors(graph):
    idx = np.array([[0, 3], [2, -1]], np.int32)
    got, ref = run_on_gpu(lambda i: df.one_hot(i, 4, on_value=2.0, off_value=-1.0), idx)
    assert_close(got, ref)
    params = df.placeholder(df.float32, [3, 2])
    with df.device("/gpu:0"):
        y = df.gather(params, df.constant([0, 3]), name="gather_oob")
    with df.Session() as sess, pytest.raises(df.errors.InvalidArgumentError,
                                             match=r"(?s)not in \[0, 3\).*gather_oob"):
        sess.run(y, {params: _floats((3, 2))})


def test_fill():
    got, ref = run_on_gpu(lambda v: df.fill(df.constant([2, 3]), v), np.float32(2.5))
    assert_close(got, ref)


def test_fallback_ops_are_listed():
    # Ops without a CUDA kernel run on the host: the list is explicit and stable.
    listed = fallback_op_types()
    assert "ConcatV2" in listed and "MatMul" not in listed and "GatherV2" not in listed


def test_an_op_registered_after_the_gpu_kernels_runs_on_the_host_fallback(graph):
    # The fallback is resolved when the kernel is looked up, so an op type registered
    # after dataflow.kernels.cuda was imported runs on /gpu:0 too (on the host), fed by
    # and feeding device values.
    from dataflow.framework.op_registry import register_op
    from dataflow.kernels.registry import register_kernel
    from dataflow.ops import shape_fns
    register_op("CudaTestLateCube")(lambda op: shape_fns.unchanged(op))  # a test op type
    register_kernel("CudaTestLateCube")(lambda ctx: lambda x: x * x * x)
    x = _floats((3, 4))
    ph = df.placeholder(df.float32, [3, 4])
    with df.device("/gpu:0"):
        y = df.get_default_graph().create_op("CudaTestLateCube", [ph * 2.0]).outputs[0] + 1.0
    with df.Session() as sess:
        got = sess.run(y, {ph: x})
    assert "CudaTestLateCube" in fallback_op_types()
    assert_close(got, (x * 2) ** 3 + 1)


def test_compile_check_covers_every_kernel_family_and_op():
    # The PTX compile check itself runs without the simulator (.ci/run); here: that it
    # lists every op with a CUDA kernel, and refuses to run under the simulator.
    from dataflow.kernels.cuda import compile_check
    from dataflow.kernels.cuda.elementwise import BINARY_OPS, UNARY_OPS
    from dataflow.kernels.cuda.reduction import REDUCTION_OPS
    names = [name for name, _, _ in compile_check.kernel_signatures()]
    words = {w for name in names for w in name.split()}
    assert set(UNARY_OPS) | set(BINARY_OPS) | set(REDUCTION_OPS) <= words
    for family in ("unary", "binary", "binary-scalar", "binary-broadcast", "cast", "fill",
                   "strided-copy", "select", "gather", "one-hot", "reduce", "softmax", "xent",
                   "matmul", "adam", "fused"):
        assert family in words, family
    assert compile_check.main([]) == 2
