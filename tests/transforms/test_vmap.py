"""``pb.vmap`` as users call it: the API (axes, pytrees, sizes, errors), control flow on
batched data (branches, trip counts, recursion), masked effects, random keys, and the
compositions with ``jit`` and the derivatives — each against a Python loop over lanes,
on both backends."""

from __future__ import annotations

import functools

import numpy as np
import pytest

import pullback as pb

BACKENDS = ["interp", "c"]


def jitted(fn, backend):
    return pb.jit(fn, backend=backend)


def loop(fn, *args, in_axes=0):
    """The oracle: ``fn`` on each lane, results stacked along axis 0."""
    axes = in_axes if isinstance(in_axes, tuple) else (in_axes,) * len(args)
    size = next(np.shape(a)[ax] for a, ax in zip(args, axes, strict=True) if ax is not None)
    outs = [fn(*[a if ax is None else np.take(a, k, axis=ax)
                 for a, ax in zip(args, axes, strict=True)]) for k in range(size)]
    return pb.tree_map(lambda *xs: np.stack([np.asarray(x) for x in xs]), *outs)


def same(got, want):
    gl, gt = pb.tree_flatten(got)
    wl, wt = pb.tree_flatten(want)
    assert gt == wt
    for g, w in zip(gl, wl, strict=True):
        assert np.asarray(g).dtype == np.asarray(w).dtype
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12)


RNG = np.random.default_rng(0)
X = RNG.standard_normal((5, 3))
W = RNG.standard_normal((3, 4))


# -- the API --------------------------------------------------------------------------


@pytest.mark.parametrize("backend", BACKENDS)
def test_axes_and_unbatched_arguments(backend):
    def f(x, w, c):
        return np.tanh(x @ w) * c

    same(jitted(pb.vmap(f, in_axes=(0, None, None)), backend)(X, W, 2.0),
         loop(f, X, W, 2.0, in_axes=(0, None, None)))
    xt = X.T.copy()
    same(jitted(pb.vmap(f, in_axes=(-1, None, None)), backend)(xt, W, 2.0),
         loop(f, xt, W, 2.0, in_axes=(1, None, None)))
    got = pb.vmap(f, in_axes=(0, None, None), out_axes=1)(X, W, 2.0)
    same(got, np.moveaxis(loop(f, X, W, 2.0, in_axes=(0, None, None)), 0, 1))
    got = pb.vmap(f, in_axes=(0, None, None), out_axes=-1)(X, W, 2.0)
    assert got.shape == (4, 5)


def test_pytree_axes_mix_batched_and_unbatched_leaves():
    def f(p, x):
        return {"y": p["w"] @ x + p["b"], "n": np.sum(x)}

    p = {"w": RNG.standard_normal((2, 3)), "b": RNG.standard_normal((4, 2))}
    x = RNG.standard_normal((3, 4))
    got = pb.vmap(f, in_axes=({"w": None, "b": 0}, 1))(p, x)
    want = [f({"w": p["w"], "b": p["b"][k]}, x[:, k]) for k in range(4)]
    same(got, pb.tree_map(lambda *xs: np.stack(xs), *want))
    got = pb.vmap(f, in_axes=({"w": None, "b": 0}, 1), out_axes={"y": 1, "n": 0})(p, x)
    assert got["y"].shape == (2, 4) and got["n"].shape == (4,)


def test_out_axes_none_for_a_result_every_lane_shares():
    got = pb.vmap(lambda x, w: (x * 2, w.sum()), in_axes=(0, None),
                  out_axes=(0, None))(X, W)
    same(got[0], X * 2)
    np.testing.assert_allclose(got[1], W.sum())


def test_keyword_arguments_are_mapped_over_axis_0():
    same(pb.vmap(lambda x, *, s: x * s)(X, s=np.arange(5.0)),
         X * np.arange(5.0)[:, None])


def test_axis_size_when_nothing_is_mapped():
    got = pb.vmap(lambda w: w * 2, in_axes=None, axis_size=3)(W)
    same(got, np.stack([W * 2] * 3))


@pytest.mark.parametrize("backend", BACKENDS)
def test_no_lanes_run_nothing(backend):
    def f(x, k):
        assert x[0] > 100, "never checked"
        return x * 2, pb.random.bits(k, (2,))

    got = jitted(pb.vmap(f), backend)(np.zeros((0, 3)), np.zeros(0, np.int64))
    assert got[0].shape == (0, 3) and got[1].shape == (0, 2)


