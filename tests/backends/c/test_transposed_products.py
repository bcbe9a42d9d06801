"""Products whose result is read only by whole columns are computed transposed
(``loops/transposed.py``): the same answers as NumPy and float64 central differences,
the product's loop IR ``n x m`` where the columns are read, ``m x n`` elsewhere."""

from __future__ import annotations

import re

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c.build import compiler

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

RNG = np.random.default_rng(23)


def cost(points, centroids):
    pp = np.sum(points * points, axis=1)
    cc = np.sum(centroids * centroids, axis=1)
    d2 = pp[:, None] - 2.0 * (points @ centroids.T) + cc[None, :]
    return np.sum(np.min(d2, axis=1))


def direction(points, centroids):
    g, h = pb.jvp(lambda c: pb.grad(cost, argnums=1)(points, c), (centroids,),
                  (np.ones_like(centroids),))
    return g / h


def doubled(points, centroids):
    return (points @ centroids.T) * 2.0  # read whole, row by row


def _gemm(loops: str) -> tuple[int, int, int]:
    m, n, k = re.search(r"gemm\.\w+ float64 (\d+)x(\d+)x(\d+): ", loops).groups()
    return int(m), int(n), int(k)


@pytest.mark.parametrize("k,n,d", [(10, 1000, 8), (10, 1000, 16), (7, 300, 5)])
def test_k_means_direction_reads_the_product_by_columns(k, n, d):
    points = RNG.random((n, d))
    centroids = points[-k:].copy()
    jitted = pb.jit(direction, backend="c")
    got = jitted(points, centroids)
    # J / diag(H) is each centroid minus the mean of the points nearest it
    nearest = np.argmin(((points[:, None, :] - centroids[None]) ** 2).sum(-1), axis=1)
    means = np.stack([points[nearest == j].mean(axis=0) for j in range(k)])
    np.testing.assert_allclose(got, centroids - means, rtol=1e-9, atol=1e-12)
    # the k x n product: each centroid's column of distances a contiguous row
    assert _gemm(jitted.lower(points, centroids).loops) == (k, n, d)


def test_k_means_gradient_agrees_with_central_differences():
    points, centroids = RNG.random((400, 6)), RNG.random((9, 6))
    grad = pb.jit(pb.grad(cost, argnums=1), backend="c")(points, centroids)
    h, want = 1e-6, np.empty_like(centroids)
    for idx in np.ndindex(*centroids.shape):
        up, down = centroids.copy(), centroids.copy()
        up[idx] += h
        down[idx] -= h
        want[idx] = (cost(points, up) - cost(points, down)) / (2 * h)
    np.testing.assert_allclose(grad, want, rtol=1e-6, atol=1e-6)
    assert pb.jit(cost, backend="c")(points, centroids) == \
        pytest.approx(cost(points, centroids), rel=1e-12)


def test_a_product_read_whole_stays_row_major():
    points, centroids = RNG.random((500, 8)), RNG.random((10, 8))
    jitted = pb.jit(doubled, backend="c")
    np.testing.assert_allclose(jitted(points, centroids), doubled(points, centroids),
                               rtol=1e-13)
    assert _gemm(jitted.lower(points, centroids).loops) == (500, 10, 8)
