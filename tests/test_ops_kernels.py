"""The NumPy kernels' output contract, checked by calling kernels directly.

The executor hands kernels NumPy scalars for 0-d values (scalar loops live on
NumPy's fast scalar path) and trusts them to return values of exactly the
dtype the op declares. ``Session.run`` turns 0-d arrays into scalars at the
fetch, so these properties are only visible on the kernels themselves.
"""
from __future__ import annotations

import numpy as np
import pytest

import dataflow as df
from dataflow.ops import math_ops
from dataflow.kernels.registry import KernelContext, find_kernel

NUMERIC = [df.float16, df.float32, df.float64, df.int8, df.int16, df.int32, df.int64, df.uint8]


def call_kernel(tensor, *values):
    """Run the CPU kernel of ``tensor.op`` on ``values``; returns its outputs as a tuple."""
    op = tensor.op
    fn = find_kernel(op, "CPU")(KernelContext(op=op))
    with np.errstate(all="ignore"):  # values are arbitrary; only types matter here
        out = fn(*values)
    return out if len(op.outputs) > 1 else (out,)


def assert_kernel_contract(tensor, *values):
    """Every output is a NumPy scalar (0-d) or array with the declared dtype."""
    for value, declared in zip(call_kernel(tensor, *values), tensor.op.outputs):
        if np.ndim(value) == 0:
            assert isinstance(value, np.generic), \
                f"{tensor.op.type}: 0-d result {type(value).__name__} is not a NumPy scalar"
        else:
            assert type(value) is np.ndarray
        assert value.dtype == declared.dtype.as_numpy_dtype, \
            f"{tensor.op.type}: {value.dtype} != declared {declared.dtype.name}"


def sample(dtype, shape):
    """A scalar (shape ``()``) or array of ``dtype`` with safe nonzero values."""
    value = np.full(shape, 2, dtype.as_numpy_dtype)
    return value[()] if value.ndim == 0 else value


def build_or_skip_dtype(fn, *args):
    """``fn(*args)``, or None when the op is not defined for the inputs' dtype."""
    try:
        return fn(*args)
    except TypeError:
        return None


@pytest.mark.parametrize("shape", [(), (3,)])
@pytest.mark.parametrize("dtype", NUMERIC + [df.bool])
def test_elementwise_and_reduction_kernels(dtype, shape):
    with df.Graph().as_default():
        x = df.placeholder(dtype, shape)
        value = sample(dtype, shape)
        built = 0
        unary = [getattr(math_ops, n) for n in
                 list(math_ops.UNARY_OPS.values()) + ["logical_not"]]
        reductions = [getattr(math_ops, n) for n in math_ops.REDUCTION_OPS.values()]
        for fn in unary + reductions:
            t = build_or_skip_dtype(fn, x)
            if t is not None:
                assert_kernel_contract(t, value)
                built += 1
        binary = [getattr(math_ops, n) for n in {**math_ops.BINARY_OPS,
                                                 **math_ops.COMPARISON_OPS,
                                                 **math_ops.LOGICAL_BINARY_OPS}.values()]
        for fn in binary:
            t = build_or_skip_dtype(fn, x, x)
            if t is not None:
                assert_kernel_contract(t, value, value)
                built += 1
        t = build_or_skip_dtype(df.add_n, [x, x, x])
        if t is not None:
            assert_kernel_contract(t, value, value, value)
        assert built > 0


@pytest.mark.parametrize("shape", [(), (3,)])
@pytest.mark.parametrize("src", NUMERIC + [df.bool])
def test_cast_kernel(src, shape):
    with df.Graph().as_default():
        x = df.placeholder(src, shape)
        for dst in NUMERIC + [df.bool]:
            if dst is not src:
                assert_kernel_contract(df.cast(x, dst), sample(src, shape))


@pytest.mark.parametrize("dtype", [df.float32, df.float64, df.int32, df.int64, df.bool])
def test_array_kernels_keep_scalars_scalar(dtype):
    with df.Graph().as_default():
        x = df.placeholder(dtype, [])
        v = sample(dtype, ())
        vec = df.placeholder(dtype, [3])
        cond = df.placeholder(df.bool, [])
        # Queries of a fully known shape are constants (as TF1's): ask one of unknown shape.
        unknown = df.placeholder(dtype)
        for t in (df.identity(x), df.zeros_like(x), df.ones_like(x), df.transpose(x),
                  df.squeeze(x), df.size(unknown), df.rank(unknown),
                  df.size(unknown, out_type=df.int64)):
            assert_kernel_contract(t, v)
        assert_kernel_contract(df.tile(x, []), v, np.zeros([0], np.int32))
        assert_kernel_contract(df.reshape(x, []), v, np.zeros([0], np.int32))
        assert_kernel_contract(df.fill([], x), np.zeros([0], np.int32), v)
        assert_kernel_contract(df.where(cond, x, x), np.True_, v, v)
        vec_value = sample(dtype, (3,))
        assert_kernel_contract(df.gather(vec, 1), vec_value, np.int32(1))
        assert_kernel_contract(vec[1], vec_value)
        assert_kernel_contract(df.reshape(vec[:1], []), vec_value[:1], np.zeros([0], np.int32))
        assert_kernel_contract(df.squeeze(df.expand_dims(x, 0)), np.expand_dims(v, 0))
        assert_kernel_contract(df.shape(df.placeholder(dtype)), vec_value)


@pytest.mark.parametrize("dtype", [df.float16, df.float32, df.float64])
@pytest.mark.parametrize("shape", [(), (3,)])
def test_nn_kernels(dtype, shape):
    with df.Graph().as_default():
        x = df.placeholder(dtype, shape)
        v = sample(dtype, shape)
        for fn in (df.nn.relu, df.nn.elu, df.nn.softplus):
            assert_kernel_contract(fn(x), v)
        if shape:
            for fn in (df.nn.softmax, df.nn.log_softmax):
                assert_kernel_contract(fn(x), v)
            xent = df.nn.softmax_cross_entropy_with_logits(labels=x, logits=x)
            assert_kernel_contract(xent, v, v)


def test_integer_relu_keeps_integer_dtype():
    with df.Graph().as_default():
        for dtype in (df.int32, df.int64):
            x = df.placeholder(dtype, [])
            assert_kernel_contract(df.nn.relu(x), dtype.as_numpy_dtype(-3))


def test_one_hot_kernel_dtype():
    with df.Graph().as_default():
        i = df.placeholder(df.int32, [])
        for dtype in (df.float32, df.int64, df.bool):
            assert_kernel_contract(df.one_hot(i, 3, dtype=dtype), np.int32(1))
