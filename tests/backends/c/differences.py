"""The float64 central-difference gradient the backend's tests check derivatives with."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np


def central_difference(f: Callable[[np.ndarray], float], x: np.ndarray,
                       eps: float = 1e-6) -> np.ndarray:
    """The gradient of scalar ``f`` at ``x``, one element's central difference at a time."""
    g = np.empty_like(x)
    for k in range(x.size):
        e = np.zeros_like(x)
        e.flat[k] = eps
        g.flat[k] = (f(x + e) - f(x - e)) / (2 * eps)
    return g
