"""``sort``: a stable, lexicographic, multi-operand sort along one axis.

``sort(*xs){axis, num_keys, descending}`` orders the positions along ``axis`` by the
first ``num_keys`` operands — the first key decides, later keys break its ties — and
returns every operand permuted the same way, so ``argsort`` is ``sort(x, iota)`` and a
sort carries its payload along.

The order of one key is NumPy's: ascending by ``<``, with NaN after every number and all
NaNs equal; ``-0.0`` and ``0.0`` are equal.  ``descending=True`` reverses that order
(largest first, NaN before every number) but *not* stability: positions whose keys are
all equal keep their original relative order in both directions.  So a descending sort
is not the reverse of the ascending one wherever keys tie.

Derivatives: a sort moves values without changing them, so each result's derivative is
its operand's derivative moved the same way (the order itself, piecewise constant, has
none).  The jvp sorts the tangents along as payload of the same keys; the vjp finds the
permutation (an ``iota`` payload) and sorts the cotangents by it, which undoes it.
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..ir.op import Op
from ..ir.types import TensorType, int64
from . import batching as B
from .shape import iota


def _sort_infer(ts, axis, num_keys, descending):
    if not ts:
        raise ShapeError("sort needs at least one operand")
    shapes = {t.shape for t in ts}
    shown = ", ".join(str(t) for t in ts)
    if len(shapes) > 1:
        raise ShapeError(f"sort needs operands of one shape, got {shown}")
    if not 1 <= num_keys <= len(ts):
        raise ShapeError(f"sort: num_keys={num_keys} must be in 1..{len(ts)} for {shown}")
    if not 0 <= axis < ts[0].ndim:
        raise ShapeError(f"sort: axis {axis} is out of bounds for {ts[0]}")
    return [TensorType(t.shape, t.dtype) for t in ts]


def _rank(key: np.ndarray) -> np.ndarray:
    """Dense ranks in NumPy's sort order (NaNs last and equal, -0.0 == 0.0)."""
    return np.unique(key, return_inverse=True)[1].reshape(key.shape)


def _sort_impl(*xs, axis, num_keys, descending):
    moved = [np.moveaxis(x, axis, -1) for x in xs]
    perm = np.broadcast_to(np.arange(moved[0].shape[-1]), moved[0].shape)
    # Stable passes from the least significant key to the most significant one.
    for key in reversed(moved[:num_keys]):
        rank = _rank(key)
        if descending:
            rank = -rank
        order = np.argsort(np.take_along_axis(rank, perm, -1), axis=-1, kind="stable")
        perm = np.take_along_axis(perm, order, -1)
    return [np.moveaxis(np.take_along_axis(x, perm, -1), -1, axis).copy() for x in moved]


def _payload_sort(keys, values, axis, descending) -> list:
    """``values`` (``None`` for zero) sorted along by ``keys``."""
    live = [v for v in values if v is not None]
    if not live:
        return list(values)
    moved = iter(sort(*keys, *live, axis=axis, num_keys=len(keys), descending=descending)
                 [len(keys):])
    return [None if v is None else next(moved) for v in values]


def _sort_jvp(primals, tangents, outs, axis, num_keys, descending):
    return _payload_sort(primals[:num_keys], tangents, axis, descending)


def _sort_vjp(primals, outs, cts, axis, num_keys, descending):
    cts = [ct if x.type.dtype.is_float else None for x, ct in zip(primals, cts, strict=True)]
    if all(ct is None for ct in cts):
        return cts
    positions = iota(shape=primals[0].type.shape, dim=axis, dtype=int64)
    (perm,) = _payload_sort(primals[:num_keys], [positions], axis, descending)
    return _payload_sort([perm], cts, axis, False)


def _sort_batch(args, dims, size, axis, num_keys, descending):
    """Every operand batched where the first batched one is (unbatched ones repeated),
    sorted along the lane's axis as it lies there."""
    d = next(d for d in dims if d is not None)
    ins = [B.at(x, dx, size, d) for x, dx in zip(args, dims, strict=True)]
    outs = sort(*ins, axis=B.axis_in(axis, d), num_keys=num_keys, descending=descending)
    return list(outs), [d] * len(outs)


sort = Op(
    "sort",
    infer=_sort_infer,
    impl=_sort_impl,
    params={"axis": "int", "num_keys": "int", "descending": "bool"},
    multiple_results=True,
    fusion="opaque",
    jvp=_sort_jvp,
    vjp=_sort_vjp,
    batch=_sort_batch,
)
