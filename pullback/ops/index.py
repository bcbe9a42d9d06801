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
from . import batching as B
from . import elementwise as E
from . import shape as S
from .derivs import const, zeros


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


# -- batching: per-lane windows and indices as gathers and scatters ------------------


def _int64(x: Atom) -> Atom:
    return x if x.type.dtype == int64 else E.convert(x, dtype=int64, weak=False)


def _lane_indices(idx: Atom, d: int, size: int, n: int) -> Atom:
    """Indices of each lane into its own block of ``n`` (see ``batching.fold_lanes``), at 0."""
    idx = _int64(B.moveaxis(idx, d, 0))
    lane = S.iota(shape=idx.type.shape, dim=0, dtype=int64)
    return E.add(idx, E.mul(lane, const(n, lane.type)))


def _window(start: Atom, size: int, dim: int, n: int) -> Atom:
    """The positions [lanes, n] of each lane's window of ``n`` along an axis of ``dim``,
    its start (batched at 0) clamped as ``_clamped`` does."""
    lo = E.min_(E.max_(_int64(start), const(0, TensorType((), int64))),
               const(dim - n, TensorType((), int64)))
    spread = S.broadcast_in_dim(lo, shape=(size, n), dims=(0,))
    return E.add(spread, S.iota(shape=(size, n), dim=1, dtype=int64))


def _lane_starts(starts, d: B.Dim) -> list[Atom]:
    """A lane's window starts for the value batched at ``d`` (the lane axis from 0)."""
    return list(starts) if d is None else [*starts[:d], Lit(np.int64(0)), *starts[d:]]


def _fixed(starts, dims) -> list[Atom]:
    """The unbatched starts, 0 in place of the batched ones."""
    return [s if d is None else Lit(np.int64(0)) for s, d in zip(starts, dims, strict=True)]


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


def _dynamic_slice_batch(args, dims, size, sizes):
    """Unbatched starts slice every lane at once; a batched start picks each lane's
    window along its axis with a gather."""
    (x, *starts), (dx, *ds) = args, dims
    shape = B.lane_type(x.type, dx).shape
    near = tuple(dim if d is not None else n for n, d, dim in zip(sizes, ds, shape, strict=True))
    if near != shape:
        lanes = near if dx is None else (*near[:dx], size, *near[dx:])
        x = dynamic_slice(x, *_lane_starts(_fixed(starts, ds), dx), sizes=lanes)
    for axis, (s, d) in enumerate(zip(starts, ds, strict=True)):
        if d is not None:
            idx = _window(s, size, shape[axis], sizes[axis])
            (x,), (dx,) = _gather_batch([x, idx], [dx, 0], size, axis=axis)
    return [x], [dx]


