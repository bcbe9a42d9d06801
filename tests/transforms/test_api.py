"""The derivative API: composition with jit and with itself, pytrees, vjp/jvp inside
staged code, Jacobians and Hessians, and the errors for what cannot be differentiated."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

import pullback as pb


def cube_sum(x):
    return np.sum(x ** 3)


X = np.array([0.5, -1.0, 2.0])


def test_transforms_built_inside_staged_code():
    def outer(x):
        g = pb.grad(lambda y: np.sum(np.sin(y) * y))
        return g(x) * 2.0

    want = 2 * (np.cos(X) * X + np.sin(X))
    np.testing.assert_allclose(pb.jit(outer)(X), want)
    np.testing.assert_allclose(outer(X), want)  # plain Python: grad compiles itself


def test_grad_of_grad_and_jvp_of_grad():
    def f(x):
        return x ** 3 * np.sin(x)

    d2 = pb.grad(pb.grad(f))(0.7)
    exact = 6 * 0.7 * np.sin(0.7) + 6 * 0.7 ** 2 * np.cos(0.7) - 0.7 ** 3 * np.sin(0.7)
    assert d2 == pytest.approx(exact, rel=1e-12)
    _, hvp = pb.jvp(pb.grad(cube_sum), (X,), (np.ones(3),))
    np.testing.assert_allclose(hvp, 6 * X)


def test_jacobians_and_hessian():
    def f(x):
        return np.sin(x) * x[0]

    jf, jr = pb.jacfwd(f)(X), pb.jacrev(f)(X)
    want = np.diag(np.cos(X) * X[0])
    want[:, 0] += np.sin(X)
    np.testing.assert_allclose(jf, want)
    np.testing.assert_allclose(jr, want)
    np.testing.assert_allclose(pb.hessian(cube_sum)(X), np.diag(6 * X))


@dataclass
class Params:
    w: np.ndarray
    b: float


def test_gradients_come_back_in_the_arguments_structure():
    def loss(p, data):
        return np.sum((data["x"] * p.w + p.b) ** 2)

    p = Params(np.array([1.0, 2.0]), 0.5)
    data = {"x": np.array([3.0, -1.0])}
    g = pb.grad(loss)(p, data)
    assert isinstance(g, Params) and isinstance(g.b, float)
    r = data["x"] * p.w + p.b
    np.testing.assert_allclose(g.w, 2 * r * data["x"])
    assert g.b == pytest.approx(np.sum(2 * r))
    (gp, gd) = pb.grad(loss, argnums=(0, 1))(p, data)
    np.testing.assert_allclose(gd["x"], 2 * r * p.w)


def test_has_aux_and_value_and_grad():
    def f(x):
        return np.sum(x * x), {"norm": np.sqrt(np.sum(x * x))}

    (value, aux), g = pb.value_and_grad(f, has_aux=True)(X)
    assert value == pytest.approx(np.sum(X * X))
    assert aux["norm"] == pytest.approx(np.linalg.norm(X))
    np.testing.assert_allclose(g, 2 * X)
    g2, aux2 = pb.grad(f, has_aux=True)(X)
    np.testing.assert_allclose(g2, 2 * X)


def test_vjp_from_python_and_inside_jit():
    def f(x):
        return np.sin(x), x.sum()

    out, vjp_fn = pb.vjp(f, X)
    np.testing.assert_allclose(out[0], np.sin(X))
    (ct,) = vjp_fn((np.ones(3), 2.0))
    np.testing.assert_allclose(ct, np.cos(X) + 2.0)

    def staged(x, c):
        y, back = pb.vjp(f, x)
        return back((c, 1.0))[0]

    np.testing.assert_allclose(pb.jit(staged)(X, X), np.cos(X) * X + 1.0)


def test_same_array_for_two_arguments_gets_two_gradients():
    def f(a, b):
        return np.sum(a * 2.0 + b * 3.0)

    ga, gb = pb.grad(f, argnums=(0, 1))(X, X)
    np.testing.assert_allclose(ga, 2.0)
    np.testing.assert_allclose(gb, 3.0)


def test_a_result_that_does_not_depend_on_the_argument_gets_zeros():
    def f(x, y):
        return np.sum(y * y)

    np.testing.assert_array_equal(pb.grad(f)(X, X), np.zeros(3))


@pytest.mark.parametrize("fn, args, match", [
    (lambda n, x: x * n, (3, 1.0), "argument 0 .* compile-time value"),
    (lambda i: np.sum(i * 1.0), (np.arange(3),), "only integer or boolean values"),
    (lambda x: x * 2.0, (X,), "float scalar, but it returns a value of type f64\\[3\\]"),
    (lambda x: np.argmax(x), (X,), "float scalar"),
])
def test_what_cannot_be_differentiated_is_a_compile_error(fn, args, match):
    with pytest.raises(pb.CompileError, match=match):
        pb.grad(fn)(*args)


def test_zero_derivatives_of_piecewise_constant_ops():
    def f(x):
        return np.sum(np.floor(x) * x + np.sign(x) * x) + x[np.argmax(x)]

    want = np.floor(X) + np.sign(X)
    want[np.argmax(X)] += 1
    np.testing.assert_allclose(pb.grad(f)(X), want)


def test_integer_leaves_of_a_differentiated_structure_get_none():
    def f(p):
        return np.sum(p["w"] * p["n"])

    g = pb.grad(f)({"w": X, "n": np.arange(3)})
    np.testing.assert_allclose(g["w"], np.arange(3))
    assert g["n"] is None


def test_a_vjp_through_a_loop_is_refused_where_its_tape_would_be_consumed_twice():
    def f(x):
        for _ in range(3):
            x = np.sin(x)
        return x

    def twice(x):
        _, back = pb.vjp(f, x)
        return back(1.0)[0] + back(2.0)[0]

    def in_loop(x, n):
        _, back = pb.vjp(f, x)
        total = 0.0 * x
        for _ in range(n):
            total = total + back(1.0)[0]
        return total

    with pytest.raises(pb.CompileError, match="already emitted"):
        pb.jit(twice)(0.5)
    with pytest.raises(pb.CompileError, match="where pb.vjp was called"):
        pb.jit(in_loop)(0.5, np.int64(2))


def test_functions_with_star_args_and_keyword_only_arguments():
    def total(*xs, scale=1.0):
        return sum(xs) * scale

    np.testing.assert_allclose(pb.jit(total)(X, X, scale=2.0), total(X, X, scale=2.0))
    np.testing.assert_allclose(pb.grad(lambda *xs: np.sum(total(*xs)), argnums=1)(X, X),
                               np.ones(3))


def test_vjp_from_python_leaves_the_primals_alone():
    def zero_largest(m):
        m[np.argmax(m)] = 0.0
        return np.sum(m)

    m = np.array([1.0, 3.0, 2.0])
    out, back = pb.vjp(zero_largest, m)
    np.testing.assert_array_equal(m, [1.0, 3.0, 2.0])
    assert out == 3.0
    np.testing.assert_array_equal(back(1.0)[0], [1.0, 0.0, 1.0])
