"""Wrong numbers and refusals of issue 20: derivatives of results that do not depend on
the input (a compile-time constant's tangent, Jacobian and gradient are zeros, never
the constant itself), Python floats handed to a transform inside staged code (run-time
values, so differentiable), fmod's derivative where its remainder is 0, second
derivatives of compositions whose max cancels (a user's logsumexp and softmax) at ties,
and complex numbers refused with a CompileError that says so."""

from __future__ import annotations

import math

import numpy as np
import pytest

import pullback as pb

BACKENDS = ("interp", "c")
X = np.array([0.5, -1.0, 2.0])
T = np.array([1.0, 0.25, -2.0])
C = np.array([1.0, 2.0, 3.0])


def close(got, want, tol: float = 1e-9) -> None:
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=tol, atol=tol)


def same(got, want) -> None:
    """Equal values of one type (a Python float stays a Python float)."""
    assert type(got) is type(want), (got, want)
    np.testing.assert_array_equal(got, want)
    if isinstance(want, np.ndarray):
        assert got.dtype == want.dtype


# -- item 1: results that do not depend on the input --------------------------------------

#: f, its value at X, the tangent of that value (zeros: f is constant).
CONSTANTS = {
    "python float": (lambda x: 1.0, 1.0, 0.0),
    "list of floats": (lambda x: [1.0, 2.5], [1.0, 2.5], [0.0, 0.0]),
    "shape times a float": (lambda x: x.shape[0] * 1.5, 4.5, 0.0),
    "global array": (lambda x: C, C, np.zeros(3)),
    "array made inside": (lambda x: np.arange(3.0) * 2, np.arange(3.0) * 2, np.zeros(3)),
}


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", CONSTANTS)
def test_jvp_of_a_constant_is_zero(name, backend):
    f, value, tangent = CONSTANTS[name]
    out, tout = pb.jit(lambda p, t: pb.jvp(f, p, t), backend=backend)((X,), (T,))
    close(out, value)
    close(tout, tangent)
    assert type(tout) is type(tangent)


def test_jvp_of_a_constant_from_plain_python():
    out, tout = pb.jvp(lambda x: 1.0, (X,), (T,))
    same(out, 1.0)
    same(tout, 0.0)
    out, tout = pb.jvp(lambda x: (x * 2.0, 3.0, C), (X,), (T,))
    close(out[0], 2 * X)
    close(tout[0], 2 * T)
    same(tout[1], 0.0)
    same(tout[2], np.zeros(3))


@pytest.mark.parametrize("backend", BACKENDS)
def test_jacobians_of_constant_results_are_zeros(backend):
    for jac in (pb.jacfwd, pb.jacrev):
        same(pb.jit(jac(lambda x: 1.0), backend=backend)(X), np.zeros(3))
        same(pb.jit(jac(lambda x: C), backend=backend)(X), np.zeros((3, 3)))
        eye, zero, integer = pb.jit(jac(lambda x: (x, 2.0, 7)), backend=backend)(X)
        same(eye, np.eye(3))
        same(zero, np.zeros(3))
        assert integer is None  # an integer result has no derivative, as a run-time one
    same(pb.jit(pb.hessian(lambda x: 1.0), backend=backend)(X), np.zeros((3, 3)))
    same(pb.jit(pb.hessian(lambda x: np.sum(C)), backend=backend)(X), np.zeros((3, 3)))
    same(pb.jacrev(lambda x: np.float32(1.0))(X.astype(np.float32)),
         np.zeros(3, np.float32))


# -- item 3: a constant float loss, Python floats inside staged code ------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradient_of_a_constant_float(backend):
    same(pb.jit(pb.grad(lambda x: 1.0), backend=backend)(X), np.zeros(3))
    same(pb.jit(pb.grad(lambda x: 1.0), backend=backend)(2.0), 0.0)
    value, grads = pb.jit(pb.value_and_grad(lambda x, y: 1.0, argnums=(0, 1)),
                          backend=backend)(X, 2.0)
    same(value, 1.0)
    same(grads[0], np.zeros(3))
    same(grads[1], 0.0)
    grads, aux = pb.grad(lambda x: (2.5, x), has_aux=True)(X)
    same(grads, np.zeros(3))
    close(aux, X)


