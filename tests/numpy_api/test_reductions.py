"""NumPy reductions, cumulative ops, differences and builtins sum/min/max, staged and run
against NumPy itself: values, dtypes, weak-ness, and the exceptions NumPy raises."""

from __future__ import annotations

import builtins

import numpy as np
import pytest

from harness import agree, check, check_method, check_raises, stage
from pullback.errors import UnsupportedError
from pullback.numpy_api import CALLABLES, METHODS

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

DTYPES = [np.bool_, np.int32, np.int64, np.float32, np.float64]
SHAPES = [(), (0,), (5,), (3, 4), (4, 0), (2, 3, 4)]


def sample(shape, dt, seed=0, nans=False):
    """Small values with ties and negatives; floats get fractions and optionally NaNs."""
    rng = np.random.default_rng(seed)
    if dt == np.bool_:
        return np.asarray(rng.random(shape) < 0.6)
    x = rng.integers(-3, 4, size=shape).astype(dt)
    if np.dtype(dt).kind == "f":
        x = x + rng.random(shape).astype(dt)
        if nans and x.size >= 3:
            x.flat[[0, x.size // 2]] = np.nan
    return np.asarray(x, dtype=dt)


def axis_choices(ndim):
    """None, every int axis (negative ones too), one past the end, and tuples."""
    out = [None, *range(-ndim, ndim), ndim]
    if ndim >= 2:
        out += [(0, -1), (-1, 0), tuple(range(ndim)), (0, 0)]
    if ndim == 0:
        out += [(), (0,)]
    return out


AXIS_REDUCTIONS = [np.sum, np.prod, np.mean, np.max, np.amax, np.min, np.amin, np.all, np.any,
                   np.std, np.var, np.ptp, np.count_nonzero, np.median, np.average, np.nansum,
                   np.nanprod, np.nanmean, np.nanmax, np.nanmin, np.nanvar, np.nanstd]
NAN_AWARE = {np.nansum, np.nanprod, np.nanmean, np.nanmax, np.nanmin, np.nanvar, np.nanstd,
             np.median, np.max, np.min}


@pytest.mark.parametrize("fn", AXIS_REDUCTIONS, ids=lambda f: f.__name__)
@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_axis_reductions(fn, dt, shape):
    x = sample(shape, dt, nans=fn in NAN_AWARE)
    for axis in axis_choices(len(shape)):
        agree(fn, x, axis=axis)
        agree(fn, x, axis=axis, keepdims=True)


@pytest.mark.parametrize("fn", [np.sum, np.mean, np.max, np.min, np.all, np.any, np.prod,
                                np.std, np.median, np.nansum, np.argmax, np.cumsum],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("value", [2.5, 3, True, np.float32(1.5), np.int32(-2)], ids=repr)
def test_scalars_give_numpy_scalars(fn, value):
    check(fn, value)


@pytest.mark.parametrize("fn", [np.sum, np.prod, np.mean, np.cumsum, np.cumprod, np.nansum],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("to", [np.bool_, np.int32, np.int64, np.float32, np.float64],
                         ids=lambda d: np.dtype(d).name)
def test_dtype_argument(fn, dt, to):
    x = sample((3, 4), dt, seed=1)
    agree(fn, x, axis=0, dtype=to)
    agree(fn, x, dtype=to)


@pytest.mark.parametrize("fn", [np.std, np.var, np.nanstd, np.nanvar], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_ddof_correction_and_dtype(fn, dt):
    x = sample((3, 4), dt, seed=2, nans=True)
    for ddof in (0, 1, 2.5, 4):
        agree(fn, x, axis=0, ddof=ddof)
    agree(fn, x, axis=1, correction=1)
    agree(fn, x, ddof=1, correction=1)
    agree(fn, x, axis=1, dtype=np.float32)


@pytest.mark.parametrize("fn", [np.argmax, np.argmin, np.nanargmax, np.nanargmin],
                         ids=lambda f: f.__name__)
@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_arg_reductions(fn, dt, shape):
    x = sample(shape, dt, seed=3)
    for axis in [None, *range(-len(shape), len(shape) + 1)]:
        agree(fn, x, axis=axis)
        agree(fn, x, axis=axis, keepdims=True)


@pytest.mark.parametrize("fn", [np.argmax, np.argmin, np.nanargmax, np.nanargmin, np.max,
                                np.nanmax, np.nanmin, np.median], ids=lambda f: f.__name__)
def test_nan_placement(fn):
    x = np.array([[1.0, np.nan, 3.0, 3.0], [np.nan] * 4, [-np.inf, 2.0, np.nan, -1.0]])
    agree(fn, x[[0, 2]], axis=1)
    agree(fn, x, axis=0)
    agree(fn, x, axis=1)  # the all-NaN row: NaN for nanmax, an error for nanargmax


@pytest.mark.parametrize("fn", [np.cumsum, np.cumprod, np.nancumsum, np.nancumprod,
                                np.cumulative_sum, np.cumulative_prod], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_cumulative(fn, dt, shape):
    x = sample(shape, dt, seed=4, nans=True)
    for axis in [None, *range(-len(shape), len(shape) + 1)]:
        agree(fn, x, axis=axis)


@pytest.mark.parametrize("fn", [np.cumulative_sum, np.cumulative_prod], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_cumulative_include_initial(fn, dt):
    for shape in [(), (0,), (5,), (3, 4)]:
        x = sample(shape, dt, seed=4)
        for axis in [None, 0, -1]:
            agree(fn, x, axis=axis, include_initial=True)
            agree(fn, x, axis=axis, include_initial=True, dtype=np.bool_)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(), (0,), (1,), (6,), (3, 4), (2, 0, 3)], ids=str)
def test_diff(dt, shape):
    x = sample(shape, dt, seed=5)
    for n in (0, 1, 2, 7, -1):
        for axis in range(-len(shape), len(shape) + 1):
            agree(np.diff, x, n=n, axis=axis)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_diff_prepend_append(dt):
    x = sample((3, 4), dt, seed=6)
    agree(np.diff, x, prepend=0)
    agree(np.diff, x, axis=0, append=1.5)
    agree(np.diff, x, axis=0, prepend=np.zeros((2, 4), np.float32), append=x[:1])
    agree(np.diff, x, prepend=np.zeros((2, 4), np.int32))
    agree(np.diff, x, prepend=np.zeros((3, 1), dt), append=[[1], [2], [3]], n=2)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(), (0,), (1,), (5,), (2, 3)], ids=str)
def test_ediff1d(dt, shape):
    x = sample(shape, dt, seed=7)
    agree(np.ediff1d, x)
    agree(np.ediff1d, x, to_begin=5)
    agree(np.ediff1d, x, to_end=[1, 2], to_begin=np.int32(-1))
    agree(np.ediff1d, x, to_end=2.5)


@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_average_weights(dt):
    x = sample((2, 3, 4), dt, seed=8)
    agree(np.average, x, weights=np.arange(24.0).reshape(2, 3, 4))
    agree(np.average, x, axis=2, weights=np.arange(1, 5, dtype=np.int32))
    agree(np.average, x, axis=(2, 0), weights=np.ones((4, 2), np.float32), keepdims=True)
    agree(np.average, x, axis=(0, 2), weights=np.ones((2, 4), np.float32))
    agree(np.average, x, axis=-2, weights=[1.0, 2.0, 3.0])
    agree(np.average, x, weights=[1.0, 2.0, 3.0])
    agree(np.average, x, axis=1, weights=[1.0, 2.0])
    agree(np.average, x, axis=1, weights=np.array([1.0, -1.0, 0.0]))


def test_average_zero_weight_sum_is_a_run_time_error():
    x = np.arange(6.0).reshape(2, 3)
    check_raises(ZeroDivisionError, np.average, x, axis=1, weights=np.array([1.0, 2.0, -3.0]))


METHOD_NAMES = ["sum", "prod", "mean", "max", "min", "all", "any", "std", "var", "argmax",
                "argmin", "cumsum", "cumprod"]


@pytest.mark.parametrize("name", METHOD_NAMES)
@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
def test_methods(name, dt):
    x = sample((3, 4), dt, seed=9)
    check_method(name, x)
    check_method(name, x, axis=-1)
    check_method(name, x, 0)


def test_methods_take_keepdims():
    x = sample((3, 4), np.float32, seed=10)
    for name in ["sum", "prod", "mean", "max", "min", "all", "any", "std", "var", "argmax"]:
        check_method(name, x, axis=1, keepdims=True)
    check_method("var", x, axis=1, ddof=1)
    check_method("sum", x, axis=(0, 1), dtype=np.float64)


def test_ndarray_has_no_ptp_method():
    assert not hasattr(np.ndarray, "ptp") and "ptp" not in METHODS


X4 = np.arange(4.0)


@pytest.mark.parametrize("fn,args,kwargs", [
    (np.sum, (X4,), {"out": np.zeros(())}),
    (np.nansum, (X4,), {"initial": 1.0}),
    (np.nanmax, (X4,), {"where": X4 > 0, "initial": 0.0}),
    (np.var, (X4,), {"where": X4 > 0}),
    (np.var, (X4,), {"mean": np.zeros(())}),
    (np.average, (X4,), {"returned": True}),
    (np.sort, (X4,), {"order": "f"}),
    (builtins.max, (X4[0], X4[1]), {"key": abs}),
], ids=lambda v: getattr(v, "__name__", ""))
def test_unstaged_arguments_are_refused(fn, args, kwargs):
    if fn is not np.sort:
        fn(*args, **kwargs)  # NumPy accepts it
    with pytest.raises(UnsupportedError, match="not supported"):
        stage(CALLABLES[fn], args, kwargs)


# -- builtins -------------------------------------------------------------------------

@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(), (0,), (1,), (6,), (3, 4), (0, 2)], ids=str)
def test_builtin_sum(dt, shape):
    x = sample(shape, dt, seed=11)
    agree(builtins.sum, x)
    agree(builtins.sum, x, 2.5)
    agree(builtins.sum, x, start=np.float32(1))


def test_builtin_sum_of_sequences():
    check(builtins.sum, [np.float32(1.5), 2.0, np.arange(3.0)])
    check(builtins.sum, (1.0, 2.0), 3.0, dyn=(0, 1))
    check(builtins.sum, (True, True), dyn=(0,))


@pytest.mark.parametrize("fn", [builtins.max, builtins.min], ids=lambda f: f.__name__)
@pytest.mark.parametrize("dt", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("shape", [(), (0,), (1,), (7,), (3, 1), (1, 4), (3, 4), (2, 0)],
                         ids=str)
def test_builtin_extreme_of_array(fn, dt, shape):
    x = sample(shape, dt, seed=12)
    agree(fn, x)
    agree(fn, x, default=np.zeros(shape[1:], dt))


@pytest.mark.parametrize("fn", [builtins.max, builtins.min], ids=lambda f: f.__name__)
@pytest.mark.parametrize("x", [
    [np.nan, 1.0, 3.0], [1.0, np.nan, 3.0, np.nan], [3.0, 3.0, np.nan], [-np.inf, np.nan],
    [0.0, -0.0, 0.0], [-0.0, 0.0], [np.nan, np.nan],
], ids=str)
def test_builtin_extreme_follows_python_comparisons(fn, x):
    for dt in (np.float32, np.float64):
        check(fn, np.array(x, dt))
        check(fn, *map(dt, x))


@pytest.mark.parametrize("fn", [builtins.max, builtins.min], ids=lambda f: f.__name__)
def test_builtin_extreme_of_scalars(fn):
    check(fn, 1.0, 3.0, 2.0, dyn=(0, 1, 2))
    check(fn, [1, 5, 5, -2], dyn=(0,))
    check(fn, np.int32(4), np.int32(-1))
    check(fn, np.float32(2.0), np.float32(0.5), np.float32(-3.0))
    check(fn, (np.float64(1.0), np.float64(np.nan)))
    check(fn, [], default=1.5)
    check_raises(ValueError, fn, [])
    check_raises(ValueError, fn, np.ones((3, 2)))
    check_raises(TypeError, fn, np.float64(1.0))
