"""Products read column by column are computed transposed.

Records split into columns (``prepare/columns.py``) read a product's ``m x n`` result
one column at a time: ``c[i * n + j]`` for a constant ``j`` in a loop over the rows
``i`` (k-means' ``points @ centroids.T`` by centroid).  Row-major, each such read strides
by ``n``, and gcc vectorises a loop reading a group of ``n`` strided elements only where
``n`` is a power of two (or 3): with ten centroids the whole fused kernel runs scalar.
Computed as its transpose ``cᵀ = op(b)ᵀ op(a)ᵀ`` (the same product, with the operands
swapped and their transposition flipped), each column is a contiguous row ``cᵀ[j * m +
i]``, and the readers' loops vectorise.  Where that makes a shallow product of few rows
times a transposed B (``ir.shallow_product``: ten centroids by the points), it runs on the
inline kernel, as the lowering runs such products.
"""

from __future__ import annotations

import functools
from dataclasses import fields, replace

from .ir import (
    Alloc,
    Bin,
    Expr,
    Free,
    Gemm,
    Int,
    Load,
    Set,
    Stmt,
    Sym,
    children,
    map_stmt,
    shallow_product,
)


def transpose_products(stmts: list[Stmt]) -> list[Stmt]:
    """``stmts`` with each product whose result is read only by whole columns computed
    transposed, and those reads renumbered (nested statement lists too)."""
    for s in stmts:
        for body in children(s):
            body[:] = transpose_products(body)
    for g in _transposable(stmts):
        s = stmts[g]
        assert isinstance(s, Gemm) and isinstance(s.c, Sym)
        name, m, n = s.c.name, s.m, s.n
        stmts[g] = replace(s, m=n, n=m, a=s.b, trans_a=not s.trans_b, b=s.a,
                           trans_b=not s.trans_a,
                           blas=s.blas and not shallow_product(n, s.k, not s.trans_a))

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


def _transposable(stmts: list[Stmt]) -> list[int]:
    """Where the products are that write a buffer allocated in this statement list that
    nothing else writes or reads before them, and that only loads of whole columns read
    after them (at least one).  One walk of the list answers for every product (renumbering
    one product's reads leaves the others' uses as they were)."""
    allocated: set[str] = set()
    products: dict[str, tuple[int, int]] = {}  # buffer: the product's place, its n
    for g, s in enumerate(stmts):
        if isinstance(s, Alloc):
            allocated.add(s.name)
        elif isinstance(s, Gemm) and isinstance(s.c, Sym) and s.batch == 1 and \
                s.addend is None and s.m > 1 and s.n > 1 and s.c.name in allocated:
            products.setdefault(s.c.name, (g, s.n))
    if not products:
        return []
    uses = _Uses(products)
    for j, s in enumerate(stmts):
        own = s.name if isinstance(s, (Alloc, Free)) else \
            s.c.name if isinstance(s, Gemm) and isinstance(s.c, Sym) and \
            products.get(s.c.name, (-1,))[0] == j else None
        uses.visit(s, j, own)
    return sorted(g for name, (g, _) in products.items()
                  if uses.columns[name] and name not in uses.spoilt)


class _Uses:
    """The uses of the products' buffers in what ``visit`` is shown (statement ``j``,
    leaving out buffer ``own``, which that statement allocates, frees or computes): the
    loads of whole columns of each, and the buffers used any other way (a store, another
    load, the pointer itself, the name) or read before their product."""

    def __init__(self, products: dict[str, tuple[int, int]]) -> None:
        self.products = products
        self.columns = dict.fromkeys(products, 0)
        self.spoilt: set[str] = set()

    def visit(self, x: object, j: int, own: str | None) -> None:
        if isinstance(x, Load) and isinstance(x.ptr, Sym) and x.ptr.name != own and \
                x.ptr.name in self.products and \
                _row_and_column(x.index, self.products[x.ptr.name][1]) is not None:
            self.columns[x.ptr.name] += 1
            if j < self.products[x.ptr.name][0]:
                self.spoilt.add(x.ptr.name)
            self.visit(x.index, j, own)
        elif isinstance(x, (Sym, str)):
            name = x.name if isinstance(x, Sym) else x
            if name != own and name in self.products:
                self.spoilt.add(name)
        elif isinstance(x, (list, tuple)):
            for y in x:
                self.visit(y, j, own)
        elif isinstance(x, (Expr, Stmt)):
            if isinstance(x, Set) and isinstance(x.target, Load) and \
                    isinstance(x.target.ptr, Sym) and x.target.ptr.name != own and \
                    x.target.ptr.name in self.products:  # a store, not a load
                self.spoilt.add(x.target.ptr.name)
            for f in _fields(type(x)):
                self.visit(getattr(x, f), j, own)


@functools.cache
def _fields(kind: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(kind))
