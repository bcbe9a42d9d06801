"""Activity analysis: which values carry a derivative.

A value is *active* when it has a differentiable type (floating point, or a stack of
residuals) and depends on an active input other than through ``stop_gradient``.
Integer and boolean values never are, so they carry no tangent and receive no
cotangent.  Loop-carried values are active when they are on entry or become so in the
body (a fixpoint).  Under forward mode stacks are
always active: a stack's tangent is the stack of its elements' tangents, and pops must
find what pushes put there.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..ir.core import Block, Eqn
from ..ir.types import StackType, TensorType


def differentiable(t) -> bool:
    return isinstance(t, StackType) or (isinstance(t, TensorType) and t.dtype.is_float)


def block_active(block: Block, in_active: Sequence[bool], stacks: bool) -> list[bool]:
    """Which results of ``block`` are active given which parameters are."""
    act = {id(p): a for p, a in zip(block.params, in_active, strict=True)}
    for eqn in block.eqns:
        ins = [act.get(id(a), False) for a in eqn.inputs]
        for o, a in zip(eqn.outputs, eqn_active(eqn, ins, stacks), strict=True):
            act[id(o)] = a
    return [act.get(id(r), False) for r in block.results]


def eqn_active(eqn: Eqn, ins: Sequence[bool], stacks: bool) -> list[bool]:
    name = eqn.op.name
    if name == "cond":
        then = block_active(eqn.params["then"], ins[1:], stacks)
        orelse = block_active(eqn.params["orelse"], ins[1:], stacks)
        return [a or b for a, b in zip(then, orelse, strict=True)]
    if name in ("while_loop", "for_loop"):
        return loop_active(eqn, ins, stacks)
    if name == "stop_gradient":  # constant to both modes: what it feeds needs no rules
        return [False]
    anything = any(ins)
    return [differentiable(o.type) and (anything or (stacks and isinstance(o.type, StackType)))
            for o in eqn.outputs]


def loop_active(eqn: Eqn, ins: Sequence[bool], stacks: bool) -> list[bool]:
    """Active carried values of a loop: active on entry, or made active by the body."""
    body = eqn.params["body"]
    index = [False] if eqn.op.name == "for_loop" else []
    carry = ins[3:] if index else ins
    act = [differentiable(p.type) and (a or (stacks and isinstance(p.type, StackType)))
           for p, a in zip(body.params[len(index):], carry, strict=True)]
    while True:
        out = block_active(body, [*index, *act], stacks)
        new = [a or b for a, b in zip(act, out, strict=True)]
        if new == act:
            return act
        act = new
