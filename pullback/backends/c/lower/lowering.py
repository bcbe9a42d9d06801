"""Graph IR to loop IR: one loop function per IR function, control flow structured.

Values: a 0-d tensor is a scalar local; any other tensor is a buffer in row-major order,
or a view sharing one (a reshape, a loop's pass-through carry); a stack is a tape.  The
module's plan (``plan.module``, read only) says per block which equations run as one
kernel, which values are computed where they are read, and where each buffer is read
last; the lowering frees it there (``Free``).  What it decides as it goes (the open
blocks and the buffers they own, values waiting for their readers) is ``state``.  A
pointwise kernel, a ``dynamic_update_slice`` or a scatter whose operand dies there
writes its result into that operand's buffer.  A cond's branches and a loop's carried
variables take over operands that die at the cond or loop, so a loop body updates its
carried arrays in place.  The loop-IR passes (``loops.passes``) then rewrite what this makes.

An equation making an array larger than the machine's memory raises what NumPy raises
there, before any kernel runs over it (``sizes``).  Ops without loop IR yet raise
``Unsupported``, and the caller runs the function on the interpreter.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from types import MappingProxyType
from typing import NamedTuple

from ....ir.core import Atom, Block, Eqn, Func, Lit, Module, Var
from ....ir.rewrite import free_vars
from ....ir.types import StackType, TensorType
from ....passes.inline import is_recursive
from ..build.threads import runs_parallel
from ..loops.ir import (
    Addr,
    Alloc,
    Bin,
    Cast,
    Const,
    Copy,
    Decl,
    Expr,
    Free,
    Int,
    Load,
    Loop,
    LoopFunc,
    LoopModule,
    Move,
    Param,
    Pointer,
    Raise,
    Set,
    Stmt,
    Sym,
    Unsupported,
    as_expr,
    ctype,
    element_at,
    linear,
    same_but_ones,
    strides,
)
from ..plan.module import ModulePlan
from . import control, convolutions, elementwise, indexing, layout, library, products, reductions
from .elementwise import lower_run
from .handlers import HANDLERS
from .sizes import allocation_error
from .state import Buffers, Fused, KernelBody, OpenBlock, Owned

#: The modules whose handlers fill ``HANDLERS`` as they are imported, one per op family.
FAMILIES = (control, elementwise, layout, reductions, products, convolutions, indexing,
            library)

#: Kernels reading a fused broadcast run by rows when rows are at least this long (SIMD
#: lanes to fill); shorter rows run flat, each axis index computed by division.
ROW_MIN = 16


class ModuleLowering:
    """A module's loop functions, its constant tables, fault sites and prints."""

    def __init__(self, module: Module, plan: ModulePlan):
        self.module = module
        self.names = {id(f): f"pbf_{k}" for k, f in enumerate(module.funcs.values())}
        self.entry = module.main
        self.plan = plan
        self.consts: list[tuple[str, object, list]] = []
        #: fault sites: the equations (``check``s, and others that may fail at run time)
        #: whose number a fault records, so that its exception names their line
        self.checks: list[Eqn] = []
        self.sites: dict[int, int] = {}  # an equation's number among them, by its id
        self.prints: list[Eqn] = []

    def constant(self, lit: Lit) -> str:
        name = f"pbk_{len(self.consts)}"
        self.consts.append((name, lit.type.dtype, list(lit.value.reshape(-1))))
        return name

    def site(self, eqn: Eqn) -> int:
        """``eqn``'s number among the fault sites, added the first time it is asked."""
        k = self.sites.get(id(eqn))
        if k is None:
            k = self.sites[id(eqn)] = len(self.checks)
            self.checks.append(eqn)
        return k

    def lower(self) -> LoopModule:
        funcs = [Lowering(self, f).lower() for f in self.module.funcs.values()]
        return LoopModule(funcs, self.consts)


