"""Derivatives at singular points: negative bases, zeros and ties.

A rule with a log, a root, a division or a select can give NaN where the derivative
exists: at second order a term of a constant operand, or a formula a select does not
take, meets a zero (co)tangent, and zero times an infinite partial is NaN.  A select can
also hide curvature and give a wrong finite value.  Each case checks grad, jvp and
second-order derivatives against closed forms or float64 central differences at
negative, zero and tie points.

Where a function is not differentiable the conventions are JAX's (abs: 0 at 0; max, min
and clip: ties split evenly; sqrt: inf at 0) and norm-like functions (norms, std, hypot)
follow abs: derivative 0 where they are 0.  ``x ** y`` at ``x < 0`` holds the sign of
the result fixed: d/dy = x**y log|x| (see ``_pow_dy`` in ``pullback/ops/elementwise.py``).
"""

from __future__ import annotations

import math

import numpy as np
import pytest

import pullback as pb
from pullback.ir.builder import Builder
from pullback.ir.core import Lit
from pullback.ir.types import TensorType, float64
from pullback.ops import elementwise as E

X = np.array([-1.5, 0.0, 2.0])  # a negative, a zero and a positive point


def close(got, want, tol: float = 1e-12) -> None:
    np.testing.assert_allclose(np.asarray(got, dtype=np.float64), want, rtol=tol, atol=tol)


def central(f, x: float, h: float = 1e-5) -> float:
    return (f(x + h) - f(x - h)) / (2 * h)


def second_orders(f, x: float) -> list[float]:
    """f'' by grad of grad, forward over reverse, and the compiled grad of grad."""
    return [pb.grad(pb.grad(f))(x), pb.jvp(pb.grad(f), (x,), (1.0,))[1],
            pb.jit(pb.grad(pb.grad(f)))(x)]


# -- pow with a constant exponent (the issue) -------------------------------------------

#: f(x) = sum(x ** k) spelled in several ways, and k.
CONSTANT_POWERS = {
    "x**2": (lambda x: np.sum(x ** 2), 2),
    "x**3": (lambda x: np.sum(x ** 3), 3),
    "x**3.0": (lambda x: np.sum(x ** 3.0), 3),
    "x**int64(3)": (lambda x: np.sum(x ** np.int64(3)), 3),
    "power(x,2)": (lambda x: np.sum(np.power(x, 2)), 2),
    "power(x,3)": (lambda x: np.sum(np.power(x, 3)), 3),
    "float_power(x,3)": (lambda x: np.sum(np.float_power(x, 3)), 3),
    "square": (lambda x: np.sum(np.square(x)), 2),
}


@pytest.mark.parametrize("name", CONSTANT_POWERS)
def test_pow_constant_exponent_at_negative_and_zero_points(name):
    f, k = CONSTANT_POWERS[name]
    close(pb.grad(f)(X), k * X ** (k - 1))
    close(pb.jvp(f, (X,), (np.ones(3),))[1], np.sum(k * X ** (k - 1)))
    close(pb.hessian(f)(X), np.diag(k * (k - 1) * X ** (k - 2)))
    close(pb.jacrev(pb.grad(f))(X), np.diag(k * (k - 1) * X ** (k - 2)))


def test_pow_negative_constant_exponent():
    f = lambda x: np.sum(x ** -1)  # noqa: E731
    x = np.array([-1.5, 2.0])
    close(pb.grad(f)(x), -(x ** -2.0))
    close(pb.hessian(f)(x), np.diag(2 * x ** -3.0))


#: Scalar powers: f, f', f''.
SCALAR_POWERS = {
    "x**2": (lambda x: x ** 2, lambda x: 2 * x, lambda x: 2.0),
    "x**3": (lambda x: x ** 3, lambda x: 3 * x ** 2, lambda x: 6 * x),
    "x**3.0": (lambda x: x ** 3.0, lambda x: 3 * x ** 2, lambda x: 6 * x),
    "pow(x,3)": (lambda x: pow(x, 3), lambda x: 3 * x ** 2, lambda x: 6 * x),
    "math.pow(x,2)": (lambda x: math.pow(x, 2), lambda x: 2 * x, lambda x: 2.0),
    "np.power(x,3)": (lambda x: np.power(x, 3), lambda x: 3 * x ** 2, lambda x: 6 * x),
}


