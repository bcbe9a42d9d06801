"""GradBench ``hello``: square and its derivative (the protocol smoke test)."""

from __future__ import annotations

import numpy as np

import pullback as pb

from .._entry import Entry


def square(x: np.float64) -> np.float64:
    """f(x) = x**2."""
    return x * x


_square = pb.jit(square)
_double = pb.jit(pb.grad(square))

FUNCTIONS = {
    "square": Entry(np.float64, _square, float, runs=False),
    "double": Entry(np.float64, _double, float, runs=False),
}
