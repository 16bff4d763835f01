"""Numba kernels of the convolution and pooling ops (float32/float64, NHWC).

Conv2D and its two backprops are *im2col + BLAS*: the patch matrix is built (padding
written as zeros, never materialized in the input), one GEMM does the arithmetic, and a
compiled ``col2im`` gathers patch gradients back. For inputs with few channels the
patch matrix is built transposed by a compiled loop running along output rows (the
row layout's inner loop would be ``c`` values long). On the 8x8-digits convnet's shapes
im2col + BLAS beat a direct compiled loop (``python -m benchmarks.conv_table``): BLAS
runs the inner products at full SIMD width while the direct loop's short channel runs
(1 and 16) do not vectorize. Depthwise convolutions and the pools are direct loops (no
GEMM to hand them to). Results equal the NumPy kernels' up to summation order.

>>> df.nn.conv2d(x, w, strides=[1, 1, 1, 1], padding="SAME")   # doctest: +SKIP
"""
from __future__ import annotations

import functools

import numpy as np

from ..numpy_cpu.conv import Geometry
from ._dispatch import lazy, register_numba

_ndarray = np.ndarray
CONV_MIN_SIZE = 256   # output elements below which the NumPy kernel runs (call overhead)


# Backprop-input ops are selected by input 0, the int32/int64 shape: their kernels check
# the float dtype of the filter and gradient at run time.


def _ok(dt, *arrays):
    return all(type(a) is _ndarray and a.dtype is dt and a.flags.c_contiguous and a.ndim == 4
               for a in arrays)


def _tuple(g):
    return (g.kh, g.kw, g.sh, g.sw, g.dh, g.dw, g.pt, g.pl, g.oh, g.ow)


def _dtype(ctx, i=0):
    return np.dtype(ctx.input_dtypes[i].as_numpy_dtype)


@functools.lru_cache(maxsize=1024)
def _geometry(in_shape, kh, kw, strides, dilations, padding):
    """One shared (read-only) :class:`Geometry` per distinct window op shape: a step
    runs the same shapes every time, and building one cost ~4 µs per kernel call."""
    return Geometry(in_shape, kh, kw, strides, dilations, padding)


def _conv_geometry(ctx, in_shape, filter_shape):
    return _geometry(tuple(in_shape), int(filter_shape[0]), int(filter_shape[1]),
                     tuple(ctx.attr("strides")), tuple(ctx.attr("dilations")),
                     ctx.attr("padding"))


def _pool_geometry(ctx, in_shape):
    k = ctx.attr("ksize")
    return _geometry(tuple(in_shape), int(k[1]), int(k[2]), tuple(ctx.attr("strides")),
                     (1, 1, 1, 1), ctx.attr("padding"))


def _ints(v):
    return tuple(int(d) for d in np.ravel(v))


# -- Conv2D: im2col + BLAS ------------------------------------------------------------------------

FEW_CHANNELS = 4   # up to this many input channels the transposed patch matrix is built


def _patches(g, x, dt):
    """``(cols, transposed)``: the patch matrix ``[N*OH*OW, KH*KW*C]``, or its transpose
    for inputs with few channels (built by a compiled loop along output rows: 21 µs
    against NumPy's 52 µs for conv1). With more channels NumPy's strided copy of whole
    channel runs was the fastest builder measured (24 µs against 97 µs compiled for
    conv2's 16 channels)."""
    if g.c <= FEW_CHANNELS:
        cols_t = np.empty((g.kh * g.kw * g.c, g.n * g.oh * g.ow), dt)
        _IM2COL_T(x, cols_t, _tuple(g))
        return cols_t, True
    return g.patches(g.pad(x)).reshape(g.n * g.oh * g.ow, -1), False


_IM2COL_T = lazy("_conv_jit", "kernel", "im2col_t")
_COL2IM = lazy("_conv_jit", "kernel", "col2im")
_COL2IM_T = lazy("_conv_jit", "kernel", "col2im_t")


@register_numba("Conv2D", parallel=True)
def _conv2d(ctx, ref):
    """Patch matrix, then one GEMM with the filter."""
    dt = _dtype(ctx)

    def conv2d(x, w):
        if not _ok(dt, x, w):
            return ref(x, w)
        g = _conv_geometry(ctx, x.shape, w.shape)
        o = w.shape[3]
        if g.n * g.oh * g.ow * o < CONV_MIN_SIZE:
            return ref(x, w)
        cols, transposed = _patches(g, x, dt)
        w2 = w.reshape(-1, o)
        out = cols.T @ w2 if transposed else cols @ w2
        return out.reshape(g.n, g.oh, g.ow, o)
    return conv2d


@register_numba("Conv2DBackpropInput", dtypes=("int32", "int64"), parallel=True)
def _conv2d_backprop_input(ctx, ref):
    """One GEMM gives every patch's gradient; a compiled col2im sums them into place."""
    dt = _dtype(ctx, 1)

    def backprop_input(sizes, w, dout):
        if not _ok(dt, w, dout):
            return ref(sizes, w, dout)
        shape = _ints(sizes)
        g = _conv_geometry(ctx, shape, w.shape)
        if dout.size < CONV_MIN_SIZE:
            return ref(sizes, w, dout)
        o = w.shape[3]
        w2, d2 = w.reshape(-1, o), dout.reshape(-1, o)
        if g.c <= FEW_CHANNELS:
            dx = np.zeros(shape, dt)
            _COL2IM_T(w2 @ d2.T, dx, _tuple(g))
        else:
            dx = np.empty(shape, dt)  # col2im writes every element
            _COL2IM(d2 @ w2.T, dx, _tuple(g))
        return dx
    return backprop_input


