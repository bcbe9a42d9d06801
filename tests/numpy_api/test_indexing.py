"""x[idx], x[idx] = v, np.take and np.take_along_axis against NumPy."""

import numpy as np
import pytest

from harness import check, check_operator, run_mapping, stage
from pullback.backends import interp
from pullback.errors import ConcretizationError, UnsupportedError
from pullback.numpy_api.indexing import getitem, setitem, take, take_along_axis

DTYPES = [np.bool_, np.int32, np.int64, np.float32, np.float64]


def arr(shape, dt=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return np.asarray((rng.standard_normal(shape) * 5).astype(dt))


def check_static_index(x, idx):
    """The index stays a compile-time constant (check_operator would make arrays dynamic)."""
    run_mapping(lambda a: a[idx], lambda a: getitem(a, idx), x)


def assigned(idx):
    def reference(a, value):
        out = a.copy()
        out[idx] = value
        return out

    return reference


def check_static_setitem(x, idx, value):
    run_mapping(assigned(idx), lambda a, v: setitem(a, idx, v), x, value)


def run_staged(mapping, *args):
    func, leaves, _, _ = stage(mapping, args, {})
    return interp.run(func, *leaves)


# -- getitem, static indices ---------------------------------------------------------------

BASIC = [
    0, -1, 2, (1, 2), (-3, -1, 4), (), Ellipsis, None, (None, 1), (Ellipsis, 0),
    (0, Ellipsis, 1), slice(None), slice(1, None), slice(None, -1), slice(None, None, -1),
    slice(None, None, 2), slice(-1, 0, -2), slice(5, 1), slice(10, -10, -3),
    (slice(1, 3), None, slice(None, None, -2)), (Ellipsis, None), (None, Ellipsis, None, 0),
    (slice(0, 0), 1), (1, slice(2, 3), slice(None, None, -1)), np.int64(-2),
    (np.int32(1), slice(None, 2)), (slice(np.int64(1), np.int64(3)),),
]

ADVANCED = [
    [0, 2], [-1, 0, 0], [[0, 1], [2, 2]], ([0, 2], [1, 3]), ([0, 2], slice(None), [1, 4]),
    (0, slice(None), [1, 2]), (slice(None), [0, 1], None, [0, 1]), (slice(None), [0, 3]),
    (slice(None), [[0], [3]], [1, 2, 4]), ([[0], [2]], slice(1, 3), [1, 2, 3]),
    (Ellipsis, [4, 0]), ([1], Ellipsis, [2]), (1, [0, 3], slice(None, None, -1)),
    ([], slice(None)), (np.array([], np.int64), 0), (np.array(1), [0, 1]),
    (slice(1, 3), [2, 0], 4), (None, [0, 1], [1, 2], None), ([2, 1], None, 0),
    (np.array([[True, False, True, True]] * 3),),
    np.array([True, False, True]), (slice(None), np.array([False, True, True, False])),
    (np.array([True, False, True]), [1, 2]), True, False, (slice(None), True),
    ([0, 1], True), (0, False, slice(None)), (np.array([True, True, False]), None, 2),
]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("idx", BASIC + ADVANCED, ids=repr)
def test_getitem_static(dt, idx):
    check_static_index(arr((3, 4, 5), dt), idx)


@pytest.mark.parametrize("shape,idx", [
    ((), ()), ((), Ellipsis), ((), None), ((), True), ((5,), slice(None, None, -1)),
    ((0,), slice(None)), ((0, 3), (slice(None), 1)), ((0, 3), (Ellipsis, [2, 0])),
    ((2, 0, 4), (1, slice(None), 3)), ((2, 0, 4), ([1, 0], slice(None), [3, 3])),
    ((4,), [[-1, 0], [1, 2]]), ((1, 1), (0, 0)), ((3, 1, 2), (slice(None), 0, [1, 0])),
])
def test_getitem_shapes(shape, idx):
    check_static_index(arr(shape, np.float32), idx)


# -- getitem, run-time indices -------------------------------------------------------------


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("idx", [
    np.int64(2), np.int32(-1), (np.int64(1), np.int32(-4)), (slice(None), np.int64(3)),
    (np.int64(-3), slice(None, None, -2), np.int64(4)), (None, np.int64(0), Ellipsis),
    np.array([2, 0, -1]), (np.array([[0], [2]]), slice(1, 3), np.array([1, -1, 2])),
    (np.int64(1), slice(None), np.array([4, 0])), (slice(None), np.array([0, 3], np.int32)),
    (np.array([1, 2]), np.array([0, -1]), np.array([4, 4])), (np.array([], np.int64),),
    (np.int64(2), [0, 1]),
], ids=repr)
def test_getitem_dynamic(dt, idx):
    check_operator("getitem", arr((3, 4, 5), dt), idx)


def test_getitem_dynamic_python_ints():
    check_operator("getitem", arr((3, 4, 5)), (-2, slice(1, None), 3), dyn=(1,))


def test_getitem_dynamic_index_list():
    x = arr((5,))
    run_mapping(lambda a, i, j: a[[i, j, 0]], lambda a, i, j: getitem(a, [i, j, 0]), x,
                np.int64(4), np.int64(-2))


def test_getitem_constant_array_by_run_time_index():
    table = np.arange(10.0) ** 2
    run_mapping(lambda i: table[i], lambda i: getitem(table, i), np.int64(7))


@pytest.mark.parametrize("shape,idx,message", [
    ((3,), np.int64(3), "index 3 is out of bounds for axis 0 with size 3"),
    ((3,), np.int64(-4), "index -4 is out of bounds for axis 0 with size 3"),
    ((2, 3), (np.int64(0), np.int32(5)), "index 5 is out of bounds for axis 1 with size 3"),
    ((0, 3), np.int64(0), "index 0 is out of bounds for axis 0 with size 0"),
    ((3,), np.array([0, 7, 1]), "index 7 is out of bounds for axis 0 with size 3"),
    ((3, 4), (slice(None), np.array([-5, 0])), "index -5 is out of bounds for axis 1"),
])
def test_getitem_dynamic_out_of_bounds(shape, idx, message):
    x = arr(shape)
    with pytest.raises(IndexError, match=message):
        x[idx]
    with pytest.raises(IndexError, match=message):
        run_staged(getitem, x, idx)


@pytest.mark.parametrize("idx,message", [
    (3, "index 3 is out of bounds for axis 0 with size 3"),
    ((0, -5), "index -5 is out of bounds for axis 1 with size 4"),
    ([0, 3], "index 3 is out of bounds for axis 0 with size 3"),
    ((0, 0, 0), "too many indices for array: array is 2-dimensional, but 3 were indexed"),
    ((Ellipsis, 0, Ellipsis), "an index can only have a single ellipsis"),
    (1.0, "only integers, slices"),
    (np.array([1.0]), "arrays used as indices must be of integer"),
    (np.array([True, False]), "boolean index did not match indexed array along axis 0"),
    (([0, 1], [0, 1, 2]), "shape mismatch: indexing arrays could not be broadcast"),
    ("a", "only integers, slices"),
])
def test_getitem_static_errors(idx, message):
    x = arr((3, 4))
    with pytest.raises(IndexError, match=message):
        x[idx]
    with pytest.raises(IndexError, match=message):
        stage(lambda a: getitem(a, idx), (x,), {})


def test_dynamic_boolean_mask_is_refused():
    with pytest.raises(UnsupportedError, match="np.where"):
        stage(getitem, (arr((3,)), np.array([True, False, True])), {})


def test_dynamic_slice_bound_is_refused():
    with pytest.raises(ConcretizationError):
        stage(lambda a, i: getitem(a, slice(i, None)), (arr((3,)), np.int64(1)), {})


def test_dynamic_float_index_is_refused():
    with pytest.raises(IndexError, match="only integers"):
        stage(getitem, (arr((3,)), np.float64(1)), {})


# -- setitem -------------------------------------------------------------------------------

SETS = [
    (0, 7.5), (-1, -2.0), ((1, 2), 3), ((), 1.0), (Ellipsis, 2), (slice(None), 0.5),
    (slice(1, None), np.arange(5.0)), (slice(None, None, -1), np.arange(20.0).reshape(4, 5)),
    ((slice(None, None, 2), 1), np.array([[1.0], [2.0]])), ((slice(3, 0, -2), None, 3), 9),
    ((Ellipsis, slice(1, 3)), np.ones((4, 1))), ((None, 1), np.ones((1, 1, 5))),
    ([0, 2], 4.25), ([2, 2, 0], np.array([[[1.0]], [[2.0]], [[3.0]]])),
    (([0, 1], slice(None), [4, 0]), np.arange(8.0).reshape(2, 4)),
    ((0, slice(None), [1, 2]), np.arange(8.0).reshape(2, 4)),
    (np.array([True, False, True]), -1.0), ((slice(None), np.array([1, 0, 1, 0], bool)), 6),
    (True, np.ones((1, 3, 4, 5))), ((slice(0, 0), 1), 5.0),
    (np.zeros((3, 4, 5), bool), 1.0), ([[0, 0], [0, 0]], np.arange(80.0).reshape(2, 2, 4, 5)),
]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("idx,value", SETS, ids=repr)
def test_setitem_static(dt, idx, value):
    check_static_setitem(arr((3, 4, 5), dt), idx, value)


@pytest.mark.parametrize("value", [True, 3, -2.75, np.float32(1.5), np.array([1, 2, 3, 4])])
@pytest.mark.parametrize("dt", DTYPES)
def test_setitem_casts_to_the_array_dtype(dt, value):
    check_static_setitem(arr((2, 4), dt), 1, value)


def test_setitem_last_write_wins():
    check_static_setitem(np.zeros(4), [1, 3, 1, 1], np.array([1.0, 2.0, 3.0, 4.0]))


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("idx", [
    np.int64(1), np.int32(-1), (np.int64(2), slice(1, 3)), (slice(None), np.int64(-2)),
    (np.int64(0), slice(None, None, 2)), np.array([2, 0, -3]), (slice(1, None), np.array([3])),
    (np.array([[0], [1]]), np.array([0, -1])),
])
def test_setitem_dynamic(dt, idx):
    x = arr((3, 4), dt)
    value = arr(np.shape(x[idx]), dt, seed=3)
    run_mapping(lambda a, i, v: assigned(i)(a, v), setitem, x, idx, value)


@pytest.mark.parametrize("shape,idx", [((0,), np.int64(0)), ((2, 0), (slice(None), np.int64(0))),
                                        ((3,), np.int64(3))])
def test_setitem_dynamic_out_of_bounds_raises(shape, idx):
    with pytest.raises(IndexError, match="out of bounds"):
        run_staged(lambda a, i: setitem(a, i, 1.0), arr(shape), idx)


@pytest.mark.parametrize("idx,value,exc", [
    (slice(None), np.ones(2), ValueError),
    (0, np.ones((2, 4)), ValueError),
    (5, 1.0, IndexError),
])
def test_setitem_errors(idx, value, exc):
    with pytest.raises(exc):
        assigned(idx)(arr((3, 4)), value)
    with pytest.raises(exc):
        stage(lambda a: setitem(a, idx, value), (arr((3, 4)),), {})


def test_setitem_python_int_overflow():
    with pytest.raises(OverflowError):
        assigned(0)(np.zeros(3, np.int32), 2**40)
    with pytest.raises(OverflowError):
        stage(lambda a: setitem(a, 0, 2**40), (np.zeros(3, np.int32),), {})


# -- np.take --------------------------------------------------------------------------------


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,indices,axis", [
    ((3, 4), [0, 5, -1], None), ((3, 4), 2, None), ((3, 4), [[0, 2], [-1, 1]], 0),
    ((3, 4), [3, 3], 1), ((3, 4), -1, -1), ((2, 3, 4), [1], -2), ((5,), [], 0),
    ((), [0, 0], None), ((3, 4), [True, False], 0),
])
def test_take_static(dt, shape, indices, axis):
    x = arr(shape, dt)
    run_mapping(lambda a: np.take(a, indices, axis), lambda a: take(a, indices, axis), x)


