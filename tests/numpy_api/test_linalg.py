"""NumPy's products, einsum, diagonals, norms, np.linalg solvers and 1-d convolution,
staged and run against NumPy itself (values, dtypes, errors)."""

import numpy as np
import pytest

from harness import check, check_method, check_operator, check_raises, stage
from pullback.errors import ConcretizationError, UnsupportedError
from pullback.numpy_api import CALLABLES
from pullback.numpy_api import linalg as linalg_api

DTYPES = [np.bool_, np.int32, np.int64, np.float32, np.float64]
NUMERIC = [np.int32, np.int64, np.float32, np.float64]
LinAlgError = np.linalg.LinAlgError


def arr(shape, dt=np.float64, seed=0):
    rng = np.random.default_rng(seed)
    if np.dtype(dt) == np.bool_:
        return rng.random(shape) < 0.5
    if np.dtype(dt).kind == "i":
        return rng.integers(-3, 4, shape).astype(dt)
    return rng.standard_normal(shape).astype(dt)


def well_conditioned(shape, dt=np.float64, seed=0):
    n = shape[-1]
    return (arr(shape, np.float64, seed) + 2 * n * np.eye(n)).astype(dt)


def spd(shape, dt=np.float64, seed=0):
    g = arr(shape, np.float64, seed)
    return (g @ np.swapaxes(g, -1, -2) + shape[-1] * np.eye(shape[-1])).astype(dt)


# -- matmul and the @ operator ----------------------------------------------------------

MATMUL_SHAPES = [
    ((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)), ((2, 3, 4), (4, 5)),
    ((3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2)), ((4,), (2, 4, 5)), ((2, 3, 4), (4,)),
    ((0, 4), (4, 5)), ((3, 0), (0, 5)), ((2, 0, 3), (3, 1)), ((1, 3, 2), (4, 2, 3)),
]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES)
def test_matmul(dt, sa, sb):
    check(np.matmul, arr(sa, dt, 1), arr(sb, dt, 2))


@pytest.mark.parametrize("da,db", [(np.int32, np.float32), (np.bool_, np.int32),
                                   (np.float32, np.float64), (np.int64, np.float32)])
def test_matmul_promotes(da, db):
    check(np.matmul, arr((2, 3), da), arr((3, 2), db))
    check_operator("matmul", arr((2, 3), da), arr((3,), db))


@pytest.mark.parametrize("sa,sb", MATMUL_SHAPES[:6])
def test_matmul_operator(sa, sb):
    check_operator("matmul", arr(sa, np.float32), arr(sb, np.float32))


def test_matmul_dtype_argument():
    check(np.matmul, arr((2, 3), np.int32), arr((3, 2), np.int32), dtype=np.float64)
    check_raises(TypeError, np.matmul, arr((2, 3)), arr((3, 2)), dtype=np.int32)


@pytest.mark.parametrize("a,b", [
    (arr((2, 3)), 2.0), (3, arr((3,))), (arr((2, 3)), arr((4, 2))), (arr(3), arr(4)),
    (arr((2, 2, 3)), arr((3, 3, 2))),
])
def test_matmul_errors(a, b):
    check_raises(ValueError, np.matmul, a, b)


def test_linalg_matmul():
    check(np.linalg.matmul, arr((2, 3, 4)), arr((4, 2)))


# -- dot, inner, vdot, outer, tensordot, kron ---------------------------------------------

DOT_SHAPES = [
    ((3, 4), (4, 5)), ((4,), (4,)), ((4,), (4, 5)), ((3, 4), (4,)), ((2, 3, 4), (5, 4, 2)),
    ((2, 3, 4), (4,)), ((), (3, 2)), ((3, 2), ()), ((), ()), ((0,), (0,)), ((2, 0), (0, 3)),
]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("sa,sb", DOT_SHAPES)
def test_dot(dt, sa, sb):
    check(np.dot, arr(sa, dt, 1), arr(sb, dt, 2))


@pytest.mark.parametrize("dt", NUMERIC)
@pytest.mark.parametrize("scalar", [2.0, 3, True])
def test_products_take_python_scalars_as_arrays(dt, scalar):
    x = arr((2, 3), dt)
    for fn in (np.dot, np.inner, np.outer, np.kron):
        check(fn, x, scalar)
        check(fn, scalar, x)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("sa,sb", [((3, 4), (2, 4)), ((4,), (4,)), ((2, 3, 4), (4,)),
                                   ((), (2, 3)), ((2, 0), (3, 0))])
