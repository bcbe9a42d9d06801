"""slice, rev, concatenate, pad, iota: shape rule vs impl vs a NumPy reference."""

import numpy as np
import pytest

from opcheck import infer, run_op
from pullback.errors import ShapeError
from pullback.ir.types import dtype, int32, int64
from pullback.ops import shape as S
from samples import DTYPES, arr, assert_same, tt

# -- slice ---------------------------------------------------------------------------

SLICES = [
    ((5,), (0,), (5,), (1,)),
    ((5,), (1,), (4,), (2,)),
    ((5,), (2,), (2,), (1,)),
    ((5,), (0,), (5,), (7,)),
    ((3, 4), (1, 0), (3, 4), (1, 3)),
    ((0, 4), (0, 1), (0, 3), (1, 1)),
    ((2, 3, 4), (0, 1, 1), (2, 3, 4), (2, 2, 2)),
    ((), (), (), ()),
]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,start,limit,stride", SLICES)
def test_slice(dt, shape, start, limit, stride):
    x = arr(shape, dt)
    (got,) = run_op(S.slice_, x, start=start, limit=limit, stride=stride)
    assert_same(got, x[tuple(slice(*b) for b in zip(start, limit, stride, strict=True))])


@pytest.mark.parametrize("start,limit,stride", [
    ((0,), (6,), (1,)), ((3,), (2,), (1,)), ((-1,), (2,), (1,)), ((0,), (2,), (0,)),
    ((0, 0), (1, 1), (1, 1)),
])
def test_slice_errors(start, limit, stride):
    with pytest.raises(ShapeError, match=r"f32\[5\]"):
        infer(S.slice_, tt((5,)), start=start, limit=limit, stride=stride)


# -- rev -----------------------------------------------------------------------------


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,dims", [
    ((5,), (0,)), ((3, 4), (1,)), ((3, 4), (0, 1)), ((2, 0, 3), (1, 2)), ((), ()),
    ((3, 4), ()),
])
def test_rev(dt, shape, dims):
    x = arr(shape, dt)
    (got,) = run_op(S.rev, x, dims=dims)
    assert_same(got, np.flip(x, dims))


@pytest.mark.parametrize("dims", [(2,), (0, 0), (-1,)])
def test_rev_errors(dims):
    with pytest.raises(ShapeError, match=r"f32\[3,4\]"):
        infer(S.rev, tt((3, 4)), dims=dims)


# -- concatenate ---------------------------------------------------------------------


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shapes,axis", [
    ([(3,)], 0), ([(3,), (0,), (2,)], 0), ([(2, 3), (4, 3)], 0), ([(2, 3), (2, 1)], 1),
    ([(2, 0, 1), (2, 3, 1), (2, 1, 1)], 1), ([(0, 2), (0, 2)], 0),
])
def test_concatenate(dt, shapes, axis):
    xs = [arr(s, dt, i) for i, s in enumerate(shapes)]
    (got,) = run_op(S.concatenate, *xs, axis=axis)
    assert_same(got, np.concatenate(xs, axis=axis))


@pytest.mark.parametrize("types,axis", [
    ([tt((2, 3)), tt((2, 4))], 0),
    ([tt((2, 3)), tt((2, 3), int32)], 0),
    ([tt((2, 3)), tt((2,))], 0),
    ([tt((2, 3))], 2),
    ([tt(())], 0),
])
def test_concatenate_errors(types, axis):
    with pytest.raises(ShapeError, match=r"f32\["):
        infer(S.concatenate, *types, axis=axis)


def test_concatenate_needs_an_operand():
    with pytest.raises(ShapeError):
        infer(S.concatenate, axis=0)


# -- pad -----------------------------------------------------------------------------


def pad_reference(x, v, lo, hi, interior):
    """XLA's pad by definition: each output position maps back to a source or padding."""
    out_shape = [lo_ + d + max(d - 1, 0) * i + hi_
                 for d, lo_, hi_, i in zip(x.shape, lo, hi, interior, strict=True)]
    out = np.full(out_shape, v, dtype=x.dtype)
    for pos in np.ndindex(*out_shape):
        src = []
        for p, lo_, i, d in zip(pos, lo, interior, x.shape, strict=True):
            q, r = divmod(p - lo_, i + 1)
            if p - lo_ < 0 or r or q >= d:
                break
            src.append(q)
        else:
            out[pos] = x[tuple(src)]
    return out


PADS = [
    ((4,), (1,), (2,), (0,)),
    ((4,), (0,), (0,), (2,)),
    ((4,), (-1,), (-2,), (0,)),
    ((4,), (-2,), (3,), (1,)),
    ((4,), (3,), (-5,), (1,)),
    ((0,), (2,), (1,), (3,)),
    ((1,), (0,), (0,), (4,)),
    ((2, 3), (1, -1), (0, 2), (1, 0)),
    ((2, 0, 2), (0, 1, 1), (1, 0, -1), (0, 0, 1)),
    ((), (), (), ()),
]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,lo,hi,interior", PADS)
def test_pad(dt, shape, lo, hi, interior):
    x = arr(shape, dt)
    v = np.asarray(7, dt)
    (got,) = run_op(S.pad, x, v, lo=lo, hi=hi, interior=interior)
    assert_same(got, pad_reference(x, v, lo, hi, interior))


@pytest.mark.parametrize("types,lo,hi,interior", [
    ([tt((4,)), tt((), int32)], (0,), (0,), (0,)),
    ([tt((4,)), tt((1,))], (0,), (0,), (0,)),
    ([tt((4,)), tt(())], (0, 0), (0,), (0,)),
    ([tt((4,)), tt(())], (0,), (0,), (-1,)),
    ([tt((4,)), tt(())], (-3,), (-2,), (0,)),
])
def test_pad_errors(types, lo, hi, interior):
    with pytest.raises(ShapeError, match=r"f32\[4\]"):
        infer(S.pad, *types, lo=lo, hi=hi, interior=interior)


# -- iota ----------------------------------------------------------------------------


@pytest.mark.parametrize("dt", ["int32", "int64", "float32", "float64"])
@pytest.mark.parametrize("shape,dim", [((5,), 0), ((3, 4), 0), ((3, 4), 1), ((2, 0, 3), 2),
                                       ((0,), 0)])
def test_iota(dt, shape, dim):
    (got,) = run_op(S.iota, shape=shape, dim=dim, dtype=dtype(dt))
    assert_same(got, np.indices(shape, dtype=dt)[dim])


@pytest.mark.parametrize("shape,dim", [((3,), 1), ((), 0), ((3, 4), -1)])
def test_iota_errors(shape, dim):
    with pytest.raises(ShapeError, match=r"i64\["):
        infer(S.iota, shape=shape, dim=dim, dtype=int64)


def test_iota_rejects_bool():
    with pytest.raises(ShapeError, match="bool"):
        infer(S.iota, shape=(3,), dim=0, dtype=dtype("bool"))
