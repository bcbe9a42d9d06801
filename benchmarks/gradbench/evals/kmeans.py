"""GradBench ``kmeans``: the k-means cost and the Newton direction J H^-1.

The Hessian of the cost is diagonal, so ``H @ ones`` is its diagonal: one
forward-over-reverse pass (``pb.jvp`` of ``pb.grad``) gives J and diag(H) together.
"""

from __future__ import annotations

import numpy as np

import pullback as pb

from .._entry import Entry


def cost(points: np.ndarray, centroids: np.ndarray) -> np.float64:
    """sum_i min_j |C_j - P_i|^2, with |C - P|^2 expanded so no (n, k, d) array is built."""
    pp = np.sum(points * points, axis=1)
    cc = np.sum(centroids * centroids, axis=1)
    d2 = pp[:, None] - 2.0 * (points @ centroids.T) + cc[None, :]
    return np.sum(np.min(d2, axis=1))


def direction(points: np.ndarray, centroids: np.ndarray) -> np.ndarray:
    """J * H^-1 elementwise, with J the gradient and H the (diagonal) Hessian in C."""
    jac = pb.grad(cost, argnums=1)
    g, hdiag = pb.jvp(lambda c: jac(points, c), (centroids,), (np.ones_like(centroids),))
    return g / hdiag


_cost = pb.jit(cost)
_dir = pb.jit(direction)


def _prepare(raw: dict) -> tuple[np.ndarray, np.ndarray]:
    return (np.asarray(raw["points"], dtype=np.float64),
            np.asarray(raw["centroids"], dtype=np.float64))


FUNCTIONS = {
    "cost": Entry(_prepare, lambda a: _cost(*a), float),
    "dir": Entry(_prepare, lambda a: _dir(*a), lambda d: d.tolist()),
}
