"""Loop IR for layout changes, reductions, products and indexing: a mixin of
``lower.Lowering`` (whose value and memory helpers it uses)."""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager

from ....ir.core import Atom, Eqn, Var
from ....ir.types import TensorType, float64
from ..loops.ir import (
    Bin,
    Cast,
    Cond,
    Const,
    Decl,
    Expr,
    Fn,
    Gemm,
    If,
    Int,
    Load,
    Loop,
    Op,
    Raise,
    Set,
    Sym,
    ctype,
    linear,
    strides,
    walk,
)
from ..plan.fusion import REDUCE, eqn_axes, through_transpose

#: The most work (m*n*k per matrix) a product runs as the runtime's inline kernel
#: (``pb_gemm_*``) rather than a BLAS call whose packing and dispatch cost more, by the
#: layout of B, measured against OpenBLAS on 1 and 2 threads: a row-major B at least two
#: vectors wide runs as register tiles straight from B; others are first copied in panels.
GEMM_INLINE_MAX_WORK = {True: 1 << 20, False: 1 << 15}
#: The widest last axis a concatenation along it writes row by row, unrolled.
CONCAT_UNROLL = 64
#: dtypes the inline kernel computes; floats beyond its sizes go to BLAS.
_GEMM_DTYPES = {"float32", "float64", "int32", "int64"}


def _block_of(dims: Sequence[int], start: int) -> bool:
    return list(dims) == list(range(start, start + len(dims)))


def _transposed(first, second, start: int) -> bool | None:
    """Whether an operand's two axis blocks after the batch axes come as (second, first)
    (True) or as (first, second) (False); None when they are not two contiguous blocks."""
    if _block_of(first, start) and _block_of(second, start + len(first)):
        return False
    if _block_of(second, start) and _block_of(first, start + len(second)):
        return True
    return None


def _as_gemm(a: TensorType, b: TensorType, lc, rc, lb, rb, lf, rf):
    """``(batch, m, n, k, trans_a, trans_b)`` when a ``dot_general`` is a batch of row-major
    matrix products: leading batch axes in order on both sides, free and contracting axes
    each one contiguous block, contracting axes in the same order; else None."""
    nb = len(lb)
    if list(lb) != list(range(nb)) or list(rb) != list(range(nb)):
        return None
    if sorted(lc) != list(lc) or sorted(rc) != list(rc):
        return None
    trans_a = _transposed(lf, lc, nb)
    trans_b = _transposed(rc, rf, nb)
    if trans_a is None or trans_b is None:
        return None
    batch = math.prod(a.shape[:nb])
    m = math.prod(a.shape[d] for d in lf)
    n = math.prod(b.shape[d] for d in rf)
    k = math.prod(a.shape[d] for d in lc)
    if max(m, n, k) >= 2 ** 31:
        return None
    return batch, m, n, k, trans_a, trans_b


def _along(shape: Sequence[int], axis: int, index: Expr) -> Expr:
    """The index along ``axis`` of element ``index`` (a linear index) of an array of
    ``shape``."""
    if shape[axis] == 1:
        return Int(0)
    stride = math.prod(shape[axis + 1:])
    along = Bin("/", index, Int(stride)) if stride > 1 else index
    return along if math.prod(shape[:axis]) == 1 else Bin("%", along, Int(shape[axis]))


def _at(dest: str, shape: Sequence[int], idx: Sequence[Expr]) -> Expr:
    """Element ``idx`` of buffer ``dest`` (the local itself for a 0-d value)."""
    return Sym(dest) if len(shape) == 0 else Load(Sym(dest), linear(shape, idx))


