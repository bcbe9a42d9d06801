"""Array manipulation mappings (np.reshape ... np.pad, methods, attributes) against NumPy."""

import numpy as np
import pytest

from harness import check, check_attribute, check_method, check_raises, run_mapping, stage
from pullback.errors import ConcretizationError, UnsupportedError
from pullback.numpy_api import CALLABLES, METHODS

DTYPES = [np.bool_, np.int32, np.int64, np.float32, np.float64]
AxisError = np.exceptions.AxisError


def arr(shape, dt=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    return np.asarray((rng.standard_normal(shape) * 5).astype(dt))


def check_static(fn, x, *args, **kw):
    """``fn(x, *args)`` with every argument but ``x`` kept static (arrays included)."""
    run_mapping(lambda a: fn(a, *args, **kw), lambda a: CALLABLES[fn](a, *args, **kw), x)


# -- reshaping -----------------------------------------------------------------------------


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,new", [
    ((2, 3), (3, 2)), ((2, 3), -1), ((2, 3), (-1, 2)), ((2, 3, 4), (4, -1, 3)), ((), (1, 1)),
    ((1,), ()), ((0, 3), (-1, 3)), ((0, 3), (0, 5)), ((6,), 6), ((2, 3), [3, 2]),
    ((2, 3), (2, 3)),
])
def test_reshape(dt, shape, new):
    x = arr(shape, dt)
    check(np.reshape, x, new)
    check_method("reshape", x, new)
    if isinstance(new, tuple) and new:
        check_method("reshape", x, *new)


@pytest.mark.parametrize("shape,new", [((2, 3), (4,)), ((2, 3), (-1, -1)), ((2, 3), (-1, 4)),
                                       ((2, 3), (-2, -3)), ((0, 3), (-1, 0))])
def test_reshape_errors(shape, new):
    check_raises(ValueError, np.reshape, arr(shape), new)


def test_reshape_order_f_is_refused():
    with pytest.raises(UnsupportedError, match="order"):
        stage(CALLABLES[np.reshape], (arr((2, 3)), (3, 2)), {"order": "F"})


def test_reshape_of_python_scalar_is_strong():
    check(np.reshape, 2.5, (1, 1))


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", [(), (4,), (2, 3), (2, 0, 3)])
def test_ravel_flatten(dt, shape):
    x = arr(shape, dt)
    check(np.ravel, x)
    check_method("ravel", x)
    check_method("flatten", x)


# -- transposing ---------------------------------------------------------------------------


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,axes", [
    ((), None), ((3,), None), ((2, 3), None), ((2, 3, 4), None), ((2, 3, 4), (1, 0, 2)),
    ((2, 3, 4), (-1, 0, -2)), ((2, 0, 4), [2, 1, 0]), ((2, 3), (0, 1)),
])
def test_transpose(dt, shape, axes):
    x = arr(shape, dt)
    check(np.transpose, x, axes)
    check_method("transpose", x, axes)
    if axes is not None:
        check_method("transpose", x, *axes)
    else:
        check_method("transpose", x)
    check_attribute("T", x)


@pytest.mark.parametrize("axes,exc", [((0, 1), ValueError), ((0, 0, 1), ValueError),
                                      ((0, 1, 3), AxisError)])
def test_transpose_errors(axes, exc):
    check_raises(exc, np.transpose, arr((2, 3, 4)), axes)


@pytest.mark.parametrize("a1,a2", [(0, 1), (0, -1), (2, 2), (-3, 1)])
def test_swapaxes(a1, a2):
    x = arr((2, 3, 4))
    check(np.swapaxes, x, a1, a2)
    check_method("swapaxes", x, a1, a2)


def test_swapaxes_error():
    check_raises(AxisError, np.swapaxes, arr((2, 3)), 0, 2)


@pytest.mark.parametrize("src,dst", [(0, -1), (-1, 0), ((0, 1), (2, 0)), ([0, 2], [-1, -3]),
                                     ((), ())])
def test_moveaxis(src, dst):
    check(np.moveaxis, arr((2, 3, 4)), src, dst)


@pytest.mark.parametrize("src,dst,exc", [((0, 1), (2,), ValueError), ((0, 0), (1, 2), ValueError),
                                         (3, 0, AxisError)])
def test_moveaxis_errors(src, dst, exc):
    check_raises(exc, np.moveaxis, arr((2, 3, 4)), src, dst)


