"""A float max/min over rows keeps its NaN flag in an integer as wide as the values
(``lower/reductions.py``), so GCC steps the row in one vector width: a byte flag beside
doubles took 64 lanes a step and left most of a 100-long row (the k-means cost's
``np.min(d2, axis=1)``) to a scalar loop.  NumPy's answers bit for bit, and a NaN
anywhere in a row, the vector steps or the tail, makes that row's answer NaN."""

from __future__ import annotations

import re

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c.build import compiler

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

FLAG = {np.float64: "int64_t", np.float32: "int32_t"}


def _native(fn, *args):
    jitted = pb.jit(fn, backend="c")
    staged, _ = jitted.specialise(*args)
    assert staged.runner is not None
    return jitted(*args), staged.runner.source


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("reduce", [np.min, np.max])
def test_rows_of_a_hundred_bit_for_bit(reduce, dtype):
    x = np.random.default_rng(3).standard_normal((37, 100)).astype(dtype)
    x[4, 7] = -0.0
    x[5, 98] = np.inf
    x[6, 99] = -np.inf
    got, source = _native(lambda x: reduce(x, axis=1), x)
    bits = np.uint64 if dtype == np.float64 else np.uint32
    np.testing.assert_array_equal(got.view(bits), reduce(x, axis=1).view(bits))
    assert re.search(rf"\b{FLAG[dtype]} a\d+n = 0;", source)


@pytest.mark.parametrize("dtype", [np.float64, np.float32])
@pytest.mark.parametrize("reduce", [np.min, np.max])
def test_a_nan_anywhere_in_a_row_is_its_answer(reduce, dtype):
    x = np.random.default_rng(4).random((100, 100)).astype(dtype)
    for row, col in enumerate(range(100)):  # row k has its NaN at column k
        x[row, col] = np.nan
    x[7, :] = np.arange(100)  # and one row none
    got, _ = _native(lambda x: np.sum(reduce(x, axis=1) * 2.0), x)
    assert np.isnan(got)
    rows, _ = _native(lambda x: reduce(x, axis=1), x)
    assert np.isnan(np.delete(rows, 7)).all()
    assert rows[7] == reduce(np.arange(100.0))


def test_a_whole_array_maximum_with_a_nan_in_its_tail():
    x = np.random.default_rng(6).random(1003)
    x[1001] = np.nan
    got, source = _native(lambda x: np.max(x), x)
    assert np.isnan(got)
    assert re.search(r"\bint64_t a\d+n = 0;", source)
