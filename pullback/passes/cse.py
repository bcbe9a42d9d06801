"""Common subexpression elimination: an equation that repeats an earlier one (same op,
same params, same operands) reuses its outputs.

Scoped like the IR: a value computed in an enclosing block is reused inside a nested
block, never the other way round, and never across sibling blocks.  The blocks of
``checkpoint`` and the custom-rule ops are closed (they read only their parameters), so
they start from an empty table.  Never merged: effects, stack operations (each stack
value is used once), equations that own blocks, calls of functions with effects, and
``empty`` (each is a buffer of its own to fill: merged, the second's updates would copy
the first's).
Operands of commutative ops are compared in either order.
"""

from __future__ import annotations

from collections import ChainMap
from typing import Any

from ..ir.core import Atom, Block, Eqn, Func, Lit
from ..ir.liveness import Effects
from ..ir.types import StackType
from .walk import Forward, forward_pass

#: Ops whose operands may be swapped without changing a bit of the result.
_COMMUTATIVE = frozenset({"add", "mul", "and", "or", "xor", "eq", "ne"})

#: Ops whose blocks may read the values of the blocks around them.
_OPEN_BLOCKS = frozenset({"cond", "while_loop", "for_loop"})


def _atom_key(a: Atom) -> tuple:
    return ("lit", *a.key()) if isinstance(a, Lit) else ("var", id(a))


def _param_key(v: Any) -> Any:
    """A hashable identity of a param value: functions by identity, floats by their
    ``repr`` (so that 0.0 and -0.0 differ)."""
    if isinstance(v, Func):
        return ("func", id(v))
    if isinstance(v, tuple):
        return tuple(_param_key(x) for x in v)
    return (type(v).__name__, repr(v) if isinstance(v, float) else v)


class _CSE(Forward):
    def __init__(self):
        super().__init__()
        self.effects = Effects()
        self.table: ChainMap = ChainMap()

    def enter(self, eqn: Eqn, inner: Block) -> None:
        saved = self.table
        self.table = saved.new_child() if eqn.op.name in _OPEN_BLOCKS else ChainMap()
        self.block(inner)
        self.table = saved

    def visit(self, eqn: Eqn) -> list[Atom] | None:
        if not self.mergeable(eqn):
            return None
        ins = [_atom_key(a) for a in eqn.inputs]
        if eqn.op.name in _COMMUTATIVE:
            ins.sort()
        params = tuple(sorted((k, _param_key(v)) for k, v in eqn.params.items()))
        key = (eqn.op.name, tuple(ins), params)
        found = self.table.get(key)
        if found is None:
            self.table[key] = list(eqn.outputs)
        return found

    def mergeable(self, eqn: Eqn) -> bool:
        if not eqn.outputs or eqn.op.blocks or eqn.op.name == "empty" or \
                self.effects.eqn(eqn):
            return False
        return not any(isinstance(v.type, StackType) for v in (*eqn.inputs, *eqn.outputs))


#: ``cse(func) -> Func``
cse = forward_pass(_CSE)
