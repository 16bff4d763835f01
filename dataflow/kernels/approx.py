"""Vectorizable float32/float64 approximations of exp, log, tanh and sigmoid for Numba.

Inside a Numba loop, ``np.tanh``/``np.exp``/``np.log`` compile to one scalar libm call
per element (there is no SVML here), so a loop such as ``out[i] = np.tanh(x[i])``
runs at about 1 GB/s. The functions below are straight-line arithmetic (range
reduction, a polynomial or rational approximation, and exponent bits built or read
with integer operations) with selects instead of branches, so LLVM vectorizes loops
that call them. ``exp``, ``log``, ``tanh`` and ``sigmoid`` pick the float32 or the
float64 version from the argument's type; LLVM inlines them into the caller's loop
and vectorizes it::

    >>> from numba import njit
    >>> from dataflow.kernels import approx
    >>> @njit
    ... def tanh_all(x, out):
    ...     for i in range(x.size):
    ...         out[i] = approx.tanh(x[i])

``tanh_into``, ``exp_into``, ``log_into`` and ``sigmoid_into`` are such loops,
compiled on first use (``out`` may be ``x``). The functions only work inside
compiled code (they read float bits through a Numba intrinsic).

Methods (float32 stays float32 throughout: every constant is typed):

* ``exp``: clamp, Cody-Waite reduction ``x = n ln2 + r`` (n from the round-to-nearest
  "magic number" addition, so no float-to-int conversion of NaN), a degree-6
  polynomial (float32, Cephes ``expf`` coefficients) or the fdlibm rational (float64)
  for ``e^r``, and ``2^n`` applied as two exponent-bit scalings (so subnormal results
  get one rounding, and overflow gives inf).
* ``log``: subnormals scaled by 2^23 (2^54), exponent and mantissa split from the
  bits, mantissa reduced to [sqrt(1/2), sqrt(2)), a degree-8 polynomial (float32,
  Cephes ``logf``) or fdlibm's ``s = f/(2+f)`` series (float64).
* ``tanh``: float32: clamp to +-7.9053 (where float32 tanh rounds to +-1) and one
  (13, 6) odd/even rational over the whole range, the one Eigen and XLA use; ``x``
  itself below 4e-4. float64: Cephes' rational for ``|x| < 0.625``,
  ``1 - 2/(e^{2|x|} + 1)`` above.
* ``sigmoid``: ``1 / (1 + exp(-x))``, the same formula as the NumPy reference kernel.

Maximum errors, measured by ``tests/test_approx.py`` against NumPy evaluated in
float64 (float32) or against ``np.tanh``/``np.exp``/``np.log`` (float64):

========  =========================================  ==========================
function  float32 (every 97th bit pattern)           float64 (random values)
========  =========================================  ==========================
exp       1 ulp (subnormal results: 1 ulp of 2^-149)  1 ulp
log       1 ulp                                      1 ulp
tanh      4.6 ulp, relative error 2.9e-7 (the         2 ulp
          largest ulp errors are just below 1.0)
sigmoid   2.3 ulp where e^-x is finite; 0 where -x   4 ulp (against the reference
          > 88.72, as the reference: e^-x overflows   formula ``1/(1+np.exp(-x))``)
========  =========================================  ==========================

(The bounds asserted by the tests: 1.5 ulp for exp/log, 5 ulp and 3.2e-7 relative
for float32 tanh, 2.5 ulp for float32 sigmoid, 3 ulp for float64 tanh, 5 ulp for
float64 sigmoid. The faster float32 tanh trades accuracy for speed: an odd
polynomial below 0.625 and ``1 - 2/(e^{2|x|}+1)`` above is 1.3 ulp but 2.5x slower.)
Speed (float32, 10^6 elements, one core, ``benchmarks/kernels_table.py``): tanh
17.5 GB/s against NumPy's 3.1, exp 14.7 against 5.9, sigmoid 12.2 against 4.5 (read
+ write bytes per second).

Special values match NumPy: NaN in gives NaN out; ``exp(inf) = inf``, ``exp(-inf) =
0`` and overflow/underflow to inf/0 at the same thresholds; ``log(0) = -inf``,
``log(x < 0) = nan``, ``log(inf) = inf``, subnormal inputs handled;
``tanh(+-inf) = +-1``, ``tanh(-0) = -0``; ``sigmoid`` saturates to 0 and 1.

Fast-math and error model: these functions rely on IEEE semantics (NaN and inf
tests, ``(x + magic) - magic``). They are compiled as functions of their own with
one fast-math flag, ``contract``, which lets LLVM fuse a multiply and an add into one
FMA instruction (one rounding instead of two: the errors above did not grow, float32
tanh's shrank from 6.2 to 4.6 ulp; sigmoid loops ran 28 % and tanh loops 33 % faster),
and none of the flags that assume away NaN, inf or signed zeros; and with
``error_model="numpy"`` (Numba's default ``"python"`` model guards each division with
a zero check whose branch stops vectorization: tanh ran at 1.2 GB/s instead of 13).
LLVM inlines them into the caller's loop; the caller's own arithmetic keeps its flags
(none in the kernels of this package, so their ``+ - * /`` stay bitwise NumPy's). Marking
them ``inline="always"`` (Numba-level inlining) gave the same machine code but
compiled 3-10x slower (a float64 tanh loop: 7 s against 0.7 s).

Numba's on-disk cache keys a cached caller on its own source file only: after
editing this module, clear the callers' caches (``__pycache__/*.nbi``/``*.nbc``).
"""
from __future__ import annotations