@pytest.mark.parametrize("x", [-2.0, 0.0])
@pytest.mark.parametrize("name", SCALAR_POWERS)
def test_pow_scalar_first_and_second_order(name, x):
    f, d1, d2 = SCALAR_POWERS[name]
    close(pb.grad(f)(x), d1(x))
    close(pb.jvp(f, (x,), (1.0,))[1], d1(x))
    for got in second_orders(f, x):
        close(got, d2(x))


def test_constant_exponent_emits_no_exponent_term():
    """The vjp and jvp of ``x ** 3.0`` (and the jvp with the exponent's tangent a symbolic
    zero) emit no ``log``: the exponent's term is not built for a constant exponent."""
    t = TensorType((3,), float64)
    with Builder() as b:
        x, y, ct = b.param(t), b.param(TensorType((), float64)), b.param(t)
        out = E.pow_(x, Lit(3.0))
        E.pow_.vjp([x, Lit(3.0)], [out], [ct])
        E.pow_.jvp([x, Lit(3.0)], [ct, None], [out])
        out_y = E.pow_(x, y)
        E.pow_.jvp([x, y], [ct, None], [out_y])
        func = b.finish("rules", [out])
    assert "log" not in {e.op.name for e in func.block.eqns}


# -- pow with a differentiated exponent -------------------------------------------------


def _fixed_sign_pow(x: float, y: float) -> float:
    """x ** y near an odd integer y with the sign of the result held: what the rule
    differentiates at x < 0."""
    return -abs(x) ** y if x < 0 else x ** y


def test_pow_differentiated_exponent_at_a_negative_base():
    f = lambda x, y: x ** y  # noqa: E731
    x, y = -1.5, 3.0
    out, lg = x ** y, math.log(abs(x))
    grads = pb.grad(f, argnums=(0, 1))(x, y)
    close(grads, [y * x ** (y - 1), out * lg])
    # d/dy against central differences of the fixed-sign power
    close(grads[1], central(lambda s: _fixed_sign_pow(x, s), y), 1e-8)
    hess = np.array(pb.hessian(f, argnums=(0, 1))(x, y), dtype=np.float64)
    mixed = x ** (y - 1) * (1 + y * lg)
    close(hess, [[y * (y - 1) * x ** (y - 2), mixed], [mixed, out * lg ** 2]])
    close(pb.jvp(pb.grad(f, argnums=1), (x, y), (1.0, 0.0))[1], mixed)


def test_pow_exponent_that_depends_on_x():
    """The exponent 3 computed from x (so it has a zero tangent): no NaN at x < 0."""
    f = lambda x: np.sum(x ** (x * 0.0 + 3.0))  # noqa: E731
    close(pb.grad(f)(X), 3 * X ** 2)
    close(pb.hessian(f)(X), np.diag(6 * X))
    g = lambda x: x ** (x * 0.0 + 2.0)  # noqa: E731
    for x in (-2.0, 0.0):
        close(pb.grad(g)(x), 2 * x)
        for got in second_orders(g, x):
            close(got, 2.0)


def test_pow_at_a_zero_base():
    f = lambda x, y: x ** y  # noqa: E731
    for y, fxx in ((2.0, 2.0), (3.0, 0.0)):
        close(pb.grad(f, argnums=(0, 1))(0.0, y), [0.0, 0.0])
        close(np.array(pb.hessian(f, argnums=(0, 1))(0.0, y), dtype=np.float64),
              [[fxx, 0.0], [0.0, 0.0]])
    # x ** 0 is 1: the untaken y x^(y-1) = 0 * inf must not reach the second derivative
    close(pb.grad(pb.grad(f))(0.0, 0.0), 0.0)
    close(pb.grad(pb.grad(f))(2.0, 0.0), 0.0)


