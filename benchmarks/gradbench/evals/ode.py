"""GradBench ``ode``: cmpad's an_ode (RK4 over s steps) and the gradient of its last output."""

from __future__ import annotations

import numpy as np

import pullback as pb

from .._entry import Entry

TF = 2.0


def ode_rhs(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """y_0' = x_0, y_i' = x_i y_{i-1} for i > 0."""
    return x * np.concatenate((np.ones(1), y[:-1]))


def ode(x: np.ndarray, s: int) -> np.ndarray:
    """y(TF) from y(0) = 0 by s fourth-order Runge-Kutta steps."""
    h = TF / s
    y = np.zeros_like(x)
    for _ in range(s):
        k1 = ode_rhs(x, y)
        k2 = ode_rhs(x, y + h * k1 / 2)
        k3 = ode_rhs(x, y + h * k2 / 2)
        k4 = ode_rhs(x, y + h * k3)
        y = y + h * (k1 + 2 * k2 + 2 * k3 + k4) / 6
    return y


def ode_last(x: np.ndarray, s: int) -> np.float64:
    """The last component of the solution, whose gradient the eval asks for.

    Reverse mode keeps every step's residuals: 320 MB for the largest input, which the
    next call reuses.  Snapshots every 10 steps (``pb.checkpoint_loops``) recompute the
    steps between and were slower at every size measured (n = 100000, s = 100: 73 against
    61 ms).
    """
    return ode(x, s)[-1]


_primal = pb.jit(ode)
_gradient = pb.jit(pb.grad(ode_last))


def _prepare(raw: dict) -> tuple[np.ndarray, int]:
    return np.asarray(raw["x"], dtype=np.float64), int(raw["s"])


FUNCTIONS = {
    "primal": Entry(_prepare, lambda a: _primal(*a), lambda y: y.tolist()),
    "gradient": Entry(_prepare, lambda a: _gradient(*a), lambda g: g.tolist()),
}
