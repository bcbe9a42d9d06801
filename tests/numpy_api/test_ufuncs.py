"""NumPy ufuncs, ``math`` functions, numeric builtins and the ufunc-like methods against
NumPy / math / Python: values (NaN, infinities, signed zeros), NumPy 2 result dtypes,
weak Python scalars, broadcasting, and the exceptions for what NumPy or Python refuse."""

from __future__ import annotations

import builtins
import math

import numpy as np
import pytest

from harness import check, check_method, check_raises, stage
from pullback.backends import interp
from pullback.errors import ConcretizationError, UnsupportedError
from pullback.ir.builder import Builder
from pullback.ir.types import type_of_value
from pullback.numpy_api import CALLABLES, METHODS

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

DTYPES = [np.bool_, np.int32, np.int64, np.float32, np.float64]
SHAPES = [(), (0,), (5,), (2, 3)]
BASE = {
    "b": [True, False, False, True, True, False],
    "i": [-3, -1, 0, 1, 2, 7, 4],
    "f": [-2.5, -1.0, -0.5, -0.0, 0.0, 0.25, 0.5, 1.0, 3.0, np.nan, np.inf, -np.inf, 0.75],
}


def sample(dt, shape=(5,), seed=0):
    dt = np.dtype(dt)
    base = np.array(BASE[dt.kind], dt)
    return np.resize(np.roll(base, seed), shape)


def name(x):
    return getattr(x, "__name__", str(x))


def refused(exc, fn, *args, **kwargs):
    """Staging ``fn``'s mapping raises ``exc`` (where NumPy computes in a dtype pullback
    lacks, so there is nothing to compare)."""
    with pytest.raises(exc):
        stage(CALLABLES[fn], args, kwargs)


def run(fn, *args):
    """Stage and run ``fn``'s mapping on ``args``; the first result."""
    func, leaves, _, _ = stage(CALLABLES[fn], args, {})
    return interp.run(func, *leaves)[0]


# -- unary --------------------------------------------------------------------------

FLOAT_UNARY = [
    np.sin, np.cos, np.tan, np.arcsin, np.arccos, np.arctan, np.sinh, np.cosh, np.tanh,
    np.arcsinh, np.arccosh, np.arctanh, np.exp, np.exp2, np.expm1, np.log, np.log2, np.log10,
    np.log1p, np.sqrt, np.cbrt, np.fabs, np.rint, np.deg2rad, np.radians, np.rad2deg,
    np.degrees,
]


@pytest.mark.parametrize("dt", DTYPES, ids=name)
@pytest.mark.parametrize("fn", FLOAT_UNARY, ids=name)
def test_float_unary(fn, dt):
    if dt is np.bool_:  # NumPy computes in float16
        refused(UnsupportedError, fn, sample(dt))
        return
    for shape in SHAPES:
        check(fn, sample(dt, shape))


@pytest.mark.parametrize("fn", FLOAT_UNARY, ids=name)
def test_float_unary_of_python_scalars(fn):
    check(fn, 0.5)  # a Python float gives a NumPy float64
    check(fn, 2, dyn=(0,))
    refused(UnsupportedError, fn, True)


def test_exact_logs_at_powers():
    powers = np.array([1.0, 8.0, 1024.0, 1000.0, 1e15, 1e-3, 2.0**-40])
    for fn in (np.log2, np.log10):
        np.testing.assert_array_equal(run(fn, powers), fn(powers))
    assert run(math.log10, 1000.0) == 3.0


NUMERIC_UNARY = [
    np.negative, np.positive, np.absolute, np.sign, np.square, np.reciprocal, np.floor,
    np.ceil, np.trunc, np.fix, np.invert, np.isnan, np.isinf, np.isfinite, np.signbit,
    np.sinc, np.logical_not,
]
#: What NumPy does instead of computing: raise (TypeError), or compute in a dtype
#: pullback lacks (UnsupportedError).
UNARY_REFUSALS = {
    (np.negative, "b"): TypeError, (np.positive, "b"): TypeError, (np.sign, "b"): TypeError,
    (np.square, "b"): UnsupportedError, (np.reciprocal, "b"): UnsupportedError,
    (np.invert, "f"): TypeError,
}