dynamic_slice = Op(
    "dynamic_slice",
    infer=_dynamic_slice_infer,
    impl=_dynamic_slice_impl,
    params={"sizes": "ints"},
    jvp=_linear_jvp("dynamic_slice", 0),
    vjp=_dynamic_slice_vjp,
    batch=_dynamic_slice_batch,
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
    """The operand gets the cotangent outside the window, the update the window's.

    The window is read before it is zeroed: then ``ct`` dies at the write, which the
    backend makes in place, instead of a copy of the whole array per update (a loop
    writing one element per iteration would be quadratic in its backward).  One
    element is read as a 0-d value there and then (the backend's one-load pair; the
    update's own 0-d reshape later is the same value to CSE), not as a buffer."""
    x, upd, *starts = primals
    (ct,) = cts
    window = dynamic_slice(ct, *starts, sizes=upd.type.shape)
    if upd.type.size == 1:
        window = S.reshape(S.reshape(window, shape=()), shape=upd.type.shape)
    return [dynamic_update_slice(ct, zeros(upd.type), *starts), window, *[None] * len(starts)]


def _write(w: Atom, dw: B.Dim, upd: Atom, du: B.Dim, idxs, axes, size: int):
    """``upd`` written into each lane of ``w`` at the positions ``idxs`` ([lanes, n] each,
    batched at 0) along ``axes``: a scatter along the first axis of the part of ``w``
    that the inner axes' write was made into."""
    (idx, *rest), (axis, *more) = idxs, axes
    if rest:
        (part,), (dp,) = _gather_batch([w, idx], [dw, 0], size, axis=axis)
        upd, du = _write(part, dp, upd, du, rest, more, size)
    (out,), (d,) = _scatter_batch("scatter")([w, idx, upd], [dw, 0, du], size, axis=axis)
    return out, d


def _dynamic_update_slice_batch(args, dims, size):
    """Unbatched starts write every lane's window at once.  Batched starts: the window
    of the unbatched ones is sliced out, each lane's update scattered into it along
    the batched axes, and the window written back."""
    (x, upd, *starts), (dx, du, *ds) = args, dims
    if all(d is None for d in ds):
        d = du if dx is None else dx
        out = dynamic_update_slice(B.at(x, dx, size, d), B.at(upd, du, size, d),
                                   *_lane_starts(starts, d))
        return [out], [d]
    shape = B.lane_type(x.type, dx).shape
    inner = B.lane_type(upd.type, du).shape
    near = tuple(dim if d is not None else n for n, d, dim in zip(inner, ds, shape, strict=True))
    fixed, unbatched = _fixed(starts, ds), [None] * len(ds)
    w, dw = x, dx
    if near != shape:
        (w,), (dw,) = _dynamic_slice_batch([x, *fixed], [dx, *unbatched], size, sizes=near)
    axes = [a for a, d in enumerate(ds) if d is not None]
    idxs = [_window(starts[a], size, shape[a], inner[a]) for a in axes]
    w, dw = _write(w, dw, upd, du, idxs, axes, size)
    if near == shape:
        return [w], [dw]
    return _dynamic_update_slice_batch([x, w, *fixed], [dx, dw, *unbatched], size)


dynamic_update_slice = Op(
    "dynamic_update_slice",
    infer=_dynamic_update_slice_infer,
    impl=_dynamic_update_slice_impl,
    jvp=_linear_jvp("dynamic_update_slice", 0, 1),
    vjp=_dynamic_update_slice_vjp,
    batch=_dynamic_update_slice_batch,
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


def _gather_batch(args, dims, size, axis):
    """Unbatched indices index every lane at once, and unbatched data with batched
    indices is one gather too; both batched index each lane's own block of the data."""
    (x, idx), (dx, di) = args, dims
    if di is None:
        a = B.axis_in(axis, dx)
        return [gather(x, idx, axis=a)], [dx if dx < a else dx + idx.type.ndim - 1]
    if dx is None:
        return [gather(x, idx, axis=axis)], [axis + di]
    n = x.type.shape[B.axis_in(axis, dx)]
    out = gather(B.fold_lanes(x, dx, size, axis), _lane_indices(idx, di, size, n), axis=axis)
    return [out], [axis]


gather = Op(
    "gather",
    infer=_gather_infer,
    arity=2,
    impl=_gather_impl,
    params={"axis": "int"},
    jvp=_linear_jvp("gather", 0),
    vjp=_gather_vjp,
    batch=_gather_batch,
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


def _scatter_batch(name: str):
    """The rule of ``scatter``/``scatter_add``.  Unbatched indices: the operand's lane
    axis is where the updates' is (when it lies outside the index dims) and the
    updates follow it.  Batched indices: each lane writes its own block of the operand,
    and as the blocks do not overlap, an index's last update still wins."""

    def rule(args, dims, size, axis):
        (x, idx, upd), (dx, di, du) = args, dims
        op = get_op(name)
        if di is not None:
            n = x.type.shape[B.axis_in(axis, dx)]
            out = op(B.fold_lanes(x, dx, size, axis), _lane_indices(idx, di, size, n),
                     B.at(upd, du, size, axis), axis=axis)
            return [B.unfold_lanes(out, size, axis)], [axis]
        ni = idx.type.ndim
        d = dx if dx is not None else du if du <= axis else du - ni + 1 if du >= axis + ni else axis
        into = d if d <= axis else d + ni - 1
        out = op(B.at(x, dx, size, d), idx, B.at(upd, du, size, into), axis=B.axis_in(axis, d))
        return [out], [d]

    return rule


scatter = Op(
    "scatter",
    infer=_scatter_infer("scatter", "bif"),
    arity=3,
    impl=_scatter_impl,
    params={"axis": "int"},
    jvp=_linear_jvp("scatter", 0, 2),
    vjp=_scatter_vjp,
    batch=_scatter_batch("scatter"),
)
scatter_add = Op(
    "scatter_add",
    infer=_scatter_infer("scatter_add", "if"),
    arity=3,
    impl=_scatter_add_impl,
    params={"axis": "int"},
    jvp=_linear_jvp("scatter_add", 0, 2),
    vjp=_scatter_add_vjp,
    batch=_scatter_batch("scatter_add"),
)
