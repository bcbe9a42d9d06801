"""Derivatives of whole programs whose control flow follows the data: Newton and
bisection solvers with tolerances, an adaptive ODE integrator, recursion of data-dependent
depth, buffers mutated in loops, early exits, integer and boolean values, pytrees.

No tracer can differentiate these (the trip counts and recursion depths are run-time
values), so reverse mode records its residuals on a run-time tape.  The oracle is always
the plain Python function: values against it, derivatives against its float64 central
differences (first order) and second differences (second order).  Every gradient is
checked through ``pb.grad``, ``pb.value_and_grad``, ``pb.jit(pb.grad(...))`` and
``pb.jvp`` in a random direction.
"""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np
import pytest

import pullback as pb
from programs.p_recursion import adaptive_simpson
from pullback.derivatives.jacobians import FORWARD_JACOBIAN

Argnums = int | tuple[int, ...]


# -- the oracle: the plain function and its central differences -------------------------


def _is_float(x: Any) -> bool:
    """A leaf pullback differentiates: a float array, a NumPy float or a Python float."""
    return isinstance(x, (float, np.floating)) or (
        isinstance(x, np.ndarray) and x.dtype.kind == "f")


def _plain(f: Callable, args: Sequence) -> Any:
    """``f`` run by Python on copies of the arguments (some programs write to them)."""
    return f(*copy.deepcopy(list(args)))


def _like(leaf: Any, value: np.ndarray) -> Any:
    """``value`` passed the way ``leaf`` is (array, NumPy scalar or Python float)."""
    if isinstance(leaf, np.ndarray):
        return value.astype(leaf.dtype)
    return type(leaf)(value)


def _moved(args: Sequence, direction: Sequence, step: float) -> list:
    """``args + step * direction`` on the float leaves (``direction`` has args' shape)."""
    def move(a: Any, d: Any) -> Any:
        return _like(a, np.asarray(a, np.float64) + step * np.asarray(d)) if _is_float(a) else a

    return [pb.tree_map(move, a, d) for a, d in zip(args, direction, strict=True)]


def _difference(f: Callable, args: Sequence, direction: Sequence, eps: float) -> Any:
    """The central difference of ``f`` along ``direction``, leaf by leaf of its result."""
    plus, minus = _plain(f, _moved(args, direction, eps)), _plain(f, _moved(args, direction, -eps))
    return pb.tree_map(lambda p, m: (np.asarray(p, np.float64) - m) / (2 * eps), plus, minus)


def _zero(x: Any) -> Any:
    return pb.tree_map(lambda a: np.zeros(np.shape(a)) if _is_float(a) else a, x)


def _nums(argnums: Argnums) -> tuple[int, ...]:
    return (argnums,) if isinstance(argnums, int) else argnums


def _unit(args: Sequence, k: int, j: int, index: tuple) -> list:
    """The direction of element ``index`` of leaf ``j`` of argument ``k``."""
    direction = [_zero(a) for a in args]
    leaves, tree = pb.tree_flatten(direction[k])
    leaves[j] = np.zeros(np.shape(leaves[j]))
    leaves[j][index] = 1.0
    direction[k] = pb.tree_unflatten(tree, leaves)
    return direction


def numeric_grad(f: Callable, args: Sequence, argnums: Argnums = 0, eps: float = 1e-6) -> Any:
    """The gradient of the plain scalar ``f`` by central differences, in the structure
    ``pb.grad`` gives (None at non-float leaves)."""
    def of(k: int) -> Any:
        leaves, tree = pb.tree_flatten(args[k])
        out = []
        for j, leaf in enumerate(leaves):
            if not _is_float(leaf):
                out.append(None)
                continue
            g = np.zeros(np.shape(leaf))
            for index in np.ndindex(g.shape):
                g[index] = _difference(f, args, _unit(args, k, j, index), eps)
            out.append(g)
        return pb.tree_unflatten(tree, out)

    grads = tuple(of(k) for k in _nums(argnums))
    return grads[0] if isinstance(argnums, int) else grads


def numeric_hessian(f: Callable, x: np.ndarray, eps: float = 1e-4) -> np.ndarray:
    """The Hessian of the plain scalar ``f`` of one array by second differences."""
    x = np.asarray(x, np.float64)
    n = x.size

    def at(i: int, si: float, j: int, sj: float) -> float:
        d = np.zeros(n)
        d[i] += si * eps
        d[j] += sj * eps
        return float(_plain(f, [x + d.reshape(x.shape)]))

    h = np.array([[(at(i, 1, j, 1) - at(i, 1, j, -1) - at(i, -1, j, 1) + at(i, -1, j, -1))
                   / (4 * eps * eps) for j in range(n)] for i in range(n)])
    return h.reshape(x.shape + x.shape)


def assert_tree_close(got: Any, want: Any, rtol: float, what: str = "") -> None:
    """Same structure, every leaf close: ``rtol`` relative to the largest magnitude of
    the leaf, at least 1 (what central differences can promise)."""
    assert pb.tree_structure(got) == pb.tree_structure(want), f"{what}: {got!r} vs {want!r}"
    for g, w in zip(pb.tree_leaves(got), pb.tree_leaves(want), strict=True):
        assert np.shape(g) == np.shape(w), f"{what}: shape {np.shape(g)} vs {np.shape(w)}"
        scale = max(1.0, float(np.max(np.abs(w), initial=0.0)))
        np.testing.assert_allclose(np.asarray(g, np.float64), w, rtol=0, atol=rtol * scale,
                                   err_msg=what)


