"""Handlers of reductions: ``reduce_*`` over any axes, ``argmax``/``argmin``,
``cumsum``/``cumprod``; and the accumulators a run's reductions share with it.

OpenMP's max and min drop NaNs, so a float max/min keeps a flag of the NaNs it saw, as
NumPy's answer is NaN; a sum over leading axes (a bias gradient) runs row by row into a
vector of accumulators.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from ....ir.core import Eqn
from ....ir.types import float64
from ..build.threads import runs_parallel
from ..loops.ir import (
    Bin,
    Cast,
    Cond,
    Const,
    Decl,
    Expr,
    If,
    Int,
    Load,
    Loop,
    Set,
    Sym,
    ctype,
    element_at,
    linear,
    walk,
)
from ..plan.fusion import REDUCE
from .handlers import handles

if TYPE_CHECKING:
    from .lowering import Lowering


#: The C type of a float max/min's NaN flag: an integer as wide as the operand, so the
#: loop's SIMD lanes hold as many flags as values (a byte flag beside doubles made GCC
#: take 64 lanes a step and leave a 100-long row's last 36 elements scalar).
_FLAG = {"float32": "int32_t", "float64": "int64_t"}


def accumulator(lw: Lowering, eqn: Eqn) -> tuple[str, tuple[str, ...]]:
    """Declare a reduction's accumulator; its name and the OpenMP clauses combining
    its copies across SIMD lanes and threads.  OpenMP's max and min drop NaNs, so a
    float max/min also keeps a flag of the NaNs it saw (NumPy's answer is NaN)."""
    kind = REDUCE[eqn.op.name][0]
    dt = eqn.inputs[0].type.dtype
    acc = lw.fresh("a")
    if dt.is_bool:
        op = "|" if kind in ("sum", "max") else "&"
        lw.add(Decl(acc, "uint8_t", Int(int(op == "&"))))
        return acc, (f"reduction({op}:{acc})",)
    op = {"sum": "+", "prod": "*"}.get(kind, kind)
    if not dt.is_float:
        lim = "INT64" if dt.name == "int64" else "INT32"
        init = {"sum": "0", "prod": "1", "max": f"{lim}_MIN", "min": f"{lim}_MAX"}[kind]
        lw.add(Decl(acc, ctype(dt), Sym(init)))
        return acc, (f"reduction({op}:{acc})",)
    if kind in ("sum", "prod"):
        lw.add(Decl(acc, "double", Const(0.0 if kind == "sum" else 1.0, float64)))
        return acc, (f"reduction({op}:{acc})",)
    # max and min are exact: in the operand's own type, with no conversions
    lw.add(Decl(acc, ctype(dt), Const(-math.inf if kind == "max" else math.inf, dt)))
    lw.add(Decl(acc + "n", _FLAG[dt.name]))
    return acc, (f"reduction({op}:{acc})", f"reduction(|:{acc}n)")


def accumulate(lw: Lowering, eqn: Eqn, acc: str, v: Expr) -> None:
    kind = REDUCE[eqn.op.name][0]
    dt = eqn.inputs[0].type.dtype
    a = Sym(acc)
    if dt.is_bool:
        lw.add(Set(a, Bin("|" if kind in ("sum", "max") else "&", a, v)))
    elif kind in ("sum", "prod"):
        lw.add(Set(a, Bin("+" if kind == "sum" else "*", a, v)))
    else:  # a later equal value wins, as in NumPy's loops (0.0 vs -0.0); the
        # accumulator is compared first, x86's maxpd/minpd (one instruction, where
        # "e >= a ? e : a" is a compare and a blend): they differ only for a NaN e,
        # which the flag answers for
        e = Sym(lw.fresh("e"))
        lw.add(Decl(e.name, ctype(dt), v))
        lw.add(Set(a, Cond(Bin(">" if kind == "max" else "<", a, e), a, e)))
        if dt.is_float:
            lw.add(Set(Sym(acc + "n"), Bin("!=", e, e), "|="))


def reduced(lw: Lowering, eqn: Eqn, acc: str) -> Expr:
    """The reduction's value once its loop is over, in the result's type."""
    kind = REDUCE[eqn.op.name][0]
    value: Expr = Sym(acc)
    if eqn.inputs[0].type.dtype.is_float and kind in ("max", "min"):
        value = Cond(Sym(acc + "n"), Const(math.nan, float64), value)
    return Cast(ctype(eqn.outputs[0].type.dtype), value)


@handles(*REDUCE)
def op_reduce(lw: Lowering, eqn: Eqn) -> None:
    (out,) = eqn.outputs
    (x,) = eqn.inputs
    axes = eqn.params["axes"]
    lw.define(out)
    kept = [k for k in range(x.type.ndim) if k not in axes]
    dest = lw.vars[id(out)]
    if REDUCE[eqn.op.name][0] == "sum" and not x.type.dtype.is_bool and kept and \
            list(axes) == list(range(len(axes))) and out.type.size > 1:
        _sum_leading(lw, eqn, math.prod(x.type.shape[:len(axes)]), out.type.size)
        return

    def outer(oidx):
        acc, clauses = accumulator(lw, eqn)

        def inner(ridx):
            full, ko, kr = [], iter(oidx), iter(ridx)
            for k in range(x.type.ndim):
                full.append(next(kr) if k in axes else next(ko))
            with lw.axes_known(linear(x.type.shape, full), full, x.type.shape) as i:
                accumulate(lw, eqn, acc, lw.elem(x, i))

        extent = math.prod(x.type.shape[a] for a in axes)
        lw.nd_loop([x.type.shape[a] for a in axes], inner, collapse=True,
                   pragma=lw.kind(extent if not kept else 0), reductions=clauses)
        lw.add(Set(element_at(dest, out.type.shape, oidx), reduced(lw, eqn, acc)))

    start = len(lw.out)
    lw.nd_loop([x.type.shape[k] for k in kept], outer)
    rows = lw.out[start] if kept else None
    # rows of a long reduction on every thread, where nothing in them jumps out
    if isinstance(rows, Loop) and runs_parallel(x.type.size) and \
            out.type.size > 1 and all(isinstance(t, (Loop, Decl, Set))
                                      for t in walk(rows.body)):
        rows.pragma = "parallel"


def _sum_leading(lw: Lowering, eqn: Eqn, rows: int, cols: int) -> None:
    """A sum over leading axes (a bias gradient): row by row into a vector of
    accumulators, each row's elements contiguous and in SIMD lanes, rather than one
    strided column at a time."""
    (x,), (out,) = eqn.inputs, eqn.outputs
    dt = x.type.dtype
    acc_t = "double" if dt.is_float else ctype(dt)
    acc = lw.scratch(acc_t, cols)
    j, r = Sym("j"), lw.fresh("row")
    with lw.loop("j", cols, pragma="simd"):
        lw.add(Set(Load(acc, j), Int(0)))
    with lw.loop(r, rows), lw.loop("j", cols, pragma="simd"), \
            lw.axes_known(Sym(r) * cols + j, [Sym(r), j] if x.type.ndim == 2 else None,
                           x.type.shape) as i:
        lw.add(Set(Load(acc, j), Bin("+", Load(acc, j), lw.elem(x, i))))
    with lw.loop("j", cols, pragma="simd"):
        lw.add(Set(Load(Sym(lw.vars[id(out)]), j),
                   Cast(ctype(out.type.dtype), Load(acc, j))))


#: How an arg-reduction compares a candidate with the best so far.
_ARG_CMP = {"argmax": ">", "argmin": "<"}


@handles(*_ARG_CMP)
def op_arg_reduce(lw: Lowering, eqn: Eqn) -> None:
    cmp = _ARG_CMP[eqn.op.name]
    (out,) = eqn.outputs
    (x,) = eqn.inputs
    axis = eqn.params["axis"]
    lw.define(out)
    dest = lw.vars[id(out)]
    shape = x.type.shape
    kept = [shape[k] for k in range(len(shape)) if k != axis]

    def body(oidx):
        best, at = Sym(lw.fresh("b")), Sym(lw.fresh("k"))
        full = list(oidx)
        full.insert(axis, Int(0))
        lw.add(Decl(best.name, ctype(x.type.dtype), lw.elem(x, linear(shape, full))))
        lw.add(Decl(at.name, "int64_t", Int(0)))
        j = lw.fresh("j")
        full[axis] = Sym(j)
        v = lw.elem(x, linear(shape, full))
        take: Expr = Bin(cmp, v, best)
        if x.type.dtype.is_float:  # the first NaN wins
            take = Bin("&&", Bin("==", best, best), Bin("||", take, Bin("!=", v, v)))
        with lw.loop(j, shape[axis], start=Int(1)):
            lw.add(If(take, [Set(best, v), Set(at, Sym(j))]))
        lw.add(Set(element_at(dest, out.type.shape, oidx), at))

    lw.nd_loop(kept, body)


#: The operator of a cumulative op.
_CUMULATIVE = {"cumsum": "+", "cumprod": "*"}


@handles(*_CUMULATIVE)
def op_cumulative(lw: Lowering, eqn: Eqn) -> None:
    sym = _CUMULATIVE[eqn.op.name]
    (out,) = eqn.outputs
    (x,) = eqn.inputs
    axis, reverse = eqn.params["axis"], eqn.params["reverse"]
    lw.define(out)
    dest = lw.vars[id(out)]
    shape = x.type.shape
    kept = [shape[k] for k in range(len(shape)) if k != axis]

    def body(oidx):
        acc = Sym(lw.fresh("a"))
        lw.add(Decl(acc.name, ctype(x.type.dtype), Int(0 if sym == "+" else 1)))
        j = lw.fresh("j")
        full = list(oidx)
        full.insert(axis, Int(shape[axis] - 1) - Sym(j) if reverse else Sym(j))
        lin = linear(shape, full)
        with lw.loop(j, shape[axis]):
            lw.add(Set(acc, Bin(sym, acc, lw.elem(x, lin))))
            lw.add(Set(Load(Sym(dest), lin), acc))

    if out.type.size:
        lw.nd_loop(kept, body)
