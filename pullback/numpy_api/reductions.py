"""NumPy reductions, cumulative ops and differences; the builtins ``sum``, ``min``, ``max``.

Each mapping first converts to the dtype NumPy accumulates in (bools and ints sum in
int64, means are taken in float64 unless the input is a float), then reduces with the
primitives of ``ops/reduce.py``.  Shapes are static, so what depends only on them (empty
extents, counts) is decided while staging; what depends on data (weights summing to zero,
all-NaN slices) becomes a run-time ``check``.
"""

from __future__ import annotations

import builtins
import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import UnsupportedError
from ..ir.builder import as_atom
from ..ir.core import Atom, Lit, Var
from ..ir.op import Op
from ..ir.types import DType, TensorType, bool_, float64, int64, promote_types, result_type
from ..ops import control as C
from ..ops import elementwise as E
from ..ops import index as I
from ..ops import reduce as R
from ..ops import shape as S
from ..ops import sort as O
from .core import (
    OPERATORS,
    broadcast_to,
    convert,
    method,
    normalize_axes,
    normalize_axis,
    promote,
    register,
    static_dtype,
    strong,
    typeof,
)
from .creation import as_array
from .manip import ravel, reshape_to, slice_axis, transpose_to

_NoValue = np._NoValue

# -- arguments pullback does not stage ------------------------------------------------

_DEFAULTS = {"out": None, "initial": _NoValue, "where": True, "mean": _NoValue, "key": None}
_HINTS = {
    "out": "use the returned array instead of out=",
    "initial": "combine the result with the initial value explicitly",
    "where": "mask the input first, e.g. np.where(mask, x, 0)",
    "mean": "let the function compute the mean itself",
    "key": "apply the key yourself, e.g. max(f(a), f(b))",
}


def _refuse(name: str, **given: Any) -> None:
    """UnsupportedError for each argument given a value other than its default."""
    for arg, value in given.items():
        if value is not _DEFAULTS[arg]:
            raise UnsupportedError(f"{name}: the {arg}= argument is not supported",
                                   hint=_HINTS[arg])


# -- shapes and axes ------------------------------------------------------------------


def _reduce_axes(axis: Any, ndim: int) -> tuple[int, ...]:
    """Axes of a ufunc reduction: like ``normalize_axes``, but a 0-d array takes the int
    axis 0 or -1 as no axis at all (NumPy's legacy rule for ``np.sum`` and friends)."""
    if ndim == 0 and isinstance(axis, (int, np.integer)) and axis in (0, -1):
        return ()
    return normalize_axes(axis, ndim)


def _extent(t: TensorType, axes: Sequence[int]) -> int:
    return math.prod(t.shape[a] for a in axes)


def _dropped(t: TensorType, axes: Sequence[int]) -> tuple[int, ...]:
    return tuple(d for i, d in enumerate(t.shape) if i not in axes)


def _all(x: Atom) -> tuple[int, ...]:
    return tuple(range(typeof(x).ndim))


def _restore(y: Atom, t: TensorType, axes: Sequence[int], keepdims: bool) -> Atom:
    """``keepdims``: the reduced axes of ``t`` back as length-1 axes."""
    if not keepdims:
        return y
    return reshape_to(y, tuple(1 if i in axes else d for i, d in enumerate(t.shape)))


def along(x: Atom, axis: Any) -> tuple[Atom, int]:
    """``x`` and a normalized ``axis`` for functions along one axis (argmax, cumsum,
    argsort), which treat a 0-d array as a 1-D array of one element."""
    if typeof(x).ndim == 0:
        x = reshape_to(x, (1,))
    return x, normalize_axis(axis, typeof(x).ndim)


def _full(value: Any, shape: tuple[int, ...], dt: DType) -> Atom:
    return broadcast_to(Lit(np.asarray(value, dt.np)), shape)


def _isnan(x: Atom) -> Atom:
    return E.ne(x, x)


def _replace_nan(x: Atom, value: float) -> Atom:
    """Floats with every NaN replaced by ``value``; other dtypes as they are."""
    dt = typeof(x).dtype
    return E.select(_isnan(x), _full(value, (), dt), x) if dt.is_float else x


