"""Array creation: constants of a static shape, ranges, grids and conversions.

Shapes, ``num``, ``N``/``M``/``k`` and the bounds of ``arange`` fix the result's type,
so they must be known at compile time; fill values, the end points of ``linspace`` and
arrays being converted may be run-time values.  Constants are a 0-d literal broadcast
to the shape, or built from ``iota``, so they stay small in the IR and fuse into their
consumers.
"""

from __future__ import annotations

import math
import operator
from typing import Any

import numpy as np

from ..errors import UnsupportedError
from ..ir.builder import as_atom
from ..ir.core import Atom, Lit
from ..ir.types import DType, broadcast_shapes, dtype, float64, int64, result_type
from ..ops import elementwise as E
from ..ops import reduce as R
from ..ops import shape as S
from .core import (
    as_array,
    broadcast_args,
    broadcast_to,
    convert,
    normalize_axis,
    operand,
    promote,
    register,
    static,
    static_dtype,
    subscript,
    typeof,
)

# -- static arguments -----------------------------------------------------------------


def _count(n: Any, what: str) -> int:
    n = operator.index(static(n, what))
    if n < 0:
        raise ValueError("negative dimensions are not allowed")
    return n


def _shape(shape: Any) -> tuple[int, ...]:
    """NumPy's ``shape`` argument: an int or a sequence of ints."""
    shape = static(shape, "a shape")
    dims = shape if isinstance(shape, (tuple, list)) else (shape,)
    try:
        return tuple(_count(d, "a shape") for d in dims)
    except TypeError:
        raise TypeError(
            f"expected a sequence of integers or a single integer, got '{shape!r}'"
        ) from None


def _filled(value: Any, shape: tuple[int, ...], dt: DType) -> Atom:
    """``value`` (a constant or a run-time value) cast to ``dt`` and broadcast to ``shape``."""
    return broadcast_to(convert(value, dt), shape)


def _constant(value: Any, shape: tuple[int, ...], dt: DType) -> Atom:
    return _filled(Lit(np.asarray(value, dt.np)), shape, dt)


# -- np.array / asarray ---------------------------------------------------------------


@register(np.array)
def array(object: Any, dtype: Any = None, *, copy: bool | None = True, order: str = "K",
          subok: bool = False, ndmin: int = 0, like: Any = None) -> Atom:
    return as_array(object, static_dtype(dtype), copy, operator.index(ndmin))


@register(np.asarray)
def asarray(a: Any, dtype: Any = None, order: str | None = None, *, device: Any = None,
            copy: bool | None = None, like: Any = None) -> Atom:
    return as_array(a, static_dtype(dtype), copy)


@register(np.copy)
def copy(a: Any, order: str = "K", subok: bool = False) -> Atom:
    return as_array(a)


# -- constants of a shape ----------------------------------------------------------------


@register(np.zeros)
def zeros(shape: Any, dtype: Any = float, order: str = "C", *, device: Any = None,
          like: Any = None) -> Atom:
    return _constant(0, _shape(shape), static_dtype(dtype) or float64)


@register(np.empty)
def empty(shape: Any, dtype: Any = float, order: str = "C", *, device: Any = None,
          like: Any = None) -> Atom:
    """Unspecified contents, as NumPy's (the interpreter's are zeros)."""
    return S.empty(shape=_shape(shape), dtype=static_dtype(dtype) or float64)


@register(np.ones)
def ones(shape: Any, dtype: Any = None, order: str = "C", *, device: Any = None,
         like: Any = None) -> Atom:
    return _constant(1, _shape(shape), static_dtype(dtype) or float64)


@register(np.full)
def full(shape: Any, fill_value: Any, dtype: Any = None, order: str = "C", *,
         device: Any = None, like: Any = None) -> Atom:
    fill = as_array(fill_value, static_dtype(dtype))
    return _filled(fill, _shape(shape), fill.type.dtype)


def _like(a: Any, dtype: Any, shape: Any) -> tuple[tuple[int, ...], DType]:
    t = as_array(a).type
    dt = static_dtype(dtype) or t.dtype
    return (t.shape if shape is None else _shape(shape)), dt


@register(np.zeros_like)
def zeros_like(a: Any, dtype: Any = None, order: str = "K", subok: bool = True,
               shape: Any = None, *, device: Any = None) -> Atom:
    shp, dt = _like(a, dtype, shape)
    return _constant(0, shp, dt)


@register(np.empty_like)
def empty_like(prototype: Any, dtype: Any = None, order: str = "K", subok: bool = True,
               shape: Any = None, *, device: Any = None) -> Atom:
    """Unspecified contents, as for ``np.empty``."""
    shp, dt = _like(prototype, dtype, shape)
    return S.empty(shape=shp, dtype=dt)


@register(np.ones_like)
def ones_like(a: Any, dtype: Any = None, order: str = "K", subok: bool = True,
              shape: Any = None, *, device: Any = None) -> Atom:
    shp, dt = _like(a, dtype, shape)
    return _constant(1, shp, dt)


