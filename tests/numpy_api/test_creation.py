"""Array creation against NumPy: constants of static shapes, ranges, grids, conversions
(of run-time values too), NumPy's dtypes and errors."""

from __future__ import annotations

import numpy as np
import pytest

from harness import check, check_raises, run_mapping, stage
from pullback.backends import interp
from pullback.errors import ConcretizationError
from pullback.ir.builder import Builder
from pullback.ir.types import type_of_value
from pullback.numpy_api import CALLABLES

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

DTYPES = [np.bool_, np.int32, np.int64, np.float32, np.float64]
SHAPES = [(), (0,), 3, (2, 3), [1, 0, 2]]


def static(fn, *args, **kwargs):
    """Compare with every argument static (the harness makes floats run-time values),
    exceptions included."""
    want, mapping = (lambda: fn(*args, **kwargs)), (lambda: CALLABLES[fn](*args, **kwargs))
    try:
        want()
    except (ValueError, TypeError, OverflowError, ZeroDivisionError) as e:
        check_raises(type(e), want, mapping=mapping)
        return
    run_mapping(want, mapping)


def run(fn, *args, **kwargs):
    func, leaves, flat, _ = stage(CALLABLES[fn], args, kwargs)
    return interp.run(func, *leaves), flat


def refused_dynamic(call):
    """``call(n)`` with ``n`` a run-time int, where NumPy needs a compile-time one."""
    with Builder() as b, pytest.raises(ConcretizationError):
        call(b.param(type_of_value(3)))


@pytest.mark.parametrize("fn", [np.zeros, np.ones])
@pytest.mark.parametrize("dt", DTYPES + [None, float, int, bool])
def test_zeros_ones(fn, dt):
    for shape in SHAPES:
        check(fn, shape, dtype=dt)
    check(fn, 4)


@pytest.mark.parametrize("dt", DTYPES)
def test_empty_gives_zeros_of_numpy_type(dt):
    for shape in SHAPES:
        want = np.empty(shape, dt)
        (got,), _ = run(np.empty, shape, dtype=dt)
        assert got.dtype == want.dtype and got.shape == want.shape
        assert not got.any()


def test_shape_errors():
    check_raises(ValueError, np.zeros, (2, -1))
    check_raises(TypeError, np.zeros, (2, 1.5), mapping=lambda *a: CALLABLES[np.zeros](
        (2, 1.5)))
    check_raises(TypeError, np.ones, "3")
    refused_dynamic(lambda n: CALLABLES[np.zeros](n))
    refused_dynamic(lambda n: CALLABLES[np.ones]((2, n)))


@pytest.mark.parametrize("dt", DTYPES + [None])
def test_full(dt):
    for fill in (2, -1.5, True, np.float32(2.25), np.array([1.5, -2.0, 3.0])):
        check(np.full, (2, 3), fill, dtype=dt)
    check(np.full, (), 7.5, dtype=dt)
    check(np.full, (4, 0), 7.5, dtype=dt)


def test_full_with_run_time_values():
    check(np.full, 3, 2.5)  # a run-time Python float: float64
    check(np.full, (2, 2), 3, dyn=(1,))
    check(np.full, (2, 3), np.array([[1], [2]], np.int32), dtype=np.float32)
    check_raises(ValueError, np.full, (2, 3), np.array([1.0, 2.0]))


@pytest.mark.parametrize("fn", [np.zeros_like, np.ones_like])
@pytest.mark.parametrize("dt", DTYPES)
def test_like(fn, dt):
    x = np.ones((2, 3), dt)
    check(fn, x)
    check(fn, x, dtype=np.float32)
    check(fn, x, shape=(4,))
    check(fn, x, shape=3, dtype=bool)
    check(fn, 2.5)
    check(fn, np.int32(3))


