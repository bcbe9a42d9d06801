"""NumPy ufuncs, ``math`` functions, numeric builtins and Python operators.

The same arithmetic comes in three flavours:

* ``np.*`` follows NumPy 2: operands promote by NEP 50 (a Python scalar takes the
  array's dtype), results are NumPy values even for Python scalar inputs, float-only
  functions compute integers in float64, and what NumPy computes in float16 or int8
  (booleans) is refused.
* ``math.*`` takes and returns Python floats.  The ValueError / OverflowError CPython
  raises for a domain or range error cannot be decided at compile time: it becomes a
  run-time ``check``.
* Python operators act as the ufuncs when an array is involved and as Python when every
  operand is a Python scalar (weak): bools count as ints, ``int / int`` is a float and a
  zero divisor raises ZeroDivisionError.

Everything is a composition of the elementwise primitives.
"""

from __future__ import annotations

import builtins
import math
import operator
from collections.abc import Callable
from functools import reduce
from typing import Any

import numpy as np

from ..errors import UnsupportedError
from ..ir.builder import as_atom, current
from ..ir.core import Atom, Lit
from ..ir.types import DType, TensorType, bool_, float32, float64, int32, int64
from ..ir.types import dtype as as_dtype
from ..ops import control as C
from ..ops import elementwise as E
from ..ops import index as X
from ..ops import reduce as R
from .core import (
    CALLABLES,
    OPERATORS,
    broadcast_args,
    broadcast_to,
    convert,
    method,
    operator_,
    promote,
    register,
    static,
    to_float,
    typeof,
)
from .creation import as_array, operand

Kernel = Callable[..., Atom]

# -- operands -----------------------------------------------------------------------


def _same(rt: TensorType) -> DType:
    return rt.dtype


def _inexact(rt: TensorType) -> DType:
    """True division and sinc: integers and booleans compute in float64."""
    return rt.dtype if rt.dtype.is_float else float64


def _double(rt: TensorType) -> DType:
    return float64


def _operands(xs, rule: Callable[[TensorType], DType] = _same, *, weak: bool = False):
    """``xs`` promoted by NEP 50, converted to ``rule`` of their result type, broadcast.

    Only Python-operator semantics (``weak``) keep an all-Python-scalar result weak.
    """
    atoms, rt = promote(*(operand(x) for x in xs))
    if not weak:
        rt = rt.strong()
    dt = rule(rt)
    return broadcast_args(*(convert(a, dt, rt.weak) for a in atoms))


def _all_weak(*xs: Any) -> bool:
    return all(typeof(x).weak for x in xs)


def _py_numbers(*xs: Any) -> list[Atom]:
    """Python scalars promoted the Python way: arithmetic on bools is on ints."""
    atoms = _operands(xs, weak=True)
    if atoms[0].type.dtype.is_bool:
        return [convert(a, int64, True) for a in atoms]
    return atoms


def _lit(value: Any, like: Atom) -> Lit:
    """A 0-d constant of ``like``'s dtype and weak-ness (elementwise ops splat it)."""
    t = like.type
    return Lit(np.asarray(value).astype(t.dtype.np), TensorType((), t.dtype, t.weak))


def _full(value: Any, like: Atom, dt: DType = bool_) -> Atom:
    """``value`` as a ``dt`` array of ``like``'s shape."""
    t = like.type
    return broadcast_to(Lit(np.asarray(value, dt.np), TensorType((), dt, t.weak)), t.shape)


def _is(kind: str, x: Atom) -> bool:
    return x.type.dtype.kind == kind


def _static_int(value: Any, what: str) -> int:
    return operator.index(static(value, what))


def _no_out(out: Any) -> None:
    if out is not None:
        raise UnsupportedError("out= is not supported", hint="assign the result instead")


# -- run-time errors ----------------------------------------------------------------


def _require(ok: Atom, exc: type[Exception], message: str) -> None:
    """Raise ``exc(message)`` at run time unless the 0-d bool ``ok`` holds."""
    C.check(ok, exc=exc.__name__, fmt=message)


def _forbid(bad: Atom, exc: type[Exception], message: str) -> None:
    _require(E.not_(bad), exc, message)


def _nonnegative(y: Atom) -> None:
    """NumPy refuses negative integer exponents (the result would not be an integer)."""
    if isinstance(y, Lit) and (y.value >= 0).all() or y.type.size == 0:
        return
    ok = E.ge(y, _lit(0, y))
    if ok.type.ndim:
        ok = R.reduce_min(ok, axes=tuple(range(ok.type.ndim)))
    _require(ok, ValueError, "Integers to negative integer powers are not allowed.")


#: Python's messages for a zero divisor: (integers, floats).
_ZERO_DIVISION = {
    "truediv": ("division by zero", "float division by zero"),
    "floordiv": ("integer division or modulo by zero", "float floor division by zero"),
    "mod": ("integer modulo by zero", "float modulo"),
    "divmod": ("integer division or modulo by zero", "float divmod()"),
}


def _nonzero_divisor(op: str, y: Atom) -> None:
    if isinstance(y, Lit) and y.value != 0:
        return
    _require(E.ne(y, _lit(0, y)), ZeroDivisionError, _ZERO_DIVISION[op][_is("f", y)])


def _no_bool_loop(name: str, x: Atom, instead: str = "") -> None:
    """NumPy has no boolean loop for ``name`` and raises TypeError."""
    if _is("b", x):
        raise TypeError(f"numpy boolean {name} is not supported{instead}")


