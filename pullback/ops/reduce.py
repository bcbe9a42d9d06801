"""Reduction primitives: ``reduce_sum/prod/max/min`` over axes, ``argmax/argmin`` along
one axis, and the cumulative ``cumsum/cumprod``.

Results keep the operand's dtype: ``numpy_api`` converts first (NumPy sums int32 in
int64, means ints in float64 ...).  Static shapes let the shape rules reject what NumPy
rejects at run time: a maximum over nothing has no identity, so an empty reduced extent
is a ``ShapeError`` with NumPy's message.
"""

from __future__ import annotations

import math

import numpy as np

from ..errors import ShapeError
from ..ir.op import Op
from ..ir.types import TensorType, int64
from .elementwise import check_kinds, quiet


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


def _reduction(name: str, fn, kinds: str, no_identity: str | None = None) -> Op:
    """A reduction over ``axes``; ``no_identity`` names NumPy's ufunc for reductions that
    cannot start from an identity, so an empty extent is an error."""
    return Op(
        name,
        infer=_reduce_infer(name, kinds, no_identity),
        impl=quiet(lambda x, axes: np.asarray(fn(x, axis=axes)).astype(x.dtype, copy=False)),
        params={"axes": "ints"},
        fusion="reduction",
    )


# NumPy accumulates small ints in int64; wrapping arithmetic makes the cast back exact.
reduce_sum = _reduction("reduce_sum", np.sum, "if")
reduce_prod = _reduction("reduce_prod", np.prod, "if")
reduce_max = _reduction("reduce_max", np.max, "bif", "maximum")
reduce_min = _reduction("reduce_min", np.min, "bif", "minimum")


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
        impl=lambda x, axis: np.asarray(fn(x, axis=axis)).astype(np.int64, copy=False),
        params={"axis": "int"},
        fusion="reduction",
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


def _cumulative(name: str, fn) -> Op:
    """Running totals along ``axis``; ``reverse`` accumulates from the last element back
    (what the transpose of the forward accumulation needs)."""

    @quiet
    def impl(x, axis, reverse):
        if not reverse:
            return fn(x, axis=axis, dtype=x.dtype)
        return np.flip(fn(np.flip(x, axis), axis=axis, dtype=x.dtype), axis).copy()

    return Op(
        name,
        infer=_cumulative_infer(name),
        impl=impl,
        params={"axis": "int", "reverse": "bool"},
        fusion="opaque",
    )


cumsum = _cumulative("cumsum", np.cumsum)
cumprod = _cumulative("cumprod", np.cumprod)
