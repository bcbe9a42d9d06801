"""np.bincount and np.histogram: counts (or sums of weights) scattered into bins.

The number of bins is the result's length, so it must be known at compile time.
``np.bincount`` makes ``max(x) + 1`` bins, a length that depends on the data: pullback
takes the length from ``minlength=`` and checks at run time that every value is below it
(NumPy would return a longer array; pullback raises a ValueError that says so rather than
return one of another length).  ``np.histogram`` takes a static number of bins (the edges
then come from ``range=`` or, at run time, from the data's minimum and maximum, as NumPy
computes them) or an array of edges.
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ..errors import UnsupportedError
from ..ir.builder import as_atom
from ..ir.core import Atom, Lit, Var
from ..ir.types import float64, int64, result_type
from ..ops import control as C
from ..ops import elementwise as E
from ..ops import index as X
from ..ops import reduce as R
from ..ops import shape as S
from .core import CALLABLES, broadcast_to, convert, promote, register, static, strong, typeof
from .creation import as_array
from .manip import ravel


def _scattered(bins: int, index: Atom, weight: Atom | None, keep: Atom | None = None) -> Atom:
    """Per bin, how many ``index`` entries name it (int64), or the sum of their weights
    (float64); entries where ``keep`` is False count for nothing."""
    if weight is None:
        upd = convert(Lit(np.True_) if keep is None else keep, int64)
        upd = broadcast_to(upd, index.type.shape)
    else:
        upd = convert(weight, float64)
        if keep is not None:
            upd = E.select(keep, upd, Lit(np.float64(0)))
    zeros = broadcast_to(Lit(np.zeros((), upd.type.dtype.np)), (bins,))
    return X.scatter_add(zeros, index, upd, axis=0)


def _weights_of(weights: Any) -> Atom | None:
    if weights is None:
        return None
    w = strong(as_array(weights))
    if w.type.dtype.kind not in "bif":
        raise TypeError(f"Cannot cast array data from dtype('{w.type.dtype.name}') to "
                        "dtype('float64') according to the rule 'safe'")
    return w


# -- np.bincount -----------------------------------------------------------------------


def _reduce_all(prim, x: Atom) -> Atom:
    return prim(x, axes=(0,))


@register(np.bincount)
def bincount(x: Any, weights: Any = None, minlength: Any = 0) -> Atom:
    x = strong(as_array(x))
    if x.type.ndim != 1:
        raise ValueError("object too deep for desired array")
    if x.type.dtype.is_float:
        raise TypeError("Cannot cast array data from dtype('float64') to dtype('int64') "
                        "according to the rule 'safe'".replace("float64", x.type.dtype.name, 1))
    minlength = operator.index(static(minlength, "minlength"))
    if minlength < 0:
        raise ValueError("'minlength' must not be negative")
    w = _weights_of(weights)
    if w is not None and w.type.shape != x.type.shape:
        raise ValueError("The weights and list don't have the same length.")
    index = convert(x, int64)
    if not isinstance(index, Var):  # known values: NumPy's length
        values = np.asarray(index.value)
        if values.size and values.min() < 0:
            raise ValueError("'list' argument must have no negative elements")
        bins = max(int(values.max()) + 1 if values.size else 0, minlength)
    elif minlength == 0 and x.type.size:
        raise UnsupportedError(
            "np.bincount of run-time values makes max(x) + 1 bins, a length that depends "
            "on the data",
            hint="pass minlength= a bound on the values (pullback checks at run time that "
            "every value is below it)")
    else:
        bins = minlength
        if x.type.size:
            lo, hi = _reduce_all(R.reduce_min, index), _reduce_all(R.reduce_max, index)
            C.check(E.ge(lo, Lit(np.int64(0))), exc="ValueError",
                    fmt="'list' argument must have no negative elements")
            C.check(E.lt(hi, Lit(np.int64(bins))), hi, exc="ValueError",
                    fmt=f"np.bincount: the value {{}} is not below minlength={bins}, so "
                    "NumPy would return more bins than pullback compiled for (raise "
                    "minlength)")
    if x.type.size == 0:  # NumPy counts nothing in integers, weights or not
        return broadcast_to(Lit(np.int64(0)), (bins,))
    return _scattered(bins, index, w)


# -- np.histogram ----------------------------------------------------------------------


def _uniform_counts(a: Atom, edges: Atom, first: Atom, last: Atom, bins: int,
                    weight: Atom | None) -> Atom:
    """NumPy's fast path for equal bins: a value's bin from its offset, corrected by one
    where rounding put it beside the edge it is compared with; values outside
    [first, last] (NaN too) count for nothing."""
    dt = edges.type.dtype
    x = convert(a, dt)
    keep = E.and_(E.ge(x, first), E.le(x, last))
    x = E.select(keep, x, first)
    width = E.sub(last, first)
    f = E.mul(E.div(E.sub(x, first), width), Lit(np.asarray(bins, dt.np)))
    index = convert(f, int64)
    top = Lit(np.int64(bins - 1))
    index = E.min_(index, top)  # values on the last edge
    below = E.lt(x, X.gather(edges, index, axis=0))
    index = E.max_(E.select(below, E.sub(index, Lit(np.int64(1))), index), Lit(np.int64(0)))
    above = E.and_(E.ge(x, X.gather(edges, E.add(index, Lit(np.int64(1))), axis=0)),
                   E.ne(index, top))
    index = E.select(above, E.add(index, Lit(np.int64(1))), index)
    return _scattered(bins, index, weight, keep)


def _outer_edges(a: Atom, span: Any) -> tuple[Atom, Atom]:
    """NumPy's first and last edge at run time: ``range=`` (the minimum and maximum of the
    data when None), refused when not finite or reversed, widened by 0.5 each way when
    equal; in the edges' dtype (float64 for integers)."""
    if span is None:
        lo, hi = _reduce_all(R.reduce_min, a), _reduce_all(R.reduce_max, a)
        what = "autodetected"
    else:
        lo, hi = (as_atom(v) for v in span)
        if lo.type.shape != () or hi.type.shape != ():
            raise ValueError("too many values to unpack (expected 2)")
        C.check(E.not_(E.gt(*promote(lo, hi)[0])), exc="ValueError",
                fmt="max must be larger than min in range parameter.")
        what = "supplied"
    for edge in (lo, hi):
        if edge.type.dtype.is_float:
            inf = Lit(np.asarray(np.inf, edge.type.dtype.np))
            C.check(E.lt(E.abs_(edge), inf), lo, hi, exc="ValueError",  # NaN fails too
                    fmt=f"{what} range of [{{}}, {{}}] is not finite")
    rt = result_type(lo.type, hi.type, a.type)
    dt = rt.dtype if rt.dtype.is_float else float64
    lo, hi = convert(lo, dt), convert(hi, dt)
    same = E.eq(lo, hi)
    half = Lit(np.asarray(0.5, dt.np))
    return E.select(same, E.sub(lo, half), lo), E.select(same, E.add(hi, half), hi)


