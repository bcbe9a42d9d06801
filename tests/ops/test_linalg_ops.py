"""dot_general, cholesky, triangular_solve, lu: shape rule vs impl vs a NumPy reference."""

import itertools

import numpy as np
import pytest

from opcheck import infer, run_op
from pullback.errors import ShapeError
from pullback.ir.types import TensorType, dtype, float32, float64, int32
from pullback.ops import linalg as L
from samples import DTYPES, FLOATS, TOL, arr, assert_same, tt

# -- dot_general ----------------------------------------------------------------------


def einsum_dot(a, b, contract, batch):
    """The reference: dot_general spelled as an einsum (bools via integer counts)."""
    letters = iter("abcdefghijklmnop")
    la = [next(letters) for _ in range(a.ndim)]
    lb = [next(letters) for _ in range(b.ndim)]
    for i, j in zip(*contract, strict=True):
        lb[j] = la[i]
    for i, j in zip(*batch, strict=True):
        lb[j] = la[i]
    out = [la[i] for i in batch[0]]
    out += [c for i, c in enumerate(la) if i not in contract[0] + batch[0]]
    out += [c for j, c in enumerate(lb) if j not in contract[1] + batch[1]]
    spec = f"{''.join(la)},{''.join(lb)}->{''.join(out)}"
    if a.dtype == np.bool_:
        return np.einsum(spec, a.astype(np.int64), b.astype(np.int64)) > 0
    return np.asarray(np.einsum(spec, a, b)).astype(a.dtype)


DOTS = [  # lhs shape, rhs shape, contract, batch, result shape
    ((3, 4), (4, 5), ((1,), (0,)), ((), ()), (3, 5)),
    ((4,), (4,), ((0,), (0,)), ((), ()), ()),
    ((3,), (2,), ((), ()), ((), ()), (3, 2)),
    ((), (), ((), ()), ((), ()), ()),
    ((), (2, 3), ((), ()), ((), ()), (2, 3)),
    ((2, 3, 4), (2, 4, 5), ((2,), (1,)), ((0,), (0,)), (2, 3, 5)),
    ((3, 2, 4, 5), (5, 4, 2, 6), ((2, 3), (1, 0)), ((1,), (2,)), (2, 3, 6)),
    ((4, 3), (5, 4), ((0,), (1,)), ((), ()), (3, 5)),
    ((2, 7, 3), (3, 2), ((2,), (0,)), ((0,), (1,)), (2, 7)),
    ((3, 0), (0, 2), ((1,), (0,)), ((), ()), (3, 2)),
    ((0, 4), (4, 5), ((1,), (0,)), ((), ()), (0, 5)),
    ((2, 0, 3), (2, 3, 4), ((2,), (1,)), ((0,), (0,)), (2, 0, 4)),
]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("sa,sb,contract,batch,out", DOTS)
def test_dot_general(dt, sa, sb, contract, batch, out):
    a, b = arr(sa, dt, 1), arr(sb, dt, 2)
    assert infer(L.dot_general, tt(sa, dtype(dt)), tt(sb, dtype(dt)), contract=contract,
                 batch=batch) == [tt(out, dtype(dt))]
    (got,) = run_op(L.dot_general, a, b, contract=contract, batch=batch)
    assert_same(got, einsum_dot(a, b, contract, batch))


def test_dot_general_int_wraps():
    a = np.full((1, 2), 2**30, np.int32)
    (got,) = run_op(L.dot_general, a, a.T.copy(), contract=((1,), (0,)), batch=((), ()))
    assert_same(got, np.matmul(a, a.T))


def test_dot_general_weak_scalars_give_strong():
    (t,) = infer(L.dot_general, TensorType((), float64, True), TensorType((), float64, True),
                 contract=((), ()), batch=((), ()))
    assert t == tt((), float64)


@pytest.mark.parametrize("sa,da,sb,db,contract,batch", [
    ((3, 4), float32, (5, 6), float32, ((1,), (0,)), ((), ())),
    ((3, 4), float32, (4, 6), float64, ((1,), (0,)), ((), ())),
    ((3, 4), float32, (4, 6), float32, ((2,), (0,)), ((), ())),
    ((3, 4), float32, (4, 6), float32, ((1, 1), (0, 0)), ((), ())),
    ((3, 4), float32, (4, 6), float32, ((1,), (0, 1)), ((), ())),
    ((2, 4), float32, (3, 4), float32, ((1,), (1,)), ((0,), (0,))),
    ((2, 4), float32, (2, 4), float32, ((1,), (1,)), ((1,), (1,))),
    ((2, 4), float32, (2, 4), float32, ((1,),), ((), ())),
])
def test_dot_general_errors(sa, da, sb, db, contract, batch):
    a, b = tt(sa, da), tt(sb, db)
    with pytest.raises(ShapeError) as e:
        infer(L.dot_general, a, b, contract=contract, batch=batch)
    assert str(a) in str(e.value) and str(b) in str(e.value)


