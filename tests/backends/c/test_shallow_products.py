"""Shallow products of few rows times a transposed B run on the inline kernel
(``loops.ir.shallow_product``), whether the program writes them so or the transposed
pass makes them (k-means' distances by centroid); deeper or taller ones keep the library
kernels past the crossover.  The answers are NumPy's, the derivatives float64 central
differences', through ``jit(grad(f))`` and ``grad(jit(f))``."""

from __future__ import annotations

import re

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c.build import compiler

from .differences import central_difference

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

RNG = np.random.default_rng(41)


def _gemms(loops: str) -> list[tuple[str, int, int, int]]:
    """Each product of the loop IR: who computes it and its m, n, k."""
    return [(who, int(m), int(n), int(k)) for who, m, n, k in
            re.findall(r"gemm\.(\w+) float\d+ (\d+)x(\d+)x(\d+): ", loops)]


def by_centroid(points, centroids):
    """Each centroid's distances to the points: the product read row by row of
    ``centroids @ points.T``, ten rows deep 8."""
    return centroids @ points.T - 0.5 * np.sum(points * points, axis=1)[None, :]


def cost(points, centroids):
    pp = np.sum(points * points, axis=1)
    cc = np.sum(centroids * centroids, axis=1)
    d2 = pp[:, None] - 2.0 * (points @ centroids.T) + cc[None, :]
    return np.sum(np.min(d2, axis=1))


@pytest.mark.parametrize("rows,depth,inline", [(10, 8, True), (16, 16, True),
                                               (10, 32, False), (24, 8, False)])
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_a_written_product_of_few_shallow_rows_runs_inline(rows, depth, inline, dtype):
    points = RNG.random((4000, depth)).astype(dtype)
    centroids = RNG.random((rows, depth)).astype(dtype)
    jitted = pb.jit(by_centroid, backend="c")
    got = jitted(points, centroids)
    assert got.dtype == dtype
    tol = 1e-12 if dtype == np.float64 else 2e-5
    np.testing.assert_allclose(got, by_centroid(points, centroids), rtol=tol, atol=tol)
    (gemm,) = _gemms(jitted.lower(points, centroids).loops)
    assert gemm[1:] == (rows, 4000, depth)
    # 4000 x rows x depth is past every kind's crossover, measured or not
    assert gemm[0] == ("inline" if inline else "blas")


@pytest.mark.parametrize("k,n,d", [(10, 1000, 8), (12, 3000, 16)])
def test_k_means_distances_transposed_run_inline(k, n, d):
    points = RNG.random((n, d))
    centroids = points[-k:].copy()
    jitted = pb.jit(cost, backend="c")
    assert jitted(points, centroids) == pytest.approx(cost(points, centroids), rel=1e-12)
    gemms = _gemms(jitted.lower(points, centroids).loops)
    assert ("inline", k, n, d) in gemms


@pytest.mark.parametrize("order", ["jit(grad)", "grad(jit)"])
def test_gradients_through_shallow_products_agree_with_central_differences(order):
    points = RNG.random((300, 8))
    centroids = RNG.random((10, 8))

    def loss(c):
        return np.sum(np.tanh(by_centroid(points, c)) ** 2) + cost(points, c)

    fn = pb.jit(pb.grad(loss)) if order == "jit(grad)" else pb.grad(pb.jit(loss))
    np.testing.assert_allclose(fn(centroids), central_difference(loss, centroids),
                               rtol=1e-6, atol=1e-6)