def _no_bool_subtract(t: TensorType) -> None:
    if t.dtype.is_bool:
        raise TypeError("numpy boolean subtract, the `-` operator, is not supported, use the "
                        "bitwise_xor, the `^` operator, or the logical_xor function instead.")


def _require(ok: Atom, exc: str, message: str) -> None:
    """A run-time check that raises ``exc(message)`` when ``ok`` is false."""
    C.check(ok, exc=exc, fmt=message)


# -- the reduction kernels ------------------------------------------------------------


def _logical(prim: Op, empty: bool, x: Atom, axes: tuple[int, ...]) -> Atom:
    """``prim`` (max = or, min = and) of booleans; an empty extent gives its identity."""
    t = typeof(x)
    if _extent(t, axes) == 0:
        return _full(empty, _dropped(t, axes), bool_)
    return prim(x, axes=axes)


@dataclass(frozen=True)
class _Monoid:
    """Addition or multiplication: its reduction, its boolean form (or/and, which start
    from ``identity``) and its running form."""

    arith: Op
    logical: Op
    identity: bool
    cumulative: Op

    def reduce(self, x: Any, axes: tuple[int, ...], dt: DType) -> Atom:
        """``np.add.reduce(x, axes, dtype=dt)`` (or multiply); on booleans or/and."""
        x = convert(x, dt)
        if dt.is_bool:
            return _logical(self.logical, self.identity, x, axes)
        return self.arith(x, axes=axes)

    def join(self, x: Atom, y: Atom) -> Atom:
        """``x + y`` (or ``x * y``); or/and of booleans."""
        if typeof(x).dtype.is_bool:
            return (E.or_ if self is _ADD else E.and_)(x, y)
        return (E.add if self is _ADD else E.mul)(x, y)

    def accumulate(self, x: Atom, axis: int, dt: DType) -> Atom:
        """Running totals in ``dt``; boolean ones (or/and) run on 0/1 integers."""
        if dt.is_bool:
            ones = convert(convert(x, bool_), int64)
            return convert(self.cumulative(ones, axis=axis, reverse=False), bool_)
        return self.cumulative(convert(x, dt), axis=axis, reverse=False)


_ADD = _Monoid(R.reduce_sum, R.reduce_max, False, R.cumsum)
_MUL = _Monoid(R.reduce_prod, R.reduce_min, True, R.cumprod)


def _acc_dtype(t: TensorType, dtype: Any) -> DType:
    """What np.sum/prod/cumsum compute in: bools and ints narrower than int64 in int64."""
    if dtype is not None:
        return static_dtype(dtype)
    return int64 if t.dtype.kind in "bi" else t.dtype


def _float_dtype(t: TensorType, dtype: Any) -> DType:
    """What np.mean/var compute in: float64 for bools and ints."""
    if dtype is not None:
        return static_dtype(dtype)
    return float64 if t.dtype.kind in "bi" else t.dtype


def _divide(s: Atom, n: float) -> Atom:
    """``s / n`` the way np.mean divides: in the float dtype of ``s``; other dtypes divide
    in float64 and cast back."""
    dt = typeof(s).dtype
    if n == 1:
        return s
    if dt.is_float:
        return E.div(s, _full(n, (), dt))
    return convert(E.div(convert(s, float64), _full(n, (), float64)), dt)


def _mean(x: Any, axes: tuple[int, ...], dt: DType) -> Atom:
    return _divide(_ADD.reduce(x, axes, dt), _extent(typeof(x), axes))


# -- sum, prod, mean, max, min ... ----------------------------------------------------


def _where(a: Any, where: Any) -> Atom | None:
    """A reduction's ``where=`` as a boolean mask of ``a``'s shape (None for True)."""
    if where is True:
        return None
    return broadcast_to(convert(as_array(where), bool_), typeof(a).shape)


def _masked(a: Any, where: Any, fill: Any) -> Atom:
    """``a`` with ``fill`` where ``where`` is False: what ``where=`` leaves out of a
    reduction counts as the reduction's identity (or its ``initial``)."""
    x = strong(as_array(a))
    mask = _where(x, where)
    if mask is None:
        return x
    return E.select(mask, x, convert(as_atom(fill), typeof(x).dtype))


