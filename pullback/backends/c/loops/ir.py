"""Loop IR: the buffer-level program between graph IR and C.

Graph IR says what is computed; loop IR says how, in memory.  Values live in named
buffers (allocated on the call's arena or the runtime's pool, freed at their last read)
or in scalar locals; kernels are loop nests whose bodies are scalar statements (a fused
kernel is one loop computing several graph equations element by element); products are
library calls (``Gemm``: inline register tiles or BLAS); control flow is the graph's,
structured.  ``lower`` builds it (deciding fusion and memory), the passes of ``passes``
rewrite it (``arena`` assigns arena offsets), ``codegen`` prints it as C, and
``format_func`` prints it as text (``PULLBACK_DUMP=loops``).

Expressions are small trees: ``Sym`` names a local, an index or a buffer; ``Load`` reads
a buffer element; ``Op`` applies a graph IR element op (``tanh``, ``add``, ``convert``...)
to scalars of a dtype; ``Bin`` is index and pointer arithmetic and logic on C integers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields
from typing import TypeVar

from ....ir.types import DType, StackType, TensorType


class Unsupported(Exception):
    """An op or value the C backend cannot compile yet."""


# -- expressions ----------------------------------------------------------------------


class Expr:
    """A scalar, index or pointer expression; ``+ - * // %`` build index arithmetic
    (folding integer constants)."""

    def __add__(self, other: Expr | int) -> Expr:
        return arith("+", self, other)

    def __radd__(self, other: int) -> Expr:
        return arith("+", other, self)

    def __sub__(self, other: Expr | int) -> Expr:
        return arith("-", self, other)

    def __mul__(self, other: Expr | int) -> Expr:
        return arith("*", self, other)

    def __rmul__(self, other: int) -> Expr:
        return arith("*", other, self)


@dataclass(frozen=True, eq=False)
class Int(Expr):
    """An ``int64_t`` constant (an index, a size)."""

    value: int


@dataclass(frozen=True, eq=False)
class Const(Expr):
    """A constant of a graph dtype."""

    value: object
    dtype: DType


@dataclass(frozen=True, eq=False)
class Sym(Expr):
    """A local scalar, loop index, or buffer (its data pointer), by name."""

    name: str


@dataclass(frozen=True, eq=False)
class Load(Expr):
    """Element ``index`` of buffer ``ptr``."""

    ptr: Expr
    index: Expr


@dataclass(frozen=True, eq=False)
class Op(Expr):
    """A graph IR element op (``add``, ``tanh``, ``convert``, ``select``...) on scalars of
    ``dtype`` (the operands'); ``out`` is the result's dtype where it differs."""

    name: str
    args: tuple[Expr, ...]
    dtype: DType
    out: DType | None = None


@dataclass(frozen=True, eq=False)
class Bin(Expr):
    """C arithmetic, comparison or logic on integers and pointers: ``+ - * / % < <= >
    >= == != && || & |``."""

    op: str
    a: Expr
    b: Expr


@dataclass(frozen=True, eq=False)
class Cond(Expr):
    """``p ? a : b``."""

    p: Expr
    a: Expr
    b: Expr


@dataclass(frozen=True, eq=False)
class Cast(Expr):
    """A C conversion to ``ctype``."""

    ctype: str
    x: Expr


@dataclass(frozen=True, eq=False)
class Fn(Expr):
    """A call of a runtime function returning a value (``pb_clamp``, ``pb_splitmix``)."""

    name: str
    args: tuple[Expr, ...]


@dataclass(frozen=True, eq=False)
class Addr(Expr):
    """A pointer to one scalar: a local's address, or a constant's (a compound literal)."""

    x: Expr


def as_expr(x: Expr | int | str) -> Expr:
    if isinstance(x, Expr):
        return x
    return Int(x) if isinstance(x, int) else Sym(x)


def arith(op: str, a: Expr | int | str, b: Expr | int | str) -> Expr:
    """``a op b`` with integer constants folded and ``x + 0``, ``x * 1``, ``x * 0`` gone."""
    a, b = as_expr(a), as_expr(b)
    if isinstance(a, Int) and isinstance(b, Int):
        return Int({"+": a.value + b.value, "-": a.value - b.value,
                    "*": a.value * b.value}[op])
    if op == "+" and isinstance(a, Int) and a.value == 0:
        return b
    if op in "+-" and isinstance(b, Int) and b.value == 0:
        return a
    if op == "*":
        for x, y in ((a, b), (b, a)):
            if isinstance(x, Int) and x.value == 1:
                return y
            if isinstance(x, Int) and x.value == 0:
                return Int(0)
    return Bin(op, a, b)


def strides(shape: tuple[int, ...] | list[int]) -> list[int]:
    out, acc = [], 1
    for d in reversed(shape):
        out.append(acc)
        acc *= d
    return out[::-1]


def linear(shape, idx) -> Expr:
    """The row-major linear index of ``idx`` in ``shape`` (unit axes contribute nothing)."""
    total: Expr = Int(0)
    for i, s, d in zip(idx, strides(shape), shape, strict=True):
        if d != 1:
            total = total + as_expr(i) * s
    return total


def same_but_ones(a: Sequence[int], b: Sequence[int]) -> bool:
    """Whether shapes ``a`` and ``b`` differ at most by axes of one."""
    return [d for d in a if d != 1] == [d for d in b if d != 1]


def element_at(dest: str, shape: Sequence[int], idx: Sequence[Expr]) -> Expr:
    """Element ``idx`` of buffer ``dest`` (the local itself for a 0-d value)."""
    return Sym(dest) if len(shape) == 0 else Load(Sym(dest), linear(shape, idx))


# -- statements -----------------------------------------------------------------------


class Stmt:
    pass


@dataclass(eq=False)
class Decl(Stmt):
    """A scalar local (or tape pointer) of C type ``ctype``, ``init`` or zero."""

    name: str
    ctype: str
    init: Expr | None = None


@dataclass(eq=False)
class Set(Stmt):
    """``target op value`` where ``target`` is a local or a buffer element; ``op`` is
    ``=``, or ``+=``/``|=`` to accumulate."""

    target: Expr
    value: Expr
    op: str = "="


@dataclass(eq=False)
class Alloc(Stmt):
    """A buffer of ``count`` elements for the block that owns it: on the call's arena
    (at ``offset``, placed by ``arena.place_arena``) or from the runtime's pool."""

    name: str
    ctype: str
    count: int
    arena: bool = False
    offset: int = -1

    @property
    def nbytes(self) -> int:
        """Its arena bytes: rounded up to a cache line."""
        return max(64, -(-self.count * _SIZES[self.ctype] // 64) * 64)


@dataclass(eq=False)
class Free(Stmt):
    """The end of a buffer's life: back to the pool, or its arena bytes free again."""

    name: str
    arena_bytes: int = 0


@dataclass(eq=False)
class Pointer(Stmt):
    """A buffer name bound to another pointer (the caller's output buffer, a constant),
    or NULL until a result moves in."""

    name: str
    ctype: str
    value: Expr | None = None
    const: bool = False


@dataclass(eq=False)
class Move(Stmt):
    """``dest = src`` for buffers, tapes and scalars: a result moving out of a block, a
    loop's next carry replacing the last."""

    dest: Expr
    src: Expr


@dataclass(eq=False)
class Copy(Stmt):
    """``count`` elements of ``src`` into a new pool buffer ``dest`` (declared here
    when ``declare``), or into the existing buffer ``dest`` when ``fresh`` is false."""

    dest: str
    src: Expr
    ctype: str
    count: int
    fresh: bool = True
    declare: bool = False


#: Loops over at least this many elements run on every thread (``PULLBACK_NUM_THREADS``).
PARALLEL_MIN = 1 << 16


@dataclass(eq=False)
class Loop(Stmt):
    """``for var in range(start, stop, step)``.  ``pragma`` is ``simd``, ``parallel``
    (threads share the iterations) or ``parallel simd`` (OpenMP, with the
    ``reductions`` clauses and any other, such as ``simdlen``); ``fused`` names the
    graph equations a kernel computes, for the reader; ``adjoint``: a reverse sweep's
    loop (``Range.adjoint``)."""

    var: str
    stop: Expr
    body: list[Stmt]
    start: Expr = field(default_factory=lambda: Int(0))
    pragma: str = ""
    reductions: tuple[str, ...] = ()
    fused: tuple[str, ...] = ()
    step: int = 1
    adjoint: bool = False


@dataclass(eq=False)
class Range(Stmt):
    """A graph ``for_loop``: Python's ``range(lo, hi, step)`` in the loop index's type;
    a zero step raises ``ValueError``.  ``adjoint``: a reverse sweep's loop, whose
    results are all derivatives, so its sums may be added in another order."""

    var: str
    ctype: str
    lo: Expr
    hi: Expr
    step: Expr
    body: list[Stmt]
    adjoint: bool = False


@dataclass(eq=False)
class Forever(Stmt):
    """A graph ``while_loop``: its body ends with a ``Break`` out."""

    body: list[Stmt]


@dataclass(eq=False)
class Break(Stmt):
    """Leave the innermost ``Forever`` when ``cond`` is false."""

    cond: Expr


@dataclass(eq=False)
class Skip(Stmt):
    """Go on to the innermost loop's next iteration when ``cond`` holds."""

    cond: Expr


@dataclass(eq=False)
class If(Stmt):
    cond: Expr
    then: list[Stmt]
    orelse: list[Stmt] | None = None


@dataclass(eq=False)
class Scope(Stmt):
    """A nested block: its locals end with it."""

    body: list[Stmt]


@dataclass(eq=False)
class Gemm(Stmt):
    """``c = addend + alpha * op(a) @ op(b)`` for ``batch`` row-major ``m x k`` by
    ``k x n`` matrices (no ``addend``: none; no ``alpha``: 1; ``addend`` may be ``c``
    itself, to accumulate): the runtime library's register-tiled kernel, or when ``blas``
    a large product: BLAS ``gemm``, or the library's packed kernels where BLAS's are
    narrower than the CPU's vectors (decided when the module first runs one)."""

    dtype: DType
    batch: int
    m: int
    n: int
    k: int
    a: Expr
    trans_a: bool
    b: Expr
    trans_b: bool
    c: Expr
    blas: bool
    alpha: Expr | None = None
    addend: Expr | None = None
    #: A panel's rows of a product of ``whole`` rows (``panels.py``): the library kernels
    #: are chosen for the whole product, so every panel's sums are the whole's (0: ``m``).
    whole: int = 0


#: A product of at most SHALLOW_ROWS rows times a transposed B, at most SHALLOW_DEPTH
#: deep, runs on the inline kernel whatever its work: the library kernels' tiles are wider
#: than its rows (the packed kernels compute it as its transpose and transpose that back
#: element by element, which costs more than the product at this depth).  float64 on one
#: thread, AMD EPYC Zen 5 (AVX-512), inline / packed / OpenBLAS: 10x1000x8 5.8 / 11.9 /
#: 6.6 us, 10x1000x16 9.6 / 13.7 / 11.7, 10x10000x8 54 / 105 / 62, 10x10000x16 96 / 135;
#: from depth 32 the packed kernels are as fast or faster (12x1000x32 20.3 / 18.6,
#: 10x1000x64 40 / 27).
SHALLOW_ROWS = 16
SHALLOW_DEPTH = 16


def shallow_product(m: int, k: int, trans_b: bool) -> bool:
    """Whether an ``m x k`` by transposed ``k x n`` product runs inline (SHALLOW_ROWS)."""
    return trans_b and m <= SHALLOW_ROWS and 0 < k <= SHALLOW_DEPTH


@dataclass(eq=False)
class Runtime(Stmt):
    """A call of a runtime routine.  ``fault``: it returns nonzero on failure, which
    raises ``(exception, message)``, or the routine's own error when the message is
    empty; ``site``: the module's fault site whose line the exception names (-1: none);
    ``cost``: the element operations it does, where the caller knows them (a tape's
    push or pop copies so many elements; see ``work``)."""

    name: str
    args: tuple[Expr, ...]
    fault: tuple[str, str] | None = None
    site: int = -1
    cost: int | None = None


@dataclass(eq=False)
class Call(Stmt):
    """A call of another function of the module; its faults propagate."""

    func: str
    args: tuple[Expr, ...]


@dataclass(eq=False)
class Raise(Stmt):
    """Fail the call with ``exception(fmt % args)`` (``args`` as ``long long``), naming
    the line of the module's fault site ``site`` (-1: none)."""

    exception: str
    fmt: str
    args: tuple[Expr, ...] = ()
    site: int = -1


@dataclass(eq=False)
class Failed(Stmt):
    """Fail the call at the module's check ``check`` (an ``assert``, a size test) with
    the values its message formats."""

    check: int
    values: tuple[tuple[bool, Expr], ...]  # (is float, value)


@dataclass(eq=False)
class Print(Stmt):
    """Hand the bytes of some buffers to the module's printer ``k``."""

    k: int
    buffers: tuple[tuple[Expr, int, str], ...]  # (pointer, element count, element C type)


@dataclass(eq=False)
class Param:
    """A parameter: an operand (``out`` false) or a result written through a pointer."""

    name: str
    type: TensorType | StackType
    out: bool = False


@dataclass(eq=False)
class LoopFunc:
    """One function: parameters, body, and the bytes of its per-call arena;
    ``recursive``: it may reach itself through calls (its entry checks the stack)."""

    name: str
    params: list[Param]
    body: list[Stmt]
    entry: bool = False
    arena: int = 0
    recursive: bool = False


@dataclass(eq=False)
class LoopModule:
    """The module's functions (the entry is first) and constant tables."""

    funcs: list[LoopFunc]
    consts: list[tuple[str, DType, list]]  # (name, dtype, flat values)


CTYPES = {"bool": "uint8_t", "int32": "int32_t", "int64": "int64_t", "float32": "float",
          "float64": "double"}
_SIZES = {"uint8_t": 1, "int32_t": 4, "int64_t": 8, "float": 4, "double": 8}


def ctype(dt: DType) -> str:
    """The C type of a graph dtype's elements (the loop IR's scalar types are C's)."""
    return CTYPES[dt.name]


def children(stmt: Stmt) -> list[list[Stmt]]:
    """The statement lists nested in ``stmt``."""
    if isinstance(stmt, (Loop, Range, Forever, Scope)):
        return [stmt.body]
    if isinstance(stmt, If):
        return [stmt.then] + ([stmt.orelse] if stmt.orelse is not None else [])
    return []


def walk(stmts: list[Stmt]):
    """Every statement, nested ones too, in program order."""
    for s in stmts:
        yield s
        for inner in children(s):
            yield from walk(inner)


def work(stmts: list[Stmt]) -> int:
    """Roughly the element operations one run of ``stmts`` does, at least one a
    statement: what a loop on data or a recursive entry charges its budget between polls
    for Ctrl-C.  A counted loop multiplies its body's by its trip count, a product counts
    its multiply-adds, a runtime routine over n elements n squared (more than a sort, less
    than a factorization: a poll comes early rather than late); a loop on data nested
    here counts its body once (it charges its own iterations); a routine whose ``cost``
    is given counts that."""
    total = 0
    for s in stmts:
        if isinstance(s, Loop):
            span = s.stop.value - s.start.value \
                if isinstance(s.stop, Int) and isinstance(s.start, Int) else 1
            total += max(-(-span // s.step), 1) * work(s.body)
        elif isinstance(s, Gemm):
            total += s.batch * s.m * s.n * s.k
        elif isinstance(s, Runtime):
            total += s.cost if s.cost is not None else \
                max([a.value for a in s.args if isinstance(a, Int)] + [1]) ** 2
        elif isinstance(s, Copy):
            total += s.count
        elif isinstance(s, If):
            total += 1 + max(work(s.then), work(s.orelse or []))
        else:
            total += 1 + sum(work(inner) for inner in children(s))
    return total


T = TypeVar("T")


def first_read(stmts: list[Stmt], index: str) -> Expr | None:
    """The buffer of the first load at exactly loop index ``index`` in ``stmts``."""
    found: list[Expr] = []

    def see(x: Expr) -> Expr:
        if isinstance(x, Load) and isinstance(x.index, Sym) and x.index.name == index:
            found.append(x.ptr)
        return x
    for s in walk(stmts):
        if isinstance(s, (Decl, Set)):
            each_expr(s, see)
            if found:
                return found[0]
    return None


#: The field names of each loop-IR class (every field is an ``__init__`` argument):
#: ``dataclasses.fields`` and ``replace`` on every node were most of the loop passes' time.
_FIELDS: dict[type, tuple[str, ...]] = {}


def _field_names(cls: type) -> tuple[str, ...]:
    names = _FIELDS.get(cls)
    if names is None:
        names = _FIELDS[cls] = tuple(fl.name for fl in fields(cls))
    return names


def map_exprs(node: T, f: Callable[[Expr], Expr]) -> T:
    """``node`` rebuilt with ``f`` applied to each expression in it, innermost first."""
    if isinstance(node, tuple):
        return tuple(map_exprs(x, f) for x in node)  # type: ignore[return-value]
    if isinstance(node, (Expr, Decl, Set)):
        cls = type(node)
        rebuilt = cls(**{n: map_exprs(getattr(node, n), f) for n in _field_names(cls)})
        return f(rebuilt) if isinstance(rebuilt, Expr) else rebuilt
    return node


def each_expr(node: object, f: Callable[[Expr], object]) -> None:
    """Call ``f`` on each expression in ``node``, innermost first, as ``map_exprs``
    visits them, rebuilding nothing (for passes that only look)."""
    if isinstance(node, tuple):
        for x in node:
            each_expr(x, f)
    elif isinstance(node, (Expr, Decl, Set)):
        for name in _field_names(type(node)):
            each_expr(getattr(node, name), f)
        if isinstance(node, Expr):
            f(node)


def map_stmt(s: Stmt, f: Callable[[Expr], Expr]) -> Stmt:
    """Statement ``s`` rebuilt with ``f`` applied to every expression in it and in the
    statements it nests."""
    rebuilt = {}
    for name in _field_names(type(s)):
        value = getattr(s, name)
        if isinstance(value, (Expr, tuple)):
            value = map_exprs(value, f)
        elif isinstance(value, list):
            value = [map_stmt(t, f) for t in value]
        rebuilt[name] = value
    return type(s)(**rebuilt)  # type: ignore[return-value]