@pytest.mark.parametrize("idt", [np.int32, np.int64])
@pytest.mark.parametrize("shape,indices,axis", [
    ((3, 4), [0, 5, -1], None), ((3, 4), [[0, 2], [-1, 1]], 0), ((3, 4), -1, -1),
    ((2, 3, 4), [1, 0, 2], 1), ((0, 3), [], 0),
])
def test_take_dynamic(idt, shape, indices, axis):
    check(np.take, arr(shape), np.asarray(indices, idt), axis)


@pytest.mark.parametrize("mode", ["wrap", "clip"])
@pytest.mark.parametrize("dynamic", [False, True])
def test_take_modes(mode, dynamic):
    x, idx = arr((3, 4)), np.array([[-7, 0], [5, 13]])
    if dynamic:
        check(np.take, x, idx, 1, mode=mode)
    else:
        run_mapping(lambda a: np.take(a, idx, 1, mode=mode),
                    lambda a: take(a, idx, 1, mode=mode), x)


@pytest.mark.parametrize("args,kw,exc", [
    ((arr((3,)), [3]), {}, IndexError),
    ((arr((3, 4)), [0]), {"axis": 2}, np.exceptions.AxisError),
    ((arr((0,)), [0]), {"mode": "wrap"}, IndexError),
    ((arr((3,)), [0]), {"mode": "nearest"}, ValueError),
])
def test_take_errors(args, kw, exc):
    with pytest.raises(exc):
        np.take(*args, **kw)
    with pytest.raises(exc):
        stage(lambda a: take(a, args[1], **kw), (args[0],), {})


