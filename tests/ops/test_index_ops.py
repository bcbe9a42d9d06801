"""dynamic_slice, dynamic_update_slice, gather, scatter, scatter_add vs NumPy references."""

import numpy as np
import pytest

from opcheck import infer, run_op
from pullback.errors import ShapeError
from pullback.ir.types import bool_, float32, int32, int64
from pullback.ops import index as X
from samples import DTYPES, NUMERIC, arr, assert_same, tt


def clamped_window(shape, starts, sizes):
    """XLA's rule, spelled out: each start is moved into [0, dim - size]."""
    return tuple(slice(min(max(s, 0), d - n), min(max(s, 0), d - n) + n)
                 for s, d, n in zip(starts, shape, sizes, strict=True))


# -- dynamic_slice / dynamic_update_slice --------------------------------------------

WINDOWS = [
    ((5,), (1,), (3,)),
    ((5,), (4,), (3,)),
    ((5,), (-2,), (2,)),
    ((5,), (9,), (0,)),
    ((3, 4), (1, 2), (2, 2)),
    ((3, 4), (5, -1), (1, 4)),
    ((0, 4), (0, 1), (0, 2)),
    ((), (), ()),
]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("idt", [np.int32, np.int64])
@pytest.mark.parametrize("shape,starts,sizes", WINDOWS)
def test_dynamic_slice(dt, idt, shape, starts, sizes):
    x = arr(shape, dt)
    (got,) = run_op(X.dynamic_slice, x, *[idt(s) for s in starts], sizes=sizes)
    assert_same(got, x[clamped_window(shape, starts, sizes)])


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,starts,sizes", WINDOWS)
def test_dynamic_update_slice(dt, shape, starts, sizes):
    x, upd = arr(shape, dt), arr(sizes, dt, seed=1)
    (got,) = run_op(X.dynamic_update_slice, x, upd, *[np.int64(s) for s in starts])
    want = x.copy()
    want[clamped_window(shape, starts, sizes)] = upd
    assert_same(got, want)


@pytest.mark.parametrize("types,sizes", [
    ([tt((5,))], (2,)),
    ([tt((5,)), tt((), float32)], (2,)),
    ([tt((5,)), tt((1,), int32)], (2,)),
    ([tt((5,)), tt((), int32)], (6,)),
    ([tt((5,)), tt((), int32)], (2, 1)),
])
def test_dynamic_slice_errors(types, sizes):
    with pytest.raises(ShapeError, match=r"f32\[5\]"):
        infer(X.dynamic_slice, *types, sizes=sizes)


@pytest.mark.parametrize("types", [
    [tt((5,)), tt((2,))],
    [tt((5,)), tt((6,)), tt((), int64)],
    [tt((5,)), tt((2,), int32), tt((), int64)],
    [tt((5,)), tt((1, 2)), tt((), int64)],
])
def test_dynamic_update_slice_errors(types):
    with pytest.raises(ShapeError, match=r"f32\[5\]"):
        infer(X.dynamic_update_slice, *types)


# -- gather / scatter / scatter_add --------------------------------------------------

GATHERS = [
    ((5,), 0, [3, 0, 0, 4]),
    ((5,), 0, 2),
    ((5,), 0, [[1, 2], [4, 4], [0, 0]]),
    ((3, 4), 0, [2, 1]),
    ((3, 4), 1, [[3], [0]]),
    ((2, 3, 4), 1, np.zeros((0,), int)),
    ((2, 0, 4), 2, [1, 3]),
    ((0, 3), 1, [2]),
]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("idt", [np.int32, np.int64])
@pytest.mark.parametrize("shape,axis,idx", GATHERS)
def test_gather(dt, idt, shape, axis, idx):
    x, idx = arr(shape, dt), np.asarray(idx, idt)
    (got,) = run_op(X.gather, x, idx, axis=axis)
    assert_same(got, np.take(x, idx, axis=axis))


def updates(x, idx, axis, dt):
    return arr(x.shape[:axis] + idx.shape + x.shape[axis + 1:], dt, seed=2)


def scatter_reference(x, idx, upd, axis, combine):
    """Apply the updates one after the other, in index order (the last write wins)."""
    want = x.copy()
    moved = np.moveaxis(want, axis, 0)
    upd_moved = np.moveaxis(upd.reshape(x.shape[:axis] + (idx.size,) + x.shape[axis + 1:]), axis, 0)
    for k, i in enumerate(idx.ravel()):
        moved[i] = combine(moved[i], upd_moved[k])
    return want


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,axis,idx", GATHERS)
def test_scatter(dt, shape, axis, idx):
    x, idx = arr(shape, dt), np.asarray(idx, np.int64)
    upd = updates(x, idx, axis, dt)
    (got,) = run_op(X.scatter, x, idx, upd, axis=axis)
    assert_same(got, scatter_reference(x, idx, upd, axis, lambda old, new: new))


@pytest.mark.parametrize("dt", NUMERIC)
@pytest.mark.parametrize("shape,axis,idx", GATHERS)
def test_scatter_add(dt, shape, axis, idx):
    x, idx = arr(shape, dt), np.asarray(idx, np.int64)
    upd = updates(x, idx, axis, dt)
    (got,) = run_op(X.scatter_add, x, idx, upd, axis=axis)
    want = scatter_reference(x, idx, upd, axis, np.add)
    np.testing.assert_allclose(got, want, rtol=1e-6)
    assert got.dtype == want.dtype


def test_scatter_add_accumulates_duplicates():
    (got,) = run_op(X.scatter_add, np.zeros(3), np.array([1, 1, 1, 2]), np.ones(4), axis=0)
    assert_same(got, np.array([0.0, 3.0, 1.0]))


@pytest.mark.parametrize("op", [X.gather, X.scatter])
def test_out_of_range_indices_raise(op):
    x, idx = np.arange(3.0), np.array([0, 3])
    args = (x, idx) if op is X.gather else (x, idx, np.ones(2))
    with pytest.raises(IndexError, match="index 3 is out of bounds for axis 0 with size 3"):
        run_op(op, *args, axis=0)


@pytest.mark.parametrize("types,axis", [
    ([tt((3, 4)), tt((2,), float32)], 0),
    ([tt((3, 4)), tt((2,), int32)], 2),
    ([tt((3, 4)), tt((2,), int32)], -1),
    ([tt(()), tt((2,), int32)], 0),
])
def test_gather_errors(types, axis):
    with pytest.raises(ShapeError, match=r"f32\["):
        infer(X.gather, *types, axis=axis)


@pytest.mark.parametrize("op", [X.scatter, X.scatter_add])
@pytest.mark.parametrize("types", [
    [tt((3, 4)), tt((2,), int32), tt((2, 3))],
    [tt((3, 4)), tt((2,), int32), tt((2, 4), int32)],
    [tt((3, 4)), tt((2,), float32), tt((2, 4))],
])
def test_scatter_errors(op, types):
    with pytest.raises(ShapeError, match=r"f32\[3,4\]"):
        infer(op, *types, axis=0)


def test_scatter_add_rejects_bool():
    with pytest.raises(ShapeError, match="bool"):
        infer(X.scatter_add, tt((3,), bool_), tt((1,), int32), tt((1,), bool_), axis=0)