def _no_int8(name: str, x: Atom) -> None:
    """NumPy computes ``name`` of booleans in int8, which pullback lacks."""
    if _is("b", x):
        raise UnsupportedError(
            f"NumPy computes {name} on booleans in int8, which pullback does not support",
            hint="convert first, e.g. x.astype(np.int32)",
        )


def _no_floats(name: str, *xs: Atom) -> None:
    if any(_is("f", x) for x in xs):
        shown = ", ".join(str(x.type.dtype.name) for x in xs)
        raise TypeError(f"ufunc '{name}' not supported for the input types ({shown})")


def python_int(x: Atom, dt: DType = int64, weak: bool = True, too_big: str = "") -> Atom:
    """Python's ``int()`` of an integral number, held in ``dt``: NaN, infinity and values
    beyond ``dt`` raise what Python and NumPy raise (``too_big`` words the last)."""
    if _is("f", x):
        _forbid(_isnan(x), ValueError, "cannot convert float NaN to integer")
        _forbid(_isinf(x), OverflowError, "cannot convert float infinity to integer")
    info, have = np.iinfo(dt.np), x.type.dtype
    if have.is_float or have.is_int and have.itemsize > dt.itemsize:
        fits = E.and_(E.ge(x, _lit(info.min, x)), E.lt(x, _lit(-float(info.min), x)))
        message = too_big or f"Python integer {{:.0f}} out of bounds for {dt.name}"
        C.check(fits, x, exc="OverflowError", fmt=message)
    return convert(x, dt, weak)


# -- kernels: same-dtype, broadcast operands in, one result out ---------------------


def _isnan(x: Atom) -> Atom:
    return E.ne(x, x) if _is("f", x) else _full(False, x)


def _isinf(x: Atom) -> Atom:
    return E.eq(E.abs_(x), _lit(math.inf, x)) if _is("f", x) else _full(False, x)


def _isfinite(x: Atom) -> Atom:
    return E.lt(E.abs_(x), _lit(math.inf, x)) if _is("f", x) else _full(True, x)


def _signbit(x: Atom) -> Atom:
    """The sign bit (a NaN counts as positive: no primitive reads a NaN's sign)."""
    if _is("b", x):
        return _full(False, x)
    zero = _lit(0, x)
    if _is("i", x):
        return E.lt(x, zero)
    negative_zero = E.and_(E.eq(x, zero), E.lt(E.div(_lit(1, x), x), zero))
    return E.or_(E.lt(x, zero), negative_zero)


def _truth(x: Atom) -> Atom:
    return x if _is("b", x) else E.ne(x, _lit(0, x))


def _add(x: Atom, y: Atom) -> Atom:
    return (E.or_ if _is("b", x) else E.add)(x, y)


def _subtract(x: Atom, y: Atom) -> Atom:
    _no_bool_loop("subtract", x, ", use the bitwise_xor, the `^` operator, or the "
                  "logical_xor function instead.")
    return E.sub(x, y)


def _multiply(x: Atom, y: Atom) -> Atom:
    return (E.and_ if _is("b", x) else E.mul)(x, y)


def _floor_divide(x: Atom, y: Atom) -> Atom:
    _no_int8("floor_divide", x)
    return E.floordiv(x, y)


def _remainder(x: Atom, y: Atom) -> Atom:
    _no_int8("remainder", x)
    return E.mod(x, y)


def _divmod(x: Atom, y: Atom) -> tuple[Atom, Atom]:
    return _floor_divide(x, y), _remainder(x, y)


def _fmod(x: Atom, y: Atom) -> Atom:
    """C's fmod: the remainder of the magnitudes, with the sign of the dividend.  A float
    dividend's sign is taken as a factor s = +-1 of its sign bit, s * mod(s * x, |y|), so
    that the derivative is 1 in x (copysign's abs would make it 0 wherever the remainder
    is 0, x == 0 included) and -trunc(x / y) in y."""
    _no_int8("fmod", x)
    if _is("f", x):
        s = E.select(_signbit(x), _lit(-1, x), _lit(1, x))
        return E.mul(s, E.mod(E.mul(s, x), E.abs_(y)))
    r = E.mod(E.abs_(x), E.abs_(y))
    return E.select(E.lt(x, _lit(0, x)), E.neg(r), r)


def _power(x: Atom, y: Atom) -> Atom:
    _no_int8("power", x)
    if _is("i", x):
        _nonnegative(y)
    return E.pow_(x, y)


def _nan_ignoring(prim: Kernel) -> Kernel:
    """fmax/fmin: a NaN loses against a number."""

    def kernel(x: Atom, y: Atom) -> Atom:
        if not _is("f", x):
            return prim(x, y)
        return E.select(_isnan(y), x, E.select(_isnan(x), y, prim(x, y)))

    return kernel


def _copysign(x: Atom, y: Atom) -> Atom:
    mag = E.abs_(x)
    return E.select(_signbit(y), E.neg(mag), mag)


def _heaviside(x: Atom, h0: Atom) -> Atom:
    step = E.select(E.lt(x, _lit(0, x)), _lit(0, x), E.select(E.gt(x, _lit(0, x)), _lit(1, x), h0))
    return E.select(_isnan(x), x, step)


def _hypot(*xs: Atom) -> Atom:
    """sqrt of the sum of squares, scaled by the largest magnitude so it cannot overflow;
    an infinity wins over a NaN (C's hypot)."""
    mags = [E.abs_(x) for x in xs]
    big = reduce(E.max_, mags)
    at_zero = E.eq(big, _lit(0, big))
    scale = E.select(at_zero, _lit(1, big), big)
    total = reduce(E.add, [E.mul(r, r) for r in (E.div(m, scale) for m in mags)])
    # total >= 1 but at the origin, where 1 keeps sqrt's inf out of the derivative: it is
    # then that of big, 0 (abs's choice, and jnp.hypot's), not 0 * inf
    total = E.select(at_zero, _lit(1, total), total)
    any_inf = reduce(E.or_, [_isinf(m) for m in mags])
    return E.select(any_inf, _lit(math.inf, big), E.mul(big, E.sqrt(total)))


