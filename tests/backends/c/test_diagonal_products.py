"""Products with an identity or a diagonal matrix are multiplies in the C backend
(``prepare/products.py``): ``jacrev`` and ``jacfwd`` seed with the identity, and the
Jacobian of a chain of layers then costs the matrix products between the layers alone."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c import pipeline
from pullback.backends.c.build import compiler

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

N = 10  # above FORWARD_JACOBIAN, where jacfwd maps its passes over the identity
RNG = np.random.default_rng(3)
A = RNG.standard_normal((N, N))
V = RNG.standard_normal(N)
WS = [RNG.standard_normal((N, N)) / 2 for _ in range(3)]
BS = [RNG.standard_normal(N) / 4 for _ in range(3)]


def chain(x, ws, bs):
    for w, b in zip(ws, bs, strict=True):
        x = np.tanh(w @ x + b)
    return x


def chain_jacobian(x, ws, bs):
    jac = np.eye(len(x))
    for w, b in zip(ws, bs, strict=True):
        x = np.tanh(w @ x + b)
        jac = (1 - x * x)[:, None] * (w @ jac)
    return jac


def diagonals(a, v):
    """Each way to write a product with the identity or a diagonal matrix."""
    return (a @ (np.eye(N) * v), np.eye(N) @ a.T, (v[:, None] * np.eye(N)) @ a,
            a @ np.diag(v))


def not_diagonal(a, v):
    """Products whose matrix only looks like one."""
    return a @ np.eye(N, k=1), a @ (np.eye(N) + v)


def _count(fn, *args) -> int:
    """How many products with a matrix result the C backend's prepared IR makes."""
    func = pb.jit(fn, backend="c").lower(*args).ir
    entry = pipeline.Entry(func, {})
    prepared = pipeline.prepare(entry, entry).main
    return sum(e.op.name == "dot_general" and e.outputs[0].type.ndim == 2
               for e in prepared.block.walk())


@pytest.mark.parametrize("transform", [pb.jacrev, pb.jacfwd])
def test_a_chains_jacobian_makes_the_products_between_its_layers_alone(transform):
    x = RNG.standard_normal(N)
    got = pb.jit(transform(chain), backend="c")(x, WS, BS)
    np.testing.assert_allclose(got, chain_jacobian(x, WS, BS), rtol=1e-12, atol=1e-12)
    assert _count(transform(chain), x, WS, BS) == len(WS) - 1


def test_products_with_a_diagonal_are_multiplies():
    got = pb.jit(diagonals, backend="c")(A, V)
    for g, want in zip(got, diagonals(A, V), strict=True):
        np.testing.assert_allclose(g, want, rtol=1e-14, atol=1e-14)
    assert _count(diagonals, A, V) == 0


def test_products_with_other_matrices_stay_products():
    got = pb.jit(not_diagonal, backend="c")(A, V)
    for g, want in zip(got, not_diagonal(A, V), strict=True):
        np.testing.assert_allclose(g, want, rtol=1e-14, atol=1e-14)
    assert _count(not_diagonal, A, V) == 2