# -- cholesky -------------------------------------------------------------------------


def spd(shape, dt, seed=0):
    """A well-conditioned symmetric positive definite [..., n, n] matrix."""
    g = arr(shape, np.float64, seed)
    n = shape[-1]
    return (g @ np.swapaxes(g, -1, -2) + n * np.eye(n)).astype(dt)


SQUARE = [(0, 0), (1, 1), (4, 4), (2, 3, 3), (2, 0, 5, 5), (3, 0, 0)]


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("shape", SQUARE)
def test_cholesky(dt, shape):
    a = spd(shape, dt)
    (got,) = run_op(L.cholesky, a)
    assert_same(got, np.linalg.cholesky(a))


@pytest.mark.parametrize("dt", FLOATS)
def test_cholesky_reads_only_lower_triangle(dt):
    a = spd((5, 5), dt)
    junk = a + np.triu(arr((5, 5), dt, 3), 1)
    (got,) = run_op(L.cholesky, junk)
    assert_same(got, np.linalg.cholesky(a))


@pytest.mark.parametrize("a", [
    np.array([[1.0, 2.0], [2.0, 1.0]]),
    np.array([[-1.0]]),
    np.array([[0.0, 0.0], [0.0, 0.0]]),
    np.stack([np.eye(2), -np.eye(2)]),
])
def test_cholesky_not_positive_definite(a):
    with pytest.raises(np.linalg.LinAlgError, match="Matrix is not positive definite"):
        np.linalg.cholesky(a)
    with pytest.raises(np.linalg.LinAlgError, match="Matrix is not positive definite"):
        run_op(L.cholesky, a)


@pytest.mark.parametrize("a", [
    np.array([[np.nan]]),
    np.array([[4.0, 1.0], [1.0, np.nan]]),
    np.array([[np.nan, 1.0], [1.0, 4.0]]),
    np.array([[np.inf, 1.0], [1.0, 4.0]]),
])
def test_cholesky_nan_inf_like_numpy(a):
    (got,) = run_op(L.cholesky, a)
    np.testing.assert_array_equal(got, np.linalg.cholesky(a))


@pytest.mark.parametrize("t", [tt((3,)), tt((3, 4)), tt((2, 3, 4)), tt((3, 3), int32), tt(())])
def test_cholesky_errors(t):
    with pytest.raises(ShapeError, match=str(t).replace("[", r"\[")):
        infer(L.cholesky, t)


# -- triangular_solve -----------------------------------------------------------------

FLAGS = list(itertools.product([True, False], repeat=4))


def triangle(a, lower, unit_diagonal):
    """The matrix triangular_solve reads out of ``a``."""
    t = np.tril(a) if lower else np.triu(a)
    if unit_diagonal:
        n = a.shape[-1]
        t = t * (1 - np.eye(n, dtype=a.dtype)) + np.eye(n, dtype=a.dtype)
    return t


def solve_ref(a, b, left_side, lower, transpose_a, unit_diagonal):
    t = triangle(a.astype(np.float64), lower, unit_diagonal)
    op = np.swapaxes(t, -1, -2) if transpose_a else t
    if left_side:
        return np.linalg.solve(op, b)
    return np.swapaxes(np.linalg.solve(np.swapaxes(op, -1, -2), np.swapaxes(b, -1, -2)), -1, -2)


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("left_side,lower,transpose_a,unit_diagonal", FLAGS)
@pytest.mark.parametrize("sa,sb_left", [
    ((4, 4), (4, 3)), ((1, 1), (1, 1)), ((2, 3, 3), (2, 3, 2)), ((3, 3), (3, 0)),
    ((0, 0), (0, 2)), ((2, 0, 4, 4), (2, 0, 4, 1)),
])
def test_triangular_solve(dt, left_side, lower, transpose_a, unit_diagonal, sa, sb_left):
    n = sa[-1]
    a = (arr(sa, np.float64) + 3 * n * np.eye(n)).astype(dt)
    sb = sb_left if left_side else (*sb_left[:-2], sb_left[-1], sb_left[-2])
    b = arr(sb, dt, 5)
    flags = dict(left_side=left_side, lower=lower, transpose_a=transpose_a,
                 unit_diagonal=unit_diagonal)
    (got,) = run_op(L.triangular_solve, a, b, **flags)
    assert_same(got, solve_ref(a, b.astype(np.float64), **flags).astype(dt))


def test_triangular_solve_by_blocks():
    """150 rows: the reference solves by blocks of 64 rows (two whole, one part)."""
    n = 150
    a = arr((n, n), np.float64) / n + 3 * np.eye(n)  # small entries: no growth when unit
    for left_side, lower, transpose_a, unit_diagonal in FLAGS:
        flags = dict(left_side=left_side, lower=lower, transpose_a=transpose_a,
                     unit_diagonal=unit_diagonal)
        b = arr((n, 3) if left_side else (3, n), np.float64, 5)
        (got,) = run_op(L.triangular_solve, a, b, **flags)
        assert_same(got, solve_ref(a, b, **flags))


