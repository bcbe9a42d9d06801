"""NumPy indexing: ``x[idx]``, ``x[idx] = v`` (functional), ``np.take``, ``np.take_along_axis``.

An index is first resolved against the array's shape into one entry per axis it makes or
consumes.  Basic entries (ints, slices, ``None``) become one ``slice``, one ``rev``, one
``dynamic_slice`` for run-time ints and a ``reshape``.  Advanced entries (integer arrays,
static boolean masks, and the ints beside them) are merged into a single axis read by
one ``gather``, placed where NumPy puts them.  Run-time indices are wrapped when negative
and bounds-checked by a ``check`` that raises NumPy's IndexError.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ShapeError, UnsupportedError, users_call
from ..ir.core import Atom, Lit, Var
from ..ir.types import bool_, broadcast_shapes, int64
from ..ops import ad as D
from ..ops import control as C
from ..ops import elementwise as E
from ..ops import index as X
from ..ops import reduce as R
from ..ops import shape as S
from ..ops import sort as O
from .core import (
    broadcast_to,
    convert,
    normalize_axis,
    operator_,
    register,
    static,
    strong,
    typeof,
    writer,
)
from .creation import as_array
from .manip import no_out, ravel, reshape_to, transpose_to

_VALID = ("only integers, slices (`:`), ellipsis (`...`), numpy.newaxis (`None`) and "
          "integer or boolean arrays are valid indices")

#: A resolved index value: a Python int or an integer array when static, else an operand.
Index = int | np.ndarray | Atom


def _out_of_bounds(value: Any, axis: int, size: int) -> str:
    return f"index {value} is out of bounds for axis {axis} with size {size}"


def _is_ir(x: Any) -> bool:
    return isinstance(x, (Var, Lit))


# -- bounds and wrapping ---------------------------------------------------------------


def _check_bounds(i: Atom, axis: int, size: int) -> None:
    """Emit NumPy's IndexError for run-time indices outside [-size, size)."""
    if i.type.size == 0:
        return
    n = convert(size, i.type.dtype)
    axes = tuple(range(i.type.ndim))
    hi = R.reduce_max(i, axes=axes) if axes else i
    lo = R.reduce_min(i, axes=axes) if axes else i
    ok = E.and_(E.lt(hi, n), E.ge(lo, convert(-size, i.type.dtype)))
    culprit = E.select(E.ge(hi, n), hi, lo)
    C.check(ok, culprit, exc="IndexError", fmt=_out_of_bounds("{}", axis, size))


def normalize_index(index: Index, size: int, axis: int) -> Index:
    """Indices into an axis of ``size``, negatives wrapped, out-of-bounds ones refused."""
    if _is_ir(index):
        i = strong(index)
        _check_bounds(i, axis, size)
        return E.select(E.lt(i, convert(0, i.type.dtype)), E.add(i, convert(size, i.type.dtype)),
                        i)
    arr = np.asarray(index)
    bad = arr[(arr < -size) | (arr >= size)]
    if bad.size:
        raise IndexError(_out_of_bounds(bad.flat[0], axis, size))
    wrapped = np.where(arr < 0, arr + size, arr).astype(np.intp)
    return int(wrapped) if isinstance(index, int) else wrapped


# -- resolving an index against a shape -------------------------------------------------


@dataclass(frozen=True)
class _New:
    """``None``: a new axis of length 1."""


@dataclass(frozen=True)
class _Slice:
    """A static slice as its first element, element count, stride and direction."""

    start: int
    size: int
    stride: int
    reverse: bool


@dataclass(frozen=True)
class _Int:
    """An integer (static or run-time) that removes its axis."""

    index: Index


@dataclass(frozen=True)
class _Array:
    """An advanced index; ``consumes`` is False for a scalar boolean's new axis."""

    index: Index
    consumes: bool = True


Entry = _New | _Slice | _Int | _Array


