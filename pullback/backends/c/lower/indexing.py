"""Handlers of indexing: ``dynamic_slice``, ``dynamic_update_slice``, ``gather``,
``scatter`` and ``scatter_add``.

Starts are clamped so that the window fits; gathered and scattered indices are
tested, and an index out of bounds raises NumPy's ``IndexError`` naming the equation's
line.  An update takes over its operand's buffer when the operand dies there.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

import numpy as np

from ....ir.core import Atom, Eqn, Lit, Var
from ..loops.ir import (
    Bin,
    Cast,
    Const,
    Decl,
    Expr,
    Fn,
    If,
    Int,
    Load,
    Raise,
    Set,
    Sym,
    element_at,
    linear,
)
from .handlers import handles

if TYPE_CHECKING:
    from .lowering import Lowering


def _starts(lw: Lowering, x: Atom, starts: Sequence[Atom], sizes: Sequence[int]) -> list[Expr]:
    names = []
    for s, d, n in zip(starts, x.type.shape, sizes, strict=True):
        name = lw.fresh("s")
        lw.add(Decl(name, "int64_t", Fn("pb_clamp", (
            Cast("int64_t", lw.scalar(s)), Int(0), Int(d - n)))))
        names.append(Sym(name))
    return names


@handles("dynamic_slice")
def op_dynamic_slice(lw: Lowering, eqn: Eqn) -> None:
    """A window read where used (a map from its linear index to its operand's, at the
    starts, clamped here) when fused, else copied out; a one-element window read by a
    reshape to 0-d (``scalars``) is one load into the reshape's local."""
    (out,), (x, *starts) = eqn.outputs, eqn.inputs
    at = _starts(lw, x, starts, eqn.params["sizes"])
    if id(out) in lw.plan.fusible:
        def window(i: Expr) -> Expr:
            return lw.index_at(x.type.shape, [s + lw.axis_index(out.type.shape, d, i)
                                              for d, s in enumerate(at)])

        src, inner = lw.fused.remaps.get(id(x), (x, None))
        lw.fused.remaps[id(out)] = (src, window if inner is None else
                                    lambda i: inner(window(i)))
        lw.read_shifted(src)
        lw.fused.by_axes.add(id(out))
        return
    reshape = lw.plan.element_reads.get(id(eqn))
    if reshape is not None:
        name = lw.define(reshape.outputs[0])
        lw.add(Set(Sym(name), lw.elem(x, linear(x.type.shape, at))))
        lw.fused.absorbed.add(id(reshape))
        return
    lw.gather_loop(eqn.outputs[0], x, lambda idx: [
        s + i for s, i in zip(at, idx, strict=True)])


def _update_of(lw: Lowering, eqn: Eqn, one: bool = False) -> None:
    """Start ``eqn``'s result as its first operand: that operand's buffer when it
    dies here and nothing else of ``eqn`` reads it, else a copy.  ``one``: the update
    is one element, read before it is written, so the buffer is taken even if loops
    elsewhere read it at other positions (``u[0]`` read by a slice, then ``u[i] = ...``
    in a loop: no copy of ``u`` per element written).  An operand that is one constant
    everywhere (zeros, which several arrays of a shape share) is written as the
    constant rather than read; one of unspecified contents (``np.empty``) not at all."""
    (out,) = eqn.outputs
    x, *others = eqn.inputs
    name = lw.vars.get(id(x)) if isinstance(x, Var) else None
    s = lw.scope
    if name not in [lw.vars.get(id(a)) for a in others] and \
            lw.reuse(out, s.at, s.at, [name], shifted=one):
        return
    lw.define(out)
    producer = lw.plan.producers.get(id(x))
    if producer is not None and producer.op.name == "empty":
        return
    fill = _filled(lw, x)
    lw.flat_loop(out, lambda i: fill if fill is not None else lw.elem(x, i))


