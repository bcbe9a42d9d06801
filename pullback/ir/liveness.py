"""Which equations matter: those with effects (a print, a failed check), directly or
through the blocks and functions they run, and those whose outputs are read.

Stacks need no special case: a push or pop is kept while the stack it returns is read,
and stack values are linear, so a dropped one was the last use of its stack.  The
signatures of control flow are left alone (a loop keeps every carried value, a block
every result): only equations are removed.  DCE runs ``prune`` on whole functions (and
then drops the carried arrays nothing reads); reverse mode prunes a backward block
before it decides what to save for it.
"""

from __future__ import annotations

from .core import Block, Eqn, Func, Var
from .rewrite import free_vars


class Effects:
    """Which equations have effects (a print, a failed check), directly or through the
    blocks and functions they run: passes may neither drop nor merge those."""

    def __init__(self):
        self.funcs: dict[int, bool] = {}
        self.blocks: dict[int, tuple[Block, bool]] = {}  # the block pins its id

    def eqn(self, eqn: Eqn) -> bool:
        if eqn.op.effect:
            return True
        callee = eqn.params.get("callee")
        if isinstance(callee, Func) and self.func(callee):
            return True
        return any(self.block(b) for b in eqn.blocks())

    def block(self, block: Block) -> bool:
        entry = self.blocks.get(id(block))
        if entry is None:
            entry = self.blocks[id(block)] = (block, any(self.eqn(e) for e in block.eqns))
        return entry[1]

    def func(self, func: Func) -> bool:
        """Whether ``func`` or a function it calls has an effect (the callees' bodies are
        searched directly, so recursion needs no fixpoint)."""
        found = self.funcs.get(id(func))
        if found is None:
            found = any(e.op.effect for f in (func, *func.callees()) for e in f.block.walk())
            self.funcs[id(func)] = found
        return found


def prune(block: Block, effects: Effects | None = None) -> None:
    """Keep, from last to first, the equations of ``block`` (and of its nested blocks)
    that are read or have effects; the values a kept equation reads become live in
    turn."""
    effects = effects or Effects()
    live = {id(r) for r in block.results if isinstance(r, Var)}
    kept = []
    for eqn in reversed(block.eqns):
        if not any(id(o) in live for o in eqn.outputs) and not effects.eqn(eqn):
            continue
        for inner in eqn.blocks():
            prune(inner, effects)
            live.update(id(v) for v in free_vars(inner))
        live.update(id(a) for a in eqn.inputs if isinstance(a, Var))
        kept.append(eqn)
    block.eqns = kept[::-1]
