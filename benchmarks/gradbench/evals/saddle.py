"""GradBench ``saddle``: min over x of max over y of f(x, y) by nested gradient descent.

f = (x_1^2 + y_1^2) - (x_2^2 + y_2^2) (the README's function) of the outer point
(x_1, y_1) and the inner point (x_2, y_2). The outer argmin differentiates a function
that runs the inner argmax (its own gradient descent), so its gradient is nested AD;
``ff``, ``fr``, ``rf`` and ``rr`` pick forward or reverse mode for the outer and the
inner gradient.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

import pullback as pb

from .._entry import Entry
from ._solver import argmax, argmin, grad_forward, grad_reverse


def saddle_fn(p2: np.ndarray, p1: np.ndarray) -> np.float64:
    """f(x1, y1, x2, y2) with (x1, y1) = p1 and (x2, y2) = p2, the inner point first."""
    return (p1[0] * p1[0] + p1[1] * p1[1]) - (p2[0] * p2[0] + p2[1] * p2[1])


def make_saddle(outer: Callable, inner: Callable, backend: str | None = None) -> Callable:
    """The eval's function for one (outer, inner) choice of AD modes, compiled."""
    def inner_max(p1: np.ndarray, start: np.ndarray) -> np.float64:
        return saddle_fn(argmax(saddle_fn, inner, start, p1), p1)

    def solve(start: np.ndarray) -> np.ndarray:
        r1 = argmin(inner_max, outer, start, start)
        r2 = argmax(saddle_fn, outer, start, r1)
        return np.concatenate((r1, r2))
    return pb.jit(solve, backend=backend)


_MODES = {"f": grad_forward, "r": grad_reverse}


def _prepare(raw: dict) -> np.ndarray:
    return np.asarray(raw["start"], dtype=np.float64)


FUNCTIONS = {
    a + b: Entry(_prepare, make_saddle(_MODES[a], _MODES[b]), lambda r: r.tolist())
    for a in "fr" for b in "fr"
}
