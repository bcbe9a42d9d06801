"""The handler of ``conv``: a window matrix times the kernel (im2col) where the
convolution is large enough, else a loop nest summing in double (float) or the dtype.

Every output element is a sum over channels ``c`` and window offsets ``w`` of
``lhs'[n, c, y * stride + w * rhs_dilation] * rhs[o, c, w]`` (``lhs'`` padded and
dilated), so a matrix with a row per image and output position ``(n, y)`` and a column
per ``(c, w)`` times the kernel read as ``[o, (c, w)]`` is the convolution with the
output's channels last: a ``Gemm`` at the library's speed instead of a scalar sum per
element.  The matrix is made and multiplied a block at a time, small enough to stay in
the second-level cache from its filling to BLAS's packing of it (whole, a weight
gradient's 9-19 MB matrix went to memory and back twice): blocks of images, each
product written in the output's layout, or, where the matrix has more columns than rows
(a weight gradient: a column per image and window position), blocks of channels whose
products add up.  Each block's images are first copied padded and dilated, so the loops
filling the matrix test nothing and copy runs of an image row.

On several threads, where the convolution is long enough for a loop of its window
matrix's length to run on every thread (``runs_parallel``), the blocks run at once, one a
thread, each with scratch of its own and its product on that thread alone (OpenBLAS set
to one thread meanwhile): on two cores a block's product is too small for BLAS's threads
to share (the digits CNN's 43 products 64x192x288: 3.8 ms on BLAS's two threads, 2.2-2.5
ms as blocks on two threads; 4.2 ms on one; AMD EPYC, 2 cores, AVX2, SCHED_FIFO), and the
loops filling and emptying a block, too short for threads one at a time, then share the
cores too.  A channel block's products add up per thread, the threads' sums at the end.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import ExitStack
from typing import TYPE_CHECKING, NamedTuple

from ....ir.core import Eqn
from ....ir.types import DType
from ....ops.conv import dilated
from ..build.compiler import BLAS_PREFIX
from ..build.threads import runs_parallel
from ..build.units import team_size
from ..loops.ir import (
    Bin,
    Cast,
    Const,
    Decl,
    Expr,
    Fn,
    Gemm,
    Int,
    Load,
    Runtime,
    Set,
    Skip,
    Sym,
    ctype,
    linear,
)
from .handlers import handles
from .products import runs_on_blas

if TYPE_CHECKING:
    from .lowering import Lowering

#: Multiply-adds below which the loop nest stays (the matrix's copies would cost more
#: than the product saves).
MIN_WORK = 1 << 15
#: Elements of the smallest block's window matrix (one image's, or one channel's) above
#: which the loop nest stays (its memory).
MAX_COLUMNS = 1 << 26
#: Bytes of the window matrix filled and multiplied at a time: a block that stays in the
#: second-level cache (512 KiB to 1 MiB a core) from its filling to BLAS's packing of it.
BLOCK_BYTES = 256 << 10


@handles("conv")
def op_conv(lw: Lowering, eqn: Eqn) -> None:
    lhs, rhs = eqn.inputs
    (out,) = eqn.outputs
    n, c = lhs.type.shape[:2]
    positions, taps = math.prod(out.type.shape[2:]), math.prod(rhs.type.shape[2:])
    rows, depth = n * positions, c * taps
    smallest = positions * depth if rows >= depth else rows * taps
    if lhs.type.dtype.is_float and out.type.size and \
            out.type.size * depth >= MIN_WORK and smallest <= MAX_COLUMNS:
        _as_product(lw, eqn, rows, depth)
    else:
        _direct(lw, eqn)


def _window_index(lw: Lowering, eqn: Eqn, qs: list[Expr]) -> tuple:
    """The lhs index (after batch and channel) of padded, dilated position ``qs``, and
    the condition under which it falls on padding or between dilated elements instead."""
    lhs = eqn.inputs[0]
    p = eqn.params
    at: list[Expr] = []
    skip: Expr | None = None
    for d, q in enumerate(qs):
        t = lw.fresh("t")
        lo, ld = p["padding"][d][0], p["lhs_dilation"][d]
        lw.add(Decl(t, "int64_t", q - lo))
        tv = Sym(t)
        out = Bin("||", Bin("<", tv, Int(0)), Bin(">=", tv, Int(dilated(lhs.type.shape[2 + d],
                                                                          ld))))
        if ld > 1:
            out = Bin("||", out, Bin("%", tv, Int(ld)))
        skip = out if skip is None else Bin("||", skip, out)
        at.append(Bin("/", tv, Int(ld)) if ld > 1 else tv)
    return at, skip


def _positions(eqn: Eqn, ys: list[Expr], ws: list[Expr]) -> list[Expr]:
    """The padded, dilated position window offset ``ws`` of output position ``ys``
    reads: ``y * stride + w * rhs_dilation`` along each axis."""
    p = eqn.params
    return [y * s + w * r for y, w, s, r in zip(ys, ws, p["strides"], p["rhs_dilation"],
                                                strict=True)]


def _reach(eqn: Eqn) -> tuple[int, ...] | None:
    """The padded, dilated positions the windows read along each axis, where the lhs
    has to be copied padded and dilated first; None where they are the lhs's own."""
    lhs, rhs = eqn.inputs
    p = eqn.params
    reach = tuple((y - 1) * s + (w - 1) * r + 1 for y, w, s, r in zip(
        eqn.outputs[0].type.shape[2:], rhs.type.shape[2:], p["strides"], p["rhs_dilation"],
        strict=True))
    if all(lo == 0 and ld == 1 and q <= size for (lo, _), ld, q, size in zip(
            p["padding"], p["lhs_dilation"], reach, lhs.type.shape[2:], strict=True)):
        return None
    return reach