def _raw(item: Any) -> Any:
    """One item of an index in a canonical form, or NumPy's IndexError."""
    if item is None or item is Ellipsis:
        return item
    if isinstance(item, Var):
        if item.type.dtype.is_bool:
            raise UnsupportedError(
                "reading x[mask] with a run-time boolean mask gives a data-dependent shape",
                hint="use np.where(mask, x, other) to keep the shape static (or a where= "
                "argument of a reduction); assigning through the mask compiles: "
                "x[mask] = v, x[mask] += v, and x[m] = y[m] with the mask in a variable",
            )
        if not item.type.dtype.is_int:
            raise IndexError(_VALID)
        return item
    if isinstance(item, slice):
        return slice(*(static(v, "a slice bound") for v in (item.start, item.stop, item.step)))
    if isinstance(item, Lit):
        return _raw(item.value)
    if isinstance(item, list):
        return _raw(as_array(item) if item else np.zeros(0, np.intp))
    if isinstance(item, (bool, np.bool_)):
        return np.asarray(item)
    if isinstance(item, (int, np.integer)):
        return int(item)
    if isinstance(item, np.ndarray):
        if item.dtype.kind not in "biu":
            raise IndexError("arrays used as indices must be of integer (or boolean) type")
        return int(item) if item.dtype.kind != "b" and item.ndim == 0 else item
    raise IndexError(_VALID)


def _is_mask(r: Any) -> bool:
    return isinstance(r, np.ndarray) and r.dtype.kind == "b"


def _consumed(r: Any) -> int:
    if r is None or r is Ellipsis:
        return 0
    return r.ndim if _is_mask(r) else 1


def _expand_ellipsis(items: list, ndim: int) -> list:
    used = sum(_consumed(r) for r in items)
    if used > ndim:
        raise IndexError(f"too many indices for array: array is {ndim}-dimensional, but "
                         f"{used} were indexed")
    spots = [k for k, r in enumerate(items) if r is Ellipsis]
    if len(spots) > 1:
        raise IndexError("an index can only have a single ellipsis ('...')")
    k = spots[0] if spots else len(items)
    return items[:k] + [slice(None)] * (ndim - used) + items[k + 1:]


def _slice_entry(s: slice, size: int) -> _Slice:
    picked = range(*users_call(s.indices, size))  # TypeError for float bounds, as NumPy
    if len(picked) <= 1:
        return _Slice(picked[0] if picked else 0, len(picked), 1, False)
    return _Slice(min(picked[0], picked[-1]), len(picked), abs(picked.step), picked.step < 0)


def _mask_entries(mask: np.ndarray, shape: tuple[int, ...], axis: int) -> list[Entry]:
    if mask.ndim == 0:  # x[True] / x[False]: a new axis indexed by [0] or by []
        return [_Array(np.zeros(int(mask), np.intp), consumes=False)]
    for k, m in enumerate(mask.shape):
        if shape[axis + k] != m:
            raise IndexError(f"boolean index did not match indexed array along axis "
                             f"{axis + k}; size of axis is {shape[axis + k]} but size of "
                             f"corresponding boolean axis is {m}")
    return [_Array(nz) for nz in np.nonzero(mask)]


def resolve(shape: tuple[int, ...], idx: Any) -> list[Entry]:
    """The entries NumPy's indexing makes of ``idx`` for an array of ``shape``."""
    items = _expand_ellipsis([_raw(i) for i in (idx if isinstance(idx, tuple) else (idx,))],
                             len(shape))
    advanced = any(isinstance(r, np.ndarray) or (_is_ir(r) and r.type.ndim) for r in items)
    entries: list[Entry] = []
    axis = 0
    for r in items:
        if r is None:
            entries.append(_New())
        elif isinstance(r, slice):
            entries.append(_slice_entry(r, shape[axis]))
        elif _is_mask(r):
            entries += _mask_entries(r, shape, axis)
        else:
            index = normalize_index(r, shape[axis], axis)
            entries.append(_Array(np.asarray(index) if isinstance(index, int) else index)
                           if advanced else _Int(index))
        axis += _consumed(r)
    return entries


# -- the basic part: one window of the array -----------------------------------------------