class Lowering:
    """One function's loop IR: names and statements, buffers and their ownership,
    kernels and blocks.  Each op's equations are lowered by its handler (``HANDLERS``,
    filled by the modules of ``FAMILIES``), which calls back into these."""

    def __init__(self, mod: ModuleLowering, func: Func):
        self.mod, self.func = mod, func
        self.plan = mod.plan.funcs[id(func)]  # read only
        self.entry = func is mod.entry
        self.out: list[Stmt] = []  # the statement list being filled
        self.vars: dict[int, str] = {}  # values' C names
        self.count = 0  # names made so far
        self.buffers = Buffers()
        self.fused = Fused()
        self.in_kernel = KernelBody()
        #: linear indices made from axis indices (``index_at``), by id: the index (kept
        #: alive), the axis indices, which ``axis_index`` reads back, and the shape
        self.made_at: dict[int, tuple[Expr, list[Expr], tuple[int, ...]]] = {}

    # -- statements and names -------------------------------------------------------------

    def fresh(self, prefix: str = "v") -> str:
        self.count += 1
        return f"{prefix}{self.count}"

    def add(self, stmt: Stmt) -> None:
        self.out.append(stmt)

    @contextmanager
    def into(self, body: list[Stmt]) -> Iterator[list[Stmt]]:
        """Statements added in this context go to ``body``."""
        outer, self.out = self.out, body
        try:
            yield body
        finally:
            self.out = outer

    @contextmanager
    def loop(self, var: str, stop: int | Expr, start: int | Expr = 0, pragma: str = "",
             reductions: tuple[str, ...] = (), fused: tuple[str, ...] = (),
             step: int = 1) -> Iterator[None]:
        """A counted loop whose body is what this context adds."""
        body: list[Stmt] = []
        self.add(Loop(var, as_expr(stop), body, as_expr(start), pragma, reductions, fused,
                      step))
        with self.into(body):
            yield

    @staticmethod
    def kind(n: int) -> str:
        """SIMD for every kernel; threads too for long ones."""
        return "parallel simd" if runs_parallel(n) else "simd"

    def scalar(self, a: Atom) -> Expr:
        """A 0-d atom's value."""
        if isinstance(a, Lit):
            return Const(a.value, a.type.dtype)
        return Sym(self.vars[id(a)])

    def buf(self, a: Atom) -> Expr:
        """A tensor atom's data pointer (a fused value is computed into a buffer here,
        where a consumer needs one)."""
        remap = self.fused.remaps.pop(id(a), None)
        if remap is not None:  # a consumer needs it as a buffer of its own
            self.define(a)
            self.flat_loop(a, lambda i: Load(self.buf(remap[0]), remap[1](i)))
        fused = self.fused.exprs.get(id(a))
        if fused is not None:
            by_rows = self.reads_by_axes([a])
            del self.fused.exprs[id(a)]
            self.define(a)
            self.flat_loop(a, fused, by_rows)
        if isinstance(a, Lit):
            if a.type.shape == ():
                return Addr(Const(a.value, a.type.dtype))
            return Sym(self.mod.constant(a))
        if a.type.shape == ():
            return Addr(Sym(self.vars[id(a)]))
        return Sym(self.vars[id(a)])

    def read_shifted(self, a: Atom) -> None:
        """Loops read ``a``'s buffer (if it has one) at other elements' positions."""
        name = self.vars.get(id(a))
        if name is not None:
            self.buffers.shifted.add(name)

    def elem(self, a: Atom, index: Expr) -> Expr:
        """Element ``index`` (a linear index) of a tensor atom; 0-d atoms broadcast; a
        fused value is its expression (in a kernel, a local computed once)."""
        if a.type.shape == ():
            return self.scalar(a)
        # a kernel's locals are its element's values: read elsewhere, a value is computed
        own = isinstance(index, Sym)
        if own and self.in_kernel.locals is not None and id(a) in self.in_kernel.locals:
            return Sym(self.in_kernel.locals[id(a)])
        remap = self.fused.remaps.get(id(a))
        if remap is not None:
            return Load(self.buf(remap[0]), remap[1](index))
        fused = self.fused.exprs.get(id(a))
        if fused is None:
            return Load(self.buf(a), index)
        if self.in_kernel.locals is None or not own:
            return fused(index)
        name = self.fresh("t")
        self.add(Decl(name, ctype(a.type.dtype), fused(index)))
        self.in_kernel.locals[id(a)] = name
        return Sym(name)

    def define(self, v: Var, allocate: bool = True) -> str:
        """Declare ``v``, owned by the open block: a scalar, a buffer (a new one, or
        NULL until a result moves in when not ``allocate``), or a tape."""
        name = self.fresh()
        self.vars[id(v)] = name
        t = v.type
        if isinstance(t, StackType):
            self.add(Decl(name, "pb_tape *"))
        elif t.shape == ():
            self.add(Decl(name, ctype(t.dtype)))
        elif id(v) in self.plan.dest:  # the entry's result, computed in the caller's buffer
            self.add(Pointer(name, ctype(t.dtype), Sym(f"r{self.plan.dest[id(v)]}")))
        elif id(v) in self.plan.placed:  # computed in place in the concatenation reading it
            out, offset = self.plan.placed[id(v)]
            if id(out) not in self.vars:
                self.define(out)
            self.add(Pointer(name, ctype(t.dtype), Sym(self.vars[id(out)]) + offset))
            self.buffers.placed.setdefault(id(out), set()).add(name)
        elif not allocate:
            self.add(Pointer(name, ctype(t.dtype)))
            self.own(name, v)
        else:
            alloc = Alloc(name, ctype(t.dtype), t.size, arena=self.entry and
                          len(self.buffers.scopes) == 1 and allocation_error(t) is None)
            self.add(alloc)
            if alloc.arena:
                self.buffers.arena[name] = alloc
            self.own(name, v)
        return name

    # -- buffers and their ownership --------------------------------------------------------

    @property
    def scope(self) -> OpenBlock:
        return self.buffers.scopes[-1]

    def own(self, name: str, v: Var | None = None, last: int | None = None) -> None:
        """The open block owns buffer ``name`` holding ``v`` (None: a scratch buffer of
        the equation being lowered) until position ``last`` (default: ``v``'s last
        read)."""
        s = self.scope
        if v is None:
            s.owned[name] = Owned(s.at)
            return
        if last is None:
            last = s.plan.last.get(id(s.plan.root.get(id(v), v)), s.at)
        was = s.owned.get(name)
        s.owned[name] = Owned(last, v.type.dtype.name, v.type.size,
                              kept=was is not None and was.kept)

    def free(self, name: str) -> None:
        """The end of buffer ``name``'s life (a buffer the caller handed over is only
        forgotten)."""
        self.buffers.arena.pop(name, None)
        o = self.scope.owned.get(name) if self.buffers.scopes else None
        if o is None or not o.kept:
            self.add(Free(name))

    def scratch(self, ct: str, count: int) -> Sym:
        """A temporary buffer of ``count`` elements, freed after the equation."""
        name = self.fresh("w")
        self.add(Alloc(name, ct, count))
        self.own(name)
        return Sym(name)

    def release(self, upto: int) -> None:
        """Free the open block's buffers read last at or before position ``upto``."""
        owned = self.scope.owned
        for name in [n for n, o in owned.items() if o.last <= upto]:
            self.free(name)
            del owned[name]

    def reuse(self, out: Var, lo: int, hi: int, names: Sequence[str] | None = None,
              shifted: bool = False) -> bool:
        """Give ``out`` the buffer of a value of the same dtype and size that the open
        block owns and reads last between positions ``lo`` and ``hi`` (among ``names``
        when given): the caller computes ``out`` element by element from elements at
        the same index, so writing over that buffer is safe.  ``shifted``: the caller
        reads any element before writing it (a one-element update), so a buffer that
        loops read at other positions is safe too."""
        if id(out) in self.plan.dest or id(out) in self.plan.placed or out.type.shape == ():
            return False
        owned = self.scope.owned
        for name, o in owned.items():
            if lo <= o.last <= hi and o.dtype == out.type.dtype.name and \
                    o.size == out.type.size and (names is None or name in names) and \
                    (shifted or name not in self.buffers.shifted) and o.takes(out):
                self.vars[id(out)] = name
                self.own(name, out)
                return True
        return False

    def dying(self, name: str | None) -> bool:
        """Whether the open block owns buffer ``name`` and reads it last here."""
        o = self.scope.owned.get(name)
        return o is not None and o.size >= 0 and o.last == self.scope.at and not o.kept

    def take(self, name: str) -> None:
        """Buffer ``name`` passes from the open block to a block nested in it (off the
        arena: the nested block frees it)."""
        del self.scope.owned[name]
        alloc = self.buffers.arena.pop(name, None)
        if alloc is not None:
            alloc.arena = False

    def hand_over(self, eqn: Eqn, xs: Sequence[Atom | None]) -> list[bool]:
        """Per operand in ``xs``: whether its buffer passes to ``eqn``'s blocks (it dies
        at ``eqn`` and is not read there another way)."""
        seen = [self.vars.get(id(a)) for a in eqn.inputs if isinstance(a, Var)]
        seen += [self.vars.get(id(v)) for inner in eqn.blocks() for v in free_vars(inner)]
        out = []
        for x in xs:
            name = self.vars.get(id(x)) if isinstance(x, Var) else None
            ok = self.dying(name) and seen.count(name) == 1
            if ok:
                self.take(name)
            out.append(ok)
        return out

    def hand_over_reads(self, eqn: Eqn) -> list[tuple[str, Var]]:
        """The buffers that ``eqn``'s blocks (each run at most once) read from outside
        and that die at ``eqn`` (not operands too): they pass to those blocks."""
        operands = {self.vars.get(id(a)) for a in eqn.inputs if isinstance(a, Var)}
        reads = {self.vars.get(id(v)): v for inner in eqn.blocks() for v in free_vars(inner)}
        taken = [(n, v) for n, v in reads.items() if n not in operands and self.dying(n)]
        for name, _ in taken:
            self.take(name)
        return taken

    # -- blocks and functions ---------------------------------------------------------------

    def bind(self, params: Sequence[Var], names: Sequence[str]) -> None:
        for p, n in zip(params, names, strict=True):
            self.vars[id(p)] = n

    def open_block(self, blk: Block, names: Sequence[str], owns: Sequence[bool],
                   adopt: Sequence[tuple[str, Var]] = (),
                   kept: Mapping[int, int] = MappingProxyType({})) -> None:
        """Open ``blk``, bind its parameters to ``names``; it owns those marked in
        ``owns`` and the outer buffers in ``adopt`` (frees them after their last read
        or moves them to a result); ``kept``: parameters the caller handed over (never
        freed), each with the id of the one value that may be computed into it."""
        s = OpenBlock(self.plan.blocks[id(blk)])
        self.buffers.scopes.append(s)
        self.bind(blk.params, names)
        for k, (p, name, own) in enumerate(zip(blk.params, names, owns, strict=True)):
            if own:
                self.own(name, p)
            if k in kept:
                s.owned[name].kept, s.owned[name].only = True, kept[k]
        reads = free_vars(blk) if adopt else []
        for name, v in adopt:
            self.own(name, v, max((s.plan.last.get(id(u), -1) for u in reads
                                   if self.vars.get(id(u)) == name), default=-1))
        self.release(-1)

    def close_block(self) -> None:
        """Free what the block still owns (its results have moved out)."""
        for name in list(self.scope.owned):
            self.free(name)
        self.buffers.scopes.pop()

    def lower(self) -> LoopFunc:
        """The function's loop IR (before the loop-IR passes)."""
        blk = self.func.block
        handed = self.mod.plan.entry_donated if self.entry else {}
        donated = handed or self.mod.plan.donated.get(id(self.func), {})
        names = [f"p{k}" for k in range(len(blk.params))]
        for k in donated:  # a buffer of its own: writable, freed or moved out here
            dt = ctype(blk.params[k].type.dtype)
            names[k] = f"q{k}"
            self.add(Pointer(names[k], dt, Cast(f"{dt} *", Sym(f"p{k}"))))
        self.open_block(blk, names, [k in donated for k in range(len(blk.params))],
                        kept={j: id(blk.results[k]) for j, k in handed.items()})
        self.block_body(blk)
        if self.entry:
            self.entry_results(blk)
        else:
            self.results_out(blk.results, [Load(Sym(f"r{k}"), Int(0))
                                           for k in range(len(blk.results))])
        self.close_block()
        params = [Param(f"p{k}", t) for k, t in enumerate(self.func.in_types)]
        params += [Param(f"r{k}", t, out=True) for k, t in enumerate(self.func.out_types)]
        return LoopFunc(self.mod.names[id(self.func)], params, self.out, self.entry,
                        recursive=is_recursive(self.func))

    def entry_results(self, blk: Block) -> None:
        """The entry function's results: arrays computed in place need nothing, others
        are copied into the caller's buffers; scalars are stored."""
        handed = {k: f"q{j}" for j, k in self.mod.plan.entry_donated.items()}
        for k, r in enumerate(blk.results):
            t = r.type
            if t.shape == ():
                self.add(Set(Load(Sym(f"r{k}"), Int(0)), self.scalar(r)))
            elif self.plan.dest.get(id(r)) != k and (
                    k not in handed or self.vars.get(id(r)) != handed[k]):
                self.add(Copy(f"r{k}", self.buf(r), ctype(t.dtype), t.size, fresh=False))

    def results_out(self, results: Sequence[Atom], dests: Sequence[Expr]) -> None:
        """Move or copy a block's ``results`` into ``dests`` while the block is open;
        moved buffers leave its ownership."""
        owned = self.scope.owned
        moved = []
        staged: list[Expr] = []
        for r in results:
            t = r.type
            if isinstance(t, StackType):
                staged.append(Sym(self.vars[id(r)]))
                continue
            if t.shape == ():
                staged.append(self.scalar(r))
                continue
            name = self.vars.get(id(r)) if isinstance(r, Var) else None
            if name in owned and name not in moved:
                moved.append(name)
                staged.append(Sym(name))
            else:
                tmp = self.fresh("m")
                self.add(Copy(tmp, self.buf(r), ctype(t.dtype), t.size, declare=True))
                staged.append(Sym(tmp))
        for name in moved:
            del owned[name]
        for dest, value in zip(dests, staged, strict=True):
            self.add(Move(dest, value))

    def block_body(self, blk: Block) -> None:
        """The open block's equations, each buffer freed after its last read."""
        s = self.scope
        later = {id(e) for run in s.plan.runs.values() for e in run[1:]}
        for k, eqn in enumerate(blk.eqns):
            s.at = k if k in s.plan.runs else s.plan.pos[k]
            if k in s.plan.runs:
                self.refuse_impossible(s.plan.runs[k])
                lower_run(self, s.plan.runs[k])
            elif id(eqn) not in later and id(eqn) not in self.fused.absorbed:
                self.refuse_impossible([eqn])
                self.equation(eqn)
            self.release(k)

    def refuse_impossible(self, eqns: Sequence[Eqn]) -> None:
        """Where equations make an array NumPy could not allocate on this machine, raise
        what NumPy raises (``sizes``) before computing them: fused, it would be a loop
        over more elements than memory holds, running for hours."""
        for eqn in eqns:
            for out in eqn.outputs:
                fault = allocation_error(out.type) if isinstance(out.type, TensorType) \
                    else None
                if fault is not None:
                    self.add(Raise(*fault, site=self.mod.site(eqn)))
                    return

    def equation(self, eqn: Eqn) -> None:
        """One equation's loop IR, by the handler of its op."""
        handler = HANDLERS.get(eqn.op.name)
        if handler is None:
            raise Unsupported(f"the C backend has no code for {eqn.op.name} yet")
        handler(self, eqn)

    # -- kernels ------------------------------------------------------------------------------

    def flat_loop(self, out: Var, expr: Callable[[Expr], Expr], by_rows: bool = False) -> None:
        """``out[i] = expr(i)`` over every element (a scalar assignment for 0-d), as a
        kernel by rows when ``expr`` reads a fused broadcast."""
        name = Sym(self.vars[id(out)])
        if out.type.shape == ():
            self.add(Set(name, expr(Int(0))))
            return
        with self.kernel(out.type.shape, by_rows=by_rows) as i:
            self.add(Set(Load(name, i), expr(i)))

    def reads_by_axes(self, atoms: Sequence[Atom]) -> bool:
        """Whether computing ``atoms`` where they are read reads a fused value that reads
        the kernel's axis indices (``Fused.by_axes``)."""
        stack, seen = list(atoms), set()
        while stack:
            a = stack.pop()
            if id(a) in self.fused.by_axes:
                return True
            if id(a) in self.fused.exprs and id(a) not in seen and id(a) in self.plan.producers:
                seen.add(id(a))
                stack.extend(self.plan.producers[id(a)].inputs)
        return False

    @contextmanager
    def kernel(self, shape: Sequence[int], fused: tuple[str, ...] = (),
               by_rows: bool = False) -> Iterator[Expr]:
        """A kernel over ``shape``, flat, or (``by_rows``) a loop over its rows whose body
        is a SIMD loop along its last axis: fused broadcasts and slices then read their
        operands at the loops' indices, with no division (a gather per lane, as GCC
        vectorises ``i / 256 * 1024 + i % 256``).  Yields the element's linear index."""
        n = math.prod(shape)
        if not by_rows or len(shape) < 2 or shape[-1] < ROW_MIN:
            with self.loop("i", n, pragma=self.kind(n), fused=fused):
                yield Sym("i")
            return
        rows, cols, r = n // shape[-1], shape[-1], self.fresh("row")
        with self.loop(r, rows, pragma="parallel" if runs_parallel(n) else ""):
            axes: list[Expr] = []
            for k, st in enumerate(strides(shape[:-1])):
                axis = Bin("/", Sym(r), Int(st)) if st > 1 else Sym(r)
                axes.append(axis if k == 0 else Bin("%", axis, Int(shape[k])))
            with self.loop("c", cols, pragma="simd", fused=fused):
                i = Sym("i")
                self.add(Decl("i", "int64_t", Sym(r) * cols + Sym("c")))
                outer = self.in_kernel.axes
                self.in_kernel.axes = (i, [*axes, Sym("c")], tuple(shape))
                try:
                    yield i
                finally:
                    self.in_kernel.axes = outer

    def pointwise(self, out: Var, expr: Callable[[Expr], Expr],
                  reads: Sequence[Atom] = ()) -> None:
        """``out[i] = expr(i)`` (over a dying operand's buffer if one fits), or, when
        ``out`` is fused into its consumers, just remember ``expr`` for them to compute
        in their own loops."""
        if id(out) in self.plan.fusible:
            self.fused.exprs[id(out)] = expr
            return
        if not self.reuse(out, self.scope.at, self.scope.at):
            self.define(out)
        self.flat_loop(out, expr, self.reads_by_axes(reads))

    def nd_loop(self, shape: Sequence[int], body: Callable[[list[Expr]], None],
                collapse: bool = False, pragma: str = "",
                reductions: tuple[str, ...] = ()) -> None:
        """Nested loops over ``shape`` (the outermost carrying ``pragma`` and
        ``reductions``); ``body(indices)`` adds the innermost statements.
        ``collapse``: one flat loop whose indices are derived."""
        if not shape:
            body([])
            return
        if collapse and len(shape) > 1:
            flat = self.fresh("f")
            with self.loop(flat, Int(math.prod(shape)), pragma=pragma, reductions=reductions):
                idx: list[Expr] = []
                for k, st in enumerate(strides(shape)):
                    name = self.fresh("i")
                    self.add(Decl(name, "int64_t", Bin("%", Bin("/", Sym(flat), Int(st)),
                                                       Int(shape[k]))))
                    idx.append(Sym(name))
                body(idx)
            return
        names = [self.fresh("i") for _ in shape]
        with ExitStack() as nest:
            for k, (i, d) in enumerate(zip(names, shape, strict=True)):
                nest.enter_context(self.loop(i, d, pragma=pragma if k == 0 else "",
                                             reductions=reductions if k == 0 else ()))
            body([Sym(i) for i in names])


    def gather_loop(self, out: Var, source: Atom,
                    index_of: Callable[[list[Expr]], list[Expr]]) -> None:
        """``out[i] = source[index_of(i)]`` over ``out``'s shape."""
        self.define(out)
        if out.type.size == 0:
            return
        dest, shape = self.vars[id(out)], out.type.shape
        self.nd_loop(shape, lambda idx: self.add(Set(element_at(dest, shape, idx), self.elem(
            source, linear(source.type.shape, index_of(idx))))))

    @contextmanager
    def axes_known(self, index: Expr, axes: list[Expr] | None,
                   shape: Sequence[int]) -> Iterator[Expr]:
        """In this context, element ``index`` (a linear index) of the loop's values, of
        ``shape``, is at axis indices ``axes`` (when given), which fused broadcasts and
        slices read instead of dividing ``index``."""
        outer = self.in_kernel.axes
        if axes is not None:
            self.in_kernel.axes = (index, axes, tuple(shape))
        try:
            yield index
        finally:
            self.in_kernel.axes = outer

    def index_at(self, shape: Sequence[int], axes: list[Expr]) -> Expr:
        """The linear index of the element at ``axes`` of an array of ``shape``, which
        ``axis_index`` maps back to ``axes`` (a slice of a slice or of a window reads
        its operand's operand with no division)."""
        index = linear(shape, axes)
        self.made_at[id(index)] = (index, axes, tuple(shape))
        return index

    def axis_index(self, shape: Sequence[int], axis: int, index: Expr) -> Expr:
        """The index along ``axis`` of element ``index`` (a linear index) of an array of
        ``shape``: the kernel's own axis index when ``index`` is its element's and the
        kernel runs over ``shape`` up to axes of one (a reshape reads at the same linear
        index) or ``index`` was made by ``index_at``, else arithmetic."""
        if shape[axis] == 1:
            return Int(0)
        known = self.in_kernel.axes
        if known is None or index is not known[0]:
            known = self.made_at.get(id(index))
        if known is not None and same_but_ones(shape, known[2]):
            # the same array but for axes of one (a slice read through its reshape)
            mine = [k for k, d in enumerate(shape) if d != 1]
            theirs = [k for k, d in enumerate(known[2]) if d != 1]
            return known[1][theirs[mine.index(axis)]]
        stride = math.prod(shape[axis + 1:])
        along = Bin("/", index, Int(stride)) if stride > 1 else index
        return along if math.prod(shape[:axis]) == 1 else Bin("%", along, Int(shape[axis]))


class LoweredModule(NamedTuple):
    """A module in loop IR (the entry is ``pbf_0``), its fault sites and its prints,
    each in the order of their ids."""

    loops: LoopModule
    checks: list[Eqn]
    prints: list[Eqn]


def lower_module(module: Module, plan: ModulePlan) -> LoweredModule:
    """``module`` in loop IR, as ``plan`` decided."""
    low = ModuleLowering(module, plan)
    return LoweredModule(low.lower(), low.checks, low.prints)