def test_static_results_are_stacked():
    got = pb.vmap(lambda x: (x, 1.5, None))(np.arange(3.0))
    assert got[2] is None
    same(got[1], np.full(3, 1.5))


@pytest.mark.parametrize(("call", "message"), [
    (lambda: pb.vmap(lambda x, y: x + y)(X, np.ones((4, 3))),
     "argument 0 (f64[5,3], axis 0) has size 5; argument 1 (f64[4,3], axis 0) has size 4"),
    (lambda: pb.vmap(lambda x, y: x + y, in_axes=(0,))(X, X), "one entry per positional"),
    (lambda: pb.vmap(lambda x: x, in_axes=2)(X), "in_axes=2 for argument 0"),
    (lambda: pb.vmap(lambda x, n: x * n)(X, 3), "argument 1 is int 3"),
    (lambda: pb.vmap(lambda x: x, in_axes=None)(X), "give axis_size="),
    (lambda: pb.vmap(lambda x: x, out_axes=None)(X), "out_axes=None for a result"),
    (lambda: pb.vmap(lambda x: x, axis_size=4)(X), "axis_size=4"),
])
def test_errors_name_the_argument(call, message):
    with pytest.raises(pb.CompileError, match=None) as e:
        call()
    assert message in str(e.value)


def test_nested_vmap_is_an_outer_product():
    def f(a, b):
        return np.sin(a) * b

    a, b = np.arange(3.0), np.arange(4.0)
    got = pb.vmap(pb.vmap(f, in_axes=(None, 0)), in_axes=(0, None))(a, b)
    same(got, np.sin(a)[:, None] * b[None, :])


class Scaler:
    def __init__(self, s):
        self.s = s

    def __call__(self, x):
        return x * self.s

    def apply(self, x):
        return np.tanh(x) + self.s


@pytest.mark.parametrize("make", [
    lambda: pb.jit(np.sin),
    lambda: pb.jit(lambda x: np.cos(x) * 2),
    lambda: functools.partial(lambda x, k: x ** k, k=3),
    lambda: Scaler(2.0),
    lambda: Scaler(1.5).apply,
    lambda: pb.grad(lambda x: np.sum(x ** 3)),
], ids=["jit-ufunc", "jit", "partial", "callable", "method", "grad"])
def test_any_callable(make):
    fn = make()
    same(pb.vmap(fn)(X), loop(fn, X))


def test_jitted_helper_and_transforms_built_in_a_loop():
    helper = pb.jit(lambda x: x * x + 1)

    @pb.jit
    def f(xs):
        total = 0.0
        for k in range(2):
            total = total + pb.vmap(lambda x, k=k: helper(x) * k)(xs)
        return total

    same(f(X), X * X + 1)


# -- control flow on batched data ---------------------------------------------------------


def halvings(x):
    n = 0
    while x > 1.0:
        x = x / 2
        n += 1
    return x, n


def piecewise(x):
    if x.sum() > 0:
        y = np.exp(x)
    elif x[0] < -1:
        y = -x
    else:
        y = x * 3
    return y


def partial_sum(n, x):
    acc = x * 0.0
    for i in range(n):
        acc = acc + x * i
    return acc


def strided(lo, hi, step, x):
    acc = 0.0
    for i in range(lo, hi, step):
        acc = acc * 0.5 + x * i
    return acc


def search(xs, target):
    i = 0
    while i < len(xs):
        if xs[i] >= target:
            return i
        i += 1
    return -1


def fib(n):
    if n < 2:
        return n
    return fib(n - 1) + fib(n - 2)


def gcd(a, b):
    if b == 0:
        return a
    return gcd(b, a % b)


@pytest.mark.parametrize("backend", BACKENDS)
def test_lanes_take_different_trip_counts(backend):
    xs = np.array([0.5, 3.0, 17.0, 1e6])
    got = jitted(pb.vmap(halvings), backend)(xs)
    same(got, loop(halvings, xs))
    assert len(set(got[1].tolist())) == 4


@pytest.mark.parametrize("backend", BACKENDS)
def test_many_lanes_run_in_chunks(backend):
    """A while loop of scalars over many lanes runs a chunk of lanes at a time, the last
    chunk overlapping the one before when the lanes do not divide evenly."""
    from pullback.transforms.vmap import CHUNK

    for n in (2 * CHUNK, 5 * CHUNK + 3):
        xs = np.exp(RNG.uniform(-2, 12, n))
        same(jitted(pb.vmap(halvings), backend)(xs), loop(halvings, xs))
        same(jitted(pb.vmap(checked_sqrt), backend)(xs), loop(checked_sqrt, xs))
    assert str(pb.make_ir(pb.vmap(halvings))(xs)).count("for_loop") == 1