def _logaddexp(x: Atom, y: Atom, base2: bool = False) -> Atom:
    d = E.sub(x, y)
    # max(x, y) and -|d| by one select each, as NumPy branches: at a tie both pick y and
    # d, so the result is y + log1p(exp(x - y)), smooth there (max and abs would put two
    # kinks that cancel, and second derivatives would miss the curvature between them)
    first = E.gt(d, _lit(0, d))
    top = E.select(first, x, y)
    tail = E.select(first, E.neg(d), d)
    if base2:
        soft = E.mul(E.log1p(E.pow_(_lit(2, tail), tail)), _lit(1 / math.log(2), tail))
    else:
        soft = E.log1p(E.exp(tail))
    # equal infinities give d = NaN: their sum is the answer (and NaNs stay NaN)
    return E.select(_isnan(d), E.add(x, y), E.add(top, soft))


def _logaddexp2(x: Atom, y: Atom) -> Atom:
    return _logaddexp(x, y, base2=True)


def _exp2(x: Atom) -> Atom:
    return E.pow_(_lit(2, x), x)


def _angle(numerator: float, denominator: float) -> Kernel:
    """Multiplication by a ratio of constants rounded in the operand's precision, as NumPy
    and CPython do."""

    def kernel(x: Atom) -> Atom:
        t = x.type.dtype.np.type
        return E.mul(x, _lit(t(numerator) / t(denominator), x))

    return kernel


_deg2rad = _angle(math.pi, 180)
_rad2deg = _angle(180, math.pi)


def _sinc(x: Atom) -> Atom:
    at_zero = E.eq(x, _lit(0, x))
    y = E.mul(_lit(math.pi, x), E.select(at_zero, _lit(1, x), x))
    # at 0, 1 - z^2/6 + z^4/120 (z = pi x): 1 as NumPy, and the derivatives of sinc there
    # up to the fourth (a constant would make them all 0, sinc''(0) = -pi^2/3 included)
    z = E.mul(_lit(math.pi, x), x)
    z2 = E.mul(z, z)
    taylor = E.add(_lit(1, x), E.mul(z2, E.add(_lit(-1 / 6, x), E.mul(z2, _lit(1 / 120, x)))))
    return E.select(at_zero, taylor, E.div(E.sin(y), y))


def _negative(x: Atom) -> Atom:
    _no_bool_loop("negative", x, ", the `-` operator, is not supported, use the `~` operator "
                  "or the logical_not function instead.")
    return E.neg(x)


def _positive(x: Atom) -> Atom:
    _no_bool_loop("positive", x)
    return x


def _absolute(x: Atom) -> Atom:
    return x if _is("b", x) else E.abs_(x)


def _sign(x: Atom) -> Atom:
    _no_bool_loop("sign", x)
    return E.sign(x)


def _square(x: Atom) -> Atom:
    _no_int8("square", x)
    return E.mul(x, x)


def _reciprocal(x: Atom) -> Atom:
    _no_int8("reciprocal", x)
    if _is("f", x):
        return E.div(_lit(1, x), x)
    # C's integer 1 / x: only +-1 survive (1 / 0 is undefined in C; it gives 0 here)
    return E.select(E.eq(E.abs_(x), _lit(1, x)), x, _lit(0, x))


def _integral(prim: Kernel) -> Kernel:
    """floor/ceil/trunc: integers and booleans are already integral (NumPy 2 keeps them)."""
    return lambda x: prim(x) if _is("f", x) else x


def _invert(x: Atom) -> Atom:
    _no_floats("invert", x)
    return E.not_(x)


def _bitwise(name: str, prim: Kernel) -> Kernel:
    def kernel(x: Atom, y: Atom) -> Atom:
        _no_floats(name, x, y)
        return prim(x, y)

    return kernel


def _powers_of_two(x: Atom, count: Atom, top: int) -> Atom:
    """``2 ** count`` in ``x``'s dtype, wrapping as NumPy's integers do (``2 ** (bits -
    1)`` is the most negative value), read from a table by ``count`` clipped to [0, top]."""
    bits = x.type.dtype.np.itemsize * 8
    table = Lit(np.left_shift(np.ones(bits, x.type.dtype.np), np.arange(bits)))
    k = E.min_(E.max_(count, _lit(0, count)), _lit(top, count))
    return X.gather(table, convert(k, int64), axis=0)


def _count_below(count: Atom, limit: int) -> Atom:
    """Whether ``0 <= count < limit``: NumPy shifts only by such counts, and treats the
    others (negative ones included: it compares them as unsigned) as too large."""
    return E.and_(E.ge(count, _lit(0, count)), E.lt(count, _lit(limit, count)))


def _shift_operands(name: str, x: Atom, y: Atom) -> int:
    _no_floats(name, x, y)
    _no_int8(name, x)
    return x.type.dtype.np.itemsize * 8


def _left_shift(x: Atom, y: Atom) -> Atom:
    """``x * 2 ** y`` (wrapping); 0 for counts outside [0, bits)."""
    bits = _shift_operands("left_shift", x, y)
    shifted = E.mul(x, convert(_powers_of_two(x, y, bits - 1), x.type.dtype, x.type.weak))
    return E.select(_count_below(y, bits), shifted, _lit(0, shifted))


