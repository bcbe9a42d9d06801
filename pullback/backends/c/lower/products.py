"""Handlers of ``dot_general``.

A ``dot_general`` that is a batch of row-major matrix products is one library call
(``Gemm``: the runtime's inline kernel, or BLAS above the crossover), computing the
product's epilogue (``plan.fusion.Epilogue``) as it stores; other products are loop
nests summing in double (float) or the dtype (integers).

The crossover is measured on the machine at hand (``tuning.measure_crossover``: the
kernel races OpenBLAS on ``tuning.CROSSOVER_LADDERS``), once, on a thread of its own
that the first product whose lowering it would change starts, and cached with the
other measurements; until then products go by ``GEMM_INLINE_MAX_WORK``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import TYPE_CHECKING

from ....ir.core import Atom, Eqn
from ....ir.types import DType
from ..build import crossover, tuning
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
    shallow_product,
)
from ..plan.fusion import as_gemm, eqn_axes, through_transpose
from .handlers import handles

if TYPE_CHECKING:
    from .lowering import Lowering

#: Products of at most this many rows (a vector or a few, times a matrix) and a row-major
#: B at least two vectors wide: OpenBLAS's tiles are wider than such an A (1x512x512: 89
#: us against the inline kernel's 42; 4x256x256: 25 against 14), so they stay inline up
#: to more work; the kernel's tiles are ``GEMM_TILE_ROWS`` rows, and one tile's products
#: (``tile``) cross over apart from two tiles' (``few``).
GEMM_FEW_ROWS = 8
GEMM_TILE_ROWS = 4


#: The most work (m*n*k per matrix) a product of each kind runs as the inline kernel
#: until the crossover is measured, and unless the race finds otherwise by a margin.
GEMM_INLINE_MAX_WORK = tuning.CROSSOVER_DEFAULTS


def product_kind(dt: DType, m: int, n: int, trans_b: bool) -> str:
    """Which crossover a product of ``m`` rows and ``n`` columns (B stored n x k where
    ``trans_b``) goes by (``tuning.CROSSOVER_LADDERS``)."""
    if trans_b or n < 2 * (64 // dt.np.itemsize):
        return "panels"
    if m <= GEMM_TILE_ROWS:
        return "tile"
    return "few" if m <= GEMM_FEW_ROWS else "direct"


def runs_on_blas(dt: DType, kind: str, work: int) -> bool:
    """Whether a float product of ``kind`` and ``work`` multiply-adds is a BLAS call:
    past the most work measured to run faster inline, or ``GEMM_INLINE_MAX_WORK`` until
    measured (the measurement is asked for only where its answer could matter)."""
    ladder = tuning.CROSSOVER_LADDERS[kind]
    least, most = (math.prod(shape[:3]) for shape in (ladder[0], ladder[-1]))
    if work <= least or work > most:
        return work > most
    return work > measured_crossover(dt).get(kind, GEMM_INLINE_MAX_WORK[kind])


def measured_crossover(dt: DType) -> Mapping[str, int]:
    """The most work each kind of product of ``dt`` runs inline on this machine, as
    measured; empty until then, the measurement started (``build/crossover.py``)."""
    return crossover.measured(dt.name)


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
    blas = dt.is_float and k > 0 and not shallow_product(m, k, trans_b) and \
        runs_on_blas(dt, product_kind(dt, m, n, trans_b), m * n * k)
    lw.add(Gemm(dt, batch, m, n, k, x, trans_a, y, trans_b, c, blas, alpha, addend))
