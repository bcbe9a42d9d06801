"""The ``sort`` primitive against a reference built on Python's ``sorted``.

``sorted`` is stable in both directions (``reverse=True`` keeps equal keys in their
original order), which is exactly the documented contract of ``descending``.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from opcheck import infer, run_op
from pullback.errors import ShapeError
from pullback.ir.types import TensorType, float32, int32, int64
from pullback.ops import sort as O

DTYPES = [np.bool_, np.int32, np.int64, np.float32, np.float64]


def keys_sample(shape, dt, seed):
    """Few distinct values (many ties); floats get NaNs, infinities and both zeros."""
    rng = np.random.default_rng(seed)
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    if np.dtype(dt).kind == "i":
        return rng.integers(-2, 3, size=shape).astype(dt)
    pool = np.array([np.nan, -np.inf, np.inf, -0.0, 0.0, 1.5, -1.5, 2.0], dtype=dt)
    return rng.choice(pool, size=shape)


def order_key(v):
    """NumPy's sort order: NaN after everything, all NaNs equal (-0.0 == 0.0 by ``<``)."""
    v = v.item()
    return (1, 0) if isinstance(v, float) and math.isnan(v) else (0, v)


def reference(xs, axis, num_keys, descending):
    """Every operand permuted by a stable lexicographic sort of each 1-D lane."""
    moved = [np.moveaxis(x, axis, -1) for x in xs]
    outs = [np.empty_like(m) for m in moved]
    for lane in np.ndindex(moved[0].shape[:-1]):
        keys = [m[lane] for m in moved[:num_keys]]
        n = moved[0].shape[-1]
        perm = sorted(range(n), key=lambda i: tuple(order_key(k[i]) for k in keys),
                      reverse=descending)
        for out, m in zip(outs, moved, strict=True):
            out[lane] = m[lane][perm]
    return [np.moveaxis(o, -1, axis) for o in outs]


def assert_identical(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape
    np.testing.assert_array_equal(got, want)
    if got.dtype.kind == "f":  # the stable order also fixes where -0.0 and 0.0 land
        np.testing.assert_array_equal(np.signbit(got), np.signbit(want))


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", [(0,), (1,), (9,), (3, 7), (6, 0), (2, 3, 5)])
@pytest.mark.parametrize("descending", [False, True])
def test_one_key_with_payload(dt, shape, descending):
    x = keys_sample(shape, dt, seed=1)
    for axis in range(len(shape)):
        payload = np.arange(x.size, dtype=np.int64).reshape(shape)
        got = run_op(O.sort, x, payload, axis=axis, num_keys=1, descending=descending)
        want = reference([x, payload], axis, 1, descending)
        for g, w in zip(got, want, strict=True):
            assert_identical(g, w)


@pytest.mark.parametrize("dt", DTYPES)
def test_ascending_matches_numpy(dt):
    x = keys_sample((4, 11), dt, seed=2)
    for axis in (0, 1):
        (got,) = run_op(O.sort, x, axis=axis, num_keys=1, descending=False)
        np.testing.assert_array_equal(got, np.sort(x, axis=axis))
        idx = np.broadcast_to(np.arange(x.shape[axis]).reshape((-1, 1) if axis == 0 else (1, -1)),
                              x.shape)
        _, perm = run_op(O.sort, x, idx, axis=axis, num_keys=1, descending=False)
        np.testing.assert_array_equal(perm, np.argsort(x, axis=axis, kind="stable"))


@pytest.mark.parametrize("first,second", [(np.int32, np.float64), (np.bool_, np.int64),
                                          (np.float32, np.float32)])
@pytest.mark.parametrize("num_keys", [1, 2, 3])
@pytest.mark.parametrize("descending", [False, True])
def test_lexicographic(first, second, num_keys, descending):
    a = keys_sample((3, 12), first, seed=3)
    b = keys_sample((3, 12), second, seed=4)
    c = keys_sample((3, 12), np.int64, seed=5)
    got = run_op(O.sort, a, b, c, axis=1, num_keys=num_keys, descending=descending)
    want = reference([a, b, c], 1, num_keys, descending)
    for g, w in zip(got, want, strict=True):
        assert_identical(g, w)


def test_descending_is_stable_not_reversed():
    keys = np.array([2, 1, 2, 1], dtype=np.int32)
    pos = np.arange(4, dtype=np.int64)
    _, down = run_op(O.sort, keys, pos, axis=0, num_keys=1, descending=True)
    np.testing.assert_array_equal(down, [0, 2, 1, 3])
    x = np.array([1.0, np.nan, 3.0, np.nan])
    (got,) = run_op(O.sort, x, axis=0, num_keys=1, descending=True)
    np.testing.assert_array_equal(got, [np.nan, np.nan, 3.0, 1.0])


def test_types_and_errors():
    f = TensorType((2, 3), float32)
    i = TensorType((2, 3), int32)
    assert infer(O.sort, f, i, axis=1, num_keys=2, descending=False) == [f, i]
    with pytest.raises(ShapeError, match=r"one shape.*f32\[2,3\].*i64\[3\]"):
        infer(O.sort, f, TensorType((3,), int64), axis=0, num_keys=1, descending=False)
    with pytest.raises(ShapeError, match="num_keys=3"):
        infer(O.sort, f, i, axis=0, num_keys=3, descending=False)
    with pytest.raises(ShapeError, match="num_keys=0"):
        infer(O.sort, f, axis=0, num_keys=0, descending=False)
    with pytest.raises(ShapeError, match=r"axis 2 .* f32\[2,3\]"):
        infer(O.sort, f, axis=2, num_keys=1, descending=False)
    with pytest.raises(ShapeError, match="axis 0"):
        infer(O.sort, TensorType((), float32), axis=0, num_keys=1, descending=False)
    with pytest.raises(ShapeError, match="at least one operand"):
        infer(O.sort, axis=0, num_keys=1, descending=False)
