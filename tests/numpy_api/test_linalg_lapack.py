"""Issue 20 item 13: np.linalg's spectral functions (eigh, eigvalsh, svd, qr) and what is
built on them (lstsq, pinv, cond, norm ord=2/-2/'nuc', multi_dot), with batched solve,
det, slogdet and matrix_power, compiled on both backends (the C backend calls LAPACK).

Values and dtypes are NumPy's; eigenvectors and singular vectors are compared up to the
sign of each vector (LAPACK builds may choose differently).  Derivatives (``pb.grad`` of
a weighted sum on both backends, ``pb.jvp`` in a random direction) are checked against
float64 central differences, for functions that do not depend on those signs.
"""

from __future__ import annotations

import traceback
import warnings

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c.build import compiler

BACKENDS = ("interp", "c")
EPS = 1e-6
LinAlgError = np.linalg.LinAlgError
needs_cc = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")


def arr(*shape, seed=0, dt=np.float64):
    return np.random.default_rng(seed).standard_normal(shape).astype(dt)


def leaves(x):
    if isinstance(x, (list, tuple)):
        return [y for e in x for y in leaves(e)]
    return [x]


def compiled(f, backend):
    """``f`` under ``pb.jit``; on the C backend, native code (no interpreter fallback)."""
    jitted = pb.jit(f, backend=backend)

    def call(*args):
        with warnings.catch_warnings():
            warnings.simplefilter("error")  # running on the interpreter warns
            return jitted(*args)

    return call


def tolerance(dt):
    return 2e-5 if np.dtype(dt) == np.float32 else 1e-11


def agree(f, *args, aligned=None):
    """``f`` on each backend gives NumPy's leaves (dtype and shape included); ``aligned``
    maps the results to sign-normalised ones first."""
    want = f(*args)
    for backend in BACKENDS:
        got = compiled(f, backend)(*args)
        gs, ws = leaves(got), leaves(want)
        assert len(gs) == len(ws)
        for g, w in zip(gs, ws, strict=True):
            g, w = np.asarray(g), np.asarray(w)
            assert (g.dtype, g.shape) == (w.dtype, w.shape), backend
        if aligned is not None:
            gs, ws = aligned(got, want), ws
        tol = tolerance(ws[0].dtype)
        for g, w in zip(gs, ws, strict=True):
            np.testing.assert_allclose(g, w, rtol=tol, atol=tol * 10, err_msg=backend)


def column_signs(got_vectors, want_vectors):
    """+-1 per column that makes ``got``'s columns point as ``want``'s do."""
    dots = np.sum(np.asarray(got_vectors) * want_vectors, axis=-2, keepdims=True)
    return np.where(dots < 0, -1, 1).astype(want_vectors.dtype)


def eigh_aligned(got, want):
    d = column_signs(got[1], want[1])
    return [got[0], got[1] * d]


def svd_aligned(got, want):
    """U's columns turned as NumPy's; Vh's first k rows by the same signs (a singular
    pair flips together), the rest of a full Vh by their own."""
    u, s, vh = (np.asarray(x) for x in got)
    k = s.shape[-1]
    du = column_signs(u, want[0])
    dv = np.swapaxes(column_signs(np.swapaxes(vh, -1, -2), np.swapaxes(want[2], -1, -2)),
                     -1, -2)
    dv[..., :k, :] = np.swapaxes(du[..., :k], -1, -2)
    return [u * du, s, vh * dv]


def qr_aligned(got, want):
    q, r = (np.asarray(x) for x in got)
    k = min(r.shape[-2:])
    d = column_signs(q[..., :k], want[0][..., :k])
    q, r = q.copy(), r.copy()
    q[..., :k] *= d
    r[..., :k, :] *= np.swapaxes(d, -1, -2)
    return [q, r]