@dataclass
class _Window:
    """What the basic entries read: per axis of the array a static first element, count and
    stride, the axes read backwards and the run-time starts of integer-indexed axes; per
    axis of the result, its advanced index (None for a plain axis)."""

    start: list[int]
    size: list[int]
    stride: list[int]
    reverse: list[int] = field(default_factory=list)
    dynamic: dict[int, Atom] = field(default_factory=dict)
    shape: list[int] = field(default_factory=list)
    advanced: list[Index | None] = field(default_factory=list)

    @property
    def limit(self) -> tuple[int, ...]:
        return tuple(st + (n - 1) * sd + 1 if n else st
                     for st, n, sd in zip(self.start, self.size, self.stride, strict=True))

    @property
    def box(self) -> tuple[int, ...]:
        """The extent read along each axis of the array."""
        return tuple(1 if ax in self.dynamic else n for ax, n in enumerate(self.size))


def _window(shape: tuple[int, ...], entries: list[Entry]) -> _Window:
    w = _Window([0] * len(shape), list(shape), [1] * len(shape))
    axis = 0
    for e in entries:
        if isinstance(e, _New) or (isinstance(e, _Array) and not e.consumes):
            w.shape.append(1)
            w.advanced.append(None if isinstance(e, _New) else e.index)
            continue
        if isinstance(e, _Slice):
            w.start[axis], w.size[axis], w.stride[axis] = e.start, e.size, e.stride
            w.reverse += [axis] * e.reverse
            w.shape.append(e.size)
            w.advanced.append(None)
        elif isinstance(e, _Array):
            w.shape.append(shape[axis])
            w.advanced.append(e.index)
        elif _is_ir(e.index):
            w.dynamic[axis] = e.index
        else:
            w.start[axis], w.size[axis] = e.index, 1
        axis += 1
    return w


def _dynamic_slice(y: Atom, starts: dict[int, Atom]) -> Atom:
    shape = y.type.shape
    empty = tuple(int(ax in starts and shape[ax] == 0) for ax in range(len(shape)))
    if any(empty):  # every index is out of bounds there (the check raises): keep types valid
        zeros = (0,) * len(shape)
        y = S.pad(y, convert(0, y.type.dtype), lo=zeros, hi=empty, interior=zeros)
    sizes = tuple(1 if ax in starts else d for ax, d in enumerate(y.type.shape))
    return X.dynamic_slice(y, *(starts.get(ax, 0) for ax in range(len(shape))), sizes=sizes)


def _read_window(x: Atom, w: _Window) -> Atom:
    y = x
    if w.limit != x.type.shape or any(w.start) or any(sd != 1 for sd in w.stride):
        y = S.slice_(y, start=tuple(w.start), limit=w.limit, stride=tuple(w.stride))
    if w.reverse:
        y = S.rev(y, dims=tuple(w.reverse))
    if w.dynamic:
        y = _dynamic_slice(y, w.dynamic)
    return reshape_to(y, w.shape)


# -- the advanced part: one gather -------------------------------------------------------


def _operand(index: Index) -> Atom:
    return index if _is_ir(index) else Lit(np.asarray(index, np.int64))


def _index_shape(index: Index) -> tuple[int, ...]:
    return index.type.shape if _is_ir(index) else np.shape(index)


def _broadcast_indices(indices: Sequence[Index]) -> tuple[int, ...]:
    shapes = [_index_shape(i) for i in indices]
    try:
        return broadcast_shapes(*shapes)
    except ShapeError:
        shown = " ".join(str(s) for s in shapes)
        raise IndexError(f"shape mismatch: indexing arrays could not be broadcast together "
                         f"with shapes {shown}") from None


def _linear_index(indices: Sequence[Index], sizes: Sequence[int],
                  shape: tuple[int, ...]) -> Atom:
    """The row-major position in the merged axes that the indices address together."""
    strides = [math.prod(sizes[k + 1:]) for k in range(len(sizes))]
    if not any(_is_ir(i) for i in indices):
        total = sum(np.broadcast_to(i, shape).astype(np.int64) * s
                    for i, s in zip(indices, strides, strict=True))
        return Lit(np.asarray(total, np.int64))
    total = None
    for i, s in zip(indices, strides, strict=True):
        term = broadcast_to(convert(Lit(i) if isinstance(i, np.ndarray) else i, int64), shape)
        term = term if s == 1 else E.mul(term, convert(s, int64))
        total = term if total is None else E.add(total, term)
    return total


