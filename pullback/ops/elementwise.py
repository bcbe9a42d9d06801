"""Elementwise primitives: unary math, binary arithmetic and comparisons, select, convert.

Operands of a binary op have one dtype (``numpy_api`` promotes first) and either the
same shape or shape ``()`` — a scalar operand is broadcast, anything more general goes
through an explicit ``broadcast_in_dim``.  A result is weak only when every operand is.

Derivatives: a unary op declares ``deriv(x, y)``, the derivative of ``y = f(x)``; a
binary op declares ``partials(x, y, out, need)``, the two partial derivatives (``None``
for one that is zero), where ``need`` marks the operands that are differentiated: a
partial with singularities of its own (pow's ``out * log x``) is built only for them, so
a constant operand's term never meets a zero and makes NaN in a derivative of the
derivative.  The jvp and vjp rules follow from them; piecewise-constant ops (floor,
sign, comparisons ...) have zero derivatives, as in other NumPy-based AD tools.

At points where a derivative is infinite or undefined, rules follow JAX: sqrt, cbrt, log
... give inf at their singular points, abs and sign give 0 at 0, max/min split ties
evenly, atan2 gives NaN at (0, 0).  Where a rule picks between formulas with ``select``,
the untaken formula is evaluated at a safe operand too, because a derivative of the
derivative sends it a zero cotangent, and zero times an infinite partial is NaN.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ShapeError
from ..ir.core import Lit
from ..ir.op import Op
from ..ir.types import TensorType, bool_
from .batching import elementwise
from .derivs import const, sum_to, zero_jvp, zero_vjp, zeros

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


def _unary_rules(deriv):
    """jvp and vjp of ``y = f(x)`` from ``deriv(x, y)``; ``deriv=None``: zero."""
    if deriv is None:
        return zero_jvp, zero_vjp

    def jvp(primals, tangents, outs):
        (t,) = tangents
        return [mul(t, deriv(primals[0], outs[0]))]

    def vjp(primals, outs, cts):
        return [mul(cts[0], deriv(primals[0], outs[0]))]

    return jvp, vjp


def unary(name: str, fn, kinds: str = "f", deriv=None) -> Op:
    jvp, vjp = _unary_rules(deriv)
    return Op(
        name,
        infer=lambda ts: _elementwise_type(name, kinds, ts),
        arity=1,
        impl=fn,
        fusion="elementwise",
        jvp=jvp,
        vjp=vjp,
        batch=elementwise(name),
    )


def _binary_rules(partials):
    """jvp and vjp of ``out = f(x, y)`` from ``partials(x, y, out, need) -> (dx, dy)``,
    which builds at least the partials that ``need`` marks: those of the operands with a
    tangent (in the vjp: those that are not literals)."""
    if partials is None:
        return zero_jvp, zero_vjp

    def jvp(primals, tangents, outs):
        need = [t is not None for t in tangents]
        ds = partials(*primals, outs[0], need)
        terms = [_scaled(t, d) for t, d, n in zip(tangents, ds, need, strict=True)
                 if n and d is not None]
        total = terms[0] if terms else None
        for term in terms[1:]:
            total = add(total, term)
        return [None if total is None else _fill(total, outs[0].type)]

    def vjp(primals, outs, cts):
        (ct,) = cts
        need = [not isinstance(x, Lit) for x in primals]
        ds = partials(*primals, outs[0], need)
        return [None if d is None or not n else sum_to(_scaled(ct, d), x.type)
                for x, d, n in zip(primals, ds, need, strict=True)]

    return jvp, vjp


def _scaled(t, d):
    """``t * d``, without the product when ``d`` is the constant 1 or -1."""
    if isinstance(d, Lit) and d.type.shape == () and d.value in (1, -1):
        return t if d.value == 1 else neg(t)
    return mul(t, d)


def _fill(t, like: TensorType):
    """A tangent of a 0-d operand broadcast to the shape of the result."""
    return t if t.type.shape == like.shape else add(t, zeros(like))


def binary(name: str, fn, kinds: str = "if", out_dtype=None, partials=None) -> Op:
    jvp, vjp = _binary_rules(partials)
    return Op(
        name,
        infer=lambda ts: _elementwise_type(name, kinds, ts, out_dtype),
        arity=2,
        impl=fn,
        fusion="elementwise",
        jvp=jvp,
        vjp=vjp,
        batch=elementwise(name),
    )


def _from_math(fn):
    """An elementwise impl of a ``math`` function that NumPy lacks."""

    def impl(x):
        return np.vectorize(fn, otypes=[np.float64])(x).astype(x.dtype)

    impl.__name__ = fn.__name__
    return impl


def _from_scipy(name: str):
    """An elementwise impl that is ``scipy.special``'s function of that name, imported
    when first run: only mappings of SciPy's functions emit these ops, so the user's
    program has imported SciPy already."""

    def impl(*xs):
        import scipy.special

        return np.asarray(getattr(scipy.special, name)(*xs)).astype(xs[-1].dtype)

    impl.__name__ = name
    return impl


def _not(x):
    return np.logical_not(x) if x.dtype == np.bool_ else np.invert(x)


def _recip(x):
    return div(const(1, x.type), x)


def _one_minus_sq(x):
    return sub(const(1, x.type), mul(x, x))


def _erf_deriv(x, sign_):
    return mul(const(sign_ * 2 / math.sqrt(math.pi), x.type), exp(neg(mul(x, x))))


def _ndtri_deriv(y):
    """1 / pdf(y) of the standard normal."""
    return mul(const(math.sqrt(2 * math.pi), y.type), exp(mul(const(0.5, y.type), mul(y, y))))


def _i1e_deriv(x, y):
    """i0e(x) - sign(x) i1e(x) - i1e(x) / x, whose last term is 1/2 at x == 0 (the
    limit), where the division gets a safe operand."""
    at_zero = eq(x, const(0, x.type))
    ratio = div(y, select(at_zero, const(1, x.type), x))
    return sub(sub(i0e(x), mul(sign(x), y)), select(at_zero, const(0.5, x.type), ratio))


def _pow_dx(x, y, out):
    """y x^(y-1), and 0 where y == 0 (also at x == 0, where y x^(y-1) is 0 * inf).  There
    the untaken formula gets the exponent 1, so that its own derivatives stay finite."""
    if isinstance(y, Lit) and np.all(y.value != 0):  # a constant exponent: no selects
        return mul(y, pow_(x, sub(y, const(1, y.type))))
    is_zero = eq(y, const(0, y.type))
    safe_y = select(is_zero, const(1, y.type), y)
    return select(is_zero, zeros(out.type), mul(safe_y, pow_(x, sub(safe_y, const(1, y.type)))))


def _pow_dy(x, y, out):
    """out log|x|, and 0 where x == 0 (the limit along y > 0; JAX's choice too).

    For x < 0, NumPy's x**y is real only for integer y, where its sign is (-1)^y; the rule
    holds that sign fixed, which makes this out log|x|: finite where out is, NaN only
    where out is NaN, and the mixed second derivatives agree.  (JAX takes log x, NaN,
    which zero tangents then spread over a whole Hessian; TensorFlow takes 0.)"""
    is_zero = eq(x, const(0, x.type))
    safe_x = select(is_zero, const(1, x.type), x)
    return select(is_zero, zeros(out.type), mul(out, log(abs_(safe_x))))


def _pow_partials(x, y, out, need):
    return (_pow_dx(x, y, out) if need[0] else None, _pow_dy(x, y, out) if need[1] else None)


def _pick(cmp, x, y):
    """Partials of max/min: the chosen operand gets the derivative, ties split it evenly
    (JAX's choice)."""
    half = const(0.5, x.type)
    wx = select(cmp(x, y), const(1, x.type), select(eq(x, y), half, const(0, x.type)))
    return wx, sub(const(1, x.type), wx)


def _atan2_partials(y, x):
    """At (0, 0): 0 / 0, NaN, as JAX (no direction is the derivative there)."""
    r2 = add(mul(x, x), mul(y, y))
    return div(x, r2), neg(div(y, r2))


# unary
neg = unary("neg", np.negative, "if", lambda x, y: const(-1, x.type))
abs_ = unary("abs", np.absolute, "if", lambda x, y: sign(x))
sign = unary("sign", np.sign, "if")
floor = unary("floor", np.floor)
ceil = unary("ceil", np.ceil)
round_ = unary("round", np.rint)  # half to even, as np.round
trunc = unary("trunc", np.trunc)
exp = unary("exp", np.exp, deriv=lambda x, y: y)
expm1 = unary("expm1", np.expm1, deriv=lambda x, y: add(y, const(1, y.type)))
log = unary("log", np.log, deriv=lambda x, y: _recip(x))
log1p = unary("log1p", np.log1p, deriv=lambda x, y: _recip(add(x, const(1, x.type))))
# exact at powers of the base (log(x) / log(10) is not: 1000 gives 2.9999999999999996)
log2 = unary("log2", np.log2, deriv=lambda x, y: _recip(mul(x, const(math.log(2), x.type))))
log10 = unary("log10", np.log10, deriv=lambda x, y: _recip(mul(x, const(math.log(10), x.type))))
sqrt = unary("sqrt", np.sqrt, deriv=lambda x, y: div(const(0.5, y.type), y))
cbrt = unary("cbrt", np.cbrt, deriv=lambda x, y: _recip(mul(const(3, y.type), mul(y, y))))
sin = unary("sin", np.sin, deriv=lambda x, y: cos(x))
cos = unary("cos", np.cos, deriv=lambda x, y: neg(sin(x)))
tan = unary("tan", np.tan, deriv=lambda x, y: add(const(1, y.type), mul(y, y)))
asin = unary("asin", np.arcsin, deriv=lambda x, y: _recip(sqrt(_one_minus_sq(x))))
acos = unary("acos", np.arccos, deriv=lambda x, y: neg(_recip(sqrt(_one_minus_sq(x)))))
atan = unary("atan", np.arctan, deriv=lambda x, y: _recip(add(const(1, x.type), mul(x, x))))
sinh = unary("sinh", np.sinh, deriv=lambda x, y: cosh(x))
cosh = unary("cosh", np.cosh, deriv=lambda x, y: sinh(x))
tanh = unary("tanh", np.tanh, deriv=lambda x, y: sub(const(1, y.type), mul(y, y)))
asinh = unary("asinh", np.arcsinh,
              deriv=lambda x, y: _recip(sqrt(add(mul(x, x), const(1, x.type)))))
acosh = unary("acosh", np.arccosh,
              deriv=lambda x, y: _recip(sqrt(sub(mul(x, x), const(1, x.type)))))
atanh = unary("atanh", np.arctanh, deriv=lambda x, y: _recip(_one_minus_sq(x)))
erf = unary("erf", _from_math(math.erf), deriv=lambda x, y: _erf_deriv(x, 1))
# erfc: 1 - erf(x) loses every digit in the tail
erfc = unary("erfc", _from_math(math.erfc), deriv=lambda x, y: _erf_deriv(x, -1))
# scipy.special's functions that no composition computes accurately (the C backend has
# its own implementations, runtime.h); only mappings of scipy.special emit them.
lgamma = unary("lgamma", _from_scipy("gammaln"),
               deriv=lambda x, y: polygamma(const(0, x.type), x))
erfinv = unary("erfinv", _from_scipy("erfinv"),
               deriv=lambda x, y: mul(const(math.sqrt(math.pi) / 2, y.type), exp(mul(y, y))))
ndtri = unary("ndtri", _from_scipy("ndtri"), deriv=lambda x, y: _ndtri_deriv(y))
i0e = unary("i0e", _from_scipy("i0e"), deriv=lambda x, y: sub(i1e(x), mul(sign(x), y)))
i1e = unary("i1e", _from_scipy("i1e"), deriv=_i1e_deriv)
not_ = unary("not", _not, "bi")

# binary arithmetic
add = binary("add", np.add,
             partials=lambda x, y, out, need: (const(1, x.type), const(1, y.type)))
sub = binary("sub", np.subtract,
             partials=lambda x, y, out, need: (const(1, x.type), const(-1, y.type)))
mul = binary("mul", np.multiply, partials=lambda x, y, out, need: (y, x))
div = binary("div", np.true_divide, "f",
             partials=lambda x, y, out, need: (_recip(y), neg(div(out, y))))
floordiv = binary("floordiv", np.floor_divide)
mod = binary("mod", np.remainder,
             partials=lambda x, y, out, need: (const(1, x.type), neg(floordiv(x, y))))
pow_ = binary("pow", np.power, partials=_pow_partials)
max_ = binary("max", np.maximum, "bif", partials=lambda x, y, out, need: _pick(gt, x, y))
min_ = binary("min", np.minimum, "bif", partials=lambda x, y, out, need: _pick(lt, x, y))
atan2 = binary("atan2", np.arctan2, "f",
               partials=lambda y, x, out, need: _atan2_partials(y, x))
# polygamma(n, x): the n-th derivative of digamma; the order n is an integer-valued
# constant, so it has no derivative
polygamma = binary("polygamma", _from_scipy("polygamma"), "f",
                   partials=lambda n, x, out, need: (None, polygamma(add(n, const(1, n.type)), x)))
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


def _select_jvp(primals, tangents, outs):
    p, a, b = primals
    _, ta, tb = tangents
    if ta is None and tb is None:
        return [None]
    out = outs[0].type
    ta = zeros(a.type) if ta is None else ta
    tb = zeros(b.type) if tb is None else tb
    return [_fill(select(p, ta, tb), out)]


def _select_vjp(primals, outs, cts):
    p, a, b = primals
    (ct,) = cts
    zero = zeros(ct.type)
    return [None, sum_to(select(p, ct, zero), a.type), sum_to(select(p, zero, ct), b.type)]


select = Op(
    "select",
    infer=_select_infer,
    arity=3,
    impl=lambda p, a, b: np.asarray(np.where(p, a, b)),
    fusion="elementwise",
    jvp=_select_jvp,
    vjp=_select_vjp,
    batch=elementwise("select"),
)


def _convert_infer(ts, dtype, weak):
    (x,) = ts
    if weak and x.shape != ():
        raise ShapeError(f"convert: only 0-d values can be weak, got {x}")
    return TensorType(x.shape, dtype, weak)


def _convert_jvp(primals, tangents, outs, dtype, weak):
    (t,) = tangents
    if t is None or not dtype.is_float:
        return [None]
    return [convert(t, dtype=dtype, weak=weak)]


def _convert_vjp(primals, outs, cts, dtype, weak):
    (x,) = primals
    if not x.type.dtype.is_float:
        return [None]
    return [convert(cts[0], dtype=x.type.dtype, weak=x.type.weak)]


def _convert_batch(args, dims, size, dtype, weak):
    """Only 0-d values are weak, so the lanes together never are."""
    (x,), (d,) = args, dims
    return [convert(x, dtype=dtype, weak=False)], [d]


convert = Op(
    "convert",
    infer=_convert_infer,
    arity=1,
    impl=lambda x, dtype, weak: np.asarray(x).astype(dtype.np),
    params={"dtype": "dtype", "weak": "bool"},
    fusion="elementwise",
    jvp=_convert_jvp,
    vjp=_convert_vjp,
    batch=_convert_batch,
)


def norm_root(s, inverse_p=None):
    """``sqrt(s)`` (``s ** inverse_p``) of a sum ``s`` of squares (p-th powers) of
    magnitudes: a norm, a standard deviation.  At ``s == 0`` such a function has a kink,
    like abs at 0, and its derivative there is 0, abs's (and jnp.hypot's) choice, instead
    of the root's inf times the sum's zero derivative, NaN.  The root gets a safe operand
    there too (see the module docstring)."""
    at_zero = eq(s, const(0, s.type))
    safe = select(at_zero, const(1, s.type), s)
    root = sqrt(safe) if inverse_p is None else pow_(safe, inverse_p)
    return select(at_zero, const(0, s.type), root)
