"""Fusion: which graph equations of a block run as one loop, and which values are
computed where they are read instead of stored.

A *run* is two or more pointwise equations and full reductions over one shape, computed
as one loop (a kernel) at the place of the first (``runs``); equations between the
members stay in place, after it.  A pointwise value is *fused* (``fusible``) when its
readers compute it element by element in their own loops, which the cost model below
decides against storing it once and loading it.  ``lower`` turns these decisions into
loop IR kernels.
"""

from __future__ import annotations

import math
from collections.abc import Collection, Sequence
from dataclasses import dataclass

from .... import ops as _ops  # noqa: F401  (every op registered: the sets below read them)
from ....ir.core import Atom, Block, Eqn, Var
from ....ir.op import OPS
from ....ir.rewrite import block_readers, free_vars
from ....ir.types import TensorType

#: Elementwise ops whose elements come from their index, not from operands' elements
#: (each is lowered by a handler of its own).
GENERATORS = {"iota", "random_bits"}
#: Pointwise ops lowered by rules of their own rather than as the C function of their name.
OWN_RULES = {"select", "convert", "stop_gradient"}


def _elementwise(arity: int) -> set[str]:
    """The ops declared elementwise with ``arity`` operands, but for those above."""
    return {name for name, op in OPS.items() if op.fusion == "elementwise" and
            op.arity == arity} - GENERATORS - OWN_RULES


#: Elementwise ops computed as the C function (or operator) of their name, of one
#: operand and of two (``emit/codegen.py``).
UNARY = _elementwise(1)
BINARY = _elementwise(2)
#: How each reduction over axes accumulates in C: its kind and its operator (max and min
#: call functions).  argmax and argmin, reductions along one axis, have their own handler.
REDUCE = {"reduce_sum": ("sum", "+"), "reduce_prod": ("prod", "*"),
          "reduce_max": ("max", None), "reduce_min": ("min", None)}
POINTWISE = UNARY | BINARY | OWN_RULES
#: Consumers that read each element of their operand once, by linear index.
_READS_ONCE = {"select", "convert", "stop_gradient", "transpose", "slice", "rev",
               "reshape", "concatenate", *REDUCE}
#: Pointwise ops whose C expression repeats an operand when it is not a float.
_REPEATS = {"abs", "sign", "max", "min"}


def is_pointwise(eqn: Eqn) -> bool:
    """Each element of the result is a function of the same element of each operand
    (0-d operands broadcast), as a broadcast of a 0-d value is too."""
    if eqn.op.name == "broadcast_in_dim":
        return eqn.inputs[0].type.shape == ()
    return eqn.op.name in POINTWISE



def is_broadcast(eqn: Eqn) -> bool:
    """A broadcast of an array: fused, each element reads its operand's element at the
    index the loop's axis indices map to."""
    return eqn.op.name == "broadcast_in_dim" and eqn.inputs[0].type.shape != ()


def is_iota(eqn: Eqn) -> bool:
    """An array of each element's index along an axis (an ``np.eye`` or triangle mask
    compares two): fused, like a broadcast, into the pointwise kernels that read it, whose
    loops have the axis indices at hand."""
    return eqn.op.name == "iota" and eqn.outputs[0].type.shape != ()


def through_transpose(dot: Eqn, side: int, perm: Sequence[int]
                      ) -> tuple[tuple[int, ...], tuple[int, ...]] | None:
    """The contracted and batch axes of ``dot``'s operand ``side`` renumbered to read the
    source of that operand, a transpose by ``perm``, in place of it; None when the
    transpose would reorder the operand's free axes (and so the product's)."""
    contract, batch = eqn_axes(dot)[side]
    free = [perm[i] for i in range(len(perm)) if i not in contract and i not in batch]
    if free != sorted(free):
        return None
    return tuple(perm[i] for i in contract), tuple(perm[i] for i in batch)


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


