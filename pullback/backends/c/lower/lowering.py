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
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from typing import NamedTuple

from ....ir.core import Atom, Block, Eqn, Func, Lit, Module, Var
from ....ir.rewrite import free_vars
from ....ir.types import StackType, TensorType, float32
from ....passes.inline import is_recursive
from ..loops.ir import (
    PARALLEL_MIN,
    Addr,
    Alloc,
    Bin,
    Break,
    Call,
    Cast,
    Cond,
    Const,
    Copy,
    Decl,
    Expr,
    Failed,
    Fn,
    Forever,
    Free,
    If,
    Int,
    Load,
    Loop,
    LoopFunc,
    LoopModule,
    Move,
    Op,
    Param,
    Pointer,
    Print,
    Raise,
    Range,
    Runtime,
    Scope,
    Set,
    Stmt,
    Sym,
    Unsupported,
    as_expr,
    ctype,
    first_read,
    linear,
    strides,
)
from ..lower.lapack import LapackLowering
from ..lower.linalg import LinalgLowering
from ..lower.ops import MoreLowering
from ..lower.sizes import allocation_error
from ..lower.state import Buffers, Fused, KernelBody, OpenBlock, Owned
from ..plan.fusion import BINARY, REDUCE, UNARY, is_pointwise
from ..plan.module import ModulePlan

#: Elements of a float32 sum added in float32 before the block's sum goes to the double
#: accumulator, in SUM_LANES lanes (each adds 32 elements, four independent vector
#: chains); 10M-element sums measured 1.9 ms with a conversion per element, 1.2 ms in
#: blocks of 512 in 16 lanes (one thread, read bound 0.95 ms), 4% less in these blocks.
SUM_BLOCK = 2048
SUM_LANES = 64
#: Kernels reading a fused broadcast run by rows when rows are at least this long (SIMD
#: lanes to fill); shorter rows run flat, each axis index computed by division.
ROW_MIN = 16


def pointwise_expr(eqn: Eqn, operand: Callable[[Atom], Expr]) -> Expr:
    """One element of a pointwise equation's result, given its operands' elements."""
    name, ins = eqn.op.name, eqn.inputs
    if name in ("stop_gradient", "broadcast_in_dim"):  # a broadcast of a 0-d value
        return operand(ins[0])
    dt = ins[-1].type.dtype if name == "select" else ins[0].type.dtype
    out = eqn.outputs[0].type.dtype
    return Op(name, tuple(operand(x) for x in ins), dt, out)


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