@register_numba("Conv2DBackpropFilter", parallel=True)
def _conv2d_backprop_filter(ctx, ref):
    """The patch matrix transposed times the output gradient (one GEMM)."""
    dt = _dtype(ctx)

    def backprop_filter(x, sizes, dout):
        if not _ok(dt, x, dout):
            return ref(x, sizes, dout)
        w_shape = _ints(sizes)
        g = _conv_geometry(ctx, x.shape, w_shape)
        if dout.size < CONV_MIN_SIZE:
            return ref(x, sizes, dout)
        cols, transposed = _patches(g, x, dt)
        d2 = dout.reshape(-1, w_shape[3])
        return (cols @ d2 if transposed else cols.T @ d2).reshape(w_shape)
    return backprop_filter


# -- depthwise: direct loops -----------------------------------------------------------------------

@register_numba("DepthwiseConv2dNative")
def _depthwise(ctx, ref):
    dt = _dtype(ctx)
    fn = lazy("_conv_jit", "kernel", "depthwise_forward")

    def depthwise(x, w):
        if not _ok(dt, x, w):
            return ref(x, w)
        g = _conv_geometry(ctx, x.shape, w.shape)
        out = np.zeros((g.n, g.oh, g.ow, g.c * w.shape[3]), dt)
        fn(x, w, out, _tuple(g))
        return out
    return depthwise


@register_numba("DepthwiseConv2dNativeBackpropInput", dtypes=("int32", "int64"))
def _depthwise_backprop_input(ctx, ref):
    dt = _dtype(ctx, 1)
    fn = lazy("_conv_jit", "kernel", "depthwise_backprop")

    def backprop_input(sizes, w, dout):
        if not _ok(dt, w, dout):
            return ref(sizes, w, dout)
        shape = _ints(sizes)
        g = _conv_geometry(ctx, shape, w.shape)
        dx = np.zeros(shape, dt)
        # The unused filter-gradient slot gets a writable dummy: inputs may be read-only.
        fn(dx, w, dout, dx, np.zeros((1, 1, 1, 1), dt), _tuple(g), True, False)
        return dx
    return backprop_input


@register_numba("DepthwiseConv2dNativeBackpropFilter")
def _depthwise_backprop_filter(ctx, ref):
    dt = _dtype(ctx)
    fn = lazy("_conv_jit", "kernel", "depthwise_backprop")

    def backprop_filter(x, sizes, dout):
        if not _ok(dt, x, dout):
            return ref(x, sizes, dout)
        w_shape = _ints(sizes)
        g = _conv_geometry(ctx, x.shape, w_shape)
        dw = np.zeros(w_shape, dt)
        fn(x, dw, dout, np.zeros((1, 1, 1, 1), dt), dw, _tuple(g), False, True)
        return dw
    return backprop_filter


# -- pooling: direct loops -------------------------------------------------------------------------

@register_numba("MaxPool")
def _max_pool(ctx, ref):
    dt = _dtype(ctx)
    fn = lazy("_conv_jit", "kernel", "max_pool")
    fn_2x2 = lazy("_conv_jit", "kernel", "max_pool_2x2")

    def max_pool(x):
        if not _ok(dt, x):
            return ref(x)
        g = _pool_geometry(ctx, x.shape)
        out = np.empty((g.n, g.oh, g.ow, g.c), dt)
        if _tiling_2x2(g, x.shape):
            fn_2x2(x, out)
        else:
            fn(x, out, _tuple(g))
        return out
    return max_pool


def _tiling_2x2(g, shape):
    """Whether the pool's windows are 2x2 at stride 2 and tile the input exactly (even
    height and width, no padding): the case of the ``*_2x2`` pooling loops."""
    return (g.kh == g.kw == g.sh == g.sw == 2 and g.pt == g.pl == 0
            and shape[1] == 2 * g.oh and shape[2] == 2 * g.ow)


@register_numba("MaxPoolGrad")
def _max_pool_grad(ctx, ref):
    dt = _dtype(ctx)
    fn = lazy("_conv_jit", "kernel", "max_pool_grad")
    fn_2x2 = lazy("_conv_jit", "kernel", "max_pool_grad_2x2")

    def max_pool_grad(x, y, grad):
        if not _ok(dt, x, grad):
            return ref(x, y, grad)
        g = _pool_geometry(ctx, x.shape)
        if _tiling_2x2(g, x.shape) and grad.shape == (g.n, g.oh, g.ow, g.c):
            dx = np.empty(x.shape, dt)   # the windows tile dx: every element is written
            fn_2x2(x, grad, dx)
            return dx
        dx = np.zeros(x.shape, dt)
        fn(x, grad, dx, _tuple(g))
        return dx
    return max_pool_grad


@register_numba("AvgPool")
def _avg_pool(ctx, ref):
    dt = _dtype(ctx)
    fn = lazy("_conv_jit", "kernel", "avg_pool")

    def avg_pool(x):
        if not _ok(dt, x):
            return ref(x)
        g = _pool_geometry(ctx, x.shape)
        out = np.empty((g.n, g.oh, g.ow, g.c), dt)
        fn(x, out, _tuple(g))
        return out
    return avg_pool


@register_numba("AvgPoolGrad", dtypes=("int32", "int64"))
def _avg_pool_grad(ctx, ref):
    """Selected by input 0, the int shape; the gradient's dtype is checked at run time."""
    fn = lazy("_conv_jit", "kernel", "avg_pool_grad")

    def avg_pool_grad(sizes, grad):
        if not (type(grad) is _ndarray and grad.dtype.kind == "f" and grad.flags.c_contiguous
                and grad.ndim == 4):
            return ref(sizes, grad)
        shape = _ints(sizes)
        g = _pool_geometry(ctx, shape)
        dx = np.zeros(shape, grad.dtype)
        fn(grad, dx, _tuple(g))
        return dx
    return avg_pool_grad
