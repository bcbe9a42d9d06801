"""A batch of BLAS products runs a product a thread (issue 24, ``threads.products_share_team``
and the product's C): on two threads, batched matrix products (an attention's heads)
equal NumPy's, their gradients equal float64 central differences, the C has the team's
loop, and OpenBLAS's thread count is what it was after the call."""

from __future__ import annotations

import ctypes

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c.build import compiler, threads

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

RNG = np.random.default_rng(42)
TEAM = 2


@pytest.fixture(autouse=True)
def team(tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two threads and the shortest threshold, in a private cache."""
    monkeypatch.setenv("PULLBACK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(threads, "team_size", lambda: TEAM)
    monkeypatch.setattr(threads, "parallel_min", lambda: threads.tuning.PARALLEL_SIZES[0])


def _blas_threads() -> int:
    lib = ctypes.CDLL(str(compiler.openblas_library()))
    return lib[f"{compiler.BLAS_PREFIX}openblas_get_num_threads"]()


def _heads(q, k):
    return np.tanh(q @ np.swapaxes(k, -1, -2)) @ k


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
def test_batched_products_on_a_team_are_numpys(dtype) -> None:
    q, k = (RNG.normal(size=(37, 48, 40)).astype(dtype) for _ in range(2))
    before = _blas_threads()
    jitted = pb.jit(_heads, backend="c")
    got = jitted(q, k)
    tol = 1e-12 if dtype == np.float64 else 1e-4
    np.testing.assert_allclose(got, _heads(q, k), rtol=tol, atol=tol)
    assert _blas_threads() == before
    lines = [line.strip() for line in jitted.lower(q, k).source.splitlines()]
    teams = [before for before, line in zip(lines, lines[1:], strict=False)
             if line.startswith(f"for (int64_t q = 0; q < 37; q++) {compiler.BLAS_PREFIX}cblas")]
    assert teams == ["#pragma omp parallel for schedule(static)"] * 2


def test_batched_products_on_a_team_differentiate() -> None:
    q, k = (RNG.normal(size=(37, 48, 40)) for _ in range(2))
    weights = RNG.normal(size=(37, 48, 40))

    def loss(a, b):
        return np.sum(_heads(a, b) * weights)

    grads = pb.jit(pb.grad(loss, argnums=(0, 1)), backend="c")(q, k)
    eps = 1e-6
    for j, grad in enumerate(grads):
        for _ in range(3):
            v = RNG.normal(size=grad.shape)
            moved = [[q, k], [q, k]]
            moved[0][j], moved[1][j] = moved[0][j] + eps * v, moved[1][j] - eps * v
            want = (loss(*moved[0]) - loss(*moved[1])) / (2 * eps)
            assert np.sum(grad * v) == pytest.approx(want, rel=1e-7, abs=1e-7)
