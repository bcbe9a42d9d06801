"""Shape primitives: broadcast, reshape, transpose (and the rest of the family).

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