import numpy as np
from llvmlite import ir
from numba import njit, types
from numba.extending import intrinsic, overload

# Multiply-adds may fuse into FMAs (see the module docstring); nothing else is relaxed.
_APPROX_JIT = {"error_model": "numpy", "fastmath": {"contract"}}

__all__ = [
    "exp",
    "exp_into",
    "float32_from_bits",
    "float64_from_bits",
    "float_bits",
    "log",
    "log_into",
    "sigmoid",
    "sigmoid_into",
    "tanh",
    "tanh_into",
]


# -- bit casts ---------------------------------------------------------------------------

@intrinsic
def float_bits(typingctx, x):
    """The IEEE bits of a float32 (as int32) or float64 (as int64); compiled code only."""
    if x == types.float32:
        ret = types.int32
    elif x == types.float64:
        ret = types.int64
    else:
        return None

    def codegen(context, builder, sig, args):
        return builder.bitcast(args[0], ir.IntType(ret.bitwidth))
    return ret(x), codegen


def _from_bits(float_type, width):
    def typer(typingctx, i):
        if not isinstance(i, types.Integer):
            return None

        def codegen(context, builder, sig, args):
            v = args[0]
            # Numba widens int32 arithmetic to int64: narrow (or widen) to the float's
            # width first; LLVM folds the trunc into the integer ops.
            if i.bitwidth > width:
                v = builder.trunc(v, ir.IntType(width))
            elif i.bitwidth < width:
                v = builder.sext(v, ir.IntType(width))
            return builder.bitcast(v, context.get_value_type(float_type))
        return float_type(i), codegen
    return typer


float32_from_bits = intrinsic(_from_bits(types.float32, 32))
float32_from_bits.__doc__ = "The float32 with the low 32 bits of an integer; compiled code only."
float64_from_bits = intrinsic(_from_bits(types.float64, 64))
float64_from_bits.__doc__ = "The float64 with the 64 bits of an integer; compiled code only."


# -- float32 -----------------------------------------------------------------------------

f4, i4 = np.float32, np.int32

_E32_LO, _E32_HI = f4(-104.0), f4(88.8)        # beyond: exp is 0 / inf in float32
_E32_LOG2E = f4(1.44269504088896341)
_E32_MAGIC = f4(12582912.0)                    # 1.5 * 2^23: x + magic rounds x to an int
_E32_MAGIC_BITS = i4(0x4B400000)
_E32_LN2_HI, _E32_LN2_LO = f4(0.693359375), f4(-2.12194440e-4)
_E32_P = (f4(1.9875691500e-4), f4(1.3981999507e-3), f4(8.3334519073e-3),
          f4(4.1665795894e-2), f4(1.6666665459e-1), f4(5.0000001201e-1))
