"""Products read column by column are computed transposed.

Records split into columns (``prepare/columns.py``) read a product's ``m x n`` result
one column at a time: ``c[i * n + j]`` for a constant ``j`` in a loop over the rows
``i`` (k-means' ``points @ centroids.T`` by centroid).  Row-major, each such read strides
by ``n``, and gcc vectorises a loop reading a group of ``n`` strided elements only where
``n`` is a power of two (or 3): with ten centroids the whole fused kernel runs scalar.
Computed as its transpose ``cᵀ = op(b)ᵀ op(a)ᵀ`` (the same product, with the operands
swapped and their transposition flipped), each column is a contiguous row ``cᵀ[j * m +
i]``, and the readers' loops vectorise.
"""

from __future__ import annotations

from dataclasses import fields, replace

from .ir import Alloc, Bin, Expr, Free, Gemm, Int, Load, Set, Stmt, Sym, children, map_stmt


def transpose_products(stmts: list[Stmt]) -> list[Stmt]:
    """``stmts`` with each product whose result is read only by whole columns computed
    transposed, and those reads renumbered (nested statement lists too)."""
    for s in stmts:
        for body in children(s):
            body[:] = transpose_products(body)
    for g, s in enumerate(stmts):
        if isinstance(s, Gemm) and _transposable(stmts, g):
            name, m, n = s.c.name, s.m, s.n  # type: ignore[attr-defined]
            stmts[g] = replace(s, m=n, n=m, a=s.b, trans_a=not s.trans_b, b=s.a,
                               trans_b=not s.trans_a)

            def renumber(e: Expr, name=name, m=m, n=n) -> Expr:
                if isinstance(e, Load) and isinstance(e.ptr, Sym) and e.ptr.name == name:
                    row, col = _row_and_column(e.index, n)  # type: ignore[misc]
                    return replace(e, index=row + col * m if col else row)
                return e

            stmts[g + 1:] = [map_stmt(t, renumber) for t in stmts[g + 1:]]
    return stmts


def _row_and_column(index: Expr, n: int) -> tuple[Expr, int] | None:
    """``(row, j)`` where ``index`` is ``row * n + j`` for a constant column ``j``, else
    None."""
    if isinstance(index, Int):
        return Int(index.value // n), index.value % n
    col = 0
    if isinstance(index, Bin) and index.op == "+" and isinstance(index.b, Int) and \
            0 <= index.b.value < n:
        index, col = index.a, index.b.value
    if isinstance(index, Bin) and index.op == "*" and isinstance(index.b, Int) and \
            index.b.value == n:
        return index.a, col
    return None


def _transposable(stmts: list[Stmt], g: int) -> bool:
    """Whether the product at ``g`` writes a buffer allocated in this statement list
    that nothing else writes or reads before it, and that only loads of whole columns
    read after it (at least one)."""
    gemm = stmts[g]
    assert isinstance(gemm, Gemm)
    if not (isinstance(gemm.c, Sym) and gemm.batch == 1 and gemm.addend is None and
            gemm.m > 1 and gemm.n > 1):
        return False
    name = gemm.c.name
    if not any(isinstance(s, Alloc) and s.name == name for s in stmts[:g]):
        return False
    columns = 0
    for j, s in enumerate(stmts):
        if j == g or isinstance(s, (Alloc, Free)) and s.name == name:
            continue
        uses = _Uses(name, gemm.n)
        uses.visit(s)
        if uses.others or uses.columns and j < g:
            return False
        columns += uses.columns
    return columns > 0


class _Uses:
    """The uses of buffer ``name`` in what ``visit`` is shown: loads of whole columns of
    its ``n``, and any other (a store, another load, the pointer itself, the name)."""

    def __init__(self, name: str, n: int) -> None:
        self.name, self.n = name, n
        self.columns = self.others = 0

    def visit(self, x: object) -> None:
        if isinstance(x, Load) and isinstance(x.ptr, Sym) and x.ptr.name == self.name \
                and _row_and_column(x.index, self.n) is not None:
            self.columns += 1
            self.visit(x.index)
        elif isinstance(x, Sym) or isinstance(x, str):
            self.others += (x.name if isinstance(x, Sym) else x) == self.name
        elif isinstance(x, (list, tuple)):
            for y in x:
                self.visit(y)
        elif isinstance(x, (Expr, Stmt)):
            if isinstance(x, Set) and isinstance(x.target, Load):  # a store, not a load
                self.others += isinstance(x.target.ptr, Sym) and \
                    x.target.ptr.name == self.name
            for f in fields(x):
                self.visit(getattr(x, f.name))
