"""Derivatives have their primal's type exactly, weak flag included."""

from __future__ import annotations

from ..ir.core import Atom
from ..ir.types import StackType
from ..ops import elementwise as E


def fit(d: Atom, t) -> Atom:
    """``d`` (a tangent or cotangent) with the type ``t`` of its primal."""
    if d.type == t or isinstance(t, StackType):
        return d
    if d.type.shape == t.shape and d.type.dtype == t.dtype:
        return E.convert(d, dtype=t.dtype, weak=t.weak)
    raise TypeError(f"internal: derivative of type {d.type} for a value of type {t}")