def test_inner(dt, sa, sb):
    check(np.inner, arr(sa, dt, 1), arr(sb, dt, 2))


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 3)), ((5,), (5,)), ((), ()), ((0,), (0,))])
def test_vdot(dt, sa, sb):
    check(np.vdot, arr(sa, dt, 1), arr(sb, dt, 2))


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("sa,sb", [((3,), (4,)), ((2, 2), (3,)), ((), (2,)), ((0,), (3,))])
def test_outer(dt, sa, sb):
    check(np.outer, arr(sa, dt, 1), arr(sb, dt, 2))


@pytest.mark.parametrize("sa,sb", [((3,), (4,)), ((0,), (2,))])
def test_linalg_outer(sa, sb):
    check(np.linalg.outer, arr(sa), arr(sb))


@pytest.mark.parametrize("a,b", [(arr((2, 2)), arr(3)), (arr(3), 2.0)])
def test_linalg_outer_needs_vectors(a, b):
    check_raises(ValueError, np.linalg.outer, a, b)


@pytest.mark.parametrize("fn,a,b", [
    (np.dot, arr((2, 3)), arr(4)), (np.dot, arr((2, 3)), arr((4, 2))),
    (np.inner, arr((2, 3)), arr((2, 4))), (np.vdot, arr(3), arr(2)),
])
def test_product_errors(fn, a, b):
    check_raises(ValueError, fn, a, b)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("sa,sb,axes", [
    ((2, 3, 4), (3, 4, 5), 2), ((2, 3), (3, 4), 1), ((2, 3), (4,), 0),
    ((2, 3, 4), (4, 3, 5), ([1, 2], [1, 0])), ((2, 3, 4), (4, 5), (-1, 0)),
    ((3, 4), (4, 3), ((0, 1), (1, 0))), ((2, 0), (0, 3), 1), ((), (2,), 0),
])
def test_tensordot(dt, sa, sb, axes):
    check(np.tensordot, arr(sa, dt, 1), arr(sb, dt, 2), axes=axes)


@pytest.mark.parametrize("sa,sb,axes,exc", [
    ((2, 3), (4, 5), 1, ValueError), ((2, 3), (3, 4), ([0], [0]), ValueError),
    ((2, 3), (3, 4), ([1, 0], [0]), ValueError), ((2, 3), (3, 4), 3, IndexError),
    ((2, 3), (3, 4), ([2], [0]), IndexError),
])
def test_tensordot_errors(sa, sb, axes, exc):
    check_raises(exc, np.tensordot, arr(sa), arr(sb), axes=axes)


def test_linalg_tensordot():
    check(np.linalg.tensordot, arr((2, 3, 4)), arr((3, 4, 5)), axes=2)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("sa,sb", [
    ((2, 3), (4, 5)), ((3,), (2, 2)), ((2, 2), (3,)), ((2, 1, 3), (3, 2)), ((), (2, 3)),
    ((2,), ()), ((0, 2), (3, 1)), ((2, 3), (2, 3)),
])
def test_kron(dt, sa, sb):
    check(np.kron, arr(sa, dt, 1), arr(sb, dt, 2))


# -- vecdot ---------------------------------------------------------------------------


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("sa,sb,axis", [
    ((3,), (3,), -1), ((2, 3), (3,), -1), ((4, 1, 3), (2, 3), -1), ((3, 2), (3, 2), 0),
    ((0, 3), (3,), -1), ((2, 0), (2, 0), 1),
])
def test_vecdot(dt, sa, sb, axis):
    check(np.vecdot, arr(sa, dt, 1), arr(sb, dt, 2), axis=axis)
    check(np.linalg.vecdot, arr(sa, dt, 1), arr(sb, dt, 2), axis=axis)


@pytest.mark.parametrize("a,b", [(arr(3), arr(2)), (arr(3), 2.0), (arr((2, 3)), arr((3, 3)))])
def test_vecdot_errors(a, b):
    check_raises(ValueError, np.vecdot, a, b)


# -- einsum ---------------------------------------------------------------------------

