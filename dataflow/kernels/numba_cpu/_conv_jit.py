"""Compiled loops of the convolution and pooling kernels (imports Numba), NHWC,
C-contiguous arrays. Padding is never materialized: taps that fall outside the input
are skipped (zero for sums, never the max).

``im2col``/``col2im`` move between the input and its ``[N*OH*OW, KH*KW*C]`` patch
matrix (the convolution itself is then one BLAS product); the ``*_direct`` functions
compute a convolution without the patch matrix, for comparison and for depthwise
convolutions, whose per-channel products BLAS cannot batch.

Geometry tuples ``g`` are ``(kh, kw, sh, sw, dh, dw, pt, pl, oh, ow)``.
"""
from __future__ import annotations

import numpy as np
from numba import njit

from ._scalar import zero

_JIT = {"nogil": True, "cache": True, "error_model": "numpy"}


@njit(**_JIT)
def im2col(x, cols, g):
    """Row ``(b, i, j)`` of ``cols`` is the window of output ``(b, i, j)``, tap-major then
    channel. A tap row entirely inside the input is one contiguous copy of ``kw * c``
    values (unit column dilation); edge windows go tap by tap."""
    kh, kw, sh, sw, dh, dw, pt, pl, oh, ow = g
    n, h, w, c = x.shape
    xf = x.reshape(-1)
    cf = cols.reshape(-1)
    kc = kw * c
    width = kh * kc
    row = 0
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                q0 = j * sw - pl
                whole = dw == 1 and q0 >= 0 and q0 + kw <= w
                for a in range(kh):
                    r = i * sh + a * dh - pt
                    dst = row * width + a * kc
                    if r < 0 or r >= h:
                        for t in range(kc):
                            cf[dst + t] = 0
                        continue
                    src = ((b * h + r) * w) * c
                    if whole:
                        src += q0 * c
                        for t in range(kc):
                            cf[dst + t] = xf[src + t]
                        continue
                    for e in range(kw):
                        q = q0 + e * dw
                        d = dst + e * c
                        if 0 <= q < w:
                            for k in range(c):
                                cf[d + k] = xf[src + q * c + k]
                        else:
                            for k in range(c):
                                cf[d + k] = 0
                row += 1


@njit(**_JIT)
def col2im(cols, dx, g):
    """``dx`` = the sum of each patch row at the positions it came from (``dx`` need not
    be zeroed: every element is written once).

    A gather: each input position adds up the patch entries that read it (at most
    ``kh * kw`` runs of ``c`` values), in a register-sized accumulator row. Scattering
    every patch row into ``dx`` instead read and wrote each ``dx`` element once per tap;
    on the convnet's conv2 backprop (``[64, 4, 4, 16]``, 3x3) that took 68 µs against 25.
    """
    kh, kw, sh, sw, dh, dw, pt, pl, oh, ow = g
    n, h, w, c = dx.shape
    for b in range(n):
        for r in range(h):
            for q in range(w):
                d = dx[b, r, q]
                for k in range(c):
                    d[k] = 0
                for a in range(kh):
                    i = r + pt - a * dh      # = i * sh for the output row i reading r
                    if sh != 1:              # (a division costs more than the adds)
                        if i < 0 or i % sh != 0:
                            continue
                        i //= sh
                    if i < 0 or i >= oh:
                        continue
                    row0 = (b * oh + i) * ow
                    for e in range(kw):
                        j = q + pl - e * dw
                        if sw != 1:
                            if j < 0 or j % sw != 0:
                                continue
                            j //= sw
                        if j < 0 or j >= ow:
                            continue
                        src = cols[row0 + j]
                        off = (a * kw + e) * c
                        for k in range(c):
                            d[k] += src[off + k]


@njit(**_JIT)
def im2col_t(x, cols_t, g):
    """The transposed patch matrix: ``cols_t[(a*kw + e)*c + k, (b*oh + i)*ow + j]`` is
    ``x[b, i*sh + a*dh - pt, j*sw + e*dw - pl, k]`` (0 outside). For few channels its
    inner loop runs along a whole output row instead of ``c`` values."""
    kh, kw, sh, sw, dh, dw, pt, pl, oh, ow = g
    n, h, w, c = x.shape
    for a in range(kh):
        for e in range(kw):
            for k in range(c):
                dst = cols_t[(a * kw + e) * c + k]
                for b in range(n):
                    for i in range(oh):
                        r = i * sh + a * dh - pt
                        base = (b * oh + i) * ow
                        if r < 0 or r >= h:
                            for j in range(ow):
                                dst[base + j] = 0
                            continue
                        xr = x[b, r]
                        for j in range(ow):
                            q = j * sw + e * dw - pl
                            dst[base + j] = xr[q, k] if 0 <= q < w else 0