def _total(m: _Monoid, a, axis, dtype, keepdims, initial=_NoValue, where=True) -> Atom:
    """np.sum/np.prod: the masked-out elements are the identity; ``initial`` joins in."""
    t = typeof(a)
    axes = _reduce_axes(axis, t.ndim)
    dt = _acc_dtype(t, dtype)
    total = m.reduce(_masked(a, where, int(m.identity)), axes, dt)
    if initial is not _NoValue:
        total = m.join(total, convert(as_atom(initial), dt))
    return _restore(total, t, axes, keepdims)


@register(np.sum)
@method("sum")
def sum_(a, axis=None, dtype=None, out=None, keepdims=False, initial=_NoValue, where=True):
    _refuse("sum", out=out)
    return _total(_ADD, a, axis, dtype, keepdims, initial, where)


@register(np.prod)
@method("prod")
def prod(a, axis=None, dtype=None, out=None, keepdims=False, initial=_NoValue, where=True):
    _refuse("prod", out=out)
    return _total(_MUL, a, axis, dtype, keepdims, initial, where)


@register(np.mean)
@method("mean")
def mean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=True):
    """With ``where=``, the sum of the kept elements over their count (NaN where none
    are kept), divided in float64 as NumPy divides by the count array."""
    _refuse("mean", out=out)
    t = typeof(a)
    axes = normalize_axes(axis, t.ndim)
    dt = _float_dtype(t, dtype)
    mask = _where(a, where)
    if mask is None:
        return _restore(_mean(a, axes, dt), t, axes, keepdims)
    total = convert(_ADD.reduce(_masked(a, mask, 0), axes, dt), float64)
    count = convert(R.reduce_sum(convert(mask, int64), axes=axes), float64)
    return _restore(convert(E.div(total, count), dt), t, axes, keepdims)


def _extreme(prim: Op, a, axis, keepdims, initial=_NoValue, where=True) -> Atom:
    """np.max/np.min: ``initial`` joins the elements (and fills the masked-out ones);
    NumPy refuses ``where=`` without it, as no value is neutral for all dtypes."""
    x = strong(as_array(a))
    t = typeof(x)
    axes = _reduce_axes(axis, t.ndim)
    if initial is _NoValue:
        if where is not True:
            name = "maximum" if prim is R.reduce_max else "minimum"
            raise ValueError(f"reduction operation '{name}' does not have an "
                             "identity, so to use a where mask one has to specify 'initial'")
        return _restore(prim(x, axes=axes), t, axes, keepdims)
    start = convert(as_atom(initial), t.dtype)
    if _extent(t, axes) == 0:
        return _restore(broadcast_to(start, _dropped(t, axes)), t, axes, keepdims)
    pair = E.max_ if prim is R.reduce_max else E.min_
    out = pair(prim(_masked(x, where, start), axes=axes), start)
    return _restore(out, t, axes, keepdims)


@register(np.max, np.amax)
@method("max")
def max_(a, axis=None, out=None, keepdims=False, initial=_NoValue, where=True):
    _refuse("max", out=out)
    return _extreme(R.reduce_max, a, axis, keepdims, initial, where)


@register(np.min, np.amin)
@method("min")
def min_(a, axis=None, out=None, keepdims=False, initial=_NoValue, where=True):
    _refuse("min", out=out)
    return _extreme(R.reduce_min, a, axis, keepdims, initial, where)


@register(np.ptp)
def ptp(a, axis=None, out=None, keepdims=False):
    _refuse("ptp", out=out)
    hi, lo = max_(a, axis, keepdims=keepdims), min_(a, axis, keepdims=keepdims)
    _no_bool_subtract(typeof(hi))
    return E.sub(hi, lo)


def _truth(prim: Op, empty: bool, a, axis, keepdims, where=True) -> Atom:
    t = typeof(a)
    axes = _reduce_axes(axis, t.ndim)
    x = _masked(convert(a, bool_), where, empty)
    return _restore(_logical(prim, empty, x, axes), t, axes, keepdims)


@register(np.all)
@method("all")
def all_(a, axis=None, out=None, keepdims=False, *, where=True):
    _refuse("all", out=out)
    return _truth(R.reduce_min, True, a, axis, keepdims, where)


@register(np.any)
@method("any")
def any_(a, axis=None, out=None, keepdims=False, *, where=True):
    _refuse("any", out=out)
    return _truth(R.reduce_max, False, a, axis, keepdims, where)