@pytest.mark.parametrize("dt", DTYPES, ids=name)
@pytest.mark.parametrize("fn", NUMERIC_UNARY, ids=name)
def test_numeric_unary(fn, dt):
    exc = UNARY_REFUSALS.get((fn, np.dtype(dt).kind))
    for shape in SHAPES:
        x = sample(dt, shape)
        if fn is np.reciprocal and x.dtype.kind == "i":
            x = np.where(x == 0, 3, x)  # C's 1 / 0 is undefined
        if exc is UnsupportedError:
            refused(exc, fn, x)
        elif exc is not None:
            check_raises(exc, fn, x)
        else:
            check(fn, x)


@pytest.mark.parametrize("fn", NUMERIC_UNARY, ids=name)
def test_numeric_unary_of_python_scalars(fn):
    for x in (-2.5, -0.0):
        if fn is np.invert:
            check_raises(TypeError, fn, x)
        else:
            check(fn, x)
    if fn is not np.reciprocal:
        check(fn, -3, dyn=(0,))


def test_signbit_and_copysign_see_negative_zero():
    x = np.array([-0.0, 0.0, -1.0, 1.0, -np.inf, np.inf])
    check(np.signbit, x)
    check(np.copysign, np.float32(3), x.astype(np.float32))
    check(np.copysign, x, x[::-1].copy())


# -- binary -------------------------------------------------------------------------

BINARY = [
    np.add, np.subtract, np.multiply, np.divide, np.floor_divide, np.remainder, np.fmod,
    np.divmod, np.power, np.float_power, np.maximum, np.minimum, np.fmax, np.fmin,
    np.arctan2, np.hypot, np.logaddexp, np.logaddexp2, np.copysign, np.heaviside,
    np.bitwise_and, np.bitwise_or, np.bitwise_xor, np.logical_and, np.logical_or,
    np.logical_xor, np.equal, np.not_equal, np.less, np.less_equal, np.greater,
    np.greater_equal,
]
FLOAT_ONLY = {np.arctan2, np.hypot, np.logaddexp, np.logaddexp2, np.copysign, np.heaviside}
INT8_ON_BOOL = {np.floor_divide, np.remainder, np.fmod, np.divmod, np.power}
BITWISE = {np.bitwise_and, np.bitwise_or, np.bitwise_xor}
PAIRS = [(d, d) for d in DTYPES] + [
    (np.int32, np.int64), (np.bool_, np.int32), (np.int32, np.float32),
    (np.int64, np.float32), (np.float32, np.float64), (np.bool_, np.float64),
]


def binary_refusal(fn, kind):
    """What NumPy does instead of computing, by the kind of the promoted operands."""
    if kind == "b" and fn is np.subtract:
        return TypeError
    if kind == "b" and (fn in INT8_ON_BOOL or fn in FLOAT_ONLY):
        return UnsupportedError
    if kind == "f" and fn in BITWISE:
        return TypeError
    return None


def check_binary(fn, x, y, exc):
    if exc is UnsupportedError:
        refused(exc, fn, x, y)
    elif exc is not None:
        check_raises(exc, fn, x, y)
    else:
        check(fn, x, y)


def second(fn, dt, shape):
    """A second operand: small non-negative exponents for integer powers."""
    y = sample(dt, shape, seed=3)
    if fn is np.power and y.dtype.kind == "i":
        y = np.abs(y) % 4
    return y


@pytest.mark.parametrize("d1,d2", PAIRS, ids=lambda p: np.dtype(p).name)
@pytest.mark.parametrize("fn", BINARY, ids=name)
def test_binary(fn, d1, d2):
    exc = binary_refusal(fn, np.result_type(d1, d2).kind)
    shape_pairs = [((5,), (5,)), ((2, 3), (3,)), ((2, 1), (1, 3)), ((), (2, 3)), ((0,), ())]
    for s1, s2 in shape_pairs:
        check_binary(fn, sample(d1, s1), second(fn, d2, s2), exc)


WEAK_CASES = [
    (np.int32, 2), (np.int32, 2.5), (np.float32, 2.5), (np.float32, 3), (np.bool_, 2),
    (np.bool_, True), (np.int64, -1.5), (np.float64, True),
]


@pytest.mark.parametrize("fn", BINARY, ids=name)
def test_binary_with_python_scalars(fn):
    """NEP 50: a Python scalar takes the array's dtype unless its kind is higher."""
    for dt, scalar in WEAK_CASES:
        x = sample(dt, (4,))
        kind = np.result_type(x, scalar).kind
        if fn is np.power and kind in "bi":
            x = np.abs(x)  # no negative integer exponents
        check_binary(fn, x, scalar, binary_refusal(fn, kind))
        check_binary(fn, scalar, x, binary_refusal(fn, kind))
    for a, b in [(2.5, 1.5), (3, 2), (True, False)]:
        if binary_refusal(fn, np.result_type(a, b).kind) is None:
            check(fn, a, b, dyn=(0, 1))  # Python scalars only: a NumPy (strong) result


