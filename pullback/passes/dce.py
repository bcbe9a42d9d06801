"""Dead code elimination: equations whose outputs nobody reads and that have no effect
go, inside nested blocks too (``ir.liveness.prune``, which says how stacks and control
flow fare); then a loop's carried arrays that nothing reads go too (``drop_dead_carries``),
and what computed them with them."""

from __future__ import annotations

from ..ir.core import Atom, Block, Eqn, Lit
from ..ir.liveness import Effects, prune
from ..ir.rewrite import substitute
from ..ir.types import TensorType
from .walk import FunctionPass, Rewriter

#: Where a loop's carried values start among its operands and its body's parameters.
_CARRIED = {"for_loop": (3, 1), "while_loop": (0, 0)}


def _reads(block: Block, skip_results: bool = False) -> set[int]:
    """Every value ``block`` and its nested blocks read (its results too, unless
    ``skip_results``)."""
    seen = set() if skip_results else {id(r) for r in block.results}
    for e in block.eqns:
        seen.update(id(a) for a in e.inputs)
        for inner in e.blocks():
            seen |= _reads(inner)
    return seen


def _runs_once_at_least(loop: Eqn) -> bool:
    """Whether a ``for_loop``'s literal bounds give its body one iteration or more."""
    bounds = loop.inputs[:3]
    if loop.op.name != "for_loop" or not all(isinstance(b, Lit) for b in bounds):
        return False
    lo, hi, step = (int(b.value) for b in bounds)
    return lo < hi if step > 0 else step < 0 and lo > hi


def _share_equal_results(block: Block) -> None:
    """Readers of a loop's result read another result equal to it: two carries that the
    body yields the same value for are equal once it has run (``new = u.copy(); ...;
    u = new`` carries both), so the one whose parameter the body never reads is left
    to be dropped."""
    for e in block.eqns:
        for inner in e.blocks():
            _share_equal_results(inner)
        if not _runs_once_at_least(e):
            continue
        body: Block = e.params["body"]
        inside = _reads(body, skip_results=True)
        groups: dict[int, list[int]] = {}  # a yielded value: the carries it is yielded for
        for j, r in enumerate(body.results):
            groups.setdefault(id(r), []).append(j)
        mapping: dict[int, Atom] = {}
        for carries in groups.values():
            unread = [j for j in carries if id(body.params[1 + j]) not in inside]
            keep = next((j for j in carries if j not in unread), carries[0])
            mapping.update((id(e.outputs[j]), e.outputs[keep]) for j in unread if j != keep)
        if mapping:
            substitute(block, mapping)


def _drop_dead_carries(block: Block) -> bool:
    """Remove from ``block``'s loops (nested ones too) each carried array whose result
    nobody reads and whose value the loop reads nowhere but to carry it on (Python keeps a
    loop's temporaries, ``k1`` of an RK4 step, after the loop: they are carried); whether
    any went."""
    changed = False
    for e in block.eqns:
        for inner in e.blocks():
            changed |= _drop_dead_carries(inner)
    used = _reads(block)
    for e in block.eqns:
        where = _CARRIED.get(e.op.name)
        if where is not None:
            changed |= _drop_from(e, *where, used)
    return changed


def _drop_from(loop: Eqn, first_in: int, first_param: int, used: set[int]) -> bool:
    body: Block = loop.params["body"]
    cond: list[Block] = [loop.params["cond"]] if "cond" in loop.params else []
    blocks = [body, *cond]
    inside = _reads(body, skip_results=True).union(*(_reads(c) for c in cond))
    dead = []
    for j, out in enumerate(loop.outputs):
        params = [b.params[first_param + j] for b in blocks]
        passed_on = [r for k, r in enumerate(body.results) if k != j]
        if isinstance(out.type, TensorType) and id(out) not in used and \
                all(id(p) not in inside and all(r is not p for r in passed_on)
                    for p in params):
            dead.append(j)
    for j in reversed(dead):
        del loop.outputs[j], loop.inputs[first_in + j], body.results[j]
        for b in blocks:
            del b.params[first_param + j]
    return bool(dead)


def _dce(block: Block, rw: Rewriter) -> None:
    _share_equal_results(block)
    prune(block, Effects())
    while _drop_dead_carries(block):
        prune(block, Effects())


#: ``dce(func) -> Func``
dce = FunctionPass(_dce)