def test_take_dynamic_out_of_bounds():
    with pytest.raises(IndexError, match="index -4 is out of bounds for axis 0 with size 3"):
        run_staged(take, arr((3,)), np.array([0, -4]))


# -- np.take_along_axis ----------------------------------------------------------------------


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,ishape,axis", [
    ((3, 4), (3, 4), -1), ((3, 4), (3, 2), 1), ((3, 4), (5, 4), 0), ((2, 3, 4), (2, 3, 1), 2),
    ((2, 3, 4), (1, 6, 4), 1), ((3, 4), (7,), None), ((5,), (0,), 0), ((3, 0), (3, 0), 1),
])
def test_take_along_axis(dt, shape, ishape, axis):
    x = arr(shape, dt)
    size = x.size if axis is None else shape[axis]
    rng = np.random.default_rng(4)
    indices = rng.integers(-size, size, ishape) if size else np.zeros(ishape, np.int64)
    check(np.take_along_axis, x, indices, axis)
    run_mapping(lambda a: np.take_along_axis(a, indices, axis),
                lambda a: take_along_axis(a, indices, axis), x)


def test_take_along_axis_argsort_roundtrip():
    x = arr((4, 5))
    order = np.argsort(x, axis=1)
    check(np.take_along_axis, x, order, 1)


@pytest.mark.parametrize("ishape,axis,exc", [
    ((3,), 1, ValueError), ((3, 4), None, ValueError), ((2, 4), 1, IndexError),
    ((3, 4), 2, np.exceptions.AxisError),
])
def test_take_along_axis_errors(ishape, axis, exc):
    x, indices = arr((3, 4)), np.zeros(ishape, np.int64)
    with pytest.raises(exc):
        np.take_along_axis(x, indices, axis)
    with pytest.raises(exc):
        stage(lambda a: take_along_axis(a, indices, axis), (x,), {})


def test_take_along_axis_needs_integers():
    with pytest.raises(IndexError, match="integer array"):
        stage(lambda a: take_along_axis(a, np.zeros((3, 4)), 1), (arr((3, 4)),), {})