def test_python_float_square_root_power():
    """``x ** 0.5`` of a Python float (C's pow, fixed up for -0.0) differentiates as sqrt:
    inf at 0 in both modes, not NaN in reverse mode."""
    f = lambda x: x ** 0.5  # noqa: E731
    assert pb.grad(f)(0.0) == math.inf
    assert pb.jvp(f, (0.0,), (1.0,))[1] == math.inf
    assert pb.grad(lambda x: np.sqrt(x))(0.0) == math.inf
    close(pb.grad(f)(4.0), 0.25)
    for got in second_orders(f, 4.0):
        close(got, -1 / 32)


def test_a_constant_square_root_does_not_poison_the_other_operand():
    f = lambda x, y: x * np.sqrt(y) + x ** 2  # noqa: E731
    close(pb.grad(f)(1.5, 0.0), 3.0)
    close(pb.grad(pb.grad(f))(1.5, 0.0), 2.0)
    close(pb.jvp(lambda x: f(x, 0.0), (1.5,), (1.0,))[1], 3.0)


# -- norm-like functions at zero -------------------------------------------------------


def test_norm_of_a_zero_vector():
    zero = np.zeros(3)
    for ord_ in (None, 2, 3):
        f = lambda x, o=ord_: np.linalg.norm(x, o)  # noqa: E731
        close(pb.grad(f)(zero), zero)
        close(pb.hessian(f)(zero), np.zeros((3, 3)))
        close(pb.jvp(f, (zero,), (np.ones(3),))[1], 0.0)
    close(pb.grad(lambda m: np.linalg.norm(m))(np.zeros((2, 2))), np.zeros((2, 2)))
    # the 2-norm of one element is abs
    assert pb.grad(lambda x: np.linalg.norm(x))(np.zeros(1))[0] == pb.grad(abs)(0.0) == 0.0
    # ||x||^2 has gradient 0 at 0
    close(pb.grad(lambda x: np.linalg.norm(x) ** 2)(zero), zero)


def test_norm_away_from_zero():
    x = np.array([3.0, -4.0])
    u = x / 5
    norm = lambda v: np.linalg.norm(v)  # noqa: E731
    close(pb.grad(norm)(x), u)
    close(pb.hessian(norm)(x), (np.eye(2) - np.outer(u, u)) / 5)
    p3 = lambda v: np.linalg.norm(v, 3)  # noqa: E731
    n3 = np.sum(np.abs(x) ** 3) ** (1 / 3)
    close(pb.grad(p3)(x), np.sign(x) * x ** 2 / n3 ** 2)


def test_std_of_constant_data():
    close(pb.grad(lambda x: np.std(x))(np.full(3, 2.0)), np.zeros(3))
    close(pb.grad(lambda x: np.nanstd(x))(np.full(3, 2.0)), np.zeros(3))
    x = np.array([1.0, 2.0, 4.0])
    close(pb.grad(lambda v: np.std(v))(x), (x - x.mean()) / (3 * x.std()))


def test_hypot_at_the_origin():
    f = lambda x, y: np.hypot(x, y)  # noqa: E731
    close(pb.grad(f, argnums=(0, 1))(0.0, 0.0), [0.0, 0.0])
    close(pb.grad(lambda x: np.hypot(x, 0.0))(0.0), 0.0)
    close(pb.grad(lambda x: math.hypot(x, 0.0))(0.0), 0.0)
    close(pb.grad(f, argnums=(0, 1))(3.0, -4.0), [0.6, -0.8])
    close(np.array(pb.hessian(f, argnums=(0, 1))(3.0, -4.0), dtype=np.float64),
          np.array([[16.0, 12.0], [12.0, 9.0]]) / 125)


# -- ties --------------------------------------------------------------------------------


@pytest.mark.parametrize("x", [0.0, 1.0, -3.0])
def test_logaddexp_at_a_tie(x):
    f = lambda a, b: np.logaddexp(a, b)  # noqa: E731
    close(pb.grad(f, argnums=(0, 1))(x, x), [0.5, 0.5])
    hess = np.array(pb.hessian(f, argnums=(0, 1))(x, x), dtype=np.float64)
    close(hess, [[0.25, -0.25], [-0.25, 0.25]])
    g = lambda a: np.logaddexp2(a, x)  # noqa: E731
    close(pb.grad(g)(x), 0.5)
    for got in second_orders(g, x):
        close(got, math.log(2) / 4)