def test_binary_with_dynamic_python_int_and_float_scalars():
    x = sample(np.float32, (2, 3))
    check(np.add, x, 3, dyn=(1,))
    check(np.multiply, 1.5, x)
    check(np.maximum, sample(np.int32, (4,)), 2, dyn=(1,))


def test_python_int_out_of_range_raises():
    check_raises(OverflowError, np.add, sample(np.int32, (3,)), 2**40)


@pytest.mark.parametrize("fn", [np.equal, np.not_equal, np.less, np.less_equal, np.greater,
                                np.greater_equal], ids=name)
def test_comparison_with_python_int_out_of_range(fn):
    """NumPy 2 compares with a Python int beyond the array's dtype exactly."""
    x = sample(np.int32, (5,))
    for big in (2**40, -(2**40), 2**70, -(2**70)):
        check(fn, x, big)
        check(fn, big, x)


def test_integer_power_refuses_negative_exponents():
    x = sample(np.int32, (3,))
    check_raises(ValueError, np.power, x, -1)
    check_raises(ValueError, np.power, x, np.array([1, -2, 0], np.int32))
    check_raises(ValueError, np.power, 2, np.array([-1]))
    check(np.power, x, 2)
    check(np.power, np.array(2.0), np.array([-1, 2]))


def test_integer_division_by_zero_gives_zero():
    x = np.array([7, -7, 0], np.int64)
    zero = np.zeros(3, np.int64)
    for fn in (np.floor_divide, np.remainder, np.fmod, np.divmod):
        check(fn, x, zero)


def test_special_values():
    inf, nan = np.inf, np.nan
    a = np.array([inf, -inf, inf, nan, 1e200, -1e200, 0.0, 3.0])
    b = np.array([inf, -inf, nan, 1.0, 1e200, 1e-200, 0.0, -4.0])
    for fn in (np.hypot, np.logaddexp, np.logaddexp2, np.fmax, np.fmin, np.heaviside,
               np.fmod, np.remainder, np.arctan2, np.copysign):
        check(fn, a, b)
        check(fn, b, a)


# -- functions with more arguments -----------------------------------------------------


@pytest.mark.parametrize("dt", DTYPES, ids=name)
def test_where(dt):
    c = sample(np.int32, (2, 3))
    x, y = sample(dt, (2, 3)), sample(dt, (3,), seed=2)
    check(np.where, c, x, y)
    check(np.where, c > 0, x, 2.5)
    check(np.where, sample(np.float64, (3,)), 1, y)
    check(np.where, True, x, y)


def test_where_refusals():
    x = sample(np.float64, (3,))
    refused(UnsupportedError, np.where, x)
    check_raises(ValueError, np.where, x, x)


@pytest.mark.parametrize("dt", DTYPES[1:], ids=name)
def test_clip(dt):
    x = sample(dt, (2, 3))
    check(np.clip, x, 0, 2)
    check(np.clip, x, -1.5, None)
    check(np.clip, x, None, np.asarray(1, dt))
    check(np.clip, x, 3, 1)  # max wins
    check(np.clip, x, sample(dt, (3,), 1), 2)
    check(np.clip, x, min=0.5)
    check(np.clip, x, None, None)
    check_method("clip", x, 0, 1)
    check_method("clip", x, max=1)


def test_clip_argument_errors():
    x = sample(np.float64, (3,))
    check_raises(TypeError, np.clip, x, 1)
    check_raises(ValueError, np.clip, x, 1, 2, min=1)
    check_raises(TypeError, np.clip, sample(np.bool_, (3,)), None, None)
    check(np.clip, np.array([1.0, np.nan, 5.0]), np.nan, 2.0)


@pytest.mark.parametrize("dt", DTYPES, ids=name)
def test_nan_to_num(dt):
    x = sample(dt, (3, 4))
    check(np.nan_to_num, x)
    check(np.nan_to_num, x, nan=-1, posinf=2.5, neginf=-2.5)
    check(np.nan_to_num, sample(dt, ()), nan=7)


