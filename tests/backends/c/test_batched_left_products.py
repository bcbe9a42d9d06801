"""A matrix times a batch of matrices whose batch axis was moved to the middle (``A @ X``
under ``vmap``/``jacfwd`` with X batched first) is one batched product of the broadcast
matrix with X's matrices where they lie (``prepare/products.py``), not a product of the
transposed batch between two copies: NumPy's answers, float64 central differences'
derivatives through ``jit(grad(f))`` and ``grad(jit(f))``."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c.build import compiler

from .differences import central_difference

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

RNG = np.random.default_rng(17)


def rotate(a, x):
    return pb.vmap(lambda xi: a @ xi)(x)


def rotate_transposed(a, x):
    return pb.vmap(lambda xi: a.T @ xi)(x)


def rotate_kept_in_middle(a, x):
    return pb.vmap(lambda xi: a @ xi, out_axes=1)(x)


def test_narrow_matrices_stay_one_product_of_the_transposed_batch():
    a, x = RNG.random((7, 16)), RNG.random((5, 16, 8))
    np.testing.assert_allclose(pb.jit(rotate, backend="c")(a, x), np.matmul(a, x),
                               rtol=1e-13, atol=1e-13)
    (gemm,) = _gemms(rotate, a, x)
    assert " 7x40x16:" in gemm


def _gemms(fn, *args) -> list[str]:
    return [line.strip() for line in pb.jit(fn, backend="c").lower(*args).loops.splitlines()
            if "gemm." in line]


def test_a_rotated_batch_is_one_batched_product_and_no_copies():
    a, x = RNG.random((3, 3)), RNG.random((28, 3, 500))
    got = pb.jit(rotate, backend="c")(a, x)
    np.testing.assert_allclose(got, np.matmul(a, x), rtol=1e-14, atol=1e-14)
    (gemm,) = _gemms(rotate, a, x)
    assert gemm.startswith("gemm.inline float64[28] 3x500x3:")


@pytest.mark.parametrize("fn,want", [
    (rotate_transposed, lambda a, x: np.matmul(a.T, x)),
    (rotate_kept_in_middle, lambda a, x: np.matmul(a, x).transpose(1, 0, 2)),
])
def test_other_forms_give_numpys_answers(fn, want):
    a, x = RNG.random((4, 4)), RNG.random((6, 4, 70))
    np.testing.assert_allclose(pb.jit(fn, backend="c")(a, x), want(a, x), rtol=1e-13,
                               atol=1e-13)


def test_a_jacobian_of_rotated_points_agrees_with_central_differences():
    """``jacfwd`` of ``glob @ positions``: the tangents' batch axis goes in the middle."""
    positions = RNG.random((3, 80))

    def points(angles):
        c, s = np.cos(angles), np.sin(angles)
        glob = np.stack([np.stack([c[0], -s[0], 0.0 * c[0]]),
                         np.stack([s[0], c[0], 0.0 * c[0]]),
                         np.stack([0.0 * c[0], 0.0 * c[0], 1.0 + 0.0 * c[0]])])
        return glob @ (positions * np.sum(angles[1:] ** 2))

    angles = np.linspace(0.3, 1.7, 9)
    jitted = pb.jit(pb.jacfwd(points), backend="c")
    jac = jitted(angles)
    want = np.stack([central_difference(lambda t, i=i: points(t).reshape(-1)[i], angles)
                     for i in range(positions.size)]).reshape(3, 80, 9)
    np.testing.assert_allclose(jac, want, rtol=1e-6, atol=1e-6)
    assert any("float64[9] 3x80x3:" in line for line in _gemms(pb.jacfwd(points), angles))


@pytest.mark.parametrize("order", ["jit(grad)", "grad(jit)"])
def test_gradients_through_the_batched_product_agree_with_central_differences(order):
    a, x = RNG.random((3, 3)), RNG.random((4, 3, 64))

    def loss_a(a):
        return np.sum(np.tanh(rotate(a, x)) ** 2)

    def loss_x(x):
        return np.sum(np.tanh(rotate(a, x)) ** 2)

    for loss, at in ((loss_a, a), (loss_x, x)):
        fn = pb.jit(pb.grad(loss)) if order == "jit(grad)" else pb.grad(pb.jit(loss))
        np.testing.assert_allclose(fn(at), central_difference(loss, at), rtol=1e-6,
                                   atol=1e-7)