def test_triangular_solve_singular_gives_inf_or_nan():
    a = np.array([[0.0, 0.0], [1.0, 1.0]])
    (got,) = run_op(L.triangular_solve, a, np.ones((2, 1)), left_side=True, lower=True,
                    transpose_a=False, unit_diagonal=False)
    assert not np.isfinite(got).all()


@pytest.mark.parametrize("sa,da,sb,db,left_side", [
    ((3, 3), float32, (4, 2), float32, True),
    ((3, 3), float32, (2, 4), float32, False),
    ((3, 3), float32, (3, 2), float64, True),
    ((3, 3), float32, (3,), float32, True),
    ((2, 3, 3), float32, (3, 3, 1), float32, True),
    ((3, 4), float32, (3, 1), float32, True),
    ((3, 3), int32, (3, 1), int32, True),
])
def test_triangular_solve_errors(sa, da, sb, db, left_side):
    a, b = tt(sa, da), tt(sb, db)
    with pytest.raises(ShapeError) as e:
        infer(L.triangular_solve, a, b, left_side=left_side, lower=True, transpose_a=False,
              unit_diagonal=False)
    assert str(a) in str(e.value)
    if a.ndim == 2 and a.shape[0] == a.shape[1] and da.is_float:
        assert str(b) in str(e.value)


# -- lu -------------------------------------------------------------------------------


def lu_ref(a):
    """Textbook LU with partial pivoting of one matrix, in float64."""
    n = a.shape[0]
    u = a.astype(np.float64)
    pivots, perm = [], list(range(n))
    for k in range(n):
        p = k + int(np.argmax(np.abs(u[k:, k])))
        pivots.append(p)
        u[[k, p]] = u[[p, k]]
        perm[k], perm[p] = perm[p], perm[k]
        if u[k, k] != 0:
            u[k + 1 :, k] /= u[k, k]
        u[k + 1 :, k + 1 :] -= np.outer(u[k + 1 :, k], u[k, k + 1 :])
    return u, np.array(pivots, np.int32), np.array(perm, np.int32)


def check_lu(a, lu, pivots, perm):
    n = a.shape[-1]
    assert lu.dtype == a.dtype and lu.shape == a.shape
    assert pivots.dtype == perm.dtype == np.int32 and pivots.shape == perm.shape == a.shape[:-1]
    low = np.tril(lu, -1) + np.eye(n, dtype=a.dtype)
    up = np.triu(lu)
    assert np.all(np.abs(low) <= 1 + TOL[a.dtype])
    permuted = np.take_along_axis(a, perm[..., None].astype(np.int64), axis=-2)
    assert_same(low @ up, permuted)
    for idx in np.ndindex(a.shape[:-2]):
        ref_lu, ref_piv, ref_perm = lu_ref(a[idx])
        np.testing.assert_array_equal(pivots[idx], ref_piv)
        np.testing.assert_array_equal(perm[idx], ref_perm)
        assert_same(lu[idx], ref_lu.astype(a.dtype))


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("shape", SQUARE + [(5, 5), (3, 2, 4, 4)])
def test_lu(dt, shape):
    a = arr(shape, dt, 7)
    assert infer(L.lu, tt(shape, dtype(dt))) == [
        tt(shape, dtype(dt)), tt(shape[:-1], int32), tt(shape[:-1], int32)]
    check_lu(a, *run_op(L.lu, a))


@pytest.mark.parametrize("a", [
    np.zeros((3, 3)),
    np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0], [1.0, 0.0, 1.0]]),
    np.array([[0.0, 1.0], [0.0, 2.0]]),
    np.stack([np.diag([1.0, 0.0, 2.0]), np.ones((3, 3))]),
])
def test_lu_singular_factorizes(a):
    lu, pivots, perm = run_op(L.lu, a)
    assert np.isfinite(lu).all()
    check_lu(a, lu, pivots, perm)
    det = np.prod(np.diagonal(lu, axis1=-2, axis2=-1), axis=-1)
    np.testing.assert_allclose(det, 0.0, atol=1e-12)


def test_lu_determinant_matches_numpy():
    a = arr((4, 6, 6), np.float64, 11)
    lu, pivots, _ = run_op(L.lu, a)
    swaps = np.sum(pivots != np.arange(6), axis=-1)
    det = (-1.0) ** swaps * np.prod(np.diagonal(lu, axis1=-2, axis2=-1), axis=-1)
    np.testing.assert_allclose(det, np.linalg.det(a), rtol=1e-10)


@pytest.mark.parametrize("t", [tt((3,)), tt((3, 4)), tt((2, 4, 3)), tt((3, 3), int32), tt(())])
def test_lu_errors(t):
    with pytest.raises(ShapeError, match=str(t).replace("[", r"\[")):
        infer(L.lu, t)