def _right_shift(x: Atom, y: Atom) -> Atom:
    """The arithmetic shift ``floor(x / 2 ** y)``; from ``bits - 1`` on (and for negative
    counts) every bit is the sign bit: 0 or -1."""
    bits = _shift_operands("right_shift", x, y)
    divisor = convert(_powers_of_two(x, y, bits - 2), x.type.dtype, x.type.weak)
    sign = E.select(E.lt(x, _lit(0, x)), _lit(-1, x), _lit(0, x))
    return E.select(_count_below(y, bits - 1), E.floordiv(x, divisor), sign)


# -- NumPy ufuncs ---------------------------------------------------------------------


def _np_unary(kernel: Kernel, rule=_same) -> Callable[[Any], Atom]:
    def mapping(x: Any) -> Atom:
        return kernel(*_operands([x], rule))

    return mapping


def _np_binary(kernel: Kernel, rule=_same) -> Callable[[Any, Any], Any]:
    def mapping(x1: Any, x2: Any) -> Any:
        return kernel(*_operands([x1, x2], rule))

    return mapping


#: NumPy ufuncs over floats (integers compute in float64), and their ``math`` twins with
#: the error CPython raises when a finite argument gives NaN or infinity.
_DOMAIN, _RANGE = "domain", "range"
_FLOAT_FUNCS: list[tuple[tuple, Any, Kernel, str | None]] = [
    ((np.sin,), math.sin, E.sin, _DOMAIN),
    ((np.cos,), math.cos, E.cos, _DOMAIN),
    ((np.tan,), math.tan, E.tan, _DOMAIN),
    ((np.arcsin,), math.asin, E.asin, _DOMAIN),
    ((np.arccos,), math.acos, E.acos, _DOMAIN),
    ((np.arctan,), math.atan, E.atan, None),
    ((np.sinh,), math.sinh, E.sinh, _RANGE),
    ((np.cosh,), math.cosh, E.cosh, _RANGE),
    ((np.tanh,), math.tanh, E.tanh, None),
    ((np.arcsinh,), math.asinh, E.asinh, None),
    ((np.arccosh,), math.acosh, E.acosh, _DOMAIN),
    ((np.arctanh,), math.atanh, E.atanh, _DOMAIN),
    ((np.exp,), math.exp, E.exp, _RANGE),
    ((np.exp2,), getattr(math, "exp2", None), _exp2, _RANGE),  # math.exp2: 3.11+
    ((np.expm1,), math.expm1, E.expm1, _RANGE),
    ((np.log,), None, E.log, _DOMAIN),  # math.log takes a base: below
    ((np.log2,), math.log2, E.log2, _DOMAIN),
    ((np.log10,), math.log10, E.log10, _DOMAIN),
    ((np.log1p,), math.log1p, E.log1p, _DOMAIN),
    ((np.sqrt,), math.sqrt, E.sqrt, _DOMAIN),
    ((np.cbrt,), getattr(math, "cbrt", None), E.cbrt, None),  # math.cbrt: 3.11+
    ((np.fabs,), math.fabs, E.abs_, None),
    ((np.rint,), None, E.round_, None),
    ((np.deg2rad, np.radians), math.radians, _deg2rad, None),
    ((np.rad2deg, np.degrees), math.degrees, _rad2deg, None),
    ((), math.erf, E.erf, None),
    ((), math.erfc, E.erfc, None),
]

_NUMERIC_UNARY: list[tuple[tuple, Kernel, Callable]] = [
    ((np.negative,), _negative, _same),
    ((np.positive,), _positive, _same),
    ((np.absolute,), _absolute, _same),
    ((np.sign,), _sign, _same),
    ((np.square,), _square, _same),
    ((np.reciprocal,), _reciprocal, _same),
    ((np.floor,), _integral(E.floor), _same),
    ((np.ceil,), _integral(E.ceil), _same),
    ((np.trunc, np.fix), _integral(E.trunc), _same),  # fix rounds toward zero too
    ((np.invert,), _invert, _same),
    ((np.isnan,), _isnan, _same),
    ((np.isinf,), _isinf, _same),
    ((np.isfinite,), _isfinite, _same),
    ((np.signbit,), _signbit, _same),
    ((np.sinc,), _sinc, _inexact),
]

_BINARY: list[tuple[tuple, Kernel, Callable]] = [
    ((np.add,), _add, _same),
    ((np.subtract,), _subtract, _same),
    ((np.multiply,), _multiply, _same),
    ((np.divide,), E.div, _inexact),
    ((np.floor_divide,), _floor_divide, _same),
    ((np.remainder,), _remainder, _same),
    ((np.divmod,), _divmod, _same),
    ((np.fmod,), _fmod, _same),
    ((np.power,), _power, _same),
    ((np.float_power,), E.pow_, _double),
    ((np.maximum,), E.max_, _same),
    ((np.minimum,), E.min_, _same),
    ((np.fmax,), _nan_ignoring(E.max_), _same),
    ((np.fmin,), _nan_ignoring(E.min_), _same),
    ((np.arctan2,), E.atan2, to_float),
    ((np.hypot,), _hypot, to_float),
    ((np.logaddexp,), _logaddexp, to_float),
    ((np.logaddexp2,), _logaddexp2, to_float),
    ((np.copysign,), _copysign, to_float),
    ((np.heaviside,), _heaviside, to_float),
    ((np.bitwise_and,), _bitwise("bitwise_and", E.and_), _same),
    ((np.bitwise_or,), _bitwise("bitwise_or", E.or_), _same),
    ((np.bitwise_xor,), _bitwise("bitwise_xor", E.xor), _same),
    ((np.left_shift,), _left_shift, _same),
    ((np.right_shift,), _right_shift, _same),
]