@njit(**_JIT)
def col2im_t(cols_t, dx, g):
    """``dx`` (zeroed) += the transposed patch matrix's entries where they came from."""
    kh, kw, sh, sw, dh, dw, pt, pl, oh, ow = g
    n, h, w, c = dx.shape
    for a in range(kh):
        for e in range(kw):
            for k in range(c):
                src = cols_t[(a * kw + e) * c + k]
                for b in range(n):
                    for i in range(oh):
                        r = i * sh + a * dh - pt
                        if r < 0 or r >= h:
                            continue
                        base = (b * oh + i) * ow
                        dr = dx[b, r]
                        for j in range(ow):
                            q = j * sw + e * dw - pl
                            if 0 <= q < w:
                                dr[q, k] += src[base + j]


@njit(**_JIT)
def conv_direct(x, f, out, g):
    """``out[b, i, j, :] = sum over taps of x[b, r, q, :] @ f[a, e]`` (out zeroed)."""
    kh, kw, sh, sw, dh, dw, pt, pl, oh, ow = g
    n, h, w, c = x.shape
    m = f.shape[3]
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                o = out[b, i, j]
                for a in range(kh):
                    r = i * sh + a * dh - pt
                    if r < 0 or r >= h:
                        continue
                    for e in range(kw):
                        q = j * sw + e * dw - pl
                        if q < 0 or q >= w:
                            continue
                        for k in range(c):
                            v = x[b, r, q, k]
                            fk = f[a, e, k]
                            for t in range(m):
                                o[t] += v * fk[t]


@njit(**_JIT)
def depthwise_forward(x, f, out, g):
    """``out[b, i, j, k*M + t] = sum over taps of x[b, r, q, k] * f[a, e, k, t]``."""
    kh, kw, sh, sw, dh, dw, pt, pl, oh, ow = g
    n, h, w, c = x.shape
    m = f.shape[3]
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                o = out[b, i, j]
                for a in range(kh):
                    r = i * sh + a * dh - pt
                    if r < 0 or r >= h:
                        continue
                    for e in range(kw):
                        q = j * sw + e * dw - pl
                        if q < 0 or q >= w:
                            continue
                        for k in range(c):
                            v = x[b, r, q, k]
                            for t in range(m):
                                o[k * m + t] += v * f[a, e, k, t]


@njit(**_JIT)
def depthwise_backprop(x, f, dout, dx, df, g, want_dx, want_df):
    """Both depthwise gradients in one sweep over the taps (dx, df zeroed)."""
    kh, kw, sh, sw, dh, dw, pt, pl, oh, ow = g
    n, h, w, c = dx.shape if want_dx else x.shape
    m = f.shape[3] if want_dx else df.shape[3]
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                d = dout[b, i, j]
                for a in range(kh):
                    r = i * sh + a * dh - pt
                    if r < 0 or r >= h:
                        continue
                    for e in range(kw):
                        q = j * sw + e * dw - pl
                        if q < 0 or q >= w:
                            continue
                        for k in range(c):
                            if want_dx:
                                s = dx[b, r, q, k] * 0
                                for t in range(m):
                                    s += d[k * m + t] * f[a, e, k, t]
                                dx[b, r, q, k] += s
                            if want_df:
                                v = x[b, r, q, k]
                                for t in range(m):
                                    df[a, e, k, t] += v * d[k * m + t]


@njit(**_JIT)
def max_pool(x, out, g):
    kh, kw, sh, sw, dh, dw, pt, pl, oh, ow = g
    n, h, w, c = x.shape
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                o = out[b, i, j]
                for k in range(c):
                    o[k] = -np.inf
                for a in range(kh):
                    r = i * sh + a - pt
                    if r < 0 or r >= h:
                        continue
                    for e in range(kw):
                        q = j * sw + e - pl
                        if q < 0 or q >= w:
                            continue
                        for k in range(c):
                            v = x[b, r, q, k]
                            if v > o[k]:
                                o[k] = v


@njit(**_JIT)
def max_pool_grad(x, grad, dx, g):
    """Each window's gradient to its first maximum in row-major order (dx zeroed).

    Channels innermost, with the running maximum and its position kept per channel, so
    every read of ``x`` is contiguous (4x faster than a window scan per channel on the
    convnet's pools: 49 µs against 250 µs for [64, 8, 8, 16], one thread)."""
    kh, kw, sh, sw, dh, dw, pt, pl, oh, ow = g
    n, h, w, c = x.shape
    best = np.empty(c, x.dtype)
    br = np.empty(c, np.int64)
    bq = np.empty(c, np.int64)
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                first = True
                for a in range(kh):
                    r = i * sh + a - pt
                    if r < 0 or r >= h:
                        continue
                    for e in range(kw):
                        q = j * sw + e - pl
                        if q < 0 or q >= w:
                            continue
                        row = x[b, r, q]
                        for k in range(c):
                            v = row[k]
                            if first or v > best[k]:
                                best[k] = v
                                br[k] = r
                                bq[k] = q
                        first = False
                if not first:
                    gr = grad[b, i, j]
                    for k in range(c):
                        dx[b, br[k], bq[k], k] += gr[k]


