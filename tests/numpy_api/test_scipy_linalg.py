"""scipy.linalg's solve_triangular, cho_solve and expm mapped (issue 20 item 14): values
equal SciPy's on both backends, dtype included; grad and jvp against central
differences; SciPy's errors."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb

sl = pytest.importorskip("scipy.linalg")

rng = np.random.default_rng(14)
N = 4
A = rng.normal(size=(N, N))
LOWER = np.tril(A) + 3 * np.eye(N)
SPD = A @ A.T + N * np.eye(N)
CHOL = np.linalg.cholesky(SPD)
B = rng.normal(size=(N, 2))


def _jit(fn, backend):
    return pb.jit(fn, backend=backend)


@pytest.mark.parametrize("backend", ["interp", "c"])
@pytest.mark.parametrize("lower", [True, False])
@pytest.mark.parametrize("trans", [0, 1, "T", 2, "C", "N"])
@pytest.mark.parametrize("unit", [False, True])
def test_solve_triangular(backend, lower, trans, unit):
    m = LOWER if lower else LOWER.T
    m = m + np.triu(np.ones((N, N)), 1) if lower else m + np.tril(np.ones((N, N)), -1)
    for b in (B, B[:, 0], B.astype(np.float32)):
        want = sl.solve_triangular(m, b, trans=trans, lower=lower, unit_diagonal=unit)
        got = _jit(lambda m, b: sl.solve_triangular(m, b, trans=trans, lower=lower,
                                                    unit_diagonal=unit), backend)(m, b)
        assert got.dtype == want.dtype and got.shape == want.shape
        np.testing.assert_allclose(got, want, rtol=1e-12)
    m32 = m.astype(np.float32)
    got = _jit(lambda m, b: sl.solve_triangular(m, b, lower=lower), backend)(m32, m32[:, :2])
    assert got.dtype == np.float32


@pytest.mark.parametrize("trans", [0, "T"])
@pytest.mark.parametrize("lower", [True, False])
def test_solve_triangular_of_a_transpose_solves_with_its_source(lower, trans):
    """``solve_triangular(m.T, ...)`` solves with ``m`` and the other triangle and trans,
    as SciPy hands LAPACK the transposed view: no transpose is staged."""
    m = LOWER if not lower else LOWER.T  # m.T is triangular on the side `lower` names
    m = m + (np.tril(np.ones((N, N)), -1) if lower else np.triu(np.ones((N, N)), 1))

    def f(m, b):
        return sl.solve_triangular(m.T, b, trans=trans, lower=lower)

    want = sl.solve_triangular(m.T, B, trans=trans, lower=lower)
    np.testing.assert_allclose(pb.jit(f, backend="c")(m, B), want, rtol=1e-12)
    grad_ir = str(pb.make_ir(pb.grad(lambda m, b: np.sum(f(m, b) ** 2)))(m, B))
    assert "= transpose " not in grad_ir and grad_ir.count("= triangular_solve ") == 2


@pytest.mark.parametrize("backend", ["interp", "c"])
@pytest.mark.parametrize("lower", [True, False])
def test_cho_solve_reads_only_its_triangle(backend, lower):
    c = CHOL if lower else CHOL.T
    junk = c + (np.triu(np.ones((N, N)), 1) if lower else np.tril(np.ones((N, N)), -1))
    for b in (B, B[:, 1]):
        want = sl.cho_solve((junk, lower), b)
        got = _jit(lambda c, b: sl.cho_solve((c, lower), b), backend)(junk, b)
        np.testing.assert_allclose(got, want, rtol=1e-12)
        np.testing.assert_allclose(got, np.linalg.solve(SPD, b), rtol=1e-10)


@pytest.mark.parametrize("backend", ["interp", "c"])
@pytest.mark.parametrize("lower", [True, False])
def test_cholesky_and_cho_factor_read_one_triangle(backend, lower):
    junk = SPD + (np.triu(np.ones((N, N)), 1) if lower else np.tril(np.ones((N, N)), -1))
    want = sl.cholesky(SPD, lower=lower)
    np.testing.assert_allclose(_jit(lambda a: sl.cholesky(a, lower=lower), backend)(junk),
                               want, rtol=1e-12, atol=1e-14)
    got = _jit(lambda a, b: sl.cho_solve(sl.cho_factor(a, lower=lower), b), backend)(junk, B)
    np.testing.assert_allclose(got, np.linalg.solve(SPD, B), rtol=1e-10)


@pytest.mark.parametrize("backend", ["interp", "c"])
def test_expm(backend):
    f = _jit(lambda a: sl.expm(a), backend)
    for scale in (0.0, 1e-3, 0.5, 3.0, 40.0):  # SciPy's own error is 2e-12 at 40
        want = sl.expm(A * scale)
        np.testing.assert_allclose(f(A * scale), want, rtol=0, atol=1e-11 * np.abs(want).max())
    batch = np.stack([A, A * 5, -A])
    for got, want in zip(f(batch), sl.expm(batch), strict=True):  # each its own scaling
        np.testing.assert_allclose(got, want, rtol=0, atol=1e-11 * np.abs(want).max())
    got = f(A.astype(np.float32))
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, sl.expm(A.astype(np.float32)), rtol=1e-5)
    diag = np.diag([1.0, -2.0, 0.5])
    np.testing.assert_allclose(f(diag), np.diag(np.exp([1.0, -2.0, 0.5])), rtol=1e-14)


def test_expm_accuracy_against_high_precision():
    mp = pytest.importorskip("mpmath")
    mp.mp.dps = 50
    f = pb.jit(lambda a: sl.expm(a), backend="c")
    for scale in (0.2, 3.0, 40.0):
        m = A * scale
        exact = np.array(mp.expm(mp.matrix(m.tolist())).tolist(), dtype=float)
        # a few units of the last place of the largest entry (the compiler's flags move
        # the rounding of the Pade evaluation and the squarings by about one)
        assert np.abs(f(m) - exact).max() <= 4e-14 * np.abs(exact).max()


def test_errors_are_scipys():
    singular = np.tril(np.ones((3, 3)))
    singular[1, 1] = 0.0
    for backend in ("interp", "c"):
        with pytest.raises(np.linalg.LinAlgError, match="diagonal 1"):
            _jit(lambda m, b: sl.solve_triangular(m, b, lower=True), backend)(
                singular, np.ones(3))
    with pytest.raises(ValueError, match="incompatible"):
        pb.jit(lambda m, b: sl.solve_triangular(m, b))(LOWER, np.ones(N + 1))
    with pytest.raises(ValueError, match="square"):
        pb.jit(lambda m, b: sl.solve_triangular(m, b))(np.ones((2, 3)), np.ones(2))


def _central(f, args, k, direction, h=1e-6):
    plus, minus = list(args), list(args)
    plus[k] = args[k] + h * direction
    minus[k] = args[k] - h * direction
    return (f(*plus) - f(*minus)) / (2 * h)


def gp_nll(theta, x, y):
    """A Gaussian process's negative log likelihood (RBF kernel): Cholesky, two solves
    and a log-determinant, the factor wider than one block of the C backend's adjoint."""
    z = x / np.exp(theta[:2])
    sq = np.sum(z * z, axis=1)
    k = np.exp(theta[2]) * np.exp(z @ z.T - 0.5 * sq[:, None] - 0.5 * sq)
    low = np.linalg.cholesky(k + np.exp(theta[3]) * np.eye(len(y)))
    alpha = sl.solve_triangular(low.T, sl.solve_triangular(low, y, lower=True), lower=False)
    return 0.5 * y @ alpha + np.sum(np.log(np.diag(low)))


