"""Loop fusion and vectorisation in the generated C keep NumPy's answers: runs of
pointwise equations with a closing reduction, values a run must store for later, NaN
rules of max/min reductions, long loops that run on threads, BLAS products."""

from __future__ import annotations

import re

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c.build.threads import parallel_min


def _native(fn, *args):
    jitted = pb.jit(fn, backend="c")
    staged, _ = jitted.specialise(*args)
    assert staged.runner is not None
    return jitted(*args), staged.runner.source


def test_a_run_with_a_closing_sum_is_one_loop():
    def f(x):
        return np.sum(np.tanh(x) * (1 / (1 + np.exp(-x))) + 0.5 * x * x)

    x = np.linspace(-3, 3, 1001)
    got, source = _native(f, x)
    assert got == pytest.approx(f(x), rel=1e-12)
    assert source.count("for (int64_t i = 0;") == 1


@pytest.mark.parametrize("reduce", [np.max, np.min])
def test_max_and_min_of_a_run_propagate_nan(reduce):
    def f(x):
        return reduce(np.sqrt(x) * 2.0 + x)

    for x in (np.linspace(0, 4, 50), np.array([1.0, -1.0, 2.0])):
        got, _ = _native(f, x)
        with np.errstate(invalid="ignore"):
            np.testing.assert_equal(got, f(x))


def test_values_a_run_stores_for_later_are_right():
    def f(x):
        a = np.exp(x) * 2.0
        b = a + np.sin(x)
        return b @ a, a[::2]

    x = np.linspace(-1, 1, 64)
    (dot, every_other), _ = _native(f, x)
    want = f(x)
    assert dot == pytest.approx(want[0], rel=1e-12)
    np.testing.assert_allclose(every_other, want[1], rtol=1e-15)


def test_long_loops_run_on_threads_and_agree():
    def f(x):
        return np.sum(np.log1p(x * x)), np.cos(x) * x

    x = np.linspace(-2, 2, parallel_min() * 2, dtype=np.float32)
    (total, y), source = _native(f, x)
    assert "#pragma omp parallel for" in source
    assert total == pytest.approx(f(x)[0], rel=1e-5)
    np.testing.assert_allclose(y, f(x)[1], rtol=1e-5, atol=1e-6)


def test_matrix_products_call_blas():
    def f(a, b):
        return (a @ b).T @ a

    rng = np.random.default_rng(0)
    a, b = rng.standard_normal((200, 150)), rng.standard_normal((150, 100))  # past inline
    got, source = _native(f, a, b)
    assert "scipy_cblas_dgemm" in source
    want = f(a, b)  # sums of 150 and 200 terms: their order is the kernel's (packed or BLAS)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-13 * np.abs(want).max())


def test_a_bool_made_float_is_a_choice_of_one_or_zero():
    """The gradient of a max counts the places that hold it: a bool converted to a float,
    written as a choice (gcc 12 leaves a loop with a ``uint8_t``-to-``double`` cast
    unvectorised, and calls the scalar ``exp`` of the same loop)."""
    def lse(x):
        a = np.max(x)
        return a + np.log(np.sum(np.exp(x - a)))

    x = np.random.default_rng(0).standard_normal(1000)
    x[7] = x[300] = x.max() + 1  # two places hold the max
    got, source = _native(pb.grad(lse), x)
    e = np.exp(x - x.max())
    np.testing.assert_allclose(got, e / e.sum(), rtol=1e-12, atol=1e-15)
    assert "? (0x1.0000000000000p+0) : (0x0.0p+0))" in source
    assert "(double)(t" not in source.replace(" ", "")


def test_locals_are_named_apart_from_parameters_and_results():
    """Loop indices and other locals never take the names of the entry's parameters
    (``p<k>``), results (``r<k>``) or donated buffers (``q<k>``), which they would shadow:
    a leading-axes sum's row index had been ``r3`` beside a result ``r3``."""
    def f(x):
        s = np.sum(x, axis=0)
        return s, s * 2, s * 3, s * 4, s * 5, s * 6, x * 2, np.tanh(x) + 1

    x = np.random.default_rng(0).standard_normal((40, 64))
    got, source = _native(f, x)
    for g, w in zip(got, f(x), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12)
    assert not re.search(r"\b(?:int64_t|void \*|double \*|double) [pqr]\d+ = ", source)
    assert not re.search(r"for \(int64_t [pqr]\d+ ", source)
