"""What a ``for`` loop or a comprehension iterates over.

``Seq`` is a static sequence of abstract values (unrolled).  ``Counted`` is anything with
a length and an element at each position: ``range`` (bounds may be run-time values),
an array's first axis, and ``zip``/``enumerate``/``reversed`` of those; a loop over it can
stay rolled, the position being a run-time index.
"""

from __future__ import annotations

import builtins
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..errors import ConcretizationError
from ..ir.core import Lit
from ..numpy_api import CALLABLES, OPERATORS
from .lifting import lower
from .values import Ref

Value = Any


@dataclass
class Counted:
    length: int | Ref
    at: Callable[[Value], Value]  # the element at position k (an int or an index cell)
    bounds: tuple[Value, Value, Value] | None = None  # (lo, hi, step) for a plain range

    @property
    def static_length(self) -> int | None:
        if isinstance(self.length, int):
            return self.length
        a = self.length.get()
        return int(a.value) if isinstance(a, Lit) else None

    def items(self) -> list[Value]:
        n = self.static_length
        if n is None:
            raise ConcretizationError(
                "the number of items depends on run-time values, so they cannot be listed "
                "at compile time", hint="use a for loop over range() instead")
        return [self.at(k) for k in range(n)]


def arith(name: str, a: Value, b: Value) -> Value:
    """``a <op> b`` on Python ints or index cells, with Python's integer semantics."""
    if name in ("add", "sub") and _is(b, 0) or name == "mul" and _is(b, 1):
        return a
    if name in ("add", "mul") and _is(a, 1 if name == "mul" else 0):
        return b
    if isinstance(a, Ref) or isinstance(b, Ref):
        fn = CALLABLES[getattr(builtins, name)] if name in ("max", "min") else OPERATORS[name]
        return Ref(fn(lower(a), lower(b)))
    return {"add": int.__add__, "mul": int.__mul__, "sub": int.__sub__,
            "floordiv": int.__floordiv__, "max": max, "min": min}[name](int(a), int(b))


def _is(x: Value, n: int) -> bool:
    return not isinstance(x, Ref) and x == n


def range_counted(lo: Value, hi: Value, step: Value) -> Counted:
    if not any(isinstance(v, Ref) for v in (lo, hi, step)):
        n = len(range(lo, hi, step))
    else:  # ceil((hi - lo) / step), at least 0
        n = arith("max", arith("sub", 0, arith("floordiv", arith("sub", lo, hi), step)), 0)
    return Counted(n, lambda k: arith("add", lo, arith("mul", k, step)), (lo, hi, step))


def zip_counted(parts: list[Counted]) -> Counted:
    n: Any = parts[0].length
    for p in parts[1:]:
        m = p.length
        if isinstance(n, int) and isinstance(m, int):
            n = min(n, m)
        else:
            n = arith("min", n, m)
    return Counted(n, lambda k: tuple(p.at(k) for p in parts))


def enumerate_counted(part: Counted, start: Value) -> Counted:
    return Counted(part.length, lambda k: (arith("add", start, k), part.at(k)))


def reversed_counted(part: Counted) -> Counted:
    n = part.length
    return Counted(n, lambda k: part.at(arith("sub", arith("sub", n, 1), k)))
