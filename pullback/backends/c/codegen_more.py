"""C code for ``sort``, ``cholesky``, ``triangular_solve``, ``lu`` and ``conv``.

A mixin of ``FuncGen`` (whose helpers it uses).  Sorting and the factorizations call
the runtime's loops (``pb_sort_*``, ``pb_cholesky_*``, ``pb_trsm_*``, ``pb_lu_*``) once
per lane or matrix; they port the reference implementations step by step, so LU picks
the same pivots and sorting gives the same permutation as the interpreter.  ``conv`` is
one loop nest over the result, summing like ``dot_general`` does.

Operand pointers are taken (``buf``) before any loop opens: a fused operand is computed
into a buffer where ``buf`` is called.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from ...ir.core import Atom, Eqn
from ...ops.conv import _dilated
from . import codegen as cg


class MoreOps:
    """``FuncGen``'s methods for the ops whose C code is a runtime loop or a long nest
    (``codegen`` is imported as a module: it imports this one while it loads)."""

    def scratch(self, ct: str, count: int) -> str:
        """A temporary buffer of ``count`` elements, freed after the equation."""
        name = self.fresh("w")
        self.line(f"{ct} *{name} = ({ct} *)pb_alloc(ctx, {max(count, 1)} * sizeof({ct}));")
        self.line(f"if (!{name}) goto oom;")
        self.own(name)
        return name

    def per_matrix(self, x: Atom, call: Callable[[str], str]) -> None:
        """The C statement ``call(q)`` once per matrix ``q`` of ``x`` (its last two axes)."""
        q = self.fresh("q")
        self.line(f"for (int64_t {q} = 0; {q} < {math.prod(x.type.shape[:-2])}; {q}++) "
                  f"{call(q)}")

    # -- sort -----------------------------------------------------------------------

    def op_sort(self, eqn: Eqn) -> None:
        """Per lane along ``axis``: a permutation sorted stably by each key from the
        least significant one (as the reference does), then every operand gathered."""
        axis, num_keys = eqn.params["axis"], eqn.params["num_keys"]
        desc = int(eqn.params["descending"])
        shape = eqn.inputs[0].type.shape
        srcs = [self.buf(x) for x in eqn.inputs]
        dests = [self.define(v) for v in eqn.outputs]
        if math.prod(shape) == 0:
            return
        n, stride = shape[axis], cg._strides(shape)[axis]
        perm, tmp = self.scratch("int64_t", n), self.scratch("int64_t", n)
        keys = list(zip(eqn.inputs[:num_keys], srcs, strict=False))

        def lane(idx: list[str]) -> None:
            base = self.fresh("b")
            self.line(f"int64_t {base} = {cg._linear(shape, [*idx[:axis], '0', *idx[axis:]])};")
            self.line(f"for (int64_t j = 0; j < {n}; j++) {perm}[j] = j;")
            for x, src in reversed(keys):
                self.line(f"pb_sort_{x.type.dtype.name}({src} + {base}, {stride}, {perm}, "
                          f"{tmp}, {n}, {desc});")
            for src, dest in zip(srcs, dests, strict=True):
                self.line(f"for (int64_t j = 0; j < {n}; j++) {dest}[{base} + j * {stride}] "
                          f"= {src}[{base} + {perm}[j] * {stride}];")

        self.nd_loop([d for k, d in enumerate(shape) if k != axis], lane)

    # -- factorizations ---------------------------------------------------------------

    def op_cholesky(self, eqn: Eqn) -> None:
        (a,) = eqn.inputs
        src = self.buf(a)
        dest = self.define(eqn.outputs[0])
        n = a.type.shape[-1]
        self.per_matrix(a, lambda q: (
            f"if (pb_cholesky_{a.type.dtype.name}({src} + {q} * {n * n}, {dest} + {q} * "
            f"{n * n}, {n})) {{ pb_fail(ctx, \"LinAlgError\", \"Matrix is not positive "
            f"definite\"); goto fail; }}"))

    def op_triangular_solve(self, eqn: Eqn) -> None:
        """``x op(a) = b`` is ``op(a)^T x^T = b^T``: strides pick the transposes, and a
        transposed lower factor is an upper one."""
        a, b = eqn.inputs
        p = eqn.params
        mat, rhs = self.buf(a), self.buf(b)
        dest = self.define(eqn.outputs[0])
        if b.type.size == 0:
            return
        m = a.type.shape[-1]
        k = b.type.shape[-1] if p["left_side"] else b.type.shape[-2]
        flip = p["transpose_a"] != (not p["left_side"])
        mrs, mcs = (1, m) if flip else (m, 1)
        rs, cs = (k, 1) if p["left_side"] else (1, m)
        lower = int(p["lower"] != flip)
        self.per_matrix(a, lambda q: (
            f"pb_trsm_{a.type.dtype.name}({mat} + {q} * {m * m}, {mrs}, {mcs}, {rhs} + "
            f"{q} * {m * k}, {dest} + {q} * {m * k}, {rs}, {cs}, {m}, {k}, {lower}, "
            f"{int(p['unit_diagonal'])});"))

    def op_lu(self, eqn: Eqn) -> None:
        (a,) = eqn.inputs
        src = self.buf(a)
        packed, pivots, perm = (self.define(v) for v in eqn.outputs)
        ct, n = cg.ctype(a.type.dtype), a.type.shape[-1]
        self.line(f"memcpy({packed}, {src}, {a.type.size} * sizeof({ct}));")
        self.per_matrix(a, lambda q: f"pb_lu_{a.type.dtype.name}({packed} + {q} * {n * n}, "
                                     f"{pivots} + {q} * {n}, {perm} + {q} * {n}, {n});")

    # -- conv -------------------------------------------------------------------------

    def op_conv(self, eqn: Eqn) -> None:
        """out[n, o, y] = sum over c, w of lhs'[n, c, y*stride + w*rhs_dilation] *
        rhs[o, c, w], where lhs' is lhs dilated and padded: padded position t + lo is
        dilated position t, an element of lhs when it is a multiple of lhs_dilation."""
        (out,) = eqn.outputs
        lhs, rhs = eqn.inputs
        lp, rp = self.buf(lhs), self.buf(rhs)
        dest = self.define(out)
        if out.type.size == 0:
            return
        dt = lhs.type.dtype
        acc_t = "double" if dt.is_float else cg.ctype(dt)

        def body(oidx: list[str]) -> None:
            acc = self.fresh("a")
            self.line(f"{acc_t} {acc} = 0;")

            def tap(at: list[str], ws: list[str]) -> None:
                x = f"{lp}[{cg._linear(lhs.type.shape, [oidx[0], *at])}]"
                w = f"{rp}[{cg._linear(rhs.type.shape, [oidx[1], *ws])}]"
                if dt.is_bool:
                    self.line(f"{acc} = {acc} | ({x} & {w});")
                else:
                    self.line(f"{acc} = {acc} + ({acc_t}){x} * {w};")

            self._conv_taps(eqn, oidx[2:], tap)
            self.line(f"{dest}[{cg._linear(out.type.shape, oidx)}] = ({cg.ctype(dt)}){acc};")

        self.nd_loop(out.type.shape, body)

    def _conv_taps(self, eqn: Eqn, ys: list[str],
                   tap: Callable[[list[str], list[str]], None]) -> None:
        """Loops over the channels and window positions of result position ``ys``,
        skipping the positions that fall on padding or between dilated elements;
        ``tap(lhs index, rhs index)`` (after the batch / output-channel index) emits the
        innermost code."""
        lhs, rhs = eqn.inputs
        p = eqn.params
        c = self.fresh("c")
        self.line(f"for (int64_t {c} = 0; {c} < {lhs.type.shape[1]}; {c}++) {{")
        self.depth += 1
        at, ws = [c], [c]
        for d, y in enumerate(ys):
            w, t = self.fresh("w"), self.fresh("t")
            lo, ld = p["padding"][d][0], p["lhs_dilation"][d]
            self.line(f"for (int64_t {w} = 0; {w} < {rhs.type.shape[2 + d]}; {w}++) {{")
            self.depth += 1
            self.line(f"int64_t {t} = {y} * {p['strides'][d]} + {w} * {p['rhs_dilation'][d]}"
                      f" - ({lo});")
            skip = f"{t} < 0 || {t} >= {_dilated(lhs.type.shape[2 + d], ld)}"
            self.line(f"if ({skip}{f' || {t} % {ld}' if ld > 1 else ''}) continue;")
            at.append(f"{t} / {ld}" if ld > 1 else t)
            ws.append(w)
        tap(at, ws)
        for _ in at:
            self.depth -= 1
            self.line("}")