#: NumPy before 2.3 counts all of an array's non-zeros into a Python int, later NumPy
#: into an int64 scalar: the result's kind follows the NumPy installed.
_COUNT_IS_PYTHON_INT = type(np.count_nonzero(np.zeros(1))) is int


@register(np.count_nonzero)
def count_nonzero(a, axis=None, *, keepdims=False):
    total = _total(_ADD, convert(a, bool_), axis, None, keepdims)
    if _COUNT_IS_PYTHON_INT and axis is None and not keepdims:
        return convert(total, typeof(total).dtype, True)
    return total


# -- argmax, argmin -------------------------------------------------------------------


def _arg(prim: Op, a, axis, keepdims) -> Atom:
    x = strong(a)
    t = typeof(x)
    if axis is None:
        return _restore(prim(ravel(x), axis=0), t, range(t.ndim), keepdims)
    x, ax = along(x, axis)
    return _restore(prim(x, axis=ax), t, (ax,), keepdims)


@register(np.argmax)
@method("argmax")
def argmax(a, axis=None, out=None, *, keepdims=False):
    _refuse("argmax", out=out)
    return _arg(R.argmax, a, axis, keepdims)


@register(np.argmin)
@method("argmin")
def argmin(a, axis=None, out=None, *, keepdims=False):
    _refuse("argmin", out=out)
    return _arg(R.argmin, a, axis, keepdims)


# -- variance -------------------------------------------------------------------------


def _ddof(ddof: float, correction: Any) -> float:
    """NumPy 2's ``correction=`` is ``ddof`` under its array-API name."""
    if correction is _NoValue:
        return ddof
    if ddof != 0:
        raise ValueError("ddof and correction can't be provided simultaneously.")
    return correction


def _var(name, a, axis, dtype, out, ddof, keepdims, where, mean, correction) -> Atom:
    _refuse(name, out=out, where=where, mean=mean)
    ddof = _ddof(ddof, correction)
    t = typeof(a)
    axes = normalize_axes(axis, t.ndim)
    dt = _float_dtype(t, dtype)
    if not dt.is_float:
        raise UnsupportedError(f"{name}: dtype={dt.name} is not supported",
                               hint="pass a floating-point dtype")
    x = convert(a, dt)
    centre = broadcast_to(_restore(_mean(x, axes, dt), t, axes, True), t.shape)
    dev = E.sub(x, centre)
    squares = R.reduce_sum(E.mul(dev, dev), axes=axes)
    return _restore(_divide(squares, max(_extent(t, axes) - ddof, 0)), t, axes, keepdims)


@register(np.var)
@method("var")
def var(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True,
        mean=_NoValue, correction=_NoValue):
    return _var("var", a, axis, dtype, out, ddof, keepdims, where, mean, correction)


@register(np.std)
@method("std")
def std(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True,
        mean=_NoValue, correction=_NoValue):
    # constant data is a kink (std of [x, y] is |x - y| / 2): derivative 0 there, as abs
    return E.norm_root(_var("std", a, axis, dtype, out, ddof, keepdims, where, mean,
                            correction))


# -- average, median ------------------------------------------------------------------


def _weights_like(w: Atom, t: TensorType, axis: Any) -> Atom:
    """Weights broadcast against ``a`` (shape ``t``), validated as np.average does."""
    wt = typeof(w)
    if wt.shape == t.shape:
        return w
    if axis is None:
        raise TypeError("Axis must be specified when shapes of a and weights differ.")
    given = tuple(normalize_axis(ax, t.ndim) for ax in (axis if isinstance(axis, (tuple, list))
                                                         else (axis,)))
    if wt.shape != tuple(t.shape[ax] for ax in given):
        raise ValueError("Shape of weights must be consistent with shape of a along "
                         "specified axis.")
    w = transpose_to(w, tuple(int(p) for p in np.argsort(given)))
    w = reshape_to(w, tuple(d if i in given else 1 for i, d in enumerate(t.shape)))
    return broadcast_to(w, t.shape)


