"""The handler of ``conv``: a window matrix times the kernel (im2col) where the
convolution is large enough, else a loop nest summing in double (float) or the dtype.

Every output element is a sum over channels ``c`` and window offsets ``w`` of
``lhs'[n, c, y * stride + w * rhs_dilation] * rhs[o, c, w]`` (``lhs'`` padded and
dilated), so a matrix with a row per image and output position ``(n, y)`` and a column
per ``(c, w)`` times the kernel read as ``[o, (c, w)]`` is the convolution with the
output's channels last: one ``Gemm`` at the library's speed on every thread instead of
a scalar sum per element.  A loop nest fills the matrix (zeros where a window meets
padding or falls between dilated elements) and another puts the channels back in place.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import ExitStack
from typing import TYPE_CHECKING

from ....ir.core import Eqn
from ....ops.conv import dilated
from ..build.threads import runs_parallel
from ..loops.ir import (
    Bin,
    Cast,
    Const,
    Decl,
    Expr,
    Gemm,
    Int,
    Load,
    Set,
    Skip,
    Sym,
    ctype,
    linear,
)
from .handlers import handles
from .products import GEMM_INLINE_MAX_WORK

if TYPE_CHECKING:
    from .lowering import Lowering

#: Multiply-adds below which the loop nest stays (the matrix's copies would cost more
#: than the product saves).
MIN_WORK = 1 << 15
#: Elements of the window matrix above which the loop nest stays (its memory).
MAX_COLUMNS = 1 << 26


@handles("conv")
def op_conv(lw: Lowering, eqn: Eqn) -> None:
    lhs, rhs = eqn.inputs
    (out,) = eqn.outputs
    n, c = lhs.type.shape[:2]
    rows = n * math.prod(out.type.shape[2:])
    depth = c * math.prod(rhs.type.shape[2:])
    if lhs.type.dtype.is_float and out.type.size and \
            out.type.size * depth >= MIN_WORK and rows * depth <= MAX_COLUMNS:
        _as_product(lw, eqn, rows, depth)
    else:
        _direct(lw, eqn)


def _window_index(lw: Lowering, eqn: Eqn, ys: list[Expr], ws: list[Expr]) -> tuple:
    """The lhs index (after batch and channel) that window offset ``ws`` of output
    position ``ys`` reads, and the condition under which it falls on padding or between
    dilated elements instead."""
    lhs = eqn.inputs[0]
    p = eqn.params
    at: list[Expr] = []
    skip: Expr | None = None
    for d, (y, w) in enumerate(zip(ys, ws, strict=True)):
        t = lw.fresh("t")
        lo, ld = p["padding"][d][0], p["lhs_dilation"][d]
        lw.add(Decl(t, "int64_t", y * p["strides"][d] + w * p["rhs_dilation"][d] - lo))
        tv = Sym(t)
        out = Bin("||", Bin("<", tv, Int(0)), Bin(">=", tv, Int(dilated(lhs.type.shape[2 + d],
                                                                          ld))))
        if ld > 1:
            out = Bin("||", out, Bin("%", tv, Int(ld)))
        skip = out if skip is None else Bin("||", skip, out)
        at.append(Bin("/", tv, Int(ld)) if ld > 1 else tv)
    return at, skip


def _as_product(lw: Lowering, eqn: Eqn, rows: int, depth: int) -> None:
    lhs, rhs = eqn.inputs
    (out,) = eqn.outputs
    dt, ct = out.type.dtype, ctype(out.type.dtype)
    n, c = lhs.type.shape[:2]
    o, spatial, window = rhs.type.shape[0], out.type.shape[2:], rhs.type.shape[2:]
    x, k = lw.buf(lhs), lw.buf(rhs)
    cols = lw.scratch(ct, rows * depth)
    col_shape = (n, *spatial, c, *window)

    def fill(idx: list[Expr]) -> None:
        ys, ci, ws = idx[1:1 + len(spatial)], idx[1 + len(spatial)], idx[2 + len(spatial):]
        dest = Load(cols, linear(col_shape, idx))
        lw.add(Set(dest, Const(0, dt)))
        at, skip = _window_index(lw, eqn, ys, ws)
        if skip is not None:
            lw.add(Skip(skip))
        lw.add(Set(dest, Load(x, linear(lhs.type.shape, [idx[0], ci, *at]))))

    lw.nd_loop(col_shape, fill, pragma="parallel" if runs_parallel(rows * depth) else "")
    prod = lw.scratch(ct, rows * o)
    work = rows * o * depth
    lw.add(Gemm(dt, 1, rows, o, depth, cols, False, k, True, prod,
                work > GEMM_INLINE_MAX_WORK[False]))
    lw.define(out)
    dest = lw.buf(out)
    positions = math.prod(spatial)

    def back(idx: list[Expr]) -> None:  # [n, o, y] from [n, y, o]
        ni, oi, yi = idx
        lw.add(Set(Load(dest, (ni * o + oi) * positions + yi),
                   Load(prod, (ni * positions + yi) * o + oi)))

    lw.nd_loop((n, o, positions), back,
               pragma="parallel" if runs_parallel(out.type.size) else "")


def _direct(lw: Lowering, eqn: Eqn) -> None:
    """out[n, o, y] = sum over c, w of lhs'[n, c, y*stride + w*rhs_dilation] *
    rhs[o, c, w], where lhs' is lhs dilated and padded: padded position t + lo is
    dilated position t, an element of lhs when it is a multiple of lhs_dilation."""
    (out,) = eqn.outputs
    lhs, rhs = eqn.inputs
    lp, rp = lw.buf(lhs), lw.buf(rhs)
    dest = Sym(lw.define(out))
    if out.type.size == 0:
        return
    dt = lhs.type.dtype
    acc_t = "double" if dt.is_float else ctype(dt)

    def body(oidx: list[Expr]) -> None:
        acc = Sym(lw.fresh("a"))
        lw.add(Decl(acc.name, acc_t, Int(0)))

        def tap(at: list[Expr], ws: list[Expr]) -> None:
            x = Load(lp, linear(lhs.type.shape, [oidx[0], *at]))
            w = Load(rp, linear(rhs.type.shape, [oidx[1], *ws]))
            if dt.is_bool:
                lw.add(Set(acc, Bin("|", acc, Bin("&", x, w))))
            else:
                lw.add(Set(acc, Bin("+", acc, Bin("*", Cast(acc_t, x), w))))

        _taps(lw, eqn, oidx[2:], tap)
        lw.add(Set(Load(dest, linear(out.type.shape, oidx)), Cast(ctype(dt), acc)))

    lw.nd_loop(out.type.shape, body)


def _taps(lw: Lowering, eqn: Eqn, ys: list[Expr],
          tap: Callable[[list[Expr], list[Expr]], None]) -> None:
    """Loops over the channels and window positions of result position ``ys``,
    skipping the positions that fall on padding or between dilated elements;
    ``tap(lhs index, rhs index)`` (after the batch / output-channel index) adds the
    innermost statements."""
    lhs, rhs = eqn.inputs
    c = lw.fresh("c")
    with ExitStack() as nest:
        nest.enter_context(lw.loop(c, lhs.type.shape[1]))
        ws: list[Expr] = []
        for d in range(len(ys)):
            w = lw.fresh("w")
            nest.enter_context(lw.loop(w, rhs.type.shape[2 + d]))
            ws.append(Sym(w))
        at, skip = _window_index(lw, eqn, ys, ws)
        if skip is not None:
            lw.add(Skip(skip))
        tap([Sym(c), *at], [Sym(c), *ws])
