"""Elementwise primitives: unary math, binary arithmetic and comparisons, select, convert.

Operands of a binary op have one dtype (``numpy_api`` promotes first) and either the
same shape or shape ``()`` — a scalar operand is broadcast, anything more general goes
through an explicit ``broadcast_in_dim``.  A result is weak only when every operand is.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ShapeError
from ..ir.op import Op
from ..ir.types import TensorType, bool_

_KIND_NAMES = {"b": "boolean", "i": "integer", "f": "floating-point"}


def check_kinds(name: str, kinds: str, types: list[TensorType]) -> None:
    for t in types:
        if t.dtype.kind not in kinds:
            want = " or ".join(_KIND_NAMES[k] for k in kinds)
            shown = ", ".join(str(x) for x in types)
            raise ShapeError(f"{name} expects {want} operands, got {shown}")


def _common_shape(name: str, types: list[TensorType]) -> tuple[int, ...]:
    shapes = {t.shape for t in types if t.shape != ()}
    if len(shapes) > 1:
        shown = ", ".join(str(t) for t in types)
        raise ShapeError(
            f"{name} needs operands of one shape (or 0-d), got {shown}",
            hint="broadcast explicitly with broadcast_in_dim",
        )
    return shapes.pop() if shapes else ()


def _same_dtype(name: str, types: list[TensorType]) -> None:
    if len({t.dtype for t in types}) > 1:
        shown = ", ".join(str(t) for t in types)
        raise ShapeError(f"{name} needs operands of one dtype, got {shown}")


def _elementwise_type(name, kinds, types, out_dtype=None) -> TensorType:
    check_kinds(name, kinds, types)
    _same_dtype(name, types)
    shape = _common_shape(name, types)
    dt = out_dtype or types[0].dtype
    return TensorType(shape, dt, weak=shape == () and all(t.weak for t in types))


def quiet(fn):
    """A NumPy impl with floating-point warnings silenced (inf/nan are values here)."""

    def impl(*xs, **params):
        with np.errstate(all="ignore"):
            return fn(*xs, **params)

    impl.__name__ = getattr(fn, "__name__", "impl")
    return impl


def unary(name: str, fn, kinds: str = "f") -> Op:
    return Op(
        name,
        infer=lambda ts: _elementwise_type(name, kinds, ts),
        impl=quiet(fn),
        fusion="elementwise",
    )


def binary(name: str, fn, kinds: str = "if", out_dtype=None) -> Op:
    return Op(
        name,
        infer=lambda ts: _elementwise_type(name, kinds, ts, out_dtype),
        impl=quiet(fn),
        fusion="elementwise",
    )


def _from_math(fn):
    """An elementwise impl of a ``math`` function that NumPy lacks."""

    def impl(x):
        return np.vectorize(fn, otypes=[np.float64])(x).astype(x.dtype)

    impl.__name__ = fn.__name__
    return impl


def _not(x):
    return np.logical_not(x) if x.dtype == np.bool_ else np.invert(x)


# unary
neg = unary("neg", np.negative, "if")
abs_ = unary("abs", np.absolute, "if")
sign = unary("sign", np.sign, "if")
floor = unary("floor", np.floor)
ceil = unary("ceil", np.ceil)
round_ = unary("round", np.rint)  # half to even, as np.round
trunc = unary("trunc", np.trunc)
exp = unary("exp", np.exp)
expm1 = unary("expm1", np.expm1)
log = unary("log", np.log)
log1p = unary("log1p", np.log1p)
# exact at powers of the base (log(x) / log(10) is not: 1000 gives 2.9999999999999996)
log2 = unary("log2", np.log2)
log10 = unary("log10", np.log10)
sqrt = unary("sqrt", np.sqrt)
cbrt = unary("cbrt", np.cbrt)
sin = unary("sin", np.sin)
cos = unary("cos", np.cos)
tan = unary("tan", np.tan)
asin = unary("asin", np.arcsin)
acos = unary("acos", np.arccos)
atan = unary("atan", np.arctan)
sinh = unary("sinh", np.sinh)
cosh = unary("cosh", np.cosh)
tanh = unary("tanh", np.tanh)
asinh = unary("asinh", np.arcsinh)
acosh = unary("acosh", np.arccosh)
atanh = unary("atanh", np.arctanh)
erf = unary("erf", _from_math(math.erf))
erfc = unary("erfc", _from_math(math.erfc))  # 1 - erf(x) loses every digit in the tail
not_ = unary("not", _not, "bi")

# binary arithmetic
add = binary("add", np.add)
sub = binary("sub", np.subtract)
mul = binary("mul", np.multiply)
div = binary("div", np.true_divide, "f")
floordiv = binary("floordiv", np.floor_divide)
mod = binary("mod", np.remainder)
pow_ = binary("pow", np.power)
max_ = binary("max", np.maximum, "bif")
min_ = binary("min", np.minimum, "bif")
atan2 = binary("atan2", np.arctan2, "f")
and_ = binary("and", np.bitwise_and, "bi")
or_ = binary("or", np.bitwise_or, "bi")
xor = binary("xor", np.bitwise_xor, "bi")

# comparisons
eq = binary("eq", np.equal, "bif", bool_)
ne = binary("ne", np.not_equal, "bif", bool_)
lt = binary("lt", np.less, "bif", bool_)
le = binary("le", np.less_equal, "bif", bool_)
gt = binary("gt", np.greater, "bif", bool_)
ge = binary("ge", np.greater_equal, "bif", bool_)


def _select_infer(ts: list[TensorType]) -> TensorType:
    pred, a, b = ts
    if pred.dtype != bool_:
        raise ShapeError(f"select needs a boolean predicate, got {pred}")
    _same_dtype("select", [a, b])
    shape = _common_shape("select", ts)
    return TensorType(shape, a.dtype, weak=shape == () and a.weak and b.weak)


select = Op(
    "select",
    infer=_select_infer,
    impl=lambda p, a, b: np.asarray(np.where(p, a, b)),
    fusion="elementwise",
)


def _convert_infer(ts, dtype, weak):
    (x,) = ts
    if weak and x.shape != ():
        raise ShapeError(f"convert: only 0-d values can be weak, got {x}")
    return TensorType(x.shape, dtype, weak)


convert = Op(
    "convert",
    infer=_convert_infer,
    impl=quiet(lambda x, dtype, weak: np.asarray(x).astype(dtype.np)),
    params={"dtype": "dtype", "weak": "bool"},
    fusion="elementwise",
)