class MoreLowering:
    """Layout, reduction, product and indexing ops of ``Lowering``."""

    # -- layout -----------------------------------------------------------------------

    def gather_loop(self, out: Var, source: Atom,
                    index_of: Callable[[list[Expr]], list[Expr]]) -> None:
        """``out[i] = source[index_of(i)]`` over ``out``'s shape."""
        self.define(out)
        if out.type.size == 0:
            return
        dest, shape = self.vars[id(out)], out.type.shape
        self.nd_loop(shape, lambda idx: self.add(Set(_at(dest, shape, idx), self.elem(
            source, linear(source.type.shape, index_of(idx))))))

    def op_broadcast_in_dim(self, eqn: Eqn) -> None:
        (x,) = eqn.inputs
        if x.type.shape == ():
            self.elementwise(eqn)
            return
        out, dims = eqn.outputs[0], eqn.params["dims"]
        if id(out) in self.plan.fusible:
            self.fused.broadcasts.add(id(out))
            self.fused.exprs[id(out)] = lambda i: self.elem(x, linear(x.type.shape, [
                Int(0) if x.type.shape[k] == 1 else self.axis_index(out, d, i)
                for k, d in enumerate(dims)]))
            return
        self.gather_loop(out, x, lambda idx: [
            Int(0) if x.type.shape[k] == 1 else idx[d] for k, d in enumerate(dims)])

    @contextmanager
    def axes_known(self, index: Expr, axes: list[Expr] | None) -> Iterator[Expr]:
        """In this context, element ``index`` (a linear index) of the loop's values is at
        axis indices ``axes`` (when given), which fused broadcasts read instead of
        dividing ``index``."""
        outer = self.in_kernel.axes
        if axes is not None:
            self.in_kernel.axes = (index, axes)
        try:
            yield index
        finally:
            self.in_kernel.axes = outer

    def axis_index(self, v: Var, axis: int, index: Expr) -> Expr:
        """The index along ``axis`` of element ``index`` (a linear index) of ``v``: the
        kernel's own axis index when ``index`` is its element's, else arithmetic."""
        if self.in_kernel.axes is not None and index is self.in_kernel.axes[0]:
            return self.in_kernel.axes[1][axis]
        stride = strides(v.type.shape)[axis]
        along = Bin("/", index, Int(stride)) if stride > 1 else index
        return along if axis == 0 else Bin("%", along, Int(v.type.shape[axis]))

    def op_reshape(self, eqn: Eqn) -> None:
        """A view of its operand's buffer, or a copy where it cannot be one (a fused
        slice's reshape reads what the slice reads, at the same linear index)."""
        (out,) = eqn.outputs
        if id(out) in self.buffers.in_columns:  # its kernel stored it in the concatenation
            return
        if id(out) in self.plan.fusible and id(eqn.inputs[0]) in self.fused.remaps:
            self.fused.remaps[id(out)] = self.fused.remaps[id(eqn.inputs[0])]
            return
        if id(out) in self.plan.fusible and id(eqn.inputs[0]) in self.fused.exprs:
            x = eqn.inputs[0]
            self.fused.exprs[id(out)] = lambda i: self.elem(x, i)  # the same linear index
            return
        if id(out) in self.scope.plan.views:
            self.vars[id(out)] = self.vars[id(eqn.inputs[0])]
            return
        self.define(out)
        self.flat_loop(out, lambda i: self.elem(eqn.inputs[0], i))

    def op_transpose(self, eqn: Eqn) -> None:
        perm = eqn.params["perm"]
        if id(eqn.outputs[0]) in self.plan.fusible:  # the products reading it read its source
            self.fused.transposed[id(eqn.outputs[0])] = (eqn.inputs[0], perm)
            return

        def index_of(idx):
            src = [Int(0)] * len(perm)
            for j, p in enumerate(perm):
                src[p] = idx[j]
            return src

        self.gather_loop(eqn.outputs[0], eqn.inputs[0], index_of)

    def op_slice(self, eqn: Eqn) -> None:
        """Read where needed (a map from its linear index to its operand's) when fused;
        else copied out, as a SIMD kernel when it takes whole rows."""
        start, stride = eqn.params["start"], eqn.params["stride"]
        (out,), x = eqn.outputs, eqn.inputs[0]
        rows = x.type.shape[1:] == out.type.shape[1:] and stride[0] == 1 and \
            not any(start[1:]) and all(st == 1 for st in stride[1:])
        offset = start[0] * strides(x.type.shape)[0] if rows and x.type.ndim else 0

        def at(i: Expr) -> Expr:
            if rows:  # whole rows: the same element of a block starting further on
                return i + offset if offset else i
            return linear(x.type.shape, [s + _along(out.type.shape, d, i) * st for d, (s, st)
                                         in enumerate(zip(start, stride, strict=True))])

        if id(out) in self.plan.fusible:
            src, inner = self.fused.remaps.get(id(x), (x, None))
            self.fused.remaps[id(out)] = (src, at if inner is None else lambda i: inner(at(i)))
            self.read_shifted(src)
        elif rows:
            self.define(out)
            self.flat_loop(out, lambda i: self.elem(x, at(i)))
        else:
            self.gather_loop(out, x, lambda idx: [
                s + i * st for i, s, st in zip(idx, start, stride, strict=True)])

    def op_rev(self, eqn: Eqn) -> None:
        x = eqn.inputs[0]
        dims = eqn.params["dims"]
        self.gather_loop(eqn.outputs[0], x, lambda idx: [
            Int(x.type.shape[k] - 1) - i if k in dims else i for k, i in enumerate(idx)])

    def op_iota(self, eqn: Eqn) -> None:
        (out,) = eqn.outputs
        self.define(out)
        dim, dest, shape = eqn.params["dim"], self.vars[id(out)], out.type.shape
        ct = ctype(out.type.dtype)
        if shape == ():
            self.add(Set(Sym(dest), Int(0)))
            return
        self.nd_loop(shape, lambda idx: self.add(Set(_at(dest, shape, idx), Cast(ct, idx[dim]))))

    def op_concatenate(self, eqn: Eqn) -> None:
        (out,) = eqn.outputs
        if id(out) in self.plan.fusible:  # read where needed, from the operand it falls in
            for x in eqn.inputs:
                self.read_shifted(x)
            self.fused.exprs[id(out)] = lambda i: self._joined(eqn, i)
            return
        if id(out) not in self.vars:  # (defined already where an operand was placed in it)
            self.define(out)
        axis, dest = eqn.params["axis"], self.vars[id(out)]
        inside = self.buffers.placed.get(id(out), set())
        width = out.type.shape[axis] if out.type.ndim else 0
        if axis == out.type.ndim - 1 and width <= CONCAT_UNROLL and out.type.size:
            # along a short last axis (columns assembled into records): one pass over the
            # rows writes each row whole, rather than one strided pass per operand
            rows = out.type.shape[:-1]

            def row(idx: list[Expr]) -> None:
                at = linear(rows, idx) if rows else Int(0)
                col = 0
                for x in eqn.inputs:
                    w = x.type.shape[-1]
                    for c in range(0 if self.vars.get(id(x)) in inside or
                                   id(x) in self.buffers.in_columns else w):
                        self.add(Set(Load(Sym(dest), at * width + (col + c)),
                                     self.elem(x, at * w + c if w > 1 else at)))
                    col += w

            if any(self.vars.get(id(x)) not in inside and id(x) not in self.buffers.in_columns
                   for x in eqn.inputs):
                self.nd_loop(rows, row)
            return
        offset = 0
        for x in eqn.inputs:
            def body(idx, x=x, offset=offset):
                at = [i + offset if k == axis else i for k, i in enumerate(idx)]
                self.add(Set(_at(dest, out.type.shape, at),
                             self.elem(x, linear(x.type.shape, idx))))

            if x.type.size and self.vars.get(id(x)) not in inside and \
                    id(x) not in self.buffers.in_columns:
                self.nd_loop(x.type.shape, body)
            offset += x.type.shape[axis]

    def _joined(self, eqn: Eqn, i: Expr) -> Expr:
        """Element ``i`` of a concatenation along the first axis: ``p0[i]`` if ``i`` is
        below where ``p1`` starts, else ``p1[i - start]`` if below where ``p2`` starts...
        (C's ``?:`` loads only from the operand chosen)."""
        row = strides(eqn.outputs[0].type.shape)[0]
        parts, end = [], 0
        for x in eqn.inputs:
            if x.type.size:
                parts.append((x, end * row))
            end += x.type.shape[0]
        chosen: Expr | None = None
        for k in reversed(range(len(parts))):
            x, start = parts[k]
            value = self.elem(x, i if start == 0 else Bin("-", i, Int(start)))
            chosen = value if chosen is None else \
                Cond(Bin("<", i, Int(parts[k + 1][1])), value, chosen)
        assert chosen is not None  # (a fused value has elements)
        return chosen

    def op_pad(self, eqn: Eqn) -> None:
        (out,) = eqn.outputs
        x, value = eqn.inputs
        lo, interior = eqn.params["lo"], eqn.params["interior"]
        if id(out) in self.plan.fusible:  # read where needed: an element of x, or the value
            before = lo[0] * strides(out.type.shape)[0]

            def element(i: Expr) -> Expr:
                j = i if before == 0 else Bin("-", i, Int(before))
                end = before + x.type.size
                tests = ([Bin(">=", i, Int(before))] if before > 0 else []) + \
                    ([Bin("<", i, Int(end))] if out.type.size > end else [])
                if not tests:  # (x cropped at both ends)
                    return self.elem(x, j)
                inside = tests[0] if len(tests) == 1 else Bin("&&", *tests)
                return Cond(inside, self.elem(x, j), self.scalar(value))

            self.read_shifted(x)
            self.fused.exprs[id(out)] = element
            return
        self.define(out)
        dest = self.vars[id(out)]
        if out.type.size == 0:
            return
        self.flat_loop(out, lambda i: self.scalar(value))
        if x.type.size == 0:
            return

        def body(idx):
            at = [i * (g + 1) + lo_ for i, lo_, g in zip(idx, lo, interior, strict=True)]
            inside: Expr | None = None
            for a, d in zip(at, out.type.shape, strict=True):
                term = Bin("&&", Bin(">=", a, Int(0)), Bin("<", a, Int(d)))
                inside = term if inside is None else Bin("&&", inside, term)
            self.add(If(inside, [Set(_at(dest, out.type.shape, at),
                                     self.elem(x, linear(x.type.shape, idx)))]))

        self.nd_loop(x.type.shape, body)

    # -- reductions ---------------------------------------------------------------------

    def accumulator(self, eqn: Eqn) -> tuple[str, tuple[str, ...]]:
        """Declare a reduction's accumulator; its name and the OpenMP clauses combining
        its copies across SIMD lanes and threads.  OpenMP's max and min drop NaNs, so a
        float max/min also keeps a flag of the NaNs it saw (NumPy's answer is NaN)."""
        kind = REDUCE[eqn.op.name][0]
        dt = eqn.inputs[0].type.dtype
        acc = self.fresh("a")
        if dt.is_bool:
            op = "|" if kind in ("sum", "max") else "&"
            self.add(Decl(acc, "uint8_t", Int(int(op == "&"))))
            return acc, (f"reduction({op}:{acc})",)
        op = {"sum": "+", "prod": "*"}.get(kind, kind)
        if not dt.is_float:
            lim = "INT64" if dt.name == "int64" else "INT32"
            init = {"sum": "0", "prod": "1", "max": f"{lim}_MIN", "min": f"{lim}_MAX"}[kind]
            self.add(Decl(acc, ctype(dt), Sym(init)))
            return acc, (f"reduction({op}:{acc})",)
        if kind in ("sum", "prod"):
            self.add(Decl(acc, "double", Const(0.0 if kind == "sum" else 1.0, float64)))
            return acc, (f"reduction({op}:{acc})",)
        # max and min are exact: in the operand's own type, with no conversions
        self.add(Decl(acc, ctype(dt), Const(-math.inf if kind == "max" else math.inf, dt)))
        self.add(Decl(acc + "n", "uint8_t"))
        return acc, (f"reduction({op}:{acc})", f"reduction(|:{acc}n)")

    def accumulate(self, eqn: Eqn, acc: str, v: Expr) -> None:
        kind = REDUCE[eqn.op.name][0]
        dt = eqn.inputs[0].type.dtype
        a = Sym(acc)
        if dt.is_bool:
            self.add(Set(a, Bin("|" if kind in ("sum", "max") else "&", a, v)))
        elif kind in ("sum", "prod"):
            self.add(Set(a, Bin("+" if kind == "sum" else "*", a, v)))
        else:  # a later equal value wins, as in NumPy's loops (0.0 vs -0.0)
            e = Sym(self.fresh("e"))
            self.add(Decl(e.name, ctype(dt), v))
            self.add(Set(a, Cond(Bin(">=" if kind == "max" else "<=", e, a), e, a)))
            if dt.is_float:
                self.add(Set(Sym(acc + "n"), Bin("!=", e, e), "|="))

    def reduced(self, eqn: Eqn, acc: str) -> Expr:
        """The reduction's value once its loop is over, in the result's type."""
        kind = REDUCE[eqn.op.name][0]
        value: Expr = Sym(acc)
        if eqn.inputs[0].type.dtype.is_float and kind in ("max", "min"):
            value = Cond(Sym(acc + "n"), Const(math.nan, float64), value)
        return Cast(ctype(eqn.outputs[0].type.dtype), value)

    def reduce(self, eqn: Eqn) -> None:
        (out,) = eqn.outputs
        (x,) = eqn.inputs
        axes = eqn.params["axes"]
        self.define(out)
        kept = [k for k in range(x.type.ndim) if k not in axes]
        dest = self.vars[id(out)]
        if REDUCE[eqn.op.name][0] == "sum" and not x.type.dtype.is_bool and kept and \
                list(axes) == list(range(len(axes))) and out.type.size > 1:
            self._sum_leading(eqn, math.prod(x.type.shape[:len(axes)]), out.type.size)
            return

        def outer(oidx):
            acc, clauses = self.accumulator(eqn)

            def inner(ridx):
                full, ko, kr = [], iter(oidx), iter(ridx)
                for k in range(x.type.ndim):
                    full.append(next(kr) if k in axes else next(ko))
                with self.axes_known(linear(x.type.shape, full), full) as i:
                    self.accumulate(eqn, acc, self.elem(x, i))

            extent = math.prod(x.type.shape[a] for a in axes)
            self.nd_loop([x.type.shape[a] for a in axes], inner, collapse=True,
                         pragma=self.kind(extent if not kept else 0), reductions=clauses)
            self.add(Set(_at(dest, out.type.shape, oidx), self.reduced(eqn, acc)))

        start = len(self.out)
        self.nd_loop([x.type.shape[k] for k in kept], outer)
        rows = self.out[start] if kept else None
        # rows of a long reduction on every thread, where nothing in them jumps out
        if isinstance(rows, Loop) and x.type.size >= self.PARALLEL_MIN and \
                out.type.size > 1 and all(isinstance(t, (Loop, Decl, Set))
                                          for t in walk(rows.body)):
            rows.pragma = "parallel"

    def _sum_leading(self, eqn: Eqn, rows: int, cols: int) -> None:
        """A sum over leading axes (a bias gradient): row by row into a vector of
        accumulators, each row's elements contiguous and in SIMD lanes, rather than one
        strided column at a time."""
        (x,), (out,) = eqn.inputs, eqn.outputs
        dt = x.type.dtype
        acc_t = "double" if dt.is_float else ctype(dt)
        acc = self.scratch(acc_t, cols)
        j, r = Sym("j"), self.fresh("r")
        with self.loop("j", cols, pragma="simd"):
            self.add(Set(Load(acc, j), Int(0)))
        with self.loop(r, rows), self.loop("j", cols, pragma="simd"), \
                self.axes_known(Sym(r) * cols + j, [Sym(r), j] if x.type.ndim == 2 else None) as i:
            self.add(Set(Load(acc, j), Bin("+", Load(acc, j), self.elem(x, i))))
        with self.loop("j", cols, pragma="simd"):
            self.add(Set(Load(Sym(self.vars[id(out)]), j),
                         Cast(ctype(out.type.dtype), Load(acc, j))))

    def _arg_reduce(self, eqn: Eqn, cmp: str) -> None:
        (out,) = eqn.outputs
        (x,) = eqn.inputs
        axis = eqn.params["axis"]
        self.define(out)
        dest = self.vars[id(out)]
        shape = x.type.shape
        kept = [shape[k] for k in range(len(shape)) if k != axis]

        def body(oidx):
            best, at = Sym(self.fresh("b")), Sym(self.fresh("k"))
            full = list(oidx)
            full.insert(axis, Int(0))
            self.add(Decl(best.name, ctype(x.type.dtype), self.elem(x, linear(shape, full))))
            self.add(Decl(at.name, "int64_t", Int(0)))
            j = self.fresh("j")
            full[axis] = Sym(j)
            v = self.elem(x, linear(shape, full))
            take: Expr = Bin(cmp, v, best)
            if x.type.dtype.is_float:  # the first NaN wins
                take = Bin("&&", Bin("==", best, best), Bin("||", take, Bin("!=", v, v)))
            with self.loop(j, shape[axis], start=Int(1)):
                self.add(If(take, [Set(best, v), Set(at, Sym(j))]))
            self.add(Set(_at(dest, out.type.shape, oidx), at))

        self.nd_loop(kept, body)

    def op_argmax(self, eqn: Eqn) -> None:
        self._arg_reduce(eqn, ">")

    def op_argmin(self, eqn: Eqn) -> None:
        self._arg_reduce(eqn, "<")

    def _cumulative(self, eqn: Eqn, sym: str) -> None:
        (out,) = eqn.outputs
        (x,) = eqn.inputs
        axis, reverse = eqn.params["axis"], eqn.params["reverse"]
        self.define(out)
        dest = self.vars[id(out)]
        shape = x.type.shape
        kept = [shape[k] for k in range(len(shape)) if k != axis]

        def body(oidx):
            acc = Sym(self.fresh("a"))
            self.add(Decl(acc.name, ctype(x.type.dtype), Int(0 if sym == "+" else 1)))
            j = self.fresh("j")
            full = list(oidx)
            full.insert(axis, Int(shape[axis] - 1) - Sym(j) if reverse else Sym(j))
            lin = linear(shape, full)
            with self.loop(j, shape[axis]):
                self.add(Set(acc, Bin(sym, acc, self.elem(x, lin))))
                self.add(Set(Load(Sym(dest), lin), acc))

        if out.type.size:
            self.nd_loop(kept, body)

    def op_cumsum(self, eqn: Eqn) -> None:
        self._cumulative(eqn, "+")

    def op_cumprod(self, eqn: Eqn) -> None:
        self._cumulative(eqn, "*")

    # -- products -----------------------------------------------------------------------

    def op_dot_general(self, eqn: Eqn) -> None:
        (out,) = eqn.outputs
        axes = eqn_axes(eqn)
        ins = list(eqn.inputs)
        for side, x in enumerate(eqn.inputs):
            if id(x) in self.fused.transposed:
                ins[side], perm = self.fused.transposed[id(x)]
                axes[side] = through_transpose(eqn, side, perm)
        a, b = ins
        (lc, lb), (rc, rb) = axes
        lf = [k for k in range(a.type.ndim) if k not in lc and k not in lb]
        rf = [k for k in range(b.type.ndim) if k not in rc and k not in rb]
        gemm = _as_gemm(a.type, b.type, lc, rc, lb, rb, lf, rf)
        if gemm is not None and a.type.dtype == b.type.dtype == out.type.dtype and \
                out.type.dtype.name in _GEMM_DTYPES and out.type.size:
            self._gemm(eqn, a, b, *gemm)
            return
        self.define(out)
        dest = self.vars[id(out)]
        dt = a.type.dtype
        acc_t = "double" if dt.is_float else ctype(dt)

        def body(oidx):
            nb, nl = len(lb), len(lf)
            bi, li, ri = oidx[:nb], oidx[nb:nb + nl], oidx[nb + nl:]
            acc = Sym(self.fresh("a"))
            self.add(Decl(acc.name, acc_t, Int(0)))

            def inner(cidx):
                ai, bj = [Int(0)] * a.type.ndim, [Int(0)] * b.type.ndim
                for ks, idx, into in ((lb, bi, ai), (rb, bi, bj), (lf, li, ai), (rf, ri, bj),
                                      (lc, cidx, ai), (rc, cidx, bj)):
                    for k, i in zip(ks, idx, strict=True):
                        into[k] = i
                x = self.elem(a, linear(a.type.shape, ai))
                y = self.elem(b, linear(b.type.shape, bj))
                if dt.is_bool:
                    self.add(Set(acc, Bin("|", acc, Bin("&", x, y))))
                else:
                    self.add(Set(acc, Bin("+", acc, Bin("*", Cast(acc_t, x), y))))

            self.nd_loop([a.type.shape[k] for k in lc], inner)
            self.add(Set(_at(dest, out.type.shape, oidx), Cast(ctype(out.type.dtype), acc)))

        self.nd_loop(out.type.shape, body)

    def _gemm(self, eqn: Eqn, a: Atom, b: Atom, batch: int, m: int, n: int, k: int,
              trans_a: bool, trans_b: bool) -> None:
        """A batch of row-major matrix products as one library call: the runtime's inline
        kernel, or BLAS ``gemm`` above the crossover.  A product with an epilogue
        computes the epilogue's result instead, into the addend's buffer when that dies
        at the epilogue's add right after the product."""
        (out,) = eqn.outputs
        dt = out.type.dtype
        x, y = self.buf(a), self.buf(b)
        alpha: Expr | None = None
        addend: Expr | None = None
        ep = self.plan.epilogues.get(id(eqn))
        if ep is None:
            self.define(out)
            c = self.buf(out)
        else:
            for e in ep.before:
                self.equation(e)
            self.fused.absorbed |= {id(e) for e in (*ep.before, *ep.eqns)}
            out = ep.out
            if ep.scale is not None:
                alpha = self.scalar(ep.scale)
            if ep.negate:
                alpha = Const(1, dt) if alpha is None else alpha
                alpha = Const(-alpha.value, dt) if isinstance(alpha, Const) else \
                    Op("neg", (alpha,), dt, dt)
            addend = self.buf(ep.addend)
            s = self.scope
            name = addend.name if isinstance(addend, Sym) else None
            owned = s.owned.get(name)
            if owned is not None and ep.adjacent and owned.last == s.plan.pos[ep.at] and \
                    owned.size == out.type.size and id(out) not in self.plan.dest and \
                    name not in (getattr(x, "name", None), getattr(y, "name", None)):
                self.vars[id(out)] = name  # the sum takes the addend's buffer over
                self.own(name, out)
                c = addend
            else:
                self.define(out)
                c = self.buf(out)
        lanes = 64 // dt.np.itemsize
        work_cap = GEMM_INLINE_MAX_WORK[not trans_b and n >= 2 * lanes]
        blas = dt.is_float and k > 0 and m * n * k > work_cap
        self.add(Gemm(dt, batch, m, n, k, x, trans_a, y, trans_b, c, blas, alpha, addend))

    # -- indexing -----------------------------------------------------------------------

    def _starts(self, x: Atom, starts: Sequence[Atom], sizes: Sequence[int]) -> list[Expr]:
        names = []
        for s, d, n in zip(starts, x.type.shape, sizes, strict=True):
            name = self.fresh("s")
            self.add(Decl(name, "int64_t", Fn("pb_clamp", (
                Cast("int64_t", self.scalar(s)), Int(0), Int(d - n)))))
            names.append(Sym(name))
        return names

    def op_dynamic_slice(self, eqn: Eqn) -> None:
        x, *starts = eqn.inputs
        at = self._starts(x, starts, eqn.params["sizes"])
        self.gather_loop(eqn.outputs[0], x, lambda idx: [
            s + i for s, i in zip(at, idx, strict=True)])

    def update_of(self, eqn: Eqn) -> None:
        """Start ``eqn``'s result as its first operand: that operand's buffer when it
        dies here and nothing else of ``eqn`` reads it, else a copy."""
        (out,) = eqn.outputs
        x, *others = eqn.inputs
        name = self.vars.get(id(x)) if isinstance(x, Var) else None
        s = self.scope
        if name not in [self.vars.get(id(a)) for a in others] and \
                self.reuse(out, s.at, s.at, [name]):
            return
        self.define(out)
        self.flat_loop(out, lambda i: self.elem(x, i))

    def op_dynamic_update_slice(self, eqn: Eqn) -> None:
        (out,) = eqn.outputs
        x, upd, *starts = eqn.inputs
        at = self._starts(x, starts, upd.type.shape)
        self.update_of(eqn)
        dest = Sym(self.vars[id(out)])
        if upd.type.size == 0:
            return
        self.nd_loop(upd.type.shape, lambda idx: self.add(Set(
            Load(dest, linear(x.type.shape, [s + i for s, i in zip(at, idx, strict=True)])),
            self.elem(upd, linear(upd.type.shape, idx)))))

    def _checked_index(self, eqn: Eqn, idx_atom: Atom, lin: Expr, axis: int,
                       size: int) -> Expr:
        j = Sym(self.fresh("g"))
        self.add(Decl(j.name, "int64_t", Cast("int64_t", self.elem(idx_atom, lin))))
        self.add(If(Bin("||", Bin("<", j, Int(0)), Bin(">=", j, Int(size))), [Raise(
            "IndexError", f"index %lld is out of bounds for axis {axis} with size {size}",
            (j,), self.mod.site(eqn))]))
        return j

    def op_gather(self, eqn: Eqn) -> None:
        (out,) = eqn.outputs
        x, idx = eqn.inputs
        axis = eqn.params["axis"]
        if id(out) in self.plan.fusible:  # a 1-d array's elements, loaded where read
            size = x.type.shape[0]
            if (id(idx), size) not in self.scope.checked:
                self.scope.checked.add((id(idx), size))
                self.nd_loop(idx.type.shape, lambda ix: self._checked_index(
                    eqn, idx, linear(idx.type.shape, ix), axis, size))
            src, inner = self.fused.remaps.get(id(x), (x, None))

            def element(i: Expr) -> Expr:
                j = Cast("int64_t", self.elem(idx, i))
                return Load(self.buf(src), j if inner is None else inner(j))

            self.read_shifted(src)
            self.fused.exprs[id(out)] = element
            return
        self.define(out)
        dest = self.vars[id(out)]
        n = idx.type.ndim

        def body(oidx):
            j = self._checked_index(eqn, idx, linear(idx.type.shape, oidx[axis:axis + n]),
                                    axis, x.type.shape[axis])
            src = [*oidx[:axis], j, *oidx[axis + n:]]
            self.add(Set(_at(dest, out.type.shape, oidx),
                         self.elem(x, linear(x.type.shape, src))))

        if out.type.size:
            self.nd_loop(out.type.shape, body)

    def _scatter(self, eqn: Eqn, add: bool) -> None:
        (out,) = eqn.outputs
        x, idx, upd = eqn.inputs
        axis = eqn.params["axis"]
        self.update_of(eqn)
        dest = Sym(self.vars[id(out)])
        n = idx.type.ndim
        if upd.type.size == 0:
            return

        def body(uidx):
            j = self._checked_index(eqn, idx, linear(idx.type.shape, uidx[axis:axis + n]),
                                    axis, x.type.shape[axis])
            at = linear(x.type.shape, [*uidx[:axis], j, *uidx[axis + n:]])
            value = self.elem(upd, linear(upd.type.shape, uidx))
            self.add(Set(Load(dest, at), value, "+=" if add else "="))

        self.nd_loop(upd.type.shape, body)

    def op_scatter(self, eqn: Eqn) -> None:
        self._scatter(eqn, add=False)

    def op_scatter_add(self, eqn: Eqn) -> None:
        self._scatter(eqn, add=True)
