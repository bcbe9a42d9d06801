"""Inlining: a ``call`` of a function that does not reach itself through calls is
replaced by a copy of the function's (already inlined) body, with fresh values.

Recursive functions stay functions; calls from them to non-recursive helpers are
inlined as anywhere else.  Equations keep their source locations.
"""

from __future__ import annotations

from ..ir.core import Atom, Eqn, Func
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
        callee = eqn.params.get("callee")
        if eqn.op.name != "call" or self.is_recursive(callee):
            return None
        body = self.rw.func(callee).block
        env = Env()
        env.bind(body.params, eqn.inputs)
        self.out.extend(clone_eqn(e, env) for e in body.eqns)
        return [env[r] for r in body.results]

    def is_recursive(self, func: Func) -> bool:
        if id(func) not in self.recursive:
            self.recursive[id(func)] = is_recursive(func)
        return self.recursive[id(func)]


#: ``inline(func) -> Func``
inline = FunctionPass(lambda block, rw: _Inline(rw).block(block))
