"""NumPy reference kernels of the convolution and pooling ops (NHWC).

Everything goes through *patches*: a strided view of the padded input with shape
``[N, OH, OW, KH, KW, C]`` (no copy), so a convolution is one matrix product of the
patches with the filter, and each backprop ends in ``col2im``: KH*KW strided adds of
the per-patch gradients back into the padded input, then the padding cut away.
Windows of a max pool take their first maximum in row-major order (TF's CPU routing).
"""
from __future__ import annotations

import numpy as np
from numpy.lib.stride_tricks import as_strided

from ..registry import register_kernel


# -- geometry --------------------------------------------------------------------------------------

def out_size(size, k, stride, dilation, padding):
    eff = (k - 1) * dilation + 1
    if padding == "SAME":
        return -(-size // stride)
    return (size - eff) // stride + 1 if size >= eff else 0


def pads(size, k, stride, dilation, padding):
    """``(before, after)`` padding of one dimension; ``after`` may be negative for VALID
    windows that leave trailing entries unused (those are cut instead)."""
    eff = (k - 1) * dilation + 1
    out = out_size(size, k, stride, dilation, padding)
    total = max((out - 1) * stride + eff - size, 0) if padding == "SAME" else 0
    return total // 2, total - total // 2


class Geometry:
    """Shapes and paddings of one NHWC window op: input ``[n, h, w, c]``, window
    ``kh x kw`` with ``strides``/``dilations`` (4-tuples) and ``padding``."""

    def __init__(self, in_shape, kh, kw, strides, dilations, padding):
        self.n, self.h, self.w, self.c = (int(d) for d in in_shape)
        self.kh, self.kw = int(kh), int(kw)
        self.sh, self.sw = strides[1], strides[2]
        self.dh, self.dw = dilations[1], dilations[2]
        self.oh = out_size(self.h, self.kh, self.sh, self.dh, padding)
        self.ow = out_size(self.w, self.kw, self.sw, self.dw, padding)
        self.pt, self.pb = pads(self.h, self.kh, self.sh, self.dh, padding)
        self.pl, self.pr = pads(self.w, self.kw, self.sw, self.dw, padding)

    @property
    def padded_shape(self):
        return (self.n, self.h + self.pt + self.pb, self.w + self.pl + self.pr, self.c)

    def pad(self, x, value=0):
        if not (self.pt or self.pb or self.pl or self.pr):
            return np.ascontiguousarray(x)
        out = np.full(self.padded_shape, value, dtype=x.dtype)
        out[:, self.pt:self.pt + self.h, self.pl:self.pl + self.w] = x
        return out

    def unpad(self, xp):
        return xp[:, self.pt:self.pt + self.h, self.pl:self.pl + self.w]

    def patches(self, xp):
        """The ``[N, OH, OW, KH, KW, C]`` window view of the padded input ``xp``."""
        s = xp.strides
        return as_strided(xp, (self.n, self.oh, self.ow, self.kh, self.kw, self.c),
                          (s[0], s[1] * self.sh, s[2] * self.sw, s[1] * self.dh,
                           s[2] * self.dw, s[3]), writeable=False)

    def col2im(self, cols, dtype):
        """Sum ``cols`` (``[N, OH, OW, KH, KW, C]``) into the input positions they came from."""
        xp = np.zeros(self.padded_shape, dtype)
        for i in range(self.kh):
            r = i * self.dh
            for j in range(self.kw):
                c = j * self.dw
                xp[:, r:r + self.sh * (self.oh - 1) + 1:self.sh,
                   c:c + self.sw * (self.ow - 1) + 1:self.sw] += cols[:, :, :, i, j]
        return np.ascontiguousarray(self.unpad(xp))


def _conv_geometry(ctx, in_shape, filter_shape):
    return Geometry(in_shape, filter_shape[0], filter_shape[1], ctx.attr("strides"),
                    ctx.attr("dilations"), ctx.attr("padding"))


def _pool_geometry(ctx, in_shape):
    k = ctx.attr("ksize")
    return Geometry(in_shape, k[1], k[2], ctx.attr("strides"), (1, 1, 1, 1), ctx.attr("padding"))


def _ints(shape_value):
    return tuple(int(d) for d in np.ravel(shape_value))


# -- Conv2D ----------------------------------------------------------------------------------------

def conv2d(g, x, w):
    cols = g.patches(g.pad(x)).reshape(g.n * g.oh * g.ow, -1)
    return (cols @ w.reshape(-1, w.shape[3])).reshape(g.n, g.oh, g.ow, w.shape[3])


def conv2d_backprop_input(g, w, dout):
    o = w.shape[3]
    cols = dout.reshape(-1, o) @ w.reshape(-1, o).T
    return g.col2im(cols.reshape(g.n, g.oh, g.ow, g.kh, g.kw, g.c), dout.dtype)


def conv2d_backprop_filter(g, x, w_shape, dout):
    cols = g.patches(g.pad(x)).reshape(g.n * g.oh * g.ow, -1)
    return (cols.T @ dout.reshape(-1, w_shape[3])).reshape(w_shape)


@register_kernel("Conv2D")
def _conv2d(ctx):
    return lambda x, w: conv2d(_conv_geometry(ctx, x.shape, w.shape), x, w)


@register_kernel("Conv2DBackpropInput")
def _conv2d_backprop_input(ctx):
    def backprop_input(sizes, w, dout):
        return conv2d_backprop_input(_conv_geometry(ctx, _ints(sizes), w.shape), w, dout)
    return backprop_input


@register_kernel("Conv2DBackpropFilter")
def _conv2d_backprop_filter(ctx):
    def backprop_filter(x, sizes, dout):
        w_shape = _ints(sizes)
        return conv2d_backprop_filter(_conv_geometry(ctx, x.shape, w_shape), x, w_shape, dout)
    return backprop_filter


# -- DepthwiseConv2dNative -------------------------------------------------------------------------

@register_kernel("DepthwiseConv2dNative")
def _depthwise(ctx):
    def depthwise(x, w):
        g = _conv_geometry(ctx, x.shape, w.shape)
        out = np.einsum("nhwijc,ijcm->nhwcm", g.patches(g.pad(x)), w, optimize=True)
        return np.ascontiguousarray(out.reshape(g.n, g.oh, g.ow, -1), dtype=x.dtype)
    return depthwise


@register_kernel("DepthwiseConv2dNativeBackpropInput")
def _depthwise_backprop_input(ctx):
    def backprop_input(sizes, w, dout):
        g = _conv_geometry(ctx, _ints(sizes), w.shape)
        d = dout.reshape(g.n, g.oh, g.ow, g.c, w.shape[3])
        cols = np.einsum("nhwcm,ijcm->nhwijc", d, w, optimize=True)
        return g.col2im(cols, dout.dtype)
    return backprop_input


@register_kernel("DepthwiseConv2dNativeBackpropFilter")
def _depthwise_backprop_filter(ctx):
    def backprop_filter(x, sizes, dout):
        w_shape = _ints(sizes)
        g = _conv_geometry(ctx, x.shape, w_shape)
        d = dout.reshape(g.n, g.oh, g.ow, g.c, w_shape[3])
        out = np.einsum("nhwijc,nhwcm->ijcm", g.patches(g.pad(x)), d, optimize=True)
        return np.ascontiguousarray(out, dtype=x.dtype)
    return backprop_filter


# -- pooling ---------------------------------------------------------------------------------------

def _window_argmax(g, x):
    """Per window and channel, the flat ``KH*KW`` index of its first maximum, and the
    windows (``[N, OH, OW, KH*KW, C]``)."""
    p = g.patches(g.pad(x, -np.inf)).reshape(g.n, g.oh, g.ow, g.kh * g.kw, g.c)
    return np.argmax(p, axis=3), p


def max_pool_grad(g, x, grad):
    idx, _ = _window_argmax(g, x)
    onehot = idx[:, :, :, None, :] == np.arange(g.kh * g.kw)[None, None, None, :, None]
    cols = np.where(onehot, grad[:, :, :, None, :], 0).astype(grad.dtype, copy=False)
    return g.col2im(cols.reshape(g.n, g.oh, g.ow, g.kh, g.kw, g.c), grad.dtype)


def avg_pool_counts(g):
    """How many real (unpadded) entries each output window covers: ``[OH, OW]``."""
    ones = np.zeros((1, *g.padded_shape[1:3], 1))
    ones[:, g.pt:g.pt + g.h, g.pl:g.pl + g.w] = 1
    one = Geometry((1, *g.padded_shape[1:3], 1), g.kh, g.kw, (1, g.sh, g.sw, 1), (1, 1, 1, 1),
                   "VALID")
    return one.patches(ones).sum(axis=(3, 4))[0, :, :, 0]


@register_kernel("MaxPool")
def _max_pool(ctx):
    def max_pool(x):
        g = _pool_geometry(ctx, x.shape)
        return np.ascontiguousarray(g.patches(g.pad(x, -np.inf)).max(axis=(3, 4)))
    return max_pool


@register_kernel("MaxPoolGrad")
def _max_pool_grad(ctx):
    return lambda x, y, grad: max_pool_grad(_pool_geometry(ctx, x.shape), x, grad)


@register_kernel("MaxPoolGradGrad")
def _max_pool_grad_grad(ctx):
    def max_pool_grad_grad(x, y, grad):
        g = _pool_geometry(ctx, x.shape)
        idx, _ = _window_argmax(g, x)
        windows = g.patches(g.pad(grad)).reshape(g.n, g.oh, g.ow, g.kh * g.kw, g.c)
        return np.take_along_axis(windows, idx[:, :, :, None, :], axis=3)[:, :, :, 0, :].copy()
    return max_pool_grad_grad


@register_kernel("AvgPool")
def _avg_pool(ctx):
    def avg_pool(x):
        g = _pool_geometry(ctx, x.shape)
        total = g.patches(g.pad(x)).sum(axis=(3, 4))
        return (total / avg_pool_counts(g)[None, :, :, None]).astype(x.dtype, copy=False)
    return avg_pool


@register_kernel("AvgPoolGrad")
def _avg_pool_grad(ctx):
    def avg_pool_grad(sizes, grad):
        g = _pool_geometry(ctx, _ints(sizes))
        share = grad / avg_pool_counts(g)[None, :, :, None]
        cols = np.broadcast_to(share[:, :, :, None, None, :],
                               (g.n, g.oh, g.ow, g.kh, g.kw, g.c))
        return g.col2im(cols, grad.dtype)
    return avg_pool_grad