def as_gemm(a: TensorType, b: TensorType, axes: Sequence[tuple[Sequence[int], Sequence[int]]]
            ) -> tuple | None:
    """``(batch, m, n, k, trans_a, trans_b)`` when a ``dot_general`` of operands of types
    ``a`` and ``b`` and (contracted, batch) ``axes`` per operand is a batch of row-major
    matrix products: leading batch axes in order on both sides, free and contracting axes
    each one contiguous block, contracting axes in the same order; else None."""
    (lc, lb), (rc, rb) = axes
    lf = [d for d in range(a.ndim) if d not in lc and d not in lb]
    rf = [d for d in range(b.ndim) if d not in rc and d not in rb]
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


def absorbs_transpose(dot: Eqn, side: int, transpose: Eqn) -> bool:
    """Whether ``dot`` reads operand ``side``, a ``transpose``, from its source in place:
    the product's free axes keep their order, and a product that is a GEMM stays one."""
    axes = through_transpose(dot, side, transpose.params["perm"])
    if axes is None:
        return False
    types = [x.type for x in dot.inputs]
    before = as_gemm(*types, eqn_axes(dot))
    renumbered = eqn_axes(dot)
    renumbered[side] = axes
    types[side] = transpose.inputs[0].type
    return before is None or as_gemm(*types, renumbered) is not None


def eqn_axes(dot: Eqn) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    """Per operand of a ``dot_general``: its contracted and batch axes."""
    (lc, rc), (lb, rb) = dot.params["contract"], dot.params["batch"]
    return [(tuple(lc), tuple(lb)), (tuple(rc), tuple(rb))]


def loop_shape(eqn: Eqn) -> tuple[int, ...] | None:
    """The shape of the loop ``eqn`` can join: a pointwise result's, a full reduction's
    operand's (None for other equations and 0-d values)."""
    if is_pointwise(eqn):
        shape = eqn.outputs[0].type.shape
    elif eqn.op.name in REDUCE and len(eqn.params["axes"]) == eqn.inputs[0].type.ndim:
        shape = eqn.inputs[0].type.shape
    else:
        return None
    return shape or None


#: How many later equations over its shape a run tries to take in.
RUN_REACH = 2048


def find_runs(blk: Block, apart: Collection[int] = ()) -> dict[int, list[Eqn]]:
    """Runs of two or more pointwise equations and full reductions over one shape,
    computed as one loop at the place of the first (keyed by its index).  Each reads
    only values that exist there (made before it, or by a run that starts before it) or
    pointwise values of its own run; reduced values exist after the loop.  Equations
    between the members stay in place, after the loop; those in ``apart`` (products'
    epilogues) join no run."""
    eqns = blk.eqns
    where = {id(o): k for k, e in enumerate(eqns) for o in e.outputs}
    same: dict[tuple[int, ...], list[int]] = {}
    for k, e in enumerate(eqns):
        shape = loop_shape(e)
        if shape is not None and id(e) not in apart:
            same.setdefault(shape, []).append(k)
    runs: dict[int, list[Eqn]] = {}
    start: dict[int, int] = {}  # an equation of a run: where its run starts
    for ks in same.values():
        for n, k in enumerate(ks):
            if k in start:
                continue
            members = [k]
            made = {id(eqns[k].outputs[0])} if is_pointwise(eqns[k]) else set()
            for j in ks[n + 1:n + 1 + RUN_REACH]:
                e = eqns[j]
                if j not in start and all(
                        id(a) in made or where.get(id(a), -1) < k or
                        start.get(where[id(a)], k) < k for a in e.inputs):
                    members.append(j)
                    if is_pointwise(e):
                        made.add(id(e.outputs[0]))
            if len(members) >= 2:
                runs[k] = [eqns[j] for j in members]
                start.update((j, k) for j in members)
    return runs