@register(np.average)
def average(a, axis=None, weights=None, returned=False, *, keepdims=False):
    if returned:
        raise UnsupportedError("average: returned=True is not supported",
                               hint="compute the sum of weights with np.sum")
    t = typeof(a)
    axes = normalize_axes(axis, t.ndim)
    if weights is None:
        if math.prod(_dropped(t, axes)) == 0:
            raise ZeroDivisionError("division by zero")  # NumPy's a.size / avg.size
        return mean(a, axes, keepdims=keepdims)
    w = _weights_like(as_array(weights), t, axis)
    wt = typeof(w)
    dt = float64 if t.dtype.kind in "bi" else promote_types(t.dtype, wt.dtype)
    scale = _ADD.reduce(w, axes, dt)
    _require(_logical(R.reduce_min, True, E.ne(scale, _full(0, (), dt)), _all(scale)),
             "ZeroDivisionError", "Weights sum to zero, can't be normalized")
    weighted = _ADD.reduce(E.mul(convert(a, dt), convert(w, dt)), axes, dt)
    return _restore(E.div(weighted, scale), t, axes, keepdims)


def _rows(x: Atom, axes: tuple[int, ...]) -> Atom:
    """``x`` with the kept axes first and the reduced axes merged into one last axis."""
    t = typeof(x)
    kept = tuple(i for i in range(t.ndim) if i not in axes)
    return reshape_to(transpose_to(x, kept + axes), _dropped(t, axes) + (_extent(t, axes),))