def gather_advanced(y: Atom, advanced: Sequence[Index | None]) -> Atom:
    """``y`` indexed by the advanced indices given for some of its axes (None elsewhere).

    NumPy puts the broadcast index shape where the advanced axes are when they are
    adjacent, and first otherwise; so those axes are moved there, merged, and gathered.
    """
    picked = [ax for ax, i in enumerate(advanced) if i is not None]
    if not picked:
        return y
    indices = [advanced[ax] for ax in picked]
    shape = _broadcast_indices(indices)
    at = picked[0] if picked == list(range(picked[0], picked[0] + len(picked))) else 0
    rest = [ax for ax, i in enumerate(advanced) if i is None]
    y = transpose_to(y, rest[:at] + picked + rest[at:])
    dims = y.type.shape
    sizes = [dims[at + k] for k in range(len(picked))]
    y = reshape_to(y, dims[:at] + (math.prod(sizes),) + dims[at + len(picked):])
    if len(indices) == 1:
        return X.gather(y, _operand(indices[0]), axis=at)
    return X.gather(y, _linear_index(indices, sizes, shape), axis=at)


# -- x[idx] ------------------------------------------------------------------------------


def index_entries(x: Atom, entries: list[Entry]) -> Atom:
    w = _window(x.type.shape, entries)
    return gather_advanced(_read_window(x, w), w.advanced)


@operator_("getitem")
def getitem(x: Any, idx: Any) -> Atom:
    x = as_array(x)
    return index_entries(x, resolve(x.type.shape, idx))


# -- x[idx] = value ------------------------------------------------------------------------


def _fit(value: Atom, shape: tuple[int, ...]) -> Atom:
    """``value`` broadcast for assignment into ``shape`` (leading 1s may be dropped)."""
    src = value.type.shape
    while len(src) > len(shape) and src[0] == 1:
        src = src[1:]
    fits = len(src) <= len(shape) and all(
        s in (1, d) for s, d in zip(src[::-1], shape[::-1], strict=False))
    if not fits:
        raise ValueError(f"could not broadcast input array from shape {value.type.shape} into "
                         f"shape {shape}")
    return broadcast_to(reshape_to(value, src), shape)


def value_as(value: Any, x: Atom) -> Atom:
    """The assigned value in ``x``'s dtype (NumPy casts unsafely, but not Python ints)."""
    dt = x.type.dtype
    if isinstance(value, int) and not isinstance(value, bool) and dt.is_int:
        info = np.iinfo(dt.np)
        if not info.min <= value <= info.max:
            raise OverflowError(f"Python integer {value} out of bounds for {dt.name}")
    return convert(as_array(value), dt)


def _write_window(x: Atom, w: _Window, value: Atom) -> Atom:
    upd = reshape_to(value, w.box)
    if w.reverse:
        upd = S.rev(upd, dims=tuple(w.reverse))
    starts = [w.dynamic.get(ax, Lit(np.int64(st))) for ax, st in enumerate(w.start)]
    return X.dynamic_update_slice(x, upd, *starts)


def _flat(x: Atom) -> Atom:
    return reshape_to(x, (x.type.size,))


def _scatter(x: Atom, entries: list[Entry], value: Atom) -> Atom:
    """Any index: the positions it addresses in a counting array, then one scatter."""
    counting = S.iota(shape=(x.type.size,), dim=0, dtype=int64)
    positions = index_entries(reshape_to(counting, x.type.shape), entries)
    upd = _fit(value, positions.type.shape)
    flat = X.scatter(_flat(x), _flat(positions), _flat(upd), axis=0)
    return reshape_to(flat, x.type.shape)


# -- x[mask] = value with a run-time mask ----------------------------------------------------
#
# ``x[mask]`` has as many rows as the mask has True values, which only the run time knows,
# so reading it is refused.  Writing through it keeps ``x``'s shape: the value lands where
# the mask holds, a ``select``.  A value with one row per True value (``x[m] = v`` with
# ``len(v) == m.sum()``) is spread to the positions first: position ``p`` takes row
# ``cumsum(mask)[p] - 1``, after a run-time check of the count that raises NumPy's error.


