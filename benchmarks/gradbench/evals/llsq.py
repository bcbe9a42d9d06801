"""GradBench ``llsq``: the cmpad linear least-squares objective and its gradient."""

from __future__ import annotations

import numpy as np

import pullback as pb

from .._entry import Entry


def llsq(x: np.ndarray, n: int) -> np.float64:
    """y(x) = 1/2 sum_i (s_i - sum_j x_j t_i^j)^2, t_i = -1 + 2i/(n-1), s_i = sign t_i.

    The polynomial sum_j x_j t^j is evaluated by Horner's rule, for all t at once.
    """
    t = -1.0 + np.arange(n) * 2.0 / (n - 1)
    s = np.sign(t)
    m = x.shape[0]
    poly = np.zeros(n)
    for j in range(m):
        poly = poly * t + x[m - 1 - j]
    r = s - poly
    return 0.5 * np.sum(r * r)


_primal = pb.jit(llsq)
_gradient = pb.jit(pb.grad(llsq))


def _prepare(raw: dict) -> tuple[np.ndarray, int]:
    return np.asarray(raw["x"], dtype=np.float64), int(raw["n"])


FUNCTIONS = {
    "primal": Entry(_prepare, lambda a: _primal(*a), float),
    "gradient": Entry(_prepare, lambda a: _gradient(*a), lambda g: g.tolist()),
}
