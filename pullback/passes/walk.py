"""What the passes share: rewriting a function and every function it calls, a forward
walk that replaces values as it goes (which equations have effects is ``ir.liveness``).

Passes are pure: each works on a copy (``clone_block``) of every function it reaches, so
the input IR is never touched, and a function called from many places (or from itself)
is rewritten once, its copy shared by every call site.  A pipeline that has made its
own copy runs each pass ``in_place`` on it instead.
"""

from __future__ import annotations

from collections.abc import Callable

from ..ir.core import Atom, Block, Eqn, Func, Var
from ..ir.rewrite import clone_block

#: A block rewrite: changes a block (of a copy, or of a pipeline's copy) in place.
BlockRewrite = Callable[[Block, "Rewriter"], None]


class Rewriter:
    """One run of a pass: rewrites each function once (so recursion ends and every call
    site shares the result).  With ``copy``, ``rewrite`` changes a copy of the body, its
    ``call``s still naming the original callees (whose bodies are complete even under
    recursion), and those calls are then pointed at the callees' copies; without, it
    changes the body where it is."""

    def __init__(self, rewrite: BlockRewrite, copy: bool = True):
        self.rewrite = rewrite
        self.copy = copy
        self.done: dict[int, Func] = {}
        self.made: set[int] = set()

    def func(self, func: Func) -> Func:
        """The rewritten ``func`` (``func`` itself when it is one already)."""
        if id(func) in self.made:
            return func
        new = self.done.get(id(func))
        if new is None:
            new = Func(func.name, None, func.out_types) if self.copy else func
            self.done[id(func)] = new
            self.made.add(id(new))
            block = clone_block(func.block) if self.copy else func.block
            self.rewrite(block, self)
            for eqn in block.walk():
                callee = eqn.params.get("callee")
                if isinstance(callee, Func):
                    eqn.params["callee"] = self.func(callee)
            new.block = block
        return new


class FunctionPass:
    """A pass made of a block rewrite.  Called, it returns a rewritten copy of a function
    and of the functions it calls, the input untouched; ``in_place`` rewrites them where
    they are (for a pipeline working on a copy of its own)."""

    def __init__(self, rewrite: BlockRewrite):
        self.rewrite = rewrite

    def __call__(self, func: Func) -> Func:
        return Rewriter(self.rewrite).func(func)

    def in_place(self, func: Func) -> None:
        Rewriter(self.rewrite, copy=False).func(func)


#: ``copy_func(func) -> Func``: a copy of ``func`` and its callees, with fresh values.
copy_func = FunctionPass(lambda block, rw: None)


class Forward:
    """Visits equations in program order, each with its operands already replaced and
    its blocks already visited; ``visit`` may drop an equation by giving atoms for its
    outputs (equal in type), and may append equations to ``out`` before it."""

    def __init__(self):
        self.subst: dict[int, Atom] = {}
        self.defs: dict[int, Eqn] = {}
        self.out: list[Eqn] = []

    def get(self, a: Atom) -> Atom:
        return self.subst.get(id(a), a) if isinstance(a, Var) else a

    def block(self, block: Block) -> None:
        saved, self.out = self.out, []
        for eqn in block.eqns:
            eqn.inputs = [self.get(a) for a in eqn.inputs]
            for inner in eqn.blocks():
                self.enter(eqn, inner)
            atoms = self.visit(eqn)
            if atoms is None:
                self.out.append(eqn)
                self.defs.update((id(o), eqn) for o in eqn.outputs)
            else:
                self.subst.update((id(o), a) for o, a in zip(eqn.outputs, atoms, strict=True))
        block.eqns, self.out = self.out, saved
        block.results = [self.get(r) for r in block.results]

    def enter(self, eqn: Eqn, inner: Block) -> None:
        """Visit a block ``eqn`` owns (passes with scoped state override this)."""
        self.block(inner)

    def visit(self, eqn: Eqn) -> list[Atom] | None:
        raise NotImplementedError

    def definition(self, a: Atom) -> Eqn | None:
        """The equation that computes ``a`` (None for literals and parameters)."""
        return self.defs.get(id(a)) if isinstance(a, Var) else None


def forward_pass(make: Callable[[], Forward]) -> FunctionPass:
    """A pass that runs a fresh ``make()`` over the body of each function."""
    return FunctionPass(lambda block, rw: make().block(block))