def run_time_mask(idx: Any) -> Atom | None:
    """``idx`` when it is a run-time boolean array indexing on its own (``x[mask]``)."""
    if isinstance(idx, Var) and idx.type.dtype.is_bool and idx.type.ndim:
        return idx
    return None


def mask_rest(x: Atom, mask: Atom) -> tuple[int, ...]:
    """The shape of one row of ``x[mask]``; NumPy's IndexError when the mask does not fit."""
    lead, shape = mask.type.shape, x.type.shape
    if len(lead) > len(shape):
        raise IndexError(f"too many indices for array: array is {len(shape)}-dimensional, "
                         f"but {len(lead)} were indexed")
    for axis, (m, d) in enumerate(zip(lead, shape, strict=False)):
        if m != d:
            raise IndexError(f"boolean index did not match indexed array along axis {axis}; "
                             f"size of axis is {d} but size of corresponding boolean axis "
                             f"is {m}")
    return shape[len(lead):]


def _count_check(mask: Atom, rows: int, value_shape: tuple[int, ...],
                 rest: tuple[int, ...]) -> None:
    """NumPy's ValueError unless the mask holds exactly ``rows`` times."""
    flat = reshape_to(convert(mask, int64), (mask.type.size,))
    count = R.reduce_sum(flat, axes=(0,))
    if rest:
        fmt = (f"shape mismatch: value array of shape {value_shape} could not be broadcast to "
               f"indexing result of shape ({{}},{','.join(map(str, rest))})")
    else:
        fmt = (f"NumPy boolean array indexing assignment cannot assign {rows} input values to "
               "the {} output values where the mask is true")
    C.check(E.eq(count, convert(rows, int64)), count, exc="ValueError", fmt=fmt)


def masked_operand(x: Atom, mask: Atom, value: Atom) -> Atom:
    """``value`` (what ``x[mask]`` is assigned or combined with) as an operand that
    broadcasts against all of ``x`` and holds, at each position the mask selects, what
    NumPy puts there; its dtype and weak-ness are ``value``'s."""
    rest = mask_rest(x, mask)
    src = value.type.shape
    while len(src) > len(rest) + 1 and src[0] == 1:
        src = src[1:]
    if len(src) <= len(rest) or src[0] == 1:  # one row for all: it broadcasts
        row = src[1:] if len(src) > len(rest) else src
        if len(row) > len(rest) or any(
                r not in (1, d) for r, d in zip(row[::-1], rest[::-1], strict=False)):
            raise ValueError(f"could not broadcast input array from shape {value.type.shape} "
                             f"into shape (n,{','.join(map(str, rest))})")
        return value if row == value.type.shape else reshape_to(value, row)
    rows = src[0]
    table = _fit(reshape_to(value, src), (rows, *rest))
    _count_check(mask, rows, value.type.shape, rest)
    if rows == 0:  # the check passed: nothing is written
        return convert(0, value.type.dtype, value.type.weak)
    selected = reshape_to(convert(mask, int64), (mask.type.size,))
    row_of = E.sub(R.cumsum(selected, axis=0, reverse=False), convert(1, int64))
    # positions the mask skips read some row in range (their value is not kept)
    row_of = E.min_(E.max_(row_of, convert(0, int64)), convert(rows - 1, int64))
    spread = X.gather(table, row_of, axis=0)
    return reshape_to(spread, x.type.shape)


def masked_source(x: Atom, mask: Atom, source: Atom) -> Atom:
    """``source`` laid over ``x`` so that ``source[mask]`` lines up with ``x[mask]``
    (``x[mask] = source[mask]``): the masked axes shared, the rows broadcast."""
    rest, row = mask_rest(x, mask), mask_rest(source, mask)
    lead = mask.type.ndim
    if len(row) > len(rest) or any(
            r not in (1, d) for r, d in zip(row[::-1], rest[::-1], strict=False)):
        raise ValueError(f"shape mismatch: value array of shape (n,{','.join(map(str, row))}) "
                         f"could not be broadcast to indexing result of shape "
                         f"(n,{','.join(map(str, rest))})")
    dims = tuple(range(lead)) + tuple(range(x.type.ndim - len(row), x.type.ndim))
    return S.broadcast_in_dim(source, shape=x.type.shape, dims=dims)


