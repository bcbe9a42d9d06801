"""Reductions read fused broadcasts at their loops' indices: ``min(pp[:, None] - 2 p @ c.T
+ cc[None, :], axis=1)`` stores the product and nothing else of its size, and a long
reduction over rows runs its rows on every thread."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb
from pullback.backends import c
from pullback.backends.c.build import compiler
from pullback.backends.c.build.threads import parallel_min
from pullback.backends.c.loops.ir import Alloc, Loop, walk

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

RNG = np.random.default_rng(5)


def _stmts(fn, *args):
    module = c.source_of(pb.jit(fn, backend="c").lower(*args).ir).module
    return [s for f in module.funcs for s in walk(f.body)]


def kmeans_cost(points, centroids):
    pp = np.sum(points * points, axis=1)
    cc = np.sum(centroids * centroids, axis=1)
    d2 = pp[:, None] - 2.0 * (points @ centroids.T) + cc[None, :]
    return np.sum(np.min(d2, axis=1))


def scaled_row_sums(x, w, b):
    return np.sum(x * w[None, :] + b[:, None], axis=1), np.sum(x * w[None, :], axis=0)


@pytest.mark.parametrize("n", [30, 3000])  # one thread; rows on every thread
def test_a_row_reduction_of_broadcasts_stores_no_broadcast(n):
    points, centroids = RNG.standard_normal((n, 8)), RNG.standard_normal((40, 8))
    stmts = _stmts(kmeans_cost, points, centroids)
    big = [s for s in stmts if isinstance(s, Alloc) and s.count >= n * 40]
    assert len(big) == 1  # the product's result; neither broadcast
    rows = [s for s in stmts if isinstance(s, Loop) and any(
        isinstance(t, Loop) and "reduction(min" in " ".join(t.reductions) for t in s.body)]
    assert [s.pragma for s in rows] == ["parallel" if n * 40 >= parallel_min() else ""]
    got = pb.jit(kmeans_cost, backend="c")(points, centroids)
    want = np.sum(np.min(((points[:, None, :] - centroids[None]) ** 2).sum(-1), axis=1))
    np.testing.assert_allclose(got, want, rtol=1e-10)
    g = pb.jit(pb.grad(kmeans_cost, argnums=1), backend="c")(points, centroids)
    np.testing.assert_allclose(g, pb.grad(kmeans_cost, argnums=1)(points, centroids),
                               rtol=1e-10, atol=1e-10)


def test_leading_and_trailing_sums_of_broadcasts_equal_numpy():
    x, w, b = RNG.standard_normal((300, 70)), RNG.standard_normal(70), RNG.standard_normal(300)
    stmts = _stmts(scaled_row_sums, x, w, b)
    assert not [s for s in stmts if isinstance(s, Alloc) and s.count >= x.size]
    rows, cols = pb.jit(scaled_row_sums, backend="c")(x, w, b)
    np.testing.assert_allclose(rows, np.sum(x * w + b[:, None], axis=1), rtol=1e-12)
    np.testing.assert_allclose(cols, np.sum(x * w, axis=0), rtol=1e-12)