class _On(NamedTuple):
    """Where a block runs: ``slot``, the index of its thread's scratch (0 on one
    thread), and ``alone``, on one thread of a team running blocks at once (its loops
    then start no threads, its product runs on its thread)."""

    slot: Expr
    alone: bool


def _source(lw: Lowering, eqn: Eqn, padded: Expr | None, block: tuple[int, int],
            image: Expr, channel: Expr, on: _On) -> Callable[[Expr, Expr, list[Expr]], Expr]:
    """How the window matrix of ``block`` (images, channels, from ``image`` and
    ``channel``) reads image ``ni``, channel ``ci``, padded position ``qs`` of it: from
    the lhs, or from ``padded``, the block copied padded and dilated here (the windows'
    loops then test nothing)."""
    lhs = eqn.inputs[0]
    x = lw.buf(lhs)
    if padded is None:
        return lambda ni, ci, qs: Load(x, linear(lhs.type.shape, [image + ni, channel + ci,
                                                                  *qs]))
    shape = (*block, *_reach(eqn))  # type: ignore[misc]

    def copy(idx: list[Expr]) -> None:
        dest = Load(padded, linear(shape, idx))
        lw.add(Set(dest, Const(0, lhs.type.dtype)))
        at, skip = _window_index(lw, eqn, idx[2:])
        lw.add(Skip(skip))  # type: ignore[arg-type]
        lw.add(Set(dest, Load(x, linear(lhs.type.shape, [image + idx[0], channel + idx[1],
                                                         *at]))))

    lw.nd_loop(shape, copy, pragma=_threads(shape, on))
    return lambda ni, ci, qs: Load(padded, linear(shape, [ni, ci, *qs]))


def _as_product(lw: Lowering, eqn: Eqn, rows: int, depth: int) -> None:
    """The product a block at a time: blocks of images when the window matrix has more
    rows than columns, else blocks of channels."""
    k = lw.buf(eqn.inputs[1])
    lw.define(eqn.outputs[0])
    dest = lw.buf(eqn.outputs[0])
    (_by_images if rows >= depth else _by_channels)(lw, eqn, k, dest, rows * depth)


class _Sizes(NamedTuple):
    """What both blockings read off a convolution: its dtype and C type, batch, channels,
    out channels, output positions and window taps (and their shapes), element bytes."""

    dt: DType
    ct: str
    n: int
    c: int
    o: int
    positions: int
    taps: int
    spatial: tuple[int, ...]
    window: tuple[int, ...]
    size: int


def _sizes(eqn: Eqn) -> _Sizes:
    lhs, rhs = eqn.inputs
    spatial, window = eqn.outputs[0].type.shape[2:], rhs.type.shape[2:]
    dt = lhs.type.dtype
    return _Sizes(dt, ctype(dt), *lhs.type.shape[:2], rhs.type.shape[0], math.prod(spatial),
                  math.prod(window), spatial, window, dt.np.itemsize)


