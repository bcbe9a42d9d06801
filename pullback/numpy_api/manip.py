"""Array manipulation: reshaping, transposing, joining, splitting, tiling, flipping, padding.

Everything here only moves elements, so it lowers to ``reshape``/``transpose``/``slice``/
``rev``/``concatenate``/``pad``/``broadcast_in_dim`` (and a static ``gather`` where an
index map is simplest).  Shapes, axes, repeats and shifts must be static; results are
strong NumPy values even for Python scalar inputs.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import ShapeError, UnsupportedError
from ..ir.core import Atom, Lit, Var
from ..ir.types import broadcast_shapes, dtype
from ..ops import elementwise as E
from ..ops import index as X
from ..ops import shape as S
from .core import (
    CALLABLES,
    attribute,
    broadcast_args,
    broadcast_to,
    convert,
    method,
    normalize_axes,
    normalize_axis,
    promote,
    register,
    static,
    strong,
)
from .creation import as_array

# -- operands and static arguments ---------------------------------------------------


def static_ints(x: Any, what: str) -> tuple[int, ...]:
    """An int or a sequence of ints (NumPy accepts both for shapes, reps, axes ...)."""
    x = static(x, what)
    values = np.atleast_1d(np.asarray(x))
    if values.ndim != 1 or (values.size and values.dtype.kind not in "iu"):
        raise TypeError(f"{what} must be an integer or a sequence of integers, got {x!r}")
    return tuple(int(v) for v in values)


def no_out(out: Any) -> None:
    """Refuse ``out=``: results are new values, never written into a given array."""
    if out is not None:
        raise UnsupportedError("the out= argument is not supported",
                               hint="use the returned array instead")


def _c_order(order: str) -> None:
    if order != "C":
        raise UnsupportedError(
            f"order={order!r} is not supported",
            hint="pullback arrays have no memory layout; use the default order='C'",
        )


# -- reshaping -----------------------------------------------------------------------


def _resolve_shape(size: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    unknown = [i for i, d in enumerate(shape) if d == -1]
    if len(unknown) > 1:
        raise ShapeError("can only specify one unknown dimension")
    if any(d < -1 for d in shape):
        raise ShapeError("negative dimensions not allowed")
    known = math.prod(d for d in shape if d != -1)
    if unknown and known and size % known == 0:
        shape = tuple(size // known if d == -1 else d for d in shape)
    if -1 in shape or math.prod(shape) != size:
        raise ShapeError(f"cannot reshape array of size {size} into shape {shape}")
    return shape


def reshape_to(a: Any, shape: Sequence[int]) -> Atom:
    """``a`` reshaped (no equation when the shape is already right)."""
    a = strong(a)
    shape = tuple(shape)
    return a if a.type.shape == shape else S.reshape(a, shape=shape)


@register(np.reshape)
def reshape(a: Any, shape: Any, order: str = "C", *, copy: bool | None = None) -> Atom:
    _c_order(order)
    a = as_array(a)
    return reshape_to(a, _resolve_shape(a.type.size, static_ints(shape, "shape")))


@register(np.ravel)
def ravel(a: Any, order: str = "C") -> Atom:
    return reshape(a, -1, order)


@method("ravel", "flatten")
def _ravel_method(self: Any, order: str = "C") -> Atom:
    return ravel(self, order)


@method("reshape")
def _reshape_method(self: Any, *shape: Any, order: str = "C", copy: bool | None = None) -> Atom:
    return reshape(self, shape[0] if len(shape) == 1 else shape, order)


def transpose_to(a: Any, perm: Sequence[int]) -> Atom:
    a = strong(a)
    perm = tuple(perm)
    return a if perm == tuple(range(len(perm))) else S.transpose(a, perm=perm)


@register(np.transpose)
def transpose(a: Any, axes: Any = None) -> Atom:
    a = as_array(a)
    ndim = a.type.ndim
    if axes is None:
        return transpose_to(a, range(ndim)[::-1])
    axes = static_ints(axes, "axes")
    if len(axes) != ndim:
        raise ValueError("axes don't match array")
    perm = tuple(normalize_axis(ax, ndim) for ax in axes)
    if len(set(perm)) != ndim:
        raise ValueError("repeated axis in transpose")
    return transpose_to(a, perm)


@method("transpose")
def _transpose_method(self: Any, *axes: Any) -> Atom:
    if len(axes) <= 1:
        return transpose(self, axes[0] if axes else None)
    return transpose(self, axes)


@attribute("T")
def _T(self: Any) -> Atom:
    return transpose(self)


@register(np.swapaxes)
def swapaxes(a: Any, axis1: int, axis2: int) -> Atom:
    a = as_array(a)
    perm = list(range(a.type.ndim))
    i, j = normalize_axis(axis1, a.type.ndim), normalize_axis(axis2, a.type.ndim)
    perm[i], perm[j] = perm[j], perm[i]
    return transpose_to(a, perm)


method("swapaxes")(swapaxes)


def _axis_tuple(axis: Any, ndim: int, what: str) -> tuple[int, ...]:
    """Axes in the order given, NumPy's ``normalize_axis_tuple``."""
    axes = tuple(normalize_axis(ax, ndim) for ax in static_ints(axis, what))
    if len(set(axes)) != len(axes):
        raise ValueError(f"repeated axis in `{what}` argument")
    return axes


