"""``jacfwd``, ``jacrev`` and ``hessian``: whole Jacobians, one column per input scalar
by forward mode or one row per output scalar by reverse mode, laid out as
``result.shape + argument.shape``."""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..frontend.stager import Stager
from ..frontend.subfunction import SubFunction
from ..frontend.values import Ref
from ..ir.builder import current
from ..ir.core import Atom, Lit
from ..ir.types import TensorType, dtype, int64
from ..keys import value_key
from ..ops import elementwise as E
from ..ops import index as I
from ..ops import shape as S
from ..ops.batching import at
from ..ops.control import for_loop
from ..ops.derivs import zeros
from ..transforms.jvp import has_loops, jvp_emit, jvp_func
from ..transforms.vjp import vjp_emit, vjp_func
from ..transforms.vmap import vmap_emit
from ..tree import tree_unflatten
from .arguments import Args, is_static_float
from .lanes import lane_count, lane_rows, unit_lanes
from .transform import Transform, differentiated

#: ``jacfwd`` with respect to this many scalars or fewer computes every column in one
#: forward pass (one lane each) instead of one pass per column in a rolled loop.
FORWARD_JACOBIAN = 8

#: A Jacobian whose rows (columns), all at once, take at most this many elements per
#: value that depends on the inputs is computed by ``vmap`` of one backward (forward) pass: its
#: matrix-vector products become matrix-matrix products.  Larger ones, and functions
#: with loops or a tape (a derivative inside: the tape would be spread over every row),
#: run one pass per row in a rolled loop.
BATCHED_JACOBIAN = 1 << 22

Blocks = dict[tuple[int, int], Atom]  # (result, operand) -> d result / d operand


class Jacobian(Transform):
    """The Jacobian of ``fn`` by forward mode (one ``jvp`` per input element, a rolled
    loop) or reverse mode (one ``vjp`` per output element).  For each result leaf, the
    structure of the ``argnums`` arguments with arrays of shape
    ``result.shape + argument.shape``."""

    def __init__(self, fn: Callable, argnums: int | Sequence[int], forward: bool):
        super().__init__(fn)
        self.argnums, self.forward = argnums, forward

    def __pb_key__(self, key_of: Callable[[Any], Any]) -> tuple:
        return ("jacobian", key_of(self.fn), value_key(self.argnums), self.forward)

    def __pb_stage__(self, st: Stager, args: list, kwargs: dict) -> Any:
        who = "pb.jacfwd" if self.forward else "pb.jacrev"
        sub, where, nums, varied = differentiated(st, self.fn, args, kwargs, self.argnums, who)
        ins = [q for q, v in enumerate(varied) if v]
        outs = [i for i, t in enumerate(sub.func.out_types) if t.dtype.is_float]
        n = lane_count(sub, ins) if self.forward else \
            sum(sub.func.out_types[i].size for i in outs)
        if self.forward and 0 < n <= FORWARD_JACOBIAN:
            jac = _by_lanes(sub, ins, outs)
        elif _batched(sub, n, varied):
            jac = _by_vmap(sub, ins, outs, varied, self.forward)
        elif self.forward:
            jac = _by_columns(sub, ins, outs)
        else:
            jac = _by_rows(sub, ins, outs, varied)
        return _jacobian_tree(sub, where, nums, outs, jac, isinstance(self.argnums, int))


def _by_lanes(sub: SubFunction, ins: list[int], outs: list[int]) -> Blocks:
    """Every column from one forward pass, one lane per input scalar."""
    res, touts = unit_lanes(sub, ins)
    jac: Blocks = {}
    for i in outs:
        rows = lane_rows(sub, ins, touts[i], res[i].type)
        for q, buf in zip(ins, rows, strict=True):
            jac[i, q] = _forward_layout(buf, sub.operands[q].type, sub.func.out_types[i])
    return jac


def _batched(sub: SubFunction, n: int, varied: list[bool]) -> bool:
    """Whether ``n`` rows (or columns) are computed by one batched pass: its batched
    values are the derivatives of those that depend on the varied inputs."""
    eqns = list(sub.func.block.walk())
    if n < 2 or has_loops(sub.func) or any(e.op.name.startswith("stack_") for e in eqns):
        return False  # one row is one pass either way
    active = {id(p) for p, v in zip(sub.func.block.params, varied, strict=True) if v}
    largest = max([p.type.size for p, v in zip(sub.func.block.params, varied, strict=True)
                   if v] or [0])
    for e in eqns:
        if any(id(a) in active for a in e.inputs):
            active.update(id(o) for o in e.outputs)
            largest = max([largest, *(o.type.size for o in e.outputs
                                      if isinstance(o.type, TensorType))])
    return n * largest <= BATCHED_JACOBIAN


