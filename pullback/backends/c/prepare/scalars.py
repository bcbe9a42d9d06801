"""Scalars first: pure 0-d equations move up to just after their operands are made.

Fusion runs consecutive element-wise equations as one kernel, so a scalar computed
between two of them (an optimiser's learning-rate schedule between its update direction
and the parameter update, a dtype conversion of a step size) splits the kernel in two
and sends the array between them through memory.  A pure scalar equation (no effect, no
block, no run-time stack, not an integer division that a check before it guards) computes
the same wherever its operands exist, so it is placed as early as they allow.
"""

from __future__ import annotations

from ....ir.core import Block, Eqn, Module
from ....ir.types import TensorType
from ....passes.walk import FunctionPass

#: Integer ops a check placed before them may guard (a zero divisor, a negative power).
_GUARDED = {"floordiv", "mod", "pow"}


def _movable(e: Eqn) -> bool:
    if e.op.effect or e.op.blocks or not e.outputs:
        return False
    types = [a.type for a in (*e.inputs, *e.outputs)]
    if not all(isinstance(t, TensorType) and t.shape == () for t in types):
        return False
    return not (e.op.name in _GUARDED and not e.outputs[0].type.dtype.is_float)


def scalars_first(blk: Block) -> None:
    """Reorder ``blk`` (and the blocks nested in it) in place: each movable equation goes
    right after the last other equation its operands come from (movable ones keep their
    order among themselves, so they stay after the scalars they read)."""
    anchor: dict[int, int] = {}  # a value: the other equation it comes after (-1: none)
    after: dict[int, list[Eqn]] = {-1: []}
    for k, e in enumerate(blk.eqns):
        for inner in e.blocks():
            scalars_first(inner)
        if _movable(e):
            at = max((anchor[id(a)] for a in e.inputs if id(a) in anchor), default=-1)
            after[at].append(e)
        else:
            at = k
            after[k] = []
        anchor.update((id(o), at) for o in e.outputs)
    blk.eqns = [*after[-1], *(x for k, e in enumerate(blk.eqns) if k in after
                              for x in (e, *after[k]))]


_PASS = FunctionPass(lambda block, rw: scalars_first(block))


def hoist_scalars(module: Module) -> Module:
    """A copy of ``module`` whose pure scalar equations come as early as they can."""
    return Module.of(_PASS(module.main))
