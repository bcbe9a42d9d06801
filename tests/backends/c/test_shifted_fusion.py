"""A cheap pointwise value read at a constant shifted index (``concatenate((c, u[:-k]))``,
``u[k:]``) is computed where it is read, at that index, instead of stored first
(``plan/fusion.py``): values agree with NumPy bit for bit, derivatives with float64
central differences, at the edge sizes where the shifted reads fall off the ends."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c.build import compiler

from .differences import central_difference

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

SIZES = (1, 2, 3, 7, 300)


def rhs(x, y):
    return x * np.concatenate((np.ones(1, dtype=x.dtype), y[:-1]))


def rk4(x):
    """Two Runge-Kutta steps of y_i' = x_i y_{i-1}: each stage reads the last shifted."""
    h = x.dtype.type(0.5)
    y = np.zeros_like(x)
    for _ in range(2):
        k1 = rhs(x, y)
        k2 = rhs(x, y + h * k1 / 2)
        k3 = rhs(x, y + h * k2 / 2)
        k4 = rhs(x, y + h * k3)
        y = y + h * (k1 + 2 * k2 + 2 * k3 + k4) / 6
    return y


def differences(x):
    """Slices of one cheap value at offsets 0, 1 and 2: a second difference."""
    u = x * x + 3 * x
    return x[2:] * (u[2:] - 2 * u[1:-1]) + u[:-2]


def to_scalar(f):
    def g(x):
        y = f(x)
        return np.sum(y * np.linspace(1.0, 2.0, y.shape[0]).astype(x.dtype))
    return g


PROGRAMS = [rk4, differences]


@pytest.mark.parametrize("f", PROGRAMS)
@pytest.mark.parametrize("n", SIZES)
@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_values_are_numpys_bits(f, n, dtype):
    x = np.random.default_rng(n).random(n).astype(dtype)
    got = pb.jit(f, backend="c")(x)
    want = f(x)
    assert got.dtype == want.dtype
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("f", PROGRAMS)
@pytest.mark.parametrize("n", SIZES[:4])
def test_gradients_agree_with_central_differences(f, n):
    x = np.random.default_rng(10 + n).random(n) + 0.5
    loss = to_scalar(f)
    want = central_difference(loss, x)
    for grad in (pb.jit(pb.grad(loss), backend="c"), pb.grad(pb.jit(loss, backend="c"))):
        np.testing.assert_allclose(grad(x), want, rtol=1e-6, atol=1e-8)


@pytest.mark.parametrize("f", PROGRAMS)
def test_float32_gradients_follow_float64(f):
    x = np.random.default_rng(3).random(300) + 0.5
    loss = to_scalar(f)
    want = pb.jit(pb.grad(loss), backend="c")(x)
    got = pb.jit(pb.grad(loss), backend="c")(x.astype(np.float32))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


def test_large_gradients_agree_with_the_interpreter():
    x = np.random.default_rng(4).random(4000)
    loss = to_scalar(rk4)
    np.testing.assert_allclose(pb.jit(pb.grad(loss), backend="c")(x),
                               pb.jit(pb.grad(loss), backend="interp")(x), rtol=1e-12)
    np.testing.assert_allclose(pb.grad(pb.jit(loss, backend="c"))(x),
                               pb.jit(pb.grad(loss), backend="interp")(x), rtol=1e-12)


def test_the_stages_of_a_step_run_as_one_loop():
    """Each step of ``rk4`` is one loop over the elements making the next state; no
    stage, shifted or not, has a buffer of its own."""
    text = pb.jit(rk4, backend="c").lower(np.ones(300)).loops
    step = text[text.index("for it"):]
    assert step.count("alloc") == 1  # the next state
    # one loop, split where the shifted reads fall off the start (i < 1, ..., i < 4)
    assert step.count("kernel") == 5 and "range(4, 300)" in step


def test_a_value_read_at_offsets_has_no_buffer():
    """``u`` is computed at each offset where its slices are read: the kernel reads
    ``x`` there, and stores no ``u`` (one buffer: the product before the last add)."""
    text = pb.jit(differences, backend="c").lower(np.ones(300)).loops
    assert text.count("alloc") <= 1
    assert "(3.0 * p0[i + 1])" in text and "(3.0 * p0[i + 2])" in text


def last(x):
    return rk4(x)[-1]


@pytest.mark.parametrize("n, pushes", [(300, 4), (200_000, 1)])
def test_large_stages_are_recomputed_from_the_pushed_state(n, pushes):
    """Each step's stages are computed again in the backward from the state pushed in
    their place once that saves a megabyte of tape per step (``transforms/vjp.py``);
    small ones stay on the tape."""
    x = np.random.default_rng(7).random(n)
    body = str(pb.jit(pb.grad(last), backend="c").lower(x).ir)
    assert body.count("stack_push") == pushes
    if pushes == 1:
        np.testing.assert_array_equal(pb.jit(pb.grad(last), backend="c")(x),
                                      pb.jit(pb.grad(last), backend="interp")(x))