def derivatives(f, *args, seed=0, rtol=1e-6):
    """``pb.grad`` (both backends) and ``pb.jvp`` of ``f`` agree with central differences."""
    rng = np.random.default_rng(seed)
    args = [np.asarray(a, np.float64) for a in args]
    weights = [rng.standard_normal(np.shape(o)) for o in leaves(f(*args))]

    def scalar(*xs):
        return sum(np.sum(o * w) for o, w in zip(leaves(f(*xs)), weights, strict=True))

    for i in range(len(args)):
        def partial(x, i=i):
            return scalar(*args[:i], x, *args[i + 1:])
        fd = np.zeros(args[i].shape)
        for k in np.ndindex(fd.shape):
            e = np.zeros(args[i].shape)
            e[k] = EPS
            fd[k] = (partial(args[i] + e) - partial(args[i] - e)) / (2 * EPS)
        for backend in BACKENDS:
            got = compiled(pb.grad(partial), backend)(args[i])
            np.testing.assert_allclose(got, fd, rtol=rtol, atol=rtol, err_msg=backend)
    direction = [rng.standard_normal(a.shape) for a in args]
    _, tangent = pb.jvp(f, args, direction)
    plus = f(*(a + EPS * d for a, d in zip(args, direction, strict=True)))
    minus = f(*(a - EPS * d for a, d in zip(args, direction, strict=True)))
    for t, p, m in zip(leaves(tangent), leaves(plus), leaves(minus), strict=True):
        np.testing.assert_allclose(t, (np.asarray(p) - np.asarray(m)) / (2 * EPS),
                                   rtol=rtol, atol=rtol)


pytestmark = needs_cc

SQUARE = [(4, 4), (2, 3, 3), (1, 1), (0, 0), (2, 0, 0)]
MATRICES = [(4, 4), (5, 3), (3, 5), (2, 4, 2), (2, 2, 4), (1, 1), (0, 3), (3, 0), (2, 0, 2)]
FLOATS = [np.float64, np.float32]


# -- values ----------------------------------------------------------------------------


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("shape", SQUARE)
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh(shape, dt, uplo):
    a = arr(*shape, dt=dt)  # not symmetric: only the UPLO triangle is read
    agree(lambda x: np.linalg.eigh(x, UPLO=uplo), a, aligned=eigh_aligned)
    agree(lambda x: np.linalg.eigvalsh(x, uplo), a)


def test_eigh_of_integers_and_repeated_eigenvalues():
    agree(lambda x: np.linalg.eigvalsh(x), np.array([[2, 1], [1, 2]]))
    agree(lambda x: np.linalg.eigh(x), np.eye(3), aligned=eigh_aligned)
    agree(lambda x: np.linalg.eigvalsh(x), np.ones((4, 4)))


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("shape", MATRICES)
def test_svd(shape, dt):
    a = arr(*shape, dt=dt)
    agree(lambda x: np.linalg.svd(x), a, aligned=svd_aligned)
    agree(lambda x: np.linalg.svd(x, full_matrices=False), a, aligned=svd_aligned)
    agree(lambda x: np.linalg.svd(x, compute_uv=False), a)
    agree(lambda x: np.linalg.svdvals(x), a)


@pytest.mark.parametrize("dt", FLOATS)
@pytest.mark.parametrize("shape", MATRICES)
def test_qr(shape, dt):
    a = arr(*shape, dt=dt)
    agree(lambda x: np.linalg.qr(x), a, aligned=qr_aligned)
    agree(lambda x: np.linalg.qr(x, mode="complete"), a, aligned=qr_aligned)
    want = np.linalg.qr(a, mode="r")
    for backend in BACKENDS:
        got = compiled(lambda x: np.linalg.qr(x, mode="r"), backend)(a)
        assert got.dtype == want.dtype
        np.testing.assert_allclose(np.abs(got), np.abs(want), rtol=tolerance(dt),
                                   atol=10 * tolerance(dt))


@pytest.mark.parametrize("a", [arr(2, 4, 4), np.diag([3.0, -3.0, 1.0]), np.eye(3)],
                         ids=["random", "opposite", "identity"])
def test_hermitian_svd_and_pinv(a):
    """From eigh, as NumPy: |eigenvalues| in the reverse of their stable ascending order,
    the eigenvalues' signs moved into Vh (the lower triangle is read)."""
    agree(lambda x: np.linalg.svd(x, hermitian=True), a, aligned=svd_aligned)
    agree(lambda x: np.linalg.svd(x, compute_uv=False, hermitian=True), a)
    agree(lambda x: np.linalg.pinv(x, hermitian=True), a)


def test_results_are_numpys_named_tuples():
    def parts(x):
        w, v = np.linalg.eigh(x @ x.T)
        svd = np.linalg.svd(x)
        qr = np.linalg.qr(x)
        return w, v.shape, svd.S, svd.Vh.shape, qr.R.shape, qr.Q.shape

    x = arr(4, 3)
    got = compiled(parts, "c")(x)
    assert got[1:2] + got[3:] == ((4, 4), (3, 3), (3, 3), (4, 3))