@register(np.moveaxis)
def moveaxis(a: Any, source: Any, destination: Any) -> Atom:
    a = as_array(a)
    ndim = a.type.ndim
    src = _axis_tuple(source, ndim, "source")
    dst = _axis_tuple(destination, ndim, "destination")
    if len(src) != len(dst):
        raise ValueError("`source` and `destination` arguments must have the same number "
                         "of elements")
    perm = [ax for ax in range(ndim) if ax not in src]
    for d, s in sorted(zip(dst, src, strict=True)):
        perm.insert(d, s)
    return transpose_to(a, perm)


@register(np.rollaxis)
def rollaxis(a: Any, axis: int, start: int = 0) -> Atom:
    """``axis`` moved to before ``start`` (NumPy's older spelling of ``moveaxis``)."""
    a = as_array(a)
    n = a.type.ndim
    axis = normalize_axis(axis, n)
    start = int(static(start, "start"))
    start += n if start < 0 else 0
    if not 0 <= start < n + 1:
        raise np.exceptions.AxisError(
            f"'start' arg requires {-n} <= start < {n + 1}, but {start} was passed in")
    start -= 1 if axis < start else 0
    axes = [ax for ax in range(n) if ax != axis]
    axes.insert(start, axis)
    return transpose_to(a, axes)


@register(np.expand_dims)
def expand_dims(a: Any, axis: Any) -> Atom:
    a = as_array(a)
    shape = list(a.type.shape)
    new = _axis_tuple(axis, a.type.ndim + len(static_ints(axis, "axis")), "axis")
    for ax in sorted(new):
        shape.insert(ax, 1)
    return reshape_to(a, shape)


@register(np.squeeze)
def squeeze(a: Any, axis: Any = None) -> Atom:
    a = as_array(a)
    shape = a.type.shape
    if axis is None:
        drop = tuple(i for i, d in enumerate(shape) if d == 1)
    else:
        drop = _axis_tuple(axis, a.type.ndim, "axis")
        if any(shape[i] != 1 for i in drop):
            raise ValueError("cannot select an axis to squeeze out which has size not equal "
                             "to one")
    return reshape_to(a, [d for i, d in enumerate(shape) if i not in drop])


method("squeeze")(squeeze)


# -- joining -------------------------------------------------------------------------


def _common_dtype(arrays: Sequence[Any], dt: Any, casting: str) -> list[Atom]:
    """The arrays converted to the dtype NumPy joins them in (``dtype=`` wins)."""
    atoms = [as_array(x) for x in arrays]
    if dt is None:
        return promote(*atoms)[0]
    target = dtype(dt)
    for a in atoms:
        if not np.can_cast(a.type.dtype.np, target.np, casting):
            raise TypeError(f"Cannot cast array data from {a.type.dtype.np!r} to "
                            f"{target.np!r} according to the rule {casting!r}")
    return [convert(a, target) for a in atoms]


