"""Kernel locals read only under a test of the loop index are computed under it.

Lowering gives each fused value a kernel reads at the kernel's index a local of its own,
computed for every element.  The operand of a pad (or of a concatenation) is smaller
than the kernel: read as ``i < n - 1 ? x[i + 1] : 0``, its local ``t = x[i + 1]`` reads
one element past ``x`` at the last index; where ``x`` is a constant table of known size,
C compilers take that read as proof that the loop stops earlier and drop its exit test
(GCC ran the loop on far past the array: the gradient of one Runge-Kutta step of 7
elements crashed).  A local read once, in a branch of a test of the index, moves into
that branch: it is read where it is in bounds, and only there.
"""

from __future__ import annotations

from collections import Counter

from .ir import Cond, Decl, Expr, Loop, Set, Stmt, Sym, children, each_expr, map_exprs


def guard_locals(stmts: list[Stmt]) -> list[Stmt]:
    """``stmts`` with each flat kernel's locals that are read once, under a test of its
    index, moved into the branch that reads them."""
    for s in stmts:
        for body in children(s):
            body[:] = guard_locals(body)
        if isinstance(s, Loop) and all(isinstance(t, (Decl, Set)) for t in s.body):
            _sink(s.body, s.var)
    return stmts


def _sink(body: list[Stmt], var: str) -> None:
    reads: Counter[str] = Counter()
    where: dict[str, int] = {}  # a local -> the (last) statement reading it
    for j, s in enumerate(body):
        for name in _names(s):
            reads[name] += 1
            where[name] = j
    stores = [k for k, s in enumerate(body) if isinstance(s, Set)]
    gone = set()
    for k, s in enumerate(body):
        if not isinstance(s, Decl) or s.init is None or reads[s.name] != 1:
            continue
        j = where[s.name]
        if any(k < m < j for m in stores) or not _under_test(body[j], s.name, var):
            continue
        body[j] = map_exprs(body[j], lambda e, name=s.name, value=s.init:
                            value if isinstance(e, Sym) and e.name == name else e)
        where.update((name, j) for name in _names(s))
        gone.add(k)
    body[:] = [s for k, s in enumerate(body) if k not in gone]


def _names(node: object) -> list[str]:
    """The locals ``node`` reads, once per read."""
    found: list[str] = []
    each_expr(node, lambda e: found.append(e.name) if isinstance(e, Sym) else None)
    return found


def _mentions(node: object, name: str) -> bool:
    return name in _names(node)


def _under_test(stmt: Stmt, name: str, var: str) -> bool:
    """Whether ``stmt`` reads ``name`` (once) in a branch of a test of index ``var``."""
    found: list[Expr] = []
    each_expr(stmt, lambda e: found.append(e) if isinstance(e, Cond) and
              _mentions(e.p, var) and (_mentions(e.a, name) or _mentions(e.b, name))
              else None)
    return bool(found)
