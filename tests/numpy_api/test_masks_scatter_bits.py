"""Issue 20 items 4-6 through pb.jit on both backends against plain NumPy: assignment
through run-time boolean masks, np.putmask/np.copyto, reductions with where=/initial=,
np.ufunc.at, np.bincount, np.histogram, np.digitize, and integer bit operations; with
grad and jvp against float64 central differences."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb

BACKENDS = ["interp", "c"]


def same(got, want) -> None:
    """Equal values (NaN equal to NaN) and equal dtypes, through tuples."""
    if isinstance(want, tuple):
        assert isinstance(got, tuple) and len(got) == len(want)
        for g, w in zip(got, want, strict=True):
            same(g, w)
        return
    assert type(got) is type(want), (type(got), type(want))
    if isinstance(want, (np.ndarray, np.generic)):
        assert got.dtype == want.dtype, (got.dtype, want.dtype)
        assert got.shape == want.shape, (got.shape, want.shape)
        if want.dtype.kind == "f":
            np.testing.assert_allclose(got, want, rtol=1e-6 if want.dtype == np.float32
                                       else 1e-12, atol=1e-12, equal_nan=True)
            return
    np.testing.assert_array_equal(got, want)


def run_both(fn, *args) -> None:
    """``fn`` compiled on each backend returns what it returns as plain Python."""
    want = fn(*[np.copy(a) if isinstance(a, np.ndarray) else a for a in args])
    for backend in BACKENDS:
        got = pb.jit(fn, backend=backend)(
            *[np.copy(a) if isinstance(a, np.ndarray) else a for a in args])
        same(got, want)


def raises_both(exc, match: str, fn, *args) -> None:
    """Plain Python and both backends raise ``exc`` (its message matching ``match``)."""
    with pytest.raises(exc, match=match):
        fn(*args)
    for backend in BACKENDS:
        with pytest.raises(exc, match=match):
            pb.jit(fn, backend=backend)(*args)


def refused(match: str, fn, *args) -> None:
    for backend in BACKENDS:
        with pytest.raises(pb.CompileError, match=match):
            pb.jit(fn, backend=backend)(*args)


def differences(fn, args, argnum: int, eps: float = 1e-6) -> np.ndarray:
    """The gradient of scalar ``fn`` in ``args[argnum]`` by float64 central differences."""
    x = np.asarray(args[argnum], np.float64)
    out = np.zeros_like(x)
    for k in range(x.size):
        hi, lo = x.copy(), x.copy()
        hi.flat[k] += eps
        lo.flat[k] -= eps
        f_hi = fn(*args[:argnum], hi, *args[argnum + 1:])
        f_lo = fn(*args[:argnum], lo, *args[argnum + 1:])
        out.flat[k] = (f_hi - f_lo) / (2 * eps)
    return out


def derivatives_agree(fn, *args, argnums=(0,)) -> None:
    """pb.grad (both backends) and pb.jvp against central differences, for each argnum."""
    for argnum in argnums:
        want = differences(fn, args, argnum)
        for backend in BACKENDS:
            got = pb.jit(pb.grad(fn, argnums=argnum), backend=backend)(*args)
            np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-7)
        direction = np.random.default_rng(argnum).standard_normal(np.shape(args[argnum]))
        tangents = tuple(direction if k == argnum else np.zeros_like(a)
                         for k, a in enumerate(args))
        _, tangent = pb.jvp(fn, args, tangents)
        np.testing.assert_allclose(tangent, np.sum(want * direction), rtol=1e-6, atol=1e-7)


X = np.array([0.3, -1.2, 2.5, 0.7, -0.4, 1.9, -2.2])
O = np.array([1.5, 0.25, -0.75, 2.0, -1.0, 0.5, 3.0])


# -- item 4: assignment through run-time boolean masks ------------------------------------


def clip_below(y, t):
    y = y.copy()
    y[y < t] = t
    return y


def flag(x):
    z = np.zeros_like(x)
    z[x > 0.5] = 1.0
    return z


def copy_where(y, o):
    y = y.copy()
    m = y > 0
    y[m] = o[m]
    return y


def add_where(y, v):
    y = y.copy()
    y[y > 0] += v
    return y


def combine_where(y, o):
    y = y.copy()
    m = y < 1.0
    y[m] *= o[m]
    y[m] -= 2
    return y


def fill_rows(y, v):
    """One value per True (v's length must be the mask's count, known at run time)."""
    y = y.copy()
    y[y > 0] = v
    return y


def test_mask_assignment_values():
    run_both(clip_below, X, 0.5)
    run_both(flag, X)
    run_both(copy_where, X, O)
    run_both(add_where, X, 10.0)
    run_both(add_where, X, np.float32(1.5))
    run_both(combine_where, X, O)
    run_both(fill_rows, X, np.arange(4.0))  # X has four positive values
    run_both(clip_below, X.astype(np.float32), 0.5)
    run_both(flag, np.zeros(0))


def test_mask_with_nothing_or_everything_selected():
    run_both(clip_below, X, -10.0)
    run_both(clip_below, X, 10.0)
    run_both(fill_rows, -np.abs(X), np.zeros(0))


def test_run_time_length_mismatch_raises_numpys_error():
    raises_both(ValueError, "cannot assign 3 input values to the 4 output values",
                fill_rows, X, np.arange(3.0))


def test_masks_over_leading_axes_and_rows():
    def rows(y, r):
        y = y.copy()
        m = y.sum(axis=1) > 0
        y[m] = r  # one row for all selected rows
        return y

    def by_2d_mask(y, v):
        y = y.copy()
        y[y[:, :, 0] > 0] += v
        return y

    y = np.arange(12.0).reshape(4, 3) - 5
    run_both(rows, y, np.array([7.0, 8.0, 9.0]))
    run_both(rows, y, 1.0)
    run_both(by_2d_mask, np.arange(24.0).reshape(2, 3, 4) - 10, np.array([1.0, 2, 3, 4]))


def test_integer_arrays_cast_like_numpy():
    def set_int(y):
        y = y.copy()
        y[y > 2] = 1.7  # unsafe cast, as NumPy's assignment
        return y

    def add_float(y):
        y = y.copy()
        y[y > 2] += 1.5
        return y

    run_both(set_int, np.arange(6, dtype=np.int32))
    raises_both(TypeError, "Cannot cast ufunc 'add' output", add_float, np.arange(6))


def test_reading_through_a_run_time_mask_is_refused():
    refused("np.where", lambda x: x[x > 0], X)
    refused("same mask", _copy_other_mask, X, O)
    refused("mask in a variable", _copy_unnamed_mask, X, O)
    refused("data-dependent shape", lambda x: np.sum(x[x > 0] ** 2), X)
    refused("data-dependent shape", _copy_product, X, O)


def _copy_product(y, o):
    y = y.copy()
    m = y > 0
    y[m] = o[m] * y[m]  # an expression of masked reads: write (o * y)[m] instead
    return y


def _copy_other_mask(y, o):
    y = y.copy()
    m, n = y > 0, o > 0
    y[m] = o[n]
    return y


def _copy_unnamed_mask(y, o):
    y = y.copy()
    y[y > 0] = o[y > 0]
    return y


def test_mask_assignment_derivatives():
    def loss_clip(x, t):
        y = x * 1.0
        y[y < t] = t * t
        return np.sum(y * y)

    def loss_copy(x, o):
        y = np.sin(x)
        m = x > 0
        z = o * x
        y[m] = z[m]
        return np.sum(y ** 2)

    def loss_rows(x, v):
        y = x * 2.0
        y[x > 0] = v * v
        return np.sum(np.cos(y))

    def loss_add(x, o):
        y = x.copy()
        y[x > 0] += 1.5
        m = x < 0
        y[m] *= o[m]
        return np.sum(y ** 3)

    derivatives_agree(loss_clip, X, 0.5, argnums=(0, 1))
    derivatives_agree(loss_copy, X, O, argnums=(0, 1))
    derivatives_agree(loss_rows, X, np.array([0.1, 0.2, 0.3, 0.4]), argnums=(0, 1))
    derivatives_agree(loss_add, X, O, argnums=(0, 1))


# -- np.putmask, np.copyto -------------------------------------------------------------------


def test_putmask_and_copyto():
    def put(y, v):
        y = y.copy()
        np.putmask(y, y > 0, v)
        return y

    def copy(y, s):
        y = y.copy()
        np.copyto(y, s, where=y > 0)
        return y

    def copy_all(y, s):
        np.copyto(y, s)  # writes the caller's array
        return y.sum()

    run_both(put, X, O)
    run_both(put, X, np.array([10.0, 20.0]))  # values repeat, by position
    run_both(put, X, 5.0)
    run_both(copy, X, O)
    run_both(copy, X, 2.0)
    run_both(copy, np.arange(12.0).reshape(3, 4) - 6, np.arange(4.0))
    run_both(copy_all, X, O)
    raises_both(ValueError, "mask and data must be the same size",
                lambda y: np.putmask(y, np.ones(3, bool), 1.0), X)
    raises_both(TypeError, "according to the rule 'same_kind'",
                lambda y, s: np.copyto(y, s), np.arange(3), np.ones(3))

    def loss(x, o):
        y = np.exp(x)
        np.putmask(y, x > 0, o * o)
        z = np.zeros_like(x)
        np.copyto(z, o * x, where=x < 1)
        return np.sum(y * z) + np.sum(y)

    derivatives_agree(loss, X, O, argnums=(0, 1))


# -- reductions with where= and initial= -----------------------------------------------------


M = np.array([[True, False, True], [False, False, False], [True, True, False]])
Y = np.array([[1.5, -2.0, 0.5], [3.0, 4.0, -1.0], [-0.5, 2.5, 6.0]])


@pytest.mark.parametrize("axis", [None, 0, 1, (0, 1)], ids=str)
def test_reductions_with_where(axis):
    def reduce(y, m):
        return (np.sum(y, axis=axis, where=m), np.prod(y, axis=axis, where=m),
                np.max(y, axis=axis, where=m, initial=-10.0),
                np.min(y, axis=axis, where=m, initial=10.0),
                np.any(y > 0, axis=axis, where=m), np.all(y > 0, axis=axis, where=m),
                np.sum(y, axis=axis, where=m, initial=1.0, keepdims=True),
                y.max(axis=axis, initial=2.0), y.sum(axis=axis, where=m[0]))

    run_both(reduce, Y, M)
    run_both(reduce, Y.astype(np.float32), M)
    run_both(reduce, np.arange(9, dtype=np.int32).reshape(3, 3), M)


def test_mean_with_where():
    def mean(y, m):
        return np.mean(y, where=m), np.mean(y, axis=1, where=m[:, :1] | m)

    run_both(mean, Y[:, :2], M[:, :2] | M[:, 1:])
    run_both(mean, Y.astype(np.float32)[:, :2], M[:, :2] | M[:, 1:])
    run_both(mean, np.arange(6).reshape(3, 2), M[:, :2] | M[:, 1:])
    with np.errstate(invalid="ignore"), pytest.warns(RuntimeWarning):
        run_both(lambda y, m: np.mean(y, axis=1, where=m), Y, M)  # row 1: NaN


def test_extremes_need_initial_with_where():
    raises_both(ValueError, "does not have an identity", lambda y, m: np.max(y, where=m), Y, M)
    run_both(lambda y: np.max(y[:0], initial=3.0), Y)


def test_reduction_where_derivatives():
    m = X > 0

    def loss(x, w):
        return (np.sum(x * w, where=m) + np.mean(x ** 2, where=~m)
                + np.max(x * w, where=m, initial=-100.0) + np.min(x, where=m, initial=1.0)
                + np.prod(x, where=m))

    derivatives_agree(loss, X, O, argnums=(0, 1))


# -- item 5: ufunc.at, bincount, histogram, digitize -------------------------------------------


IDX = np.array([0, 2, 2, 5, 0, 0])


def test_ufunc_at_values():
    def at(a, i, b):
        outs = []
        for ufunc in (np.add, np.subtract, np.multiply, np.maximum, np.minimum):
            y = a.copy()
            ufunc.at(y, i, b)
            outs.append(y)
        return tuple(outs)

    b = np.array([1.5, -2.0, 3.0, 0.5, -1.0, 2.5])
    run_both(at, X, IDX, b)
    run_both(at, X, IDX, 2.0)
    run_both(at, X.astype(np.float32), IDX, b.astype(np.float32))
    run_both(at, np.arange(7), IDX, np.array([3, -1, 4, 1, -5, 9]))
    run_both(at, np.array([np.nan, 1.0, 2.0]), np.array([1, 1, 0]), np.array([np.nan, 5, 0]))

    def rows(a, i, b):
        np.add.at(a, (i, 1), b)
        np.maximum.at(a, [1, 1], a[0])
        return a

    run_both(rows, np.arange(12.0).reshape(4, 3), np.array([3, 3, 0]), np.array([1.0, 2, 3]))


def test_ufunc_at_on_booleans():
    def at(a, i, b):
        outs = []
        for ufunc in (np.add, np.multiply, np.maximum, np.minimum):
            y = a.copy()
            ufunc.at(y, i, b)
            outs.append(y)
        return tuple(outs)

    a = np.array([True, False, True, False])
    run_both(at, a, np.array([1, 1, 2, 3, 3]), np.array([True, False, False, False, True]))
    run_both(at, a, np.array([0, 1]), True)


def test_ufunc_at_refusals():
    def floats_into_ints(a, b):
        np.add.at(a, [0, 0], b)
        return a

    refused("casts each partial result", floats_into_ints, np.arange(3), np.ones(2))
    raises_both(TypeError, "numpy boolean subtract",
                lambda a: np.subtract.at(a, [0], True), np.array([True, False]))
    raises_both(IndexError, "out of bounds", lambda a, i: np.add.at(a, i, 1.0), X,
                np.array([1, 7]))


def test_ufunc_at_derivatives():
    b = np.array([1.5, -2.0, 3.0, 0.5, -1.0, 2.5])

    def add_sub(a, b):
        y = a * 1.0
        np.add.at(y, IDX, b * b)
        np.subtract.at(y, IDX[::-1], b)
        return np.sum(y ** 2)

    def products(a, b):
        y = a * 1.0
        np.multiply.at(y, IDX, b)
        return np.sum(y * y)

    def extremes(a, b):
        y, z = a * 1.0, a * 1.0
        np.maximum.at(y, IDX, b)
        np.minimum.at(z, IDX, b)
        return np.sum(y ** 2) + np.sum(z ** 3)

    derivatives_agree(add_sub, X, b, argnums=(0, 1))
    derivatives_agree(products, X, b, argnums=(0, 1))
    derivatives_agree(products, X, np.array([1.5, 0.0, 3.0, 0.5, -1.0, 2.5]), argnums=(0, 1))
    derivatives_agree(extremes, X, b, argnums=(0, 1))


def test_ufunc_at_ties_split_evenly():
    """maximum.at's convention at ties (that of np.max): the element and the updates
    equal to the result share its cotangent evenly."""
    def f(a, b):
        y = a * 1.0
        np.maximum.at(y, np.array([0, 0, 1]), b)
        return np.sum(y)

    a, b = np.array([2.0, 0.0]), np.array([2.0, 2.0, -1.0])
    for backend in BACKENDS:
        ga, gb = pb.jit(pb.grad(f, argnums=(0, 1)), backend=backend)(a, b)
        np.testing.assert_allclose(ga, [1 / 3, 1.0])
        np.testing.assert_allclose(gb, [1 / 3, 1 / 3, 0.0])


def test_bincount():
    def count(x, w):
        return np.bincount(x, minlength=6), np.bincount(x, weights=w, minlength=7)

    run_both(count, np.array([0, 1, 1, 5, 3, 1]), np.arange(6.0))
    run_both(count, np.array([0, 1, 1, 5, 3, 1], np.int32), np.arange(6, dtype=np.float32))
    run_both(count, np.array([True, False, True]), np.ones(3))
    run_both(count, np.zeros(0, int), np.zeros(0))
    run_both(lambda x: np.bincount(x), np.zeros(0, int))
    run_both(lambda: np.bincount(np.array([2, 2, 9])))  # known values: NumPy's length
    refused("minlength=", lambda x: np.bincount(x), np.array([1, 2]))
    raises_both(ValueError, "no negative elements", lambda x: np.bincount(x, minlength=4),
                np.array([1, -2]))
    raises_both(ValueError, "The weights and list don't have the same length",
                lambda x, w: np.bincount(x, w, 4), np.array([1, 2]), np.ones(3))
    for backend in BACKENDS:  # NumPy would return 10 bins: refused at run time
        with pytest.raises(ValueError, match="the value 9 is not below minlength=6"):
            pb.jit(count, backend=backend)(np.array([1, 9]), np.ones(2))

    def loss(w, x):
        return np.sum(np.bincount(x, weights=w * w, minlength=6) ** 2)

    derivatives_agree(loss, np.array([0.5, -1.5, 2.0, 1.0]), np.array([1, 4, 1, 0]))


@pytest.mark.parametrize("dt", [np.float64, np.float32, np.int64])
def test_histogram(dt):
    a = np.array([0.5, 2.25, -1.0, 3.0, 3.0, 7.5, -4.0, 1.0, 2.0, 0.0]).astype(dt)
    w = np.linspace(0.5, 2.0, a.size)

    def hist(a, w):
        return (np.histogram(a, bins=4), np.histogram(a, bins=5, range=(-2, 3)),
                np.histogram(a, bins=3, weights=w), np.histogram(a, 4, density=True),
                np.histogram(a, bins=np.array([-2.0, 0.0, 0.5, 3.0])),
                np.histogram(a, bins=[-1, 1, 2, 3], weights=w, density=True))

    run_both(hist, a, w)
    run_both(lambda a: np.histogram(a, bins=3), np.full(4, 2.0).astype(dt))  # one value
    if dt == np.float64:
        raises_both(ValueError, "autodetected range of", lambda a: np.histogram(a),
                    np.array([1.0, np.inf]))
        raises_both(ValueError, "must increase monotonically",
                    lambda a, e: np.histogram(a, e), a, np.array([0.0, 2.0, 1.0]))
        run_both(lambda a, e: np.histogram(a, bins=e), a, np.array([-3.0, 0.0, 2.5, 8.0]))

    def loss(w, a):
        counts, edges = np.histogram(a, bins=3, weights=w * w)
        return np.sum(counts * np.arange(3.0)) + np.sum(edges)

    derivatives_agree(loss, w, a.astype(np.float64))


@pytest.mark.parametrize("dt", [np.float64, np.float32, np.int32])
def test_histogram_range_known_at_run_time(dt):
    a = np.array([0.5, 2.25, -1.0, 3.0, 3.0, 7.5, -4.0, 1.0, 2.0, 0.0]).astype(dt)

    def hist(a, lo, hi):
        return np.histogram(a, bins=4, range=(lo, hi)), np.histogram(a, 3, (lo, 2.0))

    run_both(hist, a, -1.5, 2.5)
    run_both(hist, a, 2.0, 2.0)  # widened by 0.5 each way
    raises_both(ValueError, "max must be larger than min", hist, a, 3.0, 1.0)
    raises_both(ValueError, "supplied range of", hist, a, -np.inf, 1.0)


def test_histogram_edges_follow_the_data_in_derivatives():
    def loss(a):
        _, edges = np.histogram(a, bins=4)
        return np.sum(edges ** 2)

    derivatives_agree(loss, np.array([0.5, 2.25, -1.0, 3.0, 1.5]))


@pytest.mark.parametrize("right", [False, True])
def test_digitize(right):
    x = np.array([-1.0, 0.0, 0.5, 1.0, 2.5, 3.0, np.nan])

    def digit(x, bins):
        return np.digitize(x, bins, right=right)

    for bins in ([0.0, 1.0, 2.5], [2.5, 1.0, 0.0], [1.0, 1.0, 2.0], [3.0], [], [1.0, 1.0]):
        bins = np.array(bins)
        run_both(digit, x, bins)
        run_both(lambda x: np.digitize(x, [0.0, 1.0, 2.5], right=right), x)
    run_both(digit, np.arange(5), np.array([1, 3]))
    raises_both(ValueError, "monotonically increasing or decreasing", digit, x,
                np.array([0.0, 2.0, 1.0]))


def test_searchsorted_and_digitize_have_zero_derivatives():
    def loss(x):
        return np.sum(np.searchsorted(np.array([0.0, 1.0]), x) * x)

    derivatives_agree(loss, np.array([0.5, 1.5, -0.5]))


# -- item 6: integer bit operations ------------------------------------------------------------


A64 = np.array([5, -5, 1, -1, 0, 7, np.iinfo(np.int64).min, np.iinfo(np.int64).max])
S64 = np.array([0, 1, 63, 64, -1, 200, 3, 62])


def test_shifts_with_every_count():
    def shifts(a, s):
        return (a << s, a >> s, np.left_shift(a, s), np.right_shift(a, s),
                np.bitwise_left_shift(a, 2), np.bitwise_right_shift(a, 70))

    run_both(shifts, A64, S64)
    a32, s32 = A64.astype(np.int32), np.array([0, 31, 32, 33, -1, 5, 3, 30], np.int32)
    run_both(shifts, a32, s32)
    run_both(shifts, a32, S64)  # int32 with int64: int64
    run_both(shifts, A64, s32)
    run_both(lambda a: (a << 3, 3 << a, a >> 1, -7 >> a), np.array([0, 1, 4, 40], np.int32))
    run_both(lambda a: (a << True, np.array([True, False]) << 2), a32)


def test_bitwise_operations():
    def bits(a, b, p, q):
        return (a & b, a | b, a ^ b, ~a, np.bitwise_and(a, 12), np.bitwise_or(a, -1),
                np.bitwise_xor(a, b), np.bitwise_not(a), np.invert(b), np.bitwise_invert(a),
                p & q, p | q, p ^ q, ~p, a & p, 5 & a, a.astype(np.int32) & b)

    run_both(bits, A64, S64, np.array([True, False, True, False] * 2),
             np.array([True, True, False, False] * 2))


def test_bit_operations_refused_like_numpy():
    refused("int8", lambda p: p << p, np.array([True, False]))
    raises_both(TypeError, "not supported for the input types",
                lambda x: np.left_shift(x, 1), np.ones(2))
    raises_both(OverflowError, "out of bounds for int32",
                lambda a: a << 2 ** 40, np.ones(2, np.int32))


def test_python_int_shifts_at_run_time():
    def shifts(a):
        k = int(a[0])
        m = int(a[1])
        return (1 << k, m >> k, -m >> (k + 60), True << k)

    run_both(shifts, np.array([3, 100]))
    run_both(shifts, np.array([0, -7]))
    raises_both(ValueError, "negative shift count", shifts, np.array([-1, 3]))
    for backend in BACKENDS:  # Python's int would grow past int64
        with pytest.raises(OverflowError, match="too large"):
            pb.jit(shifts, backend=backend)(np.array([70, 3]))
