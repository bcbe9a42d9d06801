"""Faults in compiled code raise what plain Python raises, with its message, and the
process goes on: out-of-bounds indices, failed asserts, division by zero, a zero range
step, popping more than was pushed."""

from __future__ import annotations

import math

import numpy as np
import pytest

import pullback as pb


def _native(fn):
    jitted = pb.jit(fn, backend="c")

    def run(*args):
        staged, _ = jitted.specialise(*args)
        assert staged.runner is not None, "expected native code"
        return jitted(*args)

    return run


def index_at(x, i):
    return x[i] * 2.0


def checked_mean(x):
    assert np.all(x > 0), "values must be positive"
    return np.mean(x)


def python_division(a, b):
    return a / b


def stepped_sum(x, step):
    s = 0.0
    for i in range(0, 10, step):
        s = s + x[i % x.shape[0]]
    return s


def gathered(x, idx):
    return np.sum(x[idx])


@pytest.mark.parametrize(("fn", "args", "exc", "match"), [
    (index_at, (np.arange(4.0), np.int64(7)), IndexError,
     "index 7 is out of bounds for axis 0 with size 4"),
    (checked_mean, (np.array([1.0, -2.0]),), AssertionError, "values must be positive"),
    (python_division, (1.0, 0.0), ZeroDivisionError, "float division by zero"),
    (stepped_sum, (np.arange(3.0), np.int64(0)), ValueError, "must not be zero"),
    (gathered, (np.arange(5.0), np.array([0, 9])), IndexError, "out of bounds"),
])
def test_faults_raise_the_python_exception(fn, args, exc, match):
    with pytest.raises(exc, match=match):
        fn(*args)  # plain Python
    with pytest.raises(exc, match=match):
        _native(fn)(*args)


def test_a_fault_leaves_the_function_usable():
    f = _native(index_at)
    with pytest.raises(IndexError):
        f(np.arange(4.0), np.int64(-9))
    assert f(np.arange(4.0), np.int64(-1)) == 6.0


def test_the_generated_source_is_readable():
    def f(x):
        return np.sum(np.tanh(x) * x)

    staged, _ = pb.jit(f, backend="c").specialise(np.ones(8))
    source = staged.runner.source
    assert "tanh(" in source and "#pragma omp simd" in source
    assert "static int pbf_0(pb_ctx *ctx" in source


MATH_ERRORS = [(math.sqrt, -1.0, ValueError, "math domain error"),
               (math.log, 0.0, ValueError, "math domain error"),
               (math.sin, math.inf, ValueError, "math domain error"),
               (math.exp, 1000.0, OverflowError, "math range error"),
               (math.cosh, -800.0, OverflowError, "math range error")]


@pytest.mark.parametrize(("fn", "x", "exc", "match"), MATH_ERRORS)
def test_math_errors_in_a_loop(fn, x, exc, match):
    """A ``math`` function's result is looked at closer only when it is not finite: the
    errors are still Python's, and results that are infinite or NaN for a reason (an
    infinite or NaN argument) pass."""
    def f(x, n):
        s = 0.0
        for i in range(n):
            s += fn(x + 0.0 * i)
        return s

    with pytest.raises(exc, match=match):
        f(x, 3)
    g = _native(f)
    with pytest.raises(exc, match=match):
        g(x, 3)
    for ok in (0.5, math.nan, math.inf):
        try:
            want = f(ok, 3)
        except ValueError:
            continue
        np.testing.assert_equal(g(ok, 3), want)
    assert g(x, 0) == 0.0