@pytest.mark.parametrize("shape,axis", [((), 0), ((3,), 0), ((3,), -1), ((2, 3), 1),
                                        ((2, 3), (0, 3)), ((2, 3), (-1, 0))])
def test_expand_dims(shape, axis):
    check(np.expand_dims, arr(shape, np.int32), axis)


@pytest.mark.parametrize("axis,exc", [(4, AxisError), ((0, 0), ValueError)])
def test_expand_dims_errors(axis, exc):
    check_raises(exc, np.expand_dims, arr((2, 3)), axis)


@pytest.mark.parametrize("shape,axis", [((1, 3, 1), None), ((1, 3, 1), 0), ((1, 3, 1), -1),
                                        ((1, 3, 1), (0, 2)), ((), None), ((3,), None),
                                        ((1, 0), 0)])
def test_squeeze(shape, axis):
    x = arr(shape, np.float32)
    check(np.squeeze, x, axis)
    check_method("squeeze", x, axis)


def test_squeeze_error():
    check_raises(ValueError, np.squeeze, arr((1, 3)), 1)


# -- joining -------------------------------------------------------------------------------


@pytest.mark.parametrize("dts", [(np.float64, np.float64), (np.int32, np.float32),
                                 (np.bool_, np.int32), (np.int64, np.int32, np.bool_)])
@pytest.mark.parametrize("shapes,axis", [
    ([(2, 3), (1, 3)], 0), ([(2, 3), (2, 0)], -1), ([(2,), (3, 1)], None), ([(0, 3), (0, 3)], 0),
])
def test_concatenate(dts, shapes, axis):
    xs = [arr(s, dts[i % len(dts)], i) for i, s in enumerate(shapes)]
    check(np.concatenate, xs, axis)


@pytest.mark.parametrize("dt,casting", [(np.float32, "same_kind"), (np.int32, "unsafe")])
def test_concatenate_dtype(dt, casting):
    check(np.concatenate, (arr((2,)), arr((3,), np.int64)), dtype=dt, casting=casting)


@pytest.mark.parametrize("args,kw,exc", [
    (([],), {}, ValueError), (([np.zeros(())],), {}, ValueError),
    (([np.zeros((2, 3)), np.zeros((2, 4))],), {}, ValueError),
    (([np.zeros((2, 3)), np.zeros(3)],), {}, ValueError),
    (([np.zeros(3)],), {"axis": 1}, AxisError),
    (([np.zeros(3)],), {"dtype": np.int32}, TypeError),
])
def test_concatenate_errors(args, kw, exc):
    check_raises(exc, np.concatenate, *args, **kw)


@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (0, 2)])
@pytest.mark.parametrize("axis", [0, -1])
def test_stack(shape, axis):
    check(np.stack, [arr(shape, np.int32), arr(shape, np.float32, 1), arr(shape, seed=2)], axis)


def test_stack_errors():
    check_raises(ValueError, np.stack, [np.zeros(2), np.zeros(3)])
    check_raises(ValueError, np.stack, [])
    check_raises(AxisError, np.stack, [np.zeros(2)], axis=2)


def test_stack_of_run_time_scalars_and_constants():
    run_mapping(lambda a, b: np.stack([a, 1.0, b]), lambda a, b: CALLABLES[np.stack]([a, 1.0, b]),
                np.float32(2), np.float32(3))


@pytest.mark.parametrize("fn", [np.hstack, np.vstack, np.dstack, np.column_stack])
@pytest.mark.parametrize("shapes", [[(), ()], [(3,), (3,)], [(2, 3), (2, 3)],
                                    [(2, 1, 3), (2, 1, 3)], [(2,), (2,), (2,)]])
def test_stacks(fn, shapes):
    check(fn, [arr(s, np.float32, i) for i, s in enumerate(shapes)])


def test_hstack_dtype():
    check(np.hstack, [arr((2,)), arr((3,))], dtype=np.float32)


@pytest.mark.parametrize("shapes,axis", [([(2, 3), (4,)], None), ([(2, 3), (1, 3)], 0),
                                         ([(3,), ()], None)])
def test_append(shapes, axis):
    check(np.append, arr(shapes[0], np.int32), arr(shapes[1]), axis)


@pytest.mark.parametrize("fn", [np.atleast_1d, np.atleast_2d, np.atleast_3d])
@pytest.mark.parametrize("shape", [(), (3,), (2, 3), (2, 3, 4), (1, 2, 3, 4)])
def test_atleast(fn, shape):
    check(fn, arr(shape))
    check(fn, arr(shape), arr((2,)))