EINSUMS = [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("ij,jk", [(3, 4), (4, 5)]),
    ("ij->ji", [(3, 4)]),
    ("ij", [(3, 4)]),
    ("ji", [(3, 4)]),
    ("ii", [(3, 3)]),
    ("ii->i", [(3, 3)]),
    ("iij->ji", [(3, 3, 2)]),
    ("iji->ij", [(2, 3, 2)]),
    ("i,i", [(4,), (4,)]),
    ("i,i->i", [(4,), (4,)]),
    ("i,j->ij", [(3,), (4,)]),
    ("i,j", [(3,), (4,)]),
    ("ij->", [(3, 4)]),
    ("ij->j", [(3, 4)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bij,bjk->bki", [(2, 3, 4), (2, 4, 5)]),
    ("ij,jk,kl->il", [(2, 3), (3, 4), (4, 5)]),
    ("ij,jk,kl", [(2, 3), (3, 4), (4, 2)]),
    ("ab,cd,bc->ad", [(2, 3), (4, 5), (3, 4)]),
    ("i,i,i->", [(3,), (3,), (3,)]),
    ("...ij,...jk", [(2, 2, 3), (5, 1, 3, 2)]),
    ("...ij,...jk->...ik", [(2, 3, 4), (4, 5)]),
    ("ij...,j->i...", [(2, 3, 4), (3,)]),
    ("...i", [(2, 3)]),
    ("i...", [(2, 3)]),
    ("...", [(2, 3)]),
    ("...,...", [(3,), (2, 1)]),
    ("i...i", [(3, 2, 3)]),
    ("i,i", [(3,), (1,)]),
    ("ij,ij->", [(3, 1), (1, 4)]),
    ("ij,ij->ij", [(3, 1), (1, 4)]),
    ("Ba", [(2, 3)]),
    ("aB", [(2, 3)]),
    ("", [()]),
    (",", [(), ()]),
    (",i->i", [(), (3,)]),
    ("ij,kl->ijkl", [(2, 1), (1, 2)]),
    ("i->", [(0,)]),
    ("ij,jk->ik", [(2, 0), (0, 3)]),
    (" i j , j k -> i k ", [(2, 3), (3, 2)]),
    ("ijk,kji->", [(2, 3, 4), (4, 3, 2)]),
    ("ij,jk,ki", [(2, 3), (3, 4), (4, 2)]),
]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("subscripts,shapes", EINSUMS)
def test_einsum(dt, subscripts, shapes):
    check(np.einsum, subscripts, *(arr(s, dt, i) for i, s in enumerate(shapes)))


@pytest.mark.parametrize("da,db", [(np.int32, np.float32), (np.bool_, np.int64)])
def test_einsum_promotes(da, db):
    check(np.einsum, "ij,jk", arr((2, 3), da), arr((3, 2), db))


def test_einsum_dtype_argument():
    check(np.einsum, "ij,jk", arr((2, 3), np.int32), arr((3, 2), np.int32), dtype=np.float64)
    check_raises(TypeError, np.einsum, "i,i", arr(2), arr(2), dtype=np.float32)


@pytest.mark.parametrize("subscripts,shapes", [
    ("...i->i", [(2, 3)]), ("ii", [(3, 4)]), ("ii->i", [(2, 3)]), ("ij,jk", [(2, 3), (4, 5)]),
    ("i->ii", [(3,)]), ("i->j", [(3,)]), ("ij->i", [(3,)]), ("i,j", [(3,)]),
    ("ab", [(2, 3), (2,)]), ("i.j", [(2, 2)]), ("i..", [(2, 2)]), ("i1", [(2, 2)]),
    ("i", [(2, 2)]), ("i->i->i", [(2,)]), ("i,i", [(2,), (3,)]),
])
def test_einsum_errors(subscripts, shapes):
    check_raises(ValueError, np.einsum, subscripts, *(arr(s) for s in shapes))


def test_einsum_sublist_form():
    check(np.einsum, arr((2, 3)), [0, 1])
    check(np.einsum, arr((2, 3)), [0, 1], arr((3, 4)), [1, 30], [30, 0])
    check_raises(ValueError, np.einsum, arr((2, 3)), [0, 52])


# -- diagonals, trace, triangles --------------------------------------------------------


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,offset,axis1,axis2", [
    ((3, 3), 0, 0, 1), ((3, 4), 1, 0, 1), ((3, 4), -2, 0, 1), ((4, 3), 2, 1, 0),
    ((3, 4), 5, 0, 1), ((3, 4), -4, 0, 1), ((2, 3, 4), 1, 2, 0), ((2, 3, 4), -1, -1, -2),
    ((0, 3), 0, 0, 1), ((2, 3, 0), 0, 1, 2),
])
def test_diagonal_and_trace(dt, shape, offset, axis1, axis2):
    a = arr(shape, dt)
    check(np.diagonal, a, offset, axis1, axis2)
    check(np.trace, a, offset, axis1, axis2)
    check_method("diagonal", a, offset, axis1, axis2)
    check_method("trace", a, offset, axis1, axis2)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("acc", [np.int32, np.float32, np.float64, np.bool_])
