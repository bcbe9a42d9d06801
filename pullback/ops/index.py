"""Indexing primitives: slices at run-time offsets, gathers and scatters along one axis.

``dynamic_slice``/``dynamic_update_slice`` clamp their starts into range (XLA semantics),
so they never read or write out of bounds; ``numpy_api`` emits NumPy's bounds checks
separately.  ``gather``/``scatter``/``scatter_add`` index one axis with an integer array
whose entries the caller keeps in range.

Derivatives: every op here is linear in its float operands once the integer ones are
fixed, so its jvp is the op itself applied to the tangents; the vjps pair up as
transposes (dynamic_slice with dynamic_update_slice, gather with scatter_add).
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..ir.core import Atom, Lit
from ..ir.op import Op, get_op
from ..ir.types import TensorType, int64
from . import elementwise as E
from . import shape as S
from .derivs import zeros


def _show(types) -> str:
    return ", ".join(str(t) for t in types)


def _check_starts(op: str, x: TensorType, starts, all_types) -> None:
    if len(starts) != x.ndim or any(s.shape != () or not s.dtype.is_int for s in starts):
        raise ShapeError(f"{op}: needs one 0-d integer start per axis of {x}, got "
                         f"({_show(all_types)})")


def _linear_jvp(name: str, *linear: int):
    """The jvp of an op linear in its operands at positions ``linear``, the others being
    integer indices: the op itself applied to those operands' tangents (zero for None)."""

    def jvp(primals, tangents, outs, **params):
        if all(tangents[i] is None for i in linear):
            return [None]
        args = list(primals)
        for i in linear:
            args[i] = zeros(primals[i].type) if tangents[i] is None else tangents[i]
        return [get_op(name)(*args, **params)]

    return jvp


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


def _dynamic_slice_vjp(primals, outs, cts, sizes):
    """The window's cotangent written into zeros; both ops clamp the starts alike."""
    x, *starts = primals
    return [dynamic_update_slice(zeros(x.type), cts[0], *starts), *[None] * len(starts)]


dynamic_slice = Op(
    "dynamic_slice",
    infer=_dynamic_slice_infer,
    impl=_dynamic_slice_impl,
    params={"sizes": "ints"},
    jvp=_linear_jvp("dynamic_slice", 0),
    vjp=_dynamic_slice_vjp,
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


def _dynamic_update_slice_vjp(primals, outs, cts):
    """The operand gets the cotangent outside the window, the update the window's."""
    x, upd, *starts = primals
    (ct,) = cts
    return [
        dynamic_update_slice(ct, zeros(upd.type), *starts),
        dynamic_slice(ct, *starts, sizes=upd.type.shape),
        *[None] * len(starts),
    ]


dynamic_update_slice = Op(
    "dynamic_update_slice",
    infer=_dynamic_update_slice_infer,
    impl=_dynamic_update_slice_impl,
    jvp=_linear_jvp("dynamic_update_slice", 0, 1),
    vjp=_dynamic_update_slice_vjp,
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


def _gather_vjp(primals, outs, cts, axis):
    """Each gathered element's cotangent added back where it came from (indices repeat)."""
    x, idx = primals
    return [scatter_add(zeros(x.type), idx, cts[0], axis=axis), None]


gather = Op(
    "gather",
    infer=_gather_infer,
    arity=2,
    impl=_gather_impl,
    params={"axis": "int"},
    jvp=_linear_jvp("gather", 0),
    vjp=_gather_vjp,
)


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


def _may_repeat(idx: Atom) -> bool:
    """Whether ``idx`` can hold an index twice (only a literal is known not to)."""
    return not isinstance(idx, Lit) or np.unique(idx.value).size < idx.value.size


def _written(x: TensorType, idx: Atom, upd: TensorType, axis: int) -> Atom:
    """Which updates a scatter keeps, as a mask of ``upd``'s shape.  Of the updates to one
    index the last (in C order of ``idx``) wins, as in NumPy: scatter each update's
    number the same way and read back which number stayed."""
    count = idx.type.size
    flat = S.reshape(idx, shape=(count,))
    numbers = S.iota(shape=(count,), dim=0, dtype=int64)
    winners = scatter(zeros(TensorType((x.shape[axis],), int64)), flat, numbers, axis=0)
    won = S.reshape(E.eq(gather(winners, flat, axis=0), numbers), shape=idx.type.shape)
    dims = tuple(range(axis, axis + idx.type.ndim))
    return S.broadcast_in_dim(won, shape=upd.shape, dims=dims)


def _scatter_vjp(primals, outs, cts, axis):
    """The operand keeps the cotangent where nothing was written; each update gets the
    cotangent of the position it was written to, unless a later update overwrote it."""
    x, idx, upd = primals
    (ct,) = cts
    ct_upd = gather(ct, idx, axis=axis)
    if _may_repeat(idx):
        ct_upd = E.select(_written(x.type, idx, upd.type, axis), ct_upd, zeros(ct_upd.type))
    return [scatter(ct, idx, zeros(upd.type), axis=axis), None, ct_upd]


def _scatter_add_vjp(primals, outs, cts, axis):
    """Adding passes the cotangent through; each update gets its position's."""
    (ct,) = cts
    return [ct, None, gather(ct, primals[1], axis=axis)]


scatter = Op(
    "scatter",
    infer=_scatter_infer("scatter", "bif"),
    arity=3,
    impl=_scatter_impl,
    params={"axis": "int"},
    jvp=_linear_jvp("scatter", 0, 2),
    vjp=_scatter_vjp,
)
scatter_add = Op(
    "scatter_add",
    infer=_scatter_infer("scatter_add", "if"),
    arity=3,
    impl=_scatter_add_impl,
    params={"axis": "int"},
    jvp=_linear_jvp("scatter_add", 0, 2),
    vjp=_scatter_add_vjp,
)
