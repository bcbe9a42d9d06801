"""Shape primitives: broadcast, reshape, transpose, slice, rev, concatenate, pad, iota,
empty.

All take static shapes/axes as params; none of them computes, so the native backend
folds them into the index arithmetic of the kernels around them.

Derivatives: every op here is linear, so its jvp applies the op itself to the tangents
and its vjp is the transposed data movement (a sum over broadcast axes, a pad back
around a slice, slices of a concatenation ...).

Batching: the batch axis stays where it is and the params grow an entry for it (a whole
slice, no padding ...); only a reshape that would mix lanes moves it to the front first.
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..ir.builder import current
from ..ir.core import Atom
from ..ir.op import Op
from ..ir.types import TensorType, bool_
from . import elementwise as E
from .batching import at, axes_in, axis_in, broadcast_lanes, full, lane_type, with_lanes
from .derivs import const, zero_jvp, zero_vjp, zeros


def linear_jvp(name: str):
    """The jvp of an op that is linear in its one operand: the op applied to the tangent."""

    def jvp(primals, tangents, outs, **params):
        return [current().emit(name, [tangents[0]], params)[0]]

    return jvp


def _sum(x: Atom, axes: tuple[int, ...]) -> Atom:
    """``reduce_sum``, emitted by name: reduce.py builds its rules from the ops here, so
    this module does not import it."""
    return current().emit("reduce_sum", [x], {"axes": axes})[0]


def _broadcast_in_dim_infer(ts, shape, dims):
    (x,) = ts
    if len(dims) != x.ndim or list(dims) != sorted(set(dims)) or any(
        d < 0 or d >= len(shape) for d in dims
    ):
        raise ShapeError(f"broadcast_in_dim: dims {dims} do not place {x} into {shape}")
    for i, d in enumerate(dims):
        if x.shape[i] not in (1, shape[d]):
            raise ShapeError(f"broadcast_in_dim: cannot broadcast {x} to {shape} (axis {i})")
    return TensorType(tuple(shape), x.dtype)


def _broadcast_in_dim_impl(x, shape, dims):
    expanded = [1] * len(shape)
    for i, d in enumerate(dims):
        expanded[d] = x.shape[i]
    return np.broadcast_to(x.reshape(expanded), shape).copy()


def _broadcast_in_dim_vjp(primals, outs, cts, shape, dims):
    """Sum over the new axes and over the size-1 axes that were stretched."""
    x = primals[0].type
    stretched = {d for n, d in zip(x.shape, dims, strict=True) if n == 1 and shape[d] != 1}
    axes = tuple(a for a in range(len(shape)) if a not in dims or a in stretched)
    ct = _sum(cts[0], axes) if axes else cts[0]
    return [reshape(ct, shape=x.shape) if ct.type.shape != x.shape else ct]


def _broadcast_in_dim_batch(args, bdims, size, shape, dims):
    """The batch axis lands right after the result axis of the operand axis before it.
    (The op's ``dims`` param takes the name of the batch dims here: rules are called
    with the batch dims positionally.)"""
    (x,), (d,) = args, bdims
    to = dims[d - 1] + 1 if d else 0
    moved = tuple(a if a < to else a + 1 for a in dims)
    new = moved[:d] + (to,) + moved[d:]
    return [broadcast_in_dim(x, shape=shape[:to] + (size,) + shape[to:], dims=new)], [to]


broadcast_in_dim = Op(
    "broadcast_in_dim",
    infer=_broadcast_in_dim_infer,
    arity=1,
    impl=_broadcast_in_dim_impl,
    params={"shape": "ints", "dims": "ints"},
    fusion="broadcast",
    jvp=linear_jvp("broadcast_in_dim"),
    vjp=_broadcast_in_dim_vjp,
    batch=_broadcast_in_dim_batch,
)


def _reshape_infer(ts, shape):
    (x,) = ts
    if any(d < 0 for d in shape) or int(np.prod(shape, dtype=np.int64)) != x.size:
        raise ShapeError(f"cannot reshape array of size {x.size} {x} into shape {shape}")
    return TensorType(tuple(shape), x.dtype)


def _reshape_batch(args, dims, size, shape):
    """The batch axis stays where the elements before it in the lane are the elements
    before an axis of the result (C order keeps each lane's run apart there); otherwise
    it moves to the front first."""
    (x,), (d,) = args, dims
    lane = lane_type(x.type, d).shape
    before = int(np.prod(lane[:d], dtype=np.int64))
    cuts = [j for j in range(len(shape) + 1) if int(np.prod(shape[:j], dtype=np.int64)) == before]
    if not cuts:
        x, cuts = at(x, d, size, 0), [0]
    to = cuts[0]
    return [reshape(x, shape=shape[:to] + (size,) + shape[to:])], [to]


reshape = Op(
    "reshape",
    infer=_reshape_infer,
    arity=1,
    impl=lambda x, shape: x.reshape(shape).copy(),
    params={"shape": "ints"},
    fusion="reshape",
    jvp=linear_jvp("reshape"),
    vjp=lambda primals, outs, cts, shape: [reshape(cts[0], shape=primals[0].type.shape)],
    batch=_reshape_batch,
)


def _transpose_infer(ts, perm):
    (x,) = ts
    if sorted(perm) != list(range(x.ndim)):
        raise ShapeError(f"transpose: axes {perm} don't match array {x}")
    return TensorType(tuple(x.shape[p] for p in perm), x.dtype)


def inverse_perm(perm: tuple[int, ...]) -> tuple[int, ...]:
    """The permutation that ``transpose`` takes to undo ``perm``."""
    return tuple(int(p) for p in np.argsort(perm))


def _transpose_perm(d: int, size: int, perm: tuple[int, ...]) -> dict:
    """The batch axis keeps its place ``d``; the lane's axes are permuted around it."""
    moved = list(axes_in(perm, d))
    moved.insert(d, d)
    return {"perm": tuple(moved)}


def _transpose_vjp(primals, outs, cts, perm):
    return [transpose(cts[0], perm=inverse_perm(perm))]


transpose = Op(
    "transpose",
    infer=_transpose_infer,
    arity=1,
    impl=lambda x, perm: np.transpose(x, perm).copy(),
    params={"perm": "ints"},
    fusion="reshape",
    jvp=linear_jvp("transpose"),
    vjp=_transpose_vjp,
    batch=with_lanes("transpose", _transpose_perm),
)


def _expect_len(op: str, x: TensorType, **lists) -> None:
    for name, v in lists.items():
        if len(v) != x.ndim:
            raise ShapeError(f"{op}: {name}={v} needs one entry per axis of {x}")


def _slice_infer(ts, start, limit, stride):
    (x,) = ts
    _expect_len("slice", x, start=start, limit=limit, stride=stride)
    for s, lim, st, d in zip(start, limit, stride, x.shape, strict=True):
        if not 0 <= s <= lim <= d or st < 1:
            raise ShapeError(f"slice: start={start} limit={limit} stride={stride} "
                             f"out of range for {x}")
    out = tuple(-(-(lim - s) // st) for s, lim, st in zip(start, limit, stride, strict=True))
    return TensorType(out, x.dtype)


def _slice_impl(x, start, limit, stride):
    index = tuple(slice(*b) for b in zip(start, limit, stride, strict=True))
    return x[index].copy()


def _slice_params(d: int, size: int, start, limit, stride) -> dict:
    """Every lane whole along the batch axis."""
    return {"start": _with(start, d, 0), "limit": _with(limit, d, size),
            "stride": _with(stride, d, 1)}


def _with(xs: tuple[int, ...], d: int, v: int) -> tuple[int, ...]:
    """``xs`` with ``v`` inserted at ``d``: a per-axis param spanning the batch axis too."""
    return xs[:d] + (v,) + xs[d:]


def _slice_vjp(primals, outs, cts, start, limit, stride):
    """Put the cotangent back where it was read: zeros around it and between strides."""
    (x,) = primals
    (ct,) = cts
    interior = tuple(st - 1 for st in stride)
    hi = tuple(d - s - _dilated(n, i)
               for d, s, n, i in zip(x.type.shape, start, ct.type.shape, interior, strict=True))
    return [pad(ct, const(0, ct.type), lo=start, hi=hi, interior=interior)]


slice_ = Op(
    "slice",
    infer=_slice_infer,
    arity=1,
    impl=_slice_impl,
    params={"start": "ints", "limit": "ints", "stride": "ints"},
    fusion="reshape",
    jvp=linear_jvp("slice"),
    vjp=_slice_vjp,
    batch=with_lanes("slice", _slice_params),
)


def _rev_infer(ts, dims):
    (x,) = ts
    if len(set(dims)) != len(dims) or any(not 0 <= d < x.ndim for d in dims):
        raise ShapeError(f"rev: dims {dims} are not distinct axes of {x}")
    return TensorType(x.shape, x.dtype)


rev = Op(
    "rev",
    infer=_rev_infer,
    arity=1,
    impl=lambda x, dims: np.flip(x, dims).copy(),
    params={"dims": "ints"},
    fusion="reshape",
    jvp=linear_jvp("rev"),
    vjp=lambda primals, outs, cts, dims: [rev(cts[0], dims=dims)],
    batch=with_lanes("rev", lambda d, size, dims: {"dims": axes_in(dims, d)}),
)


def _concatenate_infer(ts, axis):
    shown = ", ".join(str(t) for t in ts)
    if not ts:
        raise ShapeError("concatenate needs at least one operand")
    first = ts[0]
    if not 0 <= axis < first.ndim:
        raise ShapeError(f"concatenate: axis {axis} out of range for ({shown})")
    def off_axis(t: TensorType) -> tuple:
        return t.shape[:axis] + t.shape[axis + 1:]

    for t in ts:
        if t.dtype != first.dtype or t.ndim != first.ndim or off_axis(t) != off_axis(first):
            raise ShapeError(f"concatenate along axis {axis}: operands ({shown}) need one "
                             "dtype and equal shapes off that axis")
    size = sum(t.shape[axis] for t in ts)
    return TensorType(first.shape[:axis] + (size,) + first.shape[axis + 1:], first.dtype)


def _concatenate_jvp(primals, tangents, outs, axis):
    if all(t is None for t in tangents):
        return [None]
    filled = [zeros(x.type) if t is None else t for x, t in zip(primals, tangents, strict=True)]
    return [concatenate(*filled, axis=axis)]


def _concatenate_vjp(primals, outs, cts, axis):
    """Each operand's cotangent is its stretch of the result's."""
    (ct,) = cts
    shape = ct.type.shape
    pieces, at = [], 0
    for x in primals:
        size = x.type.shape[axis]
        start = tuple(at if a == axis else 0 for a in range(len(shape)))
        limit = tuple(at + size if a == axis else d for a, d in enumerate(shape))
        pieces.append(slice_(ct, start=start, limit=limit, stride=(1,) * len(shape)))
        at += size
    return pieces


def _concatenate_batch(args, dims, size, axis):
    """Every operand batched where the first batched one is (unbatched ones repeated)."""
    to = next(d for d in dims if d is not None)
    ins = [at(x, d, size, to) for x, d in zip(args, dims, strict=True)]
    return [concatenate(*ins, axis=axis_in(axis, to))], [to]


concatenate = Op(
    "concatenate",
    infer=_concatenate_infer,
    impl=lambda *xs, axis: np.concatenate(xs, axis=axis),
    params={"axis": "int"},
    fusion="reshape",
    jvp=_concatenate_jvp,
    vjp=_concatenate_vjp,
    batch=_concatenate_batch,
)


def _dilated(d: int, interior: int) -> int:
    return d + max(d - 1, 0) * interior


def _pad_infer(ts, lo, hi, interior):
    x, padval = ts
    if padval.shape != () or padval.dtype != x.dtype:
        raise ShapeError(f"pad: padding value must be a 0-d {x.dtype}, got {padval} for {x}")
    _expect_len("pad", x, lo=lo, hi=hi, interior=interior)
    out = tuple(
        lo_ + _dilated(d, i) + hi_
        for d, lo_, hi_, i in zip(x.shape, lo, hi, interior, strict=True)
    )
    if any(i < 0 for i in interior) or any(d < 0 for d in out):
        raise ShapeError(f"pad: lo={lo} hi={hi} interior={interior} invalid for {x}")
    return TensorType(out, x.dtype)


def _pad_impl(x, padval, lo, hi, interior):
    """Grow by the positive pads with the dilated ``x`` inside, then crop the negative ones."""
    grown = tuple(
        max(lo_, 0) + _dilated(d, i) + max(hi_, 0)
        for d, lo_, hi_, i in zip(x.shape, lo, hi, interior, strict=True)
    )
    out = np.full(grown, padval, dtype=x.dtype)
    place = tuple(
        slice(max(lo_, 0), max(lo_, 0) + _dilated(d, i), i + 1)
        for d, lo_, i in zip(x.shape, lo, interior, strict=True)
    )
    out[place] = x
    crop = tuple(
        slice(max(-lo_, 0), g - max(-hi_, 0)) for g, lo_, hi_ in zip(grown, lo, hi, strict=True)
    )
    return out[crop].copy()


def _pad_jvp(primals, tangents, outs, lo, hi, interior):
    x = primals[0].type
    tx, tp = tangents
    if tx is None and tp is None:
        return [None]
    tx = zeros(x) if tx is None else tx
    tp = const(0, x) if tp is None else tp
    return [pad(tx, tp, lo=lo, hi=hi, interior=interior)]


def _pad_vjp(primals, outs, cts, lo, hi, interior):
    """The operand's cotangent is read back at its positions (zero where a negative pad
    cropped it); the padding value's is the sum over every other position."""
    (ct,) = cts
    zero = const(0, ct.type)
    uncropped = pad(ct, zero, lo=tuple(-n for n in lo), hi=tuple(-n for n in hi),
                    interior=(0,) * len(lo))
    ct_x = slice_(uncropped, start=(0,) * len(lo), limit=uncropped.type.shape,
                  stride=tuple(i + 1 for i in interior))
    in_x = TensorType(primals[0].type.shape, bool_)
    padded = pad(zeros(in_x), True, lo=lo, hi=hi, interior=interior)
    ct_pad = _sum(E.select(padded, ct, zero), tuple(range(ct.type.ndim)))
    return [ct_x, ct_pad]


def _pad_batch(args, dims, size, lo, hi, interior):
    """No padding along the batch axis.  Lanes with padding values of their own are
    padded with zeros, and the padding positions then take each lane's value."""
    (x, padval), (dx, dp) = args, dims
    to = 0 if dx is None else dx
    params = {"lo": _with(lo, to, 0), "hi": _with(hi, to, 0), "interior": _with(interior, to, 0)}
    if dp is None:
        return [pad(x, padval, **params)], [to]
    padded = pad(at(x, dx, size, to), const(0, x.type), **params)
    lane = lane_type(padded.type, to)
    where = pad(zeros(lane_type(x.type, dx).with_dtype(bool_)), True, lo=lo, hi=hi,
                interior=interior)
    value = full(padval, dp, size, lane.shape, to)
    return [E.select(broadcast_lanes(where, size, to), value, padded)], [to]


pad = Op(
    "pad",
    infer=_pad_infer,
    arity=2,
    impl=_pad_impl,
    params={"lo": "ints", "hi": "ints", "interior": "ints"},
    fusion="reshape",
    jvp=_pad_jvp,
    vjp=_pad_vjp,
    batch=_pad_batch,
)


def _iota_infer(ts, shape, dim, dtype):
    if ts:
        raise ShapeError(f"iota takes no operands, got {len(ts)}")
    if not 0 <= dim < len(shape) or any(d < 0 for d in shape) or dtype.is_bool:
        raise ShapeError(f"iota: cannot count along dim {dim} of {dtype}{list(shape)}")
    return TensorType(tuple(shape), dtype)


def _iota_impl(shape, dim, dtype):
    along = [1] * len(shape)
    along[dim] = shape[dim]
    counts = np.arange(shape[dim], dtype=dtype.np).reshape(along)
    return np.broadcast_to(counts, shape).copy()


iota = Op(
    "iota",
    infer=_iota_infer,
    arity=0,
    impl=_iota_impl,
    params={"shape": "ints", "dim": "int", "dtype": "dtype"},
    fusion="elementwise",
    jvp=zero_jvp,  # a float iota (arange, linspace) is a constant
    vjp=zero_vjp,
)


def _empty_infer(ts, shape, dtype):  # no operands: ``arity``
    if any(d < 0 for d in shape):
        raise ShapeError(f"empty: negative dimensions in {list(shape)}")
    return TensorType(tuple(shape), dtype)


#: ``np.empty``: an array whose contents are unspecified, as NumPy's are.  The
#: interpreter makes zeros; native code allocates and writes nothing, so a buffer a
#: program then writes whole (a loop's outputs by step) is not filled first, and
#: updating it copies nothing.
empty = Op(
    "empty",
    infer=_empty_infer,
    arity=0,
    impl=lambda shape, dtype: np.zeros(shape, dtype.np),
    params={"shape": "ints", "dtype": "dtype"},
    jvp=zero_jvp,
    vjp=zero_vjp,
)