def test_trace_dtype(dt, acc):
    check(np.trace, arr((3, 3), dt), dtype=acc)


@pytest.mark.parametrize("shape,offset", [((2, 3), 0), ((3, 3), 1), ((2, 3, 3), -1)])
def test_linalg_diagonal_and_trace(shape, offset):
    check(np.linalg.diagonal, arr(shape), offset=offset)
    check(np.linalg.trace, arr(shape), offset=offset)


@pytest.mark.parametrize("fn", [np.diagonal, np.trace])
@pytest.mark.parametrize("a,axes", [(arr(3), (0, 1)), (arr((2, 2)), (0, 0)),
                                    (arr((2, 2)), (0, 2)), (2.0, (0, 1))])
def test_diagonal_errors(fn, a, axes):
    check_raises(ValueError, fn, a, 0, *axes)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,k", [
    ((3,), 0), ((3,), 2), ((3,), -1), ((1,), 0), ((0,), 0), ((0,), 2), ((0,), -2),
    ((3, 3), 0), ((3, 4), 1), ((4, 3), -2), ((3, 4), 7), ((0, 2), 0),
])
def test_diag(dt, shape, k):
    check(np.diag, arr(shape, dt), k)


@pytest.mark.parametrize("v", [2.0, arr(()), arr((2, 2, 2))])
def test_diag_errors(v):
    check_raises(ValueError, np.diag, v)


@pytest.mark.parametrize("fn", [np.triu, np.tril])
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape,k", [
    ((3, 3), 0), ((3, 4), 1), ((4, 3), -1), ((3, 4), 5), ((3, 4), -5), ((2, 3, 4), 0),
    ((4,), 1), ((0, 3), 0), ((2, 0, 0), 0),
])
def test_triangles(fn, dt, shape, k):
    check(fn, arr(shape, dt), k)


@pytest.mark.parametrize("fn", [np.triu, np.tril])
@pytest.mark.parametrize("k", [0, 2, -1])
def test_triangles_dynamic_k(fn, k):
    check(fn, arr((3, 4)), k, dyn=(1,))


@pytest.mark.parametrize("fn", [np.triu, np.tril])
def test_triangles_need_an_axis(fn):
    check_raises(TypeError, fn, arr(()))


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", [(2, 3), (3, 2, 4), (0, 3)])
def test_matrix_transpose(dt, shape):
    check(np.linalg.matrix_transpose, arr(shape, dt))
    check(np.matrix_transpose, arr(shape, dt))


def test_matrix_transpose_needs_two_axes():
    check_raises(ValueError, np.linalg.matrix_transpose, arr(3))


# -- norms ----------------------------------------------------------------------------

VECTOR_ORDS = [None, 1, 2, np.inf, -np.inf, 0, 3, 0.5, -1, 2.0]
MATRIX_ORDS = [None, "fro", "f", 1, -1, np.inf, -np.inf]


@pytest.mark.filterwarnings("ignore:divide by zero:RuntimeWarning")  # NumPy's, for ord < 0
@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("ord", VECTOR_ORDS)
def test_vector_norms(dt, ord):
    check(np.linalg.norm, arr(5, dt) + (0 if dt == np.bool_ else 1), ord=ord)
    check(np.linalg.norm, arr((2, 3), dt), ord=ord, axis=1)
    check(np.linalg.norm, arr((2, 3), dt), ord=ord, axis=-2, keepdims=True)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("ord", MATRIX_ORDS)
