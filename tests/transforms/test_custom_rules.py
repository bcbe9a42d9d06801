"""User-written derivative rules (custom_vjp, custom_jvp) are the ones used — a
deliberately different rule changes the derivative, also inside loops and under jit —
and stop_gradient cuts the derivative."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb


@pb.custom_vjp
def clipped_sin(x):
    return np.sin(x)


def _clipped_fwd(x):
    return np.sin(x), np.cos(x)


def _clipped_bwd(cos_x, ct):
    return (np.clip(cos_x * ct, -0.5, 0.5),)  # a deliberately different gradient


clipped_sin.defvjp(_clipped_fwd, _clipped_bwd)


@pb.custom_jvp
def tripled_exp(x):
    return np.exp(x)


@tripled_exp.defjvp
def _tripled_exp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    y = np.exp(x)
    return y, 3.0 * y * t  # three times the true derivative


X = np.linspace(-1.5, 1.5, 5)


def test_custom_vjp_rule_is_used_in_reverse_mode():
    def f(x):
        return np.sum(clipped_sin(x))

    assert f(X) == pytest.approx(np.sum(np.sin(X)))
    np.testing.assert_allclose(pb.grad(f)(X), np.clip(np.cos(X), -0.5, 0.5))
    np.testing.assert_allclose(pb.jit(pb.grad(f))(X), np.clip(np.cos(X), -0.5, 0.5))
    value, grad = pb.value_and_grad(f)(X)
    assert value == pytest.approx(np.sum(np.sin(X)))


def test_custom_vjp_inside_a_data_dependent_loop():
    def f(x, n):
        total = 0.0
        k = 0
        while k < n:
            total = total + np.sum(clipped_sin(x * (k + 1)))
            k += 1
        return total

    want = sum((k + 1) * np.clip(np.cos(X * (k + 1)), -0.5, 0.5) for k in range(3))
    np.testing.assert_allclose(pb.grad(f)(X, np.int64(3)), want)


def test_custom_vjp_forward_mode_differentiates_the_function_itself():
    t = np.ones_like(X)
    _, tangent = pb.jvp(clipped_sin, (X,), (t,))
    np.testing.assert_allclose(tangent, np.cos(X))


def test_custom_vjp_reads_caller_values_as_constants():
    def f(x, scale):
        g = pb.custom_vjp(lambda y: y * scale)
        g.defvjp(lambda y: (y * scale, None), lambda res, ct: (ct * 7.0,))
        return np.sum(g(x))

    np.testing.assert_allclose(pb.grad(f)(X, 2.0), np.full_like(X, 7.0))
    assert pb.grad(f, argnums=1)(X, 2.0) == 0.0


def test_custom_jvp_rule_is_used_in_forward_and_reverse_mode():
    def f(x):
        return np.sum(tripled_exp(x))

    t = np.ones_like(X)
    _, tangent = pb.jvp(f, (X,), (t,))
    assert tangent == pytest.approx(3 * np.sum(np.exp(X)))
    np.testing.assert_allclose(pb.grad(f)(X), 3 * np.exp(X))


def test_custom_jvp_inside_a_for_loop_and_under_jit():
    def f(x, n):
        y = x
        for _ in range(n):
            y = tripled_exp(y) * 0.1
        return np.sum(y)

    def fd_like(x, n):  # the derivative the rule defines, accumulated by hand
        y, d = x, np.ones_like(x)
        for _ in range(n):
            d = d * 3.0 * np.exp(y) * 0.1
            y = np.exp(y) * 0.1
        return d

    np.testing.assert_allclose(pb.jit(pb.grad(f))(X, np.int64(3)), fd_like(X, 3))


def test_custom_rules_need_their_rules():
    bare = pb.custom_vjp(lambda x: x * 2.0)
    with pytest.raises(pb.CompileError, match="defvjp"):
        pb.grad(lambda x: bare(x))(1.0)


def test_stop_gradient_cuts_the_derivative():
    def f(x):
        return np.sum(x * pb.stop_gradient(x))

    np.testing.assert_allclose(pb.grad(f)(X), X)
    assert f(X) == pytest.approx(np.sum(X * X))
    assert pb.stop_gradient(X) is X  # plain Python: the value itself
