"""Handlers of ``dot_general``.

A ``dot_general`` that is a batch of row-major matrix products is one library call
(``Gemm``: the runtime's inline kernel, or BLAS above the crossover), computing the
product's epilogue (``plan.fusion.Epilogue``) as it stores; other products are loop
nests summing in double (float) or the dtype (integers).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ....ir.core import Atom, Eqn
from ..loops.ir import (
    Bin,
    Cast,
    Const,
    Decl,
    Expr,
    Gemm,
    Int,
    Op,
    Set,
    Sym,
    ctype,
    element_at,
    linear,
)
from ..plan.fusion import as_gemm, eqn_axes, through_transpose
from .handlers import handles

if TYPE_CHECKING:
    from .lowering import Lowering

#: The most work (m*n*k per matrix) a product runs as the runtime's inline kernel
#: (``pb_gemm_*``) rather than a BLAS call whose packing and dispatch cost more, by the
#: layout of B, measured against OpenBLAS on 1 and 2 threads: a row-major B at least two
#: vectors wide runs as register tiles straight from B; others are first copied in panels.
#: Re-measured for issue 24 (AMD EPYC, AVX2, OpenBLAS Haswell, CPU time of 100 calls):
#: from 16 rows up OpenBLAS is faster from 2^17 (32x64x64: 8.9 us against 10.6; the RNN's
#: 16x128x128: 10.8 against 12.7), the inline kernel up to 2^16 (16x64x64: 6.3 against 6.7).
GEMM_INLINE_MAX_WORK = {True: 1 << 16, False: 1 << 15}

#: Products of at most this many rows (a vector or a few, times a matrix) run as the inline
#: kernel up to ``GEMM_FEW_ROWS_MAX_WORK``: OpenBLAS's tiles are wider than such an A and
#: it took twice as long (1x512x512: 89 us against 42; 4x256x256: 25 against 14; even at 8).
GEMM_FEW_ROWS = 8
GEMM_FEW_ROWS_MAX_WORK = 1 << 20


#: dtypes the inline kernel computes; floats beyond its sizes go to BLAS.
_GEMM_DTYPES = {"float32", "float64", "int32", "int64"}


@handles("dot_general")
def op_dot_general(lw: Lowering, eqn: Eqn) -> None:
    (out,) = eqn.outputs
    axes = eqn_axes(eqn)
    ins = list(eqn.inputs)
    for side, x in enumerate(eqn.inputs):
        if id(x) in lw.fused.transposed:
            ins[side], perm = lw.fused.transposed[id(x)]
            axes[side] = through_transpose(eqn, side, perm)
    a, b = ins
    (lc, lb), (rc, rb) = axes
    lf = [k for k in range(a.type.ndim) if k not in lc and k not in lb]
    rf = [k for k in range(b.type.ndim) if k not in rc and k not in rb]
    gemm = as_gemm(a.type, b.type, [(lc, lb), (rc, rb)])
    if gemm is not None and a.type.dtype == b.type.dtype == out.type.dtype and \
            out.type.dtype.name in _GEMM_DTYPES and out.type.size:
        _gemm(lw, eqn, a, b, *gemm)
        return
    lw.define(out)
    dest = lw.vars[id(out)]
    dt = a.type.dtype
    acc_t = "double" if dt.is_float else ctype(dt)

    def body(oidx):
        nb, nl = len(lb), len(lf)
        bi, li, ri = oidx[:nb], oidx[nb:nb + nl], oidx[nb + nl:]
        acc = Sym(lw.fresh("a"))
        lw.add(Decl(acc.name, acc_t, Int(0)))

        def inner(cidx):
            ai, bj = [Int(0)] * a.type.ndim, [Int(0)] * b.type.ndim
            for ks, idx, into in ((lb, bi, ai), (rb, bi, bj), (lf, li, ai), (rf, ri, bj),
                                  (lc, cidx, ai), (rc, cidx, bj)):
                for k, i in zip(ks, idx, strict=True):
                    into[k] = i
            x = lw.elem(a, linear(a.type.shape, ai))
            y = lw.elem(b, linear(b.type.shape, bj))
            if dt.is_bool:
                lw.add(Set(acc, Bin("|", acc, Bin("&", x, y))))
            else:
                lw.add(Set(acc, Bin("+", acc, Bin("*", Cast(acc_t, x), y))))

        lw.nd_loop([a.type.shape[k] for k in lc], inner)
        lw.add(Set(element_at(dest, out.type.shape, oidx), Cast(ctype(out.type.dtype), acc)))

    lw.nd_loop(out.type.shape, body)


def _gemm(lw: Lowering, eqn: Eqn, a: Atom, b: Atom, batch: int, m: int, n: int, k: int,
          trans_a: bool, trans_b: bool) -> None:
    """A batch of row-major matrix products as one library call: the runtime's inline
    kernel, or BLAS ``gemm`` above the crossover.  A product with an epilogue
    computes the epilogue's result instead, into the addend's buffer when that dies
    at the epilogue's add right after the product."""
    (out,) = eqn.outputs
    dt = out.type.dtype
    x, y = lw.buf(a), lw.buf(b)
    alpha: Expr | None = None
    addend: Expr | None = None
    ep = lw.plan.epilogues.get(id(eqn))
    if ep is None:
        lw.define(out)
        c = lw.buf(out)
    else:
        for e in ep.before:
            lw.equation(e)
        lw.fused.absorbed |= {id(e) for e in (*ep.before, *ep.eqns)}
        out = ep.out
        if ep.scale is not None:
            alpha = lw.scalar(ep.scale)
        if ep.negate:
            alpha = Const(1, dt) if alpha is None else alpha
            alpha = Const(-alpha.value, dt) if isinstance(alpha, Const) else \
                Op("neg", (alpha,), dt, dt)
        addend = lw.buf(ep.addend)
        s = lw.scope
        name = addend.name if isinstance(addend, Sym) else None
        owned = s.owned.get(name)
        if owned is not None and ep.adjacent and owned.last == s.plan.pos[ep.at] and \
                owned.size == out.type.size and id(out) not in lw.plan.dest and \
                owned.takes(out) and \
                name not in (getattr(x, "name", None), getattr(y, "name", None)):
            lw.vars[id(out)] = name  # the sum takes the addend's buffer over
            lw.own(name, out)
            c = addend
        else:
            lw.define(out)
            c = lw.buf(out)
    lanes = 64 // dt.np.itemsize
    work_cap = GEMM_INLINE_MAX_WORK[not trans_b and n >= 2 * lanes]
    if m <= GEMM_FEW_ROWS and not trans_b and n >= 2 * lanes:
        work_cap = GEMM_FEW_ROWS_MAX_WORK
    blas = dt.is_float and k > 0 and m * n * k > work_cap
    lw.add(Gemm(dt, batch, m, n, k, x, trans_a, y, trans_b, c, blas, alpha, addend))