def _join(arrays: Sequence[Atom], axis: int) -> Atom:
    return arrays[0] if len(arrays) == 1 else S.concatenate(*arrays, axis=axis)


def _one_array(arrays: Any, dt: Any = None, casting: str = "same_kind") -> Atom | None:
    """An array given where NumPy expects a sequence of arrays (NumPy iterates its first
    axis), converted to the joining dtype; None for a sequence."""
    if not isinstance(arrays, (Var, Lit)):
        return None
    if arrays.type.ndim == 0:
        raise TypeError("iteration over a 0-d array")
    if arrays.type.shape[0] == 0:
        raise ValueError("need at least one array to concatenate")
    return _common_dtype([arrays], dt, casting)[0]


def _join_rows(x: Atom, shape: Sequence[int], axis: int) -> Atom:
    """The rows of ``x``, each reshaped to ``shape``, concatenated along ``axis``: one
    transpose and reshape, however many rows."""
    k = x.type.shape[0]
    rows = reshape_to(x, (k, *shape))
    perm = (*range(1, axis + 1), 0, *range(axis + 1, len(shape) + 1))
    joined = list(shape)
    joined[axis] *= k
    return reshape_to(transpose_to(rows, perm), joined)


@register(np.concatenate)
def concatenate(arrays: Sequence[Any], axis: int | None = 0, out: None = None, *,
                dtype: Any = None, casting: str = "same_kind") -> Atom:
    no_out(out)
    x = _one_array(arrays, dtype, casting)
    if x is not None:
        if axis is None:
            return ravel(x)
        if x.type.ndim == 1:
            raise ValueError("zero-dimensional arrays cannot be concatenated")
        return _join_rows(x, x.type.shape[1:], normalize_axis(axis, x.type.ndim - 1))
    if len(arrays) == 0:
        raise ValueError("need at least one array to concatenate")
    atoms = _common_dtype(arrays, dtype, casting)
    if axis is None:
        return _join([ravel(a) for a in atoms], 0)
    if any(a.type.ndim == 0 for a in atoms):
        raise ValueError("zero-dimensional arrays cannot be concatenated")
    return _join(atoms, normalize_axis(axis, atoms[0].type.ndim))


@register(np.stack)
def stack(arrays: Sequence[Any], axis: int = 0, out: None = None, *, dtype: Any = None,
          casting: str = "same_kind") -> Atom:
    no_out(out)
    x = _one_array(arrays, dtype, casting)
    if x is not None:
        return moveaxis(x, 0, normalize_axis(axis, x.type.ndim))
    if len(arrays) == 0:
        raise ValueError("need at least one array to stack")
    atoms = _common_dtype(arrays, dtype, casting)
    if len({a.type.shape for a in atoms}) != 1:
        raise ValueError("all input arrays must have the same shape")
    axis = normalize_axis(axis, atoms[0].type.ndim + 1)
    return _join([expand_dims(a, axis) for a in atoms], axis)


