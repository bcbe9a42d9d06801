"""Algebraic simplification: identities that hold bit for bit in IEEE arithmetic, aimed
at what reverse mode emits (products with broadcast ones, sums with zeros, chains of
transposes, reshapes and broadcasts).

* ``x * 1``, ``1 * x``, ``x / 1``, ``x ** 1`` (the derivative of a square), ``x - 0`` and
  ``x + (-0.0)``, ``(-0.0) + x`` (``+0`` for integers), where the constant is a literal
  or a broadcast literal: ``x``.  Not
  ``x + 0.0`` on floats, which turns ``-0.0`` into ``0.0``, nor ``x * 0``, which is NaN
  for an infinite or NaN ``x``;
* ``neg(neg(x))``, ``convert`` to ``x``'s own type, a ``broadcast_in_dim``,
  ``transpose`` or ``reshape`` that changes nothing, ``reduce_sum`` over no axes: ``x``;
* a broadcast of a broadcast (or of a reshape that only adds axes of size 1), a
  transpose of a transpose, a reshape of a reshape: one op applied to the innermost
  operand;
* ``select`` with a literal predicate, or with one value on both sides: that value.

A value is only ever replaced by one of exactly its type (shape, dtype and weakness);
where they differ, the equation stays.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np

from ..ir.core import Atom, Eqn, Lit
from .walk import Forward, forward_pass


class _Simplify(Forward):
    def visit(self, eqn: Eqn) -> list[Atom] | None:
        rule = RULES.get(eqn.op.name)
        found = rule(self, eqn) if rule is not None else None
        if found is None or found.type != eqn.outputs[0].type:
            return None
        return [found]

    def splat(self, a: Atom) -> np.generic | None:
        """The one value every element of ``a`` holds, bit for bit, when ``a`` is a
        literal or a broadcast of one."""
        eqn = self.definition(a)
        if eqn is not None and eqn.op.name == "broadcast_in_dim":
            return self.splat(eqn.inputs[0])
        if not isinstance(a, Lit) or a.value.size == 0:
            return None
        flat = np.ascontiguousarray(a.value).reshape(-1)
        raw = flat.view(np.uint8).reshape(flat.size, -1)
        return flat[0] if (raw == raw[0]).all() else None

    def is_const(self, a: Atom, value: float) -> bool:
        """Whether every element of ``a`` is ``value`` (bit for bit: -0.0 is not 0)."""
        s = self.splat(a)
        return s is not None and s.tobytes() == np.asarray(value, s.dtype).tobytes()

    def producer(self, a: Atom, name: str) -> Eqn | None:
        """The equation computing ``a`` when it is a ``name`` op."""
        eqn = self.definition(a)
        return eqn if eqn is not None and eqn.op.name == name else None


Rule = Callable[[_Simplify, Eqn], Atom | None]


def _neutral(value: Callable[[np.dtype], float], sides: tuple[int, ...]) -> Rule:
    """``x op e`` (and ``e op x`` when ``sides`` has 0) is ``x`` when every element of
    ``e`` is ``value(dtype)``."""

    def rule(s: _Simplify, eqn: Eqn) -> Atom | None:
        for k in sides:
            e, x = eqn.inputs[k], eqn.inputs[1 - k]
            if s.is_const(e, value(x.type.dtype.np)):
                return x
        return None

    return rule


def _additive_zero(dt: np.dtype) -> float:
    """The zero that leaves every ``x`` unchanged: ``-0.0 + 0.0`` is ``0.0``, but
    ``x + -0.0`` is ``x`` for every float ``x``."""
    return -0.0 if dt.kind == "f" else 0


def _neg(s: _Simplify, eqn: Eqn) -> Atom | None:
    inner = s.producer(eqn.inputs[0], "neg")
    return inner.inputs[0] if inner is not None else None


def _convert(s: _Simplify, eqn: Eqn) -> Atom | None:
    x = eqn.inputs[0]
    same = x.type.dtype == eqn.params["dtype"] and x.type.weak == eqn.params["weak"]
    return x if same else None


def _unit_axes(src: tuple[int, ...], dst: tuple[int, ...]) -> tuple[int, ...] | None:
    """Where each axis of ``src`` lands when a reshape to ``dst`` only inserts axes of
    size 1 (None otherwise, or when ``src`` has size-1 axes of its own)."""
    placed = tuple(i for i, d in enumerate(dst) if d != 1)
    if 1 in src or tuple(dst[i] for i in placed) != src:
        return None
    return placed


def _broadcast_source(s: _Simplify, x: Atom) -> tuple[Atom, tuple[int, ...]] | None:
    """``(y, where)`` when ``x`` is ``y`` broadcast or given unit axes, each axis ``i`` of
    ``y`` becoming axis ``where[i]`` of ``x``."""
    inner = s.producer(x, "broadcast_in_dim")
    if inner is not None:
        return inner.inputs[0], inner.params["dims"]
    inner = s.producer(x, "reshape")
    if inner is not None:
        where = _unit_axes(inner.inputs[0].type.shape, x.type.shape)
        if where is not None:
            return inner.inputs[0], where
    return None


def _broadcast(s: _Simplify, eqn: Eqn) -> Atom | None:
    found = _broadcast_source(s, eqn.inputs[0])
    if found is not None:
        y, where = found
        dims = eqn.params["dims"]
        eqn.inputs = [y]
        eqn.params["dims"] = tuple(dims[d] for d in where)
    x = eqn.inputs[0]
    same = eqn.params["shape"] == x.type.shape and eqn.params["dims"] == tuple(range(x.type.ndim))
    return x if same else None


def _transpose(s: _Simplify, eqn: Eqn) -> Atom | None:
    inner = s.producer(eqn.inputs[0], "transpose")
    if inner is not None:
        first = inner.params["perm"]
        eqn.inputs = [inner.inputs[0]]
        eqn.params["perm"] = tuple(first[p] for p in eqn.params["perm"])
    x = eqn.inputs[0]
    return x if eqn.params["perm"] == tuple(range(x.type.ndim)) else None


def _reshape(s: _Simplify, eqn: Eqn) -> Atom | None:
    inner = s.producer(eqn.inputs[0], "reshape")
    if inner is not None:
        eqn.inputs = [inner.inputs[0]]
    x = eqn.inputs[0]
    return x if eqn.params["shape"] == x.type.shape else None


def _same(a: Atom, b: Atom) -> bool:
    if isinstance(a, Lit) and isinstance(b, Lit):
        return a.key() == b.key()
    return a is b


def _select(s: _Simplify, eqn: Eqn) -> Atom | None:
    pred, a, b = eqn.inputs
    if _same(a, b):
        return a
    p = s.splat(pred)
    if p is None:
        return None
    return a if bool(p) else b


def _sum(s: _Simplify, eqn: Eqn) -> Atom | None:
    return eqn.inputs[0] if eqn.params["axes"] == () else None


RULES: dict[str, Rule] = {
    "mul": _neutral(lambda dt: 1, (0, 1)),
    "div": _neutral(lambda dt: 1, (1,)),
    "pow": _neutral(lambda dt: 1, (1,)),
    "add": _neutral(_additive_zero, (0, 1)),
    "sub": _neutral(lambda dt: 0, (1,)),
    "neg": _neg,
    "convert": _convert,
    "broadcast_in_dim": _broadcast,
    "transpose": _transpose,
    "reshape": _reshape,
    "select": _select,
    "reduce_sum": _sum,
}

#: ``simplify(func) -> Func``
simplify = forward_pass(_Simplify)