@register(np.full_like)
def full_like(a: Any, fill_value: Any, dtype: Any = None, order: str = "K",
              subok: bool = True, shape: Any = None, *, device: Any = None) -> Atom:
    shp, dt = _like(a, dtype, shape)
    return _filled(as_array(fill_value), shp, dt)


# -- grids from iota ----------------------------------------------------------------------


def _grid(n: int, m: int) -> tuple[Atom, Atom]:
    """Row and column indices of an ``n x m`` grid."""
    return (S.iota(shape=(n, m), dim=0, dtype=int64), S.iota(shape=(n, m), dim=1, dtype=int64))


def _offset(rows: Atom, k: Any) -> Atom:
    return E.add(rows, Lit(np.int64(operator.index(static(k, "k")))))


@register(np.eye)
def eye(N: Any, M: Any = None, k: Any = 0, dtype: Any = float, order: str = "C", *,
        device: Any = None, like: Any = None) -> Atom:
    n = _count(N, "N")
    rows, cols = _grid(n, n if M is None else _count(M, "M"))
    return convert(E.eq(cols, _offset(rows, k)), static_dtype(dtype) or float64)


@register(np.identity)
def identity(n: Any, dtype: Any = None, *, like: Any = None) -> Atom:
    return eye(n, dtype=float if dtype is None else dtype)


@register(np.tri)
def tri(N: Any, M: Any = None, k: Any = 0, dtype: Any = float, *, like: Any = None) -> Atom:
    n = _count(N, "N")
    rows, cols = _grid(n, n if M is None else _count(M, "M"))
    return convert(E.le(cols, _offset(rows, k)), static_dtype(dtype) or float64)


# -- ranges ---------------------------------------------------------------------------------


def _arange_length(start: Any, stop: Any, step: Any) -> int:
    """NumPy's length: ceil((stop - start) / step) in the arguments' own arithmetic."""
    with np.errstate(all="ignore"):
        value = float((stop - start) / step)
    if math.isnan(value):
        raise ValueError("arange: cannot compute length")
    if math.isinf(value):
        raise ValueError("Maximum allowed size exceeded")
    return max(0, math.ceil(value))


@register(np.arange)
def arange(start: Any = None, stop: Any = None, step: Any = None, dtype: Any = None, *,
           device: Any = None, like: Any = None) -> Atom:
    """The first two values are converted from Python arithmetic into the dtype, the rest
    is ``first + i * (second - first)`` in the dtype, as NumPy fills it."""
    if stop is None:
        start, stop = 0, start
    start, stop = static(0 if start is None else start, "start"), static(stop, "stop")
    step = static(1 if step is None else step, "step")
    dt = static_dtype(dtype) or _range_dtype(start, stop, step)
    length = _arange_length(start, stop, step)
    if dt.is_bool and length > 2:
        raise TypeError("arange() is only supported for booleans when the result has at "
                        "most length 2.")
    head = np.empty(2, dt.np)
    with np.errstate(all="ignore"):
        head[0], head[1] = start, start + step
    if length <= 2:
        return Lit(head[:length].copy())
    first, second = head
    delta = second - first
    out = S.iota(shape=(length,), dim=0, dtype=dt)
    if delta != 1:
        out = E.mul(out, Lit(delta))
    if first != 0:
        out = E.add(out, Lit(first))
    if first + delta != second:
        index = S.iota(shape=(length,), dim=0, dtype=int64)
        out = E.select(E.eq(index, Lit(np.int64(1))), Lit(second), out)
    return out


def _range_dtype(*values: Any) -> DType:
    """arange's default dtype: at least int64, float64 as soon as a bound is a float."""
    return dtype(np.result_type(np.int64, *(np.asarray(v).dtype for v in values)))


@register(np.linspace)
def linspace(start: Any, stop: Any, num: Any = 50, endpoint: bool = True,
             retstep: bool = False, dtype: Any = None, axis: int = 0, *,
             device: Any = None) -> Atom | tuple[Atom, Any]:
    num = operator.index(static(num, "num"))
    if num < 0:
        raise ValueError(f"Number of samples, {num}, must be non-negative.")
    div = num - 1 if endpoint else num
    (lo, hi), rt = promote(operand(start), operand(stop))
    dt = rt.dtype if rt.dtype.is_float else float64
    lo, hi = convert(lo, dt), convert(hi, dt)
    shape = broadcast_shapes(lo.type.shape, hi.type.shape)
    full_shape = (num, *shape)
    delta = E.sub(*broadcast_args(hi, lo))
    y = S.iota(shape=full_shape, dim=0, dtype=dt)
    if div > 0:
        step = E.div(delta, Lit(np.asarray(div, dt.np)))
        y = _scaled(y, step, delta, div)
    else:
        step = math.nan
        y = E.mul(*broadcast_args(y, delta))
    y = E.add(*broadcast_args(y, lo))
    if endpoint and num > 1:
        last = E.eq(S.iota(shape=full_shape, dim=0, dtype=int64), Lit(np.int64(num - 1)))
        y = E.select(*broadcast_args(last, hi, y))
    if axis != 0:
        y = _move_first_axis(y, normalize_axis(axis, len(full_shape)))
    out_dt = static_dtype(dtype) or dt
    if out_dt.is_int:
        y = E.floor(y)
    y = convert(y, out_dt)
    return (y, step) if retstep else y


