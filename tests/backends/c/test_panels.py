"""Products that only a loop over their rows reads run a panel of rows at a time inside
that loop (``panels.py``): the same answers as NumPy, with the product's buffer one
panel; products the transformation must leave whole stay whole."""

from __future__ import annotations

import re

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c.build import compiler
from pullback.backends.c.loops.panels import PANEL_BYTES

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

RNG = np.random.default_rng(17)


def nearest(points, centroids):
    pp = np.sum(points * points, axis=1)
    cc = np.sum(centroids * centroids, axis=1)
    d2 = pp[:, None] - 2.0 * (points @ centroids.T) + cc[None, :]
    return np.sum(np.min(d2, axis=1))


def logsumexp_rows(x, w):
    z = x @ w
    m = np.max(z, axis=1)
    return np.sum(m + np.log(np.sum(np.exp(z - m[:, None]), axis=1)))


def overwritten(x, w):
    a = np.tanh(x)
    p = a @ w
    z = a * 3.0  # a dies here: its buffer may take z
    return np.min(p, axis=1) + np.sum(z, axis=1)


def _compiled(fn, *args):
    jitted = pb.jit(fn, backend="c")
    return jitted(*args), jitted.lower(*args).loops


def test_nearest_centroids_in_panels():
    points, centroids = RNG.standard_normal((6000, 16)), RNG.standard_normal((600, 16))
    got, loops = _compiled(nearest, points, centroids)
    assert got == pytest.approx(nearest(points, centroids), rel=1e-12)
    assert "_panel in range(0, 6000, " in loops
    # the product's buffer holds one panel of rows, and no more than PANEL_BYTES
    gemm = re.search(r"gemm\.\w+ float64 (\d+)x600x16: (v\d+) = ", loops)
    rows, name = int(gemm[1]), gemm[2]
    count = int(re.search(rf"alloc {name}: f64\[(\d+)\]", loops)[1])
    assert count == rows * 600 and count * 8 <= PANEL_BYTES and 6000 % rows == 0


def test_log_sum_exp_of_logits_and_its_gradient():
    x = RNG.standard_normal((2048, 64)).astype(np.float32)
    w = (RNG.standard_normal((64, 1024)) * 0.1).astype(np.float32)
    got, loops = _compiled(logsumexp_rows, x, w)
    assert got == pytest.approx(logsumexp_rows(x.astype(np.float64), w.astype(np.float64)),
                                rel=1e-5)
    assert "_panel in range(0, 2048, " in loops
    grad = pb.jit(pb.grad(logsumexp_rows), backend="c")(x, w)
    want = pb.jit(pb.grad(logsumexp_rows), backend="interp")(x, w)
    np.testing.assert_allclose(grad, want, rtol=2e-4, atol=1e-6)


@pytest.mark.parametrize("rows", [4099, 4096])  # a prime number of rows: no panels
def test_products_stay_whole_where_they_must(rows):
    x, w = RNG.standard_normal((rows, 32)), RNG.standard_normal((32, 256))
    got, loops = _compiled(overwritten, x, w)
    np.testing.assert_allclose(got, overwritten(x, w), rtol=1e-12, atol=1e-12)
    if rows == 4099:
        assert "_panel" not in loops


def direction(points, centroids):
    g, h = pb.jvp(lambda c: pb.grad(nearest, argnums=1)(points, c), (centroids,),
                  (np.ones_like(centroids),))
    return g / h


def centred_minima(x, w):
    m = np.min(x @ w, axis=1)
    return m - np.sum(m)  # each row needs the sum over all rows: after the panels


def test_what_follows_the_row_loops_joins_the_panels():
    # k-means' Newton direction: the masks, counts and weights of each row, their column
    # sums and the product contracting the rows all run panel by panel; only a panel of
    # each n x k array is ever held
    points, centroids = RNG.standard_normal((6000, 16)), RNG.standard_normal((600, 16))
    got, loops = _compiled(direction, points, centroids)
    want = pb.jit(direction, backend="interp")(points, centroids)
    np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)
    rows = int(re.search(r"gemm\.\w+ float64 (\d+)x600x16: ", loops)[1])
    assert rows < 6000 and 6000 % rows == 0
    assert re.search(rf"gemm\.\w+ float64 (16x600|600x16)x{rows}: ", loops)
    big = [int(c) for c in re.findall(r"alloc v\d+: \w+\[(\d+)\]", loops)]
    assert max(big) <= rows * 600


def test_what_reads_a_sum_over_rows_waits_for_every_panel():
    x, w = RNG.standard_normal((4096, 32)), RNG.standard_normal((32, 256))
    got, loops = _compiled(centred_minima, x, w)
    assert "_panel" in loops
    np.testing.assert_allclose(got, centred_minima(x, w), rtol=1e-12, atol=1e-9)


def test_a_transposed_operand_is_transposed_once_for_every_panel():
    # the centroids' transpose is made once before the panels; every panel's product
    # reads it in place (the same sums, in the same order, as the whole product's)
    points, centroids = RNG.standard_normal((6000, 16)), RNG.standard_normal((600, 16))
    got, loops = _compiled(nearest, points, centroids)
    assert got == pytest.approx(nearest(points, centroids), rel=1e-12)
    gemm = re.search(r"gemm\.blas float64 \d+x600x16: v\d+ = .* @ (\S+)\n", loops)
    assert gemm and "ᵀ" not in gemm[1]
    assert loops.index(f"alloc {gemm[1]}:") < loops.index("_panel in range(")
    # derivatives of the compiled cost, and the compiled derivative, against float64
    # central differences along a random direction
    step = RNG.standard_normal(centroids.shape)
    eps = 1e-6
    slope = (nearest(points, centroids + eps * step) -
             nearest(points, centroids - eps * step)) / (2 * eps)
    for grad in (pb.jit(pb.grad(nearest, argnums=1), backend="c"),
                 pb.grad(pb.jit(nearest, backend="c"), argnums=1)):
        assert np.sum(grad(points, centroids) * step) == pytest.approx(slope, rel=1e-6)
    # the Newton direction's gradient and Hessian diagonal: each centroid's points
    nearest_of = np.argmin(-2.0 * points @ centroids.T + np.sum(centroids ** 2, axis=1),
                           axis=1)
    count = np.bincount(nearest_of, minlength=600)
    sums = np.zeros_like(centroids)
    np.add.at(sums, nearest_of, points)
    keep = count > 0
    want = (2 * (count[:, None] * centroids - sums))[keep] / (2 * count[keep, None])
    got = pb.jit(direction, backend="c")(points, centroids)[keep]
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-12)
