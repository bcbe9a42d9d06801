"""Shape primitives: broadcast, reshape, transpose, slice, rev, concatenate, pad, iota.

All take static shapes/axes as params; none of them computes, so the native backend
folds them into the index arithmetic of the kernels around them.
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..ir.op import Op
from ..ir.types import TensorType


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


broadcast_in_dim = Op(
    "broadcast_in_dim",
    infer=_broadcast_in_dim_infer,
    impl=_broadcast_in_dim_impl,
    params={"shape": "ints", "dims": "ints"},
    fusion="broadcast",
)


def _reshape_infer(ts, shape):
    (x,) = ts
    if any(d < 0 for d in shape) or int(np.prod(shape, dtype=np.int64)) != x.size:
        raise ShapeError(f"cannot reshape array of size {x.size} {x} into shape {shape}")
    return TensorType(tuple(shape), x.dtype)


reshape = Op(
    "reshape",
    infer=_reshape_infer,
    impl=lambda x, shape: x.reshape(shape).copy(),
    params={"shape": "ints"},
    fusion="reshape",
)


def _transpose_infer(ts, perm):
    (x,) = ts
    if sorted(perm) != list(range(x.ndim)):
        raise ShapeError(f"transpose: axes {perm} don't match array {x}")
    return TensorType(tuple(x.shape[p] for p in perm), x.dtype)


transpose = Op(
    "transpose",
    infer=_transpose_infer,
    impl=lambda x, perm: np.transpose(x, perm).copy(),
    params={"perm": "ints"},
    fusion="reshape",
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


slice_ = Op(
    "slice",
    infer=_slice_infer,
    impl=_slice_impl,
    params={"start": "ints", "limit": "ints", "stride": "ints"},
    fusion="reshape",
)


def _rev_infer(ts, dims):
    (x,) = ts
    if len(set(dims)) != len(dims) or any(not 0 <= d < x.ndim for d in dims):
        raise ShapeError(f"rev: dims {dims} are not distinct axes of {x}")
    return TensorType(x.shape, x.dtype)


rev = Op(
    "rev",
    infer=_rev_infer,
    impl=lambda x, dims: np.flip(x, dims).copy(),
    params={"dims": "ints"},
    fusion="reshape",
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


concatenate = Op(
    "concatenate",
    infer=_concatenate_infer,
    impl=lambda *xs, axis: np.concatenate(xs, axis=axis),
    params={"axis": "int"},
    fusion="reshape",
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


pad = Op(
    "pad",
    infer=_pad_infer,
    impl=_pad_impl,
    params={"lo": "ints", "hi": "ints", "interior": "ints"},
    fusion="reshape",
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
    impl=_iota_impl,
    params={"shape": "ints", "dim": "int", "dtype": "dtype"},
    fusion="elementwise",
)
