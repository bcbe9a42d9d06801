"""Reduction primitives: ``reduce_sum/prod/max/min`` over axes, ``argmax/argmin`` along
one axis, and the cumulative ``cumsum/cumprod``.

Results keep the operand's dtype: ``numpy_api`` converts first (NumPy sums int32 in
int64, means ints in float64 ...).  Static shapes let the shape rules reject what NumPy
rejects at run time: a maximum over nothing has no identity, so an empty reduced extent
is a ``ShapeError`` with NumPy's message.

Derivatives: sums and cumulative sums are linear; a maximum (minimum) passes the
derivative of the elements equal to it, split evenly among ties; products use the
product of the *other* elements, built from exclusive cumulative products so that zeros
need no division.  ``argmax``/``argmin`` have integer results and no derivative.

Batching: the axes shift past the batch axis, which stays put; it ends up before the
reduced axes it followed.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ShapeError
from ..ir.core import Atom
from ..ir.op import Op
from ..ir.types import TensorType, int64
from . import elementwise as E
from . import shape as S
from .batching import axes_in, axis_in, with_lanes
from .derivs import const
from .elementwise import check_kinds
from .shape import linear_jvp


def _check_axis(name: str, x: TensorType, axis: int) -> None:
    if not 0 <= axis < x.ndim:
        raise ShapeError(f"{name}: axis {axis} is out of bounds for {x}")


def _check_axes(name: str, x: TensorType, axes: tuple[int, ...]) -> None:
    if list(axes) != sorted(set(axes)) or any(not 0 <= a < x.ndim for a in axes):
        raise ShapeError(f"{name}: axes {axes} must be sorted, unique and within {x}")


def _dropped(x: TensorType, axes: tuple[int, ...]) -> TensorType:
    return TensorType(tuple(d for i, d in enumerate(x.shape) if i not in axes), x.dtype)


def _extent(x: TensorType, axes: tuple[int, ...]) -> int:
    return math.prod(x.shape[a] for a in axes)


def _reduce_infer(name: str, kinds: str, no_identity: str | None):
    def infer(ts, axes):
        (x,) = ts
        check_kinds(name, kinds, [x])
        _check_axes(name, x, axes)
        if no_identity and _extent(x, axes) == 0:
            raise ShapeError(
                f"zero-size array to reduction operation {no_identity} which has no "
                f"identity (reducing axes {axes} of {x})"
            )
        return _dropped(x, axes)

    return infer


def _reduction(name: str, fn, kinds: str, rules, no_identity: str | None = None) -> Op:
    """A reduction over ``axes``; ``no_identity`` names NumPy's ufunc for reductions that
    cannot start from an identity, so an empty extent is an error.  ``rules`` is the
    ``(jvp, vjp)`` pair."""
    jvp, vjp = rules
    return Op(
        name,
        infer=_reduce_infer(name, kinds, no_identity),
        arity=1,
        impl=lambda x, axes: np.asarray(fn(x, axis=axes)).astype(x.dtype, copy=False),
        params={"axes": "ints"},
        fusion="reduction",
        jvp=jvp,
        vjp=vjp,
        batch=with_lanes(name, lambda d, size, axes: {"axes": axes_in(axes, d)},
                         lambda d, axes: d - sum(a < d for a in axes)),
    )


def _expand(r: Atom, x: TensorType, axes: tuple[int, ...]) -> Atom:
    """A reduced value broadcast back over the reduced ``axes`` of ``x``."""
    if not axes:
        return r
    kept = tuple(a for a in range(x.ndim) if a not in axes)
    return S.broadcast_in_dim(r, shape=x.shape, dims=kept)


def _sum_vjp(primals, outs, cts, axes):
    return [_expand(cts[0], primals[0].type, axes)]


def _shift(x: Atom, axis: int, reverse: bool, fill, by: int = 1) -> Atom:
    """``x`` moved ``by`` places along ``axis`` in the direction of accumulation (towards
    the start when ``reverse``), ``fill`` entering at the other end."""
    step = -by if reverse else by
    lo = tuple(step if a == axis else 0 for a in range(x.type.ndim))
    return S.pad(x, const(fill, x.type), lo=lo, hi=tuple(-n for n in lo),
                 interior=(0,) * x.type.ndim)


def _weighted_rules(weights):
    """Rules of a reduction whose derivative is ``sum(t * w)`` for ``w = weights(x, out,
    axes)``, an array of ``x``'s shape (each element's partial derivative)."""

    def jvp(primals, tangents, outs, axes):
        w = weights(primals[0], outs[0], axes)
        return [reduce_sum(E.mul(tangents[0], w), axes=axes)]

    def vjp(primals, outs, cts, axes):
        (x,) = primals
        return [E.mul(_expand(cts[0], x.type, axes), weights(x, outs[0], axes))]

    return jvp, vjp


def _others(x: Atom, out: Atom, axes: tuple[int, ...]) -> Atom:
    """For each element, the product of the other elements of its reduction: the product
    of those before it times that of those after it, in a flat order of ``axes``."""
    t = x.type
    kept = tuple(a for a in range(t.ndim) if a not in axes)
    perm = kept + axes
    moved = S.transpose(x, perm=perm)
    flat = S.reshape(moved, shape=tuple(t.shape[a] for a in kept) + (_extent(t, axes),))
    last = len(kept)
    before = cumprod(_shift(flat, last, False, 1), axis=last, reverse=False)
    after = cumprod(_shift(flat, last, True, 1), axis=last, reverse=True)
    others = S.reshape(E.mul(before, after), shape=moved.type.shape)
    return S.transpose(others, perm=S.inverse_perm(perm))


def _ties(x: Atom, out: Atom, axes: tuple[int, ...]) -> Atom:
    """One over the number of elements equal to the extreme ``out`` at each of them, zero
    elsewhere (everywhere when ``out`` is NaN: its derivative is then zero, not an error)."""
    hit = E.eq(x, _expand(out, x.type, axes))
    count = reduce_sum(E.convert(hit, dtype=x.type.dtype, weak=False), axes=axes)
    share = _expand(E.div(const(1, count.type), count), x.type, axes)
    return E.select(hit, share, const(0, share.type))


_EXTREME_RULES = _weighted_rules(_ties)

# NumPy accumulates small ints in int64; wrapping arithmetic makes the cast back exact.
reduce_sum = _reduction("reduce_sum", np.sum, "if", (linear_jvp("reduce_sum"), _sum_vjp))
reduce_prod = _reduction("reduce_prod", np.prod, "if", _weighted_rules(_others))
reduce_max = _reduction("reduce_max", np.max, "bif", _EXTREME_RULES, "maximum")
reduce_min = _reduction("reduce_min", np.min, "bif", _EXTREME_RULES, "minimum")


def _arg_infer(name: str):
    def infer(ts, axis):
        (x,) = ts
        _check_axis(name, x, axis)
        if x.shape[axis] == 0:
            raise ShapeError(f"attempt to get {name} of an empty sequence (axis {axis} of {x})")
        return _dropped(x, (axis,)).with_dtype(int64)

    return infer


def _arg_reduction(name: str, fn) -> Op:
    """First index of the extreme along ``axis``; a NaN counts as the extreme (NumPy's rule)."""
    return Op(
        name,
        infer=_arg_infer(name),
        arity=1,
        impl=lambda x, axis: np.asarray(fn(x, axis=axis)).astype(np.int64, copy=False),
        params={"axis": "int"},
        fusion="reduction",
        batch=with_lanes(name, lambda d, size, axis: {"axis": axis_in(axis, d)},
                         lambda d, axis: d - (axis < d)),
    )


argmax = _arg_reduction("argmax", np.argmax)
argmin = _arg_reduction("argmin", np.argmin)


def _cumulative_infer(name: str):
    def infer(ts, axis, reverse):
        (x,) = ts
        check_kinds(name, "if", [x])
        _check_axis(name, x, axis)
        return TensorType(x.shape, x.dtype)

    return infer


def _linear_recurrence(a: Atom, b: Atom, axis: int, reverse: bool) -> Atom:
    """``z`` with ``z[k] = a[k] * z[k-1] + b[k]`` along ``axis`` (``z[k+1]`` when
    ``reverse``), from zero: a parallel prefix scan of the affine maps, log2(n) rounds
    that each compose every map with the one ``by`` places before it."""
    n, by = a.type.shape[axis], 1
    while by < n:
        b = E.add(E.mul(a, _shift(b, axis, reverse, 0, by)), b)
        if 2 * by < n:
            a = E.mul(a, _shift(a, axis, reverse, 1, by))
        by *= 2
    return b


def _cumsum_vjp(primals, outs, cts, axis, reverse):
    return [cumsum(cts[0], axis=axis, reverse=not reverse)]


def _cumprod_jvp(primals, tangents, outs, axis, reverse):
    """``dy[k] = x[k] dy[k-1] + y[k-1] t[k]`` (``k+1`` for ``k-1`` when ``reverse``),
    solved by a scan in O(n log n): no division, so exact at zeros."""
    (x,), (y,) = primals, outs
    drive = E.mul(_shift(y, axis, reverse, 1), tangents[0])
    return [_linear_recurrence(x, drive, axis, reverse)]


def _cumprod_vjp(primals, outs, cts, axis, reverse):
    """The transpose of the jvp's recurrence: it runs the other way, ``x`` one place
    later."""
    (x,), (y,) = primals, outs
    back = _linear_recurrence(_shift(x, axis, not reverse, 1), cts[0], axis, not reverse)
    return [E.mul(_shift(y, axis, reverse, 1), back)]


def _cumulative(name: str, fn, rules) -> Op:
    """Running totals along ``axis``; ``reverse`` accumulates from the last element back
    (what the transpose of the forward accumulation needs).  ``rules``: ``(jvp, vjp)``."""
    jvp, vjp = rules

    def impl(x, axis, reverse):
        if not reverse:
            return fn(x, axis=axis, dtype=x.dtype)
        return np.flip(fn(np.flip(x, axis), axis=axis, dtype=x.dtype), axis).copy()

    return Op(
        name,
        infer=_cumulative_infer(name),
        arity=1,
        impl=impl,
        params={"axis": "int", "reverse": "bool"},
        fusion="opaque",
        jvp=jvp,
        vjp=vjp,
        batch=with_lanes(name, lambda d, size, axis, reverse: {"axis": axis_in(axis, d),
                                                                "reverse": reverse}),
    )


cumsum = _cumulative("cumsum", np.cumsum, (linear_jvp("cumsum"), _cumsum_vjp))
cumprod = _cumulative("cumprod", np.cumprod, (_cumprod_jvp, _cumprod_vjp))
