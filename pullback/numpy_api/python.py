"""``math.prod`` and ``math.fsum`` over sequences of run-time values.

Both take what Python iterates: a list or tuple (a generator arrives as a list), or an
array, whose rows are its items.  ``prod`` multiplies left to right as Python does, so
its rounding is Python's.  ``fsum`` is CPython's exactly rounded sum (Shewchuk's
partials, then the round-half-even correction of the last step), staged on a fixed set
of partials: a partial that CPython drops because it is zero stays here as a zero,
which every step of the algorithm passes over unchanged.
"""

from __future__ import annotations

import math
from typing import Any

from ..errors import UnsupportedError
from ..ir.builder import as_atom
from ..ir.core import Atom, Lit
from ..ir.types import float64
from ..ops import elementwise as E
from .core import OPERATORS, convert, register, typeof
from .manip import reshape_to, slice_axis
from .ufuncs import _forbid, _isfinite, _isinf, _isnan, _py_float

#: The most run-time items ``math.fsum`` stages: each item meets every partial so far,
#: so the staged code grows with the square of the count.
FSUM_MAX_ITEMS = 32


def _items(iterable: Any) -> list[Any]:
    """What ``for item in iterable`` gives: the items of a sequence, the rows of an array."""
    if isinstance(iterable, (list, tuple)):
        return list(iterable)
    t = typeof(iterable)
    if t.ndim == 0:
        raise TypeError("iteration over a 0-d array")
    a = as_atom(iterable)
    return [reshape_to(slice_axis(a, 0, k, k + 1), t.shape[1:]) for k in range(t.shape[0])]


@register(math.prod)
def math_prod(iterable: Any, /, *, start: Any = 1) -> Any:
    total = start
    for item in _items(iterable):
        total = OPERATORS["mul"](total, item)
    return total


def _two_sum(x: Atom, y: Atom) -> tuple[Atom, Atom]:
    """``x + y`` rounded, and its rounding error, for ``|x| >= |y|``."""
    hi = E.add(x, y)
    return hi, E.sub(y, E.sub(hi, x))


def _zero() -> Lit:
    return Lit(0.0)


@register(math.fsum)
def math_fsum(seq: Any, /) -> Atom:
    items = [_py_float(x) for x in _items(seq)]
    if len(items) > FSUM_MAX_ITEMS:
        raise UnsupportedError(
            f"math.fsum of {len(items)} run-time values: pullback stages at most "
            f"{FSUM_MAX_ITEMS} (the exactly rounded sum grows with the square of the count)",
            hint="use np.sum (pairwise summation, not exactly rounded), or fsum over "
            "chunks")
    partials: list[Atom] = []
    special, inf_sum = _zero(), _zero()  # CPython's sums of the non-finite items
    for xsave in items:
        x = xsave
        grown = []
        for y in partials:
            small = E.lt(E.abs_(x), E.abs_(y))
            x, lo = _two_sum(E.select(small, y, x), E.select(small, x, y))
            grown.append(lo)
        # a non-finite running sum: an overflow of finite items, or an inf or NaN item,
        # after which CPython starts the partials afresh
        lost = E.not_(_isfinite(x))
        _forbid(E.and_(lost, _isfinite(xsave)), OverflowError, "intermediate overflow in fsum")
        inf_sum = E.select(_isinf(xsave), E.add(inf_sum, xsave), inf_sum)
        special = E.select(lost, E.add(special, xsave), special)
        partials = [E.select(lost, _zero(), p) for p in [*grown, x]]
    if not partials:
        return _zero()
    result = _round_partials(partials)
    special_seen = E.ne(special, _zero())
    _forbid(E.and_(special_seen, _isnan(inf_sum)), ValueError, "-inf + inf in fsum")
    return E.select(special_seen, special, result)


def _round_partials(p: list[Atom]) -> Atom:
    """The partials' sum correctly rounded: added from the top down until a step is
    inexact; a remainder exactly half an ulp is settled by the sign of the partials below
    (round half to even on the exact sum)."""
    below = [_zero()]  # below[j]: the highest non-zero partial under p[j], 0 if none
    for j in range(1, len(p)):
        below.append(E.select(E.ne(p[j - 1], _zero()), p[j - 1], below[j - 1]))
    # + 0.0: the sum of no partials (all zero, -0.0 included) is 0.0
    hi, lo, after, done = E.add(p[-1], _zero()), _zero(), _zero(), Lit(False)
    for j in range(len(p) - 2, -1, -1):
        h2, l2 = _two_sum(hi, p[j])
        going = E.not_(done)
        hi, lo = E.select(going, h2, hi), E.select(going, l2, lo)
        stops = E.and_(going, E.ne(l2, _zero()))
        after = E.select(stops, below[j], after)
        done = E.or_(done, stops)
    zero = _zero()
    same_sign = E.or_(E.and_(E.lt(lo, zero), E.lt(after, zero)),
                      E.and_(E.gt(lo, zero), E.gt(after, zero)))
    y = E.mul(lo, Lit(2.0))
    x = E.add(hi, y)
    exact = E.eq(y, E.sub(x, hi))
    return convert(E.select(E.and_(same_sign, exact), x, hi), float64, True)
