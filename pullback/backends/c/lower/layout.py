"""Handlers of layout ops: ``broadcast_in_dim``, ``reshape``, ``transpose``, ``slice``,
``rev``, ``iota``, ``empty``, ``concatenate`` and ``pad``.

Fused (``plan.fusion``), most are read where used: a broadcast at the loop's axis
indices, a slice or reshape of one through a map of the linear index, a concatenation or
pad along the first axis as a choice per element; a transpose only products read is
read by them in place.  Otherwise each is one loop nest copying its operand.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ....ir.core import Eqn
from ..loops.ir import (
    Bin,
    Cast,
    Cond,
    Expr,
    If,
    Int,
    Load,
    Set,
    Sym,
    ctype,
    element_at,
    linear,
    map_exprs,
    same_but_ones,
    strides,
)
from .elementwise import op_elementwise
from .handlers import handles

if TYPE_CHECKING:
    from .lowering import Lowering

#: The widest last axis a concatenation along it writes row by row, unrolled.
CONCAT_UNROLL = 64


@handles("broadcast_in_dim")
def op_broadcast_in_dim(lw: Lowering, eqn: Eqn) -> None:
    (x,) = eqn.inputs
    if x.type.shape == ():
        op_elementwise(lw, eqn)
        return
    out, dims = eqn.outputs[0], eqn.params["dims"]
    if id(out) in lw.plan.fusible:
        lw.fused.by_axes.add(id(out))
        lw.fused.exprs[id(out)] = lambda i: lw.elem(x, linear(x.type.shape, [
            Int(0) if x.type.shape[k] == 1 else lw.axis_index(out.type.shape, d, i)
            for k, d in enumerate(dims)]))
        return
    lw.gather_loop(out, x, lambda idx: [
        Int(0) if x.type.shape[k] == 1 else idx[d] for k, d in enumerate(dims)])


@handles("reshape")
def op_reshape(lw: Lowering, eqn: Eqn) -> None:
    """A view of its operand's buffer, or a copy where it cannot be one (a fused
    slice's reshape reads what the slice reads, at the same linear index).  A 0-d value
    reshaped for a one-element update is read as itself (``plan.scalars``)."""
    (out,) = eqn.outputs
    if id(out) in lw.plan.element_writes:
        x = eqn.inputs[0]
        lw.fused.exprs[id(out)] = lambda i: lw.scalar(x)
        return
    if id(out) in lw.buffers.in_columns:  # its kernel stored it in the concatenation
        return
    if id(out) in lw.plan.fusible and id(eqn.inputs[0]) in lw.fused.remaps:
        lw.fused.remaps[id(out)] = lw.fused.remaps[id(eqn.inputs[0])]
        if id(eqn.inputs[0]) in lw.fused.by_axes and \
                same_but_ones(out.type.shape, eqn.inputs[0].type.shape):
            lw.fused.by_axes.add(id(out))
        return
    if id(out) in lw.plan.fusible and id(eqn.inputs[0]) in lw.fused.exprs:
        x = eqn.inputs[0]
        lw.fused.exprs[id(out)] = lambda i: lw.elem(x, i)  # the same linear index
        return
    if id(out) in lw.scope.plan.views:
        lw.vars[id(out)] = lw.vars[id(eqn.inputs[0])]
        return
    lw.define(out)
    lw.flat_loop(out, lambda i: lw.elem(eqn.inputs[0], i))


@handles("transpose")
def op_transpose(lw: Lowering, eqn: Eqn) -> None:
    perm = eqn.params["perm"]
    if id(eqn.outputs[0]) in lw.plan.fusible:  # the products reading it read its source
        lw.fused.transposed[id(eqn.outputs[0])] = (eqn.inputs[0], perm)
        return

    def index_of(idx):
        src = [Int(0)] * len(perm)
        for j, p in enumerate(perm):
            src[p] = idx[j]
        return src

    lw.gather_loop(eqn.outputs[0], eqn.inputs[0], index_of)


@handles("slice")
def op_slice(lw: Lowering, eqn: Eqn) -> None:
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
        return lw.index_at(x.type.shape, [
            s + lw.axis_index(out.type.shape, d, i) * st
            for d, (s, st) in enumerate(zip(start, stride, strict=True))])

    if id(out) in lw.plan.fusible and id(x) in lw.fused.exprs:  # computed there
        lw.fused.exprs[id(out)] = lambda i: lw.elem(x, at(i))
        # the buffers its expression reads are read at other elements' positions
        map_exprs(lw.elem(x, Sym("i")), lambda e: lw.buffers.shifted.add(e.ptr.name) or e
                  if isinstance(e, Load) and isinstance(e.ptr, Sym) else e)
    elif id(out) in lw.plan.fusible:
        src, inner = lw.fused.remaps.get(id(x), (x, None))
        lw.fused.remaps[id(out)] = (src, at if inner is None else lambda i: inner(at(i)))
        lw.read_shifted(src)
        if not rows:  # its readers' kernels by rows read it without dividing
            lw.fused.by_axes.add(id(out))
    elif rows:
        lw.define(out)
        lw.flat_loop(out, lambda i: lw.elem(x, at(i)))
    else:
        lw.gather_loop(out, x, lambda idx: [
            s + i * st for i, s, st in zip(idx, start, stride, strict=True)])


@handles("rev")
def op_rev(lw: Lowering, eqn: Eqn) -> None:
    x = eqn.inputs[0]
    dims = eqn.params["dims"]
    lw.gather_loop(eqn.outputs[0], x, lambda idx: [
        Int(x.type.shape[k] - 1) - i if k in dims else i for k, i in enumerate(idx)])


@handles("empty")
def op_empty(lw: Lowering, eqn: Eqn) -> None:
    """A buffer, nothing written (``np.empty``'s contents are unspecified)."""
    lw.define(eqn.outputs[0])


@handles("iota")
def op_iota(lw: Lowering, eqn: Eqn) -> None:
    (out,) = eqn.outputs
    dim, ct = eqn.params["dim"], ctype(out.type.dtype)
    if id(out) in lw.plan.fusible:  # its readers' loops count along the axis
        lw.fused.by_axes.add(id(out))
        lw.fused.exprs[id(out)] = lambda i: Cast(ct, lw.axis_index(out.type.shape, dim, i))
        return
    lw.define(out)
    dest, shape = lw.vars[id(out)], out.type.shape
    if shape == ():
        lw.add(Set(Sym(dest), Int(0)))
        return
    lw.nd_loop(shape, lambda idx: lw.add(Set(element_at(dest, shape, idx), Cast(ct, idx[dim]))))


@handles("concatenate")
def op_concatenate(lw: Lowering, eqn: Eqn) -> None:
    (out,) = eqn.outputs
    if id(out) in lw.plan.fusible:  # read where needed, from the operand it falls in
        for x in eqn.inputs:
            lw.read_shifted(x)
        lw.fused.exprs[id(out)] = lambda i: _joined(lw, eqn, i)
        return
    if id(out) not in lw.vars:  # (defined already where an operand was placed in it)
        lw.define(out)
    axis, dest = eqn.params["axis"], lw.vars[id(out)]
    inside = lw.buffers.placed.get(id(out), set())
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
                for c in range(0 if lw.vars.get(id(x)) in inside or
                               id(x) in lw.buffers.in_columns else w):
                    lw.add(Set(Load(Sym(dest), at * width + (col + c)),
                               lw.elem(x, at * w + c if w > 1 else at)))
                col += w

        if any(lw.vars.get(id(x)) not in inside and id(x) not in lw.buffers.in_columns
               for x in eqn.inputs):
            lw.nd_loop(rows, row)
        return
    offset = 0
    for x in eqn.inputs:
        def body(idx, x=x, offset=offset):
            at = [i + offset if k == axis else i for k, i in enumerate(idx)]
            lw.add(Set(element_at(dest, out.type.shape, at),
                       lw.elem(x, linear(x.type.shape, idx))))

        if x.type.size and lw.vars.get(id(x)) not in inside and \
                id(x) not in lw.buffers.in_columns:
            lw.nd_loop(x.type.shape, body)
        offset += x.type.shape[axis]


def _joined(lw: Lowering, eqn: Eqn, i: Expr) -> Expr:
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
        value = lw.elem(x, i if start == 0 else Bin("-", i, Int(start)))
        chosen = value if chosen is None else \
            Cond(_test("<", i, parts[k + 1][1]), value, chosen)
    assert chosen is not None  # (a fused value has elements)
    return chosen


def _test(op: str, i: Expr, bound: int) -> Expr:
    """``i op bound``, with a shifted index ``j - c`` compared as ``j op bound + c`` (so
    that index-set splitting sees the loop index against a constant)."""
    j, shifted = i, bound
    while isinstance(j, Bin) and j.op in "+-" and isinstance(j.b, Int):
        shifted += j.b.value if j.op == "-" else -j.b.value
        j = j.a
    return Bin(op, j, Int(shifted)) if isinstance(j, Sym) else Bin(op, i, Int(bound))


@handles("pad")
def op_pad(lw: Lowering, eqn: Eqn) -> None:
    (out,) = eqn.outputs
    x, value = eqn.inputs
    lo, interior = eqn.params["lo"], eqn.params["interior"]
    if id(out) in lw.plan.fusible:  # read where needed: an element of x, or the value
        before = lo[0] * strides(out.type.shape)[0]

        def element(i: Expr) -> Expr:
            j = i if before == 0 else Bin("-", i, Int(before))
            end = before + x.type.size
            tests = ([_test(">=", i, before)] if before > 0 else []) + \
                ([_test("<", i, end)] if out.type.size > end else [])
            if not tests:  # (x cropped at both ends)
                return lw.elem(x, j)
            inside = tests[0] if len(tests) == 1 else Bin("&&", *tests)
            return Cond(inside, lw.elem(x, j), lw.scalar(value))

        lw.read_shifted(x)
        lw.fused.exprs[id(out)] = element
        return
    lw.define(out)
    dest = lw.vars[id(out)]
    if out.type.size == 0:
        return
    lw.flat_loop(out, lambda i: lw.scalar(value))
    if x.type.size == 0:
        return

    def body(idx):
        at = [i * (g + 1) + lo_ for i, lo_, g in zip(idx, lo, interior, strict=True)]
        inside: Expr | None = None
        for a, d in zip(at, out.type.shape, strict=True):
            term = Bin("&&", Bin(">=", a, Int(0)), Bin("<", a, Int(d)))
            inside = term if inside is None else Bin("&&", inside, term)
        lw.add(If(inside, [Set(element_at(dest, out.type.shape, at),
                               lw.elem(x, linear(x.type.shape, idx)))]))

    lw.nd_loop(x.type.shape, body)
