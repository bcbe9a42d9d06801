"""Short loops of the program run as counted loops, without polling for Ctrl-C.

Each iteration of a graph ``for_loop`` (a ``Range``) charges its work to the call's poll
budget (``PB_TICK``: a subtraction and a branch, and a call on the path the C compiler
must keep).  In a loop over the elements of an array (a stencil's ``for i in range(1,
n - 1)``, its reverse in the gradient) that is a tenth of the iteration, and it keeps
gcc from vectorising the loop.  A ``Range`` with constant bounds whose whole run costs
at most ``QUIET`` work (``loops.ir.work``) becomes a ``Loop``: a loop enclosing it
charges that work per iteration instead, so a poll still comes within about one budget
(``PB_POLL_TICKS``) of work.
"""

from __future__ import annotations

from .ir import Const, Decl, Expr, Int, Loop, Move, Range, Set, Stmt, Sym, children, walk, work

#: The most work a loop may do between polls once it no longer polls itself (runtime.h's
#: ``PB_POLL_TICKS``: what a poll budget holds).
QUIET = 1 << 20


def count_short_ranges(stmts: list[Stmt]) -> list[Stmt]:
    """``stmts`` (a function's body) with each short constant-bound ``Range`` a
    ``Loop``, inner ones first."""
    return _rewrite(stmts, _constants(stmts))


def _constants(stmts: list[Stmt]) -> dict[str, int]:
    """The locals declared once with an integer constant and never assigned again (a
    range's bounds and step: ``hi13 = 199``)."""
    found: dict[str, int] = {}
    again: set[str] = set()
    for s in walk(stmts):
        if isinstance(s, Decl):
            value = _integer(s.init)
            if s.name in found or value is None:
                again.add(s.name)
            else:
                found[s.name] = value
        elif isinstance(s, (Set, Move)):
            target = s.target if isinstance(s, Set) else s.dest
            if isinstance(target, Sym):
                again.add(target.name)
    return {k: v for k, v in found.items() if k not in again}


def _integer(e: Expr | None) -> int | None:
    """The value of an integer constant (a size's ``Int``, a graph literal's ``Const``)."""
    if isinstance(e, Int):
        return e.value
    if isinstance(e, Const) and e.dtype.is_int:
        return int(e.value)
    return None


def _rewrite(stmts: list[Stmt], constants: dict[str, int]) -> list[Stmt]:
    out = []
    for s in stmts:
        for body in children(s):
            body[:] = _rewrite(body, constants)
        out.append(_counted(s, constants) if isinstance(s, Range) else s)
    return out


def _counted(r: Range, constants: dict[str, int]) -> Stmt:
    def value(e: Expr) -> int | None:
        return constants.get(e.name) if isinstance(e, Sym) else _integer(e)

    lo, hi, step = value(r.lo), value(r.hi), value(r.step)
    if r.ctype != "int64_t" or None in (lo, hi, step) or step <= 0:
        return r
    trips = len(range(lo, hi, step))
    if trips * work(r.body) > QUIET:
        return r
    return Loop(r.var, Int(hi), r.body, start=Int(lo), step=step, adjoint=r.adjoint)
