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


# -- the idioms of JAX's custom-derivative tutorial, written the usual way: the rules call
# the decorated function itself, which there means its primal ----------------------------


@pb.custom_jvp
def log1pexp(x):
    return np.log(1.0 + np.exp(x))


@log1pexp.defjvp
def _log1pexp_jvp(primals, tangents):
    (x,), (t,) = primals, tangents
    ans = log1pexp(x)  # the primal, not the rule again
    return ans, (1.0 - 1.0 / (1.0 + np.exp(x))) * t


@pb.custom_vjp
def clip_gradient(lo, hi, x):
    return x


def _clip_gradient_fwd(lo, hi, x):
    return clip_gradient(lo, hi, x), (lo, hi)


def _clip_gradient_bwd(res, g):
    lo, hi = res
    return (None, None, np.clip(g, lo, hi))


clip_gradient.defvjp(_clip_gradient_fwd, _clip_gradient_bwd)


def _cosine_map(a, x):
    return 0.5 * np.cos(a * x)


@pb.custom_vjp
def fixed_point(a, x):
    """x* = 0.5 cos(a x*), by iteration from x (a contraction: |d/dx| <= a/2 < 1)."""
    nxt = _cosine_map(a, x)
    while abs(nxt - x) > 1e-14:
        x = nxt
        nxt = _cosine_map(a, x)
    return nxt


def _fixed_point_fwd(a, x):
    star = fixed_point(a, x)
    return star, (a, star)


def _fixed_point_bwd(res, ct):
    """The implicit function theorem: u = ct + u dg/dx at the fixed point, solved by the
    same kind of iteration; the cotangent of a is u dg/da."""
    a, star = res
    dgdx = -0.5 * a * np.sin(a * star)
    u = ct
    nxt = ct + u * dgdx
    while abs(nxt - u) > 1e-15:
        u = nxt
        nxt = ct + u * dgdx
    return (nxt * -0.5 * star * np.sin(a * star), None)  # the start has no influence


fixed_point.defvjp(_fixed_point_fwd, _fixed_point_bwd)


@pb.custom_vjp
def newton_sqrt(a):
    x = a if a > 1.0 else 1.0
    while abs(x * x - a) > 1e-12 * a:
        x = 0.5 * (x + a / x)
    return x


newton_sqrt.defvjp(lambda a: (newton_sqrt(a), newton_sqrt(a)),
                   lambda root, ct: (ct / (2.0 * root),))  # implicit: d/da of x*x = a


def _central(f, x, h=1e-6):
    return (f(x + h) - f(x - h)) / (2 * h)


def test_numerically_stable_log1pexp_in_every_transform():
    x = np.array([-3.0, 0.0, 5.0, 100.0])
    want = 1.0 - 1.0 / (1.0 + np.exp(x))
    with np.errstate(over="ignore"):
        np.testing.assert_allclose(pb.jit(log1pexp)(x[:3]), np.log1p(np.exp(x[:3])))
    for grad in (pb.grad(lambda x: np.sum(log1pexp(x))),
                 pb.jit(pb.grad(lambda x: np.sum(log1pexp(x)))),
                 pb.grad(pb.jit(lambda x: np.sum(log1pexp(x))))):
        np.testing.assert_allclose(grad(x), want)  # 1.0 at 100, where exp overflows
    _, tangent = pb.jvp(log1pexp, (x,), (np.ones(4),))
    np.testing.assert_allclose(tangent, want)
    second = pb.grad(pb.grad(lambda s: log1pexp(s)))(2.0)
    assert second == pytest.approx(np.exp(2.0) / (1 + np.exp(2.0)) ** 2, rel=1e-9)

    def in_a_loop(x, n):
        total = 0.0
        for k in range(n):
            total = total + np.sum(log1pexp(x * (k + 1.0)))
        return total

    got = pb.grad(in_a_loop)(x, 3)
    np.testing.assert_allclose(got, sum((k + 1.0) * (1 - 1 / (1 + np.exp((k + 1) * x)))
                                        for k in range(3)))

    def recursive(x, n):
        if n <= 0:
            return log1pexp(x)
        return recursive(x * 0.5, n - 1) + log1pexp(x)

    g = pb.grad(recursive)(1.5, np.int64(3))  # recursion on a run-time depth
    assert g == pytest.approx(_central(lambda s: recursive(s, 3), 1.5), rel=1e-7)


def test_clipped_gradients():
    def f(x):
        return np.sum(clip_gradient(-0.75, 0.75, np.sin(x)) * 3.0)

    for grad in (pb.grad(f), pb.jit(pb.grad(f)), pb.grad(pb.jit(f))):
        np.testing.assert_allclose(grad(X), np.clip(3.0, -0.75, 0.75) * np.cos(X))
    assert pb.jit(f)(X) == pytest.approx(f(X))
    _, tangent = pb.jvp(f, (X,), (np.ones(5),))  # forward mode: the function itself
    assert tangent == pytest.approx(3.0 * np.sum(np.cos(X)))


def test_implicit_rule_of_a_fixed_point():
    a = 1.3
    star = fixed_point(a, 0.0)
    assert star == pytest.approx(0.5 * np.cos(a * star), abs=1e-13)
    want = _central(lambda s: fixed_point(s, 0.0), a)
    for grad in (pb.grad(fixed_point), pb.jit(pb.grad(fixed_point))):
        assert grad(a, 0.0) == pytest.approx(want, rel=1e-7)
    _, tangent = pb.jvp(fixed_point, (a, 0.0), (1.0, 0.0))
    assert tangent == pytest.approx(want, rel=1e-7)

    def sum_over_a_grid(a0, n):
        total = 0.0
        a = a0
        while a < a0 + n * 0.1:  # a loop on data around the custom rule
            total = total + fixed_point(a, 0.0)
            a = a + 0.1
        return total

    want = _central(lambda s: sum_over_a_grid(s, 4), 1.0)
    assert pb.grad(sum_over_a_grid)(1.0, 4) == pytest.approx(want, rel=1e-6)


def test_implicit_rule_of_a_root_solve():
    for a in (0.25, 2.0, 9.0):
        assert pb.jit(newton_sqrt)(a) == pytest.approx(np.sqrt(a))
        assert pb.grad(newton_sqrt)(a) == pytest.approx(0.5 / np.sqrt(a), rel=1e-10)
        assert pb.grad(pb.jit(newton_sqrt))(a) == pytest.approx(0.5 / np.sqrt(a), rel=1e-10)
    f = pb.jit(pb.grad(lambda a: newton_sqrt(a) * newton_sqrt(2.0 * a)))
    assert f(3.0) == pytest.approx(np.sqrt(2.0), rel=1e-9)  # sqrt(a) sqrt(2a) = sqrt(2) a
