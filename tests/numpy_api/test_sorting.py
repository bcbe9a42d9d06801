"""np.sort, np.argsort, np.searchsorted and their methods against NumPy."""

from __future__ import annotations

import numpy as np
import pytest

from harness import agree, check, check_method, check_raises
from pullback.numpy_api import METHODS

DTYPES = [np.bool_, np.int32, np.int64, np.float32, np.float64]
SHAPES = [(), (0,), (1,), (9,), (3, 5), (4, 0), (2, 3, 4)]


def sample(shape, dt, seed=0):
    """Many ties; floats also get NaNs, infinities and both signed zeros."""
    rng = np.random.default_rng(seed)
    if dt == np.bool_:
        return np.asarray(rng.random(shape) < 0.5)
    if np.dtype(dt).kind == "i":
        return np.asarray(rng.integers(-3, 4, size=shape), dtype=dt)
    pool = np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, 1.25, -2.5, 3.0], dtype=dt)
    return np.asarray(rng.choice(pool, size=shape), dtype=dt)


@pytest.mark.parametrize("fn", [np.sort, np.argsort], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_sort_and_argsort(fn, dt, shape):
    """(NumPy's default kind orders ties of argsort arbitrarily; pullback's are stable.)"""
    x = sample(shape, dt)
    for axis in [None, *range(-len(shape) - 1, len(shape) + 1)]:
        agree(fn, x, axis=axis, kind="stable")
    agree(fn, x, kind="stable")


@pytest.mark.parametrize("kind", [None, "quicksort", "mergesort", "heapsort", "stable"])
def test_kind_is_accepted(kind):
    x = sample((4, 6), np.float64, seed=1)
    check(np.sort, x, kind=kind)
    check(np.sort, x, axis=0, kind=kind)
    check(np.argsort, x, axis=0, kind="stable" if kind is None else kind, stable=None)


def test_argsort_is_stable_like_numpy_stable():
    x = np.array([[3, 1, 3, 1, 2, 2, 1]], dtype=np.int32)
    check(np.argsort, x, kind="stable")
    check(np.argsort, x, stable=True)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_argsort_method(dt):
    x = sample((3, 5), dt, seed=2)
    check_method("argsort", x, kind="stable")
    check_method("argsort", x, 0, "stable")
    check_method("argsort", x, axis=None, stable=True)


def test_in_place_sort_method_is_not_mapped():
    assert "sort" not in METHODS


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("side", ["left", "right"])
@pytest.mark.parametrize("vshape", [(), (0,), (7,), (2, 3)], ids=str)
def test_searchsorted(dt, side, vshape):
    a = np.sort(sample((10,), dt, seed=3))
    v = sample(vshape, dt, seed=4)
    agree(np.searchsorted, a, v, side=side)
    agree(np.searchsorted, np.sort(sample((0,), dt)), v, side=side)
    check_method("searchsorted", a, v, side)


@pytest.mark.parametrize("v", [2, -10, 2.5, np.nan, True, [1.5, 0.0, 9.0]], ids=repr)
@pytest.mark.parametrize("dt", [np.int32, np.float32, np.float64],
                         ids=lambda d: np.dtype(d).name)
def test_searchsorted_mixed_types(v, dt):
    a = np.array([-1, 0, 0, 2, 2, 2, 5], dtype=dt)
    for side in ("left", "right"):
        check(np.searchsorted, a, v, side=side)
        check(np.searchsorted, a, v, side=side, dyn=(1,))


def test_searchsorted_nans_in_a_sort_last():
    a = np.array([-np.inf, 0.0, 1.0, np.inf, np.nan, np.nan])
    for side in ("left", "right"):
        check(np.searchsorted, a, np.array([np.nan, np.inf, 0.5, -np.inf]), side=side)


def test_searchsorted_errors():
    a = np.arange(6.0)
    check_raises(ValueError, np.searchsorted, a.reshape(2, 3), 1.0)
    check_raises(ValueError, np.searchsorted, a, 1.0, side="middle")
