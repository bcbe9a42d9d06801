"""Sums of zero-padded pieces (the gradient of an array read in slices: an LSTM's gates
cut from one product) are concatenations in the C backend: the answers and gradients
stay NumPy's and float64 central differences', and the prepared IR adds no pads."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c.build import compiler
from pullback.backends.c.prepare.pieces import concatenate_pieces
from pullback.ir.core import Module

from .differences import central_difference

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

RNG = np.random.default_rng(11)
H = 5


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def gates(z, c):
    """An LSTM cell's update from its pre-activations ``z [B, 4H]``."""
    i, f = _sigmoid(z[:, :H]), _sigmoid(z[:, H:2 * H])
    g, o = np.tanh(z[:, 2 * H:3 * H]), _sigmoid(z[:, 3 * H:])
    return np.sum(o * np.tanh(f * c + i * g))


def gapped(z):
    """Pieces that leave columns between and after them, one read twice."""
    return np.sum(np.sin(z[:, 1:3]) * z[:, 1:3]) + np.sum(np.exp(z[:, 5:7]))


def overlapping(z):
    """Pieces that overlap: their gradients add up."""
    return np.sum(np.sin(z[:, :4])) + np.sum(np.cos(z[:, 2:6]))


def rows(z):
    """Pieces along the first axis."""
    return np.sum(np.tanh(z[:2]) ** 2) + np.sum(z[3:] ** 3)


def _ops(fn, *args) -> list[str]:
    staged, _ = pb.jit(fn, backend="c").specialise(*args)
    main = concatenate_pieces(Module.of(staged.func)).main
    return [e.op.name for e in main.block.eqns]


@pytest.mark.parametrize("fn", [gates, gapped, overlapping, rows], ids=lambda f: f.__name__)
def test_gradients_of_pieces_match_central_differences(fn):
    z = RNG.standard_normal((3, 4 * H))
    c = RNG.standard_normal((3, H))
    args = (z, c) if fn is gates else (z,)
    grad = pb.jit(pb.grad(fn), backend="c")(*args)
    want = central_difference(lambda x: fn(x, *args[1:]), z)
    np.testing.assert_allclose(grad, want, rtol=1e-6, atol=1e-8)
    value = pb.jit(fn, backend="c")(*args)
    np.testing.assert_allclose(value, fn(*args), rtol=1e-13)


def test_side_by_side_pieces_become_one_concatenation():
    z = RNG.standard_normal((3, 4 * H))
    c = RNG.standard_normal((3, H))
    ops = _ops(pb.grad(gates), z, c)
    assert "pad" not in ops and ops.count("concatenate") == 1
    ops = _ops(pb.grad(gapped), z)
    assert "pad" not in ops and ops.count("concatenate") == 1


def test_overlapping_pieces_stay_a_sum_of_pads():
    z = RNG.standard_normal((3, 4 * H))
    ops = _ops(pb.grad(overlapping), z)
    assert ops.count("pad") == 2 and "concatenate" not in ops
