"""Dead code elimination: equations whose outputs nobody reads and that have no effect
go, inside nested blocks too.

Stacks need no special case: a push or pop is kept while the stack it returns is read,
and stack values are linear, so a dropped one was the last use of its stack.  The
signatures of control flow are left alone (a loop keeps every carried value, a block
every result): only equations are removed.
"""

from __future__ import annotations

from ..ir.core import Block, Var
from ..ir.rewrite import free_vars
from .walk import Effects, FunctionPass


def _live_block(block: Block, effects: Effects) -> None:
    """Keep, from last to first, the equations that are read or have effects; the
    values a kept equation reads (in its blocks too) become live in turn."""
    live = {id(r) for r in block.results if isinstance(r, Var)}
    kept = []
    for eqn in reversed(block.eqns):
        if not any(id(o) in live for o in eqn.outputs) and not effects.eqn(eqn):
            continue
        for inner in eqn.blocks():
            _live_block(inner, effects)
            live.update(id(v) for v in free_vars(inner))
        live.update(id(a) for a in eqn.inputs if isinstance(a, Var))
        kept.append(eqn)
    block.eqns = kept[::-1]


#: ``dce(func) -> Func``
dce = FunctionPass(lambda block, rw: _live_block(block, Effects()))
