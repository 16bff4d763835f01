"""The Relu gradient: TF's ``ReluGrad(gradients, features)`` op, one node where a select
of three (Greater, ZerosLike, Select) was, with its own gradient for second order."""
import numpy as np
import pytest

import dataflow as df
from dataflow.kernels.registry import KernelContext, find_kernel, reference_kernel
from dataflow.ops import grad_ops
from .op_harness import fresh_rng, ops_of_type, run


def _mask_grad(dy, x):
    return np.where(x > 0, dy, np.zeros_like(dy))


def test_relu_gradient_is_one_relu_grad_node_with_tf_names(graph):
    x = df.placeholder(df.float32, [3, 4], name="x")
    y = df.nn.relu(x, name="Relu")
    (gx,) = df.gradients(df.reduce_sum(y * 2.0), [x])
    assert gx.op.type == "ReluGrad" and gx.op.name == "gradients/Relu_grad/ReluGrad"
    assert gx.op.inputs[1] is y      # the features are Relu's output, as in TF
    assert not ops_of_type(graph, "Select") and not ops_of_type(graph, "SelectV2")


@pytest.mark.parametrize("dtype", [np.float32, np.float64, np.int32])
@pytest.mark.parametrize("n", [7, 70000])   # the NumPy path and the compiled loop
def test_relu_grad_kernels_pass_the_gradient_where_the_feature_is_positive(graph, dtype, n):
    rng, _ = fresh_rng()
    x = (rng.standard_normal(n) * 10).astype(dtype)
    dy = (rng.standard_normal(n) * 10).astype(dtype)
    if dtype != np.int32:  # inf gradients where x <= 0 must give 0, not NaN (inf * 0)
        x[:4], dy[:4] = [0.0, -1.0, np.nan, 2.0], [np.inf, -np.inf, np.inf, np.nan]
    px, pdy = df.placeholder(dtype, [n]), df.placeholder(dtype, [n])
    if dtype == np.int32:    # integers get no gradient (TF1): build the op itself
        g = grad_ops.activation_grad("ReluGrad", pdy, df.nn.relu(px))
    else:
        (g,) = df.gradients(df.nn.relu(px), [px], grad_ys=[pdy])
    ctx = KernelContext(op=g.op)
    want = _mask_grad(dy, np.maximum(x, 0))
    for kernel in (find_kernel(g.op, "CPU")(ctx), reference_kernel(g.op)(ctx)):
        got = kernel(dy, np.maximum(x, 0))
        assert got.dtype == dtype
        np.testing.assert_array_equal(got, want)
    np.testing.assert_array_equal(run(g, {px: x, pdy: dy}), want)


def test_second_order_through_relu_grad(graph):
    rng, seed = fresh_rng()
    x = rng.standard_normal((5, 6))
    v = rng.standard_normal((5, 6))
    px, pv = df.placeholder(df.float64, x.shape), df.placeholder(df.float64, v.shape)
    dy = df.sin(px)                           # an incoming gradient that depends on x
    (g,) = df.gradients(df.nn.relu(px), [px], grad_ys=[dy])
    (gx,) = df.gradients(df.reduce_sum(g * pv), [px])
    (gv,) = df.gradients(df.reduce_sum(g * pv), [pv])
    got_x, got_v = run([gx, gv], {px: x, pv: v})
    # d/dx sum(where(x > 0, sin x, 0) * v) = where(x > 0, cos x * v, 0); the mask's own
    # derivative is zero (TF's _ReluGradGrad gives the features zeros).
    np.testing.assert_allclose(got_x, _mask_grad(np.cos(x) * v, x), rtol=1e-12,
                               err_msg=f"seed {seed}")
    np.testing.assert_allclose(got_v, _mask_grad(np.sin(x), x), rtol=1e-12)
