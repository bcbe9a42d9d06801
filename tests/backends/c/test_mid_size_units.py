"""Mid-size modules (100 to 300 lines of C) are cut into parts where they compile on
several cores (``emit/parts.py``: ``PART_LINES``), and not on one core."""

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c.build import compiler, units

needs_cc = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")


def rnn_loss(w, u, b, xs):
    h = np.zeros((xs.shape[1], w.shape[0]), dtype=w.dtype)
    for t in range(xs.shape[0]):
        h = np.tanh(h @ w.T + xs[t] @ u.T + b)
    return np.sum(h * h)


def _args():
    rng = np.random.default_rng(0)
    return (0.5 * rng.standard_normal((6, 6)), 0.5 * rng.standard_normal((6, 4)),
            0.1 * rng.standard_normal(6), rng.standard_normal((5, 3, 4)))


def _central(args, k, eps=1e-6):
    """d rnn_loss / d args[k] by float64 central differences."""
    grad = np.zeros_like(args[k])
    for i in np.ndindex(args[k].shape):
        up, down = [a.copy() for a in args], [a.copy() for a in args]
        up[k][i] += eps
        down[k][i] -= eps
        grad[i] = (rnn_loss(*up) - rnn_loss(*down)) / (2 * eps)
    return grad


@pytest.mark.parametrize("cores", [1, 2])
@needs_cc
def test_an_rnn_gradient_is_cut_on_two_cores_only_and_right(cores, tmp_path, monkeypatch):
    monkeypatch.setenv("PULLBACK_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PULLBACK_TIERED", "0")
    monkeypatch.setattr(units, "usable_cores", lambda: cores)
    args = _args()
    grad = pb.jit(pb.grad(rnn_loss, argnums=(0, 1, 2)), backend="c")
    source = grad.lower(*args).source
    assert 100 < source.count("\n") < 300  # under the one-core threshold
    assert (units.MARK in source) == (cores > 1)
    got = grad(*args)
    for k in range(3):
        np.testing.assert_allclose(got[k], _central(args, k), rtol=1e-6, atol=1e-8)