@pytest.mark.parametrize("shape, rcond", [((5, 3), None), ((3, 5), None), ((4, 4), 1e-3),
                                          ((2, 4, 3), None), ((0, 3), None)])
def test_pinv(shape, rcond):
    agree(lambda x: np.linalg.pinv(x, rcond), arr(*shape))
    agree(lambda x: np.linalg.pinv(x), arr(*shape, dt=np.float32))


def test_pinv_drops_small_singular_values():
    a = np.outer(np.arange(1.0, 5.0), np.arange(1.0, 4.0))  # rank 1
    agree(lambda x: np.linalg.pinv(x), a)
    agree(lambda x: np.linalg.pinv(x, rtol=None), a)


@pytest.mark.parametrize("shape_a, shape_b", [((5, 3), (5,)), ((5, 3), (5, 2)),
                                              ((3, 3), (3, 2)), ((2, 4), (2,)),
                                              ((2, 4), (2, 3))])
def test_lstsq(shape_a, shape_b):
    def solve(a, b):
        return np.linalg.lstsq(a, b, rcond=None)

    agree(solve, arr(*shape_a), arr(*shape_b, seed=1))
    agree(solve, arr(*shape_a, dt=np.float32), arr(*shape_b, seed=1, dt=np.float32))


def test_lstsq_of_a_rank_deficient_wide_system():
    a = np.array([[1.0, 2.0, 3.0], [2.0, 4.0, 6.0]])
    agree(lambda a, b: np.linalg.lstsq(a, b, rcond=None), a, np.array([1.0, 2.0]))


def test_lstsq_residuals_of_a_rank_deficient_tall_system_raise():
    """NumPy's residuals are then empty, a shape known only at run time."""
    a = np.array([[1.0, 2.0], [2.0, 4.0], [3.0, 6.0]])
    for backend in BACKENDS:
        with pytest.raises(RuntimeError, match="rank-deficient"):
            compiled(lambda a, b: np.linalg.lstsq(a, b, rcond=None)[0], backend)(a, np.ones(3))


@pytest.mark.parametrize("ord", [2, -2, "nuc"])
@pytest.mark.parametrize("shape, axis", [((4, 3), None), ((2, 3, 4), (2, 1)),
                                         ((3, 2, 4), (0, 2))])
def test_norm_of_singular_values(ord, shape, axis):
    agree(lambda x: np.linalg.norm(x, ord, axis), arr(*shape))
    agree(lambda x: np.linalg.norm(x, ord, axis, keepdims=True), arr(*shape, dt=np.float32))
    agree(lambda x: np.linalg.matrix_norm(x, ord=ord), arr(*shape))


@pytest.mark.parametrize("p", [None, 2, -2, 1, -1, np.inf, "fro", "nuc"])
def test_cond(p):
    agree(lambda x: np.linalg.cond(x, p), arr(2, 3, 3))
    if p in (None, 2, -2):
        agree(lambda x: np.linalg.cond(x, p), arr(4, 3))


def test_cond_of_a_singular_matrix_is_infinite():
    singular = np.array([[1.0, 2.0], [2.0, 4.0]])
    for cond in (lambda x: np.linalg.cond(x, 1), lambda x: np.linalg.cond(x, np.inf)):
        assert cond(singular) == np.inf
        for backend in BACKENDS:
            assert compiled(cond, backend)(singular) == np.inf


@pytest.mark.parametrize("shapes", [
    [(3, 4), (4, 5)], [(10, 2), (2, 8), (8, 3)], [(4,), (4, 6), (6, 2), (2,)],
    [(2, 30), (30, 2), (2, 30), (30, 1)], [(5,), (5, 3), (3, 2)],
])
def test_multi_dot(shapes):
    arrays = [arr(*s, seed=k) for k, s in enumerate(shapes)]
    agree(lambda *xs: np.linalg.multi_dot(list(xs)), *arrays)


def test_multi_dot_of_one_array_repeated_and_mixed_dtypes():
    a = arr(3, 3)
    agree(lambda x: np.linalg.multi_dot([x, x, x.T]), a)
    agree(lambda x, y: np.linalg.multi_dot([x, y, x]), a.astype(np.float32), np.eye(3, dtype=int))


