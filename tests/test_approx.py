"""dataflow.kernels.approx against NumPy: the error bounds of its docstring over the whole
float32 range (a sweep of bit patterns), random float64 values of every magnitude,
and the special values (NaN, inf, zeros, overflow and underflow thresholds)."""
from __future__ import annotations

import numpy as np
import pytest

from dataflow.kernels import approx

F32, F64 = np.float32, np.float64


def _ref(name, x):
    """NumPy's value of ``name`` at ``x`` (float64 arithmetic for float32 inputs)."""
    with np.errstate(all="ignore"):
        if name == "sigmoid":
            return 1 / (1 + np.exp(-x))
        return getattr(np, name)(x)


def _apply(name, x):
    return getattr(approx, f"{name}_into")(x, np.empty_like(x))


def _ulps32(got, ref):
    """|got - ref| in units of the float32 spacing at ref (ref in float64)."""
    with np.errstate(all="ignore"):
        r32 = ref.astype(F32)
    spacing = np.maximum(np.spacing(np.abs(r32)).astype(F64), 2.0**-149)
    return np.abs(got.astype(F64) - ref) / spacing


# Every 997th float32 bit pattern (4.3 million values; the docstring's figures come
# from every 97th), offset so the sweep hits odd and even mantissas.
SWEEP = (np.arange(13, 2**32, 997, dtype=np.uint64).astype(np.uint32)).view(F32)

ULP_BOUND_32 = {"exp": 1.5, "log": 1.5, "tanh": 5.0, "sigmoid": 2.5}


@pytest.mark.parametrize("name", ["exp", "log", "tanh", "sigmoid"])
def test_float32_sweep_within_bound(name):
    x = SWEEP
    got = _apply(name, x)
    with np.errstate(all="ignore"):
        ref = _ref(name, x.astype(F64))
    with np.errstate(all="ignore"):
        ref32 = ref.astype(F32)
    # NaN exactly where NumPy's float32 result is NaN.
    assert np.array_equal(np.isnan(got), np.isnan(ref32))
    finite = np.isfinite(ref32)
    # Overflow to +-inf exactly where the correctly rounded value overflows.
    inf = np.isinf(ref32)
    assert np.array_equal(got[inf], ref32[inf])
    if name == "sigmoid":
        # Where e^-x overflows float32 the reference formula (float32) gives 0, as we do.
        with np.errstate(all="ignore"):
            flushed = np.isinf(np.exp(-x))
        assert np.all(got[flushed & ~np.isnan(x)] == 0)
        finite &= ~flushed
    err = _ulps32(got[finite], ref[finite])
    assert err.max() <= ULP_BOUND_32[name], x[finite][np.argmax(err)]
    if name == "tanh":
        rel = np.abs(got[finite] - ref[finite]) / np.maximum(np.abs(ref[finite]), 2.0**-126)
        assert rel.max() <= 3.2e-7


ULP_BOUND_64 = {"exp": 1.5, "log": 1.5, "tanh": 3.0, "sigmoid": 5.0}


def _random64():
    rng = np.random.default_rng(0)
    mags = 10.0 ** rng.uniform(-310, 308, 200_000)
    small = rng.standard_normal(200_000) * rng.choice([1e-5, 0.3, 1, 3, 30, 300, 700], 200_000)
    return np.concatenate([mags, -mags, small])


@pytest.mark.parametrize("name", ["exp", "log", "tanh", "sigmoid"])
def test_float64_random_within_bound(name):
    x = _random64()
    got, ref = _apply(name, x), _ref(name, x)
    assert np.array_equal(np.isnan(got), np.isnan(ref))
    finite = np.isfinite(ref)
    assert np.array_equal(got[~finite & ~np.isnan(ref)], ref[~finite & ~np.isnan(ref)])
    spacing = np.maximum(np.spacing(np.abs(ref[finite])), 5e-324)
    err = np.abs(got[finite] - ref[finite]) / spacing
    assert err.max() <= ULP_BOUND_64[name], x[finite][np.argmax(err)]


SPECIALS = [np.nan, -np.nan, np.inf, -np.inf, 0.0, -0.0, 1.0, -1.0, 1e-45, -1e-45, 1e-40,
            1.17549435e-38, 3.4e38, -3.4e38, 88.72, 88.73, 89.0, -87.3, -103.9, -104.0,
            -200.0, 7.9, 8.0, -9.0, 20.0, 1e-4, -1e-4, 1e-300, 5e-324, 709.7, 709.8,
            -745.1, -745.2, 1e308]


@pytest.mark.parametrize("dtype", [F32, F64])
@pytest.mark.parametrize("name", ["exp", "log", "tanh", "sigmoid"])
def test_special_values_match_numpy(name, dtype):
    with np.errstate(all="ignore"):
        x = np.array(SPECIALS).astype(dtype)
        want = _ref(name, x)          # in dtype: the reference kernels' arithmetic
    got = _apply(name, x)
    assert np.array_equal(np.isnan(got), np.isnan(want))
    # inf, zeros and saturation exactly; other values within a few ulps.
    exact = ~np.isfinite(want) | (want == 0) | (np.abs(want) == 1)
    np.testing.assert_array_equal(got[exact], want[exact])
    np.testing.assert_allclose(got, want, rtol=8 * np.finfo(dtype).eps,
                               atol=4 * np.finfo(dtype).smallest_subnormal)


@pytest.mark.parametrize("dtype", [F32, F64])
def test_signs_and_limits(dtype):
    x = np.array([np.inf, -np.inf, -0.0, 0.0, 1e6, -1e6], dtype)
    t = _apply("tanh", x)
    np.testing.assert_array_equal(t, [1, -1, 0, 0, 1, -1])
    assert np.signbit(t[2]) and not np.signbit(t[3])
    np.testing.assert_array_equal(_apply("sigmoid", x), [1, 0, 0.5, 0.5, 1, 0])
    np.testing.assert_array_equal(_apply("exp", x), [np.inf, 0, 1, 1, np.inf, 0])
    with np.errstate(all="ignore"):
        np.testing.assert_array_equal(_apply("log", x), np.log(x))


def test_results_keep_the_input_dtype():
    for dtype in (F32, F64):
        for name in ("exp", "log", "tanh", "sigmoid"):
            assert _apply(name, np.ones(4, dtype)).dtype == dtype


def test_python_call_says_compiled_only():
    with pytest.raises(TypeError, match="compiled code only"):
        approx.tanh(1.0)