def _scaled(y: Atom, step: Atom, delta: Atom, div: int) -> Atom:
    """``y * step``, or ``y / div * delta`` when a step underflows to zero (NumPy's rule
    for denormal ranges, decided over the whole array)."""
    zero = E.eq(step, Lit(np.zeros((), step.type.dtype.np)))
    if zero.type.size == 0:
        zero = Lit(np.False_)
    elif zero.type.ndim:
        zero = R.reduce_max(zero, axes=tuple(range(zero.type.ndim)))
    by_step = E.mul(*broadcast_args(y, step))
    by_div = E.mul(*broadcast_args(E.div(y, Lit(np.asarray(div, y.type.dtype.np))), delta))
    return E.select(zero, by_div, by_step)


def _move_first_axis(y: Atom, axis: int) -> Atom:
    perm = list(range(1, y.type.ndim))
    perm.insert(axis, 0)
    return S.transpose(y, perm=tuple(perm))


@register(np.meshgrid)
def meshgrid(*xi: Any, copy: bool = True, sparse: bool = False,
             indexing: str = "xy") -> tuple[Atom, ...]:
    if indexing not in ("xy", "ij"):
        raise ValueError("Valid values for `indexing` are 'xy' and 'ij'.")
    vectors = [as_array(x) for x in xi]
    axes = list(range(len(vectors)))
    if indexing == "xy" and len(axes) > 1:  # the first two inputs vary along x, then y
        axes[0], axes[1] = 1, 0
    sizes = [0] * len(vectors)
    for v, axis in zip(vectors, axes, strict=True):
        sizes[axis] = v.type.size
    outs = []
    for v, axis in zip(vectors, axes, strict=True):
        flat = v if v.type.ndim == 1 else S.reshape(v, shape=(v.type.size,))
        shape = [d if not sparse or j == axis else 1 for j, d in enumerate(sizes)]
        outs.append(S.broadcast_in_dim(flat, shape=tuple(shape), dims=(axis,)))
    return tuple(outs)


# -- np.r_ / np.c_ ---------------------------------------------------------------------------


def _concatenator(obj: Any, axis: int, ndmin: int, trans1d: int):
    """``obj[items]`` for NumPy's ``AxisConcatenator`` ``obj``: static slices are ranges
    (NumPy builds them), other items arrays of at least ``ndmin`` dimensions (the
    existing ones moved to ``trans1d``), all joined along ``axis`` in the dtype that
    NumPy's ``result_type`` gives them (scalars count as values, not arrays)."""

    def part(item: Any) -> tuple[Atom, Any]:
        """An item as an array, and what it contributes to the result's dtype."""
        if isinstance(item, slice):
            bounds = slice(*(static(v, "a slice bound in np.r_/np.c_")
                             for v in (item.start, item.stop, item.step)))
            a = Lit(obj[bounds])
            return a, a.type
        if isinstance(item, str):
            raise UnsupportedError(f"np.r_/np.c_ directive strings ({item!r}) are not "
                                   "supported", hint="use np.concatenate or np.stack")
        if not isinstance(item, (list, tuple)) and typeof(item).ndim == 0:
            a = as_atom(item)
            return S.reshape(a, shape=(1,) * ndmin), a.type
        a = _at_least(as_array(item), ndmin, trans1d)
        return a, a.type

    def concatenated(items: Any) -> Atom:
        parts = [part(item) for item in (items if isinstance(items, tuple) else (items,))]
        rt = result_type(*(t for _, t in parts))
        atoms = [convert(a, rt.dtype) for a, _ in parts]
        ax = normalize_axis(axis, atoms[0].type.ndim)
        return atoms[0] if len(atoms) == 1 else S.concatenate(*atoms, axis=ax)

    return concatenated


def _at_least(a: Atom, ndmin: int, trans1d: int) -> Atom:
    """``np.array(a, ndmin=ndmin)`` with the original axes moved to start at ``trans1d``."""
    d = a.type.ndim
    if d >= ndmin:
        return a
    a = S.reshape(a, shape=(1,) * (ndmin - d) + a.type.shape)
    if trans1d == -1:
        return a
    k2, k1 = ndmin - d, trans1d + (ndmin - d + 1 if trans1d < 0 else 0)
    axes = [*range(k1), *range(k2, ndmin), *range(k1, k2)]
    return S.transpose(a, perm=tuple(axes)) if axes != list(range(ndmin)) else a


subscript(np.r_)(_concatenator(np.r_, 0, 1, -1))
subscript(np.c_)(_concatenator(np.c_, -1, 2, 0))


__all__ = [
    "arange", "array", "as_array", "asarray", "copy", "empty", "empty_like", "eye", "full",
    "full_like", "identity", "linspace", "meshgrid", "ones", "ones_like", "operand",
    "tri", "zeros", "zeros_like",
]