def _values_close(got: Any, want: Any) -> None:
    assert pb.tree_structure(got) == pb.tree_structure(want)
    for g, w in zip(pb.tree_leaves(got), pb.tree_leaves(want), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


def _random_direction(args: Sequence, argnums: Argnums, seed: int) -> list:
    """Random tangents on the float leaves of the ``argnums`` arguments, zero elsewhere."""
    rng = np.random.default_rng(seed)
    nums = _nums(argnums)

    def draw(a: Any) -> Any:
        return rng.standard_normal(np.shape(a)) if _is_float(a) else a

    return [pb.tree_map(draw, a) if k in nums else _zero(a) for k, a in enumerate(args)]


def _tangents(args: Sequence, direction: Sequence) -> tuple:
    """The direction passed as ``pb.jvp`` tangents (each leaf the way its primal is)."""
    return tuple(pb.tree_map(lambda a, d: _like(a, np.asarray(d)) if _is_float(a) else a, a, d)
                 for a, d in zip(args, direction, strict=True))


def check_jvp(f: Callable, args: Sequence, argnums: Argnums = 0, rtol: float = 1e-6,
              eps: float = 1e-6) -> None:
    """``pb.jvp`` in a random direction against the plain function's central difference."""
    direction = _random_direction(args, argnums, seed=0)
    out, tangent = pb.jvp(f, tuple(args), _tangents(args, direction))
    _values_close(out, _plain(f, args))
    assert_tree_close(tangent, _difference(f, args, direction, eps), rtol, "jvp")


def check_grad(f: Callable, *args: Any, argnums: Argnums = 0, rtol: float = 1e-6,
               eps: float = 1e-6) -> Any:
    """``f``'s value and gradient from pullback (plain, with the value, jitted, by
    reverse mode however ``pb.grad`` picks, and by forward mode) against the plain
    function; returns the gradient."""
    want = numeric_grad(f, args, argnums, eps)
    got = pb.grad(f, argnums)(*args)
    assert_tree_close(got, want, rtol, "grad")
    assert_tree_close(pb.jacrev(f, argnums)(*args), want, rtol, "jacrev")
    value, again = pb.value_and_grad(f, argnums)(*args)
    np.testing.assert_allclose(value, _plain(f, args), rtol=1e-12, atol=1e-14)
    assert_tree_close(again, want, rtol, "value_and_grad")
    assert_tree_close(pb.jit(pb.grad(f, argnums))(*args), want, rtol, "jit(grad)")
    check_jvp(f, args, argnums, rtol, eps)
    return got


def check_second_order(f: Callable, x: Any, rtol: float = 1e-5, eps: float = 1e-4) -> None:
    """The Hessian of a scalar function of one float (array) through ``pb.hessian``,
    grad of grad (along a direction for arrays) and forward over reverse, against second
    differences of the plain function."""
    want = numeric_hessian(f, x, eps)
    assert_tree_close(pb.hessian(f)(x), want, rtol, "hessian")
    assert_tree_close(pb.jit(pb.hessian(f))(x), want, rtol, "jit(hessian)")
    v = _like(x, np.random.default_rng(1).standard_normal(np.shape(x)))
    hv = np.tensordot(want, np.asarray(v, np.float64), np.ndim(x))
    if np.ndim(x) == 0:
        assert_tree_close(pb.grad(pb.grad(f))(x), want, rtol, "grad(grad)")
    else:
        grad_f = pb.grad(f)

        def along(y: Any) -> Any:
            return np.sum(grad_f(y) * v)

        assert_tree_close(pb.grad(along)(x), hv, rtol, "grad(grad . v)")
    _, tangent = pb.jvp(pb.grad(f), (x,), (v,))
    assert_tree_close(tangent, hv, rtol, "jvp(grad)")


# -- 1. Newton's method: tolerance loops, gradients w.r.t. the parameter ------------------


def newton_sqrt(a):
    x = a
    while abs(x * x - a) > 1e-13:
        x = 0.5 * (x + a / x)
    return x


def newton_cbrt(a):
    """Vectorised cube roots: the loop runs until the worst element converges."""
    x = np.ones_like(a)
    while np.max(np.abs(x**3 - a)) > 1e-12:
        x = x - (x**3 - a) / (3 * x * x)
    return np.sum(x * np.arange(1.0, a.size + 1.0))


def lambert_w(a):
    """w e^w = a."""
    w = np.log1p(a)
    while abs(w * np.exp(w) - a) > 1e-13:
        ew = np.exp(w)
        w = w - (w * ew - a) / (ew * (w + 1))
    return w


def kepler(m, e):
    """Kepler's equation E - e sin E = M for the eccentric anomaly E."""
    x = m
    while abs(x - e * np.sin(x) - m) > 1e-14:
        x = x - (x - e * np.sin(x) - m) / (1 - e * np.cos(x))
    return x


@pytest.mark.parametrize("a", [np.float64(0.3), np.float64(2.0), np.float64(50.0), 7.0])
def test_newton_sqrt(a):
    g = check_grad(newton_sqrt, a)
    assert type(g) is type(a)  # a NumPy float for a NumPy float, a float for a float
    np.testing.assert_allclose(g, 0.5 / np.sqrt(a), rtol=1e-10)


def test_newton_sqrt_float32():
    def relative(a):
        x = a
        while abs(x * x - a) > 1e-5 * a:
            x = 0.5 * (x + a / x)
        return x

    g = pb.grad(relative)(np.float32(2.0))
    assert g.dtype == np.float32
    np.testing.assert_allclose(g, numeric_grad(relative, [np.float64(2.0)]), rtol=1e-4)


def test_newton_cube_roots():
    a = np.array([0.5, 3.0, 8.0, 20.0])
    g = check_grad(newton_cbrt, a)
    np.testing.assert_allclose(g, np.arange(1, 5) / (3 * np.cbrt(a) ** 2), rtol=1e-10)


@pytest.mark.parametrize("a", [0.5, 4.0])
def test_newton_lambert_w(a):
    w = lambert_w(np.float64(a))
    g = check_grad(lambert_w, np.float64(a))
    np.testing.assert_allclose(g, w / (a * (1 + w)), rtol=1e-10)  # the implicit derivative


def test_newton_kepler_both_parameters():
    m, e = np.float64(1.1), np.float64(0.6)
    ecc = kepler(m, e)
    dm, de = check_grad(kepler, m, e, argnums=(0, 1))
    np.testing.assert_allclose(dm, 1 / (1 - e * np.cos(ecc)), rtol=1e-10)
    np.testing.assert_allclose(de, np.sin(ecc) / (1 - e * np.cos(ecc)), rtol=1e-10)


def test_newton_second_order():
    check_second_order(newton_sqrt, np.float64(2.0))
    check_second_order(lambert_w, np.float64(1.5))


# -- 2. An adaptive-step ODE integrator ---------------------------------------------------


def forced_oscillator(t, y, k):
    return np.stack([y[1], -k * y[0] - 0.3 * y[1] + np.sin(2 * t)])


def rk23(y0, k):
    """Bogacki-Shampine with step-size control: how many steps, and which are rejected,
    depends on the data."""
    t_end, tol = 3.0, 1e-5
    t, h, y = 0.0, 0.1, y0
    while t < t_end:
        h = min(h, t_end - t)
        k1 = forced_oscillator(t, y, k)
        k2 = forced_oscillator(t + 0.5 * h, y + 0.5 * h * k1, k)
        k3 = forced_oscillator(t + 0.75 * h, y + 0.75 * h * k2, k)
        y_new = y + h * (2 * k1 + 3 * k2 + 4 * k3) / 9
        k4 = forced_oscillator(t + h, y_new, k)
        err = h * np.max(np.abs(-5 * k1 / 72 + k2 / 12 + k3 / 9 - k4 / 8))
        if err <= tol:
            t = t + h
            y = y_new
        h = h * min(4.0, max(0.2, 0.9 * (tol / err) ** (1 / 3)))
    return y


def rk23_loss(y0, k):
    y = rk23(y0, k)
    return y[0] + 0.5 * y[1] ** 2


def euler_doubling(y0, k):
    """Explicit Euler on y' = -k y^3 + cos(t), one step of h against two of h/2: halve h
    while they disagree, double it after an easy step."""
    t, h, y = 0.0, 0.25, y0
    while t < 1.0:
        h = min(h, 1.0 - t)
        full = y + h * (-k * y**3 + np.cos(t))
        half = y + 0.5 * h * (-k * y**3 + np.cos(t))
        two = half + 0.5 * h * (-k * half**3 + np.cos(t + 0.5 * h))
        if abs(two - full) > 2e-3:
            h = h / 2
            continue
        t = t + h
        y = 2 * two - full
        if abs(two - full) < 2e-4:
            h = 2 * h
    return y


def test_rk23_gradient_initial_state_and_parameter():
    y0, k = np.array([1.0, 0.0]), np.float64(2.0)
    check_grad(rk23_loss, y0, k, argnums=(0, 1), rtol=1e-5)


def test_rk23_vjp_of_final_state():
    y0, k = np.array([0.5, -1.0]), np.float64(1.3)
    out, vjp_fn = pb.vjp(rk23, y0, k)
    np.testing.assert_allclose(out, rk23(y0, k), rtol=1e-12)
    c = np.array([0.7, -0.4])
    gy, gk = vjp_fn(c)
    want = numeric_grad(lambda y, kk: np.dot(c, rk23(y, kk)), [y0, k], (0, 1))
    assert_tree_close((gy, gk), want, 1e-5, "vjp")
    check_jvp(rk23, [y0, k], (0, 1), rtol=1e-5)


def staged_vjp(y0, k, c):
    """``pb.vjp`` inside staged code: the backward pass reads the forward pass's tape."""
    out, vjp_fn = pb.vjp(rk23, y0, k)
    gy, gk = vjp_fn(c)
    return out, gy, gk


def test_rk23_vjp_inside_jit():
    y0, k, c = np.array([0.5, -1.0]), np.float64(1.3), np.array([0.7, -0.4])
    out, gy, gk = pb.jit(staged_vjp)(y0, k, c)
    np.testing.assert_allclose(out, rk23(y0, k), rtol=1e-12)
    want = numeric_grad(lambda y, kk: np.dot(c, rk23(y, kk)), [y0, k], (0, 1))
    assert_tree_close((gy, gk), want, 1e-5, "staged vjp")


def test_euler_step_doubling():
    check_grad(euler_doubling, np.float64(0.8), np.float64(1.5), argnums=(0, 1), rtol=1e-5)


# -- 3. Bisection --------------------------------------------------------------------------


def bisect_cube_root(p):
    """Bisection on x^3 = p to a coarse tolerance, then one secant step: the result has a
    derivative close to the implicit one."""
    lo, hi = 0.0, p + 1.0
    while hi - lo > 1e-3:
        mid = 0.5 * (lo + hi)
        if mid**3 - p > 0:
            hi = mid
        else:
            lo = mid
    flo, fhi = lo**3 - p, hi**3 - p
    return lo - flo * (hi - lo) / (fhi - flo)


def bisect_vectorised(p):
    """Roots of x - cos(p x) for every p at once: np.where picks the half per element."""
    lo, hi = np.zeros_like(p), np.ones_like(p) * 2
    while np.max(hi - lo) > 1e-3:
        mid = 0.5 * (lo + hi)
        right = mid - np.cos(p * mid) > 0
        hi = np.where(right, mid, hi)
        lo = np.where(right, lo, mid)
    return np.sum(0.5 * (lo + hi) * p)


@pytest.mark.parametrize("p", [0.7, 5.0])
def test_bisection(p):
    g = check_grad(bisect_cube_root, np.float64(p), eps=1e-8, rtol=1e-5)
    np.testing.assert_allclose(g, 1 / (3 * np.cbrt(p) ** 2), rtol=1e-2)


def test_bisection_vectorised():
    check_grad(bisect_vectorised, np.array([0.3, 1.0, 1.7]), eps=1e-8, rtol=1e-5)


# -- 4. Recursion of data-dependent depth -----------------------------------------------


def exp_by_squaring(x):
    """exp(x) = exp(x/2)^2, halving until |x| is tiny."""
    if abs(x) < 1e-3:
        return 1 + x + x * x / 2 + x**3 / 6
    h = exp_by_squaring(x / 2)
    return h * h


def sin_by_triple_angle(x):
    if abs(x) < 1e-4:
        return x - x**3 / 6
    s = sin_by_triple_angle(x / 3)
    return 3 * s - 4 * s**3


def exp_series(x, term, k):
    """The Taylor series of exp: one recursion level per term until they are negligible."""
    if abs(term) < 1e-17:
        return term
    return term + exp_series(x, term * x / k, k + 1.0)


def series_exp(x):
    return exp_series(x, 1.0, 1.0)


def _dynamic_power(x, n):
    if n == 0:
        return np.ones_like(x)
    half = _dynamic_power(x, n // 2)
    return half * half * x if n % 2 == 1 else half * half


def dynamic_power(x, n):
    return np.sum(_dynamic_power(x, n))


# Repeated squaring (tripling) multiplies rounding errors by 2^depth (3^depth): central
# differences need a longer step than elsewhere.


@pytest.mark.parametrize("x", [0.01, 1.5, -4.0])
def test_recursive_halving(x):
    g = check_grad(exp_by_squaring, np.float64(x), eps=1e-4)
    np.testing.assert_allclose(g, np.exp(x), rtol=1e-6)


def test_recursive_triple_angle():
    g = check_grad(sin_by_triple_angle, np.float64(2.0), eps=1e-4)
    np.testing.assert_allclose(g, np.cos(2.0), rtol=1e-6)


def test_recursive_series():
    g = check_grad(series_exp, np.float64(1.3))
    np.testing.assert_allclose(g, np.exp(1.3), rtol=1e-10)


def test_recursive_power_with_dynamic_exponent():
    x = np.array([0.9, 1.1, -0.7])
    g = check_grad(dynamic_power, x, np.int64(11))
    np.testing.assert_allclose(g, 11 * x**10, rtol=1e-12)


@pytest.mark.slow  # 42 s: each of five transforms stages the recursion's derivative anew
def test_adaptive_simpson():
    a, b = np.float64(0.8), np.float64(1.7)
    da, db = check_grad(adaptive_simpson, a, b, 1e-7, argnums=(0, 1), rtol=1e-5)
    xs = np.linspace(0, 2, 20001)
    w = np.exp(-a * xs * xs)
    np.testing.assert_allclose(da, np.trapezoid(-xs * xs * w * np.cos(b * xs), xs), atol=1e-5)
    np.testing.assert_allclose(db, np.trapezoid(-xs * w * np.sin(b * xs), xs), atol=1e-5)


def test_recursion_second_order():
    check_second_order(exp_by_squaring, np.float64(0.9))
    check_second_order(series_exp, np.float64(-0.6))


# -- 5. Mutation: preallocated buffers, item writes, aliases and views ----------------------


def filled_buffer(x):
    n = x.shape[0]
    buf = np.zeros(n)
    for i in range(n):
        buf[i] = np.sin(x[i]) * x[i]
        buf[i] += x[(i + 1) % n] ** 2
        if i > 0:
            buf[i] += 0.5 * buf[i - 1]
    return np.sum(buf * buf)


def buffer_rows(x):
    """A 2-D buffer filled row by row: powers of x, then a recurrence across rows."""
    out = np.zeros((4, x.shape[0]))
    out[0] = 1.0
    for k in range(1, 4):
        out[k] = out[k - 1] * x
        out[k, 0] -= 0.5 * out[k - 1, -1]
    return np.sum(out * np.arange(1.0, 5.0)[:, None])


def iterates_in_buffer(a):
    """Newton iterates written to a preallocated buffer at a run-time cursor."""
    hist = np.zeros(12)
    x, k = a, 0
    while abs(x * x - a) > 1e-12:
        x = 0.5 * (x + a / x)
        hist[k] = x
        k += 1
    return np.sum(hist * hist)


def item_writes(x):
    x[1] = x[0] * x[2]
    x[0] += np.cos(x[1])
    x[2] *= x[0]
    return np.sum(x**2)


def dynamic_item_write(x):
    i = np.argmax(x)
    x[i] = x[i] * x[0] + 1
    x[-1] -= x[i]
    return np.sum(np.sin(x))


def alias_write(x):
    y = x
    y[0] = x[1] * 3
    y[2] += y[0]
    return np.sum(x * x) + y[0] * x[2]


def view_update(x):
    v = x[1:3]
    v *= 2
    x[0] = v[1] * x[3]
    v[0] += x[0]
    return np.sum(x**3) + np.sum(v)


def strided_views(x):
    v = x[::2]
    v *= 3
    w = v[1:]
    w += x[1]
    r = x[::-1]
    r[0] = x[0] * 2
    return np.sum(x**2)


def reshaped_and_transposed(a):
    t = a.T
    t[0] += 1.5 * t[1]
    r = a.reshape(3, 2)
    r[1] *= r[0]
    return np.sum(a**3)


def view_in_a_while_loop(x):
    v = x[1:]
    k = 0
    while np.sum(v) < 10:
        v[k % 3] += v[(k + 1) % 3] * 0.5 + 0.1
        k += 1
    return np.sum(x * x)


def write_in_a_branch(x):
    if x[0] > 0:
        x[1] = x[0] * 3
    else:
        x[2] = np.exp(x[0])
    return np.sum(x * x)


def matrix_view(a):
    col = a[:, 1]
    col += a[:, 0]
    row = a[2]
    row *= col[0]
    return np.sum(a * a) + np.prod(col)


@pytest.mark.parametrize("f, x", [
    (filled_buffer, np.array([0.3, -1.2, 0.8, 2.0])),
    (buffer_rows, np.array([0.5, 1.5, -0.7])),
    (item_writes, np.array([0.4, 1.1, -0.9])),
    (dynamic_item_write, np.array([0.2, 1.4, -0.6, 0.9])),
    (alias_write, np.array([0.3, 0.7, -1.1])),
    (view_update, np.array([0.2, 0.5, -0.6, 1.3])),
    (matrix_view, np.array([[0.5, -0.2], [1.1, 0.3], [-0.4, 0.9]])),
    (strided_views, np.array([0.5, 1.0, -0.3, 0.7, 0.2])),
    (reshaped_and_transposed, np.arange(6.0).reshape(2, 3) / 7),
    (view_in_a_while_loop, np.array([0.5, 1.0, -0.3, 0.7])),
    (write_in_a_branch, np.array([0.5, 1.0, -0.3])),
    (write_in_a_branch, np.array([-0.5, 1.0, -0.3])),
], ids=lambda v: getattr(v, "__name__", ""))
def test_mutation(f, x):
    before = x.copy()
    check_grad(f, x)
    np.testing.assert_array_equal(x, before)  # the caller's array is untouched


def argument_at_cursor(x):
    """Writes to the argument at a run-time cursor, in a loop that stops on the data."""
    k = 0
    while x[k] > 0 and k < x.shape[0] - 1:
        x[k + 1] += x[k] * 0.5
        k += 1
    return np.sum(x**2)


def test_buffer_written_in_a_while_loop():
    check_grad(iterates_in_buffer, np.float64(3.0))


@pytest.mark.parametrize("x", [[0.5, 0.3, -0.2, 0.7], [0.5, 0.3, 0.2, 0.7], [-0.5, 0.3, 0.2]])
def test_argument_written_at_a_run_time_cursor(x):
    x = np.array(x)
    check_grad(argument_at_cursor, x)


def test_mutation_second_order():
    check_second_order(filled_buffer, np.array([0.3, -1.2, 0.8]))
    check_second_order(view_update, np.array([0.2, 0.5, -0.6, 1.3]))


# -- 6. break, continue, early return; nested loops and branches -------------------------


def sum_until(x):
    s = 0.0
    for i in range(x.shape[0]):
        if s > 2.0:
            break
        s = s + x[i] ** 2
    return s * x[0]


def skip_negative(x):
    s = 0.0
    for v in x:
        if v < 0:
            continue
        s = s + np.exp(v) * v
    return s


def first_large(x):
    for i in range(x.shape[0]):
        if x[i] * x[i] > 2.0:
            return x[i] * np.sin(x[i])
    return np.sum(x)


def while_with_break(x):
    y, n = x, 0
    while True:
        y = np.cos(y) + 0.1 * y
        n += 1
        if abs(y - x) > 0.5 or n >= 20:
            break
    return y * n


def while_in_for(a):
    """An inner Newton loop per element: square roots of a vector."""
    out = 0.0
    for i in range(a.shape[0]):
        x = a[i]
        while abs(x * x - a[i]) > 1e-12:
            x = 0.5 * (x + a[i] / x)
        out = out + x * (i + 1)
    return out


def for_in_while(x):
    s, rounds = 0.0, 0
    while s < 10.0:
        for i in range(x.shape[0]):
            s = s + x[i] ** 2 * (rounds + 1)
        rounds += 1
    return s * np.sum(x)


def cond_in_while(x):
    """A float Collatz: halve large values, shrink small ones."""
    while x > 0.1:
        if x > 3:
            x = x / 2 + np.sin(x) * 0.1
        else:
            x = x * x * 0.3
    return x


def while_in_cond(x):
    if x > 1.0:
        while x > 1.0:
            x = np.sqrt(x) * 0.9
        y = x * 3
    else:
        y = np.exp(x)
        while y < 10:
            y = y * y + 0.5
    return y


def nested_whiles(x):
    s = 0.0
    while x > 0.2:
        y = x
        while y < 5:
            y = y * 1.7 + 0.1
        s = s + np.log(y) * x
        x = x * 0.6
    return s


def over_rows(a):
    s = 0.0
    for row in a:
        s = s + np.sum(np.tanh(row)) * row[0]
    return s


def for_else(x):
    for i in range(x.shape[0]):
        if x[i] > 2:
            y = x[i] * 2
            break
    else:
        y = np.sum(x)
    return y * x[0]


def early_return_in_while(x):
    k = 0.0
    while k < 50:
        x = x * 1.3 + 0.1
        if x > 10:
            return x * k
        k += 1
    return -x


@pytest.mark.parametrize("f, x", [
    (sum_until, np.array([0.5, 1.0, 0.9, 0.3, 2.0])),
    (sum_until, np.array([0.1, 0.2, 0.1])),
    (skip_negative, np.array([0.5, -1.0, 0.9, -0.3, 0.2])),
    (first_large, np.array([0.5, -1.0, -1.6, 3.0])),
    (first_large, np.array([0.5, -1.0, 0.9])),
    (while_with_break, np.float64(0.3)),
    (while_in_for, np.array([0.5, 2.0, 7.0])),
    (for_in_while, np.array([0.5, -0.9, 0.8])),
    (cond_in_while, np.float64(20.0)),
    (cond_in_while, np.float64(1.7)),
    (cond_in_while, np.float64(0.05)),  # the loop never runs
    (nested_whiles, np.float64(3.0)),
    (over_rows, np.arange(6.0).reshape(2, 3) / 5),
    (for_else, np.array([0.5, 1.0, 3.0])),
    (for_else, np.array([0.5, 1.0, 1.0])),
    (while_in_cond, np.float64(5.0)),
    (while_in_cond, np.float64(0.3)),
    (early_return_in_while, np.float64(0.7)),
    (early_return_in_while, np.float64(-2.0)),
], ids=lambda v: getattr(v, "__name__", ""))
def test_control(f, x):
    check_grad(f, x)


def run_time_range(x, n):
    for i in range(n):
        x = x * 1.1 + np.sin(x) * i
        if x > 50:
            break
    return x


@pytest.mark.parametrize("n", [0, 3, 9])
def test_loop_over_a_run_time_range(n):
    check_grad(run_time_range, np.float64(0.3), np.int64(n))


def long_loop(x, n):
    k = 0
    while k < n:
        x = x + 0.001 * np.sin(x) * x
        k += 1
    return x


def test_long_tape():
    """Thousands of iterations, each pushing its residuals on the tape."""
    check_grad(long_loop, np.float64(0.5), np.int64(2000))
    want = numeric_hessian(lambda y: long_loop(y, 2000), np.float64(0.5))
    assert_tree_close(pb.hessian(long_loop)(np.float64(0.5), np.int64(2000)), want, 1e-5,
                      "hessian")


# -- 7. Integers and booleans carry no derivative ----------------------------------------


def at_argmax(x):
    return x[np.argmax(x)]


def floor_times(x):
    return np.sum(np.floor(x) * x)


def sign_times(x):
    return np.sum(np.sign(x) * x)


def masked(x):
    return np.sum((x > 0) * x**2) + np.sum(np.where(x < 0, x, 0.0) * 3)


def as_int(x):
    return np.sum(x.astype(np.int64) * x)


def rounded(x):
    return np.sum(np.round(x) * x + (x // 0.5) * x + x % 0.5)


def clipped(x):
    return np.sum(np.clip(x, -1, 1) ** 2)


def sorted_by_argsort(x):
    return np.sum(x[np.argsort(x)] * np.arange(4.0))


def counted(x):
    return np.sum(x) * np.count_nonzero(x > 0)


def halvings(x):
    """How many halvings bring x below 1, times what is left."""
    n = 0
    while x > 1:
        x = x / 2
        n += 1
    return x * n


@pytest.mark.parametrize("f, want", [
    (at_argmax, lambda x: (x == x.max()).astype(float)),
    (floor_times, np.floor),
    (sign_times, np.sign),
    (masked, lambda x: np.where(x > 0, 2 * x, 3.0)),
    (as_int, lambda x: np.trunc(x)),
    (rounded, lambda x: np.round(x) + x // 0.5 + 1),
    (clipped, lambda x: np.where(np.abs(x) < 1, 2 * x, 0.0)),
    (sorted_by_argsort, lambda x: np.argsort(np.argsort(x)).astype(float)),
    (counted, lambda x: np.full(4, np.count_nonzero(x > 0), float)),
], ids=lambda v: getattr(v, "__name__", ""))
def test_integer_and_boolean_values(f, want):
    x = np.array([0.7, -1.4, 2.6, 1.2])
    np.testing.assert_array_equal(check_grad(f, x), want(x))


def test_counter():
    g = check_grad(halvings, np.float64(13.0))
    np.testing.assert_allclose(g, 4 / 16)


def test_integer_argument_is_held_fixed():
    x, n = np.array([0.5, 1.5]), np.int64(3)
    check_grad(lambda y, m: np.sum(y**m) * m, x, n)


# -- 8. What cannot be differentiated is refused; what does not matter is zero -------------


def test_grad_of_a_python_int_argument_is_refused():
    with pytest.raises(pb.CompileError, match=r"argument 1 \(3\) is a compile-time value"):
        pb.grad(lambda x, n: x * n, argnums=1)(2.0, 3)


def test_grad_of_an_integer_array_is_refused():
    with pytest.raises(pb.CompileError, match="argument 0 holds only integer or boolean values"):
        pb.grad(lambda x: np.sum(x * 2.0))(np.arange(3))
    with pytest.raises(pb.CompileError, match=r"argument 1 holds only integer .*\(i64\[\]\)"):
        pb.grad(lambda x, n: x * n, argnums=1)(2.0, np.int64(3))


@pytest.mark.parametrize("f", [lambda x: x * 2, lambda x: np.argmax(x)])
def test_grad_of_a_non_scalar_or_integer_result_is_refused(f):
    with pytest.raises(pb.CompileError, match="needs a function returning a float scalar"):
        pb.grad(f)(np.ones(3))


def test_argnums_out_of_range_is_refused():
    with pytest.raises(pb.CompileError, match="argnums=2 but the function is given 2"):
        pb.grad(lambda x, y: x * y, argnums=2)(1.0, 2.0)


def test_has_aux_needs_a_pair():
    with pytest.raises(pb.CompileError, match="must return a pair"):
        pb.grad(lambda x: x * 2.0, has_aux=True)(1.0)


@pytest.mark.parametrize("f", [
    lambda x, y: y * 2.0,
    lambda x, y: y * np.argmax(x),
    lambda x, y: y + np.sum(x > 0),
])
def test_result_independent_of_the_argument_gives_zeros(f):
    x = np.array([0.5, -1.0, 2.0])
    g = pb.grad(f)(x, np.float64(1.5))
    assert g.shape == (3,) and g.dtype == np.float64
    np.testing.assert_array_equal(g, np.zeros(3))


# -- 9. Higher order through loops and branches ------------------------------------------


def loop_with_branches(x):
    s, k = np.sum(x**2), 0
    while s < 20.0:
        if k % 2 == 0:
            x = x * 1.5 + np.sin(x)
        else:
            x = x * x * 0.5 + 1.0
        s = np.sum(x**2)
        k += 1
    return np.sum(np.cos(x) * x) + s * 0.01


def branchy(x):
    if x > 1:
        y = x**3
    else:
        y = np.exp(x) * x
    while y > 0.5:
        y = np.log1p(y)
    return y


def test_hessian_of_a_while_loop_with_branches():
    check_second_order(loop_with_branches, np.array([0.4, -0.3, 0.8]))


@pytest.mark.parametrize("x", [2.0, 0.5])
def test_grad_of_grad_through_branches(x):
    check_second_order(branchy, np.float64(x))


def test_third_order():
    x = np.float64(1.2)
    d3 = pb.grad(pb.grad(pb.grad(newton_sqrt)))(x)
    np.testing.assert_allclose(d3, 3 / 8 * x**-2.5, rtol=1e-8)


def test_transform_built_inside_staged_code():
    """``pb.grad(f)`` made while pullback stages the caller, as JAX code writes it."""
    def along(y):
        return np.sum(pb.grad(loop_with_branches)(y) * np.array([1.0, -2.0, 0.5]))

    x = np.array([0.4, -0.3, 0.8])
    hv = numeric_hessian(loop_with_branches, x) @ np.array([1.0, -2.0, 0.5])
    assert_tree_close(pb.jit(along)(x), numeric_grad(loop_with_branches, [x]) @
                      np.array([1.0, -2.0, 0.5]), 1e-6, "jit(grad)")
    assert_tree_close(pb.grad(along)(x), hv, 1e-5, "grad(grad)")


def test_hessian_with_respect_to_two_arguments():
    m, e = np.float64(1.1), np.float64(0.6)
    want = numeric_hessian(lambda z: kepler(z[0], z[1]), np.array([m, e]))
    got = pb.hessian(kepler, argnums=(0, 1))(m, e)
    assert_tree_close(np.array(got, np.float64), want, 1e-5, "hessian")


def test_reverse_over_reverse_through_vjp():
    """The derivative w.r.t. k of the vjp's k-cotangent: a second derivative of rk23."""
    y0, k = np.array([0.5, -1.0]), np.float64(1.3)

    def sensitivity(kk):
        _, vjp_fn = pb.vjp(rk23, y0, kk)
        return vjp_fn(np.array([1.0, 0.0]))[1]

    want = numeric_hessian(lambda z: rk23(y0, z)[0], k)
    assert_tree_close(pb.grad(sensitivity)(k), want, 1e-4, "grad(vjp)")


def _grow(v):
    return np.sin(v) * 0.5 + v * 1.2


def growth_loop(x, step=_grow):
    while x < 3:
        x = step(x) + 0.3
    return x * x


def test_checkpoint_inside_a_while_loop():
    """Against the same loop without the checkpoint, in plain Python."""
    x, grow = np.float64(0.2), pb.checkpoint(_grow)
    want = numeric_grad(growth_loop, [x])
    assert_tree_close(pb.grad(growth_loop)(x, grow), want, 1e-6, "grad")
    assert_tree_close(pb.jit(pb.grad(growth_loop))(x, grow), want, 1e-6, "jit(grad)")
    assert_tree_close(pb.hessian(growth_loop)(x, grow), numeric_hessian(growth_loop, x), 1e-5,
                      "hessian")


def test_jacobians_through_a_loop():
    def f(x):
        while np.sum(x * x) < 30:
            x = x * 1.7 + np.roll(x, 1) * 0.2
        return x

    x = np.array([0.3, -0.5, 0.9])
    want = np.stack([_difference(f, [x], [e], 1e-6) for e in np.eye(3)], axis=1)
    assert_tree_close(pb.jacfwd(f)(x), want, 1e-6, "jacfwd")
    assert_tree_close(pb.jacrev(f)(x), want, 1e-6, "jacrev")
    assert_tree_close(pb.jit(pb.jacrev(f))(x), want, 1e-6, "jit(jacrev)")


def test_jacfwd_in_one_pass_of_lanes_and_in_a_rolled_loop():
    """Up to ``FORWARD_JACOBIAN`` inputs: one forward pass with a lane per input element;
    more: a rolled loop of one-lane passes; none: an empty Jacobian.  All agree with
    reverse mode, through a data-dependent loop and a branch."""
    def f(x, s):
        k = 0
        while np.sum(x * x) < 30.0 and k < 50:
            x = np.where(x > 0, x * 1.3, x * 0.9) + np.roll(x, 1) * s
            k += 1
        return x[:2] * s

    for n in (1, 3, FORWARD_JACOBIAN, FORWARD_JACOBIAN + 4):
        x = np.linspace(-0.8, 0.9, n)
        for argnums in (0, (0, 1)):
            got, want = (pb.jit(jac(f, argnums))(x, 0.3) for jac in (pb.jacfwd, pb.jacrev))
            assert_tree_close(got, want, 1e-12, f"jacfwd, {n} inputs")
        ir = str(pb.make_ir(pb.jacfwd(f))(x, 0.3))
        assert ("for_loop" in ir) == (n > FORWARD_JACOBIAN)
    for jac in (pb.jacfwd, pb.jacrev):
        assert jac(lambda x: np.sum(x) * np.ones(2))(np.zeros(0)).shape == (2, 0)
        assert jac(lambda x: x[:0] * 2.0)(np.ones(3)).shape == (0, 3)


# -- 10. Pytrees of parameters ----------------------------------------------------------


@dataclasses.dataclass
class Params:
    w: np.ndarray
    b: np.float64
    steps: int


class Pair(NamedTuple):
    scale: np.ndarray
    shift: float


def fit_loss(p, xs, ys):
    """Loss of a tiny model iterated ``p.steps`` times, with early stopping on data."""
    h = xs
    for _ in range(p.steps):
        h = np.tanh(h * p.w + p.b)
        if np.max(np.abs(h)) < 0.05:
            break
    return np.mean((h - ys) ** 2)


def test_grad_of_a_dataclass():
    p = Params(np.array([0.5, -1.2, 0.8]), np.float64(0.1), 3)
    xs, ys = np.array([1.0, 0.5, -0.3]), np.array([0.2, -0.1, 0.4])
    g = check_grad(fit_loss, p, xs, ys)
    assert isinstance(g, Params) and g.steps is None and g.w.shape == (3,)


class Layer:
    """A registered pytree class: two float leaves and a static name."""

    def __init__(self, w, b, name):
        self.w, self.b, self.name = w, b, name


pb.register_pytree(Layer, lambda m: ((m.w, m.b), m.name), lambda name, ch: Layer(*ch, name))


class Schedule(NamedTuple):
    rate: float
    decay: np.ndarray


@dataclasses.dataclass(frozen=True)
class Model:
    layers: list
    schedule: Schedule
    meta: dict


def model_loss(m, x):
    h = x
    for layer in m.layers:
        h = np.tanh(layer.w @ h + layer.b)
    s = np.sum(h * h)
    while s < m.meta["target"]:
        s = s * (1 + m.schedule.rate) + np.sum(m.schedule.decay)
    return s


def test_grad_of_nested_containers():
    rng = np.random.default_rng(0)
    m = Model([Layer(rng.standard_normal((3, 3)) * 0.5, rng.standard_normal(3) * 0.1, "a"),
               Layer(rng.standard_normal((2, 3)) * 0.5, np.float64(0.1), "b")],
              Schedule(0.3, np.array([0.05, 0.02])), {"target": 2.0, "k": 3})
    gm, gx = check_grad(model_loss, m, np.array([0.5, -0.2, 0.9]), argnums=(0, 1))
    assert isinstance(gm, Model) and isinstance(gm.layers[1], Layer)
    assert gm.layers[1].name == "b" and isinstance(gm.schedule, Schedule)
    assert gm.meta["k"] is None and gm.meta["target"] == 0  # a threshold: no derivative
    assert gx.shape == (3,)


def test_grad_of_dicts_tuples_and_namedtuples():
    def f(d, t, pair):
        s = d["a"] * t[0] + np.sum(d["v"] ** 2) * t[1]
        while s < 5.0:
            s = s * pair.scale[0] + pair.shift
        return s + np.sum(pair.scale * d["v"])

    d = {"v": np.array([0.3, -0.4]), "a": np.float64(0.7)}
    t = (np.float64(1.2), 0.5)
    pair = Pair(np.array([1.6, 0.2]), 0.3)
    gd, gt, gpair = check_grad(f, d, t, pair, argnums=(0, 1, 2))
    assert isinstance(gd, dict) and isinstance(gt, tuple) and isinstance(gpair, Pair)


def test_argnums_tuple_skips_the_others():
    def f(x, y, z):
        while x < 4:
            x = x * y + z
        return x * z

    g = check_grad(f, np.float64(0.5), np.float64(1.5), np.float64(0.4), argnums=(0, 2))
    assert isinstance(g, tuple) and len(g) == 2


def test_has_aux():
    def f(x):
        n = 0
        while np.sum(x * x) < 10:
            x = x * 1.4
            n += 1
        return np.sum(np.sin(x)), (n, x)

    x = np.array([0.3, 0.4])
    g, (n, xf) = pb.grad(f, has_aux=True)(x)
    want_n, want_x = f(x.copy())[1]
    assert n == want_n
    np.testing.assert_allclose(xf, want_x, rtol=1e-12)
    assert_tree_close(g, numeric_grad(lambda y: f(y)[0], [x]), 1e-6, "grad with aux")
    (value, aux), g2 = pb.value_and_grad(f, has_aux=True)(x)
    np.testing.assert_allclose(value, f(x.copy())[0], rtol=1e-12)
    assert_tree_close(g2, g, 1e-12, "value_and_grad with aux")
