"""Loop IR for ``sort``, ``cholesky``, ``triangular_solve``, ``lu`` and ``conv``: a mixin
of ``lower.Lowering`` (whose helpers it uses).

Sorting calls the runtime's loop (``pb_sort_*``) once per lane; it ports the reference
implementation step by step, so sorting gives the same permutation as the interpreter.
The factorizations call LAPACK (``pb_lapack_cholesky_*``, ``pb_lapack_lu_*`` of the
runtime library ``lapack.c``: ``?potrf``, ``?getrf``) once per batch, and triangular
solves BLAS's ``?trsm`` once per matrix.  ``conv`` is one loop nest over the result,
summing like ``dot_general`` does.

Operand pointers are taken (``buf``) before any loop opens: a fused operand is computed
into a buffer where ``buf`` is called.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import ExitStack

from ....ir.core import Atom, Eqn
from ....ir.types import float32
from ....ops.conv import dilated
from ..build.compiler import BLAS_PREFIX
from ..loops.ir import (
    Alloc,
    Bin,
    Cast,
    Copy,
    Decl,
    Expr,
    Int,
    Load,
    Runtime,
    Set,
    Skip,
    Stmt,
    Sym,
    ctype,
    linear,
    strides,
)


class LinalgLowering:
    """``Lowering``'s methods for the ops whose loops are runtime routines or long
    nests."""

    def scratch(self, ct: str, count: int) -> Sym:
        """A temporary buffer of ``count`` elements, freed after the equation."""
        name = self.fresh("w")
        self.add(Alloc(name, ct, count))
        self.own(name)
        return Sym(name)

    def per_matrix(self, x: Atom, stmt: Callable[[Sym], Stmt]) -> None:
        """``stmt(q)`` once per matrix ``q`` of ``x`` (its last two axes)."""
        q = self.fresh("q")
        with self.loop(q, math.prod(x.type.shape[:-2])):
            self.add(stmt(Sym(q)))

    # -- sort -------------------------------------------------------------------------------

    def op_sort(self, eqn: Eqn) -> None:
        """Per lane along ``axis``: a permutation sorted stably by each key from the
        least significant one (as the reference does), then every operand gathered."""
        axis, num_keys = eqn.params["axis"], eqn.params["num_keys"]
        desc = int(eqn.params["descending"])
        shape = eqn.inputs[0].type.shape
        srcs = [self.buf(x) for x in eqn.inputs]
        dests = [Sym(self.define(v)) for v in eqn.outputs]
        if math.prod(shape) == 0:
            return
        n, stride = shape[axis], strides(shape)[axis]
        perm, tmp = self.scratch("int64_t", n), self.scratch("int64_t", n)
        keys = list(zip(eqn.inputs[:num_keys], srcs, strict=False))

        def lane(idx: list[Expr]) -> None:
            base = Sym(self.fresh("b"))
            self.add(Decl(base.name, "int64_t", linear(shape, [*idx[:axis], Int(0),
                                                              *idx[axis:]])))
            j = Sym("j")
            with self.loop("j", n):
                self.add(Set(Load(perm, j), j))
            for x, src in reversed(keys):
                self.add(Runtime(f"pb_sort_{x.type.dtype.name}", (
                    src + base, Int(stride), perm, tmp, Int(n), Int(desc))))
            for src, dest in zip(srcs, dests, strict=True):
                with self.loop("j", n):
                    self.add(Set(Load(dest, base + j * stride),
                                 Load(src, base + Load(perm, j) * stride)))

        self.nd_loop([d for k, d in enumerate(shape) if k != axis], lane)

    # -- factorizations ---------------------------------------------------------------------

    def op_cholesky(self, eqn: Eqn) -> None:
        (a,) = eqn.inputs
        src = self.buf(a)
        dest = Sym(self.define(eqn.outputs[0]))
        self.add(Runtime(f"pb_lapack_cholesky_{a.type.dtype.name}", (
            Int(math.prod(a.type.shape[:-2])), Int(a.type.shape[-1]), src, dest),
            ("LinAlgError", "Matrix is not positive definite"), self.mod.site(eqn)))

    def op_triangular_solve(self, eqn: Eqn) -> None:
        """``b`` copied into the result, solved there in place by ``?trsm`` (row-major:
        ``a`` on the left of an m x k result, or on the right of a k x m one)."""
        a, b = eqn.inputs
        p = eqn.params
        mat, rhs = self.buf(a), self.buf(b)
        dest = Sym(self.define(eqn.outputs[0]))
        if b.type.size == 0:
            return
        dt = a.type.dtype
        self.add(Copy(dest.name, rhs, ctype(dt), b.type.size, fresh=False))
        m = a.type.shape[-1]
        rows, cols = b.type.shape[-2:]
        flags = [Sym(f"Cblas{word}") for word in (
            "RowMajor", "Left" if p["left_side"] else "Right", "Lower" if p["lower"] else "Upper",
            "Trans" if p["transpose_a"] else "NoTrans",
            "Unit" if p["unit_diagonal"] else "NonUnit")]
        trsm = f"{BLAS_PREFIX}cblas_{'s' if dt == float32 else 'd'}trsm"
        self.per_matrix(a, lambda q: Runtime(trsm, (
            *flags, Int(rows), Int(cols), Int(1), mat + q * (m * m), Int(m),
            dest + q * (rows * cols), Int(cols))))

    def op_lu(self, eqn: Eqn) -> None:
        (a,) = eqn.inputs
        src = self.buf(a)
        packed, pivots, perm = (Sym(self.define(v)) for v in eqn.outputs)
        self.add(Copy(packed.name, src, ctype(a.type.dtype), a.type.size, fresh=False))
        self.add(Runtime(f"pb_lapack_lu_{a.type.dtype.name}", (
            Int(math.prod(a.type.shape[:-2])), Int(a.type.shape[-1]), packed, pivots, perm)))

    # -- conv -------------------------------------------------------------------------------

    def op_conv(self, eqn: Eqn) -> None:
        """out[n, o, y] = sum over c, w of lhs'[n, c, y*stride + w*rhs_dilation] *
        rhs[o, c, w], where lhs' is lhs dilated and padded: padded position t + lo is
        dilated position t, an element of lhs when it is a multiple of lhs_dilation."""
        (out,) = eqn.outputs
        lhs, rhs = eqn.inputs
        lp, rp = self.buf(lhs), self.buf(rhs)
        dest = Sym(self.define(out))
        if out.type.size == 0:
            return
        dt = lhs.type.dtype
        acc_t = "double" if dt.is_float else ctype(dt)

        def body(oidx: list[Expr]) -> None:
            acc = Sym(self.fresh("a"))
            self.add(Decl(acc.name, acc_t, Int(0)))

            def tap(at: list[Expr], ws: list[Expr]) -> None:
                x = Load(lp, linear(lhs.type.shape, [oidx[0], *at]))
                w = Load(rp, linear(rhs.type.shape, [oidx[1], *ws]))
                if dt.is_bool:
                    self.add(Set(acc, Bin("|", acc, Bin("&", x, w))))
                else:
                    self.add(Set(acc, Bin("+", acc, Bin("*", Cast(acc_t, x), w))))

            self._conv_taps(eqn, oidx[2:], tap)
            self.add(Set(Load(dest, linear(out.type.shape, oidx)), Cast(ctype(dt), acc)))

        self.nd_loop(out.type.shape, body)

    def _conv_taps(self, eqn: Eqn, ys: list[Expr],
                   tap: Callable[[list[Expr], list[Expr]], None]) -> None:
        """Loops over the channels and window positions of result position ``ys``,
        skipping the positions that fall on padding or between dilated elements;
        ``tap(lhs index, rhs index)`` (after the batch / output-channel index) adds the
        innermost statements."""
        lhs, rhs = eqn.inputs
        p = eqn.params
        c = self.fresh("c")
        at: list[Expr] = [Sym(c)]
        ws: list[Expr] = [Sym(c)]
        with ExitStack() as nest:
            nest.enter_context(self.loop(c, lhs.type.shape[1]))
            for d, y in enumerate(ys):
                w, t = self.fresh("w"), self.fresh("t")
                lo, ld = p["padding"][d][0], p["lhs_dilation"][d]
                nest.enter_context(self.loop(w, rhs.type.shape[2 + d]))
                tv = Sym(t)
                self.add(Decl(t, "int64_t", y * p["strides"][d] + Sym(w) * p["rhs_dilation"][d]
                              - lo))
                skip = Bin("||", Bin("<", tv, Int(0)),
                           Bin(">=", tv, Int(dilated(lhs.type.shape[2 + d], ld))))
                if ld > 1:
                    skip = Bin("||", skip, Bin("%", tv, Int(ld)))
                self.add(Skip(skip))
                at.append(Bin("/", tv, Int(ld)) if ld > 1 else tv)
                ws.append(Sym(w))
            tap(at, ws)