_F32_ONE, _F32_HALF, _F32_ZERO = f4(1.0), f4(0.5), f4(0.0)


@njit(**_APPROX_JIT)
def _exp_f32(x):
    # NaN fails both comparisons and passes through the clamps unchanged.
    x = min(x, _E32_HI)
    x = max(x, _E32_LO)
    t = x * _E32_LOG2E + _E32_MAGIC
    n_float = t - _E32_MAGIC
    n = float_bits(t) - _E32_MAGIC_BITS
    r = x - n_float * _E32_LN2_HI
    r = r - n_float * _E32_LN2_LO
    p = _E32_P[0] * r + _E32_P[1]
    p = p * r + _E32_P[2]
    p = p * r + _E32_P[3]
    p = p * r + _E32_P[4]
    p = p * r + _E32_P[5]
    p = p * (r * r) + r + _F32_ONE
    # 2^n as two factors, each a normal float for n in [-150, 128].
    n1 = n >> 1
    s1 = float32_from_bits((n1 + 127) << 23)
    s2 = float32_from_bits((n - n1 + 127) << 23)
    return p * s1 * s2


_L32_MIN_NORMAL = f4(1.17549435e-38)
_L32_TWO23 = f4(8388608.0)
_L32_SQRT2 = f4(1.41421356237)
_L32_P = (f4(7.0376836292e-2), f4(-1.1514610310e-1), f4(1.1676998740e-1),
          f4(-1.2420140846e-1), f4(1.4249322787e-1), f4(-1.6668057665e-1),
          f4(2.0000714765e-1), f4(-2.4999993993e-1), f4(3.3333331174e-1))
_F32_INF, _F32_NAN = f4(np.inf), f4(np.nan)


@njit(**_APPROX_JIT)
def _log_f32(x):
    subnormal = x < _L32_MIN_NORMAL
    xs = x * _L32_TWO23 if subnormal else x
    bits = float_bits(xs)
    e = ((bits >> 23) & 0xFF) - (150 if subnormal else 127)
    m = float32_from_bits((bits & 0x7FFFFF) | 0x3F800000)   # in [1, 2)
    big = m > _L32_SQRT2
    m = m * _F32_HALF if big else m
    ef = f4(i4(e + 1 if big else e))
    f = m - _F32_ONE                                        # exact
    z = f * f
    p = _L32_P[0] * f + _L32_P[1]
    p = p * f + _L32_P[2]
    p = p * f + _L32_P[3]
    p = p * f + _L32_P[4]
    p = p * f + _L32_P[5]
    p = p * f + _L32_P[6]
    p = p * f + _L32_P[7]
    p = p * f + _L32_P[8]
    y = f * z * p + ef * _E32_LN2_LO - _F32_HALF * z
    res = (f + y) + ef * _E32_LN2_HI
    res = res if x > _F32_ZERO else (-_F32_INF if x == _F32_ZERO else _F32_NAN)
    return res if x < _F32_INF else x                        # inf -> inf, NaN -> NaN


_T32_CLAMP = f4(7.90531110763549805)          # float32 tanh rounds to +-1 beyond
_T32_TINY = f4(0.0004)                         # tanh(x) rounds to x below
_T32_ALPHA = (f4(-2.76076847742355e-16), f4(2.00018790482477e-13), f4(-8.60467152213735e-11),
              f4(5.12229709037114e-08), f4(1.48572235717979e-05), f4(6.37261928875436e-04),
              f4(4.89352455891786e-03))
_T32_BETA = (f4(1.19825839466702e-06), f4(1.18534705686654e-04), f4(2.26843463243900e-03),
             f4(4.89352518554385e-03))


