"""Sample data shared by the op and mapping tests."""

from __future__ import annotations

import numpy as np

from pullback.ir.types import DType, TensorType, float32

DTYPES = [np.bool_, np.int32, np.int64, np.float32, np.float64]
NUMERIC = DTYPES[1:]
FLOATS = [np.float32, np.float64]
TOL = {np.dtype(np.float32): 2e-4, np.dtype(np.float64): 1e-10}


def arr(shape, dt=np.float64, seed=0, scale=5.0) -> np.ndarray:
    """Random values of ``dt``: fair coin flips for bool, scaled normals otherwise."""
    rng = np.random.default_rng(seed)
    if np.dtype(dt) == np.bool_:
        return np.asarray(rng.random(shape) < 0.5)
    return np.asarray((rng.standard_normal(shape) * scale).astype(dt))


def assert_same(got, want, tol=TOL) -> None:
    """Equal dtype and shape; floats close within ``tol`` per dtype, the rest exact."""
    assert got.dtype == want.dtype and got.shape == want.shape
    if got.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=tol[got.dtype], atol=tol[got.dtype])
    else:
        np.testing.assert_array_equal(got, want)


def tt(shape, dt: DType = float32) -> TensorType:
    return TensorType(shape, dt)