#: Per-element costs that decide whether a value is computed in each loop that reads it
#: rather than stored once, in units of one vector arithmetic operation: a division or
#: square root, a call of a (vectorised) math function, a byte moved between memory and
#: the cores.  Storing an element moves its bytes twice (the line is read, then written).
#: Measured on 10M float32 gradients, one thread: recomputing ``exp(x)`` in the backward
#: loop costs about what storing and loading it does, recomputing a sigmoid and the
#: terms of its derivative instead of storing three arrays saves a quarter of the time.
COST_DIV, COST_CALL, COST_BYTE = 2, 4, 2
#: A math function of float64 elements: a vector holds half as many, and glibc's
#: double-precision versions take more steps.  Measured on an AMD EPYC, one thread, 1.28M
#: elements: ``sum(exp(x - a))`` 2.0 ms against 0.73 ms in float32 and 0.79 ms for
#: ``sum(x)`` (the bytes of x: 16 units), so an exp costs about 24 units; storing it where
#: it is computed cost nothing measurable, and LogSumExp's gradient, which reads it in
#: two later loops, took 20 % less time with it stored than computed again in each.
COST_CALL_F64 = 24
#: A value only read a few rows further on (``y[:-1]`` in ``concatenate((y0, y[:-1]))``,
#: each stage of a Runge-Kutta step reading the last one shifted) whose expression costs
#: at most this is computed at the shifted index where read: its operands are read there
#: anyway, a few elements apart, and the stages run as one loop.
SHIFTED_MAX = 8
#: Values whose expression costs more than this are never computed twice.
RECOMPUTE_MAX = 64
_ARITH = {"neg", "abs", "sign", "floor", "ceil", "round", "trunc", "not", "add", "sub",
          "mul", "max", "min", "and", "or", "xor", "eq", "ne", "lt", "le", "gt", "ge",
          "select", "convert", "stop_gradient", "broadcast_in_dim", "iota"}


def _op_cost(eqn: Eqn) -> int:
    name = eqn.op.name
    if name in _ARITH:
        return 1
    if name in ("div", "sqrt"):
        return COST_DIV
    return COST_CALL_F64 if eqn.outputs[0].type.dtype.name == "float64" else COST_CALL


def _expressions(blk: Block, kept: set[int]) -> dict[int, tuple[int, dict[int, int], int]]:
    """Pointwise array values of ``blk`` as expressions of the arrays they read from
    memory (values in ``kept`` have a buffer: they are read, not composed), up to a
    cost of ``RECOMPUTE_MAX``: the cost of each element, the arrays it reads (their
    bytes per element, by value), and the cost of its costliest operation."""
    parts: dict[int, tuple[dict[int, int], dict[int, int]]] = {}  # equations, leaves
    for e in blk.eqns:
        v = e.outputs[0] if e.outputs else None
        if v is None or not (is_pointwise(e) or is_broadcast(e) or is_iota(e)) or \
                v.type.shape == ():
            continue
        ops, leaves = {id(e): _op_cost(e)}, {}
        if is_iota(e):  # its element is its index along an axis: it reads nothing
            parts[id(v)] = ops, {}
            continue
        if is_broadcast(e):  # its operand is kept, and read again from cache
            parts[id(v)] = ops, {id(e.inputs[0]): 0}
            continue
        for a in e.inputs:
            if id(a) in parts and id(a) not in kept:
                ops.update(parts[id(a)][0])
                leaves.update(parts[id(a)][1])
            elif a.type.shape != ():
                leaves[id(a)] = a.type.dtype.np.itemsize
        if sum(ops.values()) <= RECOMPUTE_MAX:
            parts[id(v)] = ops, leaves
    return {v: (sum(ops.values()), leaves, max(ops.values()))
            for v, (ops, leaves) in parts.items()}


def _run_reads(run: list[Eqn], exprs: dict[int, tuple[int, dict[int, int], int]],
               kept: set[int], arithmetic: set[int]) -> set[int]:
    """The arrays a run's loop reads from memory: its members' operands (not its own
    values), or, for those of plain ``arithmetic`` (computed where read unless read by
    many), what they read."""
    made = {id(e.outputs[0]) for e in run}
    found: set[int] = set()
    for e in run:
        for a in e.inputs:
            if id(a) in made:
                continue
            cheap = id(a) in exprs and id(a) not in kept and id(a) in arithmetic
            found |= set(exprs[id(a)][1]) if cheap else {id(a)}
    return found


def _reads_elementwise(c: Eqn) -> bool:
    """Whether ``c``'s own loop reads each element of its operands by linear index, once
    (an operand of ``_REPEATS`` ops would be computed twice)."""
    return c.op.name in _READS_ONCE or (c.op.name in UNARY | BINARY and (
        c.inputs[0].type.dtype.is_float or c.op.name not in _REPEATS))


