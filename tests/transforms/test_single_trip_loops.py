"""A ``for`` loop over a constant range of one index (a Runge-Kutta integration of one
step, its step count a compile-time constant) is differentiated as straight-line code
(``passes/inline.py`` replaces it by its body before reverse mode sees it): no tape,
and a gradient's forward pass does not compute the step's result, which only the
discarded primal value reads.  Gradients agree with float64 central differences on
both backends, and value_and_grad's value with NumPy's bits."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb

from ..backends.c.differences import central_difference
from ..ode_program import rk4


def weighted(x, s):
    return np.sum(rk4(x, s) * np.linspace(1.0, 2.0, x.shape[0]))


def _ops(f, *args) -> list[str]:
    return [e.op.name for e in pb.make_ir(f)(*args).block.walk()]


def test_one_step_is_straight_line_code():
    x = np.linspace(0.1, 0.9, 8)
    ops = _ops(pb.grad(weighted), x, 1)
    assert "for_loop" not in ops and not any(o.startswith("stack_") for o in ops), ops
    assert "stack_push" in _ops(pb.grad(weighted), x, 2)  # two steps keep the loop


@pytest.mark.parametrize("n", [1, 2, 3, 5, 7, 40])
@pytest.mark.parametrize("backend", ["c", "interp"])
def test_gradient_of_one_step(n, backend):
    x = np.random.default_rng(n).random(n) + 0.5
    want = central_difference(lambda v: weighted(v, 1), x)
    for grad in (pb.jit(pb.grad(weighted), backend=backend),
                 pb.grad(pb.jit(weighted, backend=backend))):
        np.testing.assert_allclose(grad(x, 1), want, rtol=1e-7, atol=1e-9)
    last = pb.jit(pb.grad(lambda v, s: rk4(v, s)[-1]), backend=backend)
    np.testing.assert_allclose(last(x, 1), central_difference(lambda v: rk4(v, 1)[-1], x),
                               rtol=1e-7, atol=1e-9)


def test_value_and_grad_keeps_the_step():
    x = np.random.default_rng(0).random(30) + 0.5
    value, grad = pb.jit(pb.value_and_grad(weighted))(x, 1)
    assert value == pb.jit(weighted)(x, 1)
    np.testing.assert_allclose(value, weighted(x, 1), rtol=1e-15)
    np.testing.assert_array_equal(grad, pb.jit(pb.grad(weighted))(x, 1))


def mixed(x, w):
    """The loop reads its index (from 2), carries ``w`` through unchanged and counts in a
    Python float."""
    y, z, c = x * 1.0, w, 0.0
    for j in range(2, 3):
        y = np.sin(y) * (j + z)
        c = c + 1.0
    return np.sum(y * z) + c


def nested(x):
    """A one-step loop inside a loop of three, whose backward pops its residuals."""
    y = x
    for t in range(3):
        for _ in range(1):
            y = y + 0.1 * t * np.tanh(y * x[::-1])
    return np.sum(y * y)


@pytest.mark.parametrize("backend", ["c", "interp"])
def test_index_carries_and_nesting(backend):
    rng = np.random.default_rng(4)
    x, w = rng.random(6) + 0.5, rng.random(6) + 0.5
    gx, gw = pb.jit(pb.grad(mixed, argnums=(0, 1)), backend=backend)(x, w)
    np.testing.assert_allclose(gx, central_difference(lambda v: mixed(v, w), x), rtol=1e-7)
    np.testing.assert_allclose(gw, central_difference(lambda v: mixed(x, v), w), rtol=1e-7)
    got = pb.jit(pb.grad(nested), backend=backend)(x)
    np.testing.assert_allclose(got, central_difference(nested, x), rtol=1e-7)
