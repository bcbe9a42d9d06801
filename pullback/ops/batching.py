"""What every op's batching rule shares: where a value's batch axis is, how to move it,
and the per-lane loop any op can fall back on.

Under ``vmap`` a value is an atom and its *batch dim*: the axis of the atom that runs
over the lanes, or None when every lane sees the same value (it is not batched).  An
op's rule ``batch(args, dims, size, **params) -> (outs, out_dims)`` gets the operands,
their batch dims (at least one is not None) and the number of lanes; it emits IR that
computes every lane at once and returns the results, a list, with their batch dims.
Batch dims move lazily: a rule leaves the batch axis where it is cheapest to and says
where it is, rather than transposing it to the front.

``by_lanes`` is the rule of last resort, correct for any op: a loop over the lanes
running the op on each one (what LAPACK-backed ops do anyway: one factorisation per
matrix).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from ..ir.builder import current
from ..ir.core import Atom, Lit
from ..ir.op import OPS
from ..ir.types import StackType, TensorType, int64
from .derivs import zeros

#: A rule's result: the outputs and each one's batch dim.
Batched = tuple[list[Atom], list[int | None]]

Dim = int | None


def lane_type(t: TensorType, d: Dim) -> TensorType:
    """The type one lane sees of a value of type ``t`` batched at ``d``."""
    if d is None:
        return t
    return TensorType(t.shape[:d] + t.shape[d + 1:], t.dtype)


def batched_type(t: TensorType, size: int, d: int = 0) -> TensorType:
    """The type of ``size`` lanes of type ``t`` stacked at axis ``d``."""
    return TensorType(t.shape[:d] + (size,) + t.shape[d:], t.dtype)


def axis_in(a: int, d: Dim) -> int:
    """Where axis ``a`` of a lane is in a value batched at ``d``."""
    return a if d is None or a < d else a + 1


def axes_in(axes: Sequence[int], d: Dim) -> tuple[int, ...]:
    return tuple(axis_in(a, d) for a in axes)


def moveaxis(x: Atom, src: int, dst: int) -> Atom:
    """``x`` with axis ``src`` moved to ``dst`` (the others keep their order)."""
    if src == dst:
        return x
    perm = [a for a in range(x.type.ndim) if a != src]
    perm.insert(dst, src)
    return current().emit("transpose", [x], {"perm": tuple(perm)})[0]


def broadcast_lanes(x: Atom, size: int, d: int = 0) -> Atom:
    """An unbatched ``x`` repeated for ``size`` lanes at axis ``d``."""
    t = x.type
    shape = t.shape[:d] + (size,) + t.shape[d:]
    dims = tuple(a if a < d else a + 1 for a in range(t.ndim))
    return current().emit("broadcast_in_dim", [x], {"shape": shape, "dims": dims})[0]


def at(x: Atom, d: Dim, size: int, to: int = 0) -> Atom:
    """``x`` (batched at ``d``, or not batched) as a value batched at ``to``."""
    if d is None:
        return broadcast_lanes(x, size, to)
    return moveaxis(x, d, to)


def full(x: Atom, d: Dim, size: int, shape: tuple[int, ...], to: int = 0) -> Atom:
    """``x``, of lane shape ``shape`` or ``()``, batched at ``to`` with the lane shape
    ``shape``: a lane scalar is spread over the lane's elements."""
    lane = lane_type(x.type, d)
    if lane.shape == shape:
        return at(x, d, size, to)
    out = shape[:to] + (size,) + shape[to:]
    dims = () if d is None else (to,)
    if d is not None and x.type.ndim != 1:
        x = current().emit("reshape", [x], {"shape": (size,)})[0]
    return current().emit("broadcast_in_dim", [x], {"shape": out, "dims": dims})[0]


def fold_lanes(x: Atom, d: Dim, size: int, axis: int) -> Atom:
    """``x`` with its lanes laid end to end along its axis ``axis`` (lane k's entries
    k*n ... k*n + n - 1), so that one gather, scatter or conv treats each lane apart."""
    x = at(x, d, size, axis)
    shape = x.type.shape
    folded = shape[:axis] + (shape[axis] * shape[axis + 1],) + shape[axis + 2:]
    return current().emit("reshape", [x], {"shape": folded})[0]