def test_atleast_of_python_scalar():
    check(np.atleast_2d, 3.0)


# -- splitting -----------------------------------------------------------------------------


@pytest.mark.parametrize("shape,spec,axis", [
    ((6,), 3, 0), ((6, 4), 2, 1), ((6, 4), [1, 3], 0), ((6, 4), [-2, 10], -1),
    ((6,), [4, 2], 0), ((6,), 1, 0), ((0, 2), 2, 0), ((6,), np.array([2, 5]), 0), ((6,), [], 0),
])
def test_split(shape, spec, axis):
    check_static(np.split, arr(shape), spec, axis)
    check_static(np.array_split, arr(shape), spec, axis)


@pytest.mark.parametrize("spec", [4, 5, 7])
def test_array_split_unequal(spec):
    check(np.array_split, arr((7, 2)), spec)


def test_split_errors():
    check_raises(ValueError, np.split, arr((7,)), 2)
    check_raises(ValueError, np.array_split, arr((7,)), 0)


@pytest.mark.parametrize("shape", [(4,), (2, 4), (2, 4, 2)])
def test_hsplit_vsplit(shape):
    check(np.hsplit, arr(shape), 2)
    if len(shape) > 1:
        check(np.vsplit, arr(shape), [1])


def test_hsplit_vsplit_errors():
    check_raises(ValueError, np.hsplit, arr(()), 1)
    check_raises(ValueError, np.vsplit, arr((4,)), 2)


# -- repeating -----------------------------------------------------------------------------


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,reps", [((3,), 2), ((3,), (2, 2)), ((2, 3), 2), ((2, 3), (1, 1)),
                                        ((2, 3), (2, 1, 3)), ((), 3), ((2, 0), 2), ((3,), 0),
                                        ((2, 3), ())])
def test_tile(dt, shape, reps):
    check(np.tile, arr(shape, dt), reps)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,repeats,axis", [
    ((3,), 2, None), ((2, 3), 2, None), ((2, 3), 3, 0), ((2, 3), 2, -1), ((2, 3), [1, 0, 2], 1),
    ((2, 3), [2], 0), ((), 4, None), ((2, 3), 0, 1), ((2, 3), np.array([3, 1]), 0),
])
def test_repeat(dt, shape, repeats, axis):
    x = arr(shape, dt)
    check_static(np.repeat, x, repeats, axis)
    run_mapping(lambda a: a.repeat(repeats, axis), lambda a: METHODS["repeat"](a, repeats, axis),
                x)


def test_repeat_errors():
    check_raises(ValueError, np.repeat, arr((3,)), -1)
    check_raises(ValueError, np.repeat, arr((3,)), [1, 2])
    check_raises(ValueError, np.tile, arr((3,)), -1)


def test_run_time_repeats_are_refused():
    with pytest.raises(ConcretizationError, match="repeats"):
        stage(CALLABLES[np.repeat], (arr((3,)), np.int64(2)), {})


# -- broadcasting --------------------------------------------------------------------------


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,to", [((), (2, 3)), ((3,), (2, 3)), ((2, 1), (2, 4)),
                                      ((1,), (0,)), ((2, 3), (2, 3)), ((3,), 3)])
def test_broadcast_to(dt, shape, to):
    check(np.broadcast_to, arr(shape, dt), to)


def test_broadcast_to_errors():
    check_raises(ValueError, np.broadcast_to, arr((3,)), (4,))
    check_raises(ValueError, np.broadcast_to, arr((2, 3)), (3,))


@pytest.mark.parametrize("shapes", [[(3,), (2, 1)], [(), (2,)], [(1, 0), (3, 1), ()], [(4,)]])
def test_broadcast_arrays(shapes):
    check(np.broadcast_arrays, *[arr(s, np.int32, i) for i, s in enumerate(shapes)])


def test_broadcast_arrays_error():
    check_raises(ValueError, np.broadcast_arrays, arr((3,)), arr((2,)))


# -- flipping and rolling ------------------------------------------------------------------


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,axis", [((4,), None), ((2, 3), None), ((2, 3), 0), ((2, 3), -1),
                                        ((2, 3, 4), (0, 2)), ((), None), ((2, 0), 1)])
