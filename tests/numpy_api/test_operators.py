"""Python operators: Python's semantics when every operand is a Python scalar (weak
results, bools counted as ints, ZeroDivisionError with Python's message), NumPy's as soon
as an array or NumPy scalar takes part."""

from __future__ import annotations

import operator

import numpy as np
import pytest

from harness import check_operator, check_raises, stage
from pullback.backends import interp
from pullback.errors import UnsupportedError
from pullback.numpy_api import OPERATORS

pytestmark = pytest.mark.filterwarnings("ignore::RuntimeWarning")

ARITHMETIC = ["add", "sub", "mul", "truediv", "floordiv", "mod", "pow"]
COMPARISONS = ["eq", "ne", "lt", "le", "gt", "ge"]
BITWISE = ["and_", "or_", "xor"]
UNARY = ["neg", "pos", "abs", "invert"]
INT8_ON_BOOL = ["floordiv", "mod", "pow"]  # NumPy computes these on booleans in int8
SCALARS = [True, False, 0, 3, -7, 2.5, -0.0, 0.0, -1.5, float("inf"), float("nan")]


def outcome(fn, *args):
    try:
        return fn(*args), None
    except (ZeroDivisionError, TypeError, OverflowError) as e:
        return None, e


def run_dynamic(name, *args):
    """Every operand a run-time Python scalar; the result or the exception raised."""
    func, leaves, _, _ = stage(OPERATORS[name], args, {}, dyn=tuple(range(len(args))))
    return interp.run(func, *leaves)


def expect_same_error(error, name, *args):
    with pytest.raises(type(error)) as got:
        run_dynamic(name, *args)
    assert str(got.value) == str(error)


@pytest.mark.parametrize("name", ARITHMETIC + COMPARISONS + BITWISE)
def test_binary_on_python_scalars(name):
    fn = getattr(operator, name)
    for a in SCALARS:
        for b in SCALARS:
            if name == "pow" and abs(b) > 3 and not isinstance(b, float):
                b = 2  # Python ints are unbounded
            value, error = outcome(fn, a, b)
            if isinstance(value, complex):  # pullback refuses at run time
                with pytest.raises(ValueError, match="complex"):
                    run_dynamic(name, a, b)
            elif error is None:
                check_operator(name, a, b, dyn=(0, 1))
            elif isinstance(error, TypeError):
                with pytest.raises(TypeError):
                    run_dynamic(name, a, b)
            else:
                expect_same_error(error, name, a, b)


@pytest.mark.parametrize("name", UNARY)
def test_unary_on_python_scalars(name):
    fn = getattr(operator, name)
    for a in SCALARS:
        value, error = outcome(fn, a)
        if error is None:
            check_operator(name, a, dyn=(0,))
        else:
            with pytest.raises(type(error)):
                run_dynamic(name, a)


def test_python_bool_arithmetic_is_int_arithmetic():
    for name in ("add", "sub", "mul", "floordiv", "mod"):
        check_operator(name, True, True, dyn=(0, 1))
    check_operator("truediv", True, True, dyn=(0, 1))
    check_operator("and_", True, False, dyn=(0, 1))  # stays a bool
    check_operator("invert", True, dyn=(0,))  # ~True == -2


def test_static_python_scalars_with_dynamic_ones():
    check_operator("add", 2.5, 1, dyn=(0,))
    check_operator("truediv", 7, 2, dyn=(1,))
    check_raises(ZeroDivisionError, operator.truediv, 1.5, 0, mapping=OPERATORS["truediv"])
    check_raises(ZeroDivisionError, operator.mod, 7, 0, mapping=OPERATORS["mod"])


def test_python_int_power():
    check_operator("pow", 2, -1, dyn=(0,))  # a static negative exponent: a float
    check_operator("pow", 2, 10, dyn=(0, 1))
    check_operator("pow", -3, 3, dyn=(0, 1))
    expect_same_error(ZeroDivisionError("0.0 cannot be raised to a negative power"), "pow",
                      0.0, -1)
    with pytest.raises(ValueError, match="negative int"):  # int ** -n is a float in Python
        run_dynamic("pow", 2, -1)


def test_python_float_power_errors():
    expect_same_error(OverflowError("(34, 'Numerical result out of range')"), "pow", 10.0, 400.0)
    with pytest.raises(ValueError, match="complex"):  # Python gives a complex number
        run_dynamic("pow", -8.0, 1 / 3)
    for a, b in [(-np.inf, 0.5), (-0.0, 0.5), (np.inf, -1.0), (-8.0, 3.0), (1.0, np.nan)]:
        check_operator("pow", a, b)


ARRAYS = {
    "b": np.array([True, False, True]),
    "i32": np.array([-3, 0, 5], np.int32),
    "i64": np.array([[4, -1, 2], [0, 7, -8]]),
    "f32": np.array([-1.5, 0.0, 2.5], np.float32),
    "f64": np.array([[np.nan, -0.0, 3.0], [np.inf, -2.0, 0.5]]),
}


def numpy_outcome(fn, *args):
    try:
        fn(*args)
    except TypeError:  # or NumPy's subclass of it
        return TypeError
    except ValueError:
        return ValueError
    return None


@pytest.mark.parametrize("name", ARITHMETIC + COMPARISONS + BITWISE)
@pytest.mark.parametrize("left", sorted(ARRAYS))
def test_binary_with_arrays(name, left):
    """NumPy's semantics: promotion, broadcasting, zero divisors give inf/nan/0."""
    fn, x = getattr(operator, name), ARRAYS[left]
    others = [*ARRAYS.values(), 2, 2.5, True, np.float32(1.5), np.int32(0)]
    for y in others:
        if name == "pow" and np.result_type(x, y).kind in "bi":
            y = np.abs(y)
        for a, b in ((x, y), (y, x)):
            exc = numpy_outcome(fn, a, b)
            if np.result_type(a, b).kind == "b" and name in INT8_ON_BOOL:
                with pytest.raises(UnsupportedError):
                    stage(OPERATORS[name], (a, b), {})
            elif exc is None:
                check_operator(name, a, b)
            else:
                check_raises(exc, fn, a, b, mapping=OPERATORS[name])


@pytest.mark.parametrize("name", UNARY)
@pytest.mark.parametrize("key", sorted(ARRAYS))
def test_unary_on_arrays(name, key):
    fn, x = getattr(operator, name), ARRAYS[key]
    exc = numpy_outcome(fn, x)
    if exc is None:
        check_operator(name, x)
    else:
        check_raises(exc, fn, x, mapping=OPERATORS[name])


def test_numpy_scalars_are_strong():
    check_operator("add", np.float64(1.5), 2.5)
    check_operator("mul", 3, np.int32(4))
    check_operator("lt", np.float32(1.5), 2.5)
    check_operator("truediv", np.float64(1.0), 0.0)  # NumPy: inf, no exception


def test_integer_array_power_refuses_negative_exponents():
    x = ARRAYS["i32"]
    check_raises(ValueError, operator.pow, x, -1, mapping=OPERATORS["pow"])
    check_operator("pow", x, 2)
    check_operator("pow", x, 0.5)


def test_comparisons_with_python_ints_out_of_range():
    x = ARRAYS["i32"]
    for name in COMPARISONS:
        check_operator(name, x, 2**40)
        check_operator(name, -(2**70), x)
