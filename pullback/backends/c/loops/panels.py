"""Products read only by a loop over their rows are computed a panel of rows at a time,
each panel read by that loop's iterations for its rows while it is in cache: a
``(points @ centroids.T)`` reduced row by row to its minima (k-means), logits reduced to
their log-sum-exp, never go to memory whole.  The product's buffer shrinks to one panel.

An iteration of the loop may read a group of consecutive rows (``b.reshape(28, 3, 4,
V)`` summed over its third axis reads 12 rows an iteration: the hand-tracking model's
blended transforms, a 336 x 10000 product); a panel is then whole groups.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..loops.ir import (
    Alloc,
    Bin,
    Const,
    Decl,
    Expr,
    Free,
    Gemm,
    Int,
    Load,
    Loop,
    Set,
    Stmt,
    Sym,
    children,
    each_expr,
    map_stmt,
    walk,
)

#: Rows of a panel: the most that divide the product's rows with a panel of at most
#: PANEL_BYTES (kept in the second-level cache between its product and its readers).
PANEL_BYTES = 256 << 10
#: Products smaller than this many bytes stay whole (nothing to gain).
PANEL_MIN = 4 << 20
#: Where one iteration's rows exceed PANEL_BYTES, panels of whole iterations' rows up to
#: this many bytes still keep the product out of memory (in the last-level cache): a
#: 336 x 10000 x 22 product read 12 rows an iteration, float64, one thread, AMD EPYC
#: Zen 5: whole and then read 5.7 ms; panels of 12 rows (960 KB) 2.8 ms, 24 rows 2.75,
#: 48 rows (3.8 MB) 2.65, 84 rows 2.75.
LARGE_PANEL_BYTES = 4 << 20


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
    readers = [j for j in range(g + 1, len(stmts)) if name in _names(stmts[j]) and
               not (isinstance(stmts[j], Free) and stmts[j].name == name)]
    if not readers:
        return None
    first, last = readers[0], readers[-1]
    hoisted = [j for j in range(first, last + 1) if j not in readers]
    if any(not isinstance(stmts[j], (Alloc, Decl)) for j in hoisted):
        return None
    loops = [stmts[j] for j in readers]
    # the readers' iterations (``groups`` of them), each reading ``m // groups`` rows
    groups = loops[0].stop.value if isinstance(loops[0], Loop) and \
        isinstance(loops[0].stop, Int) else 0
    if groups <= 0 or m % groups:
        return None
    group = m // groups
    size = group * n * alloc.nbytes // alloc.count  # bytes of one iteration's rows
    most = PANEL_BYTES if size <= PANEL_BYTES else LARGE_PANEL_BYTES
    rows = max((r for r in range(1, groups + 1) if groups % r == 0 and r * size <= most),
               default=0)  # (iterations a panel)
    if rows * group < 8 or rows == groups:
        return None
    written: set[str] = set()
    for loop in loops:  # each reads its own rows, and what earlier ones made of them
        if not (isinstance(loop, Loop) and _over_rows(loop, groups) and
                _by_row(loop.body, name, loop.var, group * n) and
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
    region = _extend(stmts, last + 1, groups, written | {name}, _names(gemm) |
                     set().union(*(_names(loop) for loop in loops)), contract=group == 1)
    alloc.count = rows * group * n
    at = Sym(f"{loops[0].var}_panel")
    allocs = [stmts[j] for j in hoisted] + region.before
    shifts = {name: group * n, **_shrunk(stmts, region, allocs, groups, rows)}

    def panel(e: Expr) -> Expr:
        if isinstance(e, Load) and isinstance(e.ptr, Sym) and e.ptr.name in shifts:
            return replace(e, index=e.index - at * shifts[e.ptr.name])
        return e

    product = replace(gemm, m=rows * group, a=gemm.a + at * (group * gemm.k), whole=m)
    flip, flipped = _flipped(gemm, alloc.ctype)
    if flip:
        product = replace(product, b=Sym(flipped[0].name), trans_b=False)
    inner: list[Stmt] = [product]
    for loop in [*loops, *(stmts[j] for j in region.rows)]:
        if isinstance(loop, Gemm):  # contracting the rows: this panel's share, added
            a, b = (x if isinstance(x, Sym) and x.name in shifts else x + at * width
                    for x, width in ((loop.a, loop.m), (loop.b, loop.n)))
            inner.append(replace(loop, k=rows, a=a, b=b, addend=loop.c))
            continue
        body = [map_stmt(t, panel) for t in loop.body]
        inner.append(replace(loop, start=at, stop=at + rows, body=body,
                             pragma=loop.pragma if rows * group >= 32 else ""))
    before = [s for j, s in enumerate(stmts[:first]) if j != g and s not in freed]
    return [*before, *(stmts[j] for j in hoisted), *region.before, *flip,
            Loop(at.name, Int(groups), inner, step=rows), *freed, *flipped,
            *region.after, *stmts[region.end:]]


def _flipped(gemm: Gemm, ctype: str) -> tuple[list[Stmt], list[Stmt]]:
    """Where ``gemm``'s B is transposed and a library kernel runs it: the allocation and
    copy of B's transpose, made once before the panels (each panel's product would
    transpose B into its packing again: k-means' centroids, 400 times at 10000 points;
    the panels read it in place), and its free after them.  Else none."""
    if not (gemm.trans_b and gemm.blas):
        return [], []
    name, k, n = f"{gemm.c.name}_bt", gemm.k, gemm.n
    p, j = Sym("p"), Sym("j")
    copy = Loop("j", Int(n), [Loop("p", Int(k), [
        Set(Load(Sym(name), p * n + j), Load(gemm.b, j * k + p))], pragma="simd")])
    return [Alloc(name, ctype, k * n), copy], [Free(name)]


@dataclass
class _Region:
    """Statements after a product's row loops that join them, panel by panel: ``rows``
    (indices of more row loops, and of products contracting the rows, each panel adding
    its share), what runs once ``before`` the panels (allocations, declarations, the
    zeroing of what the panels add up) and ``after`` them (frees, and what reads only
    the sums), and ``end``, where the statements after the panels resume."""

    rows: list[int] = field(default_factory=list)
    before: list[Stmt] = field(default_factory=list)
    after: list[Stmt] = field(default_factory=list)
    end: int = 0


def _extend(stmts: list[Stmt], j: int, m: int, made: set[str], touched: set[str],
            contract: bool) -> _Region:
    """The statements from ``j`` on that run panel by panel too: loops over the ``m``
    rows that keep to their own row of what the panels make (``made``), loops adding
    rows up in order (into a buffer or a scalar: ``summed``, read by nothing else in
    the panels), and where ``contract`` (the panels' rows are the product's) products
    contracting the rows of a buffer the panels make.  A statement that touches nothing
    of the panels runs before them; one that reads only their sums, after them."""
    region, summed = _Region(), set()
    out_reads: set[str] = set()  # what the statements moved after the panels read
    out_writes: set[str] = set()
    while j < len(stmts):
        s = stmts[j]
        names, writes = _names(s), _written(s) | _sets(s)
        if isinstance(s, (Alloc, Decl)):
            writes.add(s.name)
        fresh = not (writes & touched) - made  # (made buffers are only read row by row)
        if isinstance(s, Free):
            region.after.append(s)
        elif names & out_writes or writes & out_reads:
            break
        elif isinstance(s, (Alloc, Decl)) and not names & (made | summed) - {s.name}:
            region.before.append(s)
        elif _over_rows(s, m) and fresh and not names & summed and \
                _row_local(s, made | _written(s)):
            region.rows.append(j)
            made |= _written(s)
            summed |= _sets(s)
            touched |= names
        elif _over_rows(s, m) and fresh and "parallel" not in s.pragma and \
                not names & summed and _row_local(s, made, summing=True):
            region.rows.append(j)
            summed |= writes - made
            touched |= names
        elif contract and isinstance(s, Gemm) and _contracts_rows(s, m, made) and \
                not names & summed and s.c.name not in touched:
            region.before.append(_zeros(s))
            region.rows.append(j)
            summed.add(s.c.name)
            touched |= names
        elif not names & (made | summed) and not writes & touched:
            region.before.append(s)
        elif not names & made and not writes & touched:
            region.after.append(s)
            out_reads |= names - writes
            out_writes |= writes
        else:
            break
        j += 1
    region.end = j
    return region


def _over_rows(s: Stmt, m: int) -> bool:
    return isinstance(s, Loop) and isinstance(s.start, Int) and s.start.value == 0 and \
        isinstance(s.stop, Int) and s.stop.value == m and s.step == 1


def _contracts_rows(g: Gemm, m: int, made: set[str]) -> bool:
    """Whether product ``g`` sums over ``m`` rows: ``a`` (``m x k`` transposed: ``k``
    rows of ``m``) by ``b`` (``k`` rows of ``n``), one of them a buffer the panels make."""
    return g.batch == 1 and g.k == m and g.trans_a and not g.trans_b and \
        g.addend is None and g.alpha is None and isinstance(g.c, Sym) and \
        any(isinstance(x, Sym) and x.name in made for x in (g.a, g.b))


def _zeros(g: Gemm) -> Stmt:
    """``g.c[:] = 0``: the panels add their shares of the product into it."""
    return Loop("z", Int(g.m * g.n), [Set(Load(g.c, Sym("z")), Const(0.0, g.dtype))],
                pragma="simd")


def _shrunk(stmts: list[Stmt], region: _Region, allocs: list[Stmt], m: int, rows: int
            ) -> dict[str, int]:
    """Buffers allocated before the panels (``allocs``) that the panels make and only
    they read, each row by row at one width (a product contracting the rows reads its
    operand's panel whole): allocated one panel long; by name, the elements of a row."""
    inside = [stmts[j] for j in region.rows if isinstance(stmts[j], Loop)]
    widths: dict[str, set[int | None]] = {}
    for loop in inside:
        test = _row_indices(loop.body, loop.var)
        for t in walk([loop]):
            def note(e: Expr, loop: Loop = loop, test=test) -> Expr:
                if isinstance(e, Load) and isinstance(e.ptr, Sym):
                    i = e.index
                    width = 1 if isinstance(i, Sym) and i.name == loop.var else \
                        _row_width(i, loop.body, loop.var) if test(i) else None
                    widths.setdefault(e.ptr.name, set()).add(width)
                return e
            _map_shallow(t, note)
    for j in region.rows:
        g = stmts[j]
        if isinstance(g, Gemm):
            rowwise = {x.name: w for x, w in ((g.a, g.m), (g.b, g.n)) if isinstance(x, Sym)}
            for name in _names_in(g):
                widths.setdefault(name, set()).add(rowwise.get(name))
    later = set().union(set(), *(_names(s) for s in stmts[region.end:] + region.after
                                 if not isinstance(s, Free)))
    found = {}
    for s in allocs:
        if not isinstance(s, Alloc) or s.name not in widths or s.name in later:
            continue  # (an allocation no panel loop reads stays whole)
        if len(widths[s.name]) == 1:
            (width,) = widths[s.name]
            if width is not None and s.count == m * width:
                s.count = rows * width
                found[s.name] = width
    return found


def _row_local(loop: Loop, made: set[str], summing: bool = False) -> bool:
    """Whether ``loop`` stores to buffers only in its own row (at its index, or at
    ``var * n + j`` with ``j`` an inner loop's index over ``range(n)``), and reads the
    buffers in ``made`` (what it and earlier row loops store) only there too.
    ``summing``: it may also store anywhere in buffers not in ``made`` (adding its rows
    up in order)."""
    ok = True
    rows = _row_indices(loop.body, loop.var)

    def own(index: Expr) -> bool:
        return isinstance(index, Sym) and index.name == loop.var or rows(index)

    def check(e: Expr) -> Expr:
        nonlocal ok
        if isinstance(e, Load) and isinstance(e.ptr, Sym) and e.ptr.name in made:
            ok = ok and own(e.index)
        return e

    for t in walk([loop]):
        target = getattr(t, "target", None)
        if isinstance(target, Load) and not own(target.index) and not (
                summing and isinstance(target.ptr, Sym) and target.ptr.name not in made):
            return False
        _map_shallow(t, check)
    return ok


def _sets(s: Stmt) -> set[str]:
    """Scalars that ``s`` assigns and does not declare itself (a loop's sums)."""
    inner = {t.name for t in walk(children(s)[0] if children(s) else []) if isinstance(t, Decl)}
    return {t.target.name for t in walk([s]) if isinstance(t, Set) and
            isinstance(t.target, Sym)} - inner


def _row_width(i: Expr, body: list[Stmt], var: str) -> int:
    """The row length ``n`` of an index ``var * n + j`` (``_row_indices``)."""
    n = _row_form(body, var)(i)
    assert n is not None
    return n


def _terms(e: Expr, named: dict[str, Expr], depth: int = 0
           ) -> tuple[dict[str, int], int] | None:
    """An integer index as a sum of names times constants plus a constant (locals in
    ``named`` read as their values), or None where it is not one."""
    if isinstance(e, Int):
        return {}, e.value
    if isinstance(e, Sym):
        if e.name in named and depth < 8:
            return _terms(named[e.name], named, depth + 1)
        return {e.name: 1}, 0
    if not isinstance(e, Bin) or e.op not in ("+", "*"):
        return None
    a, b = _terms(e.a, named, depth), _terms(e.b, named, depth)
    if a is None or b is None:
        return None
    if e.op == "+":
        return {k: a[0].get(k, 0) + b[0].get(k, 0) for k in a[0].keys() | b[0].keys()}, \
            a[1] + b[1]
    if a[0] and b[0]:
        return None
    scale, (coef, const) = (a[1], b) if not a[0] else (b[1], a)
    return {k: v * scale for k, v in coef.items()}, const * scale


def _row_form(body: list[Stmt], var: str):
    """A reader of index expressions: ``n`` where one is ``var * n + j`` with ``j`` in
    ``range(n)`` for every value of ``body``'s loop indices (``j`` a sum of inner loops'
    indices over ``range`` times nonnegative constants: an inner loop's index over
    ``range(n)``, or ``k * 40000 + q * 10000 + c`` reading 12 rows of 10000 an iteration,
    ``n`` 120000), written out or through locals (a kernel by rows declares ``i = r * n
    + c``); else None."""
    inner: dict[str, int] = {}
    for s in walk(body):
        if isinstance(s, Loop) and isinstance(s.start, Int) and s.start.value == 0 and \
                isinstance(s.stop, Int) and s.step == 1:
            inner[s.var] = max(inner.get(s.var, 0), s.stop.value)  # (names reused: the most)
    named = {s.name: s.init for s in walk(body) if isinstance(s, Decl) and
             s.init is not None and s.name not in inner}

    def form(i: Expr) -> int | None:
        terms = _terms(i, named)
        if terms is None:
            return None
        coef, const = terms
        n = coef.pop(var, 0)
        if n <= 0 or const < 0 or any(k not in inner or c < 0 for k, c in coef.items()):
            return None
        return n if const + sum(c * (inner[k] - 1) for k, c in coef.items()) < n else None

    return form


def _row_indices(body: list[Stmt], var: str, width: int | None = None):
    """A test of an index expression: whether it is ``var * n + j`` (``_row_form``),
    ``n == width`` when given."""
    form = _row_form(body, var)

    def test(i: Expr) -> bool:
        n = form(i)
        return n is not None and (width is None or n == width)

    return test


def _shift(e: Expr, name: str, by: Expr) -> Expr:
    if isinstance(e, Load) and isinstance(e.ptr, Sym) and e.ptr.name == name:
        return replace(e, index=e.index - by)
    return e


def _by_row(body: list[Stmt], name: str, var: str, n: int) -> bool:
    """Whether every read of buffer ``name`` in ``body`` is ``name[var * n + j]`` with
    ``j`` an inner loop's index over ``range(n)`` (the loop's own row), and nothing
    writes it."""
    rows = _row_indices(body, var, n)
    ok = True

    def check(e: Expr) -> Expr:
        nonlocal ok
        if isinstance(e, Load) and isinstance(e.ptr, Sym) and e.ptr.name == name:
            ok = ok and rows(e.index)
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
            each_expr(value, f)


def _names_in(node: Stmt | Expr | None) -> set[str]:
    """The names an expression, or a statement without nested ones, reads or sets."""
    found: set[str] = set()
    if node is not None:
        _map_shallow(node, lambda e: isinstance(e, Sym) and found.add(e.name))
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
