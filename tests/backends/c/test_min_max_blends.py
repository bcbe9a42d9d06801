"""Element-wise minimum and maximum are branch-free blends (``runtime.h``'s ``pb_fmin``
and friends): NumPy's answers bit for bit, the first NaN and signed zeros included, also
where columns of a short last axis make a chain of them feeding a reduction (the k-means
cost's ``np.min(d2, axis=1)``)."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c.build import compiler

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

LEFT = [np.nan, 1.0, -0.0, 0.0, 2.0, np.inf, -np.inf, np.nan, 3.0, -np.nan]
RIGHT = [1.0, np.nan, 0.0, -0.0, np.nan, 1.0, 5.0, -np.nan, -3.0, 2.0]


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("fn", [np.minimum, np.maximum])
def test_minimum_and_maximum_bit_for_bit(fn, dtype):
    a, b = np.array(LEFT * 7, dtype=dtype), np.array(RIGHT * 7, dtype=dtype)
    got = pb.jit(lambda x, y: fn(x, y), backend="c")(a, b)
    bits = np.uint64 if dtype == np.float64 else np.uint32
    np.testing.assert_array_equal(got.view(bits), fn(a, b).view(bits))


@pytest.mark.parametrize("reduce", [np.min, np.max])
def test_minima_of_short_rows_summed(reduce):
    x = np.random.default_rng(5).random((1000, 10))
    fn = pb.jit(lambda x: np.sum(reduce(x, axis=1)), backend="c")
    assert fn(x) == pytest.approx(np.sum(reduce(x, axis=1)), rel=1e-13)
    x[500, 3] = np.nan
    assert np.isnan(fn(x))