@pytest.mark.parametrize("backend", BACKENDS)
def test_lanes_take_different_branches(backend):
    xs = np.array([[1.0, 2.0], [-2.0, 0.5], [-0.5, 0.1], [0.3, -0.2]])
    same(jitted(pb.vmap(piecewise), backend)(xs), loop(piecewise, xs))


@pytest.mark.parametrize("backend", BACKENDS)
def test_for_loop_with_batched_bounds(backend):
    ns = np.array([0, 3, 5, 1])
    same(jitted(pb.vmap(partial_sum, in_axes=(0, None)), backend)(ns, X[0]),
         loop(partial_sum, ns, X[0], in_axes=(0, None)))
    lo, hi = np.array([0, 5, 2, -3]), np.array([7, -2, 2, 4])
    step = np.array([2, -3, 1, 1])
    args = (lo, hi, step, np.array([1.0, 2.0, 3.0, 4.0]))
    same(jitted(pb.vmap(strided), backend)(*args), loop(strided, *args))


@pytest.mark.parametrize("backend", BACKENDS)
def test_return_and_break_in_batched_loops(backend):
    xs = np.sort(RNG.standard_normal((4, 6)), axis=1)
    targets = np.array([-5.0, 0.0, 0.5, 9.0])
    same(jitted(pb.vmap(search), backend)(xs, targets), loop(search, xs, targets))


@pytest.mark.parametrize("backend", BACKENDS)
def test_recursion_on_batched_arguments(backend):
    ns = np.array([1, 5, 10, 0, 7])
    same(jitted(pb.vmap(fib), backend)(ns), loop(fib, ns))
    a, b = np.array([12, 35, 7, 100]), np.array([18, 14, 0, 75])
    same(jitted(pb.vmap(gcd), backend)(a, b), loop(gcd, a, b))


def test_a_batched_loop_is_one_native_loop():
    """The batched while loop runs over the live lanes in one loop, not a loop per lane."""
    def newton(a):
        x = a
        while abs(x * x - a) > 1e-12 * a:
            x = 0.5 * (x + a / x)
        return x

    ir = str(pb.make_ir(pb.vmap(newton))(np.array([2.0, 9.0, 1e6])))
    assert ir.count("while_loop") == 1 and "for_loop" not in ir and "call" not in ir


# -- effects --------------------------------------------------------------------------------


