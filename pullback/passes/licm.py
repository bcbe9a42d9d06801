"""Loop-invariant code motion: equations of a loop's blocks that compute the same thing
on every iteration move in front of the loop.

An operand is invariant when it is a literal, a value defined outside the loop (blocks
read enclosing values), a carried value that the body passes through unchanged (its
parameter is then the loop's operand, which the moved equation reads instead), or the
output of an equation already moved.  Equations that cannot fail and have no effects
move (elementwise, broadcast, reshape and reduction ops, products, sorts, scans; not
integer division or power, which may trap or raise), so evaluating one for a loop that
runs zero times is harmless.  A ``for_loop`` over a literal, non-empty range runs its
body at least once: from it, pure equations that may fail (gathers, factorisations) and
checks move too, as long as nothing that may fail or has effects comes before them in
the body (the same error is then raised, first, as it would have been).  Inner loops
are treated first, so an invariant can leave a whole nest.  (``pb.jacfwd``'s loop over
input elements so computes the function itself once, not once per element.)  Arrays a
loop carries unchanged are then no longer carried: its blocks, and the readers of its
result, read the operand.
"""

from __future__ import annotations

from ..ir.core import Atom, Block, Eqn, Lit, Var
from ..ir.rewrite import substitute
from ..ir.types import StackType, TensorType
from .walk import FunctionPass

#: Fusion kinds of the ops that may move: pure, and total on every input.
_HOISTABLE = frozenset({"elementwise", "broadcast", "reshape", "reduction"})

#: Ops of other kinds that are pure and total too (their shapes are checked when staged).
_TOTAL = frozenset({"dot_general", "conv", "cumsum", "cumprod", "sort", "triangular_solve"})

#: Ops of those kinds that may fail on integers (division by zero, negative powers).
_INTEGER_PARTIAL = frozenset({"floordiv", "mod", "pow"})

#: Per loop op: the position of its first carried operand, and, for each block that
#: runs every iteration, the position of its first carried parameter.
_LOOPS: dict[str, tuple[int, dict[str, int]]] = {
    "while_loop": (0, {"cond": 0, "body": 0}),
    "for_loop": (3, {"body": 1}),
}


def movable(eqn: Eqn) -> bool:
    """Whether evaluating ``eqn`` where it would not have run is harmless."""
    op = eqn.op
    if op.effect or op.fusion not in _HOISTABLE and op.name not in _TOTAL:
        return False
    return not (op.name in _INTEGER_PARTIAL and not eqn.outputs[0].type.dtype.is_float)


def _pure(eqn: Eqn) -> bool:
    """Whether ``eqn`` has no state and no effect but failing (it may fail on its
    inputs, or be a ``check``, whose failure is its only effect)."""
    op = eqn.op
    return (op.name == "check" or not op.effect and op.fusion == "opaque") and \
        not eqn.op.blocks and not any(isinstance(a.type, StackType)
                                     for a in (*eqn.inputs, *eqn.outputs))


def _runs(loop: Eqn) -> bool:
    """Whether ``loop`` certainly runs its body: a for_loop over a non-empty literal
    range."""
    if loop.op.name != "for_loop" or not all(isinstance(a, Lit) for a in loop.inputs[:3]):
        return False
    lo, hi, step = (int(a.value) for a in loop.inputs[:3])
    return step != 0 and len(range(lo, hi, step)) > 0


def _licm_block(block: Block) -> None:
    eqns = []
    passed: dict[int, Atom] = {}
    for eqn in block.eqns:
        for inner in eqn.blocks():
            _licm_block(inner)
        if eqn.op.name in _LOOPS:
            eqns.extend(_hoist(eqn))
            # a carry passed through an earlier loop: its operand is that loop's operand
            eqn.inputs = [passed.get(id(a), a) for a in eqn.inputs]
            passed.update(_drop_passed_through(eqn))
        eqns.append(eqn)
    block.eqns = eqns
    if passed:
        substitute(block, passed)


def _passed_through(loop: Eqn) -> list[int]:
    """The carried values ``loop``'s body returns unchanged (its parameter), by index."""
    body = loop.params["body"]
    carried = body.params[_LOOPS[loop.op.name][1]["body"]:]
    return [k for k, (p, r) in enumerate(zip(carried, body.results, strict=True)) if r is p]


def _drop_passed_through(loop: Eqn) -> dict[int, Atom]:
    """Remove the arrays ``loop`` carries unchanged (the body returns its parameter): its
    blocks read the loop's operand instead, and so does whatever read the result (which
    the returned mapping, result id to operand, tells).  AD closes loops over what they
    read, which carries every loop-invariant value and its tangents along."""
    first, blocks = _LOOPS[loop.op.name]
    body = loop.params["body"]
    fixed = [k for k in _passed_through(loop) if isinstance(body.results[k].type, TensorType)]
    mapping = {id(loop.outputs[k]): loop.inputs[first + k] for k in fixed}
    for name, start in blocks.items():
        blk = loop.params[name]
        substitute(blk, {id(blk.params[start + k]): loop.inputs[first + k] for k in fixed})
    for k in reversed(fixed):
        del loop.outputs[k], loop.inputs[first + k], body.results[k]
        for name, start in blocks.items():
            del loop.params[name].params[start + k]
    return mapping


def _hoist(loop: Eqn) -> list[Eqn]:
    """Take the invariant equations out of ``loop``'s blocks; returns them in order."""
    first, blocks = _LOOPS[loop.op.name]
    fixed = _passed_through(loop)
    moved = []
    for name, at in blocks.items():
        blk = loop.params[name]
        outer = {id(blk.params[at + k]): loop.inputs[first + k] for k in fixed}
        moved += _take_invariants(blk, outer, _runs(loop))
    return moved


def _take_invariants(blk: Block, outer: dict[int, Atom], runs: bool) -> list[Eqn]:
    """Remove from ``blk`` the movable equations that read no value computed in it (and,
    when the block certainly ``runs``, pure ones that nothing fallible precedes);
    ``outer`` gives the loop operand that a pass-through parameter always equals."""
    inside = {id(p) for p in blk.params if id(p) not in outer}
    moved, kept = [], []
    clean = runs  # nothing that may fail or has effects has stayed in the body so far
    for eqn in blk.eqns:
        if (movable(eqn) or clean and _pure(eqn)) and \
                not any(id(a) in inside for a in eqn.inputs):
            eqn.inputs = [outer.get(id(a), a) if isinstance(a, Var) else a for a in eqn.inputs]
            moved.append(eqn)
        else:
            kept.append(eqn)
            inside.update(id(o) for o in eqn.outputs)
            clean = clean and movable(eqn)
    blk.eqns = kept
    return moved


#: ``licm(func) -> Func``
licm = FunctionPass(lambda block, rw: _licm_block(block))