def test_matrix_norms(dt, ord):
    check(np.linalg.norm, arr((3, 4), dt), ord=ord)
    check(np.linalg.norm, arr((2, 3, 4), dt), ord=ord, axis=(2, 0))
    check(np.linalg.norm, arr((2, 3, 4), dt), ord=ord, axis=(-2, -1), keepdims=True)


@pytest.mark.parametrize("shape,axis,keepdims", [
    ((), None, False), ((4,), None, True), ((2, 3), None, False), ((2, 3, 4), None, True),
    ((2, 0), None, False), ((0,), 0, False), ((2, 3), 0, True), ((2, 3), (1, 0), False),
])
def test_norm_default(shape, axis, keepdims):
    check(np.linalg.norm, arr(shape, np.float32), axis=axis, keepdims=keepdims)


@pytest.mark.parametrize("shape,ord,axis", [
    ((0, 2), np.inf, 0), ((0, 2), np.inf, 1), ((0, 2), np.inf, None), ((0, 2), 1, None),
    ((2, 0), 1, None), ((0,), 0, None), ((0,), 3, None),
])
def test_norm_of_empty(shape, ord, axis):
    check(np.linalg.norm, arr(shape), ord=ord, axis=axis)


def test_norm_python_scalar():
    check(np.linalg.norm, -3.0)


@pytest.mark.parametrize("x,kw", [
    (arr(3), dict(ord="fro")), (arr((3, 3)), dict(ord=3)), (arr((2, 2, 2)), dict(ord=1)),
    (arr((2, 2)), dict(axis=(0, 0))), (arr((2, 2, 2)), dict(axis=(0, 1, 2))),
    (arr((0, 2)), dict(ord=-np.inf, axis=0)), (arr((2, 0)), dict(ord=-1)),
    (arr(()), dict(ord=1)),
])
def test_norm_errors(x, kw):
    check_raises(ValueError, np.linalg.norm, x, **kw)


@pytest.mark.parametrize("ord", [2, -2, "nuc"])
@pytest.mark.parametrize("shape, axis", [((3, 3), None), ((4, 2), None), ((2, 3, 4), (2, 0))])
def test_matrix_norms_of_singular_values(ord, shape, axis):
    check(np.linalg.norm, arr(shape), ord=ord, axis=axis)


def test_norm_ord_must_be_static():
    with pytest.raises(ConcretizationError):
        check(np.linalg.norm, arr(3), 2.0)


@pytest.mark.parametrize("shape,axis,ord,keepdims", [
    ((3,), None, 2, False), ((2, 3), None, 1, True), ((2, 3, 4), (0, 2), np.inf, False),
    ((2, 3), 1, 3, True), ((), None, 2, False),
])
def test_vector_norm(shape, axis, ord, keepdims):
    check(np.linalg.vector_norm, arr(shape), axis=axis, ord=ord, keepdims=keepdims)


@pytest.mark.parametrize("ord,keepdims", [("fro", False), (1, True), (-np.inf, False)])
def test_matrix_norm(ord, keepdims):
    check(np.linalg.matrix_norm, arr((2, 3, 4), np.int32), ord=ord, keepdims=keepdims)


# -- det, slogdet, inv, solve, cholesky, matrix_power ---------------------------------------

SQUARES = [(1, 1), (3, 3), (2, 4, 4), (2, 1, 2, 2), (0, 0), (2, 0, 0), (0, 3, 3)]


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("shape", SQUARES)
def test_det_slogdet(dt, shape):
    a = arr(shape, dt)
    check(np.linalg.det, a)
    check(np.linalg.slogdet, a)


@pytest.mark.parametrize("a", [np.zeros((3, 3)), np.ones((2, 2), np.int32),
                               np.array([[1.0, 2.0], [2.0, 4.0]]),
                               np.array([[[0.0, 1.0], [1.0, 0.0]], [[0.0, 0.0], [1.0, 1.0]]])])
def test_det_slogdet_singular_and_permuted(a):
    check(np.linalg.det, a)
    check(np.linalg.slogdet, a)


@pytest.mark.parametrize("dt", NUMERIC)
@pytest.mark.parametrize("shape", SQUARES)
def test_inv(dt, shape):
    check(np.linalg.inv, well_conditioned(shape, dt) if shape[-1] else arr(shape, dt))


@pytest.mark.parametrize("a", [np.zeros((2, 2)), np.array([[1.0, 2.0], [2.0, 4.0]]),
                               np.stack([np.eye(2), np.zeros((2, 2))])])