def _filled(lw: Lowering, upd: Atom) -> Const | None:
    """The one value of an update that is a constant everywhere: a literal of equal
    elements, or a broadcast of a 0-d literal (the zeros a cotangent's window is reset
    to, which loop-invariant code motion hoists into a buffer of its own).  Stored as
    the constant, a store in a loop does not load that buffer each iteration."""
    dtype = upd.type.dtype
    if isinstance(upd, Var):
        e = lw.plan.producers.get(id(upd))
        if e is None or e.op.name != "broadcast_in_dim" or not isinstance(e.inputs[0], Lit):
            return None
        upd = e.inputs[0]
    if not isinstance(upd, Lit) or upd.value.size == 0:
        return None
    first = upd.value.flat[0]
    if not np.array_equal(upd.value, np.full_like(upd.value, first), equal_nan=True):
        return None
    return Const(np.asarray(first, dtype.np), dtype)


@handles("dynamic_update_slice")
def op_dynamic_update_slice(lw: Lowering, eqn: Eqn) -> None:
    (out,) = eqn.outputs
    x, upd, *starts = eqn.inputs
    at = _starts(lw, x, starts, upd.type.shape)
    _update_of(lw, eqn, one=upd.type.size == 1)
    dest = Sym(lw.vars[id(out)])
    if upd.type.size == 0:
        return
    fill = _filled(lw, upd)
    lw.nd_loop(upd.type.shape, lambda idx: lw.add(Set(
        Load(dest, linear(x.type.shape, [s + i for s, i in zip(at, idx, strict=True)])),
        fill if fill is not None else lw.elem(upd, linear(upd.type.shape, idx)))))


def _checked_index(lw: Lowering, eqn: Eqn, idx_atom: Atom, lin: Expr, axis: int,
                   size: int) -> Expr:
    j = Sym(lw.fresh("g"))
    lw.add(Decl(j.name, "int64_t", Cast("int64_t", lw.elem(idx_atom, lin))))
    lw.add(If(Bin("||", Bin("<", j, Int(0)), Bin(">=", j, Int(size))), [Raise(
        "IndexError", f"index %lld is out of bounds for axis {axis} with size {size}",
        (j,), lw.mod.site(eqn))]))
    return j


@handles("gather")
def op_gather(lw: Lowering, eqn: Eqn) -> None:
    (out,) = eqn.outputs
    x, idx = eqn.inputs
    axis = eqn.params["axis"]
    if id(out) in lw.plan.fusible:  # a 1-d array's elements, loaded where read
        size = x.type.shape[0]
        if (id(idx), size) not in lw.scope.checked:
            lw.scope.checked.add((id(idx), size))
            lw.nd_loop(idx.type.shape, lambda ix: _checked_index(
                lw, eqn, idx, linear(idx.type.shape, ix), axis, size))
        src, inner = lw.fused.remaps.get(id(x), (x, None))

        def element(i: Expr) -> Expr:
            j = Cast("int64_t", lw.elem(idx, i))
            return Load(lw.buf(src), j if inner is None else inner(j))

        lw.read_shifted(src)
        lw.fused.exprs[id(out)] = element
        return
    lw.define(out)
    dest = lw.vars[id(out)]
    n = idx.type.ndim

    def body(oidx):
        j = _checked_index(lw, eqn, idx, linear(idx.type.shape, oidx[axis:axis + n]),
                           axis, x.type.shape[axis])
        src = [*oidx[:axis], j, *oidx[axis + n:]]
        lw.add(Set(element_at(dest, out.type.shape, oidx),
                   lw.elem(x, linear(x.type.shape, src))))

    if out.type.size:
        lw.nd_loop(out.type.shape, body)


@handles("scatter", "scatter_add")
def op_scatter(lw: Lowering, eqn: Eqn) -> None:
    add = eqn.op.name == "scatter_add"
    (out,) = eqn.outputs
    x, idx, upd = eqn.inputs
    axis = eqn.params["axis"]
    _update_of(lw, eqn)
    dest = Sym(lw.vars[id(out)])
    n = idx.type.ndim
    if upd.type.size == 0:
        return

    def body(uidx):
        j = _checked_index(lw, eqn, idx, linear(idx.type.shape, uidx[axis:axis + n]),
                           axis, x.type.shape[axis])
        at = linear(x.type.shape, [*uidx[:axis], j, *uidx[axis + n:]])
        value = lw.elem(upd, linear(upd.type.shape, uidx))
        lw.add(Set(Load(dest, at), value, "+=" if add else "="))

    lw.nd_loop(upd.type.shape, body)
