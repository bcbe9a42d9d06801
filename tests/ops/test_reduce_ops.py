"""reduce_* / argmax / argmin / cumsum / cumprod: shape rules, impls and NumPy agree."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from opcheck import infer, run_op
from pullback.errors import ShapeError
from pullback.ir.types import TensorType, bool_, float32, int32, int64, type_of_value
from pullback.ops import reduce as R

DTYPES = [np.bool_, np.int32, np.int64, np.float32, np.float64]
NUMERIC = [np.int32, np.int64, np.float32, np.float64]
SHAPES = [(), (0,), (5,), (3, 4), (4, 0), (2, 0, 3), (2, 3, 4)]


def sample(shape, dt, seed=0):
    """Values with ties, negatives and (for floats) a NaN or two when there is room."""
    rng = np.random.default_rng(seed)
    if dt == np.bool_:
        return rng.random(shape) < 0.5
    x = rng.integers(-3, 4, size=shape).astype(dt)
    if np.dtype(dt).kind == "f":
        x = x + rng.random(shape).astype(dt)
    return np.asarray(x, dtype=dt)


def with_nans(x):
    x = x.copy()
    if x.size >= 4:
        x.flat[[1, x.size - 2]] = np.nan
    return x


def axes_of(shape):
    n = len(shape)
    return [c for k in range(n + 1) for c in itertools.combinations(range(n), k)]


def cases(shapes=SHAPES):
    return [(s, a) for s in shapes for a in axes_of(s)]


def assert_same(got, want):
    assert got.dtype == want.dtype and got.shape == want.shape, (got, want)
    if want.dtype.kind == "f":
        np.testing.assert_allclose(got, want, rtol=2e-5, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want)


# -- reduce_* -----------------------------------------------------------------------

ARITH = [(R.reduce_sum, np.sum), (R.reduce_prod, np.prod)]
EXTREME = [(R.reduce_max, np.max), (R.reduce_min, np.min)]


@pytest.mark.parametrize("op,ref", ARITH, ids=lambda v: getattr(v, "name", ""))
@pytest.mark.parametrize("dt", NUMERIC)
@pytest.mark.parametrize("shape,axes", cases())
def test_sum_prod(op, ref, dt, shape, axes):
    x = sample(shape, dt)
    (got,) = run_op(op, x, axes=axes)
    assert_same(got, np.asarray(ref(x, axis=axes, dtype=dt)))


@pytest.mark.parametrize("op,ref", EXTREME, ids=lambda v: getattr(v, "name", ""))
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,axes", cases())
def test_max_min(op, ref, dt, shape, axes):
    x = sample(shape, dt)
    if int(np.prod([shape[a] for a in axes])) == 0:
        with pytest.raises(ShapeError, match="zero-size array to reduction operation"):
            infer(op, type_of_value(x), axes=axes)
        with pytest.raises(ValueError, match="zero-size array to reduction operation"):
            ref(x, axis=axes)
        return
    (got,) = run_op(op, x, axes=axes)
    assert_same(got, np.asarray(ref(x, axis=axes)))


@pytest.mark.parametrize("op,ref", EXTREME, ids=lambda v: getattr(v, "name", ""))
@pytest.mark.parametrize("axes", [(0,), (1,), (0, 1)])
def test_max_min_propagate_nan(op, ref, axes):
    x = with_nans(sample((3, 4), np.float64))
    (got,) = run_op(op, x, axes=axes)
    assert np.isnan(got).any()
    assert_same(got, np.asarray(ref(x, axis=axes)))


def test_reduce_message_names_ufunc_and_type():
    with pytest.raises(ShapeError, match=r"maximum which has no identity.*f32\[2,0\]"):
        infer(R.reduce_max, TensorType((2, 0), float32), axes=(1,))
    with pytest.raises(ShapeError, match="minimum"):
        infer(R.reduce_min, TensorType((0,), int32), axes=(0,))


@pytest.mark.parametrize("axes", [(1, 0), (0, 0), (2,), (-1,)])
def test_reduce_rejects_bad_axes(axes):
    with pytest.raises(ShapeError, match=r"axes .* i32\[2,3\]"):
        infer(R.reduce_sum, TensorType((2, 3), int32), axes=axes)


@pytest.mark.parametrize("op", [R.reduce_sum, R.reduce_prod])
def test_sum_prod_reject_bool(op):
    with pytest.raises(ShapeError, match="integer or floating-point"):
        infer(op, TensorType((2,), bool_), axes=(0,))


def test_reduce_result_is_strong():
    weak = TensorType((), float32, weak=True)
    assert infer(R.reduce_sum, weak, axes=()) == [TensorType((), float32)]


# -- argmax / argmin ------------------------------------------------------------------

ARGS = [(R.argmax, np.argmax), (R.argmin, np.argmin)]


@pytest.mark.parametrize("op,ref", ARGS, ids=lambda v: getattr(v, "name", ""))
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", [s for s in SHAPES if s])
def test_arg(op, ref, dt, shape):
    x = sample(shape, dt)
    for axis in range(len(shape)):
        if shape[axis] == 0:
            with pytest.raises(ShapeError, match=f"attempt to get {op.name} of an empty"):
                infer(op, type_of_value(x), axis=axis)
            continue
        (got,) = run_op(op, x, axis=axis)
        assert_same(got, np.asarray(ref(x, axis=axis)))


@pytest.mark.parametrize("op,ref", ARGS, ids=lambda v: getattr(v, "name", ""))
@pytest.mark.parametrize("dt", [np.float32, np.float64])
def test_arg_first_nan_wins(op, ref, dt):
    x = np.array([[1, np.nan, 3, np.nan], [np.inf, 2, -np.inf, 2]], dtype=dt)
    for axis in (0, 1):
        (got,) = run_op(op, x, axis=axis)
        assert_same(got, np.asarray(ref(x, axis=axis)))
    (got,) = run_op(op, x, axis=1)
    assert got[0] == 1


def test_arg_types():
    assert infer(R.argmin, TensorType((2, 3), float32), axis=1) == [TensorType((2,), int64)]
    with pytest.raises(ShapeError, match=r"axis 2 .* f32\[2,3\]"):
        infer(R.argmax, TensorType((2, 3), float32), axis=2)
    with pytest.raises(ShapeError, match="axis 0"):
        infer(R.argmax, TensorType((), float32), axis=0)


# -- cumsum / cumprod -----------------------------------------------------------------

CUMULATIVE = [(R.cumsum, np.cumsum, np.sum), (R.cumprod, np.cumprod, np.prod)]


def suffix_totals(total, x, axis):
    """Reference for ``reverse=True``: element i is the total of x[i:] along ``axis``."""
    n = x.shape[axis]
    parts = [total(np.take(x, range(i, n), axis=axis), axis=axis, dtype=x.dtype)
             for i in range(n)]
    return np.stack(parts, axis) if parts else x.copy()


@pytest.mark.parametrize("op,ref,total", CUMULATIVE, ids=lambda v: getattr(v, "name", ""))
@pytest.mark.parametrize("dt", NUMERIC)
@pytest.mark.parametrize("shape", [s for s in SHAPES if s])
@pytest.mark.parametrize("reverse", [False, True])
def test_cumulative(op, ref, total, dt, shape, reverse):
    x = sample(shape, dt)
    for axis in range(len(shape)):
        (got,) = run_op(op, x, axis=axis, reverse=reverse)
        want = suffix_totals(total, x, axis) if reverse else ref(x, axis=axis, dtype=dt)
        assert_same(got, np.asarray(want))


@pytest.mark.parametrize("op", [R.cumsum, R.cumprod])
def test_cumulative_rules(op):
    t = TensorType((2, 3), int64)
    assert infer(op, t, axis=1, reverse=True) == [t]
    with pytest.raises(ShapeError, match="integer or floating-point"):
        infer(op, TensorType((2,), bool_), axis=0, reverse=False)
    with pytest.raises(ShapeError, match=r"axis 2 .* i64\[2,3\]"):
        infer(op, t, axis=2, reverse=False)


def test_fusion_kinds():
    for op in (R.reduce_sum, R.reduce_prod, R.reduce_max, R.reduce_min, R.argmax, R.argmin):
        assert op.fusion == "reduction"
    assert R.cumsum.fusion == R.cumprod.fusion == "opaque"