def merge_masked(x: Atom, mask: Atom, new: Atom) -> Atom:
    """``x`` with ``new`` (broadcast to ``x``, in its dtype) where ``mask`` holds."""
    new = broadcast_to(convert(new, x.type.dtype), x.type.shape)
    where = S.broadcast_in_dim(mask, shape=x.type.shape, dims=tuple(range(mask.type.ndim)))
    return E.select(where, new, x)


@operator_("setitem")
def setitem(x: Any, idx: Any, value: Any) -> Atom:
    """``x`` after ``x[idx] = value`` (a new value: the frontend rebinds it)."""
    x = as_array(x)
    value = value_as(value, x)
    mask = run_time_mask(idx)
    if mask is not None:
        return merge_masked(x, mask, masked_operand(x, mask, value))
    entries = resolve(x.type.shape, idx)
    w = _window(x.type.shape, entries)
    if any(i is not None for i in w.advanced) or any(s > 1 for s in w.stride):
        return _scatter(x, entries, value)
    value = _fit(value, tuple(w.shape))
    return x if x.type.size == 0 else _write_window(x, w, value)


# -- np.putmask, np.copyto: writes into their first argument ---------------------------------


def _cast(value: Any, dt, casting: str) -> Atom:
    """``value`` in ``dt`` when NumPy's ``casting`` rule allows it (a Python scalar is cast
    as its value, by NEP 50), else NumPy's TypeError."""
    t = as_array(value).type if isinstance(value, (list, tuple)) else typeof(value)
    if t.weak:
        kinds = "b" if dt.is_bool else "bi" if dt.is_int else "bif"
        allowed = casting == "unsafe" or t.dtype.kind in kinds
        what = "scalar"
    else:
        allowed = np.can_cast(t.dtype.np, dt.np, casting)
        what = "array data"
    if not allowed:
        raise TypeError(f"Cannot cast {what} from dtype('{t.dtype.name}') to "
                        f"dtype('{dt.name}') according to the rule '{casting}'")
    return value_as(value, Lit(np.zeros((), dt.np)))


@writer(np.putmask)
def putmask(a: Any, mask: Any, values: Any) -> Atom:
    """``a.flat[n] = values.flat[n % values.size]`` where ``mask.flat[n]``: positional,
    values repeating as NumPy repeats them."""
    a = as_array(a)
    mask = convert(as_array(mask), bool_)
    if mask.type.size != a.type.size:
        raise ValueError("putmask: mask and data must be the same size")
    values = _cast(values, a.type.dtype, "safe")
    n, size = values.type.size, a.type.size
    if n == 0:
        return a
    flat = _flat(values)
    if n != size:
        flat = X.gather(flat, Lit(np.arange(size, dtype=np.int64) % n), axis=0)
    return E.select(reshape_to(mask, a.type.shape), reshape_to(flat, a.type.shape), a)


@writer(np.copyto)
def copyto(dst: Any, src: Any, casting: str = "same_kind", where: Any = True) -> Atom:
    """``dst`` with ``src`` broadcast into it where ``where`` holds."""
    dst = as_array(dst)
    if casting not in ("no", "equiv", "safe", "same_kind", "unsafe"):
        raise ValueError("casting must be one of 'no', 'equiv', 'safe', 'same_kind', or "
                         "'unsafe'")
    src = _cast(src, dst.type.dtype, casting)
    new = _fit(src, dst.type.shape)
    if isinstance(where, bool) and where:
        return new
    where = broadcast_to(convert(as_array(where), bool_), dst.type.shape)
    return E.select(where, new, dst)


# -- np.add.at and friends: unbuffered updates, repeated indices all applied ------------------
#
# ``add`` and ``subtract`` are one ``scatter_add``.  ``maximum`` and ``minimum`` sort the
# updates by position and value, so that the last update to each position (which a
# ``scatter`` keeps) is its extreme one; their derivative splits each result's cotangent
# evenly among the element and the updates equal to it (np.max's convention at ties).
# ``multiply`` combines each element with every update aimed at it in one product over a
# matrix with a row per element of ``a`` (the update where it is aimed there, 1
# elsewhere): exact at zeros, but ``a.size * (updates + 1)`` elements large.