for _fns, _kernel, _rule in [(f, k, to_float) for f, _, k, _ in _FLOAT_FUNCS] + _NUMERIC_UNARY:
    if _fns:
        register(*_fns)(_np_unary(_kernel, _rule))
for _fns, _kernel, _rule in _BINARY:
    register(*_fns)(_np_binary(_kernel, _rule))


# comparisons: NumPy 2 compares with a Python int outside the array's range exactly


def _out_of_range(x: Any, other: Any) -> bool:
    if not isinstance(x, int) or isinstance(x, bool):
        return False
    t = typeof(other)
    if t.weak or not t.dtype.is_int:
        return False
    info = np.iinfo(t.dtype.np)
    return not info.min <= x <= info.max


def _widened(x: int, other: Any) -> tuple[Any, Atom]:
    info = np.iinfo(np.int64)
    if info.min <= x <= info.max:
        return x, convert(other, int64)
    return math.copysign(math.inf, x), convert(other, float64)


def _comparable(x1: Any, x2: Any) -> tuple[Any, Any]:
    if _out_of_range(x1, x2):
        return _widened(x1, x2)
    if _out_of_range(x2, x1):
        return _widened(x2, x1)[::-1]
    return x1, x2


def _comparison(prim: Kernel, weak: bool) -> Callable[[Any, Any], Atom]:
    def mapping(x1: Any, x2: Any) -> Atom:
        return prim(*_operands(_comparable(x1, x2), weak=weak))

    return mapping


_COMPARISONS = {
    "eq": (np.equal, E.eq), "ne": (np.not_equal, E.ne), "lt": (np.less, E.lt),
    "le": (np.less_equal, E.le), "gt": (np.greater, E.gt), "ge": (np.greater_equal, E.ge),
}

for _name, (_fn, _prim) in _COMPARISONS.items():
    register(_fn)(_comparison(_prim, weak=False))
    operator_(_name)(_comparison(_prim, weak=True))  # Python scalars compare to a Python bool


def _logical(prim: Kernel) -> Callable[[Any, Any], Atom]:
    def mapping(x1: Any, x2: Any) -> Atom:
        a, b = _operands([x1, x2])
        return prim(_truth(a), _truth(b))

    return mapping


register(np.logical_and)(_logical(E.and_))
register(np.logical_or)(_logical(E.or_))
register(np.logical_xor)(_logical(E.xor))


@register(np.logical_not)
def logical_not(x: Any) -> Atom:
    (a,) = _operands([x])
    return E.not_(_truth(a))


@register(np.where)
def where(condition: Any, x: Any = None, y: Any = None) -> Atom:
    if x is None and y is None:
        raise UnsupportedError(
            "np.where(condition) has a data-dependent shape",
            hint="use np.where(condition, x, y), or a mask with a reduction",
        )
    if x is None or y is None:
        raise ValueError("either both or neither of x and y should be given")
    (c,) = _operands([condition])
    a, b = _operands([x, y])
    return E.select(*broadcast_args(_truth(c), a, b))


@register(np.nan_to_num)
def nan_to_num(x: Any, copy: bool = True, nan: Any = 0.0, posinf: Any = None,
               neginf: Any = None) -> Atom:
    (a,) = _operands([x])
    dt = a.type.dtype
    if not dt.is_float:
        return a
    info = np.finfo(dt.np)
    fills = [convert(v, dt) for v in (nan, _default(posinf, info.max), _default(neginf, info.min))]
    a, nan, posinf, neginf = broadcast_args(a, *fills)
    out = E.select(_isnan(a), nan, a)
    out = E.select(E.eq(a, _lit(math.inf, a)), posinf, out)
    return E.select(E.eq(a, _lit(-math.inf, a)), neginf, out)


def _default(value: Any, otherwise: Any) -> Any:
    return otherwise if value is None else value


# clip: NumPy's argument handling, then maximum/minimum in the promoted dtype


@register(np.clip)
def clip(a: Any, a_min: Any = np._NoValue, a_max: Any = np._NoValue, out: Any = None, *,
         min: Any = np._NoValue, max: Any = np._NoValue) -> Atom:
    no = np._NoValue
    if a_min is no and a_max is no:
        a_min, a_max = _default_no(min), _default_no(max)
    elif a_min is no or a_max is no:
        missing = "a_min" if a_min is no else "a_max"
        raise TypeError(f"clip() missing 1 required positional argument: '{missing}'")
    elif min is not no or max is not no:
        raise ValueError("Passing `min` or `max` keyword argument when `a_min` and `a_max` "
                         "are provided is forbidden.")
    _no_out(out)
    return _clip(a, a_min, a_max)


def _default_no(value: Any) -> Any:
    return None if value is np._NoValue else value


@method("clip")
def clip_method(self: Any, min: Any = None, max: Any = None, out: Any = None) -> Atom:
    _no_out(out)
    return _clip(self, min, max)


def _clip(a: Any, lo: Any, hi: Any) -> Atom:
    bounds = [b for b in (lo, hi) if b is not None]
    x, *bs = _operands([a, *bounds])
    if not bs:
        return _positive(x)
    if lo is not None:
        x, lo_b = broadcast_args(x, bs.pop(0))
        x = E.max_(x, lo_b)
    if hi is not None:
        x, hi_b = broadcast_args(x, bs.pop(0))
        x = E.min_(x, hi_b)
    return x


# round


def _power_of_ten(n: int) -> float:
    """NumPy's factor for round(x, n): exact up to 1e8, repeated multiplication beyond."""
    factor = 10.0 ** min(n, 9)
    for _ in range(n - 9):
        factor *= 10.0
    return factor