def test_flip(dt, shape, axis):
    check(np.flip, arr(shape, dt), axis)


@pytest.mark.parametrize("shape", [(3,), (2, 3), (2, 3, 4)])
def test_fliplr_flipud(shape):
    check(np.flipud, arr(shape))
    if len(shape) > 1:
        check(np.fliplr, arr(shape))


def test_flip_errors():
    check_raises(ValueError, np.fliplr, arr((3,)))
    check_raises(ValueError, np.flipud, arr(()))
    check_raises(AxisError, np.flip, arr((3,)), 1)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,shift,axis", [
    ((5,), 2, None), ((5,), -7, None), ((2, 3), 4, None), ((2, 3), 1, 0), ((2, 3), -1, -1),
    ((2, 3), (1, 2), (0, 1)), ((2, 3), 1, (0, 1)), ((2, 3), (1, 1), (1, 1)), ((2, 3), 0, 1),
    ((0, 3), 2, 0), ((), 3, None), ((4,), 8, 0),
])
def test_roll(dt, shape, shift, axis):
    check(np.roll, arr(shape, dt), shift, axis)


@pytest.mark.parametrize("k", [0, 1, 2, 3, -1, 5])
@pytest.mark.parametrize("shape,axes", [((2, 3), (0, 1)), ((2, 3), (1, 0)), ((2, 3, 4), (0, 2)),
                                        ((2, 3, 4), (-1, 1))])
def test_rot90(k, shape, axes):
    check(np.rot90, arr(shape, np.int32), k, axes)


@pytest.mark.parametrize("axes", [(0,), (0, 0), (0, 2), (0, -2)])
def test_rot90_errors(axes):
    check_raises(ValueError, np.rot90, arr((2, 3)), 1, axes)


# -- padding -------------------------------------------------------------------------------


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,width,kw", [
    ((3,), 2, {}), ((3,), (1, 2), {"constant_values": 7}), ((2, 3), ((1, 0), (2, 1)), {}),
    ((2, 3), ((1, 2),), {"constant_values": ((1, 2), (3, 4))}),
    ((2, 3), 1, {"constant_values": (5, 6)}), ((2, 3), 0, {}), ((0, 2), 1, {}), ((), 0, {}),
    ((2, 3), 1, {"constant_values": 2.7}),
])
def test_pad_constant(dt, shape, width, kw):
    check_static(np.pad, arr(shape, dt), width, **kw)


def test_pad_run_time_constant():
    run_mapping(lambda a, c: np.pad(a, 1, constant_values=c),
                lambda a, c: CALLABLES[np.pad](a, 1, constant_values=c), arr((2, 3)), 4.5)


@pytest.mark.parametrize("mode", ["edge", "reflect", "symmetric", "wrap"])
@pytest.mark.parametrize("shape,width", [((4,), 2), ((4,), (0, 9)), ((2, 3), ((1, 2), (3, 0))),
                                         ((1, 3), 2), ((2, 0), ((1, 1), (0, 0)))])
def test_pad_index_modes(mode, shape, width):
    check_static(np.pad, arr(shape, np.int32), width, mode)


def test_pad_errors():
    check_raises(ValueError, np.pad, arr((3,)), -1)
    check_raises(ValueError, np.pad, arr((0,)), 1, "edge")
    check_raises(TypeError, np.pad, arr((3,)), 1.5, mapping=lambda a, w: CALLABLES[np.pad](a, 1.5))
    with pytest.raises(UnsupportedError, match="mode"):
        stage(CALLABLES[np.pad], (arr((3,)), 1, "empty"), {})


# -- static facts --------------------------------------------------------------------------


@pytest.mark.parametrize("shape", [(), (3,), (2, 0, 4)])
def test_shape_ndim_size(shape):
    x = arr(shape, np.float32)
    for fn in (np.shape, np.ndim, np.size):
        check(fn, x)
    for name in ("shape", "ndim", "size", "dtype"):
        check_attribute(name, x)


@pytest.mark.parametrize("axis", [0, -1, (0, 2)])
def test_size_axis(axis):
    check(np.size, arr((2, 3, 4)), axis)


@pytest.mark.parametrize("dt", DTYPES)
def test_dtype_attribute(dt):
    check_attribute("dtype", arr((2,), dt))


def test_shape_of_python_values():
    check(np.shape, [[1, 2, 3], [4, 5, 6]])
    check(np.ndim, 2.0)