def test_logaddexp_away_from_ties():
    f = lambda a: np.logaddexp(a, 0.5)  # noqa: E731
    for a in (-3.0, 2.0):
        s = 1 / (1 + math.exp(0.5 - a))
        close(pb.grad(f)(a), s)
        for got in second_orders(f, a):
            close(got, s * (1 - s))
    # far apart: exp overflows in no branch
    close(pb.grad(f)(800.0), 1.0)
    close(pb.grad(f)(-800.0), 0.0)
    close(pb.grad(pb.grad(f))(800.0), 0.0)


@pytest.mark.parametrize("fn", [np.maximum, np.minimum])
def test_max_min_ties_split(fn):
    f = lambda a, b: fn(a, b)  # noqa: E731
    close(pb.grad(f, argnums=(0, 1))(1.0, 1.0), [0.5, 0.5])
    close(pb.grad(lambda a: fn(a, a))(1.0), 1.0)
    close(pb.grad(pb.grad(lambda a: fn(a, 0.0) * a))(0.0), 1.0)
    close(pb.grad(lambda x: np.sum(np.clip(x, 0.0, 1.0)))(np.array([0.0, 1.0, 0.5])),
          [0.5, 0.5, 1.0])


def test_abs_at_zero():
    close(pb.grad(abs)(0.0), 0.0)
    close(pb.grad(pb.grad(lambda x: abs(x) * x))(0.0), 0.0)
    close(pb.grad(lambda x: np.abs(x) ** 3)(0.0), 0.0)


def test_sinc_at_zero():
    d = [lambda x: np.sinc(x)]
    for _ in range(4):
        d.append(pb.grad(d[-1]))
    want = [1.0, 0.0, -math.pi ** 2 / 3, 0.0, math.pi ** 4 / 5]
    for k, f in enumerate(d):
        close(f(0.0), want[k], 1e-12)
    close(pb.jvp(pb.grad(d[0]), (0.0,), (1.0,))[1], want[2])
    close(d[2](0.5), central(d[1], 0.5), 1e-8)


def test_atan2_on_its_branch_cut_and_axes():
    f = lambda y, x: np.arctan2(y, x)  # noqa: E731
    for y, x in ((0.0, -2.0), (0.0, 2.0), (2.0, 0.0), (-2.0, 0.0)):
        r2 = x * x + y * y
        close(pb.grad(f, argnums=(0, 1))(y, x), [x / r2, -y / r2])


# -- the native backend ------------------------------------------------------------------

NATIVE = {
    "x**3 at x<0": (lambda x: x ** 3, -2.0, -12.0),
    "x**(0x+3) at x<0": (lambda x: x ** (x * 0.0 + 3.0), -2.0, -12.0),
    "x**(0x+2) at 0": (lambda x: x ** (x * 0.0 + 2.0), 0.0, 2.0),
    "logaddexp tie": (lambda x: np.logaddexp(x, 1.0), 1.0, 0.25),
    "sinc at 0": (lambda x: np.sinc(x), 0.0, -math.pi ** 2 / 3),
}


@pytest.mark.parametrize("name", NATIVE)
def test_second_order_on_the_native_backend(name):
    f, x, want = NATIVE[name]
    close(pb.jit(pb.grad(pb.grad(f)), backend="c")(x), want)


def test_first_order_on_the_native_backend():
    g = pb.jit(pb.grad(lambda v: np.linalg.norm(v) + np.hypot(v[0], v[1])), backend="c")
    close(g(np.zeros(2)), np.zeros(2))
    h = pb.jit(pb.grad(lambda x, y: x ** y, argnums=(0, 1)), backend="c")
    close(h(-1.5, 3.0), [6.75, -3.375 * math.log(1.5)])
