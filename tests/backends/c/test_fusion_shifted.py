"""Values read a few elements further on, through ``concatenate((y0, y[:-1]))``, are
computed at the shifted index where read (``plan/fusion.py``, ``lower/layout.py``): the
four stages of a Runge-Kutta step on ``y_i' = x_i y_{i-1}`` run as one loop."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c.build import compiler

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")


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


def last(x, s):
    return rk4(x, s)[-1]


def test_runge_kutta_stages_run_as_one_loop():
    x = np.random.default_rng(5).random(300)
    got = pb.jit(rk4, backend="c")(x, 3)
    np.testing.assert_array_equal(got, pb.jit(rk4, backend="interp")(x, 3))
    text = pb.jit(rk4, backend="c").lower(x, 3).loops
    body = text[text.index("for it"):]
    assert body.count("alloc") == 1  # the next state, and no stage's buffer


def test_reverse_mode_reads_the_shifted_stages_too():
    x = np.random.default_rng(6).random(300)
    got = pb.jit(pb.grad(last), backend="c")(x, 4)
    np.testing.assert_array_equal(got, pb.jit(pb.grad(last), backend="interp")(x, 4))
