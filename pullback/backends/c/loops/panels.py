"""Products read only by a loop over their rows are computed a panel of rows at a time,
each panel read by that loop's iterations for its rows while it is in cache: a
``(points @ centroids.T)`` reduced row by row to its minima (k-means), logits reduced to
their log-sum-exp, never go to memory whole.  The product's buffer shrinks to one panel.
"""

from __future__ import annotations

from dataclasses import replace

from ..loops.ir import (
    Alloc,
    Bin,
    Decl,
    Expr,
    Free,
    Gemm,
    Int,
    Load,
    Loop,
    Stmt,
    Sym,
    children,
    map_exprs,
    map_stmt,
    walk,
)

#: Rows of a panel: the most that divide the product's rows with a panel of at most
#: PANEL_BYTES (kept in the second-level cache between its product and its readers).
PANEL_BYTES = 256 << 10
#: Products smaller than this many bytes stay whole (nothing to gain).
PANEL_MIN = 4 << 20


def panel_products(stmts: list[Stmt]) -> list[Stmt]:
    """``stmts`` with each product that only a following loop over its rows reads
    computed in panels inside that loop (nested statement lists too)."""
    for s in stmts:
        for body in children(s):
            body[:] = panel_products(body)
    k = 0
    while k < len(stmts):
        made = _paneled(stmts, k)
        if made is not None:
            stmts[:] = made
        k += 1
    return stmts