def _at_operands(name: str, a: Any, indices: Any, b: Any) -> tuple[Atom, Atom, Atom]:
    """``a`` flat, the flat positions ``a[indices]`` addresses and ``b`` fit to them, in
    ``a``'s dtype."""
    a = as_array(a)
    counting = S.iota(shape=(a.type.size,), dim=0, dtype=int64)
    positions = index_entries(reshape_to(counting, a.type.shape), resolve(a.type.shape, indices))
    b = as_array(b) if isinstance(b, (list, tuple)) else b
    tb = typeof(b)
    if a.type.dtype.kind in "bi" and tb.dtype.is_float and not tb.weak:
        raise UnsupportedError(
            f"np.{name}.at of a float array into an integer array: NumPy casts each partial "
            "result back to integers, pullback would combine the floats first",
            hint=f"convert the updates first, e.g. b.astype({a.type.dtype.name})")
    upd = _fit(value_as(b, a), positions.type.shape)
    return _flat(a), _flat(positions), _flat(upd)


def _multiplied(x: Atom, positions: Atom, upd: Atom) -> Atom:
    """Each element of ``x`` times the updates aimed at it (and of booleans: and)."""
    n, m = x.type.size, upd.type.size
    if m == 0:
        return x
    aimed = E.eq(S.broadcast_in_dim(positions, shape=(n, m), dims=(1,)),
                 S.iota(shape=(n, m), dim=0, dtype=int64))
    rows = E.select(aimed, S.broadcast_in_dim(upd, shape=(n, m), dims=(1,)),
                    convert(1, x.type.dtype))
    table = S.concatenate(reshape_to(x, (n, 1)), rows, axis=1)
    return (R.reduce_min if x.type.dtype.is_bool else R.reduce_prod)(table, axes=(1,))


def _extreme_value(x: Atom, positions: Atom, upd: Atom, largest: bool) -> Atom:
    """np.maximum.at's (``largest``) or np.minimum.at's result, NaN propagating: the
    updates sorted by position, then by value (NaN last), and the last of each position
    scattered, is the extreme update of each position."""
    key = upd
    if not largest:  # an order-reversing key: NaN stays last, integers do not overflow
        key = E.neg(upd) if upd.type.dtype.is_float else E.not_(upd)
    ordered_positions, _, ordered = O.sort(positions, key, upd, axis=0, num_keys=2,
                                           descending=False)
    extreme = X.scatter(x, ordered_positions, ordered, axis=0)
    return (E.max_ if largest else E.min_)(x, extreme)


def _unmoved(v: Atom) -> Atom:
    """Zero, with ``v``'s derivative where ``v`` is finite."""
    finite = E.lt(E.abs_(v), convert(np.inf, v.type.dtype))
    return E.select(finite, E.sub(v, D.stop_gradient(v)), convert(0, v.type.dtype))


def _extreme_at(largest: bool):
    def update(x: Atom, positions: Atom, upd: Atom) -> Atom:
        if upd.type.size == 0:
            return x
        out = D.stop_gradient(_extreme_value(x, positions, upd, largest))
        if not x.type.dtype.is_float:
            return out
        zero = S.broadcast_in_dim(convert(0, x.type.dtype), shape=x.type.shape, dims=())
        tied, tied_updates = E.eq(x, out), E.eq(upd, X.gather(out, positions, axis=0))
        count = E.add(convert(tied, x.type.dtype),
                      X.scatter_add(zero, positions, convert(tied_updates, x.type.dtype),
                                    axis=0))
        moved = E.add(E.select(tied, _unmoved(x), zero),
                      X.scatter_add(zero, positions, E.select(
                          tied_updates, _unmoved(upd), convert(0, x.type.dtype)), axis=0))
        share = E.div(moved, E.max_(count, convert(1, x.type.dtype)))
        return E.add(out, share)  # out + 0: the derivative shared among the ties

    return update