class Lowering(MoreLowering, LinalgLowering, LapackLowering):
    PARALLEL_MIN = PARALLEL_MIN

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
        return "parallel simd" if n >= PARALLEL_MIN else "simd"

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
            by_rows = self.reads_broadcast([a])
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
        if self.in_kernel.locals is not None and id(a) in self.in_kernel.locals:
            return Sym(self.in_kernel.locals[id(a)])
        remap = self.fused.remaps.get(id(a))
        if remap is not None:
            return Load(self.buf(remap[0]), remap[1](index))
        fused = self.fused.exprs.get(id(a))
        if fused is None:
            return Load(self.buf(a), index)
        if self.in_kernel.locals is None:
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

    # -- memory -----------------------------------------------------------------------------

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
        s.owned[name] = Owned(last, v.type.dtype.name, v.type.size)

    def free(self, name: str) -> None:
        """The end of buffer ``name``'s life."""
        self.buffers.arena.pop(name, None)
        self.add(Free(name))

    def release(self, upto: int) -> None:
        """Free the open block's buffers read last at or before position ``upto``."""
        owned = self.scope.owned
        for name in [n for n, o in owned.items() if o.last <= upto]:
            del owned[name]
            self.free(name)

    def reuse(self, out: Var, lo: int, hi: int, names: Sequence[str] | None = None) -> bool:
        """Give ``out`` the buffer of a value of the same dtype and size that the open
        block owns and reads last between positions ``lo`` and ``hi`` (among ``names``
        when given): the caller computes ``out`` element by element from elements at
        the same index, so writing over that buffer is safe."""
        if id(out) in self.plan.dest or id(out) in self.plan.placed or out.type.shape == ():
            return False
        owned = self.scope.owned
        for name, o in owned.items():
            if lo <= o.last <= hi and o.dtype == out.type.dtype.name and \
                    o.size == out.type.size and (names is None or name in names) and \
                    name not in self.buffers.shifted:
                self.vars[id(out)] = name
                self.own(name, out)
                return True
        return False

    def dying(self, name: str | None) -> bool:
        """Whether the open block owns buffer ``name`` and reads it last here."""
        o = self.scope.owned.get(name)
        return o is not None and o.size >= 0 and o.last == self.scope.at

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

    def open_block(self, blk: Block, names: Sequence[str], owns: Sequence[bool],
                   adopt: Sequence[tuple[str, Var]] = ()) -> None:
        """Open ``blk``, bind its parameters to ``names``; it owns those marked in
        ``owns`` and the outer buffers in ``adopt`` (frees them after their last read
        or moves them to a result)."""
        s = OpenBlock(self.plan.blocks[id(blk)])
        self.buffers.scopes.append(s)
        self.bind(blk.params, names)
        for p, name, own in zip(blk.params, names, owns, strict=True):
            if own:
                self.own(name, p)
        reads = free_vars(blk) if adopt else []
        for name, v in adopt:
            self.own(name, v, max((s.plan.last.get(id(u), -1) for u in reads
                                   if self.vars.get(id(u)) == name), default=-1))
        self.release(-1)

    def close_block(self) -> None:
        """Free what the block still owns (its results have moved out)."""
        for name in self.buffers.scopes.pop().owned:
            self.free(name)

    # -- functions --------------------------------------------------------------------------

    def lower(self) -> LoopFunc:
        blk = self.func.block
        donated = self.mod.plan.donated.get(id(self.func), {})
        names = [f"p{k}" for k in range(len(blk.params))]
        for k in donated:  # a buffer of its own: writable, freed or moved out here
            dt = ctype(blk.params[k].type.dtype)
            names[k] = f"q{k}"
            self.add(Pointer(names[k], dt, Cast(f"{dt} *", Sym(f"p{k}"))))
        self.open_block(blk, names, [k in donated for k in range(len(blk.params))])
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
        for k, r in enumerate(blk.results):
            t = r.type
            if t.shape == ():
                self.add(Set(Load(Sym(f"r{k}"), Int(0)), self.scalar(r)))
            elif self.plan.dest.get(id(r)) != k:
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
                self.run(s.plan.runs[k])
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
        if self.scalar_element(eqn):
            return
        handler = getattr(self, "op_" + eqn.op.name, None)
        if handler is None:
            handler = self.elementwise if eqn.op.name in UNARY | BINARY else None
        if handler is None and eqn.op.name in REDUCE:
            handler = self.reduce
        if handler is None:
            raise Unsupported(f"the C backend has no code for {eqn.op.name} yet")
        handler(eqn)

    def scalar_element(self, eqn: Eqn) -> bool:
        """A one-element read (with its reshape to 0-d) as one load into a local, or a
        0-d value reshaped for a one-element update read as itself (``scalars.py``)."""
        reshape = self.plan.element_reads.get(id(eqn))
        if reshape is not None:
            x, *starts = eqn.inputs
            at = self._starts(x, starts, eqn.params["sizes"])
            name = self.define(reshape.outputs[0])
            self.add(Set(Sym(name), self.elem(x, linear(x.type.shape, at))))
            self.fused.absorbed.add(id(reshape))
            return True
        if eqn.op.name == "reshape" and id(eqn.outputs[0]) in self.plan.element_writes:
            x = eqn.inputs[0]
            self.fused.exprs[id(eqn.outputs[0])] = lambda i, x=x: self.scalar(x)
            return True
        return False

    # -- elementwise ------------------------------------------------------------------------

    def flat_loop(self, out: Var, expr: Callable[[Expr], Expr], by_rows: bool = False) -> None:
        """``out[i] = expr(i)`` over every element (a scalar assignment for 0-d), as a
        kernel by rows when ``expr`` reads a fused broadcast."""
        name = Sym(self.vars[id(out)])
        if out.type.shape == ():
            self.add(Set(name, expr(Int(0))))
            return
        with self.kernel(out.type.shape, by_rows=by_rows) as i:
            self.add(Set(Load(name, i), expr(i)))

    def reads_broadcast(self, atoms: Sequence[Atom]) -> bool:
        """Whether computing ``atoms`` where they are read reads a fused broadcast."""
        stack, seen = list(atoms), set()
        while stack:
            a = stack.pop()
            if id(a) in self.fused.broadcasts:
                return True
            if id(a) in self.fused.exprs and id(a) not in seen and id(a) in self.plan.producers:
                seen.add(id(a))
                stack.extend(self.plan.producers[id(a)].inputs)
        return False

    @contextmanager
    def kernel(self, shape: Sequence[int], fused: tuple[str, ...] = (),
               by_rows: bool = False) -> Iterator[Expr]:
        """A kernel over ``shape``, flat, or (``by_rows``) a loop over its rows whose body
        is a SIMD loop along its last axis: fused broadcasts then read their operands at
        the loops' indices, with no division.  Yields the element's linear index."""
        n = math.prod(shape)
        if not by_rows or len(shape) < 2 or shape[-1] < ROW_MIN:
            with self.loop("i", n, pragma=self.kind(n), fused=fused):
                yield Sym("i")
            return
        rows, cols, r = n // shape[-1], shape[-1], self.fresh("r")
        with self.loop(r, rows, pragma="parallel" if n >= PARALLEL_MIN else ""):
            axes: list[Expr] = []
            for k, st in enumerate(strides(shape[:-1])):
                axis = Bin("/", Sym(r), Int(st)) if st > 1 else Sym(r)
                axes.append(axis if k == 0 else Bin("%", axis, Int(shape[k])))
            with self.loop("c", cols, pragma="simd", fused=fused):
                i = Sym("i")
                self.add(Decl("i", "int64_t", Sym(r) * cols + Sym("c")))
                outer, self.in_kernel.axes = self.in_kernel.axes, (i, [*axes, Sym("c")])
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
        self.flat_loop(out, expr, self.reads_broadcast(reads))

    def elementwise(self, eqn: Eqn) -> None:
        self.pointwise(eqn.outputs[0], lambda i: pointwise_expr(
            eqn, lambda a: self.elem(a, i)), eqn.inputs)

    op_select = op_convert = op_stop_gradient = elementwise

    def run(self, run: list[Eqn]) -> None:
        """A run as one kernel, at the place of its first equation: each pointwise value
        is a local of the kernel body, stored (at the end of the body) only when read
        after the run and not computed again there; a stored value may take over the
        buffer of one the run reads last.  Each reduction accumulates in the same loop.
        Values only later loops need are computed there, not here."""
        s = self.scope
        first = run[0]
        n = (first.outputs[0] if is_pointwise(first) else first.inputs[0]).type.size
        stored = [e.outputs[0] for e in run if e.op.name not in REDUCE and
                  id(e.outputs[0]) not in self.plan.fusible and
                  s.plan.last.get(id(e.outputs[0]), -1) > s.at]
        needed, body = {id(v) for v in stored}, []
        for e in reversed(run):
            if e.op.name in REDUCE or id(e.outputs[0]) in needed:
                needed.update(id(a) for a in e.inputs)
                body.insert(0, e)
        for v in stored:
            target = self.plan.column_targets.get(id(v))
            if target is not None:  # stored straight into its column of the records
                if id(target[0]) not in self.vars:
                    self.define(target[0])
                self.buffers.in_columns.update((id(v), id(target[2])))
            elif not self.reuse(v, s.at, s.at):
                self.define(v)
        accs, clauses = {}, ()
        for e in body:
            if e.op.name in REDUCE:
                self.define(e.outputs[0])
                accs[id(e)], clause = self.accumulator(e)
                clauses += clause
        if not body:
            pass
        elif n > SUM_BLOCK and accs and all(
                e.op.name == "reduce_sum" and e.inputs[0].type.dtype.name == "float32"
                for e in body if id(e) in accs):
            # float32 sums add up a block at a time in float32 lanes, as NumPy's pairwise
            # sum does, and the blocks in double: no conversion per element
            # and the blocks start where the first array read is 64-byte aligned (a
            # NumPy array's data sits 16 bytes past a line; loads split across two
            # lines made a 2M-element sum 1.35x slower)
            b, at = self.fresh("b"), len(self.out)
            with self.loop(b, n, step=SUM_BLOCK, reductions=clauses,
                           pragma="parallel" if n >= PARALLEL_MIN else ""):
                part = {k: self.fresh("s") for k in accs}
                for name in part.values():
                    self.add(Decl(name, "float", Const(0.0, float32)))
                end = Sym(b) + SUM_BLOCK
                with self.loop("i", Cond(Bin("<", end, Int(n)), end, Int(n)),
                               start=Cond(Bin("<", Sym(b), Int(0)), Int(0), Sym(b)),
                               pragma="simd", fused=tuple(e.op.name for e in body),
                               reductions=(*(f"reduction(+:{p})" for p in part.values()),
                                           f"simdlen({SUM_LANES})")):
                    self.kernel_body(body, part, stored, Sym("i"))
                for k, name in part.items():
                    self.add(Set(Sym(accs[k]), Bin("+", Sym(accs[k]), Sym(name))))
            blocks = self.out[at]
            lead = first_read(blocks.body, "i")
            if lead is not None:
                blocks.start = Fn("pb_block_start", (lead, Int(SUM_BLOCK)))
        elif accs:
            with self.loop("i", n, pragma=self.kind(n), reductions=clauses,
                           fused=tuple(e.op.name for e in body)):
                self.kernel_body(body, accs, stored, Sym("i"))
        else:
            shape = first.outputs[0].type.shape
            with self.kernel(shape, tuple(e.op.name for e in body),
                             self.reads_broadcast([a for e in body for a in e.inputs])) as i:
                self.kernel_body(body, accs, stored, i)
        for e in run:
            out = e.outputs[0]
            if id(e) in accs:
                self.add(Set(Sym(self.vars[id(out)]), self.reduced(e, accs[id(e)])))
            elif id(out) in self.plan.fusible:  # computed again where read
                self.pointwise(out, lambda i, e=e: pointwise_expr(
                    e, lambda a: self.elem(a, i)))

    def kernel_body(self, body: list[Eqn], accs: dict[int, str], stored: list[Var],
                    i: Expr) -> None:
        """Element ``i`` of a run's kernel: its pointwise values as locals, reductions
        into ``accs``, the ``stored`` values written out."""
        self.in_kernel.locals = {}
        for e in body:
            v = e.outputs[0]
            if id(e) in accs:
                self.accumulate(e, accs[id(e)], self.elem(e.inputs[0], i))
            else:
                expr = pointwise_expr(e, lambda a: self.elem(a, i))
                self.in_kernel.locals[id(v)] = name = self.fresh("t")
                self.add(Decl(name, ctype(v.type.dtype), expr))
        for v in stored:
            if id(v) in self.buffers.in_columns:
                out, col, _ = self.plan.column_targets[id(v)]
                at = i * out.type.shape[-1] + col
                self.add(Set(Load(Sym(self.vars[id(out)]), at), Sym(self.in_kernel.locals[id(v)])))
                continue
            self.add(Set(Load(Sym(self.vars[id(v)]), i), Sym(self.in_kernel.locals[id(v)])))
        self.in_kernel.locals = None

    def op_random_bits(self, eqn: Eqn) -> None:
        (out,) = eqn.outputs
        (key,) = eqn.inputs
        self.define(out)
        self.flat_loop(out, lambda i: Fn("pb_splitmix", (self.scalar(key), i)))

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

    # -- control flow -------------------------------------------------------------------------

    def bind(self, params: Sequence[Var], names: Sequence[str]) -> None:
        for p, n in zip(params, names, strict=True):
            self.vars[id(p)] = n

    def sub_block(self, blk: Block, names: Sequence[str], dests: Sequence[Expr],
                  owns: Sequence[bool], adopt: Sequence[tuple[str, Var]] = ()) -> list[Stmt]:
        """The statements of ``blk`` with its parameters bound to ``names`` (owning those
        marked in ``owns``, and the outer buffers in ``adopt``), its results moved into
        ``dests``, and its own buffers freed."""
        with self.into([]) as body:
            self.open_block(blk, names, owns, adopt)
            self.block_body(blk)
            self.results_out(blk.results, dests)
            self.close_block()
        return body

    def declare_outputs(self, eqn: Eqn) -> list[Expr]:
        """Variables for a control op's results, owned by the enclosing block."""
        return [Sym(self.define(v, allocate=False)) for v in eqn.outputs]

    def op_cond(self, eqn: Eqn) -> None:
        """Each branch owns the buffers it reads that die at the cond."""
        pred, *xs = eqn.inputs
        outs = self.declare_outputs(eqn)
        args = [self.value_name(x) for x in xs]
        owns, adopt = self.hand_over(eqn, xs), self.hand_over_reads(eqn)
        then = self.sub_block(eqn.params["then"], args, outs, owns, adopt)
        orelse = self.sub_block(eqn.params["orelse"], args, outs, owns, adopt)
        self.add(If(self.scalar(pred), then, orelse))

    def value_name(self, a: Atom) -> str:
        """A name to bind a block parameter to (literals get a local; a value computed
        where it is read gets its buffer here)."""
        if isinstance(a, Var):
            if id(a) not in self.vars:
                self.buf(a)
            return self.vars[id(a)]
        name = self.fresh("c")
        if a.type.shape == ():
            self.add(Decl(name, ctype(a.type.dtype), self.scalar(a)))
        else:
            self.add(Pointer(name, ctype(a.type.dtype), Sym(self.mod.constant(a)), const=True))
        return name

    def carry_init(self, eqn: Eqn, xs: Sequence[Atom]) -> list[str]:
        """The loop's carried variables, which become its results: a carry the body
        passes through is a view of its operand, an operand dying here moves in, others
        are copied."""
        views = self.scope.plan.views
        moves = self.hand_over(eqn, [None if id(o) in views else x
                                     for o, x in zip(eqn.outputs, xs, strict=True)])
        names = []
        for x, out, move in zip(xs, eqn.outputs, moves, strict=True):
            t = x.type
            if id(out) in views or move:
                name = self.vars[id(out)] = self.vars[id(x)]
                if move:
                    self.own(name, out)
            else:
                name = self.define(out, allocate=False)
                if isinstance(t, StackType):
                    self.add(Move(Sym(name), Sym(self.vars[id(x)])))
                elif t.shape == ():
                    self.add(Set(Sym(name), self.scalar(x)))
                else:
                    self.add(Copy(name, self.buf(x), ctype(t.dtype), t.size))
            names.append(name)
        return names

    def loop_body(self, body: Block, carry: Sequence[str], prefix: Sequence[str] = ()) -> Scope:
        """One iteration: the body on the carried variables, owning the arrays it does
        not pass through (it updates them in place or frees them); then its results
        replace them (buffers it owns move in, others are copied)."""
        with self.into([]) as stmts:
            params = body.params[len(prefix):]
            passthrough = [r is p for r, p in zip(body.results, params, strict=True)]
            owns = [isinstance(p.type, TensorType) and p.type.shape != () and not s
                    for p, s in zip(params, passthrough, strict=True)]
            self.open_block(body, [*prefix, *carry], [False] * len(prefix) + owns)
            self.block_body(body)
            news = [self.fresh("n") for _ in carry]
            for n, r in zip(news, body.results, strict=True):
                t = r.type
                if isinstance(t, StackType):
                    self.add(Decl(n, "pb_tape *"))
                elif t.shape == ():
                    self.add(Decl(n, ctype(t.dtype)))
                else:
                    self.add(Pointer(n, ctype(t.dtype)))
            changed = [not s for s in passthrough]
            self.results_out([r for r, c in zip(body.results, changed, strict=True) if c],
                             [Sym(n) for n, c in zip(news, changed, strict=True) if c])
            self.close_block()
            for c, n, ch in zip(carry, news, changed, strict=True):
                if ch:
                    self.add(Move(Sym(c), Sym(n)))
        return Scope(stmts)

    def op_while_loop(self, eqn: Eqn) -> None:
        carry = self.carry_init(eqn, eqn.inputs)
        go = self.fresh("go")
        with self.into([]) as body:
            self.add(Decl(go, "uint8_t"))
            self.add(Scope(self.sub_block(eqn.params["cond"], carry, [Sym(go)],
                                          [False] * len(carry))))
            self.add(Break(Sym(go)))
            self.add(self.loop_body(eqn.params["body"], carry))
        self.add(Forever(body))

    def op_for_loop(self, eqn: Eqn) -> None:
        lo, hi, step, *xs = eqn.inputs
        carry = self.carry_init(eqn, xs)
        it = ctype(lo.type.dtype)
        i, h, s = self.fresh("it"), self.fresh("hi"), self.fresh("st")
        self.add(Decl(h, it, self.scalar(hi)))
        self.add(Decl(s, it, self.scalar(step)))
        self.add(If(Bin("==", Sym(s), Int(0)), [Raise(
            "ValueError", "range() arg 3 must not be zero", site=self.mod.site(eqn))]))
        self.add(Range(i, it, self.scalar(lo), Sym(h), Sym(s),
                       [self.loop_body(eqn.params["body"], carry, prefix=[i])]))

    def op_call(self, eqn: Eqn) -> None:
        callee = eqn.params["callee"]
        outs = self.declare_outputs(eqn)
        args: list[Expr] = []
        for x in eqn.inputs:
            t = x.type
            if isinstance(t, StackType):
                args.append(Sym(self.vars[id(x)]))
            elif t.shape == ():
                args.append(self.scalar(x))
            else:
                args.append(self.buf(x))
        donated = self.mod.plan.donated.get(id(callee), {})
        if donated:
            names = [self.vars.get(id(x)) if isinstance(x, Var) else None for x in eqn.inputs]
            for k in donated:  # hand the buffer over if it dies here, else a copy
                if names[k] is not None and names.count(names[k]) == 1 and \
                        self.dying(names[k]):
                    self.take(names[k])
                else:
                    t = eqn.inputs[k].type
                    tmp = self.fresh("m")
                    self.add(Copy(tmp, args[k], ctype(t.dtype), t.size, declare=True))
                    args[k] = Sym(tmp)
        args += [Addr(o) for o in outs]
        self.add(Call(self.mod.names[id(callee)], tuple(args)))

    def _inline_region(self, eqn: Eqn, region: str) -> None:
        outs = self.declare_outputs(eqn)
        args = [self.value_name(x) for x in eqn.inputs]
        self.add(Scope(self.sub_block(eqn.params[region], args, outs,
                                      self.hand_over(eqn, eqn.inputs),
                                      self.hand_over_reads(eqn))))

    def op_checkpoint(self, eqn: Eqn) -> None:
        self._inline_region(eqn, "body")

    def op_custom_jvp(self, eqn: Eqn) -> None:
        self._inline_region(eqn, "primal")

    def op_custom_vjp(self, eqn: Eqn) -> None:
        self._inline_region(eqn, "primal")

    # -- effects and stacks -----------------------------------------------------------------

    def op_debug_print(self, eqn: Eqn) -> None:
        """The operands' bytes go to the Python side, which formats and prints them in
        program order."""
        k = len(self.mod.prints)
        self.mod.prints.append(eqn)
        self.add(Print(k, tuple((self.buf(x), x.type.size, ctype(x.type.dtype))
                                for x in eqn.inputs)))

    def op_check(self, eqn: Eqn) -> None:
        ok, *values = eqn.inputs
        if any(v.type.shape != () for v in values) or len(values) > 8:
            raise Unsupported("a check with array operands")
        k = self.mod.site(eqn)
        self.add(If(Bin("==", self.scalar(ok), Int(0)), [Failed(k, tuple(
            (v.type.dtype.is_float, self.scalar(v)) for v in values))]))

    def op_stack_new(self, eqn: Eqn) -> None:
        name = Sym(self.define(eqn.outputs[0]))
        self.add(Set(name, Fn("pb_tape_new", (Sym("ctx"),))))
        self.add(If(Bin("==", name, Sym("NULL")), [Raise("MemoryError", "out of memory")]))

    @staticmethod
    def _tape_bytes(x: Atom) -> Expr:
        return Int(x.type.size * x.type.dtype.np.itemsize)

    def op_stack_push(self, eqn: Eqn) -> None:
        s, x = eqn.inputs
        name = self.define(eqn.outputs[0])
        t = x.type
        src = self.buf(x) if t.shape != () or isinstance(x, Lit) else Addr(self.scalar(x))
        tape = Sym(self.vars[id(s)])
        self.add(Runtime("pb_tape_push", (Sym("ctx"), tape, src, self._tape_bytes(x)),
                         ("", "")))
        self.add(Move(Sym(name), tape))

    def op_stack_pop(self, eqn: Eqn) -> None:
        (s,) = eqn.inputs
        tape, x = eqn.outputs
        tname = self.define(tape)
        xname = self.define(x)
        dst = Sym(xname) if x.type.shape != () else Addr(Sym(xname))
        self.add(Runtime("pb_tape_pop", (Sym("ctx"), Sym(self.vars[id(s)]), dst,
                                         self._tape_bytes(x)), ("", "")))
        self.add(Move(Sym(tname), Sym(self.vars[id(s)])))


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