def _by_images(lw: Lowering, eqn: Eqn, k: Expr, dest: Expr, work: int) -> None:
    """Per block of images, the window matrix's transpose [c, *window, images, *out
    spatial] (its rows are runs of an image row), the kernel times it: [o, images,
    *spatial], the block's outputs (in place for a one-image block), once their images
    are put first."""
    dt, ct, n, c, o, positions, taps, spatial, window, size = _sizes(eqn)
    reach, depth = _reach(eqn), c * taps
    per = _even(n, BLOCK_BYTES // (positions * depth * size))
    team = _team(n // per, work)
    padded = None if reach is None else _Scratch(lw, ct, per * c * math.prod(reach), team)
    cols = _Scratch(lw, ct, per * positions * depth, team)
    prod = _Scratch(lw, ct, o * per * positions, team) if per > 1 else None

    def images(first: Expr, count: int, on: _On) -> None:
        src = _source(lw, eqn, padded and padded.of(on), (count, c), first, Int(0), on)
        _fill(lw, eqn, cols.of(on), src, (c, *window, count, *spatial), True, on)
        at = dest + first * (o * positions) if prod is None else prod.of(on)
        _product(lw, Gemm(dt, 1, o, count * positions, depth, k, False, cols.of(on), False,
                          at, runs_on_blas(dt, "direct", o * count * positions * depth)), on)
        if prod is None:
            return
        part = prod.of(on)

        def back(idx: list[Expr]) -> None:
            ni, oi, yi = idx
            lw.add(Set(Load(dest, ((first + ni) * o + oi) * positions + yi),
                       Load(part, (oi * count + ni) * positions + yi)))

        lw.nd_loop((count, o, positions), back, pragma=_threads((count, o, positions), on))

    _blocks(lw, n, per, images, team)


def _by_channels(lw: Lowering, eqn: Eqn, k: Expr, dest: Expr, work: int) -> None:
    """Per block of channels, the window matrix [n, *out spatial, channels, *window]
    (its rows are runs of an image row) times the block's channels of the kernel, added
    up (per thread, where blocks run at once, then the threads' sums), then the output's
    channels put in place: a weight gradient's product, few rows and a column per image
    and window position."""
    dt, ct, n, c, o, positions, taps, spatial, window, size = _sizes(eqn)
    reach, rows = _reach(eqn), n * positions
    per = _even(c, BLOCK_BYTES // (rows * taps * size))
    team = _team(c // per, work)
    padded = None if reach is None else _Scratch(lw, ct, n * per * math.prod(reach), team)
    cols = _Scratch(lw, ct, rows * per * taps, team)
    part = _Scratch(lw, ct, o * per * taps, team) if per < c else None
    prod = _Scratch(lw, ct, rows * o, team)
    lw.nd_loop((team * rows * o,), lambda i: lw.add(Set(Load(prod.base, i[0]), Const(0, dt))))

    def channels(first: Expr, count: int, on: _On) -> None:
        src = _source(lw, eqn, padded and padded.of(on), (n, count), Int(0), first, on)
        _fill(lw, eqn, cols.of(on), src, (n, *spatial, count, *window), False, on)
        kernel = k if part is None else part.of(on)  # the block's kernel channels

        def copy(idx: list[Expr]) -> None:
            oi, ci, wi = idx
            lw.add(Set(Load(kernel, (oi * count + ci) * taps + wi),
                       Load(k, (oi * c + first + ci) * taps + wi)))

        if part is not None:
            lw.nd_loop((o, count, taps), copy)
        total = prod.of(on)
        _product(lw, Gemm(dt, 1, rows, o, count * taps, cols.of(on), False, kernel, True,
                          total, runs_on_blas(dt, "panels", rows * o * count * taps),
                          addend=total), on)

    _blocks(lw, c, per, channels, team)

    def back(idx: list[Expr]) -> None:  # [n, o, y] from the threads' [n, y, o]
        ni, oi, yi = idx
        at = (ni * positions + yi) * o + oi
        total: Expr = Load(prod.base, at)
        for t in range(1, team):
            total = Bin("+", total, Load(prod.base, at + t * (rows * o)))
        lw.add(Set(Load(dest, (ni * o + oi) * positions + yi), total))

    lw.nd_loop((n, o, positions), back, pragma=_threads((n, o, positions), _ONE))


def _fill(lw: Lowering, eqn: Eqn, cols: Expr, src: Callable[[Expr, Expr, list[Expr]], Expr],
          shape: tuple[int, ...], channels_first: bool, on: _On) -> None:
    """Fill the window matrix ``cols`` of ``shape`` from ``src(image, channel, input
    positions)``: (channels, *window, images, *out spatial) for a block of images,
    (images, *out spatial, channels, *window) for a block of channels."""
    d = (len(shape) - 2) // 2  # the spatial dimensions

    def fill(idx: list[Expr]) -> None:
        outer, first, mid, second = idx[0], idx[1:1 + d], idx[1 + d], idx[2 + d:]
        ni, ci, ys, ws = (mid, outer, second, first) if channels_first else \
            (outer, mid, first, second)
        lw.add(Set(Load(cols, linear(shape, idx)), src(ni, ci, _positions(eqn, ys, ws))))

    lw.nd_loop(shape, fill, pragma=_threads(shape, on))


_ONE = _On(Int(0), False)


class _Scratch:
    """A block's scratch buffer of ``count`` elements, one per thread of ``team``."""

    def __init__(self, lw: Lowering, ct: str, count: int, team: int) -> None:
        self.lw, self.ct, self.count = lw, ct, count
        self.base = lw.scratch(ct, count * team)

    def of(self, on: _On) -> Expr:
        """The buffer of the thread ``on`` names."""
        if not on.alone:
            return self.base
        name = self.lw.fresh("w")
        self.lw.add(Decl(name, f"{self.ct} *", self.base + on.slot * self.count))
        return Sym(name)


def _product(lw: Lowering, gemm: Gemm, on: _On) -> None:
    """``gemm``; on one thread of a team, a BLAS product as a plain BLAS call (the
    runtime's packed kernels may fail for memory, which a team's thread cannot raise)."""
    if not (on.alone and gemm.blas):
        lw.add(gemm)
        return
    s = gemm
    blas = f"{BLAS_PREFIX}cblas_{'s' if s.dtype.name == 'float32' else 'd'}gemm"
    flags = [Sym("CblasTrans" if t else "CblasNoTrans") for t in (s.trans_a, s.trans_b)]
    lda, ldb = (s.m if s.trans_a else s.k), (s.k if s.trans_b else s.n)
    beta = Int(0 if s.addend is None else 1)  # an addend is the product's own C here
    lw.add(Runtime(blas, (Sym("CblasRowMajor"), *flags, Int(s.m), Int(s.n), Int(s.k),
                          Int(1), s.a, Int(lda), s.b, Int(ldb), beta, s.c, Int(s.n))))


def _threads(shape: tuple[int, ...], on: _On) -> str:
    """The pragma of a loop nest over ``shape``: on every thread when long enough,
    unless its block runs on one thread of a team."""
    return "parallel" if not on.alone and runs_parallel(math.prod(shape)) else ""


def _team(blocks: int, work: int) -> int:
    """The threads ``blocks`` whole blocks run on at once: every thread (at most one a
    block) where a loop of the window matrix's ``work`` elements would, else one."""
    team = min(team_size(), blocks)
    return team if team > 1 and runs_parallel(work) else 1


def _even(total: int, most: int) -> int:
    """Items a block of at most ``most`` (at least one) when ``total`` split into as few
    blocks as that allows, as even as can be (the last no larger than the others)."""
    most = max(1, min(total, most))
    return -(-total // -(-total // most))


def _blocks(lw: Lowering, total: int, per: int, block: Callable[[Expr, int, _On], None],
            team: int) -> None:
    """``block(first, count, on)`` over ``total`` items ``per`` at a time: a loop over
    the whole blocks (on ``team`` threads at once, OpenBLAS on one thread meanwhile),
    then the rest (the product's shape is fixed at compile time)."""
    whole, rest = divmod(total, per)
    b = lw.fresh("b")
    if team > 1:
        saved = lw.fresh("n")
        lw.add(Decl(saved, "int", Fn("pb_blas_alone", ())))  # runtime/module.h
        # at most the team the scratch is for, and no more than OpenMP's own (one in a
        # forked child, whose loops run alone: libgomp's threads do not survive fork)
        fit = f"num_threads({team} < omp_get_max_threads() ? {team} : omp_get_max_threads())"
        with lw.loop(b, whole, pragma="parallel", reductions=(fit,)):
            slot = lw.fresh("t")
            lw.add(Decl(slot, "int64_t", Fn("omp_get_thread_num", ())))
            block(Sym(b) * per, per, _On(Sym(slot), True))
        lw.add(Runtime("pb_blas_restore", (Sym(saved),)))
    elif whole == 1:
        block(Int(0), per, _ONE)
    elif whole:
        with lw.loop(b, whole):
            block(Sym(b) * per, per, _ONE)
    if rest:
        block(Int(whole * per), rest, _ONE)


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
        at, skip = _window_index(lw, eqn, _positions(eqn, ys, ws))
        if skip is not None:
            lw.add(Skip(skip))
        tap([Sym(c), *at], [Sym(c), *ws])