def _ufunc_at(name: str, update):
    def at(a: Any, indices: Any, b: Any = None) -> Atom:
        if b is None:
            raise TypeError(f"second operand needed for ufunc {name}")
        x, positions, upd = _at_operands(name, a, indices, b)
        return reshape_to(update(x, positions, upd), typeof(a).shape)

    return at


def _add_at(x: Atom, positions: Atom, upd: Atom) -> Atom:
    if x.type.dtype.is_bool:  # True + True is True: or
        return _extreme_at(largest=True)(x, positions, upd)
    return X.scatter_add(x, positions, upd, axis=0)


def _subtract_at(x: Atom, positions: Atom, upd: Atom) -> Atom:
    if x.type.dtype.is_bool:
        raise TypeError("numpy boolean subtract, the `-` operator, is not supported, use the "
                        "bitwise_xor, the `^` operator, or the logical_xor function instead.")
    return X.scatter_add(x, positions, E.neg(upd), axis=0)


writer(np.add.at)(_ufunc_at("add", _add_at))
writer(np.subtract.at)(_ufunc_at("subtract", _subtract_at))
writer(np.multiply.at)(_ufunc_at("multiply", _multiplied))
writer(np.maximum.at)(_ufunc_at("maximum", _extreme_at(largest=True)))
writer(np.minimum.at)(_ufunc_at("minimum", _extreme_at(largest=False)))


# -- np.take, np.take_along_axis -------------------------------------------------------------


def _integer_indices(indices: Any, kinds: str) -> Index:
    """Indices of one of the dtype ``kinds`` as integers: an intp array when static, a
    strong integer operand otherwise (NumPy's ``take`` casts bools and floats)."""
    if isinstance(indices, Var):
        if indices.type.dtype.kind not in kinds:
            raise IndexError("`indices` must be an integer array")
        return strong(indices) if indices.type.dtype.is_int else convert(indices, int64)
    arr = np.asarray(static(indices, "indices"))
    if arr.dtype.kind not in kinds + "u":
        raise IndexError("`indices` must be an integer array")
    return arr.astype(np.intp)


def _wrap_or_clip(index: Index, size: int, mode: str) -> Index:
    if mode not in ("wrap", "clip"):
        raise ValueError(f"clipmode must be one of 'clip', 'raise', or 'wrap' (got {mode!r})")
    if size == 0 and math.prod(_index_shape(index)):
        raise IndexError("cannot do a non-empty take from an empty axes.")
    if not _is_ir(index):
        return np.mod(index, max(size, 1)) if mode == "wrap" else np.clip(index, 0, size - 1)
    dt = index.type.dtype
    if mode == "wrap":
        return E.mod(index, convert(max(size, 1), dt))
    return E.min_(E.max_(index, convert(0, dt)), convert(max(size - 1, 0), dt))


@register(np.take)
def take(a: Any, indices: Any, axis: int | None = None, out: None = None,
         mode: str = "raise") -> Atom:
    no_out(out)
    a = as_array(a)
    if axis is None:
        a, axis = ravel(a), 0
    axis = normalize_axis(axis, a.type.ndim)
    size = a.type.shape[axis]
    index = _integer_indices(indices, "bif")
    if mode == "raise":
        index = normalize_index(index, size, axis)
    else:
        index = _wrap_or_clip(index, size, mode)
    return X.gather(a, _operand(index), axis=axis)


@register(np.take_along_axis)
def take_along_axis(arr: Any, indices: Any, axis: int | None = -1) -> Atom:
    a = as_array(arr)
    index = _integer_indices(indices, "i")
    ndim = len(_index_shape(index))
    if axis is None:
        if ndim != 1:
            raise ValueError("when axis=None, `indices` must have a single dimension.")
        a, axis = ravel(a), 0
    axis = normalize_axis(axis, a.type.ndim)
    if ndim != a.type.ndim:
        raise ValueError("`indices` and `arr` must have the same number of dimensions")
    shape = a.type.shape
    mesh: list[Index | None] = [
        np.arange(d).reshape([d if k == ax else 1 for k in range(len(shape))])
        for ax, d in enumerate(shape)
    ]
    mesh[axis] = normalize_index(index, shape[axis], axis)
    return gather_advanced(a, mesh)