@pytest.mark.parametrize("dt", DTYPES)
def test_full_like_and_empty_like(dt):
    x = np.ones((2, 3), dt)
    for fill in (7, -2.5, True, np.float64(np.nan), np.array([1, 2, 3])):
        check(np.full_like, x, fill)
    check(np.full_like, x, 2.7, dtype=np.int64, shape=(3, 3))
    (got,), _ = run(np.empty_like, x, shape=(4, 1))
    assert got.shape == (4, 1) and got.dtype == x.dtype


@pytest.mark.parametrize("dt", DTYPES + [None])
def test_eye_identity_tri(dt):
    for n, m, k in [(3, None, 0), (2, 4, 1), (4, 2, -1), (3, 3, 5), (3, 3, -5), (0, 2, 0),
                    (1, 1, 0)]:
        check(np.eye, n, m, k, dtype=dt) if dt is not None else check(np.eye, n, m, k)
        check(np.tri, n, m, k, dtype=dt) if dt is not None else check(np.tri, n, m, k)
    check(np.identity, 3, dtype=dt)
    check(np.identity, 0)


def test_eye_errors():
    check_raises(ValueError, np.eye, -1)
    refused_dynamic(lambda n: CALLABLES[np.eye](3, 3, n))
    refused_dynamic(lambda n: CALLABLES[np.tri](n))


ARANGES = [
    (5,), (0,), (-3,), (2, 9), (9, 2), (9, 2, -2), (0, 10, 3), (-1, -10, -4), (0.5, 5),
    (0, 1, 0.1), (1, 2, 0.3), (0.1, 1.0, 0.1), (-2.5, 2.5, 0.25), (1e10, 1e10 + 5),
    (np.int32(5),), (np.float32(0.5), 3, np.float32(0.5)), (True,), (0, 5, 0.5),
]


@pytest.mark.parametrize("args", ARANGES, ids=str)
def test_arange(args):
    static(np.arange, *args)
    for dt in (np.int32, np.int64, np.float32, np.float64):
        static(np.arange, *args, dtype=dt)
    func, _, flat, _ = stage(lambda: CALLABLES[np.arange](*args), (), {})
    np.testing.assert_array_equal(interp.run(func)[0], np.arange(*args))  # exactly NumPy's


def test_arange_keywords_and_booleans():
    static(np.arange, stop=4)
    static(np.arange, 1, stop=4, step=2)
    static(np.arange, 2, dtype=bool)
    check_raises(TypeError, lambda: np.arange(3, dtype=bool),
                 mapping=lambda: CALLABLES[np.arange](3, dtype=bool))


def test_arange_errors():
    check_raises(ZeroDivisionError, lambda: np.arange(0, 5, 0),
                 mapping=lambda: CALLABLES[np.arange](0, 5, 0))
    check_raises(ValueError, lambda: np.arange(np.nan), mapping=lambda: CALLABLES[np.arange](
        np.nan))
    check_raises(ValueError, lambda: np.arange(np.inf), mapping=lambda: CALLABLES[np.arange](
        np.inf))
    refused_dynamic(lambda n: CALLABLES[np.arange](n))
    refused_dynamic(lambda n: CALLABLES[np.arange](0, 10, n))


@pytest.mark.parametrize("num", [0, 1, 2, 5, 50])
@pytest.mark.parametrize("endpoint", [True, False])
def test_linspace(num, endpoint):
    check(np.linspace, 0.0, 1.0, num, endpoint)
    check(np.linspace, -2, 3, num, endpoint, dyn=(0, 1))
    check(np.linspace, np.float32(1.5), np.float32(-2.5), num, endpoint)
    check(np.linspace, 0, 10, num, endpoint, dtype=np.int32)
    check(np.linspace, np.array([0.0, 1.0]), np.array([[2.0], [5.0], [-1.0]]), num,
          endpoint, axis=-1)
    check(np.linspace, np.array([0.0, 1.0], np.float32), 4, num, endpoint, axis=1)


def test_linspace_of_lists():
    check(np.linspace, [0.0, 1.0], 2.0, 3)
    check(np.linspace, [[0, 1]], [4, 5], 4, axis=2)