@njit(**_APPROX_JIT)
def _tanh_f32(x):
    # One rational over the whole clamped range: 10 FMAs and a division. (An odd
    # polynomial below 0.625 and 1 - 2/(e^{2|x|} + 1) above is 1.3 ulp but 2.5x slower.)
    c = min(x, _T32_CLAMP)
    c = max(c, -_T32_CLAMP)
    x2 = c * c
    p = _T32_ALPHA[0] * x2 + _T32_ALPHA[1]
    p = p * x2 + _T32_ALPHA[2]
    p = p * x2 + _T32_ALPHA[3]
    p = p * x2 + _T32_ALPHA[4]
    p = p * x2 + _T32_ALPHA[5]
    p = p * x2 + _T32_ALPHA[6]
    q = _T32_BETA[0] * x2 + _T32_BETA[1]
    q = q * x2 + _T32_BETA[2]
    q = q * x2 + _T32_BETA[3]
    res = c * p / q
    # Saturate exactly: with contracted multiply-adds the rational ends at 1 - 2^-22.
    res = _F32_ONE if x >= _T32_CLAMP else res
    res = -_F32_ONE if x <= -_T32_CLAMP else res
    return x if abs(x) < _T32_TINY else res


@njit(**_APPROX_JIT)
def _sigmoid_f32(x):
    return _F32_ONE / (_F32_ONE + _exp_f32(-x))


# -- float64 -----------------------------------------------------------------------------

_E64_LO, _E64_HI = -746.0, 710.0              # beyond: exp is 0 / inf in float64
_E64_LOG2E = 1.4426950408889634
_E64_MAGIC = 6755399441055744.0               # 1.5 * 2^52
_E64_MAGIC_BITS = np.int64(0x4338000000000000)
_LN2_HI, _LN2_LO = 6.93147180369123816490e-01, 1.90821492927058770002e-10
_E64_P = (1.66666666666666019037e-01, -2.77777777770155933842e-03, 6.61375632143793436117e-05,
          -1.65339022054652515390e-06, 4.13813679705723846039e-08)


@njit(**_APPROX_JIT)
def _exp_f64(x):
    x = min(x, _E64_HI)
    x = max(x, _E64_LO)
    t = x * _E64_LOG2E + _E64_MAGIC
    n_float = t - _E64_MAGIC
    n = float_bits(t) - _E64_MAGIC_BITS
    r = (x - n_float * _LN2_HI) - n_float * _LN2_LO
    z = r * r
    c = r - z * (_E64_P[0] + z * (_E64_P[1] + z * (_E64_P[2] + z * (_E64_P[3] + z * _E64_P[4]))))
    p = 1.0 + (r + r * c / (2.0 - c))
    n1 = n >> 1
    s1 = float64_from_bits((n1 + 1023) << 52)
    s2 = float64_from_bits((n - n1 + 1023) << 52)
    return p * s1 * s2


_L64_MIN_NORMAL = 2.2250738585072014e-308
_L64_TWO54 = 18014398509481984.0
_L64_SQRT2 = 1.4142135623730951
_LG = (6.666666666666735130e-01, 3.999999999940941908e-01, 2.857142874366239149e-01,
       2.222219843214978396e-01, 1.818357216161805012e-01, 1.531383769920937332e-01,
       1.479819860511658591e-01)
_MANTISSA64 = np.int64(0x000FFFFFFFFFFFFF)
_ONE64_BITS = np.int64(0x3FF0000000000000)


@njit(**_APPROX_JIT)
def _log_f64(x):
    subnormal = x < _L64_MIN_NORMAL
    xs = x * _L64_TWO54 if subnormal else x
    bits = float_bits(xs)
    e = ((bits >> 52) & 0x7FF) - (1077 if subnormal else 1023)
    m = float64_from_bits((bits & _MANTISSA64) | _ONE64_BITS)   # in [1, 2)
    big = m > _L64_SQRT2
    m = m * 0.5 if big else m
    k = float(e + 1 if big else e)
    f = m - 1.0
    hfsq = 0.5 * f * f
    s = f / (2.0 + f)
    z = s * s
    w = z * z
    t1 = w * (_LG[1] + w * (_LG[3] + w * _LG[5]))
    t2 = z * (_LG[0] + w * (_LG[2] + w * (_LG[4] + w * _LG[6])))
    res = k * _LN2_HI - ((hfsq - (s * (hfsq + t2 + t1) + k * _LN2_LO)) - f)
    res = res if x > 0.0 else (-np.inf if x == 0.0 else np.nan)
    return res if x < np.inf else x