def test_nan_to_num_dynamic_fill():
    x = sample(np.float32, (6,))
    check(np.nan_to_num, x, True, np.float32(9.0))
    check(np.nan_to_num, np.float64(np.inf))


DECIMALS = [0, 1, 2, -1, -2, 12]


@pytest.mark.parametrize("dt", DTYPES[1:], ids=name)
@pytest.mark.parametrize("fn", [np.round, np.around], ids=name)
def test_round(fn, dt):
    x = (np.array([0.5, 1.5, 2.5, -2.5, 1234.5678, -0.125, 15, 25, -15, 149, np.nan, np.inf])
         .astype(dt) if np.dtype(dt).kind == "f" else np.array([15, 25, -15, 149, 150, -251], dt))
    for decimals in DECIMALS:
        check(fn, x, decimals)
        check_method("round", x, decimals)
    check(fn, 2.5)


def test_round_refusals():
    refused(UnsupportedError, np.round, sample(np.bool_))
    check_raises(TypeError, lambda x: np.round(x, 1.5), sample(np.float64),
                 mapping=lambda x: CALLABLES[np.round](x, 1.5))
    with Builder() as b, pytest.raises(ConcretizationError):
        CALLABLES[np.round](sample(np.float64), b.param(type_of_value(2)))


# -- math ---------------------------------------------------------------------------

ARGS = [-2.5, -1.0, -0.5, -0.0, 0.0, 0.3, 0.5, 1.0, 2.0, 40.0, np.inf, -np.inf, np.nan]
MATH_UNARY = [
    math.sin, math.cos, math.tan, math.asin, math.acos, math.atan, math.sinh, math.cosh,
    math.tanh, math.asinh, math.acosh, math.atanh, math.exp, math.exp2, math.expm1, math.log,
    math.log2, math.log10, math.log1p, math.sqrt, math.cbrt, math.fabs, math.erf, math.erfc,
    math.degrees, math.radians, math.isnan, math.isinf, math.isfinite,
]


def outcome(fn, *args):
    try:
        fn(*args)
    except (ValueError, OverflowError, ZeroDivisionError) as e:
        return type(e)
    return None


@pytest.mark.parametrize("fn", MATH_UNARY, ids=name)
def test_math_unary(fn):
    """Every argument, Python's errors included (ValueError for a domain error, OverflowError
    for a range error), raised at run time."""
    for x in ARGS + [1000.0, -1000.0, 710.0]:
        exc = outcome(fn, x)
        if exc is None:
            check(fn, x)
        else:
            check_raises(exc, fn, x)


@pytest.mark.parametrize("fn", MATH_UNARY, ids=name)
def test_math_takes_ints_bools_and_numpy_scalars(fn):
    for x in (1, True, 0):
        if outcome(fn, x) is None:
            check(fn, x, dyn=(0,))
    for x in (np.float32(0.25), np.float32(1.5)):
        if outcome(fn, x) is None:
            check(fn, x)
    check_raises(TypeError, fn, np.array([0.5, 0.25]))


@pytest.mark.parametrize("fn", [math.floor, math.ceil, math.trunc], ids=name)
def test_math_to_int(fn):
    for x in (2.5, -2.5, 0.0, -0.0, 3.0, 1e15):
        check(fn, x)
    check(fn, 7, dyn=(0,))
    check(fn, True, dyn=(0,))
    check(fn, np.float64(-2.5))
    for x in (np.float32(2.5), np.int32(-4)):
        if fn is math.trunc:
            check_raises(TypeError, fn, x)
        else:
            check(fn, x)
    check_raises(ValueError, fn, np.nan)
    check_raises(OverflowError, fn, np.inf)
    with pytest.raises(OverflowError):  # Python has big ints; pullback's are 64-bit
        run(fn, 1e20)


MATH_BINARY = [math.atan2, math.copysign, math.fmod, math.pow, math.hypot, math.log]


@pytest.mark.parametrize("fn", MATH_BINARY, ids=name)
def test_math_binary(fn):
    grid = [-2.0, -0.5, -0.0, 0.0, 0.5, 1.0, 3.0, 1000.0, np.inf, -np.inf, np.nan]
    for x in grid:
        for y in grid:
            exc = outcome(fn, x, y)
            if exc is None:
                check(fn, x, y)
            else:
                check_raises(exc, fn, x, y)


