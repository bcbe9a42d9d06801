"""Handlers of elementwise ops, and fusion's runs as kernels.

A pointwise value is a loop over its elements, or, fused, an expression its readers
compute in their own loops (``Lowering.pointwise``).  A run (``plan.fusion``) is one
loop computing each of its equations per element: pointwise values are locals of the
loop body, reductions accumulate in the same loop.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from ....ir.core import Atom, Eqn, Var
from ....ir.types import float32
from ..build.threads import runs_parallel
from ..loops.ir import (
    Bin,
    Cond,
    Const,
    Decl,
    Expr,
    Fn,
    Int,
    Load,
    Op,
    Set,
    Sym,
    ctype,
    first_read,
)
from ..plan.fusion import BINARY, REDUCE, UNARY, is_pointwise
from .handlers import handles
from .reductions import accumulate, accumulator, reduced

if TYPE_CHECKING:
    from .lowering import Lowering

#: Elements of a float32 sum added in float32 before the block's sum goes to the double
#: accumulator, in SUM_LANES lanes (each adds 32 elements, four independent vector
#: chains); 10M-element sums measured 1.9 ms with a conversion per element, 1.2 ms in
#: blocks of 512 in 16 lanes (one thread, read bound 0.95 ms), 4% less in these blocks.
SUM_BLOCK = 2048
SUM_LANES = 64


def pointwise_expr(eqn: Eqn, operand: Callable[[Atom], Expr]) -> Expr:
    """One element of a pointwise equation's result, given its operands' elements."""
    name, ins = eqn.op.name, eqn.inputs
    if name in ("stop_gradient", "broadcast_in_dim"):  # a broadcast of a 0-d value
        return operand(ins[0])
    dt = ins[-1].type.dtype if name == "select" else ins[0].type.dtype
    out = eqn.outputs[0].type.dtype
    return Op(name, tuple(operand(x) for x in ins), dt, out)



@handles(*UNARY, *BINARY, "select", "convert", "stop_gradient")
def op_elementwise(lw: Lowering, eqn: Eqn) -> None:
    lw.pointwise(eqn.outputs[0], lambda i: pointwise_expr(
        eqn, lambda a: lw.elem(a, i)), eqn.inputs)


def lower_run(lw: Lowering, run: Sequence[Eqn]) -> None:
    """A run as one kernel, at the place of its first equation: each pointwise value
    is a local of the kernel body, stored (at the end of the body) only when read
    after the run and not computed again there; a stored value may take over the
    buffer of one the run reads last.  Each reduction accumulates in the same loop.
    Values only later loops need are computed there, not here."""
    s = lw.scope
    first = run[0]
    n = (first.outputs[0] if is_pointwise(first) else first.inputs[0]).type.size
    stored = [e.outputs[0] for e in run if e.op.name not in REDUCE and
              id(e.outputs[0]) not in lw.plan.fusible and
              s.plan.last.get(id(e.outputs[0]), -1) > s.at]
    needed, body = {id(v) for v in stored}, []
    for e in reversed(run):
        if e.op.name in REDUCE or id(e.outputs[0]) in needed:
            needed.update(id(a) for a in e.inputs)
            body.insert(0, e)
    for v in stored:
        target = lw.plan.column_targets.get(id(v))
        if target is not None:  # stored straight into its column of the records
            if id(target[0]) not in lw.vars:
                lw.define(target[0])
            lw.buffers.in_columns.update((id(v), id(target[2])))
        elif not lw.reuse(v, s.at, s.at):
            lw.define(v)
    accs, clauses = {}, ()
    for e in body:
        if e.op.name in REDUCE:
            lw.define(e.outputs[0])
            accs[id(e)], clause = accumulator(lw, e)
            clauses += clause
    if not body:
        pass
    elif n > SUM_BLOCK and accs and all(
            e.op.name == "reduce_sum" and e.inputs[0].type.dtype.name == "float32"
            for e in body if id(e) in accs):
        _block_sums(lw, body, accs, stored, clauses, n)
    elif accs:
        with lw.loop("i", n, pragma=lw.kind(n), reductions=clauses,
                     fused=tuple(e.op.name for e in body)):
            _kernel_body(lw, body, accs, stored, Sym("i"))
    else:
        shape = first.outputs[0].type.shape
        with lw.kernel(shape, tuple(e.op.name for e in body),
                       lw.reads_by_axes([a for e in body for a in e.inputs])) as i:
            _kernel_body(lw, body, accs, stored, i)
    for e in run:
        out = e.outputs[0]
        if id(e) in accs:
            lw.add(Set(Sym(lw.vars[id(out)]), reduced(lw, e, accs[id(e)])))
        elif id(out) in lw.plan.fusible:  # computed again where read
            lw.pointwise(out, lambda i, e=e: pointwise_expr(
                e, lambda a: lw.elem(a, i)))


def _block_sums(lw: Lowering, body: Sequence[Eqn], accs: dict[int, str], stored: list[Var],
                clauses: tuple[str, ...], n: int) -> None:
    """A run whose reductions are all float32 sums: each block of SUM_BLOCK elements adds
    up in float32 lanes, as NumPy's pairwise sum does, and the blocks in double (no
    conversion per element); the blocks start where the first array read is 64-byte
    aligned (a NumPy array's data sits 16 bytes past a line; loads split across two lines
    made a 2M-element sum 1.35x slower)."""
    b, at = lw.fresh("b"), len(lw.out)
    with lw.loop(b, n, step=SUM_BLOCK, reductions=clauses,
                 pragma="parallel" if runs_parallel(n) else ""):
        part = {k: lw.fresh("s") for k in accs}
        for name in part.values():
            lw.add(Decl(name, "float", Const(0.0, float32)))
        end = Sym(b) + SUM_BLOCK
        with lw.loop("i", Cond(Bin("<", end, Int(n)), end, Int(n)),
                     start=Cond(Bin("<", Sym(b), Int(0)), Int(0), Sym(b)),
                     pragma="simd", fused=tuple(e.op.name for e in body),
                     reductions=(*(f"reduction(+:{p})" for p in part.values()),
                                   f"simdlen({SUM_LANES})")):
            _kernel_body(lw, body, part, stored, Sym("i"))
        for k, name in part.items():
            lw.add(Set(Sym(accs[k]), Bin("+", Sym(accs[k]), Sym(name))))
    blocks = lw.out[at]
    lead = first_read(blocks.body, "i")
    if lead is not None:
        blocks.start = Fn("pb_block_start", (lead, Int(SUM_BLOCK)))


def _kernel_body(lw: Lowering, body: list[Eqn], accs: dict[int, str], stored: list[Var],
                i: Expr) -> None:
    """Element ``i`` of a run's kernel: its pointwise values as locals, reductions
    into ``accs``, the ``stored`` values written out."""
    lw.in_kernel.locals = {}
    for e in body:
        v = e.outputs[0]
        if id(e) in accs:
            accumulate(lw, e, accs[id(e)], lw.elem(e.inputs[0], i))
        else:
            expr = pointwise_expr(e, lambda a: lw.elem(a, i))
            lw.in_kernel.locals[id(v)] = name = lw.fresh("t")
            lw.add(Decl(name, ctype(v.type.dtype), expr))
    for v in stored:
        if id(v) in lw.buffers.in_columns:
            out, col, _ = lw.plan.column_targets[id(v)]
            at = i * out.type.shape[-1] + col
            lw.add(Set(Load(Sym(lw.vars[id(out)]), at), Sym(lw.in_kernel.locals[id(v)])))
            continue
        lw.add(Set(Load(Sym(lw.vars[id(v)]), i), Sym(lw.in_kernel.locals[id(v)])))
    lw.in_kernel.locals = None


@handles("random_bits")
def op_random_bits(lw: Lowering, eqn: Eqn) -> None:
    (out,) = eqn.outputs
    (key,) = eqn.inputs
    lw.define(out)
    lw.flat_loop(out, lambda i: Fn("pb_splitmix", (lw.scalar(key), i)))