def test_linspace_retstep():
    check(np.linspace, 1.0, 2.0, 5, retstep=True)
    check(np.linspace, np.float32(1.0), 2, 5, retstep=True)
    (y,), flat = run(np.linspace, 1.0, 2.0, 1, retstep=True)
    y_want, step_want = np.linspace(1.0, 2.0, 1, retstep=True)
    np.testing.assert_array_equal(y, y_want)
    assert np.isnan(flat[1]) and np.isnan(step_want)


def test_linspace_denormal_step():
    check(np.linspace, 0.0, 5e-324, 3)
    check(np.linspace, np.array([0.0, 0.0]), np.array([5e-324, 1.0]), 4)


def test_linspace_errors():
    check_raises(ValueError, np.linspace, 0.0, 1.0, -1)
    refused_dynamic(lambda n: CALLABLES[np.linspace](0.0, 1.0, n))
    check_raises(np.exceptions.AxisError, np.linspace, 0.0, 1.0, 3, axis=1)


LEAVES = [1, 2.5, True, np.float32(1.5), np.int32(-2), np.array(3.0, np.float32)]


def test_array_of_nested_lists():
    for a in LEAVES:
        for b in LEAVES:
            check(np.array, [a, b])
            check(np.asarray, [[a, b], [b, a]])
    check(np.array, [np.arange(3.0), np.ones(3)])
    check(np.array, [[np.ones((2,), np.float32)], [np.zeros((2,), np.float32)]])
    check(np.array, [2.5, 1], dtype=np.int32)
    check(np.array, [])
    check(np.array, [[], []])


def test_array_of_values():
    x = np.arange(6.0).reshape(2, 3)
    for dt in DTYPES + [None]:
        check(np.array, x, dtype=dt)
        check(np.asarray, x, dtype=dt)
    check(np.asarray, 2.5)
    check(np.asarray, 3, dyn=(0,))
    check(np.array, np.float32(2.5), ndmin=2)
    check(np.asarray, x, copy=False)
    check(np.copy, x)
    check(np.copy, 2.5)


def test_array_errors():
    x = np.arange(3.0)
    check_raises(ValueError, np.asarray, x, dtype=np.float32, copy=False)
    check_raises(ValueError, np.array, [x, np.ones(2)])
    check_raises(ValueError, np.array, [[1.0, 2.0], [3.0]])


@pytest.mark.parametrize("indexing", ["xy", "ij"])
@pytest.mark.parametrize("sparse", [False, True])
def test_meshgrid(indexing, sparse):
    x, y, z = np.arange(3.0), np.array([1, 5], np.int32), np.array([[True], [False]])
    for arrays in ([], [x], [x, y], [y, x, z], [x, 2.5]):
        check(np.meshgrid, *arrays, indexing=indexing, sparse=sparse)


def test_meshgrid_bad_indexing():
    check_raises(ValueError, np.meshgrid, np.arange(2.0), indexing="yx")


@pytest.mark.parametrize("to", DTYPES)
def test_scalar_types_convert(to):
    for value in (np.array([1.5, -2.0, 0.0]), np.arange(4), np.array([True, False]),
                  np.float32(-3.75), 2.5, -2.5, 0.0):
        check(to, value)
    check(to, 7, dyn=(0,))
    check(to, True, dyn=(0,))
    check(to, [1, 2.5])
    check(to)


def test_scalar_types_of_python_numbers_raise_like_int():
    check_raises(ValueError, np.int32, np.nan)
    check_raises(OverflowError, np.int64, np.inf)
    check_raises(OverflowError, np.int32, 3e9)
    with pytest.raises(OverflowError):  # NumPy: "Python integer ... out of bounds for int32"
        func, leaves, _, _ = stage(CALLABLES[np.int32], (3_000_000_000,), {}, dyn=(0,))
        interp.run(func, *leaves)
    check(np.int32, -2.9)
