"""Index-set splitting: a flat kernel whose elements choose by comparing the loop index
with constants (the operand of a concatenation, or the inside of a pad, read where
used) runs as one loop per stretch between those constants, each with its choices
made.  A choice per element is a test and two masked loads, which compilers do not
always vectorise; a stretch is a plain kernel."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from ..loops.ir import (
    Bin,
    Cond,
    Decl,
    Expr,
    Int,
    Loop,
    Set,
    Stmt,
    Sym,
    children,
    each_expr,
    map_exprs,
)

#: ``i op c`` is constant on each side of ``c`` plus this.
_FLIPS = {"<": 0, ">=": 0, "<=": 1, ">": 1}
_TESTS = {"<": int.__lt__, ">=": int.__ge__, "<=": int.__le__, ">": int.__gt__}

#: At most this many stretches per loop (beyond, the tests stay per element).
MAX_STRETCHES = 5



def split_kernels(stmts: list[Stmt], runs_parallel: Callable[[int], bool]) -> list[Stmt]:
    """``stmts`` with each flat loop that tests its index split at the constants it
    tests (a stretch runs on every thread where ``runs_parallel`` of its length says)."""
    out: list[Stmt] = []
    for s in stmts:
        for body in children(s):
            body[:] = split_kernels(body, runs_parallel)
        out.extend(_split(s, runs_parallel) if isinstance(s, Loop) else [s])
    return out


def _split(loop: Loop, runs_parallel: Callable[[int], bool]) -> list[Stmt]:
    if not (isinstance(loop.start, Int) and isinstance(loop.stop, Int) and loop.step == 1
            and all(isinstance(s, (Decl, Set)) for s in loop.body)):
        return [loop]
    lo, hi = loop.start.value, loop.stop.value
    cuts = sorted({c for c in _thresholds(loop.body, loop.var) if lo < c < hi})
    if not cuts:
        return [loop]
    bounds = [lo, *cuts, hi]
    stretches = [(a, b, True) for a, b in zip(bounds, bounds[1:], strict=False)]
    if len(stretches) > MAX_STRETCHES:
        # a copy of the body per stretch would be too many: the longest stretch runs
        # with its tests made, the elements before and after it test theirs
        a, b, _ = max(stretches, key=lambda s: s[1] - s[0])
        stretches = [s for s in ((lo, a, False), (a, b, True), (b, hi, False)) if s[0] < s[1]]
    pieces: list[Stmt] = []
    for a, b, decided in stretches:
        pragma = loop.pragma
        if "parallel" in pragma and not runs_parallel(b - a):
            pragma = "simd"
        body = [map_exprs(s, lambda e, a=a: _decide(e, loop.var, a)) for s in loop.body] \
            if decided else loop.body
        pieces.append(replace(loop, start=Int(a), stop=Int(b), body=body, pragma=pragma))
    return pieces


def _test(e: Expr, var: str) -> tuple[str, int] | None:
    """``(op, c)`` when ``e`` compares the loop index ``var`` with a constant."""
    if isinstance(e, Bin) and e.op in _FLIPS and isinstance(e.a, Sym) and e.a.name == var \
            and isinstance(e.b, Int):
        return e.op, e.b.value
    return None


def _thresholds(body: list[Stmt], var: str) -> set[int]:
    found: set[int] = set()

    def note(e: Expr) -> Expr:
        t = _test(e, var)
        if t is not None:
            found.add(t[1] + _FLIPS[t[0]])
        return e

    for s in body:
        each_expr(s, note)
    return found


def _decide(e: Expr, var: str, at: int) -> Expr:
    """``e`` with its tests of the index (constant over the stretch from ``at``) made."""
    t = _test(e, var)
    if t is not None:
        return Int(int(_TESTS[t[0]](at, t[1])))
    if isinstance(e, Cond) and isinstance(e.p, Int):
        return e.a if e.p.value else e.b
    if isinstance(e, Bin) and e.op == "&&":
        for x, y in ((e.a, e.b), (e.b, e.a)):
            if isinstance(x, Int):
                return y if x.value else Int(0)
    return e