def _np_round(x: Atom, decimals: int) -> Atom:
    dt = x.type.dtype
    if dt.is_bool:
        raise UnsupportedError(
            "NumPy rounds booleans in float16, which pullback does not support",
            hint="convert first, e.g. x.astype(np.float32)",
        )
    if dt.is_int and decimals >= 0:
        return x
    if decimals == 0:
        return E.round_(x)
    y = convert(x, float64) if dt.is_int else x
    f = _lit(_power_of_ten(abs(decimals)), y)
    if decimals > 0:
        y = E.div(E.round_(E.mul(y, f)), f)
    else:
        y = E.mul(E.round_(E.div(y, f)), f)
    return convert(y, dt)


@register(np.round, np.around)
@method("round")
def round_(a: Any, decimals: Any = 0, out: Any = None) -> Atom:
    _no_out(out)
    return _np_round(*_operands([a]), _static_int(decimals, "decimals"))


# -- Python scalars: builtins round/pow/divmod and the operators ---------------------


def _split(a: Atom) -> tuple[Atom, Atom]:
    """Veltkamp's split of a float64 into two halves of 26 significant bits."""
    c = E.mul(_lit(134217729.0, a), a)
    hi = E.sub(c, E.sub(c, a))
    return hi, E.sub(a, hi)


def _product_error(a: Atom, b: Atom, p: Atom) -> Atom:
    """``a * b - p`` exactly, for ``p = a * b`` rounded (Dekker's two-product)."""
    (ah, al), (bh, bl) = _split(a), _split(b)
    err = E.sub(E.mul(ah, bh), p)
    for u, v in ((ah, bl), (al, bh), (al, bl)):
        err = E.add(err, E.mul(u, v))
    return err


def _py_round_float(x: Atom, n: int) -> Atom:
    """Python's ``round(x, n)``: the decimal rounding of x's exact value, ties to even.

    Scaling by 10**n rounds, and a rounded product can land on a tie the exact one is
    not on; the exact error of the scaling decides such ties.
    """
    if abs(n) > 22:
        raise UnsupportedError(
            f"round(x, {n}) of a float: only |ndigits| <= 22 is supported",
            hint="10**ndigits must be exact in float64",
        )
    f = _lit(10.0 ** abs(n), x)
    if n >= 0:
        y = E.mul(x, f)
        above = _product_error(x, f, y)  # sign of (exact x * f) - y
    else:
        y = E.div(x, f)
        p = E.mul(y, f)
        above = E.sub(E.sub(x, p), _product_error(y, f, p))  # sign of x - y * f, exactly
    zero = _lit(0, y)
    tie = E.eq(E.abs_(E.sub(y, E.trunc(y))), _lit(0.5, y))
    q = E.select(E.and_(tie, E.gt(above, zero)), E.ceil(y),
                 E.select(E.and_(tie, E.lt(above, zero)), E.floor(y), E.round_(y)))
    r = E.div(q, f) if n >= 0 else E.mul(q, f)
    # beyond 2**52 the scaled value is an integer: rounding leaves x as it is
    return E.select(E.lt(E.abs_(y), _lit(2.0**52, y)), r, x)


def _py_round_int(x: Atom, n: int) -> Atom:
    """Python's ``round(i, n)`` of an int: to a multiple of 10**-n, ties to even."""
    if n >= 0:
        return x
    if n < -18:
        raise UnsupportedError(f"round(i, {n}): 10**{-n} does not fit in pullback's 64-bit ints")
    f = _lit(10**-n, x)
    q = E.floordiv(x, f)
    twice = E.mul(_lit(2, x), E.sub(x, E.mul(q, f)))
    odd = E.eq(E.mod(q, _lit(2, x)), _lit(1, x))
    up = E.or_(E.gt(twice, f), E.and_(E.eq(twice, f), odd))
    return E.mul(E.select(up, E.add(q, _lit(1, x)), q), f)


@register(builtins.round)
def py_round(number: Any, ndigits: Any = None) -> Atom:
    a = as_atom(number)
    if a.type.shape != ():
        raise TypeError("type numpy.ndarray doesn't define __round__ method")
    if ndigits is None:  # an int, whatever the number was
        if _is("f", a):
            return python_int(E.round_(a), too_big=_TOO_BIG)
        return convert(a, int64, True)
    n = _static_int(ndigits, "ndigits")
    if not a.type.weak:  # a NumPy scalar rounds as np.round
        return _np_round(a, n)
    if _is("f", a):
        return _py_round_float(a, n)
    return _py_round_int(convert(a, int64, True), n)


_TOO_BIG = "pullback holds Python ints in 64 bits: {:.17g} does not fit"


def _py_truediv(x: Any, y: Any) -> Atom:
    a, b = _py_numbers(x, y)
    _nonzero_divisor("truediv", b)
    return E.div(convert(a, float64, True), convert(b, float64, True))


def _py_divides(op: str, kernel: Kernel) -> Callable[[Any, Any], Any]:
    def python(x: Any, y: Any) -> Any:
        a, b = _py_numbers(x, y)
        _nonzero_divisor(op, b)
        return kernel(a, b)

    return python


def _py_pow(x: Any, y: Any) -> Atom:
    a, b = _py_numbers(x, y)
    if _is("i", a):
        if isinstance(b, Lit) and b.value < 0:  # int ** negative int is a float
            return _py_float_pow(convert(a, float64, True), convert(b, float64, True))
        if not isinstance(b, Lit):
            _require(E.ge(b, _lit(0, b)), ValueError,
                     "int ** negative int is a float in Python, which pullback cannot type "
                     "(make the exponent a float or a compile-time constant)")
        return E.pow_(a, b)
    return _py_float_pow(a, b)


