"""np.partition and np.argpartition with a static ``kth``, by sorting.

NumPy promises only that the element at each ``kth`` is where a sort would put it, with
no larger element before it and no smaller one after it; the order within the two sides
is whatever its introselect leaves.  A sorted array keeps every promise, so that is the
answer here: equal to NumPy at each ``kth`` and on which side each element lies, not
necessarily in the order within a side.  (A sort is O(n log n) where introselect is
O(n); its derivative is the sort's, a permutation.)
"""

from __future__ import annotations

import operator
from typing import Any

import numpy as np

from ..errors import UnsupportedError
from ..ir.core import Atom
from .core import CALLABLES, as_array, normalize_axis, register, static


def _checked(a: Any, kth: Any, axis: Any, kind: str, order: Any) -> tuple[Atom, Any]:
    if order is not None:
        raise UnsupportedError("partition: order= (structured arrays) is not supported",
                               hint="pullback arrays have no fields")
    if kind != "introselect":
        raise ValueError(f"{kind!r} is not a valid kind")
    x = as_array(a)
    if axis is None:
        x, axis = CALLABLES[np.ravel](x), 0
    elif x.type.ndim == 0:
        raise np.exceptions.AxisError(axis, 0)
    n = x.type.shape[normalize_axis(axis, x.type.ndim)]
    ks = np.atleast_1d(static(kth, "kth"))
    if ks.dtype.kind not in "iub":
        raise TypeError("Partition index must be integer")
    for k in ks.tolist():
        k = operator.index(k)
        if not -n <= k < n:
            raise ValueError(f"kth(={k}) out of bounds ({n})")
    return x, axis


@register(np.partition)
def partition(a: Any, kth: Any, axis: Any = -1, kind: str = "introselect",
              order: Any = None) -> Atom:
    x, axis = _checked(a, kth, axis, kind, order)
    return CALLABLES[np.sort](x, axis=axis)


@register(np.argpartition)
def argpartition(a: Any, kth: Any, axis: Any = -1, kind: str = "introselect",
                 order: Any = None) -> Atom:
    x, axis = _checked(a, kth, axis, kind, order)
    return CALLABLES[np.argsort](x, axis=axis, kind="stable")


__all__ = ["argpartition", "partition"]