def checked_sqrt(x):
    if x > -10:
        assert x >= 0, f"negative: {x}"
    return np.sqrt(np.abs(x))


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_check_fails_only_for_a_lane_that_reaches_it(backend):
    f = jitted(pb.vmap(checked_sqrt), backend)
    xs = np.array([4.0, -20.0, 9.0])  # the negative lane skips the assert
    same(f(xs), loop(checked_sqrt, xs))
    with pytest.raises(AssertionError, match="negative: -3.0"):
        f(np.array([4.0, -3.0, -5.0, -20.0]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_index_errors_in_lanes(backend):
    def pick(xs, i):
        return xs[i]

    f = jitted(pb.vmap(pick, in_axes=(None, 0)), backend)
    same(f(X[0], np.array([0, 2, -1])), X[0][[0, 2, -1]])
    with pytest.raises(IndexError, match="index 7 is out of bounds"):
        f(X[0], np.array([0, 7, 9]))


def guarded_index(xs, i):
    if i < len(xs):
        return xs[i]
    return -1.0


@pytest.mark.parametrize("backend", BACKENDS)
def test_lanes_a_branch_turns_off_read_nothing_out_of_bounds(backend):
    same(jitted(pb.vmap(guarded_index, in_axes=(None, 0)), backend)(X[0], np.array([1, 5, 2])),
         np.array([X[0][1], -1.0, X[0][2]]))


@pytest.mark.parametrize("backend", BACKENDS)
def test_lanes_a_branch_turns_off_factorise_nothing_singular(backend):
    def f(a, s):
        if s > 0:
            return np.linalg.cholesky(a)
        return a

    a = np.stack([np.stack([np.eye(3) * (k + 1)] * 2) for k in range(3)])
    a[1] = -1.0  # not positive definite: its lane skips the factorisation
    s = np.array([1.0, -1.0, 2.0])
    same(jitted(pb.vmap(f), backend)(a, s), loop(f, a, s))


def test_prints_are_per_live_lane(capfd):
    def f(x):
        if x > 1:
            print("big", x)
        return x

    pb.vmap(f)(np.array([0.5, 2.0, 3.0]))
    assert capfd.readouterr().out == "big 2.0\nbig 3.0\n"


# -- random keys -----------------------------------------------------------------------------


def test_random_keys_split_per_lane():
    keys = pb.random.split(pb.random.key(0), 4)

    def draw(k):
        return pb.random.normal(k, (3,))

    got = pb.vmap(draw)(keys)
    same(got, loop(draw, keys))
    assert len({tuple(r) for r in got.tolist()}) == 4


# -- composition -------------------------------------------------------------------------------


def mlp_loss(w, x):
    return np.sum(np.tanh(x @ w) ** 2)


def trip_loss(w, x):
    h = x
    n = 0
    while np.sum(h * h) < 10.0 and n < 50:
        h = np.tanh(h @ w) * 1.5 + h
        n += 1
    return np.sum(h)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("loss", [mlp_loss, trip_loss])
def test_per_example_gradients(loss, backend):
    w = RNG.standard_normal((3, 3)) * 0.3
    x = RNG.standard_normal((4, 3)) * np.array([[0.1], [1], [2], [0.5]])
    want = np.stack([pb.grad(loss)(w, xi) for xi in x])
    same(jitted(pb.vmap(pb.grad(loss), in_axes=(None, 0)), backend)(w, x), want)
    same(jitted(pb.grad(lambda w: np.sum(pb.vmap(loss, in_axes=(None, 0))(w, x))),
                backend)(w), want.sum(0))


@pytest.mark.parametrize("backend", BACKENDS)
def test_gradients_through_recursion_per_lane(backend):
    def rec(x, n):
        if n == 0:
            return x
        return np.sin(rec(x * 1.1, n - 1))

    def loss(x, n):
        return np.sum(rec(x, n))

    ns = np.array([1, 3, 0, 2])
    x = RNG.standard_normal((4, 3))
    want = np.stack([pb.grad(loss)(xi, n) for xi, n in zip(x, ns, strict=True)])
    same(jitted(pb.vmap(pb.grad(loss)), backend)(x, ns), want)


def test_jvp_of_vmap_and_vmap_of_jvp():
    v = RNG.standard_normal(X.shape)
    out, tan = pb.jvp(pb.vmap(np.sin), (X,), (v,))
    same(out, np.sin(X))
    same(tan, np.cos(X) * v)
    out, tan = pb.vmap(lambda x, t: pb.jvp(np.sin, (x,), (t,)))(X, v)
    same(tan, np.cos(X) * v)


@pytest.mark.parametrize("backend", BACKENDS)
def test_jacobians_are_vmap_of_one_pass(backend, monkeypatch):
    """A loop-free function's jacfwd/jacrev push every basis vector through one batched
    pass (matrix-matrix products, no loop over rows) and agree with the rolled loop."""
    from pullback.derivatives import jacobians

    ws = [RNG.standard_normal((12, 12)) / 3 for _ in range(2)]

    def f(x, b):
        for w in ws:
            x = np.tanh(w @ x + b)
        return x, np.sum(x * x)

    x, b = RNG.standard_normal(12), RNG.standard_normal(12)
    batched = [jitted(jac(f, (0, 1)), backend)(x, b) for jac in (pb.jacfwd, pb.jacrev)]
    for jac in (pb.jacfwd, pb.jacrev):
        ir = str(pb.make_ir(jac(f, (0, 1)))(x, b))
        assert "for_loop" not in ir and "dot_general" in ir
    monkeypatch.setattr(jacobians, "BATCHED_JACOBIAN", 0)

    def g(x, b):  # a function of its own: compiled anew, not found in f's cache
        return f(x, b)

    rolled = [jitted(jac(g, (0, 1)), backend)(x, b) for jac in (pb.jacfwd, pb.jacrev)]
    assert "for_loop" in str(pb.make_ir(pb.jacrev(g, (0, 1)))(x, b))
    for got, want in zip(batched, rolled, strict=True):
        for g, w in zip(pb.tree_leaves(got), pb.tree_leaves(want), strict=True):
            np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
    for g, w in zip(pb.tree_leaves(batched[0]), pb.tree_leaves(batched[1]), strict=True):
        np.testing.assert_allclose(g, w, rtol=1e-10, atol=1e-12)