def test_inv_singular_raises_at_run_time(a):
    check_raises(LinAlgError, np.linalg.inv, a)
    check_raises(LinAlgError, np.linalg.solve, a, np.ones(a.shape[:-1]))


@pytest.mark.parametrize("dt", [np.int32, np.float32, np.float64])
@pytest.mark.parametrize("sa,sb", [
    ((3, 3), (3,)), ((3, 3), (3, 2)), ((2, 3, 3), (3,)), ((2, 3, 3), (2, 3, 1)),
    ((3, 3), (2, 3, 2)), ((2, 1, 3, 3), (4, 3, 2)), ((1, 1), (1,)), ((0, 0), (0,)),
    ((3, 3), (3, 0)), ((0, 2, 2), (2, 2)),
])
def test_solve(dt, sa, sb):
    check(np.linalg.solve, well_conditioned(sa, dt) if sa[-1] else arr(sa, dt), arr(sb, dt, 3))


@pytest.mark.parametrize("da,db", [(np.float32, np.int32), (np.int32, np.float32),
                                   (np.bool_, np.float32), (np.float32, np.float32)])
def test_solve_dtypes(da, db):
    a = np.triu(np.ones((3, 3))).astype(da)
    check(np.linalg.solve, a, arr((3, 2), db))


@pytest.mark.parametrize("a,b", [
    (arr((3, 3)), arr(2)), (arr((3, 3)), arr((2, 3))), (arr((3, 3)), 2.0),
    (arr((2, 3, 3)), arr((4, 3, 1))),
])
def test_solve_shape_errors(a, b):
    check_raises(ValueError, np.linalg.solve, a, b)


@pytest.mark.parametrize("fn", [np.linalg.det, np.linalg.slogdet, np.linalg.inv,
                                np.linalg.cholesky])
@pytest.mark.parametrize("a", [arr(3), arr((2, 3)), arr((2, 3, 2)), 2.0])
def test_square_matrix_errors(fn, a):
    check_raises(LinAlgError, fn, a)


@pytest.mark.parametrize("dt", [np.float32, np.float64])
@pytest.mark.parametrize("shape", SQUARES)
@pytest.mark.parametrize("upper", [False, True])
def test_cholesky(dt, shape, upper):
    check(np.linalg.cholesky, spd(shape, dt), upper=upper)


def test_cholesky_of_ints():
    check(np.linalg.cholesky, np.array([[4, 2], [2, 3]], np.int32))


@pytest.mark.parametrize("a", [np.array([[1.0, 2.0], [2.0, 1.0]]), -np.eye(3)])
def test_cholesky_not_positive_definite_raises_at_run_time(a):
    check_raises(LinAlgError, np.linalg.cholesky, a)


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("n", [0, 1, 2, 3, 4, 5, 7, 8])
@pytest.mark.parametrize("shape", [(3, 3), (2, 2, 2), (0, 0)])
def test_matrix_power(dt, n, shape):
    check(np.linalg.matrix_power, arr(shape, dt), n)


@pytest.mark.parametrize("dt", NUMERIC)
@pytest.mark.parametrize("n", [-1, -2, -5])
def test_matrix_power_negative(dt, n):
    check(np.linalg.matrix_power, well_conditioned((2, 3, 3), dt), n)


@pytest.mark.parametrize("a,n,exc", [
    (arr((3, 3)), 1.5, TypeError), (arr((2, 3)), 2, LinAlgError), (arr(3), 2, LinAlgError),
    (np.zeros((2, 2)), -1, LinAlgError),
])
def test_matrix_power_errors(a, n, exc):
    check_raises(exc, np.linalg.matrix_power, a, n)


# -- convolve, correlate, cross ------------------------------------------------------------

LENGTHS = [(5, 3), (3, 5), (4, 4), (1, 3), (3, 1), (1, 1), (6, 2), (2, 7)]


@pytest.mark.parametrize("fn", [np.convolve, np.correlate])
@pytest.mark.parametrize("mode", ["full", "same", "valid"])
@pytest.mark.parametrize("n,m", LENGTHS)
@pytest.mark.parametrize("dt", DTYPES)
def test_convolve_correlate(fn, mode, n, m, dt):
    check(fn, arr(n, dt, 1), arr(m, dt, 2), mode)


