"""GradBench ``particle``: steer a charged particle to the origin by nested gradient descent.

The particle starts at (0, 8) with velocity (0.75, 0) and moves by naive Euler steps
(dt = 0.1) under the force -grad_x p(x; w), p the potential of unit charges at (10, 0)
and (10, 10 - w), until its next step would cross the x axis; linear interpolation then
gives where it crosses, x(t_f). The argmin over w of x_0(t_f)^2 is found by gradient
descent, whose gradient goes through the while loop that itself takes gradients of p:
nested AD. ``ff``, ``fr``, ``rf``, ``rr`` pick the mode of the outer (argmin) and the
inner (force) gradient.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import pullback as pb

from .._entry import Entry
from ._solver import argmin, grad_forward, grad_reverse

DT = 0.1


def potential(x: np.ndarray, w: np.ndarray) -> np.float64:
    """p(x; w) = 1/|x - (10, 10 - w)| + 1/|x - (10, 0)|."""
    d1 = np.sqrt((x[0] - 10.0) ** 2 + (x[1] - (10.0 - w[0])) ** 2)
    d2 = np.sqrt((x[0] - 10.0) ** 2 + x[1] ** 2)
    return 1.0 / d1 + 1.0 / d2


def make_euler(inner: Callable) -> Callable:
    """x_0(t_f)^2 as a function of w, the force taken by ``inner`` mode."""
    def naive_euler(w: np.ndarray) -> np.float64:
        x = np.array([0.0, 8.0])
        xdot = np.array([0.75, 0.0])
        go = True
        while go:
            xddot = -inner(potential, x, w)
            x_new = x + DT * xdot
            if x_new[1] > 0.0:
                x = x_new
                xdot = xdot + DT * xddot
            else:
                go = False
        dt_f = -x[1] / xdot[1]
        x_tf = x + dt_f * xdot
        return x_tf[0] * x_tf[0]
    return naive_euler


def make_particle(outer: Callable, inner: Callable, backend: str | None = None) -> Callable:
    """The eval's function for one (outer, inner) choice of AD modes, compiled."""
    naive_euler = make_euler(inner)

    def solve(w0: np.ndarray) -> np.ndarray:
        return argmin(naive_euler, outer, w0)[0]
    return pb.jit(solve, backend=backend)


_MODES = {"f": grad_forward, "r": grad_reverse}


def _prepare(raw: dict) -> np.ndarray:
    return np.array([float(raw["w"])])


FUNCTIONS = {
    a + b: Entry(_prepare, make_particle(_MODES[a], _MODES[b]), float)
    for a in "fr" for b in "fr"
}
