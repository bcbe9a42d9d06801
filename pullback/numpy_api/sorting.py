"""np.sort, np.argsort and np.searchsorted on the ``sort`` primitive and comparisons.

``kind=`` and ``stable=`` are accepted and ignored: the primitive is always stable, which
is a valid answer for every kind NumPy offers.  ``np.unique`` is not mapped (its result's
shape depends on the data), nor is the in-place ``ndarray.sort`` (it returns None).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..errors import UnsupportedError
from ..ir.core import Atom, Var
from ..ir.types import int64
from ..ops import control as C
from ..ops import elementwise as E
from ..ops import reduce as R
from ..ops import shape as S
from ..ops import sort as O
from .core import broadcast_to, convert, method, normalize_axis, promote, register, strong, typeof
from .creation import as_array
from .manip import ravel
from .reductions import along


def _refuse_order(name: str, order: Any) -> None:
    if order is not None:
        raise UnsupportedError(f"{name}: order= (sorting structured arrays) is not supported",
                               hint="pullback arrays have no fields")


@register(np.sort)
def sort(a, axis=-1, kind=None, order=None, *, stable=None):
    _refuse_order("sort", order)
    x = strong(a)
    if axis is None:
        x, ax = ravel(x), 0
    else:
        ax = normalize_axis(axis, typeof(x).ndim)
    return O.sort(x, axis=ax, num_keys=1, descending=False)[0]


@register(np.argsort)
@method("argsort")
def argsort(a, axis=-1, kind=None, order=None, *, stable=None):
    """The positions in sorted order: ``sort`` carrying an ``iota`` along."""
    _refuse_order("argsort", order)
    x = strong(a)
    x, ax = (ravel(x), 0) if axis is None else along(x, axis)
    positions = S.iota(shape=typeof(x).shape, dim=ax, dtype=int64)
    return O.sort(x, positions, axis=ax, num_keys=1, descending=False)[1]


def _before(a: Atom, v: Atom, side: str) -> Atom:
    """Whether ``a`` goes before ``v`` in a sorted array (``side='left'``: ``a < v``,
    ``'right'``: ``a <= v``), with NaN after every number as np.sort places it."""
    if side == "left":
        below = E.lt(a, v)
        if typeof(a).dtype.is_float:
            below = E.or_(below, E.and_(E.ne(v, v), E.eq(a, a)))
        return below
    below = E.le(a, v)
    return E.or_(below, E.ne(v, v)) if typeof(a).dtype.is_float else below


@register(np.searchsorted)
@method("searchsorted")
def searchsorted(a, v, side="left", sorter=None):
    """Counts the elements of ``a`` that go before each ``v``: O(len(a)) work per value,
    in exchange for a result that is a plain reduction."""
    if sorter is not None:
        raise UnsupportedError("searchsorted: sorter= is not supported",
                               hint="pass the sorted array, e.g. a[sorter]")
    if side not in ("left", "right"):
        raise ValueError(f"side must be 'left' or 'right' (got {side!r})")
    if typeof(a).ndim != 1:
        raise ValueError("object too deep for desired array")
    if isinstance(v, (list, tuple)):
        v = as_array(v)
    (a, v), _ = promote(strong(a), v)
    vshape = typeof(v).shape
    grid = vshape + typeof(a).shape
    a = broadcast_to(a, grid)
    v = S.broadcast_in_dim(v, shape=grid, dims=tuple(range(len(vshape))))
    return R.reduce_sum(convert(_before(a, v, side), int64), axes=(len(vshape),))


@register(np.digitize)
def digitize(x, bins, right=False):
    """``searchsorted`` of the bins (reversed for decreasing bins); bins known only at run
    time get both answers and pick by the direction their ends show, after checking the
    bins are monotonic as NumPy does."""
    bins = strong(as_array(bins))
    if typeof(bins).ndim != 1:
        raise ValueError("object too deep for desired array")
    side = "left" if right else "right"
    n = typeof(bins).size
    increasing = searchsorted(bins, x, side=side)
    if n < 2:
        return increasing
    reversed_bins = S.rev(bins, dims=(0,))
    decreasing = E.sub(convert(n, int64), searchsorted(reversed_bins, x, side=side))
    if not isinstance(bins, Var):
        steps = np.diff(bins.value)
        if (steps >= 0).all():
            return increasing
        if (steps <= 0).all():
            return decreasing
        raise ValueError("bins must be monotonically increasing or decreasing")
    head = S.slice_(bins, start=(0,), limit=(n - 1,), stride=(1,))
    tail = S.slice_(bins, start=(1,), limit=(n,), stride=(1,))
    rises = R.reduce_min(E.le(head, tail), axes=(0,))
    falls = R.reduce_min(E.ge(head, tail), axes=(0,))
    C.check(E.or_(rises, falls), exc="ValueError",
            fmt="bins must be monotonically increasing or decreasing")
    return E.select(rises, increasing, decreasing)
