"""Indexing primitives: slices at run-time offsets, gathers and scatters along one axis.

``dynamic_slice``/``dynamic_update_slice`` clamp their starts into range (XLA semantics),
so they never read or write out of bounds; ``numpy_api`` emits NumPy's bounds checks
separately.  ``gather``/``scatter``/``scatter_add`` index one axis with an integer array
whose entries the caller keeps in range.
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..ir.op import Op
from ..ir.types import TensorType


def _show(types) -> str:
    return ", ".join(str(t) for t in types)


def _check_starts(op: str, x: TensorType, starts, all_types) -> None:
    if len(starts) != x.ndim or any(s.shape != () or not s.dtype.is_int for s in starts):
        raise ShapeError(f"{op}: needs one 0-d integer start per axis of {x}, got "
                         f"({_show(all_types)})")


def _clamped(starts, shape, sizes) -> tuple[slice, ...]:
    """The window each (start, size) covers once the start is clamped to [0, dim - size]."""
    out = []
    for s, d, n in zip(starts, shape, sizes, strict=True):
        lo = min(max(int(s), 0), d - n)
        out.append(slice(lo, lo + n))
    return tuple(out)


def _dynamic_slice_infer(ts, sizes):
    x, *starts = ts
    _check_starts("dynamic_slice", x, starts, ts)
    if len(sizes) != x.ndim or any(not 0 <= n <= d for n, d in zip(sizes, x.shape, strict=True)):
        raise ShapeError(f"dynamic_slice: sizes {sizes} do not fit in {x}")
    return TensorType(tuple(sizes), x.dtype)


def _dynamic_slice_impl(x, *starts, sizes):
    return x[_clamped(starts, x.shape, sizes)].copy()


dynamic_slice = Op(
    "dynamic_slice",
    infer=_dynamic_slice_infer,
    impl=_dynamic_slice_impl,
    params={"sizes": "ints"},
)


def _dynamic_update_slice_infer(ts):
    x, upd, *starts = ts
    _check_starts("dynamic_update_slice", x, starts, ts)
    fits = upd.ndim == x.ndim and all(u <= d for u, d in zip(upd.shape, x.shape, strict=True))
    if upd.dtype != x.dtype or not fits:
        raise ShapeError(f"dynamic_update_slice: update {upd} does not fit in {x}")
    return TensorType(x.shape, x.dtype)


def _dynamic_update_slice_impl(x, upd, *starts):
    out = x.copy()
    out[_clamped(starts, x.shape, upd.shape)] = upd
    return out


dynamic_update_slice = Op(
    "dynamic_update_slice",
    infer=_dynamic_update_slice_infer,
    impl=_dynamic_update_slice_impl,
)


def _gathered(op: str, x: TensorType, idx: TensorType, axis: int, ts) -> TensorType:
    if not 0 <= axis < x.ndim or not idx.dtype.is_int:
        raise ShapeError(f"{op}: needs integer indices into an axis {axis} of the array, got "
                         f"({_show(ts)})")
    return TensorType(x.shape[:axis] + idx.shape + x.shape[axis + 1:], x.dtype)


def _gather_infer(ts, axis):
    x, idx = ts
    return _gathered("gather", x, idx, axis, ts)


def _in_range(idx: np.ndarray, axis: int, size: int) -> None:
    bad = idx[(idx < 0) | (idx >= size)]
    if bad.size:
        raise IndexError(f"index {bad.flat[0]} is out of bounds for axis {axis} with size {size}")


def _gather_impl(x, idx, axis):
    _in_range(idx, axis, x.shape[axis])
    return np.take(x, idx, axis=axis)


gather = Op("gather", infer=_gather_infer, impl=_gather_impl, params={"axis": "int"})


def _scatter_infer(op: str, kinds: str):
    def infer(ts, axis):
        x, idx, upd = ts
        want = _gathered(op, x, idx, axis, ts)
        if upd.strong() != want or x.dtype.kind not in kinds:
            raise ShapeError(f"{op}: updates must be {want} for ({_show(ts)})")
        return TensorType(x.shape, x.dtype)

    return infer


def _scatter_impl(x, idx, upd, axis):
    _in_range(idx, axis, x.shape[axis])
    out = x.copy()
    out[(slice(None),) * axis + (idx,)] = upd
    return out


def _scatter_add_impl(x, idx, upd, axis):
    _in_range(idx, axis, x.shape[axis])
    out = x.copy()
    np.add.at(out, (slice(None),) * axis + (idx,), upd)
    return out


scatter = Op(
    "scatter",
    infer=_scatter_infer("scatter", "bif"),
    impl=_scatter_impl,
    params={"axis": "int"},
)
scatter_add = Op(
    "scatter_add",
    infer=_scatter_infer("scatter_add", "if"),
    impl=_scatter_add_impl,
    params={"axis": "int"},
)