def _paneled(stmts: list[Stmt], g: int) -> list[Stmt] | None:
    """``stmts`` with the product at ``g`` computed in panels inside the loops reading
    it, or None where that would change what they compute."""
    gemm = stmts[g]
    if not (isinstance(gemm, Gemm) and isinstance(gemm.c, Sym) and gemm.batch == 1 and
            gemm.addend is None and not gemm.trans_a):
        return None
    name, m, n = gemm.c.name, gemm.m, gemm.n
    alloc = next((s for s in stmts[:g] if isinstance(s, Alloc) and s.name == name), None)
    if alloc is None or alloc.count != m * n or m * n * 8 < PANEL_MIN:
        return None
    rows = max((r for r in range(1, m + 1) if m % r == 0 and
                r * n * alloc.nbytes // alloc.count <= PANEL_BYTES), default=0)
    if rows < 8 or rows == m:
        return None
    readers = [j for j in range(g + 1, len(stmts)) if name in _names(stmts[j]) and
               not (isinstance(stmts[j], Free) and stmts[j].name == name)]
    if not readers:
        return None
    first, last = readers[0], readers[-1]
    hoisted = [j for j in range(first, last + 1) if j not in readers]
    if any(not isinstance(stmts[j], (Alloc, Decl)) for j in hoisted):
        return None
    loops = [stmts[j] for j in readers]
    written: set[str] = set()
    for loop in loops:  # each reads its own row, and what earlier ones made of that row
        if not (isinstance(loop, Loop) and isinstance(loop.start, Int) and
                loop.start.value == 0 and isinstance(loop.stop, Int) and
                loop.stop.value == m and loop.step == 1 and
                _by_row(loop.body, name, loop.var, n) and
                _row_local(loop, written | _written(loop))):
            return None
        written |= _written(loop)
    # the product now runs after what lies before its first reader: that must not
    # change its operands (their frees move after the last panel)
    operands = _names_in(gemm.a) | _names_in(gemm.b) | _names_in(gemm.alpha)
    freed = []
    for j in range(g + 1, first):
        s = stmts[j]
        if isinstance(s, Free) and s.name in operands:
            freed.append(s)
        elif operands & _names(s) and not (isinstance(s, (Loop, Alloc)) and
                                           not operands & _written(s)):
            return None
    alloc.count = rows * n
    at = Sym(f"{loops[0].var}_panel")
    inner: list[Stmt] = [replace(gemm, m=rows, a=gemm.a + at * gemm.k)]
    for loop in loops:
        body = [map_stmt(s, lambda e: _shift(e, name, at * n)) for s in loop.body]
        inner.append(replace(loop, start=at, stop=at + rows, body=body,
                             pragma=loop.pragma if rows >= 32 else ""))
    before = [s for j, s in enumerate(stmts[:first]) if j != g and s not in freed]
    return [*before, *(stmts[j] for j in hoisted),
            Loop(at.name, Int(m), inner, step=rows), *freed, *stmts[last + 1:]]


def _row_local(loop: Loop, made: set[str]) -> bool:
    """Whether ``loop`` stores to buffers only at its own index, and reads the buffers
    in ``made`` (what it and earlier row loops store) only there too."""
    ok = True

    def check(e: Expr) -> Expr:
        nonlocal ok
        if isinstance(e, Load) and isinstance(e.ptr, Sym) and e.ptr.name in made:
            ok = ok and isinstance(e.index, Sym) and e.index.name == loop.var
        return e

    for t in walk([loop]):
        target = getattr(t, "target", None)
        if isinstance(target, Load) and not (isinstance(target.index, Sym) and
                                             target.index.name == loop.var):
            return False
        _map_shallow(t, check)
    return ok


def _shift(e: Expr, name: str, by: Expr) -> Expr:
    if isinstance(e, Load) and isinstance(e.ptr, Sym) and e.ptr.name == name:
        return replace(e, index=e.index - by)
    return e


def _by_row(body: list[Stmt], name: str, var: str, n: int) -> bool:
    """Whether every read of buffer ``name`` in ``body`` is ``name[var * n + j]`` with
    ``j`` an inner loop's index over ``range(n)`` (the loop's own row), and nothing
    writes it."""
    inner = {s.var for s in walk(body) if isinstance(s, Loop) and isinstance(s.start, Int)
             and s.start.value == 0 and isinstance(s.stop, Int) and s.stop.value == n
             and s.step == 1}
    ok = True

    def check(e: Expr) -> Expr:
        nonlocal ok
        if isinstance(e, Load) and isinstance(e.ptr, Sym) and e.ptr.name == name:
            i = e.index
            ok = ok and isinstance(i, Bin) and i.op == "+" and isinstance(i.b, Sym) and \
                i.b.name in inner and isinstance(i.a, Bin) and i.a.op == "*" and \
                isinstance(i.a.a, Sym) and i.a.a.name == var and \
                isinstance(i.a.b, Int) and i.a.b.value == n
        return e

    for t in walk(body):
        if hasattr(t, "target") and isinstance(t.target, Load) and \
                isinstance(t.target.ptr, Sym) and t.target.ptr.name == name:
            return False
        _map_shallow(t, check)
    return ok


def _map_shallow(s: Stmt | Expr, f) -> None:
    """Apply ``f`` to the expressions of ``s`` itself (not of nested statements)."""
    for value in [s] if isinstance(s, Expr) else vars(s).values():
        if isinstance(value, (Expr, tuple)):
            map_exprs(value, f)


def _names_in(node: Stmt | Expr | None) -> set[str]:
    """The names an expression, or a statement without nested ones, reads or sets."""
    found: set[str] = set()
    if node is not None:
        _map_shallow(node, lambda e: found.add(e.name) or e if isinstance(e, Sym) else e)
        found.update(v for k in ("name", "dest", "var")
                     if isinstance(v := getattr(node, k, None), str))
    return found


def _names(s: Stmt) -> set[str]:
    """Every buffer or local name statement ``s`` (and what it nests) mentions."""
    return set().union(*(_names_in(t) for t in walk([s])))


def _written(s: Stmt) -> set[str]:
    """Buffers the kernel statement ``s`` stores to."""
    return {t.target.ptr.name for t in walk([s]) if hasattr(t, "target") and
            isinstance(t.target, Load) and isinstance(t.target.ptr, Sym)}
