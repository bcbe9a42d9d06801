"""Which array parameters a called function takes over (buffer donation).

A function that returns an updated version of an array parameter (a reverse-mode
backward adding its cotangents into the running one it is handed, a recursion threading
a work array) would copy that array on every call if it only borrowed it.  A parameter
*donated* to it instead is a buffer the callee owns: it updates it in place and returns
it as its result (or frees it).  The caller hands over a buffer that dies at the call and
copies any other, so donation never changes what a program computes, only who copies.

A parameter is donated when it flows to a result through in-place updates alone: an
update of it (``dynamic_update_slice``, ``scatter``, ``scatter_add``), an ``add`` with
it as an operand, a ``cond`` whose branches both pass it on to the same result, a loop
whose body turns it into its own carried result (a backward loop adding into a running
cotangent), or a
call that takes it over in turn (recursion is solved as a fixed point, from the
optimistic guess down).  Reads of it along the way are allowed.
"""

from __future__ import annotations

from collections.abc import Sequence

from ....ir.core import Atom, Block, Eqn, Func, Module, Var
from ....ir.types import TensorType

Donations = dict[int, dict[int, int]]  # id(func) -> {parameter index: result index}

_UPDATES = ("dynamic_update_slice", "scatter", "scatter_add")


def _array(t) -> bool:
    return isinstance(t, TensorType) and t.shape != ()


def _through(e: Eqn, pos: int, guess: Donations) -> Var | None:
    """The value that takes over operand ``pos`` of ``e``'s buffer, if ``e`` updates
    that operand in place."""
    name = e.op.name
    if name in _UPDATES and pos == 0:
        return e.outputs[0]
    if name == "add" and e.outputs[0].type == e.inputs[pos].type:
        return e.outputs[0]
    if name == "cond" and pos > 0:
        ends = {flows(e.params[b], e.params[b].params[pos - 1], guess)
                for b in ("then", "orelse")}
        if len(ends) == 1 and None not in ends:
            return e.outputs[ends.pop()]
    if name in ("for_loop", "while_loop"):  # a carry the body updates into itself
        k = pos - 3 if name == "for_loop" else pos
        body = e.params["body"]
        if k >= 0 and flows(body, body.params[len(body.params) - len(e.outputs) + k],
                            guess) == k:
            return e.outputs[k]
    if name == "call":
        r = guess.get(id(e.params["callee"]), {}).get(pos)
        if r is not None:
            return e.outputs[r]
    return None


def flows(blk: Block, v: Atom, guess: Donations) -> int | None:
    """The index of the result of ``blk`` that ``v`` becomes through in-place updates
    alone, or None."""
    for _ in range(len(blk.eqns) + 1):
        if not isinstance(v, Var) or not _array(v.type):
            return None
        ends = [k for k, r in enumerate(blk.results) if r is v]
        if ends:
            return ends[0] if len(ends) == 1 else None
        nxt = None
        for e in blk.eqns:
            for pos, a in enumerate(e.inputs):
                if a is v and (out := _through(e, pos, guess)) is not None:
                    if nxt is not None:  # updated twice: one of them needs a copy
                        return None
                    nxt = out
        if nxt is None:
            return None
        v = nxt
    return None


def donations(module: Module) -> Donations:
    """Per function called (the entry borrows its arguments from Python): the array
    parameters it takes over and the result each becomes."""
    funcs: list[Func] = [f for f in module.funcs.values() if f is not module.main]
    guess: Donations = {}
    for f in funcs:
        out = f.out_types
        guess[id(f)] = {k: out.index(p.type) for k, p in enumerate(f.block.params)
                        if _array(p.type) and p.type in out}
    for _ in range(len(funcs) + 2):
        new = {id(f): {k: r for k in guess[id(f)]
                       if (r := flows(f.block, f.block.params[k], guess)) is not None}
               for f in funcs}
        if new == guess:
            break
        guess = new
    return guess


def entry_pairs(func: Func, params: Sequence[int], results: Sequence[int]) -> dict[int, int]:
    """The entry's parameters ``params`` (arrays its caller hands over, in order of
    preference) paired with the ``results`` that may take their buffers: a result takes
    the parameter it is computed from element by element if there is one (``p - lr * g``:
    then it can be computed in place), else the next free one of its type."""
    blk = func.block
    free = [p for p in params if _array(func.in_types[p])]
    results = [k for k in results if _array(func.out_types[k])]
    producers = {id(o): e for e in blk.eqns for o in e.outputs}
    index = {id(v): p for p, v in enumerate(blk.params)}
    pairs: dict[int, int] = {}
    for k in results:
        todo, seen = [blk.results[k]], 0
        while todo and seen < 64:
            v, seen = todo.pop(0), seen + 1
            p = index.get(id(v))
            if p in free:
                pairs[p] = k
                free.remove(p)
                break
            e = producers.get(id(v))
            if e is not None and not e.op.blocks:
                todo += [a for a in e.inputs if a.type == v.type]
    for k in results:
        if k not in pairs.values():
            p = next((p for p in free if func.in_types[p] == func.out_types[k]), None)
            if p is not None:
                free.remove(p)
                pairs[p] = k
    return pairs