def _by_vmap(sub: SubFunction, ins: list[int], outs: list[int], varied: list[bool],
             forward: bool) -> Blocks:
    """Every column (row) from ``vmap`` of one forward (backward) pass over the unit
    vectors of the inputs (outputs)."""
    func, ops = sub.func, sub.operands
    seeded = [ops[q].type for q in ins] if forward else [func.out_types[i] for i in outs]
    n = sum(t.size for t in seeded)
    offsets = list(itertools.accumulate([t.size for t in seeded], initial=0))
    units = [_unit_rows(n, o, t) for o, t in zip(offsets, seeded, strict=False)]
    pass_ = jvp_func(func, varied) if forward else vjp_func(func, varied)
    res, dims = vmap_emit(pass_, [*ops, *units], [None] * len(ops) + [0] * len(units), n)
    # the lanes go last in forward mode (a column per input), first in reverse mode
    derivs = [at(r, d, n, r.type.ndim - (d is not None) if forward else 0)
              for r, d in zip(res[len(func.out_types):], dims[len(func.out_types):],
                              strict=True)]
    jac: Blocks = {}
    for k, i in enumerate(outs):
        for m, q in enumerate(ins):
            tq, ti = ops[q].type, func.out_types[i]
            if forward:
                cols = _lanes_of(derivs[k], offsets[m], tq.size, axis=ti.ndim)
                jac[i, q] = S.reshape(cols, shape=ti.shape + tq.shape)
            else:
                rows = _lanes_of(derivs[m], offsets[k], ti.size, axis=0)
                jac[i, q] = S.reshape(rows, shape=ti.shape + tq.shape)
    return jac


def _unit_rows(n: int, offset: int, t: TensorType) -> Atom:
    """Rows ``offset .. offset + t.size`` of the n-by-n identity, each in ``t``'s shape:
    ``[n, *t.shape]`` (two index vectors compared, which fuse into one kernel)."""
    shape = (n, t.size)
    rows = S.broadcast_in_dim(S.iota(shape=(n,), dim=0, dtype=int64), shape=shape, dims=(0,))
    cols = E.add(S.iota(shape=(t.size,), dim=0, dtype=int64), Lit(np.int64(offset)))
    hot = E.eq(rows, S.broadcast_in_dim(cols, shape=shape, dims=(1,)))
    return S.reshape(E.convert(hot, dtype=t.dtype, weak=False), shape=(n, *t.shape))


def _lanes_of(x: Atom, start: int, count: int, axis: int) -> Atom:
    """``x``'s entries ``start .. start + count`` along ``axis`` (all of them: ``x``)."""
    t = x.type
    if start == 0 and count == t.shape[axis]:
        return x
    lo = [0] * t.ndim
    hi = list(t.shape)
    lo[axis], hi[axis] = start, start + count
    return S.slice_(x, start=tuple(lo), limit=tuple(hi), stride=(1,) * t.ndim)


def _by_columns(sub: SubFunction, ins: list[int], outs: list[int]) -> Blocks:
    """One forward pass per input scalar, in a rolled loop per operand."""
    out_types = [sub.func.out_types[i] for i in outs]
    jac: Blocks = {}
    for q in ins:
        tq = sub.operands[q].type

        def rows(k, q=q, tq=tq):
            ts: list[tuple | None] = [None] * len(sub.operands)
            ts[q] = (_basis(k, tq),)
            res, touts = jvp_emit(sub.func, sub.operands, ts)
            return [touts[i][0] if touts[i] is not None else zeros(res[i].type)
                    for i in outs]

        for i, buf in zip(outs, _rows(tq.size, out_types, rows), strict=True):
            jac[i, q] = _forward_layout(buf, tq, sub.func.out_types[i])
    return jac


def _by_rows(sub: SubFunction, ins: list[int], outs: list[int], varied: list[bool]) -> Blocks:
    """One backward pass per output scalar, in a rolled loop per result."""
    in_types = [sub.operands[q].type for q in ins]
    jac: Blocks = {}
    for i in outs:
        ti = sub.func.out_types[i]

        def rows(k, i=i, ti=ti):
            res, backward = vjp_emit(sub.func, sub.operands, varied)
            seed: list[Atom | None] = [None] * len(res)
            seed[i] = _basis(k, ti)
            cts = backward(seed)
            return [cts[q] if cts[q] is not None else zeros(t)
                    for q, t in zip(ins, in_types, strict=True)]

        for q, buf in zip(ins, _rows(ti.size, in_types, rows), strict=True):
            jac[i, q] = S.reshape(buf, shape=ti.shape + sub.operands[q].type.shape)
    return jac


