"""Program loops over array elements made vectorisable: their index arithmetic evaluated,
adds at several offsets of the index gathered after the loop, and a reverse sweep's sums
kept in vector partial sums.

The reverse sweep of a stencil (``new[i] = u[i] + a * (u[i-1] - 2*u[i] + u[i+1])`` in a
``for i in range(1, n - 1)``) adds into ``u``'s cotangent at three offsets an iteration
and into ``a``'s a term at a time: two chains of dependent adds, one through memory (an
iteration reads what the one before wrote), one through a register, so the loop runs an
element at a time.  A counted loop of straight-line code is rewritten where that makes
its iterations independent:

- Its index arithmetic (Python's negative-index wrap, a dynamic slice's clamp) is
  evaluated over the loop's range: an index that is ``b + a*i`` reads as that, and a
  test that never holds there (an index's bounds check) goes.
- Scalar expansion and loop distribution: a buffer the loop only adds into (``d[j] =
  d[j] + e``), at ``b + k ± i`` for two or more constants ``k``, is added into after it.
  The loop stores each added value in a buffer of its own, an element an iteration;
  then a loop per stretch of elements adds them in, each element's terms in the order
  the loop added them, so the sums are the same bits (stretches at the edges, which
  fewer iterations reach, add fewer terms).
- A scalar it only adds to (``acc = acc + term``) becomes an OpenMP ``reduction``:
  partial sums per vector lane, added up at the end.  That reorders a float sum, which
  only a reverse sweep's loop may do (``Range.adjoint``: its results are derivatives,
  which are held to a tolerance, never primal values); an integer sum is exact.

The loop is rewritten only where that removes such a chain and it then is a ``simd``
loop: each buffer it writes it reads and writes at one index, a different element each
iteration, and no buffer it reads shares memory with one it writes.  Buffers are
distinct unless a ``Pointer`` places one inside another (a tape's buffers are its own).
Its iterations independent, a loop whose indexes run down (a reverse sweep) runs up:
the same values, loaded without shuffling vectors end for end.  Not (yet) rewritten:
loops of more than ``QUIET`` work, which stay ``Range``s polling for Ctrl-C
(``counted``), and loops with loops in them (two-dimensional stencils).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, replace

from ....ir.types import DType
from .ir import (
    Alloc,
    Bin,
    Cast,
    Cond,
    Const,
    Decl,
    Expr,
    Fn,
    Free,
    If,
    Int,
    Load,
    Loop,
    LoopFunc,
    Move,
    Op,
    Pointer,
    Scope,
    Set,
    Stmt,
    Sym,
    arith,
    children,
    ctype,
    map_exprs,
    map_stmt,
    walk,
)

#: An index ``a * i + b`` of the loop index ``i``, as ``(a, b)``.
Affine = tuple[int, int]

_INT_RANGES = {"int64": (-(1 << 63), (1 << 63) - 1), "int32": (-(1 << 31), (1 << 31) - 1),
               "int64_t": (-(1 << 63), (1 << 63) - 1), "int32_t": (-(1 << 31), (1 << 31) - 1)}
_TESTS = {"lt": "<", "le": "<=", "gt": ">", "ge": ">=", "eq": "==", "ne": "!="}
_ARITH = {"add": "+", "sub": "-", "mul": "*"}


def gather_stencils(func: LoopFunc, _: Callable[[int], bool] | None = None) -> None:
    """Rewrite ``func``'s loops whose iterations the rewrite makes independent (a loop
    pass: the second argument, which loop lengths run on every thread, is not needed)."""
    func.body = _rewrite(func.body, _roots(func.body), None)


def _rewrite(stmts: list[Stmt], roots: dict[str, str], hoisted: list[Alloc] | None
             ) -> list[Stmt]:
    """``stmts`` rewritten, the buffers of values a rewritten loop stores allocated
    around the statement of the function's top block (or of a parallel loop's body)
    that holds it, not once per iteration of the loops around it, or, where
    ``hoisted``, added to it for the caller to allocate."""
    out: list[Stmt] = []
    for s in stmts:
        mine: list[Alloc] = []
        shared = isinstance(s, Loop) and "parallel" in s.pragma  # (threads: one each)
        for body in children(s):
            body[:] = _rewrite(body, roots, None if shared else mine)
        new = _stencil(s, roots, mine) if isinstance(s, Loop) else None
        if hoisted is None:
            out += [*mine, *([s] if new is None else new), *(Free(a.name) for a in mine)]
        else:
            hoisted += mine
            out += [s] if new is None else new
    return out


def _roots(stmts: list[Stmt]) -> dict[str, str]:
    """Each buffer a ``Pointer`` places in another: the buffer whose memory it is."""
    inside = {s.name: _syms(s.value)[0] for s in walk(stmts)
              if isinstance(s, Pointer) and s.value is not None and _syms(s.value)}

    def root(name: str) -> str:
        seen = set()
        while name in inside and name not in seen:
            seen.add(name)
            name = inside[name]
        return name
    return {name: root(name) for name in inside}


def _syms(node) -> list[str]:
    found: list[str] = []
    map_exprs(node, lambda e: found.append(e.name) or e if isinstance(e, Sym) else e)
    return found


def _loads(node) -> list[Load]:
    found: list[Load] = []
    map_exprs(node, lambda e: found.append(e) or e if isinstance(e, Load) else e)
    return found


# -- the body as straight-line code ---------------------------------------------------


def _flatten(body: list[Stmt]) -> list[Stmt] | None:
    """The iteration's statements, a one-element store loop read as its store; None
    where it has any but scalar locals, element loads and stores, and carried moves."""
    out: list[Stmt] = []
    for s in body:
        if isinstance(s, Loop) and isinstance(s.start, Int) and s.start.value == 0 and \
                isinstance(s.stop, Int) and s.stop.value == 1 and not s.pragma and \
                len(s.body) == 1 and isinstance(s.body[0], Set):
            var = s.var
            s = map_stmt(s.body[0], lambda e, var=var: Int(0)
                         if isinstance(e, Sym) and e.name == var else e)
        if isinstance(s, Set) and s.op != "=" or \
                isinstance(s, Pointer) and s.value is not None or \
                not isinstance(s, (Decl, Set, Move, Pointer, If)):
            return None
        out.append(s)
    return out


def _reads(s: Stmt) -> list[str]:
    """The names statement ``s`` reads (a store's buffer among them)."""
    if isinstance(s, Move):
        return _syms(s.src)
    if isinstance(s, If):
        return _syms(s.cond)
    if isinstance(s, Set):
        return _syms(s.value) + (_syms(s.target) if isinstance(s.target, Load) else [])
    return _syms(s.init) if isinstance(s, Decl) else []


def _set(s: Stmt) -> tuple[str, Expr] | None:
    """The local statement ``s`` sets, and its value."""
    if isinstance(s, Decl) and s.init is not None:
        return s.name, s.init
    if isinstance(s, Set) and isinstance(s.target, Sym):
        return s.target.name, s.value
    if isinstance(s, Move) and isinstance(s.dest, Sym):
        return s.dest.name, s.src
    return None


@dataclass
class _Body:
    """The iteration's statements and locals: each local set once before it is read
    has its value in ``defs`` (and where in ``at``); ``uses`` counts reads of names."""

    stmts: list[Stmt]
    declared: set[str]
    defs: dict[str, Expr]
    at: dict[str, int]
    uses: Counter

    @classmethod
    def of(cls, stmts: list[Stmt]) -> _Body:
        declared = {s.name for s in stmts if isinstance(s, (Decl, Pointer))}
        defs: dict[str, Expr] = {}
        at: dict[str, int] = {}
        sets: Counter = Counter()
        early: set[str] = set()
        uses: Counter = Counter()
        for k, s in enumerate(stmts):
            for name in _reads(s):
                uses[name] += 1
                if name in declared and name not in defs:
                    early.add(name)
            if (named := _set(s)) is not None:
                sets[named[0]] += 1
                defs[named[0]], at[named[0]] = named[1], k
        once = {n for n in declared if sets[n] == 1 and n not in early}
        return cls(stmts, declared, {n: v for n, v in defs.items() if n in once},
                   {n: k for n, k in at.items() if n in once}, uses)

    def mentions(self, k: int, name: str) -> bool:
        return name in _reads(self.stmts[k]) or _set(self.stmts[k]) is not None and \
            _set(self.stmts[k])[0] == name


# -- index arithmetic over the loop's range -------------------------------------------


class _Index:
    """Integer expressions of the loop index ``var`` over ``range(lo, hi)`` as affine
    forms, and tests decided over the range."""

    def __init__(self, var: str, lo: int, hi: int, body: _Body) -> None:
        self.var, self.lo, self.hi, self.body = var, lo, hi, body
        self.memo: dict[str, Affine | None] = {}

    def span(self, f: Affine) -> tuple[int, int]:
        a, b = f
        ends = (a * self.lo + b, a * (self.hi - 1) + b)
        return min(ends), max(ends)

    def fits(self, f: Affine | None, ct: str) -> Affine | None:
        if f is None or ct not in _INT_RANGES:
            return None
        lo, hi = self.span(f)
        least, most = _INT_RANGES[ct]
        return f if least <= lo and hi <= most else None

    def affine(self, e: Expr) -> Affine | None:  # noqa: C901 - one case per expression
        if isinstance(e, Int):
            return 0, e.value
        if isinstance(e, Const):
            return (0, int(e.value)) if e.dtype.is_int else None
        if isinstance(e, Sym):
            if e.name == self.var:
                return 1, 0
            if e.name not in self.memo:
                self.memo[e.name] = None  # (a local defined by itself is no index)
                d = self.body.defs.get(e.name)
                self.memo[e.name] = self.affine(d) if d is not None else None
            return self.memo[e.name]
        if isinstance(e, Bin) and e.op in "+-*":
            return _combine(e.op, self.affine(e.a), self.affine(e.b))
        if isinstance(e, Op) and e.dtype.is_int and e.name in _ARITH:
            return _combine(_ARITH[e.name], self.affine(e.args[0]), self.affine(e.args[1]))
        if isinstance(e, Op) and e.dtype.is_int and e.name == "neg":
            f = self.affine(e.args[0])
            return None if f is None else (-f[0], -f[1])
        if isinstance(e, Op) and e.name == "convert" and e.dtype.is_int and e.out is not None:
            return self.fits(self.affine(e.args[0]), e.out.name)
        if isinstance(e, Cast):
            return self.fits(self.affine(e.x), e.ctype)
        if isinstance(e, (Op, Cond)) and (isinstance(e, Cond) or e.name == "select"):
            p, a, b = (e.p, e.a, e.b) if isinstance(e, Cond) else e.args
            t = self.truth(p)
            return None if t is None else self.affine(a if t else b)
        if isinstance(e, Fn) and e.name == "pb_clamp":
            f, least, most = (self.affine(x) for x in e.args)
            if f is None or least is None or most is None or least[0] or most[0]:
                return None
            lo, hi = self.span(f)
            return f if least[1] <= lo and hi <= most[1] else None
        t = self.truth(e)  # a test the same on every iteration: 0 or 1
        return None if t is None else (0, int(t))

    def truth(self, e: Expr) -> bool | None:
        """The value of test ``e`` where it is the same on every iteration."""
        if isinstance(e, Int):
            return bool(e.value)
        if isinstance(e, Const):
            return bool(e.value) if e.dtype.is_bool else None
        if isinstance(e, Sym):
            d = self.body.defs.get(e.name)
            return self.truth(d) if d is not None else None
        op, args = (e.op, (e.a, e.b)) if isinstance(e, Bin) else \
            (_TESTS.get(e.name, e.name), e.args) if isinstance(e, Op) else (None, ())
        if op in ("&&", "&", "and", "||", "|", "or"):
            p, q = (self.truth(x) for x in args)
            if op in ("&&", "&", "and"):
                return False if False in (p, q) else None if None in (p, q) else True
            return True if True in (p, q) else None if None in (p, q) else False
        if op not in ("<", "<=", ">", ">=", "==", "!="):
            return None
        diff = _combine("-", self.affine(args[0]), self.affine(args[1]))
        if diff is None:
            return None
        lo, hi = self.span(diff)
        holds = {"<": (hi < 0, lo >= 0), "<=": (hi <= 0, lo > 0), ">": (lo > 0, hi <= 0),
                 ">=": (lo >= 0, hi < 0), "==": (lo == hi == 0, lo > 0 or hi < 0),
                 "!=": (lo > 0 or hi < 0, lo == hi == 0)}[op]
        return True if holds[0] else False if holds[1] else None

    def canonical(self, e: Expr) -> Expr:
        """``e``, a load at an affine index reading it as ``a*i + b``."""
        f = self.affine(e.index) if isinstance(e, Load) else None
        return replace(e, index=self.expr(f)) if f is not None else e

    def reversed(self, stmts: list[Stmt]) -> list[Stmt]:
        """``stmts`` for iteration ``lo + hi - 1 - i`` in place of ``i``."""
        last = Int(self.lo + self.hi - 1)

        def flip(e: Expr) -> Expr:
            if isinstance(e, Sym) and e.name == self.var:
                return arith("-", last, e)
            return self.canonical(e)
        return [map_stmt(s, flip) for s in stmts]

    def expr(self, f: Affine) -> Expr:
        """``a * i + b`` as an index expression."""
        a, b = f
        i = Sym(self.var)
        if a == -1:
            return arith("-", Int(b), i)
        return arith("-" if b < 0 else "+", arith("*", i, a), abs(b))


def _combine(op: str, f: Affine | None, g: Affine | None) -> Affine | None:
    if f is None or g is None:
        return None
    if op == "+":
        return f[0] + g[0], f[1] + g[1]
    if op == "-":
        return f[0] - g[0], f[1] - g[1]
    if f[0] and g[0]:
        return None
    return f[0] * g[1] + g[0] * f[1], f[1] * g[1]


# -- the rewrite ----------------------------------------------------------------------


@dataclass
class _Add:
    """``x = d[j]; y = x + value; d[j] = y`` at ``j = a*i + b`` (``at``), in ``dtype``:
    the statements it spans, its store last."""

    buffer: str
    at: Affine
    value: Expr
    dtype: DType
    stmts: list[int]


def _stencil(loop: Loop, roots: dict[str, str], temps: list[Alloc]) -> list[Stmt] | None:
    """The loop rewritten (the buffers it needs added to ``temps``), or None where the
    rewrite does not apply or gains nothing."""
    if loop.pragma or loop.step != 1 or not isinstance(loop.start, Int) or \
            not isinstance(loop.stop, Int) or loop.stop.value - loop.start.value < 2:
        return None
    scoped = len(loop.body) == 1 and isinstance(loop.body[0], Scope)
    flat = _flatten(loop.body[0].body if scoped else loop.body)  # type: ignore[union-attr]
    if flat is None:
        return None
    index = _Index(loop.var, loop.start.value, loop.stop.value, _Body.of(flat))
    if any(isinstance(s, If) and index.truth(s.cond) is not False for s in flat):
        return None  # (a test that never holds, such as an index's bounds check, goes)
    body = _Body.of([map_stmt(s, index.canonical) for s in flat if not isinstance(s, If)])
    carried = _carried(body, loop.adjoint)
    if carried is None:
        return None
    sums, passed = carried
    adds = _adds(body, index)
    spread = _spread(body, adds)
    if not spread and not sums:
        return None
    main, stored, gathers = _distribute(loop.var, body, adds, spread, index, passed)
    if not _independent(main, index, roots, spread):
        return None
    main = _pruned(main)
    if sum(f[0] for s in main for x in _loads(s) if (f := index.affine(x.index))) < 0:
        main = index.reversed(main)  # (iterations independent: the order is free)
    kernel = replace(loop, body=[Scope(main)] if scoped else main, pragma="simd",
                     reductions=tuple(f"reduction(+:{acc})" for acc in sums))
    temps += [Alloc(t, ct, n) for t, ct, n in stored]
    return [kernel, *gathers]


def _pruned(stmts: list[Stmt]) -> list[Stmt]:
    """``stmts`` without the locals nothing reads (index arithmetic now evaluated)."""
    while True:
        read = Counter(n for s in stmts for n in _reads(s))
        dead = {s.name for s in stmts if isinstance(s, (Decl, Pointer)) and not read[s.name]}
        kept = [s for s in stmts if not (isinstance(s, (Decl, Pointer)) and s.name in dead or
                                         (named := _set(s)) is not None and named[0] in dead)]
        if len(kept) == len(stmts):
            return kept
        stmts = kept


def _carried(body: _Body, adjoint: bool) -> tuple[list[str], set[int]] | None:
    """The scalars carried from one iteration to the next that are only summed
    (``acc = acc + term``, its one read) where the sum may be reordered, and the
    statements that only pass a carried buffer or value on as it is (``n = v; v =
    n``); None where anything else is carried."""
    sums: list[str] = []
    passed: set[int] = set()
    for k, s in enumerate(body.stmts):
        named = _set(s)
        if named is None or named[0] in body.declared:
            continue
        carry, value = named
        if not isinstance(s, Move) or carry in sums:
            return None  # an outer local set in place: not a carry as lowering makes them
        chain = [k]
        while isinstance(value, Sym) and value.name in body.defs and \
                body.uses[value.name] == 1:
            chain += [body.at[value.name]] + [j for j, t in enumerate(body.stmts)
                                             if isinstance(t, (Decl, Pointer)) and
                                             t.name == value.name]
            value = body.defs[value.name]
        if isinstance(value, Sym) and value.name == carry:
            passed.update(chain)
        elif isinstance(value, Op) and value.name == "add" and body.uses[carry] == 1 and \
                any(isinstance(x, Sym) and x.name == carry for x in value.args) and \
                (value.dtype.is_int or adjoint and value.dtype.is_float):
            sums.append(carry)
        else:
            return None
    return sums, passed


def _adds(body: _Body, index: _Index) -> list[_Add]:
    """Each add into an element, ``x = d[j]; y = x + e; d[j] = y`` (or ``e + x``; ``x``
    and ``y`` read once, nothing between the load and the store touching ``d``; ``e`` a
    local, which keeps its value, or a constant)."""
    found = []
    for k, s in enumerate(body.stmts):
        if not (isinstance(s, Set) and isinstance(s.target, Load) and
                isinstance(s.target.ptr, Sym) and isinstance(s.value, Sym)):
            continue
        d, y, j = s.target.ptr.name, s.value.name, index.affine(s.target.index)
        total = body.defs.get(y)
        if j is None or not (isinstance(total, Op) and total.name == "add" and
                             body.uses[y] == 1):
            continue
        for x, e in (total.args, total.args[::-1]):
            old = body.defs.get(x.name) if isinstance(x, Sym) else None
            kept = isinstance(e, Const) or isinstance(e, Sym) and \
                (e.name in body.defs or e.name not in body.declared)
            if not (kept and isinstance(old, Load) and isinstance(old.ptr, Sym) and
                    old.ptr.name == d and index.affine(old.index) == j and
                    body.uses[x.name] == 1 and not {d, x.name} & set(_syms(e))):
                continue
            load = body.at[x.name]
            if any(body.mentions(m, d) for m in range(load + 1, k)):
                continue
            spans = {k, load, body.at[y]} | {m for m, t in enumerate(body.stmts)
                                             if isinstance(t, Decl) and t.name in (x.name, y)}
            found.append(_Add(d, j, e, total.dtype, sorted(spans)))
            break
    return found


def _spread(body: _Body, adds: list[_Add]) -> list[str]:
    """The buffers the loop touches only to add into, at two or more offsets of one
    index running by one."""
    out = []
    for d in dict.fromkeys(a.buffer for a in adds):
        mine = [a for a in adds if a.buffer == d]
        touched = sum(1 for s in body.stmts for x in _loads(s) if isinstance(x.ptr, Sym)
                      and x.ptr.name == d)  # (a store's target among them)
        slopes = {a.at[0] for a in mine}
        if touched == 2 * len(mine) and len(slopes) == 1 and slopes <= {1, -1} and \
                len({a.at[1] for a in mine}) > 1:
            out.append(d)
    return out


def _distribute(var: str, body: _Body, adds: list[_Add], spread: list[str], index: _Index,
                drop: set[int]) -> tuple[list[Stmt], list[tuple[str, str, int]], list[Stmt]]:
    """The loop's statements but ``drop`` with each add into a ``spread`` buffer storing
    its value in a buffer of its own instead (element ``q``: iteration ``index.lo + q`` where the
    index runs up, ``index.hi - 1 - q`` where it runs down); those buffers; and the
    loops adding them in."""
    trips = index.hi - index.lo
    temps: dict[tuple[str, int], tuple[str, str, int]] = {}  # (value, slope) -> buffer
    cut = set(drop)
    stores: dict[int, Stmt] = {}
    moved: list[tuple[_Add, str]] = []
    for n, a in enumerate(a for a in adds if a.buffer in spread):
        slope = a.at[0]
        key = (a.value.name if isinstance(a.value, Sym) else f"#{n}", slope)
        if key not in temps:
            temps[key] = (f"{var}_t{len(temps)}", ctype(a.dtype), trips)
            q = index.expr((slope, -index.lo if slope == 1 else index.hi - 1))
            stores[a.stmts[-1]] = Set(Load(Sym(temps[key][0]), q), a.value)
        cut.update(a.stmts)
        moved.append((a, temps[key][0]))
    main = [stores.get(k, s) for k, s in enumerate(body.stmts) if k not in cut or k in stores]
    gathers = []
    for d in spread:
        gathers += _gather(var, d, [(a, t) for a, t in moved if a.buffer == d], index)
    return main, list(temps.values()), gathers


def _gather(var: str, d: str, adds: list[tuple[_Add, str]], index: _Index) -> list[Stmt]:
    """Loops adding the stored values into ``d``, each element's terms in the order the
    loop added them (by iteration, then by statement), a loop per stretch of elements
    that the same adds reach."""
    trips = index.hi - index.lo
    slope = adds[0][0].at[0]
    # the add at a*i + b reaches element j from its value buffer's element j - offset
    offsets = [a.at[1] - (-index.lo if slope == 1 else index.hi - 1) for a, _ in adds]
    order = sorted(range(len(adds)), key=lambda m: (-slope * offsets[m], m))
    cuts = sorted(set(offsets) | {o + trips for o in offsets})
    j = Sym(f"{var}_j")
    out: list[Stmt] = []
    for lo, hi in zip(cuts, cuts[1:], strict=False):
        terms = [m for m in order if offsets[m] <= lo and hi <= offsets[m] + trips]
        if not terms:
            continue
        total: Expr = Load(Sym(d), j)
        for m in terms:
            a, t = adds[m]
            total = Op("add", (total, Load(Sym(t), arith("-", j, offsets[m]))), a.dtype)
        out.append(Loop(j.name, Int(hi), [Set(Load(Sym(d), j), total)], start=Int(lo),
                        pragma="simd"))
    return out


def _independent(stmts: list[Stmt], index: _Index, roots: dict[str, str],
                 spread: list[str]) -> bool:
    """Whether each buffer the loop writes it reads and writes at one index, a
    different element each iteration, and shares no memory with another it reads, nor
    with a ``spread`` buffer (added into after it)."""
    seen: dict[str, set[Affine | None]] = {}
    for s in stmts:
        for x in _loads(s):  # (a store's target among them)
            if not isinstance(x.ptr, Sym):
                return False
            seen.setdefault(x.ptr.name, set()).add(index.affine(x.index))
    written = {s.target.ptr.name for s in stmts
               if isinstance(s, Set) and isinstance(s.target, Load)}
    for d in written:
        at = seen[d]
        if len(at) != 1 or None in at or next(iter(at))[0] == 0:
            return False
    names = [*seen, *spread]
    memory = [roots.get(n, n) for n in names]
    return not any(memory.count(roots.get(d, d)) > 1 for d in [*written, *spread])