def unfold_lanes(x: Atom, size: int, axis: int) -> Atom:
    """The inverse of ``fold_lanes``: axis ``axis`` split into (lanes, n)."""
    shape = x.type.shape
    split = shape[:axis] + (size, shape[axis] // size) + shape[axis + 1:]
    return current().emit("reshape", [x], {"shape": split})[0]


def with_lanes(name: str, rule: Callable[..., dict],
               out_dim: Callable[..., int] | None = None) -> Callable[..., Batched]:
    """The rule of an op with one operand whose params ``rule(d, size, **params)``
    rewrites for the operand batched at ``d``; the result's batch axis is
    ``out_dim(d, **params)`` (default: ``d``, where it was)."""

    def batch(args, bdims, size, **params):  # not ``dims``: rev has a param of that name
        (x,), (d,) = args, bdims
        out = current().emit(name, [x], rule(d, size, **params))[0]
        return [out], [d if out_dim is None else out_dim(d, **params)]

    return batch


def elementwise(name: str) -> Callable[..., Batched]:
    """The rule of an elementwise op (operands of one shape or 0-d): operands batched
    where the first full-shape batched one is; 0-d unbatched operands stay as they are."""

    def rule(args, dims, size, **params):
        lanes = [lane_type(a.type, d) for a, d in zip(args, dims, strict=True)]
        shape = max((t.shape for t in lanes), key=len)
        to = next((d for a, d, t in zip(args, dims, lanes, strict=True)
                   if d is not None and t.shape == shape), 0)
        ins = [a if d is None and t.shape == () else full(a, d, size, shape, to)
               for a, d, t in zip(args, dims, lanes, strict=True)]
        outs = current().emit(name, ins, params)
        return outs, [to] * len(outs)

    return rule


def lane_of(x: Atom, k: Atom) -> Atom:
    """Lane ``k`` of ``x``, batched at 0."""
    t = x.type
    starts = [k] + [Lit(np.int64(0))] * (t.ndim - 1)
    window = current().emit("dynamic_slice", [x, *starts], {"sizes": (1, *t.shape[1:])})[0]
    return current().emit("reshape", [window], {"shape": t.shape[1:]})[0]


def set_lane(buf: Atom, k: Atom, value: Atom) -> Atom:
    """``buf`` (batched at 0) with lane ``k`` replaced by ``value``."""
    row = current().emit("reshape", [value], {"shape": (1, *value.type.shape)})[0]
    starts = [k] + [Lit(np.int64(0))] * (buf.type.ndim - 1)
    return current().emit("dynamic_update_slice", [buf, row, *starts])[0]


def lane_loop(emit_lane: Callable[[list[Atom]], list[Atom]], args: Sequence[Atom],
              dims: Sequence[Dim], size: int, out_types: Sequence,
              mask: Atom | None = None, reverse: bool = False) -> list[Atom]:
    """``emit_lane(lane's operands) -> lane's results`` run for each lane in a loop
    (last lane first if ``reverse``); the results of types ``out_types`` come back
    batched at 0.  A stack operand (a reverse-mode tape) is threaded through the loop
    and comes back as the result of its type; lanes where ``mask`` (bool, batched at 0)
    is false are skipped and their results are zeros."""
    ins = [a if d is None else moveaxis(a, d, 0) for a, d in zip(args, dims, strict=True)]
    stacks = [a for a in ins if isinstance(a.type, StackType)]
    tensors = [t for t in out_types if not isinstance(t, StackType)]
    bufs = [zeros(batched_type(t, size)) for t in tensors]
    b = current()

    def run(k, *carry):
        stack_in, bufs_in = list(carry[:len(stacks)]), list(carry[len(stacks):])
        it = iter(stack_in)
        lane = [next(it) if isinstance(a.type, StackType) else
                lane_of(a, k) if d is not None else a
                for a, d in zip(ins, dims, strict=True)]
        outs = emit_lane(lane)
        new_stacks = [o for o in outs if isinstance(o.type, StackType)]
        values = [o for o in outs if not isinstance(o.type, StackType)]
        return [*new_stacks, *[set_lane(buf, k, v) for buf, v in zip(bufs_in, values,
                                                                      strict=True)]]

    def body(j, *carry):
        k = b.emit("sub", [Lit(np.int64(size - 1)), j])[0] if reverse else j
        if mask is None:
            return run(k, *carry)
        taken = lane_of(mask, k)
        types = [c.type for c in carry]
        then = b.block(types, lambda *c: run(k, *c))
        skip = b.block(types, lambda *c: list(c))
        return b.emit("cond", [taken, *carry], {"then": then, "orelse": skip})

    carry = [*stacks, *bufs]
    loop = b.block([TensorType((), int64), *[c.type for c in carry]], body)
    res = b.emit("for_loop", [Lit(np.int64(0)), Lit(np.int64(size)), Lit(np.int64(1)),
                              *carry], {"body": loop})
    stack_out, buf_out = iter(res[:len(stacks)]), iter(res[len(stacks):])
    return [next(stack_out) if isinstance(t, StackType) else next(buf_out) for t in out_types]


def by_lanes(name: str) -> Callable[..., Batched]:
    """The rule of last resort: the op run on each lane in a loop, results at axis 0."""

    def rule(args, dims, size, **params):
        op = OPS[name]
        lanes = [lane_type(a.type, d) for a, d in zip(args, dims, strict=True)]
        out_types = op.infer_types(lanes, params)
        outs = lane_loop(lambda lane: current().emit(op, lane, params), args, dims, size,
                         out_types)
        return outs, [0] * len(outs)

    return rule
