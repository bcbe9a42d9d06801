"""What fusion's cost model stores rather than computes again in each loop that reads it
(``plan/fusion.py``): a float64 math function costs more than storing its result."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c.build import compiler

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")


def logsumexp(x):
    a = np.max(x)
    return a + np.log(np.sum(np.exp(x - a)))


def test_float64_exp_is_stored_where_made_and_read_after():
    # the gradient reads exp(x - a) in two loops after the one summing it: float64 exp
    # costs more than storing it once and loading it twice
    x = np.random.default_rng(3).standard_normal(5000)
    grad = pb.jit(pb.grad(logsumexp), backend="c")
    loops = grad.lower(x).loops
    assert loops.count("exp(") == 1
    want = pb.jit(pb.grad(logsumexp), backend="interp")(x)
    np.testing.assert_allclose(grad(x), want, rtol=1e-13, atol=1e-16)
