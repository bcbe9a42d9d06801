"""Closure conversion: make the blocks of control flow read only their parameters.

A block may read values of the blocks around it (lexical scoping).  Derivatives are
easier to write when it does not: the cotangent of a value a loop body reads from
outside is then the cotangent of a loop-carried value, accumulated by the backward loop
like any other.  So every value a ``cond`` branch reads from outside becomes an operand,
and every value a loop reads from outside becomes a carried value that the body passes
through unchanged.
"""

from __future__ import annotations

from ..ir.core import Block, Eqn, Func, Var
from ..ir.rewrite import clone_block, free_vars, substitute

#: Ops whose blocks take the op's operands as their parameters, as ``cond``'s do.
_OPERAND_BLOCKS = ("cond",)
_LOOPS = ("while_loop", "for_loop")


def close_func(func: Func, memo: dict[int, Func] | None = None) -> Func:
    """A copy of ``func`` (and of every function it calls) whose control-flow blocks are
    closed."""
    memo = {} if memo is None else memo
    if id(func) in memo:
        return memo[id(func)]
    closed = Func(func.name, None, func.out_types)
    memo[id(func)] = closed
    block = clone_block(func.block)
    _close_block(block, memo)
    closed.block = block
    return closed


def _close_block(block: Block, memo: dict[int, Func]) -> None:
    for eqn in block.eqns:
        for inner in eqn.blocks():
            _close_block(inner, memo)
        callee = eqn.params.get("callee")
        if isinstance(callee, Func):
            eqn.params["callee"] = close_func(callee, memo)
        blocks = list(eqn.blocks())
        if not blocks:
            continue
        free: dict[int, Var] = {}
        for inner in blocks:
            free.update((id(v), v) for v in free_vars(inner))
        if not free:
            continue
        if eqn.op.name not in (*_OPERAND_BLOCKS, *_LOOPS):
            raise ValueError(f"internal: {eqn.op.name} has a block that reads outer values")
        _add_operands(eqn, list(free.values()))


def _add_operands(eqn: Eqn, free: list[Var]) -> None:
    eqn.inputs.extend(free)
    loop = eqn.op.name in _LOOPS
    for inner in eqn.blocks():
        params = [Var(v.type, v.hint) for v in free]
        substitute(inner, {id(v): p for v, p in zip(free, params, strict=True)})
        inner.params.extend(params)
        if loop and inner is eqn.params["body"]:
            inner.results.extend(params)
    if loop:
        eqn.outputs.extend(Var(v.type, v.hint) for v in free)
