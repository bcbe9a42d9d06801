"""Loop IR for ``sort``, ``cholesky``, ``triangular_solve``, ``lu`` and ``conv``: a mixin
of ``lower.Lowering`` (whose helpers it uses).

Sorting and the factorizations call the runtime's loops (``pb_sort_*``,
``pb_cholesky_*``, ``pb_trsm_*``, ``pb_lu_*``) once per lane or matrix; they port the
reference implementations step by step, so LU picks the same pivots and sorting gives
the same permutation as the interpreter.  ``conv`` is one loop nest over the result,
summing like ``dot_general`` does.

Operand pointers are taken (``buf``) before any loop opens: a fused operand is computed
into a buffer where ``buf`` is called.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from contextlib import ExitStack

from ...ir.core import Atom, Eqn
from ...ops.conv import _dilated
from .loop_ir import (
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
        n = a.type.shape[-1]
        self.per_matrix(a, lambda q: Runtime(
            f"pb_cholesky_{a.type.dtype.name}", (src + q * (n * n), dest + q * (n * n), Int(n)),
            ("LinAlgError", "Matrix is not positive definite"), self.mod.site(eqn)))

    def op_triangular_solve(self, eqn: Eqn) -> None:
        """``x op(a) = b`` is ``op(a)^T x^T = b^T``: strides pick the transposes, and a
        transposed lower factor is an upper one."""
        a, b = eqn.inputs
        p = eqn.params
        mat, rhs = self.buf(a), self.buf(b)
        dest = Sym(self.define(eqn.outputs[0]))
        if b.type.size == 0:
            return
        m = a.type.shape[-1]
        k = b.type.shape[-1] if p["left_side"] else b.type.shape[-2]
        flip = p["transpose_a"] != (not p["left_side"])
        mrs, mcs = (1, m) if flip else (m, 1)
        rs, cs = (k, 1) if p["left_side"] else (1, m)
        lower = int(p["lower"] != flip)
        self.per_matrix(a, lambda q: Runtime(f"pb_trsm_{a.type.dtype.name}", (
            mat + q * (m * m), Int(mrs), Int(mcs), rhs + q * (m * k), dest + q * (m * k),
            Int(rs), Int(cs), Int(m), Int(k), Int(lower), Int(int(p["unit_diagonal"])))))

    def op_lu(self, eqn: Eqn) -> None:
        (a,) = eqn.inputs
        src = self.buf(a)
        packed, pivots, perm = (Sym(self.define(v)) for v in eqn.outputs)
        n = a.type.shape[-1]
        self.add(Copy(packed.name, src, ctype(a.type.dtype), a.type.size, fresh=False))
        self.per_matrix(a, lambda q: Runtime(f"pb_lu_{a.type.dtype.name}", (
            packed + q * (n * n), pivots + q * n, perm + q * n, Int(n))))

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
                           Bin(">=", tv, Int(_dilated(lhs.type.shape[2 + d], ld))))
                if ld > 1:
                    skip = Bin("||", skip, Bin("%", tv, Int(ld)))
                self.add(Skip(skip))
                at.append(Bin("/", tv, Int(ld)) if ld > 1 else tv)
                ws.append(Sym(w))
            tap(at, ws)