GP = (np.log([0.8, 1.3, 1.1, 0.3]), rng.uniform(-2, 2, (140, 2)), rng.normal(size=140))

CASES = {
    "solve_triangular": (lambda m, b: np.sum(np.sin(sl.solve_triangular(m, b, lower=True))),
                         (LOWER, B)),
    "solve_triangular_T": (lambda m, b: np.sum(np.sin(sl.solve_triangular(
        m, b, trans="T", lower=False))), (LOWER.T, B)),
    "cho_solve": (lambda c, b: np.sum(np.sin(sl.cho_solve((c, True), b))), (CHOL, B)),
    "cholesky_upper": (lambda a: np.sum(np.sin(sl.cholesky(a))), (SPD,)),
    "expm": (lambda a: np.sum(np.sin(sl.expm(a))), (A,)),
    "expm_squared": (lambda a: np.sum(sl.expm(a) * B[:, :1]), (A * 4,)),  # 2 squarings
}


@pytest.mark.parametrize("backend", ["interp", "c"])
@pytest.mark.parametrize("name", list(CASES))
def test_grad_and_jvp_against_central_differences(name, backend):
    fn, args = CASES[name]
    grads = _jit(pb.grad(fn, argnums=tuple(range(len(args)))), backend)(*args)
    for k in range(len(args)):
        t = rng.normal(size=args[k].shape)
        if name == "cho_solve":  # a Cholesky factor: only its lower triangle is read
            t = np.tril(t)
        want = _central(fn, args, k, t)
        np.testing.assert_allclose(np.sum(grads[k] * t), want, rtol=1e-6, atol=1e-7)
        tangents = tuple(t if j == k else np.zeros_like(a) for j, a in enumerate(args))
        _, tan = pb.jvp(fn, args, tangents)
        np.testing.assert_allclose(tan, want, rtol=1e-6, atol=1e-7)


def test_gp_likelihood_gradient_on_the_c_backend():
    """Cholesky's adjoint in blocks (140 > one block of 128) inside a whole program."""
    theta, x, y = GP
    grad = pb.jit(pb.grad(gp_nll), backend="c")(theta, x, y)
    for k in range(len(theta)):
        step = np.eye(len(theta))[k]
        want = _central(lambda t: gp_nll(t, x, y), (theta,), 0, step)
        np.testing.assert_allclose(grad[k], want, rtol=1e-6, atol=1e-7)