def test_gradient_of_a_constant_float_through_a_loop():
    """A loop (kept for the aux result) makes a scalar gradient forward mode (one lane),
    which a constant loss does not seed."""

    def f(x):
        for _ in range(3):
            x = np.sin(x)
        return 1.0, x

    grad, aux = pb.grad(f, has_aux=True)(0.5)
    same(grad, 0.0)
    same(aux, np.sin(np.sin(np.sin(0.5))))


def test_vjp_of_a_constant_float():
    out, vjp_fn = pb.vjp(lambda x: 1.0, X)
    same(out, 1.0)
    (ct,) = vjp_fn(1.0)
    same(ct, np.zeros(3))


def test_an_integer_loss_is_still_refused():
    with pytest.raises(pb.CompileError, match="float scalar"):
        pb.grad(lambda x: 1)(X)


@pytest.mark.parametrize("backend", BACKENDS)
def test_python_floats_given_to_transforms_in_staged_code(backend):
    def f(x):
        return (pb.grad(lambda y: x * y)(2.0),
                pb.grad(lambda p: p[0] * p[1] * x)((2.0, 3.0)),
                pb.jvp(lambda y: y * y * x, (2.0,), (1.0,)),
                pb.hessian(lambda y: y ** 3 * x)(2.0),
                pb.jacfwd(lambda y: np.sin(y))(np.float64(0.5)),
                pb.vjp(lambda y: y * x, 2.0)[1](1.0))

    g, (gp0, gp1), (v, t), h, j, (ct,) = pb.jit(f, backend=backend)(3.0)
    same(g, 3.0)
    same((gp0, gp1), (9.0, 6.0))
    same((v, t), (12.0, 12.0))
    close(h, 36.0)
    close(j, math.cos(0.5))
    same(ct, 3.0)


def test_integer_arguments_inside_staged_code_are_still_compile_time():
    @pb.jit
    def f(x):
        return pb.grad(lambda n: x * n)(2)

    with pytest.raises(pb.CompileError, match="compile-time value"):
        f(1.0)


# -- item 2: second derivatives at ties ------------------------------------------------------


def central_hessian(f, x: np.ndarray, h: float = 1e-4) -> np.ndarray:
    """Central differences of the function itself (no derivative rule involved)."""
    n = x.size
    out = np.zeros((n, n))
    for i in range(n):
        for j in range(n):
            ei, ej = np.eye(n)[i] * h, np.eye(n)[j] * h
            out[i, j] = (f(x + ei + ej) - f(x + ei - ej) - f(x - ei + ej)
                         + f(x - ei - ej)) / (4 * h * h)
    return out


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("x", [0.0, 3.0, -3.0, 6.0, -0.0])
def test_fmod_where_the_remainder_is_zero(x, backend):
    """fmod(x, y) is x - trunc(x / y) y: slope 1 in x and -trunc(x / y) in y wherever it
    is continuous, x == 0 included (its abs of the remainder gave 0 there)."""
    g = pb.jit(pb.grad(lambda a, b: np.fmod(a, b), argnums=(0, 1)), backend=backend)
    close(g(x, 3.0), [1.0, -math.trunc(x / 3.0)])
    close(g(x, -3.0), [1.0, math.trunc(x / 3.0)])
    close(pb.jit(pb.grad(lambda a: math.fmod(a, 3.0)), backend=backend)(x), 1.0)
    close(pb.jvp(lambda a: np.fmod(a, 3.0), (x,), (2.0,))[1], 2.0)


