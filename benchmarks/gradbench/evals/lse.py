"""GradBench ``lse``: LogSumExp with the max trick, and its gradient."""

from __future__ import annotations

import numpy as np

import pullback as pb

from .._entry import Entry


def logsumexp(x: np.ndarray) -> np.float64:
    """log sum exp(x), computed as a + log sum exp(x - a) with a = max x."""
    a = np.max(x)
    return a + np.log(np.sum(np.exp(x - a)))


_primal = pb.jit(logsumexp)
_gradient = pb.jit(pb.grad(logsumexp))


def _prepare(raw: dict) -> np.ndarray:
    return np.asarray(raw["x"], dtype=np.float64)


FUNCTIONS = {
    "primal": Entry(_prepare, _primal, float),
    "gradient": Entry(_prepare, _gradient, lambda g: g.tolist()),
}