def _c_pow(a: Atom, b: Atom) -> Atom:
    """C's ``pow``, which Python uses: NumPy's power takes a square root for an exponent of
    0.5, and so gives NaN for -inf and -0.0 for -0.0 where C gives inf and 0.0."""
    r = E.pow_(a, b)
    half = E.eq(b, _lit(0.5, b))
    # + 0.0 turns -0.0 into 0.0 and keeps pow's derivative at 0 (inf, as sqrt's); abs(a)
    # there would leave pow a zero cotangent, and 0 * inf is NaN
    r = E.select(E.and_(half, E.eq(a, _lit(0, a))), E.add(r, _lit(0.0, r)), r)
    return E.select(E.and_(half, E.eq(a, _lit(-math.inf, a))), _lit(math.inf, r), r)


def _py_float_pow(a: Atom, b: Atom) -> Atom:
    """Python's float ``**``: the C ``pow`` with Python's errors for finite operands."""
    zero = _lit(0, a)
    finite = E.and_(_isfinite(a), _isfinite(b))
    _forbid(E.and_(E.eq(a, zero), E.and_(E.lt(b, zero), _isfinite(b))), ZeroDivisionError,
            "0.0 cannot be raised to a negative power")
    _forbid(E.and_(finite, E.and_(E.lt(a, zero), E.ne(b, E.floor(b)))), ValueError,
            "a negative float to a fractional power is a complex number in Python, which "
            "pullback does not support")
    r = _c_pow(a, b)
    _forbid(E.and_(finite, _isinf(r)), OverflowError, "(34, 'Numerical result out of range')")
    return r


def _py_kernel(kernel: Kernel) -> Callable[..., Atom]:
    return lambda *xs: kernel(*_py_numbers(*xs))


def _py_invert(x: Any) -> Atom:
    (a,) = _py_numbers(x)
    if _is("f", a):
        raise TypeError("bad operand type for unary ~: 'float'")
    return E.not_(a)


def _py_bitwise(name: str, prim: Kernel) -> Callable[[Any, Any], Atom]:
    def python(x: Any, y: Any) -> Atom:
        a, b = _operands([x, y], weak=True)  # bool & bool stays a bool
        if _is("f", a):
            raise TypeError(f"unsupported operand type(s) for {name}: 'float' and 'float'")
        return prim(a, b)

    return python


def _py_shift(symbol: str, kernel: Kernel) -> Callable[[Any, Any], Atom]:
    """Python's shifts of ints (held in int64): a negative count is a ValueError, and a
    left shift past int64 an OverflowError (Python's int would grow)."""

    def python(x: Any, y: Any) -> Atom:
        a, b = _py_numbers(x, y)
        if _is("f", a):
            names = ({"b": "bool", "i": "int", "f": "float"}[typeof(v).dtype.kind]
                     for v in (x, y))
            raise TypeError("unsupported operand type(s) for {}: '{}' and '{}'".format(
                symbol, *names))
        _forbid(E.lt(b, _lit(0, b)), ValueError, "negative shift count")
        out = kernel(a, b)
        if symbol == "<<":
            _forbid(E.ne(_right_shift(out, b), a), OverflowError,
                    "the result of << is too large for pullback's int64 Python ints")
        return out

    return python


def _either(numpy: Callable[..., Any], python: Callable[..., Any]) -> Callable[..., Any]:
    """An operator: Python's semantics on Python scalars only, NumPy's otherwise."""

    def mapping(*xs: Any) -> Any:
        return (python if _all_weak(*xs) else numpy)(*xs)

    return mapping


_OPERATORS: dict[tuple[str, ...], tuple[Any, Callable[..., Any]]] = {
    ("add",): (np.add, _py_kernel(E.add)),
    ("sub",): (np.subtract, _py_kernel(E.sub)),
    ("mul",): (np.multiply, _py_kernel(E.mul)),
    ("truediv",): (np.divide, _py_truediv),
    ("floordiv",): (np.floor_divide, _py_divides("floordiv", E.floordiv)),
    ("mod",): (np.remainder, _py_divides("mod", E.mod)),
    ("pow",): (np.power, _py_pow),
    ("neg",): (np.negative, _py_kernel(E.neg)),
    ("pos",): (np.positive, _py_kernel(lambda a: a)),
    ("abs",): (np.absolute, _py_kernel(E.abs_)),
    ("invert", "inv"): (np.invert, _py_invert),
    ("and_",): (np.bitwise_and, _py_bitwise("&", E.and_)),
    ("or_",): (np.bitwise_or, _py_bitwise("|", E.or_)),
    ("xor",): (np.bitwise_xor, _py_bitwise("^", E.xor)),
    ("lshift",): (np.left_shift, _py_shift("<<", _left_shift)),
    ("rshift",): (np.right_shift, _py_shift(">>", _right_shift)),
}

for _names, (_np_fn, _python) in _OPERATORS.items():
    operator_(*_names)(_either(CALLABLES[_np_fn], _python))

register(builtins.abs)(OPERATORS["abs"])
register(builtins.divmod)(_either(CALLABLES[np.divmod], _py_divides("divmod", _divmod)))


@register(builtins.pow)
def py_pow(base: Any, exp: Any, mod: Any = None) -> Atom:
    if mod is not None:
        raise UnsupportedError("pow() with a modulus is not supported",
                               hint="use (base ** exp) % mod with small numbers")
    return OPERATORS["pow"](base, exp)


# -- math -----------------------------------------------------------------------------