@pytest.mark.parametrize("fn", [np.convolve, np.correlate])
def test_convolve_correlate_defaults_and_promotion(fn):
    check(fn, arr(5, np.int32), arr(3, np.float32))
    check(fn, arr(5, np.float32), arr(2, np.int64))


def test_convolve_takes_scalars():
    check(np.convolve, 2.0, arr(3))
    check(np.convolve, arr(3, np.float32), 2)


@pytest.mark.parametrize("fn,a,v", [
    (np.convolve, arr(0), arr(3)), (np.convolve, arr(3), arr(0)),
    (np.correlate, arr(0), arr(3)), (np.correlate, arr(3), arr(0)),
    (np.correlate, arr((2, 2)), arr(2)), (np.convolve, arr(2), arr((2, 2))),
    (np.correlate, 2.0, arr(2)),
])
def test_convolve_correlate_errors(fn, a, v):
    check_raises(ValueError, fn, a, v)


def test_convolve_bad_mode():
    check_raises(ValueError, np.convolve, arr(3), arr(2), "middle")


@pytest.mark.parametrize("dt", NUMERIC)
@pytest.mark.parametrize("sa,sb,kw", [
    ((3,), (3,), {}), ((4, 3), (3,), {}), ((2, 1, 3), (4, 3), {}),
    ((3, 4), (3, 4), dict(axis=0)), ((3, 2), (2, 3), dict(axisa=0, axisc=0)),
    ((2, 3), (3, 2), dict(axisb=0, axisc=-2)), ((0, 3), (3,), {}),
])
def test_cross(dt, sa, sb, kw):
    check(np.cross, arr(sa, dt, 1), arr(sb, dt, 2), **kw)


def test_linalg_cross():
    check(np.linalg.cross, arr((4, 3)), arr((4, 3)))
    check(np.linalg.cross, arr((3, 4)), arr((3, 4)), axis=0)


@pytest.mark.parametrize("a,b,kw,exc", [
    (arr(4), arr(3), {}, ValueError), (arr(3, np.bool_), arr(3, np.bool_), {}, TypeError),
    (2.0, arr(3), {}, ValueError), (arr((2, 3)), arr((4, 3)), {}, ValueError),
    (arr(3), arr(3), dict(axisc=1), np.exceptions.AxisError),
    (arr((2, 3)), arr(3), dict(axisa=2), np.exceptions.AxisError),
])
def test_cross_errors(a, b, kw, exc):
    check_raises(exc, np.cross, a, b, **kw)


@pytest.mark.filterwarnings("ignore::DeprecationWarning")
def test_cross_of_2_vectors_is_refused():
    """NumPy 2.0-2.4 compute them with a deprecation warning: pullback refuses them;
    a NumPy that raises ValueError for them (2.5) gets the same ValueError."""
    try:
        np.cross(arr(2), arr(3))
    except ValueError:
        check_raises(ValueError, np.cross, arr(2), arr(3))
    else:
        with pytest.raises(UnsupportedError):
            check(np.cross, arr(2), arr(3))


def test_cross_of_2_vectors_follows_a_numpy_that_raises(monkeypatch):
    message = "Both input arrays must be (arrays of) 3-dimensional vectors"
    monkeypatch.setattr(linalg_api, "_numpy_refuses_2_vectors", lambda: message)
    with pytest.raises(ValueError, match="3-dimensional vectors"):
        stage(CALLABLES[np.cross], (arr(2), arr(3)), {})


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("n,cols", [(4, None), (3, 1), (3, 0), (3, 5), (0, 2), (0, None)])
@pytest.mark.parametrize("increasing", [False, True])
def test_vander(dt, n, cols, increasing):
    check(np.vander, arr(n, dt), cols, increasing)


@pytest.mark.parametrize("x,cols", [(arr((2, 2)), None), (2.0, None), (arr(2), -1)])
def test_vander_errors(x, cols):
    check_raises(ValueError, np.vander, x, cols)


# -- methods ----------------------------------------------------------------------------


@pytest.mark.parametrize("dt", DTYPES)
@pytest.mark.parametrize("sa,sb", [((3, 4), (4, 2)), ((3,), (3,)), ((2, 3), ())])
def test_dot_method(dt, sa, sb):
    check_method("dot", arr(sa, dt, 1), arr(sb, dt, 2))