def test_math_log_and_hypot_arities():
    check(math.log, 8.0)
    check(math.log, 8, 2, dyn=(0, 1))
    check_raises(ZeroDivisionError, math.log, 8.0, 1.0)
    check(math.hypot)
    check(math.hypot, -3.0)
    check(math.hypot, 1.0, 2.0, 2.0)
    check(math.hypot, 1e300, 1e300, 1e300)
    check(math.hypot, np.inf, np.nan, 1.0)


# -- builtins -------------------------------------------------------------------------


def test_builtin_abs():
    for x in (-2.5, -0.0, np.float32(-1.5), sample(np.int32, (2, 3)), sample(np.float64)):
        check(builtins.abs, x)
    check(builtins.abs, -3, dyn=(0,))
    check(builtins.abs, True, dyn=(0,))  # a Python int
    check(builtins.abs, sample(np.bool_))


ROUNDING = [0.5, 1.5, 2.5, -0.5, -2.5, 2.675, 1.005, 0.125, -0.125, 0.285, 1.115, 1e15 + 0.5,
            123456.789, -0.001, 5e-324, 1e300, np.inf, -np.inf, np.nan]


def test_builtin_round_of_python_floats():
    """Python rounds the exact decimal value, ties to even, and returns an int without
    ndigits."""
    for x in ROUNDING:
        for n in (None, 0, 1, 2, 3, -1, -2, 15):
            args = (x,) if n is None else (x, n)
            if n is None and abs(x) >= 2**63 and math.isfinite(x):
                with pytest.raises(OverflowError):  # Python ints are big; pullback's are not
                    run(builtins.round, *args)
                continue
            exc = outcome(builtins.round, *args)
            if exc is None:
                check(builtins.round, *args)
            else:
                check_raises(exc, builtins.round, *args)


def test_builtin_round_ties_decided_by_the_exact_value():
    """Decimal inputs whose scaled float lands on .5 although the exact value does not."""
    rng = np.random.default_rng(0)
    xs = np.round(rng.uniform(-100, 100, 400), 3) + 0.0005
    naive_misses = [x for x in xs.tolist() if np.rint(x * 1000) / 1000 != round(x, 3)]
    assert len(naive_misses) > 50
    for x in xs.tolist()[:50] + naive_misses[:50]:
        check(builtins.round, x, 3)


def test_builtin_round_of_ints_and_numpy_scalars():
    for i in (1250, 1350, -1250, -1251, 7, 0, 149, 2**62):
        for n in (None, 0, 2, -1, -2, -3):
            check(builtins.round, i, *(() if n is None else (n,)), dyn=(0,))
    check(builtins.round, True, dyn=(0,))
    check(builtins.round, np.float64(2.5))
    check(builtins.round, np.float32(3.5))
    check(builtins.round, np.float32(2.567), 2)
    check(builtins.round, np.int32(15), -1)
    check_raises(TypeError, builtins.round, sample(np.float64))
    check_raises(OverflowError, builtins.round, np.inf)
    check_raises(ValueError, builtins.round, np.nan)


def test_builtin_pow_and_divmod():
    check(builtins.pow, 2.0, 0.5)
    check(builtins.pow, 2, 10, dyn=(0, 1))
    check(builtins.pow, sample(np.float32), 2)
    check(builtins.divmod, 7.5, -2.0)
    check(builtins.divmod, 7, -2, dyn=(0, 1))
    check(builtins.divmod, sample(np.int32), 3)
    check_raises(ZeroDivisionError, builtins.divmod, 7.5, 0.0)
    check_raises(ZeroDivisionError, builtins.divmod, 7, 0)
    refused(UnsupportedError, builtins.pow, 2, 3, 5)


# -- methods ----------------------------------------------------------------------------


@pytest.mark.parametrize("src", DTYPES, ids=name)
def test_astype(src):
    x = sample(src, (2, 3))
    for dst in DTYPES + [float, int, bool, "float32"]:
        check_method("astype", x, dst)
    check_method("astype", x, np.float64, casting="same_kind")
    check_method("copy", x)
    if np.dtype(src).kind == "f":
        with pytest.raises(TypeError):
            x.astype(np.int32, casting="safe")
        with pytest.raises(TypeError):
            stage(METHODS["astype"], (x, np.int32), {"casting": "safe"})


def test_lists_are_arrays():
    x = sample(np.float32, (2, 3))
    check(np.maximum, x, [0, 1, 2])
    check(np.add, [1.5, 2.5], [[1], [2]])
    check(np.where, [True, False, True], x, [0.5, 1.5, 2.5])
    check(np.clip, [1, 5, 9], 2, [3, 4, 10])
