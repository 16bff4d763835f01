"""Small matrix products run on one BLAS thread (kernels/numpy_cpu/blas_threads.py)."""
import numpy as np
import pytest

import dataflow as df
from kernels.numpy_cpu import blas_threads


class _FakeBlas:
    """Stands for threadpoolctl's controller of NumPy's BLAS: records the thread count."""

    def __init__(self, threads):
        self.num_threads = threads
        self.calls = []

    def set_num_threads(self, n):
        self.calls.append(n)
        self.num_threads = n


@pytest.fixture
def fake_blas(monkeypatch):
    lib = _FakeBlas(2)
    monkeypatch.setattr(blas_threads, "_controller", [(lib, 2)])
    return lib


def _recording(lib):
    seen = []

    def matmul(a, b, ta=False, tb=False):
        seen.append(lib.num_threads)
        return (a.T if ta else a) @ (b.T if tb else b)
    return matmul, seen


@pytest.mark.parametrize("ta,tb", [(False, False), (True, False), (False, True), (True, True)])
def test_small_products_run_on_one_thread_and_restore_the_count(fake_blas, ta, tb):
    inner, seen = _recording(fake_blas)
    mm = blas_threads.single_thread_when_small(lambda a, b: inner(a, b, ta, tb), ta, tb)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 30) if ta else (30, 64)).astype(np.float32)
    b = rng.standard_normal((8, 64) if tb else (64, 8)).astype(np.float32)
    np.testing.assert_array_equal(mm(a, b), (a.T if ta else a) @ (b.T if tb else b))
    assert seen == [1] and fake_blas.num_threads == 2


def test_large_products_and_errors_keep_or_restore_the_thread_count(fake_blas, monkeypatch):
    monkeypatch.setattr(blas_threads, "SMALL_GEMM_FLOPS", 1000)
    inner, seen = _recording(fake_blas)
    mm = blas_threads.single_thread_when_small(inner)
    a = np.ones((20, 10))
    mm(a, np.ones((10, 20)))            # 4000 multiply-adds: all threads
    assert seen == [2] and fake_blas.calls == []
    with pytest.raises(ValueError):     # mismatched shapes, small: restored after the error
        mm(np.ones((2, 3)), np.ones((4, 2)))
    assert fake_blas.num_threads == 2 and fake_blas.calls == [1, 2]


def test_without_a_controllable_blas_the_kernel_is_unchanged(monkeypatch):
    monkeypatch.setattr(blas_threads, "_controller", [None])
    fn = np.matmul
    assert blas_threads.single_thread_when_small(fn) is fn


def test_matmul_results_through_a_session_match_numpy():
    rng = np.random.default_rng(1)
    a, b = rng.standard_normal((50, 40)), rng.standard_normal((50, 30))
    g = df.Graph()
    with g.as_default():
        pa, pb = df.placeholder(df.float64), df.placeholder(df.float64)
        y = df.matmul(pa, pb, transpose_a=True)
    with df.Session(graph=g) as sess:
        np.testing.assert_allclose(sess.run(y, {pa: a, pb: b}), a.T @ b, rtol=1e-12)