def _at_least_shape(ndim: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """NumPy's atleast_{1,2,3}d placement of the missing axes."""
    if len(shape) >= ndim:
        return shape
    if ndim == 3:  # NumPy's choice: (n,) -> (1, n, 1) and (m, n) -> (m, n, 1)
        return {0: (1, 1, 1), 1: (1, *shape, 1), 2: (*shape, 1)}[len(shape)]
    return (1,) * (ndim - len(shape)) + shape


def _at_least(ndim: int, a: Any) -> Atom:
    a = as_array(a)
    return reshape_to(a, _at_least_shape(ndim, a.type.shape))


def _at_least_all(ndim: int, arys: tuple) -> Atom | tuple[Atom, ...]:
    out = tuple(_at_least(ndim, a) for a in arys)
    return out[0] if len(out) == 1 else out


@register(np.atleast_1d)
def atleast_1d(*arys: Any) -> Atom | tuple[Atom, ...]:
    return _at_least_all(1, arys)


@register(np.atleast_2d)
def atleast_2d(*arys: Any) -> Atom | tuple[Atom, ...]:
    return _at_least_all(2, arys)


@register(np.atleast_3d)
def atleast_3d(*arys: Any) -> Atom | tuple[Atom, ...]:
    return _at_least_all(3, arys)


def _stack_rows(tup: Any, ndim: int, axis: int, dt: Any = None,
                casting: str = "same_kind") -> Atom | None:
    """``{h,v,d}stack`` of one array: its rows made at least ``ndim``-d and joined along
    ``axis`` (``hstack`` passes 1 and joins 1-d rows along 0); None for a sequence."""
    x = _one_array(tup, dt, casting)
    if x is None:
        return None
    shape = _at_least_shape(ndim, x.type.shape[1:])
    return _join_rows(x, shape, axis if len(shape) > 1 else 0)


@register(np.hstack)
def hstack(tup: Sequence[Any], *, dtype: Any = None, casting: str = "same_kind") -> Atom:
    joined = _stack_rows(tup, 1, 1, dtype, casting)
    if joined is not None:
        return joined
    arrays = [_at_least(1, a) for a in tup]
    axis = 0 if arrays and arrays[0].type.ndim == 1 else 1
    return concatenate(arrays, axis, dtype=dtype, casting=casting)


@register(np.vstack, *[f for f in [getattr(np, "row_stack", None)] if f])  # gone in NumPy 2.5
def vstack(tup: Sequence[Any], *, dtype: Any = None, casting: str = "same_kind") -> Atom:
    joined = _stack_rows(tup, 2, 0, dtype, casting)
    if joined is not None:
        return joined
    return concatenate([_at_least(2, a) for a in tup], 0, dtype=dtype, casting=casting)


@register(np.dstack)
def dstack(tup: Sequence[Any]) -> Atom:
    joined = _stack_rows(tup, 3, 2)
    if joined is not None:
        return joined
    return concatenate([_at_least(3, a) for a in tup], 2)


@register(np.column_stack)
def column_stack(tup: Sequence[Any]) -> Atom:
    x = _one_array(tup)
    if x is not None:
        row = x.type.shape[1:]
        return _join_rows(x, row if len(row) >= 2 else (*row, 1) if row else (1, 1), 1)

    def column(a: Any) -> Atom:
        a = as_array(a)
        return transpose(_at_least(2, a)) if a.type.ndim < 2 else a

    return concatenate([column(a) for a in tup], 1)


@register(np.append)
def append(arr: Any, values: Any, axis: int | None = None) -> Atom:
    return concatenate((as_array(arr), as_array(values)), axis)


# -- splitting -----------------------------------------------------------------------


def slice_axis(a: Atom, axis: int, start: int, stop: int) -> Atom:
    """``a[..., start:stop, ...]`` along ``axis`` for in-range ``0 <= start <= stop``."""
    if (start, stop) == (0, a.type.shape[axis]):
        return a
    begin, limit = [0] * a.type.ndim, list(a.type.shape)
    begin[axis], limit[axis] = start, stop
    return S.slice_(a, start=tuple(begin), limit=tuple(limit), stride=(1,) * a.type.ndim)


def _split_at(a: Atom, points: Sequence[int], axis: int) -> list[Atom]:
    """Pieces between consecutive points, each bounded as a Python slice would be."""
    n = a.type.shape[axis]
    pieces = []
    for st, end in zip(points[:-1], points[1:], strict=True):
        lo, hi, _ = slice(st, end).indices(n)
        pieces.append(slice_axis(a, axis, lo, max(lo, hi)))
    return pieces


def _split(ary: Any, indices_or_sections: Any, axis: int, equal: bool) -> list[Atom]:
    a = as_array(ary)
    axis = normalize_axis(axis, a.type.ndim)
    n = a.type.shape[axis]
    spec = static(indices_or_sections, "indices_or_sections")
    if np.ndim(spec) == 1:
        return _split_at(a, [0, *static_ints(spec, "indices"), n], axis)
    sections = int(spec)
    if equal and n % sections:
        raise ValueError("array split does not result in an equal division")
    if sections <= 0:
        raise ValueError("number sections must be larger than 0.")
    each, extra = divmod(n, sections)
    sizes = [each + 1] * extra + [each] * (sections - extra)
    return _split_at(a, np.cumsum([0, *sizes]).tolist(), axis)


@register(np.split)
def split(ary: Any, indices_or_sections: Any, axis: int = 0) -> list[Atom]:
    return _split(ary, indices_or_sections, axis, equal=True)


@register(np.array_split)
def array_split(ary: Any, indices_or_sections: Any, axis: int = 0) -> list[Atom]:
    return _split(ary, indices_or_sections, axis, equal=False)


@register(np.hsplit)
def hsplit(ary: Any, indices_or_sections: Any) -> list[Atom]:
    ndim = as_array(ary).type.ndim
    if ndim == 0:
        raise ValueError("hsplit only works on arrays of 1 or more dimensions")
    return split(ary, indices_or_sections, 1 if ndim > 1 else 0)


@register(np.vsplit)
def vsplit(ary: Any, indices_or_sections: Any) -> list[Atom]:
    if as_array(ary).type.ndim < 2:
        raise ValueError("vsplit only works on arrays of 2 or more dimensions")
    return split(ary, indices_or_sections, 0)


@register(np.dsplit)
def dsplit(ary: Any, indices_or_sections: Any) -> list[Atom]:
    if as_array(ary).type.ndim < 3:
        raise ValueError("dsplit only works on arrays of 3 or more dimensions")
    return split(ary, indices_or_sections, 2)


# -- repeating -----------------------------------------------------------------------


def _nonnegative(counts: Sequence[int]) -> None:
    if any(c < 0 for c in counts):
        raise ValueError("negative dimensions are not allowed")


@register(np.tile)
def tile(A: Any, reps: Any) -> Atom:
    a = as_array(A)
    reps = static_ints(reps, "reps")
    _nonnegative(reps)
    ndim = max(len(reps), a.type.ndim)
    reps = (1,) * (ndim - len(reps)) + reps
    shape = (1,) * (ndim - a.type.ndim) + a.type.shape
    if all(r == 1 for r in reps):
        return reshape_to(a, shape)
    interleaved = tuple(d for pair in zip(reps, shape, strict=True) for d in pair)
    spread = S.broadcast_in_dim(reshape_to(a, shape), shape=interleaved,
                                dims=tuple(range(1, 2 * ndim, 2)))
    return reshape_to(spread, tuple(r * d for r, d in zip(reps, shape, strict=True)))


@register(np.repeat)
def repeat(a: Any, repeats: Any, axis: int | None = None) -> Atom:
    a = as_array(a)
    if axis is None:
        a, axis = ravel(a), 0
    axis = normalize_axis(axis, a.type.ndim)
    n = a.type.shape[axis]
    counts = static_ints(repeats, "repeats")
    _nonnegative(counts)
    if len(counts) == 1:
        shape = a.type.shape
        wide = S.broadcast_in_dim(a, shape=shape[:axis + 1] + counts + shape[axis + 1:],
                                  dims=tuple(i + (i > axis) for i in range(len(shape))))
        return reshape_to(wide, shape[:axis] + (n * counts[0],) + shape[axis + 1:])
    if len(counts) != n:
        raise ValueError(f"operands could not be broadcast together with shape ({n},) "
                         f"({len(counts)},)")
    return X.gather(a, Lit(np.repeat(np.arange(n), counts)), axis=axis)


method("repeat")(repeat)


# -- broadcasting --------------------------------------------------------------------


@register(np.broadcast_to)
def broadcast_to_(array: Any, shape: Any, subok: bool = False) -> Atom:
    shape = static_ints(shape, "shape")
    _nonnegative(shape)
    return broadcast_to(as_array(array), shape)


@register(np.broadcast_arrays)
def broadcast_arrays(*args: Any, subok: bool = False) -> tuple[Atom, ...]:
    atoms = [as_array(a) for a in args]
    shape = broadcast_shapes(*(a.type.shape for a in atoms))
    return tuple(broadcast_to(a, shape) for a in atoms)


# -- flipping and rolling ------------------------------------------------------------


def _rev(a: Atom, axes: Sequence[int]) -> Atom:
    return S.rev(a, dims=tuple(axes)) if axes else a


@register(np.flip)
def flip(m: Any, axis: Any = None) -> Atom:
    a = as_array(m)
    axes = normalize_axes(None if axis is None else static(axis, "axis"), a.type.ndim)
    return _rev(a, axes)


@register(np.fliplr)
def fliplr(m: Any) -> Atom:
    a = as_array(m)
    if a.type.ndim < 2:
        raise ValueError("Input must be >= 2-d.")
    return _rev(a, (1,))


@register(np.flipud)
def flipud(m: Any) -> Atom:
    a = as_array(m)
    if a.type.ndim < 1:
        raise ValueError("Input must be >= 1-d.")
    return _rev(a, (0,))


@register(np.roll)
def roll(a: Any, shift: Any, axis: Any = None) -> Atom:
    x = as_array(a)
    if axis is None:
        return reshape_to(roll(ravel(x), shift, 0), x.type.shape)
    shifts, axes = np.broadcast_arrays(np.asarray(static_ints(shift, "shift")),
                                       np.asarray(static_ints(axis, "axis")))
    total = [0] * x.type.ndim
    for s, ax in zip(shifts.tolist(), axes.tolist(), strict=True):
        total[normalize_axis(ax, x.type.ndim)] += s
    for ax, s in enumerate(total):
        n = x.type.shape[ax]
        if n and s % n:
            cut = n - s % n
            x = S.concatenate(slice_axis(x, ax, cut, n), slice_axis(x, ax, 0, cut), axis=ax)
    return x


@register(np.rot90)
def rot90(m: Any, k: int = 1, axes: Any = (0, 1)) -> Atom:
    a = as_array(m)
    axes = static_ints(axes, "axes")
    ndim = a.type.ndim
    if len(axes) != 2:
        raise ValueError("len(axes) must be 2.")
    if axes[0] == axes[1] or abs(axes[0] - axes[1]) == ndim:
        raise ValueError("Axes must be different.")
    if not all(-ndim <= ax < ndim for ax in axes):
        raise ValueError(f"Axes={axes} out of range for array of ndim={ndim}.")
    i, j = (ax % ndim for ax in axes)
    k = static(k, "k") % 4
    if k == 2:
        return _rev(a, (i, j))
    perm = list(range(ndim))
    perm[i], perm[j] = perm[j], perm[i]
    if k == 1:
        return transpose_to(_rev(a, (j,)), perm)
    return _rev(transpose_to(a, perm), (j,)) if k == 3 else a


# -- padding -------------------------------------------------------------------------


def _per_axis_pairs(value: Any, ndim: int, what: str) -> np.ndarray:
    """``pad_width``-style broadcasting of a scalar, a pair or per-axis pairs to (ndim, 2)."""
    try:
        return np.broadcast_to(np.asarray(value), (ndim, 2))
    except ValueError:
        raise ValueError(f"unable to broadcast {what} {value!r} to ({ndim}, 2)") from None


def _pad_constant(a: Atom, widths: np.ndarray, values: Any) -> Atom:
    zeros = (0,) * a.type.ndim
    if isinstance(values, (Var, Lit)) or np.ndim(values) == 0:
        return S.pad(a, convert(values, a.type.dtype), lo=tuple(widths[:, 0].tolist()),
                     hi=tuple(widths[:, 1].tolist()), interior=zeros)
    per_axis = _per_axis_pairs(values, a.type.ndim, "constant_values")
    for ax in range(a.type.ndim):
        for side in (0, 1):
            if widths[ax, side]:
                lo_hi = [list(zeros), list(zeros)]
                lo_hi[side][ax] = int(widths[ax, side])
                fill = convert(Lit(np.asarray(per_axis[ax, side])), a.type.dtype)
                a = S.pad(a, fill, lo=tuple(lo_hi[0]), hi=tuple(lo_hi[1]), interior=zeros)
    return a


def _pad_by_index_map(a: Atom, widths: np.ndarray, mode: str, kwargs: dict) -> Atom:
    """Modes that only copy elements: NumPy pads ``arange(n)`` and we gather by the result."""
    for ax in range(a.type.ndim):
        if widths[ax].any():
            n = a.type.shape[ax]
            if n == 0:
                raise ValueError(f"can't extend empty axis {ax} using modes other than "
                                 "'constant' or 'empty'")
            index = np.pad(np.arange(n), widths[ax], mode=mode, **kwargs)
            a = X.gather(a, Lit(index), axis=ax)
    return a


def _odd_reflection(a: Atom, ax: int, widths: np.ndarray, include_edge: bool) -> Atom:
    """``reflect_type='odd'``: NumPy's loop, chunk by chunk, each chunk reflected about
    the current edge (``2 * edge - chunk``), so wide pads round as NumPy's do."""
    period = a.type.shape[ax]
    left, right = (int(w) for w in widths)
    edge_offset = int(include_edge)
    two = convert(2, a.type.dtype)
    while left > 0 or right > 0:
        n = a.type.shape[ax]
        if include_edge:
            old = n // period * period
        else:
            old = (n - 1) // (period - 1) * (period - 1)
        if left > 0:
            k = min(old, left)
            chunk = _rev(slice_axis(a, ax, 1 - edge_offset, k + 1 - edge_offset), (ax,))
            edge = slice_axis(a, ax, 0, 1)
            a = S.concatenate(E.sub(*broadcast_args(E.mul(two, edge), chunk)), a, axis=ax)
            left -= k
        if right > 0:
            n = a.type.shape[ax]
            k = min(old, right)
            chunk = _rev(slice_axis(a, ax, n + edge_offset - 1 - k, n + edge_offset - 1), (ax,))
            edge = slice_axis(a, ax, n - 1, n)
            a = S.concatenate(a, E.sub(*broadcast_args(E.mul(two, edge), chunk)), axis=ax)
            right -= k
    return a


def _pad_reflect(a: Atom, widths: np.ndarray, mode: str, kind: str) -> Atom:
    if kind not in ("even", "odd"):
        raise ValueError(f"reflect_type must be 'even' or 'odd', got {kind!r}")
    if kind == "even":
        return _pad_by_index_map(a, widths, mode, {})
    for ax in range(a.type.ndim):
        if not widths[ax].any():
            continue
        if a.type.shape[ax] == 1:  # NumPy's legacy: a singleton axis is edge-padded
            a = _pad_by_index_map(a, _only_axis(widths, ax), "edge", {})
        else:
            a = _odd_reflection(a, ax, widths[ax], mode == "symmetric")
    return a


def _only_axis(widths: np.ndarray, ax: int) -> np.ndarray:
    out = np.zeros_like(widths)
    out[ax] = widths[ax]
    return out


def _stat_of(a: Atom, ax: int, start: int, stop: int, mode: str) -> Atom:
    """The statistic NumPy pads with, over ``a[start:stop]`` along ``ax``, kept 1 long and
    rounded (half to even) for integer arrays."""
    stat = {"maximum": np.max, "minimum": np.min, "mean": np.mean, "median": np.median}[mode]
    value = CALLABLES[stat](slice_axis(a, ax, start, stop), axis=ax, keepdims=True)
    if a.type.dtype.is_int and value.type.dtype.is_float:
        value = E.round_(value)
    return convert(value, a.type.dtype)


def _pad_stat(a: Atom, widths: np.ndarray, mode: str, stat_length: Any) -> Atom:
    lengths = None if stat_length is None else _per_axis_pairs(
        static(stat_length, "stat_length"), a.type.ndim, "stat_length")
    for ax in range(a.type.ndim):
        n = a.type.shape[ax]
        left_n, right_n = (n, n) if lengths is None else (min(int(v), n) for v in lengths[ax])
        if (left_n == 0 or right_n == 0) and mode in ("maximum", "minimum"):
            raise ValueError("stat_length of 0 yields no value for padding")
        pieces = []
        for side, count in ((0, left_n), (1, right_n)):
            width = int(widths[ax, side])
            if width:
                stat = _stat_of(a, ax, 0 if side == 0 else n - count, count if side == 0 else n,
                                mode)
                shape = list(a.type.shape)
                shape[ax] = width
                pieces.append((side, broadcast_to(stat, shape)))
        parts = [p for side, p in pieces if side == 0] + [a] + [p for side, p in pieces if side]
        a = parts[0] if len(parts) == 1 else S.concatenate(*parts, axis=ax)
    return a


def _pad_ramp(a: Atom, widths: np.ndarray, end_values: Any) -> Atom:
    """Each side ``np.linspace(end_value, edge, width, endpoint=False)`` (the right side
    reversed), as NumPy builds it."""
    ends = _per_axis_pairs(static(end_values, "end_values"), a.type.ndim, "end_values")
    for ax in range(a.type.ndim):
        n = a.type.shape[ax]
        parts = [a]
        for side in (0, 1):
            width = int(widths[ax, side])
            if not width:
                continue
            edge = reshape_to(slice_axis(a, ax, 0 if side == 0 else n - 1, 1 if side == 0 else n),
                              a.type.shape[:ax] + a.type.shape[ax + 1:])
            ramp = CALLABLES[np.linspace](Lit(np.asarray(ends[ax, side])), edge, width,
                                          endpoint=False, dtype=a.type.dtype.np, axis=ax)
            parts = [ramp, *parts] if side == 0 else [*parts, _rev(ramp, (ax,))]
        a = parts[0] if len(parts) == 1 else S.concatenate(*parts, axis=ax)
    return a


_STAT_MODES = ("maximum", "minimum", "mean", "median")


@register(np.pad)
def pad(array: Any, pad_width: Any, mode: str = "constant", **kwargs: Any) -> Atom:
    a = as_array(array)
    widths = static(pad_width, "pad_width")
    if np.asarray(widths).dtype.kind not in "iu":
        raise TypeError("`pad_width` must be of integral type.")
    widths = _per_axis_pairs(widths, a.type.ndim, "pad_width").astype(np.int64)
    if (widths < 0).any():
        raise ValueError("index can't contain negative values")
    allowed = {"constant": {"constant_values"}, "reflect": {"reflect_type"},
               "symmetric": {"reflect_type"}, "linear_ramp": {"end_values"},
               "edge": set(), "wrap": set(), **{m: {"stat_length"} for m in _STAT_MODES}}
    if mode not in allowed:
        raise UnsupportedError(f"np.pad mode={mode!r} is not supported",
                               hint="supported: " + ", ".join(map(repr, allowed)))
    if set(kwargs) - allowed[mode]:
        raise ValueError(f"unsupported keyword arguments for mode '{mode}': "
                         f"{set(kwargs) - allowed[mode]}")
    if mode == "constant":
        return _pad_constant(a, widths, kwargs.pop("constant_values", 0))
    for ax, n in enumerate(a.type.shape):
        if n == 0 and widths[ax].any():
            raise ValueError(f"can't extend empty axis {ax} using modes other than "
                             "'constant' or 'empty'")
    if mode in ("reflect", "symmetric"):
        return _pad_reflect(a, widths, mode, kwargs.get("reflect_type", "even"))
    if mode in _STAT_MODES:
        return _pad_stat(a, widths, mode, kwargs.get("stat_length"))
    if mode == "linear_ramp":
        return _pad_ramp(a, widths, kwargs.get("end_values", 0))
    return _pad_by_index_map(a, widths, mode, {})


# -- static facts ----------------------------------------------------------------------


@register(np.shape)
def shape(a: Any) -> tuple[int, ...]:
    return as_array(a).type.shape


@register(np.ndim)
def ndim(a: Any) -> int:
    return as_array(a).type.ndim


@register(np.size)
def size(a: Any, axis: Any = None) -> int:
    t = as_array(a).type
    if axis is None:
        return t.size
    return math.prod(t.shape[ax] for ax in _axis_tuple(axis, t.ndim, "axis"))


attribute("shape")(shape)
attribute("ndim")(ndim)
attribute("size")(size)


@attribute("dtype")
def _dtype(self: Any) -> np.dtype:
    return as_array(self).type.dtype.np