@register(np.median)
def median(a, axis=None, out=None, overwrite_input=False, keepdims=False):
    """Sorts, then averages the middle one or two; a NaN anywhere makes the result NaN."""
    _refuse("median", out=out)
    x = strong(a)
    t = typeof(x)
    axes = normalize_axes(axis, t.ndim)
    dt = _float_dtype(t, None)
    n = _extent(t, axes)
    if n == 0:
        return _restore(_full(np.nan, _dropped(t, axes), dt), t, axes, keepdims)
    rows = _rows(x, axes)
    last = typeof(rows).ndim - 1
    (ordered,) = O.sort(rows, axis=last, num_keys=1, descending=False)
    mid = _mean(slice_axis(ordered, last, (n - 1) // 2, n // 2 + 1), (last,), dt)
    if t.dtype.is_float:  # NaNs sort last
        largest = reshape_to(slice_axis(ordered, last, n - 1, n), _dropped(t, axes))
        mid = E.select(_isnan(largest), largest, mid)
    return _restore(mid, t, axes, keepdims)


# -- cumulative ops and differences ---------------------------------------------------


def _cumulative(m: _Monoid, a, axis, dtype) -> Atom:
    dt = _acc_dtype(typeof(a), dtype)
    if axis is None:
        return m.accumulate(ravel(strong(a)), 0, dt)
    x, ax = along(strong(a), axis)
    return m.accumulate(x, ax, dt)


@register(np.cumsum)
@method("cumsum")
def cumsum(a, axis=None, dtype=None, out=None):
    _refuse("cumsum", out=out)
    return _cumulative(_ADD, a, axis, dtype)


@register(np.cumprod)
@method("cumprod")
def cumprod(a, axis=None, dtype=None, out=None):
    _refuse("cumprod", out=out)
    return _cumulative(_MUL, a, axis, dtype)


def _cumulative_array(name: str, m: _Monoid, x, axis, dtype, out, include_initial) -> Atom:
    """np.cumulative_sum/prod: cumsum/cumprod that may start with the identity."""
    _refuse(name, out=out)
    if axis is None and typeof(x).ndim > 1:
        raise ValueError("For arrays which have more than one dimension ``axis`` argument is "
                         "required.")
    y = _cumulative(m, x, axis, dtype)
    if not include_initial:
        return y
    t = typeof(y)
    ax = 0 if axis is None else normalize_axis(axis, t.ndim)
    start = _full(int(m.identity), tuple(1 if i == ax else d for i, d in enumerate(t.shape)),
                  t.dtype)
    return S.concatenate(start, y, axis=ax)


@register(np.cumulative_sum)
def cumulative_sum(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
    return _cumulative_array("cumulative_sum", _ADD, x, axis, dtype, out, include_initial)


@register(np.cumulative_prod)
def cumulative_prod(x, /, *, axis=None, dtype=None, out=None, include_initial=False):
    return _cumulative_array("cumulative_prod", _MUL, x, axis, dtype, out, include_initial)


def _step(x: Atom, axis: int) -> Atom:
    """``x[1:] - x[:-1]`` along ``axis`` (``!=`` for booleans, as np.diff)."""
    n = typeof(x).shape[axis]
    op = E.ne if typeof(x).dtype.is_bool else E.sub
    return op(slice_axis(x, axis, min(1, n), n), slice_axis(x, axis, 0, max(n - 1, 0)))


def _edge(v: Any, t: TensorType, axis: int) -> Atom:
    """A ``prepend``/``append`` value: a scalar spans ``t`` with one step along ``axis``."""
    v = as_array(v)
    if typeof(v).ndim:
        return v
    return broadcast_to(v, tuple(1 if i == axis else d for i, d in enumerate(t.shape)))


@register(np.diff)
def diff(a, n=1, axis=-1, prepend=_NoValue, append=_NoValue):
    if n == 0:
        return a
    if n < 0:
        raise ValueError(f"order must be non-negative but got {n!r}")
    x = strong(a)
    t = typeof(x)
    if t.ndim == 0:
        raise ValueError("diff requires input that is at least one dimensional")
    ax = normalize_axis(axis, t.ndim)
    parts = [x]
    if prepend is not _NoValue:
        parts.insert(0, _edge(prepend, t, ax))
    if append is not _NoValue:
        parts.append(_edge(append, t, ax))
    if len(parts) > 1:
        x = S.concatenate(*promote(*parts)[0], axis=ax)
    for _ in range(n):
        x = _step(x, ax)
    return x


def _bounding(v: Any, name: str, dt: DType) -> Atom:
    """``to_begin``/``to_end`` of np.ediff1d: raveled, cast to ``ary``'s dtype."""
    v = as_array(v)
    if not np.can_cast(typeof(v).dtype.np, dt.np, "same_kind"):
        raise TypeError(f"dtype of `{name}` must be compatible with input `ary` under the "
                        "`same_kind` rule.")
    return convert(ravel(v), dt)


@register(np.ediff1d)
def ediff1d(ary, to_end=None, to_begin=None):
    x = ravel(strong(ary))
    t = typeof(x)
    _no_bool_subtract(t)
    begin = [] if to_begin is None else [_bounding(to_begin, "to_begin", t.dtype)]
    end = [] if to_end is None else [_bounding(to_end, "to_end", t.dtype)]
    parts = [*begin, _step(x, 0), *end]
    return S.concatenate(*parts, axis=0) if len(parts) > 1 else parts[0]


# -- NaN-ignoring variants ------------------------------------------------------------


@register(np.nansum)
def nansum(a, axis=None, dtype=None, out=None, keepdims=False, initial=_NoValue, where=True):
    _refuse("nansum", out=out, initial=initial, where=where)
    return _total(_ADD, _replace_nan(strong(a), 0), axis, dtype, keepdims)


@register(np.nanprod)
def nanprod(a, axis=None, dtype=None, out=None, keepdims=False, initial=_NoValue, where=True):
    _refuse("nanprod", out=out, initial=initial, where=where)
    return _total(_MUL, _replace_nan(strong(a), 1), axis, dtype, keepdims)


@register(np.nanmean)
def nanmean(a, axis=None, dtype=None, out=None, keepdims=False, *, where=True):
    _refuse("nanmean", out=out, where=where)
    x = strong(a)
    t = typeof(x)
    if not t.dtype.is_float:
        return mean(x, axis, dtype, keepdims=keepdims)
    dt = _float_dtype(t, dtype)
    if not dt.is_float:
        raise TypeError("If a is inexact, then dtype must be inexact")
    axes = _reduce_axes(axis, t.ndim)
    count = _ADD.reduce(E.not_(_isnan(x)), axes, int64)
    total = _ADD.reduce(_replace_nan(x, 0), axes, dt)
    return _restore(E.div(total, convert(count, dt)), t, axes, keepdims)


@register(np.nancumsum)
def nancumsum(a, axis=None, dtype=None, out=None):
    _refuse("nancumsum", out=out)
    return _cumulative(_ADD, _replace_nan(strong(a), 0), axis, dtype)


@register(np.nancumprod)
def nancumprod(a, axis=None, dtype=None, out=None):
    _refuse("nancumprod", out=out)
    return _cumulative(_MUL, _replace_nan(strong(a), 1), axis, dtype)


def _nan_var(name, a, axis, dtype, out, ddof, keepdims, where, mean, correction) -> Atom:
    """np.nanvar: the variance of the non-NaN elements; NaN where fewer than ``ddof``
    remain (not inf, unlike np.var)."""
    x = strong(a)
    t = typeof(x)
    if not t.dtype.is_float:
        return _var(name, x, axis, dtype, out, ddof, keepdims, where, mean, correction)
    _refuse(name, out=out, where=where, mean=mean)
    ddof = _ddof(ddof, correction)
    dt = _float_dtype(t, dtype)
    axes = _reduce_axes(axis, t.ndim)
    present = E.not_(_isnan(x))
    count = convert(_ADD.reduce(present, axes, int64), dt)
    values = convert(_replace_nan(x, 0), dt)
    centre = E.div(_ADD.reduce(values, axes, dt), count)
    centre = broadcast_to(_restore(centre, t, axes, True), t.shape)
    dev = E.select(present, E.sub(values, centre), _full(0, (), dt))
    dof = E.sub(count, _full(ddof, (), dt))
    spread = E.div(R.reduce_sum(E.mul(dev, dev), axes=axes), dof)
    spread = E.select(E.gt(dof, _full(0, (), dt)), spread, _full(np.nan, (), dt))
    return _restore(spread, t, axes, keepdims)


@register(np.nanvar)
def nanvar(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True,
           mean=_NoValue, correction=_NoValue):
    return _nan_var("nanvar", a, axis, dtype, out, ddof, keepdims, where, mean, correction)


@register(np.nanstd)
def nanstd(a, axis=None, dtype=None, out=None, ddof=0, keepdims=False, *, where=True,
           mean=_NoValue, correction=_NoValue):
    return E.norm_root(_nan_var("nanstd", a, axis, dtype, out, ddof, keepdims, where, mean,
                                correction))


def _nan_extreme(prim: Op, fill: float, a, axis, keepdims) -> Atom:
    """max/min ignoring NaNs; a slice of only NaNs gives NaN."""
    x = strong(a)
    t = typeof(x)
    if not t.dtype.is_float:
        return _extreme(prim, x, axis, keepdims)
    axes = _reduce_axes(axis, t.ndim)
    best = prim(_replace_nan(x, fill), axes=axes)
    only_nan = R.reduce_min(_isnan(x), axes=axes)
    return _restore(E.select(only_nan, _full(np.nan, (), t.dtype), best), t, axes, keepdims)


@register(np.nanmax)
def nanmax(a, axis=None, out=None, keepdims=False, initial=_NoValue, where=True):
    _refuse("nanmax", out=out, initial=initial, where=where)
    return _nan_extreme(R.reduce_max, -np.inf, a, axis, keepdims)


@register(np.nanmin)
def nanmin(a, axis=None, out=None, keepdims=False, initial=_NoValue, where=True):
    _refuse("nanmin", out=out, initial=initial, where=where)
    return _nan_extreme(R.reduce_min, np.inf, a, axis, keepdims)


def _nan_arg(prim: Op, fill: float, a, axis, keepdims) -> Atom:
    """argmax/argmin ignoring NaNs; NumPy refuses a slice of only NaNs at run time."""
    x = strong(a)
    t = typeof(x)
    if t.dtype.is_float and t.size:
        only_nan = _truth(R.reduce_min, True, _isnan(x), axis, False)
        _require(E.not_(_logical(R.reduce_max, False, only_nan, _all(only_nan))),
                 "ValueError", "All-NaN slice encountered")
        x = _replace_nan(x, fill)
    return _arg(prim, x, axis, keepdims)


@register(np.nanargmax)
def nanargmax(a, axis=None, out=None, *, keepdims=False):
    _refuse("nanargmax", out=out)
    return _nan_arg(R.argmax, -np.inf, a, axis, keepdims)


@register(np.nanargmin)
def nanargmin(a, axis=None, out=None, *, keepdims=False):
    _refuse("nanargmin", out=out)
    return _nan_arg(R.argmin, np.inf, a, axis, keepdims)


# -- builtins -------------------------------------------------------------------------


@register(builtins.sum)
def builtin_sum(iterable, /, start=0):
    """``start + it[0] + it[1] + ...``; an array is iterated along its first axis."""
    if isinstance(iterable, (list, tuple)):
        total = start
        for item in iterable:
            total = OPERATORS["add"](total, item)
        return total
    t = typeof(iterable)
    if t.ndim == 0:
        raise TypeError("iteration over a 0-d array")
    if t.shape[0] == 0:
        return start
    dt = result_type(typeof(start), TensorType((), t.dtype)).dtype
    return OPERATORS["add"](start, _ADD.reduce(iterable, (0,), dt))


#: Python's max/min: the comparison by which a later item replaces the best so far, the
#: reduction finding the first best element of an array, and a value every number beats.
_PYTHON_EXTREMES = {"max": (E.gt, R.argmax, -np.inf), "min": (E.lt, R.argmin, np.inf)}


def _python_extreme(name: str, args: tuple, key: Any, default: Any) -> Any:
    """Python's max/min: the first item that no later one beats (``>`` for max, ``<`` for
    min), so a leading NaN wins and later NaNs never do."""
    _refuse(name, key=key)
    if len(args) != 1:
        if default is not _NoValue:
            raise TypeError(f"Cannot specify a default for {name}() with multiple "
                            "positional arguments")
        return _first_best(name, args)
    (items,) = args
    if isinstance(items, (list, tuple)):
        if not items:
            return _empty(name, default)
        return _first_best(name, items)
    return _best_row(name, items, default)


def _empty(name: str, default: Any) -> Any:
    if default is _NoValue:
        raise ValueError(f"{name}() arg is an empty sequence")
    return default


def _ambiguous() -> ValueError:
    """What comparing arrays of several elements in an ``if`` raises."""
    return ValueError("The truth value of an array with more than one element is ambiguous. "
                      "Use a.any() or a.all()")


def _first_best(name: str, items: Sequence[Any]) -> Atom:
    better = _PYTHON_EXTREMES[name][0]
    # Python returns one argument unchanged: with run-time values of several dtypes the
    # result's dtype would follow the data (Python number constants are joined, like 0)
    dtypes = {typeof(x).dtype for x in items if isinstance(x, Var) or not typeof(x).weak}
    joined = result_type(*(typeof(x) for x in items)).dtype
    if any(isinstance(x, Var) for x in items) and (len(dtypes) > 1 or joined not in dtypes):
        dtypes.add(joined)
        shown = ", ".join(sorted(d.name for d in dtypes))
        raise UnsupportedError(
            f"{name}() of values of different dtypes ({shown}) returns one of them unchanged, "
            "so the result's dtype would depend on the data",
            hint="convert the arguments to one dtype first, e.g. float(...) or .astype(...)")
    operands, _ = promote(*items)
    shapes = [typeof(x).shape for x in operands]
    if len(operands) > 1 and any(s != () for s in shapes):
        if any(math.prod(s) != 1 for s in shapes):
            raise _ambiguous()
        raise UnsupportedError(f"{name}() of one-element arrays is not supported",
                               hint=f"use np.{name}imum for elementwise results")
    best, *rest = operands
    for item in rest:
        best = E.select(better(item, best), item, best)
    return best


def _best_row(name: str, x: Any, default: Any) -> Atom:
    """max/min of an array iterated along its first axis."""
    _, arg, beaten = _PYTHON_EXTREMES[name]
    x = strong(x)
    t = typeof(x)
    if t.ndim == 0:
        raise TypeError("iteration over a 0-d array")
    if t.shape[0] == 0:
        return _empty(name, default)
    if t.shape[0] == 1:
        return reshape_to(x, t.shape[1:])
    if math.prod(t.shape[1:]) != 1:
        raise _ambiguous()
    flat = ravel(x)
    index = arg(_replace_nan(flat, beaten), axis=0)
    if t.dtype.is_float:
        first = reshape_to(slice_axis(flat, 0, 0, 1), ())
        index = E.select(_isnan(first), _full(0, (), int64), index)
    return reshape_to(I.dynamic_slice(flat, index, sizes=(1,)), t.shape[1:])


@register(builtins.max)
def builtin_max(*args, key=None, default=_NoValue):
    return _python_extreme("max", args, key, default)


@register(builtins.min)
def builtin_min(*args, key=None, default=_NoValue):
    return _python_extreme("min", args, key, default)