def _py_float(x: Any) -> Atom:
    """A ``math`` function's argument: a 0-d number, as a Python float."""
    a = as_atom(x)
    if a.type.shape != ():
        raise TypeError("only 0-dimensional arrays can be converted to Python scalars")
    return convert(a, float64, True)


def _math_errors(r: Atom, args: list[Atom], errors: str) -> None:
    """CPython's rule: NaN from non-NaN arguments is a domain error; infinity from finite
    ones is a range error (overflow) or a domain error (a pole).  Only a result that is
    not finite is looked at closer: in a scalar loop the full test on every call costs
    5 % of a ``math.sin``."""

    def closer(r: Atom, *args: Atom) -> list:
        finite = reduce(E.and_, [_isfinite(a) for a in args])
        no_nan = E.not_(reduce(E.or_, [_isnan(a) for a in args]))
        to_inf = E.and_(_isinf(r), finite)
        domain = E.and_(_isnan(r), no_nan)
        if errors == _DOMAIN:
            domain = E.or_(domain, to_inf)
        _forbid(domain, ValueError, "math domain error")
        if errors == _RANGE:
            _forbid(to_inf, OverflowError, "math range error")
        return []

    types = [x.type for x in (r, *args)]
    C.cond(E.not_(_isfinite(r)), r, *args, then=current().block(types, closer),
           orelse=current().block(types, lambda *_: []))


def _math(kernel: Kernel, errors: str | None) -> Callable[..., Atom]:
    def mapping(*xs: Any) -> Atom:
        args = [_py_float(x) for x in xs]
        r = kernel(*args)
        if errors:
            _math_errors(r, args, errors)
        return r

    return mapping


for _, _math_fn, _kernel, _errors in _FLOAT_FUNCS:
    if _math_fn is not None:
        register(_math_fn)(_math(_kernel, _errors))

register(math.atan2)(_math(E.atan2, None))
register(math.copysign)(_math(_copysign, None))
register(math.fmod)(_math(_fmod, _DOMAIN))
register(math.isnan)(_math(_isnan, None))
register(math.isinf)(_math(_isinf, None))
register(math.isfinite)(_math(_isfinite, None))


@register(math.hypot)
def math_hypot(*coordinates: Any) -> Atom:
    if not coordinates:
        return Lit(0.0)
    return _hypot(*(_py_float(c) for c in coordinates))


@register(math.log)
def math_log(x: Any, base: Any = None) -> Atom:
    log = _math(E.log, _DOMAIN)
    num = log(x)
    if base is None:
        return num
    den = log(base)
    _require(E.ne(den, _lit(0, den)), ZeroDivisionError, "float division by zero")
    return E.div(num, den)


@register(math.pow)
def math_pow(x: Any, y: Any) -> Atom:
    a, b = _py_float(x), _py_float(y)
    r = _c_pow(a, b)
    finite = E.and_(_isfinite(a), _isfinite(b))
    at_zero = E.eq(a, _lit(0, a))
    pole = E.and_(_isinf(r), at_zero)
    _forbid(E.and_(finite, E.or_(_isnan(r), pole)), ValueError, "math domain error")
    _forbid(E.and_(finite, E.and_(_isinf(r), E.not_(at_zero))), OverflowError,
            "math range error")
    return r


def _math_integral(prim: Kernel, numpy_scalars: bool = True) -> Callable[[Any], Atom]:
    """math.floor/ceil/trunc: a Python int.  ``trunc`` calls ``__trunc__``, which NumPy
    values lack (np.float64 inherits Python float's)."""

    def mapping(x: Any) -> Atom:
        a = as_atom(x)
        if a.type.shape != ():
            raise TypeError("only 0-dimensional arrays can be converted to Python scalars")
        if not (numpy_scalars or a.type.weak or a.type.dtype == float64):
            raise TypeError(f"type numpy.{a.type.dtype.np.name} doesn't define __trunc__ method")
        if not _is("f", a):
            return convert(a, int64, True)
        return python_int(prim(a), too_big=_TOO_BIG)

    return mapping


register(math.floor)(_math_integral(E.floor))
register(math.ceil)(_math_integral(E.ceil))
register(math.trunc)(_math_integral(E.trunc, numpy_scalars=False))


# -- methods ----------------------------------------------------------------------------


@method("astype")
def astype(self: Any, dtype: Any, order: str = "K", casting: str = "unsafe",
           subok: bool = True, copy: bool = True) -> Atom:
    a = as_atom(self)
    dt = as_dtype(dtype)
    if casting != "unsafe" and not np.can_cast(a.type.dtype.np, dt.np, casting):
        raise TypeError(f"Cannot cast array data from dtype('{a.type.dtype.np}') to "
                        f"dtype('{dt.np}') according to the rule '{casting}'")
    return convert(a, dt)


@method("copy")
def copy_method(self: Any, order: str = "C") -> Atom:
    return convert(self, typeof(self).dtype)


def _scalar_type(dt: DType) -> Callable[..., Atom]:
    """``np.float32(x)`` and friends convert.  A Python number becomes an integer
    through Python's ``int()``, so NaN, infinity and values out of range raise."""

    def mapping(value: Any = 0) -> Atom:
        a = as_array(value, dt) if isinstance(value, (list, tuple)) else as_atom(value)
        if not (a.type.weak and dt.is_int):
            return convert(a, dt)
        return python_int(E.trunc(a) if _is("f", a) else a, dt, weak=False)

    return mapping


for _dt in (bool_, int32, int64, float32, float64):
    register(_dt.np.type)(_scalar_type(_dt))


__all__ = ["clip", "nan_to_num", "py_round", "python_int", "round_", "where"]
