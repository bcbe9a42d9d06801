"""Constant folding: an equation whose operands are all literals and whose results are
small is evaluated now, with its op's NumPy ``impl``, and its results become literals.

Left alone: effects, control flow, stacks, ops without operands (``iota`` is its own
cheapest form), ``broadcast_in_dim`` (a broadcast literal is already a constant, and
one scalar is what the native backend wants), results of more than ``MAX_ELEMENTS``
elements, and an ``impl`` that raises (the error stays where the program raises it).
"""

from __future__ import annotations

import numpy as np

from ..ir.core import Atom, Eqn, Lit
from ..ir.types import TensorType
from .walk import Forward, forward_pass

#: The largest result (in elements) worth turning into a literal.
MAX_ELEMENTS = 64


def foldable(eqn: Eqn) -> bool:
    """Whether evaluating ``eqn`` at compile time is safe and worth it."""
    op = eqn.op
    if op.effect or op.owns_code or op.name == "broadcast_in_dim" or not eqn.inputs:
        return False
    if not all(isinstance(a, Lit) for a in eqn.inputs):
        return False
    return all(isinstance(o.type, TensorType) and o.type.size <= MAX_ELEMENTS
               for o in eqn.outputs)


def evaluate(eqn: Eqn) -> list[Lit] | None:
    """The results of an all-literal equation as literals; None when its ``impl`` raises
    or returns something other than what the op's shape rule promised."""
    try:
        with np.errstate(all="ignore"):
            result = eqn.op.impl(*(a.value for a in eqn.inputs), **eqn.params)
    except Exception:  # the program raises it when it runs, if it gets there
        return None
    values = list(result) if eqn.op.multiple_results else [result]
    if len(values) != len(eqn.outputs):
        return None
    lits = []
    for v, o in zip(values, eqn.outputs, strict=True):
        arr = np.asarray(v)
        if arr.dtype != o.type.dtype.np or arr.shape != o.type.shape:
            return None
        lits.append(Lit(arr, o.type))
    return lits


class _Fold(Forward):
    def visit(self, eqn: Eqn) -> list[Atom] | None:
        return evaluate(eqn) if foldable(eqn) else None


#: ``fold(func) -> Func``
fold = forward_pass(_Fold)