def _by_element(e: Eqn) -> bool:
    """Whether ``e`` is a gather of a 1-d array reading each of its indices once, at the
    position of the element it makes (its indices may be computed where read)."""
    return e.op.name == "gather" and e.inputs[0].type.ndim == 1 and \
        e.inputs[1].type.shape == e.outputs[0].type.shape


def fused_values(blk: Block, runs: dict[int, list[Eqn]], stored: Collection[int] = ()
                 ) -> set[int]:
    """Values of ``blk`` computed in each loop that reads them instead of into a buffer:
    array results of pointwise equations that later equations of the block read element
    by element (vertical fusion: elementwise chains into one loop, reductions and layout
    changes absorbing their producers), and broadcasts that pointwise kernels read.  A
    value read by several loops, or one a run computes and later loops read, is computed
    again in each of them when that costs no more than storing and loading it.  Values in
    ``stored`` (products' epilogues' results) keep their buffers."""
    run_of = {id(e): k for k, run in runs.items() for e in run}
    readers: dict[int, list[Eqn]] = {}
    for e in blk.eqns:
        for a in e.inputs:
            readers.setdefault(id(a), []).append(e)
    kept = {id(r) for r in blk.results} | set(stored)  # values with a buffer in any case
    kept |= {id(v) for e in blk.eqns for inner in e.blocks() for v in free_vars(inner)}
    outside = set(kept)  # read by the caller or a nested block
    kept |= {id(a) for e in blk.eqns if id(e) not in run_of and not _reads_elementwise(e)
             for a in (e.inputs[:1] if _by_element(e) else e.inputs)}
    exprs = _expressions(blk, kept)
    arithmetic = {v for v, (_, _, heaviest) in exprs.items() if heaviest <= COST_DIV}
    # a transpose only products read is read by them in place (they renumber its axes)
    absorbed = {id(e.outputs[0]) for e in blk.eqns if e.op.name == "transpose" and
                id(e.outputs[0]) not in outside and readers.get(id(e.outputs[0])) and all(
                    c.op.name == "dot_general" and absorbs_transpose(
                        c, c.inputs.index(e.outputs[0]), e)
                    and c.inputs[0] is not c.inputs[1]
                    for c in readers[id(e.outputs[0])])}
    elementwise: set[int] = set()  # fused values that only pointwise kernels read
    reads: dict[int, set[int]] = {}  # by run: the arrays its loop reads
    at: dict[int, tuple[set[int], int]] = {}  # a fused value: the runs computing it, and
    for e in reversed(blk.eqns):              # how many times other loops do
        v = e.outputs[0] if e.outputs else None
        if v is None or id(v) not in exprs or id(v) in kept:
            continue
        # only pointwise kernels and reductions (their loops have the axes as indices)
        # read fused broadcasts, directly or through values fused into them
        pointwise_readers = all((is_pointwise(c) or c.op.name in REDUCE) and (
            id(c.outputs[0]) not in at or id(c.outputs[0]) in elementwise)
            for c in readers.get(id(v), []))
        if (is_broadcast(e) or is_iota(e)) and not pointwise_readers:
            continue
        own = run_of.get(id(e))
        loops, times = set(), 0
        for c in readers.get(id(v), []):
            r = run_of.get(id(c))
            w = c.outputs[0]
            if r is not None:
                loops.add(r)
            if id(w) in at:
                loops |= at[id(w)][0]
                times += at[id(w)][1]
            elif r is None:  # its own loop, reading each element of v this many times
                times += 1 if c.op.name == "concatenate" else \
                    max(1, w.type.size // max(v.type.size, 1))
        loops.discard(own)
        evals = len(loops) + times
        cost, leaves, _ = exprs[id(v)]
        if cost <= SHIFTED_MAX and readers.get(id(v)) and all(
                c.op.name == "slice" and _rows_from(c) for c in readers[id(v)]):
            at[id(v)] = loops, times  # read at a shifted index: computed there
            continue
        size = COST_BYTE * v.type.dtype.np.itemsize
        each = cost + COST_BYTE * sum(leaves.values())
        spare = 0 if own is not None else 1  # one evaluation storing it needs too
        # in a run's loop, the arrays the run reads anyway cost nothing more
        again = times * each
        for r in loops:
            if r not in reads:
                reads[r] = _run_reads(runs[r], exprs, kept, arithmetic)
            again += cost + COST_BYTE * sum(b for a, b in leaves.items() if a not in reads[r])
        if evals and again <= spare * each + 2 * size + evals * size:
            at[id(v)] = loops, times
            if pointwise_readers:
                elementwise.add(id(v))
    return set(at) | absorbed | index_maps(blk, readers, outside | set(stored),
                                           set(at) | absorbed)


def index_maps(blk: Block, readers: dict[int, list[Eqn]], outside: Collection[int],
               fused: Collection[int]) -> set[int]:
    """Layout values computed where read instead of into a buffer, since reading them
    costs an index computation and one load: slices (of a buffer or of such a value;
    windows at run-time starts of a buffer) and reshapes of them, read at the index they
    map to; reshapes adding or dropping a last axis of size 1 of a value computed where
    read (so is the reshape); and gathers of a 1-d array (a buffer or such a value) that
    only pointwise equations read, each element loaded by
    its index in the loops that read it (their indices tested once, where they are
    made).  Values read outside the block or that keep their buffer (``outside``), and
    operands computed in their readers' loops (``fused``), are left alone.  So are, for
    pointwise readers, concatenations and pads along the first axis of stored operands
    or slices (each element a choice of the operand it falls in, or the padding value):
    shifted reads like ``np.concatenate((y[:1], y[:-1]))`` cost no pass of their own."""
    maps: set[int] = set()
    sliced: set[int] = set()  # maps that read one buffer at a renumbered index
    # fused values any index may be read from: broadcasts of 0-d values
    anywhere = {id(e.outputs[0]) for e in blk.eqns if e.op.name == "broadcast_in_dim"
                and e.inputs[0].type.shape == ()}
    for e in blk.eqns:
        if len(e.outputs) != 1 or id(e.outputs[0]) in outside or \
                not isinstance(e.outputs[0].type, TensorType) or e.outputs[0].type.shape == ():
            continue
        v, x = e.outputs[0], e.inputs[0] if e.inputs else None
        name = e.op.name
        pointwise_readers = bool(readers.get(id(v))) and all(
            is_pointwise(c) for c in readers[id(v)])
        if name == "slice" and id(x) not in fused or name == "dynamic_slice" and \
                id(x) not in fused and v.type.size > 1:  # (one element: ``scalars``)
            maps.add(id(v))
            sliced.add(id(v))
        elif name == "slice" and id(x) in fused and _rows_from(e) and \
                readers.get(id(v)) and all(is_pointwise(c) or c.op.name in ("concatenate", "pad")
                                           for c in readers[id(v)]):
            maps.add(id(v))  # the value's expression, computed at the shifted index
            sliced.add(id(v))
        elif name == "reshape" and id(x) in maps:
            maps.add(id(v))
            if id(x) in sliced:
                sliced.add(id(v))
        elif name in ("concatenate", "pad") and pointwise_readers and \
                _along_first_axis(e) and all(
                    id(a) in sliced or id(a) in anywhere or
                    (id(a) not in fused and id(a) not in maps)
                    for a in e.inputs[:None if name == "concatenate" else 1]):
            maps.add(id(v))
        elif name == "reshape" and id(x) in fused and v.type.shape in (
                x.type.shape + (1,), x.type.shape[:-1]) and readers.get(id(v)) and \
                all(_reads_elementwise(c) for c in readers[id(v)]):
            maps.add(id(v))  # computed where read, as its operand is
        elif name == "gather" and (id(x) in maps or id(x) not in fused) and \
                x.type.ndim == 1 and e.inputs[1].type.shape == v.type.shape and \
                readers.get(id(v)) and all(is_pointwise(c) for c in readers[id(v)]):
            maps.add(id(v))
    return maps


def _rows_from(e: Eqn) -> bool:
    """Whether a slice takes whole rows, from a row on (element ``i`` is its operand's
    element ``i`` plus a constant)."""
    start, stride = e.params["start"], e.params["stride"]
    return all(st == 1 for st in stride) and not any(start[1:]) and \
        e.outputs[0].type.shape[1:] == e.inputs[0].type.shape[1:]


def _along_first_axis(e: Eqn) -> bool:
    """Whether a concatenation joins, or a pad pads, only along the first axis (an
    element's position then depends on its linear index alone)."""
    if e.op.name == "concatenate":
        return e.params["axis"] == 0
    lo, hi, interior = e.params["lo"], e.params["hi"], e.params["interior"]
    return not any(interior) and not any(lo[1:]) and not any(hi[1:])


@dataclass(frozen=True)
class Epilogue:
    """``out = addend + scale * p`` (``- scale * p`` when ``negate``; no ``scale``: 1) of
    a product ``p`` read nowhere else, computed by the product itself as it stores its
    result (BLAS's alpha and beta): an SGD update ``w - lr * (x.T @ d)`` or a gradient
    accumulation ``dw + h.T @ d`` then moves no array of products through memory."""

    eqns: tuple[Eqn, ...]  # the scaling ``mul`` (if any) and the ``add`` or ``sub``
    before: tuple[Eqn, ...]  # 0-d equations after the product that compute ``scale``
    addend: Atom
    scale: Atom | None
    negate: bool
    out: Var
    at: int  # the add's index in the block
    adjacent: bool  # nothing else runs between the product and the add


def epilogues(blk: Block) -> dict[int, Epilogue]:
    """The products of ``blk`` (by ``id`` of their equation) whose result, scaled by a
    0-d value or not, is only added to or subtracted from an array of the sum's type
    that exists before the product (the scale may be computed after it, from values
    that exist before it: those 0-d equations move before the product)."""
    readers = block_readers(blk)
    made = {id(o): k for k, e in enumerate(blk.eqns) for o in e.outputs}

    def only_reader(v: Atom) -> Eqn | None:
        rs = readers.get(id(v), [])
        return rs[0] if len(rs) == 1 else None

    def scalar_chain(v: Atom, k: int) -> list[Eqn] | None:
        """The equations after position ``k`` computing the 0-d ``v`` (in order), when
        they are pointwise and read nothing else made after ``k``."""
        at = made.get(id(v), -1)
        if at < k:
            return []
        e = blk.eqns[at]
        if not is_pointwise(e) or len(e.outputs) != 1:
            return None
        chain: list[Eqn] = []
        for a in e.inputs:
            sub = scalar_chain(a, k) if a.type.shape == () else None
            if sub is None:
                return None
            chain += [c for c in sub if all(c is not x for x in chain)]
        return [*chain, e]

    found: dict[int, Epilogue] = {}
    for k, e in enumerate(blk.eqns):
        if e.op.name != "dot_general" or e.outputs[0].type.dtype.is_bool:
            continue
        p: Atom = e.outputs[0]
        r = only_reader(p)
        scale, chain, before = None, [], []
        if r is not None and r.op.name == "mul":
            other = r.inputs[1] if r.inputs[0] is p else r.inputs[0]
            moved = scalar_chain(other, k) if other.type.shape == () else None
            if moved is None:
                continue
            scale, chain, before, p = other, [r], moved, r.outputs[0]
            r = only_reader(p)
        if r is None or r.op.name not in ("add", "sub") or r.inputs[0] is r.inputs[1] or \
                (r.op.name == "sub" and r.inputs[1] is not p):
            continue
        addend, out = r.inputs[r.inputs[0] is p], r.outputs[0]
        if addend.type != out.type or p.type != out.type or made.get(id(addend), -1) >= k:
            continue
        steps = [*before, *chain]
        adjacent = made[id(out)] == k + 1 + len(steps) and all(
            made[id(c.outputs[0])] == k + 1 + j for j, c in enumerate(steps))
        found[id(e)] = Epilogue((*chain, r), tuple(before), addend, scale,
                                r.op.name == "sub", out, made[id(out)], adjacent)
    return found
