"""Rewriting IR: copying blocks with fresh values, inlining, free values, renaming.

Transforms build new IR out of old; copies get fresh ``Var``s so that a block can be
emitted twice (a recomputed forward pass, a function inlined at two call sites) and
still be SSA.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .builder import current
from .core import Atom, Block, Eqn, Lit, Var


class Env:
    """Old values to new atoms, looked up through enclosing scopes.  A value that is
    not mapped anywhere maps to itself (a free value that the copy shares)."""

    __slots__ = ("map", "parent")

    def __init__(self, parent: Env | None = None):
        self.map: dict[int, Atom] = {}
        self.parent = parent

    def __getitem__(self, a: Atom) -> Atom:
        if isinstance(a, Lit):
            return a
        env = self
        while env is not None:
            found = env.map.get(id(a))
            if found is not None:
                return found
            env = env.parent
        return a

    def __setitem__(self, v: Var, a: Atom) -> None:
        self.map[id(v)] = a

    def bind(self, vs: Sequence[Var], atoms: Sequence[Atom]) -> None:
        for v, a in zip(vs, atoms, strict=True):
            self.map[id(v)] = a


def clone_eqn(eqn: Eqn, env: Env) -> Eqn:
    """A copy of ``eqn`` reading ``env``'s atoms, with fresh outputs (bound in ``env``)
    and copies of its blocks."""
    params = {k: clone_block(v, env) if k in eqn.op.blocks else v
              for k, v in eqn.params.items()}
    outs = [Var(o.type, o.hint) for o in eqn.outputs]
    copy = Eqn(eqn.op, [env[a] for a in eqn.inputs], outs, params, eqn.loc)
    env.bind(eqn.outputs, outs)
    return copy


def clone_block(block: Block, env: Env | None = None) -> Block:
    """A copy of ``block`` with fresh values; its free values are mapped by ``env``."""
    inner = Env(env)
    params = [Var(p.type, p.hint) for p in block.params]
    inner.bind(block.params, params)
    eqns = [clone_eqn(e, inner) for e in block.eqns]
    return Block(params, eqns, [inner[r] for r in block.results])


def inline(block: Block, args: Sequence[Atom], env: Env | None = None) -> list[Atom]:
    """Emit a copy of ``block``'s equations into the current builder with its
    parameters bound to ``args``; returns its results."""
    inner = Env(env)
    inner.bind(block.params, args)
    frame = current().frame
    for eqn in block.eqns:
        frame.eqns.append(clone_eqn(eqn, inner))
    return [inner[r] for r in block.results]


def block_readers(blk: Block) -> dict[int, list[Eqn | None]]:
    """Per value (by ``id``): the equations of ``blk`` reading it, once per operand;
    None for each nested block reading it and for the block's results."""
    readers: dict[int, list[Eqn | None]] = {}
    for e in blk.eqns:
        for a in e.inputs:
            readers.setdefault(id(a), []).append(e)
        for inner in e.blocks():
            for v in free_vars(inner):
                readers.setdefault(id(v), []).append(None)
    for r in blk.results:
        readers.setdefault(id(r), []).append(None)
    return readers


def read_counts(blk: Block) -> dict[int, int]:
    """Per value: how often ``blk`` reads it, a nested block's or the results' read
    counting two (the value is read beyond one equation's loop)."""
    return {v: sum(1 if e is not None else 2 for e in rs)
            for v, rs in block_readers(blk).items()}


def free_vars(block: Block) -> list[Var]:
    """Values ``block`` (or a block nested in it) reads but does not define, in order of
    first use."""
    defined: set[int] = set()
    free: dict[int, Var] = {}

    def use(a: Atom) -> None:
        if isinstance(a, Var) and id(a) not in defined:
            free.setdefault(id(a), a)

    def walk(blk: Block) -> None:
        defined.update(id(p) for p in blk.params)
        for eqn in blk.eqns:
            for a in eqn.inputs:
                use(a)
            for inner in eqn.blocks():
                walk(inner)
            defined.update(id(o) for o in eqn.outputs)
        for r in blk.results:
            use(r)

    walk(block)
    return list(free.values())


def substitute(block: Block, mapping: Mapping[int, Atom]) -> None:
    """Replace, in place, every read of a value whose id ``mapping`` holds (nested blocks
    included)."""

    def sub(a: Atom) -> Atom:
        return mapping.get(id(a), a) if isinstance(a, Var) else a

    for eqn in block.eqns:
        eqn.inputs = [sub(a) for a in eqn.inputs]
        for inner in eqn.blocks():
            substitute(inner, mapping)
    block.results = [sub(r) for r in block.results]