_T64_P = (-9.64399179425052238628e-1, -9.92877231001918586564e1, -1.61468768441708447952e3)
_T64_Q = (1.12811678491632931402e2, 2.23548839060100448583e3, 4.84406305325125486048e3)


@njit(**_APPROX_JIT)
def _tanh_f64(x):
    ax = abs(x)
    # Small |x|: odd rational (no cancellation). Large: from exp, clamped where tanh
    # is 1.0 in float64 anyway (so exp never overflows).
    z = x * x
    num = (_T64_P[0] * z + _T64_P[1]) * z + _T64_P[2]
    den = ((z + _T64_Q[0]) * z + _T64_Q[1]) * z + _T64_Q[2]
    small = x + x * z * (num / den)
    a = min(ax, 22.0)
    big = 1.0 - 2.0 / (_exp_f64(a + a) + 1.0)
    big = -big if x < 0.0 else big
    small = x if ax < 1e-9 else small       # tanh(x) rounds to x; keeps the sign of -0.0
    return small if ax < 0.625 else big


@njit(**_APPROX_JIT)
def _sigmoid_f64(x):
    return 1.0 / (1.0 + _exp_f64(-x))


# -- dtype-generic entry points ------------------------------------------------------------

def _generic(name, f32, f64):
    """A function that calls ``f32`` or ``f64`` by the argument's type in compiled code."""
    def stub(x):
        raise TypeError(f"dataflow.kernels.approx.{name} works inside Numba-compiled code only; "
                        f"use {name}_into on arrays")
    stub.__name__ = stub.__qualname__ = name

    @overload(stub)
    def _impl(x):
        if x == types.float32:
            return lambda x: f32(x)
        if x == types.float64:
            return lambda x: f64(x)
        return None
    return stub


exp = _generic("exp", _exp_f32, _exp_f64)
log = _generic("log", _log_f32, _log_f64)
tanh = _generic("tanh", _tanh_f32, _tanh_f64)
sigmoid = _generic("sigmoid", _sigmoid_f32, _sigmoid_f64)
exp.__doc__ = "e**x (see the module docstring for the error bound)."
log.__doc__ = "Natural logarithm (see the module docstring for the error bound)."
tanh.__doc__ = "Hyperbolic tangent (see the module docstring for the error bound)."
sigmoid.__doc__ = "1 / (1 + e**-x) (see the module docstring for the error bound)."


# -- array loops (tests and benchmarks) ------------------------------------------------------

@njit(nogil=True, cache=True, error_model="numpy")
def exp_into(x, out):
    """``out[i] = exp(x[i])`` over 1-D float arrays, e.g. ``exp_into(x, np.empty_like(x))``."""
    for i in range(x.size):
        out[i] = exp(x[i])
    return out


@njit(nogil=True, cache=True, error_model="numpy")
def log_into(x, out):
    """``out[i] = log(x[i])`` over 1-D float arrays."""
    for i in range(x.size):
        out[i] = log(x[i])
    return out


@njit(nogil=True, cache=True, error_model="numpy")
def tanh_into(x, out):
    """``out[i] = tanh(x[i])`` over 1-D float arrays."""
    for i in range(x.size):
        out[i] = tanh(x[i])
    return out


@njit(nogil=True, cache=True, error_model="numpy")
def sigmoid_into(x, out):
    """``out[i] = sigmoid(x[i])`` over 1-D float arrays."""
    for i in range(x.size):
        out[i] = sigmoid(x[i])
    return out