@njit(**_JIT)
def max_pool_2x2(x, out):
    """:func:`max_pool` for 2x2 windows at stride 2 tiling an even-sized input (the
    common pool): four loads and three selects per output, vectorized across channels
    (the general loop's window scan does not vectorize: 22 µs against 5 µs for the
    convnet's ``[64, 8, 8, 16]``). Same rule: the max of values ``> -inf`` by ``>``, so
    a NaN is never picked."""
    n, oh, ow, c = out.shape
    for b in range(n):
        for i in range(oh):
            for j in range(ow):
                for k in range(c):
                    m = -np.inf
                    v = x[b, 2 * i, 2 * j, k]
                    m = v if v > m else m
                    v = x[b, 2 * i, 2 * j + 1, k]
                    m = v if v > m else m
                    v = x[b, 2 * i + 1, 2 * j, k]
                    m = v if v > m else m
                    v = x[b, 2 * i + 1, 2 * j + 1, k]
                    m = v if v > m else m
                    out[b, i, j, k] = m


@njit(**_JIT)
def max_pool_grad_2x2(x, grad, dx):
    """:func:`max_pool_grad` for the windows of :func:`max_pool_2x2`: each gradient to
    its window's first maximum in row-major order (the first value, then any later one
    ``>`` the running maximum), zeros to the other three. The windows tile ``dx``, so
    every element is written once (``dx`` need not be zeroed); the winner is a chain
    of comparisons, so the loop over channels is branch-free."""
    n, oh, ow, c = grad.shape
    z = zero(grad[0, 0, 0, 0]) if grad.size else zero(x[0, 0, 0, 0])
    for b in range(n):
        for i in range(oh):
            r0, r1 = 2 * i, 2 * i + 1
            for j in range(ow):
                q0, q1 = 2 * j, 2 * j + 1
                for k in range(c):
                    v0, v1 = x[b, r0, q0, k], x[b, r0, q1, k]
                    v2, v3 = x[b, r1, q0, k], x[b, r1, q1, k]
                    s1 = v1 > v0
                    m1 = v1 if s1 else v0
                    s2 = v2 > m1
                    m2 = v2 if s2 else m1
                    s3 = v3 > m2
                    gk = grad[b, i, j, k]
                    dx[b, r1, q1, k] = gk if s3 else z
                    dx[b, r1, q0, k] = gk if s2 and not s3 else z
                    dx[b, r0, q1, k] = gk if s1 and not (s2 or s3) else z
                    dx[b, r0, q0, k] = gk if not (s1 or s2 or s3) else z


@njit(**_JIT)
def avg_pool(x, out, g):
    kh, kw, sh, sw, dh, dw, pt, pl, oh, ow = g
    n, h, w, c = x.shape
    for b in range(n):
        for i in range(oh):
            r0 = max(i * sh - pt, 0)
            r1 = min(i * sh - pt + kh, h)
            for j in range(ow):
                q0 = max(j * sw - pl, 0)
                q1 = min(j * sw - pl + kw, w)
                o = out[b, i, j]
                for k in range(c):
                    o[k] = 0
                for r in range(r0, r1):
                    for q in range(q0, q1):
                        for k in range(c):
                            o[k] += x[b, r, q, k]
                inv = 1.0 / ((r1 - r0) * (q1 - q0))
                for k in range(c):
                    o[k] *= inv


@njit(**_JIT)
def avg_pool_grad(grad, dx, g):
    kh, kw, sh, sw, dh, dw, pt, pl, oh, ow = g
    n, h, w, c = dx.shape
    for b in range(n):
        for i in range(oh):
            r0 = max(i * sh - pt, 0)
            r1 = min(i * sh - pt + kh, h)
            for j in range(ow):
                q0 = max(j * sw - pl, 0)
                q1 = min(j * sw - pl + kw, w)
                inv = 1.0 / ((r1 - r0) * (q1 - q0))
                gr = grad[b, i, j]
                for r in range(r0, r1):
                    for q in range(q0, q1):
                        for k in range(c):
                            dx[b, r, q, k] += gr[k] * inv


def kernel(name):
    return globals()[name]