def test_batched_solve_det_slogdet_matrix_power():
    a = arr(2, 3, 3) + 3 * np.eye(3)
    agree(lambda a, b: np.linalg.solve(a, b), a[0], arr(4, 3, 2, seed=1))
    agree(lambda a, b: np.linalg.solve(a, b), a, arr(2, 3, 2, seed=1))
    agree(lambda a: np.linalg.det(a), a)
    agree(lambda a: tuple(np.linalg.slogdet(a)), a)
    agree(lambda a: np.linalg.matrix_power(a, 5), a)
    agree(lambda a: np.linalg.matrix_power(a, -2), a)


# -- derivatives -----------------------------------------------------------------------


def eigh_invariants(x, uplo="L"):
    """Eigenvalues and the outer products of each eigenvector's entries with its first:
    independent of the eigenvectors' signs."""
    w, v = np.linalg.eigh(x, UPLO=uplo)
    return w, v * v[..., :1, :]


def svd_invariants(x, full_matrices=False):
    u, s, vh = np.linalg.svd(x, full_matrices=full_matrices)
    k = s.shape[-1]
    return s, u[..., :k] * u[..., :1, :k], vh[..., :k, :] * vh[..., :k, :1]


@pytest.mark.parametrize("shape", [(4, 4), (2, 3, 3)])
@pytest.mark.parametrize("uplo", ["L", "U"])
def test_eigh_derivatives(shape, uplo):
    derivatives(lambda x: eigh_invariants(x, uplo), arr(*shape))
    derivatives(lambda x: np.linalg.eigvalsh(x, uplo), arr(*shape))


@pytest.mark.parametrize("shape", [(3, 3), (5, 3), (3, 5), (2, 4, 3)])
def test_svd_derivatives(shape):
    derivatives(svd_invariants, arr(*shape))
    derivatives(lambda x: np.linalg.svd(x, compute_uv=False), arr(*shape))
    derivatives(lambda x: np.linalg.svd(x)[1], arr(*shape))  # full_matrices, s only
    derivatives(lambda x: svd_invariants(x, True), arr(*shape))  # the first k vectors


@pytest.mark.parametrize("shape", [(3, 3), (5, 3), (3, 5), (2, 4, 3), (2, 2, 4)])
def test_qr_derivatives(shape):
    derivatives(lambda x: tuple(np.linalg.qr(x)), arr(*shape))
    derivatives(lambda x: np.linalg.qr(x, mode="r"), arr(*shape))
    derivatives(lambda x: np.linalg.qr(x, mode="complete")[1], arr(*shape))


@pytest.mark.parametrize("f, shapes", [
    (lambda a: np.linalg.pinv(a), [(5, 3)]),
    (lambda a: np.linalg.pinv(a), [(2, 3, 4)]),
    (lambda a: np.linalg.pinv(a, hermitian=True), [(3, 3)]),
    (lambda a: np.linalg.svd(a, compute_uv=False, hermitian=True), [(2, 3, 3)]),
    (lambda a, b: np.linalg.lstsq(a, b, rcond=None)[0], [(5, 3), (5, 2)]),
    (lambda a, b: np.linalg.lstsq(a, b, rcond=None)[1], [(5, 3), (5,)]),
    (lambda a: np.linalg.norm(a, 2), [(4, 3)]),
    (lambda a: np.linalg.norm(a, -2, axis=(0, 2)), [(3, 2, 4)]),
    (lambda a: np.linalg.norm(a, "nuc"), [(3, 4)]),
    (lambda a: np.linalg.cond(a), [(4, 3)]),
    (lambda a: np.linalg.cond(a, 1), [(3, 3)]),
    (lambda a, v: np.linalg.multi_dot([v, a, a.T, a]), [(3, 4), (3,)]),
    (lambda a, b: np.linalg.solve(a + 4 * np.eye(3), b), [(3, 3), (2, 3, 2)]),
    (lambda a: np.linalg.slogdet(a + 4 * np.eye(3))[1], [(2, 3, 3)]),
    (lambda a: np.linalg.det(a), [(2, 3, 3)]),
], ids=["pinv", "pinv-batch", "pinv-hermitian", "svdvals-hermitian", "lstsq",
        "lstsq-residuals", "norm2", "norm-2-axis", "nuc", "cond", "cond1", "multi_dot",
        "solve-batched", "slogdet", "det"])
