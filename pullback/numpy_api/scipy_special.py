"""``scipy.special``, mapped once a program imports it (``optional.py``: SciPy stays
optional, and pullback does not import it for programs that do not).

Functions that no composition computes accurately (``erfinv``, ``gammaln``,
``digamma``/``polygamma``, ``ndtri``, ``i0e``, ``i1e``, and ``erf``/``erfc``) are
primitives with C implementations of their own; the rest are compositions of primitives,
written to stay accurate where the textbook formula is not (``expit`` of large negative
numbers, ``log_ndtr`` far in the lower tail, ``logit`` near 1/2), so their derivatives
follow from the primitives'.  Float32 operands compute in float32 and integers in
float64, as SciPy's loops do; ``polygamma`` returns float64 as SciPy's does.
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable
from typing import Any

import numpy as np
import scipy.special as _sc

from ..errors import UnsupportedError
from ..ir.core import Atom
from ..ir.types import DType, broadcast_shapes, float64
from ..ops import ad as AD
from ..ops import elementwise as E
from ..ops import shape as S
from ..ops.derivs import const
from .core import broadcast_args, broadcast_to, convert, promote, register, static
from .optional import PUBLIC_MODULE
from .reductions import max_, sum_


def _special(*names: str) -> Callable[[Callable], Callable]:
    """Register as the mapping of ``scipy.special``'s functions of these names (of a
    ufunc: refusing the ufunc keywords ``out=``, ``where=``, ``dtype=`` ...)."""
    objs = {getattr(_sc, n) for n in names}
    PUBLIC_MODULE.update(dict.fromkeys(objs, "scipy.special"))

    def deco(fn: Callable) -> Callable:
        ufunc = all(isinstance(o, np.ufunc) for o in objs)
        register(*objs)(_without_ufunc_keywords(fn) if ufunc else fn)
        return fn

    return deco


def _without_ufunc_keywords(fn: Callable) -> Callable:
    @functools.wraps(fn)
    def mapping(*args: Any, **keywords: Any) -> Any:
        if keywords:
            raise UnsupportedError(
                f"scipy.special.{fn.__name__}: the ufunc keywords "
                f"{', '.join(sorted(keywords))} are not supported",
                hint="assign the result (x[...] = f(x)) or convert it (.astype) instead")
        return fn(*args)

    return mapping


def _floats(*xs: Any, dt: DType | None = None) -> list[Atom]:
    """Operands promoted together, as floats (integers and bools as float64), broadcast."""
    atoms, rt = promote(*xs)
    rt = rt.strong()
    dt = dt or (rt.dtype if rt.dtype.is_float else float64)
    return broadcast_args(*(convert(a, dt) for a in atoms))


def _where(pred: Atom, a: Atom, b: Atom) -> Atom:
    return E.select(pred, a, b)


def _clamped(x: Atom, keep: Atom, safe: float) -> Atom:
    """``x`` where ``keep``, else ``safe``: the operand of a branch that ``select`` does
    not take, so that its derivatives stay finite (elementwise.py's docstring)."""
    return _where(keep, x, const(safe, x.type))


# -- primitives ---------------------------------------------------------------------


@_special("erf")
def erf(x: Any) -> Atom:
    return E.erf(*_floats(x))


@_special("erfc")
def erfc(x: Any) -> Atom:
    return E.erfc(*_floats(x))


@_special("erfinv")
def erfinv(x: Any) -> Atom:
    return E.erfinv(*_floats(x))


@_special("gammaln")
def gammaln(x: Any) -> Atom:
    return E.lgamma(*_floats(x))


@_special("digamma", "psi")
def digamma(x: Any) -> Atom:
    (x,) = _floats(x)
    return E.polygamma(const(0, x.type), x)


@_special("polygamma")
def polygamma(n: Any, x: Any) -> Atom:
    """The order is static (an integer: it has no derivative).  SciPy takes digamma of x
    in x's own dtype where the order is 0, and returns float64."""
    order = np.asarray(static(n, "the order of polygamma"), dtype=np.float64)
    (x_own,) = _floats(x)
    n, x = _floats(order, x, dt=float64)
    out = E.polygamma(n, x)
    if x_own.type.dtype == float64 or not np.any(order == 0):
        return out
    psi = broadcast_to(convert(digamma(x_own), float64), out.type.shape)
    return _where(E.eq(n, const(0, n.type)), psi, out)


@_special("ndtri")
def ndtri(p: Any) -> Atom:
    return E.ndtri(*_floats(p))


@_special("i0e")
def i0e(x: Any) -> Atom:
    return E.i0e(*_floats(x))


@_special("i1e")
def i1e(x: Any) -> Atom:
    return E.i1e(*_floats(x))


# -- compositions -------------------------------------------------------------------


def _times_log(x: Atom, y: Atom, log: Callable[[Atom], Atom], pole: float) -> Atom:
    """``x * log(y)``, 0 where x == 0 unless y is NaN; there log's operand is replaced
    by 1 only where log(y) is infinite or NaN (y <= pole or y == inf), so that the
    derivative in x at x == 0 is still log(y)."""
    bad = E.or_(E.le(y, const(pole, y.type)), E.eq(y, const(math.inf, y.type)))
    y = _where(E.and_(E.eq(x, const(0, x.type)), bad), const(pole + 1, y.type), y)
    return E.mul(x, log(y))


@_special("xlogy")
def xlogy(x: Any, y: Any) -> Atom:
    return _times_log(*_floats(x, y), E.log, 0.0)


@_special("xlog1py")
def xlog1py(x: Any, y: Any) -> Atom:
    return _times_log(*_floats(x, y), E.log1p, -1.0)


@_special("expit")
def expit(x: Any) -> Atom:
    """1 / (1 + exp(-x)) for x >= 0 and exp(x) / (1 + exp(x)) below, where exp(-x)
    would overflow."""
    (x,) = _floats(x)
    one = const(1, x.type)
    up = E.ge(x, const(0, x.type))
    e_down = E.exp(_clamped(x, E.not_(up), 0.0))
    above = E.div(one, E.add(one, E.exp(E.neg(_clamped(x, up, 0.0)))))
    return _where(up, above, E.div(e_down, E.add(one, e_down)))


@_special("logit")
def logit(p: Any) -> Atom:
    """log(p / (1 - p)), and log1p(s) - log1p(-s), s = 2p - 1 (exact there), for p
    within 1/4 of 1/2, where the quotient's log loses digits."""
    (p,) = _floats(p)
    one = const(1, p.type)
    near_half = E.and_(E.ge(p, const(0.25, p.type)), E.le(p, const(0.75, p.type)))
    s = E.sub(E.mul(const(2, p.type), _clamped(p, near_half, 0.5)), one)
    central = E.sub(E.log1p(s), E.log1p(E.neg(s)))
    q = _clamped(p, E.not_(near_half), 0.1)
    return _where(near_half, central, E.log(E.div(q, E.sub(one, q))))


#: Where Stirling's series of lgamma (with its correction terms up to B16) is exact to
#: double precision.
_STIRLING = 10.0
_BERNOULLI = [1 / 6, -1 / 30, 1 / 42, -1 / 30, 5 / 66, -691 / 2730, 7 / 6, -3617 / 510]


def _stirling_correction(x: Atom) -> Atom:
    """lgamma(x) - ((x - 1/2) log x - x + log(2 pi) / 2): the sum of
    B2k / (2k (2k - 1) x^(2k - 1))."""
    inv = E.div(const(1, x.type), x)
    inv2 = E.mul(inv, inv)
    total = const(0, x.type)
    for k in range(len(_BERNOULLI), 0, -1):
        coef = _BERNOULLI[k - 1] / (2 * k * (2 * k - 1))
        total = E.add(E.mul(total, inv2), const(coef, x.type))
    return E.mul(total, inv)


@_special("betaln")
def betaln(a: Any, b: Any) -> Atom:
    """log|B(a, b)|.  lgamma(a) + lgamma(b) - lgamma(a + b) cancels when an argument is
    large (betaln(1e10, 3) loses 9 digits), so with lo = min(a, b), hi = max(a, b) and
    s = a + b, Stirling's series gives, for lo >= 10,
    log(2 pi)/2 + (lo - 1/2) log(lo/s) - (hi - 1/2) log1p(lo/hi) - log(s)/2 + corrections,
    and for hi >= 10 > lo > 0,
    lgamma(lo) - (hi - 1/2) log1p(lo/hi) - lo log s + lo + corrections;
    each a sum of terms of one sign, or nearly."""
    a, b = _floats(a, b)
    lo, hi = E.min_(a, b), E.max_(a, b)
    big = const(_STIRLING, a.type)
    both = E.ge(lo, big)
    one = E.and_(E.and_(E.ge(hi, big), E.gt(lo, const(0, a.type))), E.not_(both))
    # each branch's operands, safe where it is not taken
    lo2, hi2 = _clamped(lo, both, _STIRLING), _clamped(hi, both, _STIRLING)
    s2 = E.add(lo2, hi2)
    half = const(0.5, a.type)
    both_value = E.add(
        E.add(E.mul(E.sub(lo2, half), E.log(E.div(lo2, s2))),
              E.neg(E.mul(E.sub(hi2, half), E.log1p(E.div(lo2, hi2))))),
        E.sub(const(0.5 * math.log(2 * math.pi), a.type), E.mul(half, E.log(s2))))
    both_value = E.add(both_value, E.sub(E.add(_stirling_correction(lo2),
                                               _stirling_correction(hi2)),
                                         _stirling_correction(s2)))
    lo1, hi1 = _clamped(lo, one, 1.0), _clamped(hi, one, _STIRLING)
    s1 = E.add(lo1, hi1)
    one_value = E.sub(E.lgamma(lo1), E.mul(E.sub(hi1, half), E.log1p(E.div(lo1, hi1))))
    one_value = E.add(E.sub(one_value, E.mul(lo1, E.log(s1))), lo1)
    one_value = E.add(one_value, E.sub(_stirling_correction(hi1), _stirling_correction(s1)))
    plain = E.sub(E.add(E.lgamma(a), E.lgamma(b)), E.lgamma(E.add(a, b)))
    return _where(both, both_value, _where(one, one_value, plain))


_SQRT1_2 = math.sqrt(0.5)


def _in_float64(fn: Callable[[Atom], Atom], x: Atom) -> Atom:
    """``fn`` computed in float64 and rounded back, as SciPy does for float32."""
    if x.type.dtype == float64:
        return fn(x)
    return convert(fn(convert(x, float64)), x.type.dtype)


@_special("ndtr")
def ndtr(x: Any) -> Atom:
    return _in_float64(_ndtr, *_floats(x))


def _ndtr(x: Atom) -> Atom:
    """SciPy's formula: 1/2 + erf(z)/2 for |z| < 1/sqrt(2), z = x / sqrt(2), else from
    erfc(|z|), which keeps the tails' digits."""
    half = const(0.5, x.type)
    z = E.mul(x, const(_SQRT1_2, x.type))
    az = E.abs_(z)
    central = E.add(half, E.mul(half, E.erf(z)))
    y = E.mul(half, E.erfc(az))
    tail = _where(E.gt(z, const(0, x.type)), E.sub(const(1, x.type), y), y)
    return _where(E.lt(az, const(_SQRT1_2, x.type)), central, tail)


#: log_ndtr's branches: the asymptotic series below, log ndtr between, log1p above.
_LOW, _HIGH = -20.0, 0.0


@_special("log_ndtr")
def log_ndtr(x: Any) -> Atom:
    """log of the normal CDF without underflow: below -20 the asymptotic series of
    log(ndtr(x)) = -x^2/2 - log(-x sqrt(2 pi)) + log(1 - 1/x^2 + 3/x^4 - ...); above 0,
    log1p(-ndtr(-x)), which keeps the digits that ndtr(x), close to 1, rounds away."""
    return _in_float64(_log_ndtr, *_floats(x))


def _log_ndtr(x: Atom) -> Atom:
    low = E.lt(x, const(_LOW, x.type))
    high = E.gt(x, const(_HIGH, x.type))
    mid = _where(low, const(_LOW, x.type), _where(high, const(_HIGH, x.type), x))
    xl = _clamped(x, low, _LOW)
    xh = _clamped(x, high, _HIGH)
    inv = E.div(const(1, x.type), E.mul(xl, xl))
    term, series = const(1, x.type), const(1, x.type)
    for k in range(1, 13):  # terms below 1e-17 of the sum for x <= -20
        term = E.mul(term, E.mul(inv, const(-(2 * k - 1), x.type)))
        series = E.add(series, term)
    tail = E.sub(E.neg(E.mul(const(0.5, x.type), E.mul(xl, xl))),
                 E.log(E.mul(E.neg(xl), const(math.sqrt(2 * math.pi), x.type))))
    tail = E.add(tail, E.log(series))
    upper = E.log1p(E.neg(_ndtr(E.neg(xh))))
    return _where(low, tail, _where(high, upper, E.log(_ndtr(mid))))


# -- reductions ---------------------------------------------------------------------


def _shifted(a: Atom, axis: Any) -> tuple[Atom, Atom]:
    """``a - m`` and ``m``, the finite maximum along ``axis`` (kept as a dimension; 0
    where the maximum is infinite), held constant: the result does not depend on it."""
    m = max_(a, axis, keepdims=True)
    m = AD.stop_gradient(_where(E.eq(E.sub(m, m), const(0, m.type)), m, const(0, m.type)))
    return E.sub(a, broadcast_to(m, a.type.shape)), m


@_special("logsumexp")
def logsumexp(a: Any, axis: Any = None, b: Any = None, keepdims: bool = False,
              return_sign: bool = False) -> Any:
    a, *bs = _floats(a) if b is None else _floats(a, b)
    if bs:  # the weights' shape, or a's (a 0-d operand stays 0-d in _floats)
        shape = broadcast_shapes(a.type.shape, bs[0].type.shape)
        a, bs = broadcast_to(a, shape), [broadcast_to(bs[0], shape)]
    shifted, m = _shifted(a, axis)
    e = E.exp(shifted)
    if bs:
        e = E.mul(bs[0], e)
    s = sum_(e, axis, keepdims=keepdims)
    m = S.reshape(m, shape=s.type.shape)
    if not return_sign:
        return E.add(E.log(s), m)
    return E.add(E.log(E.abs_(s)), m), E.sign(s)


@_special("softmax")
def softmax(x: Any, axis: Any = None) -> Atom:
    (x,) = _floats(x)
    e = E.exp(_shifted(x, axis)[0])
    return E.div(e, broadcast_to(sum_(e, axis, keepdims=True), x.type.shape))


@_special("log_softmax")
def log_softmax(x: Any, axis: Any = None) -> Atom:
    (x,) = _floats(x)
    shifted = _shifted(x, axis)[0]
    total = sum_(E.exp(shifted), axis, keepdims=True)
    return E.sub(shifted, broadcast_to(E.log(total), x.type.shape))
