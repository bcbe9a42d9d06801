"""Index arrays (``iota``: ``np.eye``'s and triangle masks' row and column numbers) are
computed in the pointwise loops that read them, from those loops' own indices, rather
than stored as n x n integer arrays first; answers and gradients stay NumPy's."""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.linalg as sl

import pullback as pb
from pullback.backends.c.build import compiler

from .differences import central_difference

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

N = 37
RNG = np.random.default_rng(5)


def _native(fn, *args):
    jitted = pb.jit(fn, backend="c")
    staged, _ = jitted.specialise(*args)
    assert staged.runner is not None
    return jitted(*args), staged.runner.source


def _int_buffers(source: str, n: int = N * N) -> list[str]:
    """Declarations of integer buffers of ``n`` elements in the generated C."""
    return re.findall(rf"\bint(?:8|16|32|64)_t \*v\d+ = .*\b{n} \* sizeof\(int", source)


def kernel_plus_eye(z, noise):
    sq = np.sum(z * z, axis=1)
    return np.exp(z @ z.T - 0.5 * sq[:, None] - 0.5 * sq) + noise * np.eye(z.shape[0])


def shifted_eye(a):
    return a * np.eye(N, k=2) + np.tanh(a) * np.eye(N, k=-3)


def triangles(a):
    return np.tril(a) * 2.0 + np.triu(np.exp(a), 1)


def test_eye_is_computed_in_its_consumer_loop():
    z = RNG.standard_normal((N, 3))
    out, source = _native(kernel_plus_eye, z, 0.25)
    np.testing.assert_allclose(out, kernel_plus_eye(z, 0.25), rtol=1e-13)
    assert _int_buffers(source) == []


def test_shifted_eyes_and_triangles_match_numpy():
    a = RNG.standard_normal((N, N))
    for fn in (shifted_eye, triangles):
        out, source = _native(fn, a)
        np.testing.assert_allclose(out, fn(a), rtol=1e-13)
        assert _int_buffers(source) == []


def test_iota_read_by_a_product_keeps_its_buffer():
    def f(a):
        return (np.arange(N)[:, None] + 0 * np.arange(N)).astype(np.float64) @ a

    a = RNG.standard_normal((N, 2))
    out, _ = _native(f, a)
    np.testing.assert_allclose(out, f(a), rtol=1e-13)


def test_gp_gradient_masks_are_fused_and_the_gradient_is_right():
    x = RNG.uniform(-2.0, 2.0, (N, 2))
    y = np.sin(x[:, 0]) + 0.1 * RNG.standard_normal(N)

    def nll(theta):
        z = x / np.exp(theta[:2])
        sq = np.sum(z * z, axis=1)
        k = np.exp(theta[2]) * np.exp(z @ z.T - 0.5 * sq[:, None] - 0.5 * sq)
        low = np.linalg.cholesky(k + np.exp(theta[3]) * np.eye(N))
        alpha = sl.solve_triangular(low.T, sl.solve_triangular(low, y, lower=True),
                                    lower=False)
        return 0.5 * y @ alpha + np.sum(np.log(np.diag(low)))

    theta = np.array([0.3, -0.2, 0.1, np.log(0.05)])
    grad, source = _native(pb.grad(nll), theta)
    np.testing.assert_allclose(grad, central_difference(nll, theta), rtol=1e-6, atol=1e-8)
    assert _int_buffers(source) == []