@pytest.mark.parametrize("backend", BACKENDS)
def test_fmod_values(backend):
    xs = np.array([0.0, -0.0, 5.5, -5.5, 3.0, -3.0, np.inf, np.nan, 1e300, -1e-300])
    ys = np.array([3.0, -3.0, 0.0, np.inf, -np.inf, np.nan, 1e-300, 0.7])
    a, b = (v.ravel() for v in np.meshgrid(xs, ys))
    f = pb.jit(lambda a, b: np.fmod(a, b), backend=backend)
    for dt in (np.float64, np.float32):
        with np.errstate(all="ignore"):
            got, want = f(a.astype(dt), b.astype(dt)), np.fmod(a.astype(dt), b.astype(dt))
        np.testing.assert_array_equal(got, want)
        assert got.dtype == want.dtype
        numbers = ~np.isnan(want)
        np.testing.assert_array_equal(np.signbit(got[numbers]), np.signbit(want[numbers]))


def logsumexp(v):
    m = np.max(v)
    return m + np.log(np.sum(np.exp(v - m)))


def softmax_first(v):
    e = np.exp(v - np.max(v))
    return e[0] / np.sum(e)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("f", [logsumexp, softmax_first,
                               lambda v: np.logaddexp(v[0], v[1]) + np.logaddexp2(v[2], v[1]),
                               lambda v: np.hypot(v[0], v[1])],
                         ids=["logsumexp", "softmax", "logaddexp", "hypot"])
@pytest.mark.parametrize("x", [[0.3, 0.3, 0.3], [0.3, 0.3, -1.0], [-2.0, 1.0, 1.0]],
                         ids=["all tied", "two tied", "tied pair"])
def test_second_order_at_ties_of_smooth_functions(f, x, backend):
    """A max (or abs, or select) whose kink cancels in a smooth function is no kink of
    the Hessian: forward over reverse and reverse over reverse agree with central
    differences of the function at tied inputs."""
    x = np.array(x)
    want = central_hessian(f, x)
    close(pb.jit(pb.hessian(f), backend=backend)(x), want, 1e-6)
    close(pb.jit(pb.jacrev(pb.grad(f)), backend=backend)(x), want, 1e-6)


# -- item 12: complex numbers ---------------------------------------------------------------


def _complex_literal(x):
    return x * 1j


def _complex_call(x):
    return complex(x, 1.0)


def _numpy_complex_call(x):
    return np.complex128(x)


def _complex_constant(x):
    return x + complex(1, 2)


def _complex_dtype(x):
    return x.astype(complex)


def _complex_array(x):
    return np.array([1j, 2.0]) * x


def _complex_zeros(x):
    return np.zeros(2, dtype=np.complex64) + x


def _cmath(x):
    import cmath

    return cmath.sqrt(x)


@pytest.mark.parametrize("fn", [_complex_literal, _complex_call, _numpy_complex_call,
                                _complex_constant, _complex_dtype, _complex_array,
                                _complex_zeros, _cmath])
def test_complex_numbers_in_staged_code_are_refused(fn):
    with pytest.raises(pb.UnsupportedError, match="complex numbers are not supported yet") \
            as info:
        pb.jit(fn)(np.ones(2))
    assert "test_issue20_numbers.py" in str(info.value)  # it names the user's line


@pytest.mark.parametrize("arg", [1j, np.complex128(1 + 2j), np.ones(2, np.complex128),
                                 np.ones(3, np.complex64)], ids=repr)
def test_complex_arguments_are_refused(arg):
    f = pb.jit(lambda x: x * 2)
    f(np.ones(2))
    with pytest.raises(pb.UnsupportedError, match="complex numbers are not supported yet"):
        f(arg)
    with pytest.raises(pb.UnsupportedError, match="complex numbers are not supported yet"):
        pb.grad(lambda x: x * 2)(arg)


def test_complex_values_used_only_at_compile_time_still_work():
    f = pb.jit(lambda x: x * abs(3 + 4j) + (2j * 2j).real)
    same(f(2.0), 6.0)
    g = pb.jit(lambda x, z: x * abs(z), static_argnames=("z",))
    same(g(2.0, 3 + 4j), 10.0)