def _edge_counts(a: Atom, edges: Atom, weight: Atom | None) -> Atom:
    """Counts between given edges: per edge, the weight of the values below it (the last
    edge: at or below it), differenced; NaN is below no edge."""
    n = edges.type.size
    (a, edges), _ = promote(a, edges)
    grid = (n, a.type.size)
    va = S.broadcast_in_dim(a, shape=grid, dims=(1,))
    ve = S.broadcast_in_dim(edges, shape=grid, dims=(0,))
    last = E.eq(S.iota(shape=grid, dim=0, dtype=int64), Lit(np.int64(n - 1)))
    below = E.select(last, E.le(va, ve), E.lt(va, ve))
    if weight is None:
        cum = R.reduce_sum(convert(below, int64), axes=(1,))
    else:
        w = S.broadcast_in_dim(convert(weight, float64), shape=grid, dims=(1,))
        cum = R.reduce_sum(E.select(below, w, Lit(np.float64(0))), axes=(1,))
    return E.sub(S.slice_(cum, start=(1,), limit=(n,), stride=(1,)),
                 S.slice_(cum, start=(0,), limit=(n - 1,), stride=(1,)))


def _has_var(x: Any) -> bool:
    return isinstance(x, Var) or isinstance(x, (list, tuple)) and any(map(_has_var, x))


def _check_increasing(edges: Atom) -> None:
    n = edges.type.size
    if n < 2:
        return
    if not isinstance(edges, Var):
        if np.any(np.diff(edges.value) < 0):
            raise ValueError("`bins` must increase monotonically, when an array")
        return
    rise = E.le(S.slice_(edges, start=(0,), limit=(n - 1,), stride=(1,)),
                S.slice_(edges, start=(1,), limit=(n,), stride=(1,)))
    C.check(R.reduce_min(rise, axes=(0,)), exc="ValueError",
            fmt="`bins` must increase monotonically, when an array")


@register(np.histogram)
def histogram(a: Any, bins: Any = 10, range: Any = None, density: Any = None,  # noqa: A002
              weights: Any = None) -> tuple[Atom, Atom]:
    a = strong(as_array(a))
    w = _weights_of(weights)
    if w is not None:
        if w.type.shape != a.type.shape:
            raise ValueError("weights should have the same shape as a.")
        w = ravel(w)
    a = ravel(a)
    if isinstance(bins, str):
        raise UnsupportedError(f"np.histogram: bins={bins!r} picks the number of bins from "
                               "the data", hint="pass a number of bins or the edges")
    if not isinstance(bins, (list, tuple)) and typeof(bins).shape == ():
        n = operator.index(static(bins, "bins"))
        if n < 1:
            raise ValueError("`bins` must be positive, when an integer")
        if not _has_var(range) and (range is not None or a.type.size == 0):
            span = static(range, "range")
            edges_np = np.histogram_bin_edges(np.zeros(0, a.type.dtype.np), n, span)
            edges = Lit(edges_np)
            first, last = Lit(edges_np[0]), Lit(edges_np[-1])
        else:
            first, last = _outer_edges(a, range)
            edges = CALLABLES[np.linspace](first, last, n + 1)
            rise = E.lt(S.slice_(edges, start=(0,), limit=(n,), stride=(1,)),
                        S.slice_(edges, start=(1,), limit=(n + 1,), stride=(1,)))
            C.check(R.reduce_min(rise, axes=(0,)), exc="ValueError",
                    fmt=f"Too many bins for data range. Cannot create {n} finite-sized bins.")
        counts = _uniform_counts(a, edges, first, last, n, w)
    else:
        edges = strong(as_array(bins))  # (range= is not used with edges)
        if edges.type.ndim != 1:
            raise ValueError("`bins` must be 1d, when an array")
        _check_increasing(edges)
        counts = _edge_counts(a, edges, w)
    if w is not None:
        counts = convert(counts, w.type.dtype)
    if density:
        widths = convert(E.sub(S.slice_(edges, start=(1,), limit=(edges.type.size,),
                                        stride=(1,)),
                               S.slice_(edges, start=(0,), limit=(edges.type.size - 1,),
                                        stride=(1,))), float64)
        total = convert(R.reduce_sum(counts, axes=(0,)), float64)
        counts = E.div(E.div(convert(counts, float64), widths), total)
    return counts, edges