def _basis(k: Atom, t: TensorType) -> Atom:
    """The k-th unit vector of ``t``'s flattened shape, in ``t``'s shape."""
    n = max(t.size, 1)
    hot = E.eq(S.iota(shape=(n,), dim=0, dtype=int64), k)
    return S.reshape(E.convert(hot, dtype=t.dtype, weak=False), shape=t.shape)


def _stacked(buf: Atom, k: Atom, row: Atom) -> Atom:
    """``buf[k] = row`` for a buffer with one row per basis vector."""
    row = S.reshape(row, shape=(1, *row.type.shape))
    zero = Lit(np.int64(0))
    return I.dynamic_update_slice(buf, row, k, *[zero] * (buf.type.ndim - 1))


def _rows(n: int, row_types: Sequence[TensorType], body: Callable) -> list[Atom]:
    """Buffers ``[n, *row_type]`` filled by ``body(k) -> rows`` for k in range(n), as a
    rolled loop."""
    bufs = [TensorType((n, *t.shape), t.dtype) for t in row_types]
    if n == 0:
        return [zeros(t) for t in bufs]

    def loop_body(k, *carry):
        return [_stacked(buf, k, row) for buf, row in zip(carry, body(k), strict=True)]

    block = current().block([TensorType((), int64), *bufs], loop_body)
    res = for_loop(Lit(np.int64(0)), Lit(np.int64(n)), Lit(np.int64(1)),
                   *[zeros(t) for t in bufs], body=block)
    return list(res)


def _forward_layout(buf: Atom, tq: TensorType, to: TensorType) -> Atom:
    """Rows indexed by input elements, ``[n_in, *out]``, as ``[*out, *in]``."""
    x = S.reshape(buf, shape=tq.shape + to.shape)
    nin, nout = len(tq.shape), len(to.shape)
    return S.transpose(x, perm=(*range(nin, nin + nout), *range(nin)))


def _jacobian_tree(sub: SubFunction, where: Args, nums: Sequence[int], outs: Sequence[int],
                   jac: Blocks, single: bool) -> Any:
    """The blocks in the result's structure, each leaf holding the ``nums`` arguments'
    structure (one tree if ``single``)."""
    tree, spec, _ = sub.out_spec
    leaves = []
    k = 0
    for s in spec:
        if s[0] != "dyn":
            leaves.append(_static_jacobian(s[1], where, nums, single))
            continue
        if k in outs:
            def leaf(q, x, k=k):
                return Ref(jac[k, q]) if (k, q) in jac else None

            trees = tuple(where.tree(n, leaf) for n in nums)
            leaves.append(trees[0] if single else trees)
        else:
            leaves.append(None)
        k += 1
    return tree_unflatten(tree, leaves)


def _static_jacobian(value: Any, where: Args, nums: Sequence[int], single: bool) -> Any:
    """The Jacobian of a compile-time result: zeros for a float (it is constant), of
    shape ``value.shape + argument.shape``; None for what has no derivative."""
    if not is_static_float(value):
        return None
    shape = np.shape(value)
    dt = value.dtype if isinstance(value, (np.ndarray, np.generic)) else None

    def leaf(q: int, x: Ref) -> Any:
        t = x.type
        if not t.dtype.is_float:
            return None
        return Ref(zeros(TensorType(shape + t.shape, dtype(dt) if dt is not None else t.dtype)))

    trees = tuple(where.tree(n, leaf) for n in nums)
    return trees[0] if single else trees


def jacfwd(fn: Callable, argnums: int | Sequence[int] = 0) -> Jacobian:
    """The Jacobian of ``fn`` by forward mode (cheap for few inputs)."""
    return Jacobian(fn, argnums, forward=True)


def jacrev(fn: Callable, argnums: int | Sequence[int] = 0) -> Jacobian:
    """The Jacobian of ``fn`` by reverse mode (cheap for few outputs)."""
    return Jacobian(fn, argnums, forward=False)


def hessian(fn: Callable, argnums: int | Sequence[int] = 0) -> Jacobian:
    """The Hessian of a scalar ``fn``: forward mode over reverse mode."""
    return jacfwd(jacrev(fn, argnums), argnums)
