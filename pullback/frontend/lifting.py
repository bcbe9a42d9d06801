"""Moving between abstract values and the operands NumPy mappings take.

``lower`` replaces cells by their IR values (inside lists, tuples, dicts and slices);
``lift`` wraps what a mapping returns into fresh cells.
"""

from __future__ import annotations

from collections.abc import ItemsView, KeysView, ValuesView
from typing import Any

import numpy as np

from ..errors import ConcretizationError
from ..ir.core import Lit, Var
from ..tree import tree_leaves
from .values import DynStr, Ref, lit_ref

_VIEWS = (KeysView, ValuesView, ItemsView, set, frozenset)


def lower(x: Any) -> Any:
    if isinstance(x, Ref):
        return x.get()
    if type(x) in (list, tuple):
        return type(x)(lower(e) for e in x)
    if type(x) is dict:
        return {k: lower(v) for k, v in x.items()}
    if isinstance(x, _VIEWS):  # d.values() and friends: what iterating them gives
        return [lower(e) for e in x]
    if isinstance(x, slice):
        return slice(lower(x.start), lower(x.stop), lower(x.step))
    if isinstance(x, DynStr):
        raise ConcretizationError("an f-string of run-time values can only be printed",
                                  hint="print it, or format only compile-time values")
    return x


def lift(x: Any, kind: str | None = None) -> Any:
    if isinstance(x, (Var, Lit)):
        return Ref(x, kind)
    if isinstance(x, np.ndarray):
        return lit_ref(x)
    if type(x) in (list, tuple):
        return type(x)(lift(e, kind) for e in x)
    if isinstance(x, tuple) and hasattr(x, "_make"):
        return x._make(lift(e, kind) for e in x)
    return x


def has_ref(x: Any) -> bool:
    """Whether ``x`` holds a staged value anywhere in its containers."""
    if isinstance(x, (Ref, DynStr)):
        return True
    if isinstance(x, slice):
        return any(has_ref(e) for e in (x.start, x.stop, x.step))
    if isinstance(x, _VIEWS):
        return any(has_ref(e) for e in x)
    if isinstance(x, (list, tuple, dict)) or (hasattr(x, "__dataclass_fields__")
                                              and not isinstance(x, type)):
        return any(isinstance(e, (Ref, DynStr)) or (isinstance(e, slice) and has_ref(e))
                   for e in tree_leaves(x))
    return False


def concrete(x: Any) -> Any:
    """``x`` with constant cells replaced by their values, or None if a cell is dynamic."""
    if isinstance(x, Ref):
        a = x.get()
        if not isinstance(a, Lit):
            return None
        return a.value.item() if x.kind == "scalar" and a.type.weak else (
            a.value[()] if x.kind == "scalar" else np.array(a.value))
    return x


def tree_leaves_refs(x: Any) -> list[Ref]:
    """Every cell held in ``x``'s containers (views count as cells)."""
    return [r for r in tree_leaves(x) if isinstance(r, Ref)]
