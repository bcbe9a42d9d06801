"""Inlining: a ``call`` of a function that does not reach itself through calls is
replaced by a copy of the function's (already inlined) body, with fresh values; so is a
``for_loop`` over a literal range of one index (a Runge-Kutta integration of one step,
its step count a compile-time constant) by a copy of its body: its carried values are
then values like any other, which later passes see through (the step's start, zeros,
is a constant; its result is written where it goes, not copied there).

Recursive functions stay functions; calls from them to non-recursive helpers are
inlined as anywhere else.  Equations keep their source locations.
"""

from __future__ import annotations

import numpy as np

from ..ir.core import Atom, Block, Eqn, Func, Lit
from ..ir.rewrite import Env, clone_eqn
from .walk import Forward, FunctionPass, Rewriter


def direct_callees(func: Func) -> list[Func]:
    return [e.params["callee"] for e in func.block.walk()
            if isinstance(e.params.get("callee"), Func)]


def is_recursive(func: Func) -> bool:
    """Whether ``func`` reaches itself through calls."""
    return any(c is func or any(f is func for f in c.callees()) for c in direct_callees(func))


class _Inline(Forward):
    def __init__(self, rw: Rewriter):
        super().__init__()
        self.rw = rw
        self.recursive: dict[int, bool] = {}

    def visit(self, eqn: Eqn) -> list[Atom] | None:
        if eqn.op.name == "for_loop":
            index = _only_index(eqn)
            if index is None:
                return None
            return self.copy(eqn.params["body"], [index, *eqn.inputs[3:]])
        callee = eqn.params.get("callee")
        if eqn.op.name != "call" or self.is_recursive(callee):
            return None
        return self.copy(self.rw.func(callee).block, eqn.inputs)

    def copy(self, body: Block, args: list[Atom]) -> list[Atom]:
        """``body``'s equations on ``args``, appended with fresh values; its results."""
        env = Env()
        env.bind(body.params, args)
        self.out.extend(clone_eqn(e, env) for e in body.eqns)
        return [env[r] for r in body.results]

    def is_recursive(self, func: Func) -> bool:
        if id(func) not in self.recursive:
            self.recursive[id(func)] = is_recursive(func)
        return self.recursive[id(func)]


def _only_index(loop: Eqn) -> Lit | None:
    """The index of a ``for_loop`` whose literal range has exactly one, typed as its
    body's index parameter."""
    bounds = loop.inputs[:3]
    if not all(isinstance(b, Lit) for b in bounds) or int(bounds[2].value) == 0:
        return None
    lo, hi, step = (int(b.value) for b in bounds)
    if len(range(lo, hi, step)) != 1:
        return None
    t = loop.params["body"].params[0].type
    return Lit(np.asarray(lo, t.dtype.np), t)


#: ``inline(func) -> Func``
inline = FunctionPass(lambda block, rw: _Inline(rw).block(block))
