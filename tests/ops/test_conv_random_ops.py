"""conv and random_bits: shape rule vs impl vs references written out element by element."""

import numpy as np
import pytest

from opcheck import infer, run_op
from pullback.errors import ShapeError
from pullback.ir.types import TensorType, dtype, float32, float64, int32, int64
from pullback.ops import conv as C
from pullback.ops import random as R
from samples import DTYPES, arr, assert_same, tt

# -- conv -----------------------------------------------------------------------------


def lhs_value(lhs, n, c, q, padding, lhs_dilation):
    """Element ``q`` (per spatial dim) of the dilated, padded lhs: 0 off the grid."""
    idx = []
    for qi, (lo, _), d, size in zip(q, padding, lhs_dilation, lhs.shape[2:], strict=True):
        pos = qi - lo
        if pos < 0 or pos % d or pos // d >= size:
            return 0
        idx.append(pos // d)
    return lhs[(n, c, *idx)]


def conv_ref(lhs, rhs, strides, padding, lhs_dilation, rhs_dilation, out_spatial):
    """The definition, one output element and one window tap at a time."""
    wide = np.int64 if lhs.dtype.kind in "bi" else np.float64
    out = np.zeros((lhs.shape[0], rhs.shape[0], *out_spatial), wide)
    for n, o, *p in np.ndindex(out.shape):
        for c, *k in np.ndindex(rhs.shape[1:]):
            q = [pi * s + ki * d for pi, s, ki, d in zip(p, strides, k, rhs_dilation, strict=True)]
            x = lhs_value(lhs, n, c, q, padding, lhs_dilation)
            out[(n, o, *p)] += wide(x) * wide(rhs[(o, c, *k)])
    return out > 0 if lhs.dtype == np.bool_ else out.astype(lhs.dtype)


CONVS = [  # lhs, rhs, strides, padding, lhs_dilation, rhs_dilation, out
    ((1, 1, 5), (1, 1, 3), (1,), ((0, 0),), (1,), (1,), (1, 1, 3)),
    ((2, 3, 7), (4, 3, 2), (2,), ((1, 2),), (1,), (1,), (2, 4, 5)),
    ((1, 2, 6), (3, 2, 3), (1,), ((-1, -2),), (1,), (2,), (1, 3, 0)),
    ((1, 2, 8), (3, 2, 2), (3,), ((2, -1),), (2,), (3,), (1, 3, 5)),
    ((2, 2, 4, 5), (3, 2, 2, 3), (1, 2), ((0, 1), (1, 1)), (1, 1), (1, 1), (2, 3, 4, 3)),
    ((1, 1, 4, 4), (2, 1, 3, 3), (2, 1), ((1, 1), (2, 0)), (2, 1), (1, 2), (1, 2, 4, 2)),
    ((1, 2, 3, 2, 3), (1, 2, 2, 1, 2), (1, 1, 2), ((0, 0),) * 3, (1, 1, 1), (1, 1, 1),
     (1, 1, 2, 2, 1)),
    ((3, 4), (5, 4), (), (), (), (), (3, 5)),
    ((0, 2, 5), (3, 2, 2), (1,), ((0, 0),), (1,), (1,), (0, 3, 4)),
    ((2, 0, 5), (3, 0, 2), (1,), ((0, 0),), (1,), (1,), (2, 3, 4)),
    ((1, 1, 2), (1, 1, 5), (1,), ((0, 0),), (1,), (1,), (1, 1, 0)),
    ((1, 1, 0), (1, 1, 2), (1,), ((1, 1),), (1,), (1,), (1, 1, 1)),
    ((1, 1, 3, 2), (1, 1, 2, 3), (1, 1), ((0, 0), (0, 0)), (1, 1), (1, 1), (1, 1, 2, 0)),
]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("sl,sr,strides,padding,ld,rd,out", CONVS)
def test_conv(dt, sl, sr, strides, padding, ld, rd, out):
    params = dict(strides=strides, padding=padding, lhs_dilation=ld, rhs_dilation=rd)
    assert infer(C.conv, tt(sl, dtype(dt)), tt(sr, dtype(dt)), **params) == [tt(out, dtype(dt))]
    lhs, rhs = arr(sl, dt, 1), arr(sr, dt, 2)
    (got,) = run_op(C.conv, lhs, rhs, **params)
    assert_same(got, conv_ref(lhs, rhs, strides, padding, ld, rd, out[2:]))


@pytest.mark.parametrize("dt", [np.int32, np.float64])
@pytest.mark.parametrize("n,m", [(5, 3), (4, 4), (1, 1)])
def test_conv_is_numpy_correlate(dt, n, m):
    a, v = arr(n, dt, 3), arr(m, dt, 4)
    (got,) = run_op(C.conv, a[None, None], v[None, None], strides=(1,), padding=((m - 1, m - 1),),
                    lhs_dilation=(1,), rhs_dilation=(1,))
    assert_same(got[0, 0], np.correlate(a, v, "full"))


@pytest.mark.parametrize("sl,dl,sr,dr,strides,padding,ld,rd", [
    ((1, 2, 5), float32, (1, 3, 2), float32, (1,), ((0, 0),), (1,), (1,)),
    ((1, 2, 5), float32, (1, 2, 2), float64, (1,), ((0, 0),), (1,), (1,)),
    ((1, 2, 5), float32, (1, 2, 2, 2), float32, (1,), ((0, 0),), (1,), (1,)),
    ((5,), float32, (2,), float32, (), (), (), ()),
    ((1, 2, 5), float32, (1, 2, 2), float32, (1, 1), ((0, 0),), (1,), (1,)),
    ((1, 2, 5), float32, (1, 2, 2), float32, (1,), ((0, 0, 0),), (1,), (1,)),
    ((1, 2, 5), float32, (1, 2, 2), float32, (0,), ((0, 0),), (1,), (1,)),
    ((1, 2, 5), float32, (1, 2, 2), float32, (1,), ((0, 0),), (1,), (0,)),
    ((1, 2, 5), float32, (1, 2, 2), float32, (1,), ((-3, -3),), (1,), (1,)),
])
def test_conv_errors(sl, dl, sr, dr, strides, padding, ld, rd):
    lhs, rhs = tt(sl, dl), tt(sr, dr)
    with pytest.raises(ShapeError) as e:
        infer(C.conv, lhs, rhs, strides=strides, padding=padding, lhs_dilation=ld,
              rhs_dilation=rd)
    assert str(lhs) in str(e.value) and str(rhs) in str(e.value)


# -- random_bits ----------------------------------------------------------------------

MASK = 2**64 - 1


def splitmix64(seed, count):
    """The textbook SplitMix64 stream, in Python integers, as signed 64-bit values."""
    state, out = seed & MASK, []
    for _ in range(count):
        state = (state + 0x9E3779B97F4A7C15) & MASK
        z = state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & MASK
        z ^= z >> 31
        out.append(z - 2**64 if z >= 2**63 else z)
    return out


def bits(key, shape):
    (got,) = run_op(R.random_bits, np.asarray(key, np.int64), shape=shape)
    assert got.dtype == np.int64 and got.shape == shape
    return got


def test_random_bits_known_answer():
    got = bits(0, (3,)).view(np.uint64)
    assert [hex(int(v)) for v in got] == ["0xe220a8397b1dcdaf", "0x6e789e6aa1b965f4",
                                          "0x6c45d188009454f"]


@pytest.mark.parametrize("key", [0, 1, -1, 42, 2**63 - 1, -(2**63)])
@pytest.mark.parametrize("shape", [(), (0,), (5,), (2, 3), (2, 0, 3), (1, 4, 1)])
def test_random_bits_is_splitmix64_in_c_order(key, shape):
    got = bits(key, shape)
    assert got.ravel().tolist() == splitmix64(key, got.size)


def test_random_bits_reproducible_and_key_dependent():
    np.testing.assert_array_equal(bits(7, (100,)), bits(7, (100,)))
    assert np.mean(bits(7, (100,)) == bits(8, (100,))) < 0.05
    np.testing.assert_array_equal(bits(7, (4, 25)).ravel(), bits(7, (100,)))


def test_random_bits_look_uniform():
    got = bits(123, (4096,)).view(np.uint64)
    ones = (got[:, None] >> np.arange(64, dtype=np.uint64)) & np.uint64(1)
    freq = ones.mean(axis=0)
    assert np.all(np.abs(freq - 0.5) < 0.05)


@pytest.mark.parametrize("key", [tt((), int32), tt((), float64), tt((1,), int64),
                                 TensorType((), float64, True)])
def test_random_bits_errors(key):
    with pytest.raises(ShapeError, match=str(key).replace("[", r"\[")):
        infer(R.random_bits, key, shape=(3,))


def test_random_bits_weak_key_is_fine():
    assert infer(R.random_bits, TensorType((), int64, True), shape=(2,)) == [tt((2,), int64)]
