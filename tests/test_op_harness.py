"""The shared test helpers' float bounds: sums of the same terms in different orders stay
within ``sum_bound``, where a fixed ``atol`` does not (the flaky simulator matmul)."""
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from .op_harness import assert_within, matmul_bound, reduction_bound, sum_bound


def _sequential_sum(terms, dtype):
    total = dtype(0)
    for t in terms:
        total = dtype(total + t)
    return total


def test_a_fixed_atol_misses_a_reordered_float32_sum_that_the_bound_covers():
    # Near 1024 a float32 ulp is 1.2e-4: four 3e-5 terms vanish one by one when added to
    # 1024 first, and survive (as one ulp) when added together first.
    terms = np.array([1024.0, 3e-5, 3e-5, 3e-5, 3e-5, -1024.0], np.float32)
    first_big = _sequential_sum(terms, np.float32)
    small_first = _sequential_sum(terms[[1, 2, 3, 4, 0, 5]], np.float32)
    assert first_big == 0.0 and abs(small_first) > 1e-4
    with pytest.raises(AssertionError):
        np.testing.assert_allclose(small_first, first_big, rtol=1e-4, atol=1e-4)
    bound = sum_bound(np.sum(np.abs(terms.astype(np.float64))), terms.size, np.float32)
    assert_within(small_first, first_big, bound)


@settings(max_examples=30, deadline=None)
@given(m=st.integers(1, 6), k=st.integers(1, 64), n=st.integers(1, 6),
       scale=st.sampled_from([1e-3, 1.0, 1e3]), seed=st.integers(0, 2 ** 32 - 1),
       dtype=st.sampled_from([np.float32, np.float64]))
def test_matmul_in_any_order_stays_within_the_bound(m, k, n, scale, seed, dtype):
    rng = np.random.default_rng(seed)
    a = (rng.standard_normal((m, k)) * scale).astype(dtype)
    b = (rng.standard_normal((k, n)) * scale).astype(dtype)
    blas = a @ b
    backwards = np.zeros((m, n), dtype)
    for j in reversed(range(k)):  # one rank-1 update at a time, last term first
        backwards = (backwards + np.outer(a[:, j], b[j])).astype(dtype)
    assert_within(backwards, blas, matmul_bound(a, b, dtype))


def test_reduction_bounds():
    x = np.array([[1.0, -2.0, 3.0], [0.5, 0.5, -1.0]], np.float32)
    assert np.all(reduction_bound("Max", x, 1, False, np.float32) == 0)
    sums = reduction_bound("Sum", x, 1, False, np.float32)
    assert sums.shape == (2,) and sums[0] > sums[1] > 0  # larger magnitudes, looser
    assert np.all(reduction_bound("Sum", x.astype(np.int32), None, False, np.int32) == 0)
    with pytest.raises(AssertionError, match="bound"):
        assert_within(np.float32(1.001), np.float32(1.0), sum_bound(1.0, 3, np.float32))