def test_composition_derivatives(f, shapes):
    derivatives(f, *(arr(*s, seed=k) for k, s in enumerate(shapes)))


def test_one_matrix_used_twice():
    derivatives(lambda x: np.linalg.eigvalsh(x @ x.T + x), arr(3, 3))
    derivatives(lambda x: np.linalg.svd(x @ x, compute_uv=False), arr(3, 3))


def test_degenerate_spectra():
    """Eigenvalue derivatives stay finite where eigenvalues coincide; eigenvector
    derivatives there are inf or NaN (JAX's and PyTorch's convention), as are those of
    singular vectors of equal singular values."""
    def values(x):
        return np.sum(np.linalg.eigvalsh(x) ** 2)

    def vectors(x):
        return np.sum(np.linalg.eigh(x)[1] ** 3)

    def singular_vectors(x):
        return np.sum(np.linalg.svd(x)[0] ** 3)

    for backend in BACKENDS:
        np.testing.assert_allclose(compiled(pb.grad(values), backend)(np.eye(3)), 2 * np.eye(3))
        assert not np.all(np.isfinite(compiled(pb.grad(vectors), backend)(np.eye(3))))
        assert not np.all(np.isfinite(compiled(pb.grad(singular_vectors), backend)(np.eye(2))))
        assert np.all(np.isfinite(compiled(pb.grad(vectors), backend)(np.diag([1.0, 2, 3]))))


def test_the_completion_of_a_full_basis_has_no_derivative():
    """The extra columns of U from full_matrices=True (or Q from mode='complete') of a
    non-square matrix are an arbitrary basis: their derivatives are NaN."""
    def extra_u(x):
        return np.sum(np.linalg.svd(x)[0][:, 3:] ** 3)

    def extra_q(x):
        return np.sum(np.linalg.qr(x, mode="complete")[0][:, 3:] ** 3)

    for f in (extra_u, extra_q):
        for backend in BACKENDS:
            assert np.all(np.isnan(compiled(pb.grad(f), backend)(arr(5, 3))))
        _, tangent = pb.jvp(lambda x: np.linalg.svd(x)[0], (arr(5, 3),), (arr(5, 3, seed=1),))
        assert np.all(np.isnan(tangent[:, 3:])) and np.all(np.isfinite(tangent[:, :3]))


# -- errors ----------------------------------------------------------------------------


def svd_of(x):
    return np.linalg.svd(x)


def eigh_of(x):
    return np.linalg.eigh(x)


@pytest.mark.parametrize("backend", BACKENDS)
def test_lapack_failures_raise_numpys_error_at_the_line(backend):
    x = np.full((3, 3), np.nan)
    for f, message in ((svd_of, "SVD did not converge"),
                       (eigh_of, "Eigenvalues did not converge")):
        with pytest.raises(LinAlgError, match=message):
            f(x)
        with pytest.raises(LinAlgError, match=message) as info:
            compiled(f, backend)(x)
        report = "".join(traceback.format_exception(info.value))
        assert f"{__file__}:" in report and "np.linalg." in report, report


@pytest.mark.parametrize("f, x, exc", [
    (lambda x: np.linalg.eigh(x), np.ones((2, 3)), LinAlgError),
    (lambda x: np.linalg.eigvalsh(x), np.ones(3), LinAlgError),
    (lambda x: np.linalg.svd(x), np.ones(3), LinAlgError),
    (lambda x: np.linalg.qr(x), np.ones(3), LinAlgError),
    (lambda x: np.linalg.eigh(x, UPLO="X"), np.eye(2), ValueError),
    (lambda x: np.linalg.qr(x, mode="full!"), np.eye(2), ValueError),
    (lambda x: np.linalg.multi_dot([x]), np.eye(2), ValueError),
    (lambda x: np.linalg.lstsq(x, np.ones(3)), np.eye(2), LinAlgError),
])
def test_bad_arguments_raise_what_numpy_raises(f, x, exc):
    with pytest.raises(exc):
        f(x)
    with pytest.raises(exc):
        pb.jit(f)(x)


def test_qr_raw_is_refused_with_the_line():
    with pytest.raises(pb.UnsupportedError) as info:
        pb.jit(lambda x: np.linalg.qr(x, mode="raw"))(np.eye(2))
    assert f"{__file__}:" in str(info.value)
