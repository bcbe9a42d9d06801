"""GradBench's ``ode`` program, for the tests of how one Runge-Kutta step compiles
(inlined, differentiated as straight-line code): ``s`` RK4 steps of y_i' = x_i y_{i-1}
over [0, 2] from y = 0, each stage reading the last one shifted by an element."""

from __future__ import annotations

import numpy as np


def rhs(x, y):
    return x * np.concatenate((np.ones(1), y[:-1]))


def rk4(x, s):
    h = 2.0 / s
    y = np.zeros_like(x)
    for _ in range(s):
        k1 = rhs(x, y)
        k2 = rhs(x, y + h * k1 / 2)
        k3 = rhs(x, y + h * k2 / 2)
        k4 = rhs(x, y + h * k3)
        y = y + h * (k1 + 2 * k2 + 2 * k3 + k4) / 6
    return y
