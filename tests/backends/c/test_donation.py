"""``pb.jit(f, donate_argnums=...)``: arrays the caller hands over hold the results of
their shape and dtype, updated in place where the code allows it; the results are those
of the function without donation, whatever the arguments (read-only, overlapping, the
same array twice)."""

from __future__ import annotations

import dataclasses
import re

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c.build import compiler

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")


@dataclasses.dataclass
class Params:
    w: np.ndarray
    b: np.ndarray
    steps: int = pb.field(static=True, default=0)


def loss(p, x, y):
    return np.mean((np.tanh(x @ p.w + p.b) - y) ** 2)


def sgd_step(p, m, x, y, lr):
    """A training step with momentum: parameters and optimiser state both come back."""
    value, g = pb.value_and_grad(loss)(p, x, y)
    m = pb.tree_map(lambda mi, gi: 0.9 * mi + gi, m, g)
    p = pb.tree_map(lambda pi, mi: pi - lr * mi, p, m)
    return p, m, value


def _data(seed=0):
    rng = np.random.default_rng(seed)
    p = Params(rng.normal(size=(6, 4)) * 0.5, rng.normal(size=4) * 0.1)
    m = Params(np.zeros((6, 4)), np.zeros(4))
    return p, m, rng.normal(size=(16, 6)), rng.normal(size=(16, 4))


def _copy(tree):
    return pb.tree_map(np.copy, tree)


def test_a_training_step_updates_the_handed_over_arrays_in_place():
    p, m, x, y = _data()
    plain = pb.jit(sgd_step, backend="c")
    donating = pb.jit(sgd_step, backend="c", donate_argnums=(0, 1))
    lowered = donating.lower(p, m, x, y, 0.1)
    assert len(lowered.donated) == 4  # w, b and their momenta
    assert "q1 +=" in lowered.loops or "q1[i] =" in lowered.loops  # in place, no copy
    a, ma = _copy(p), _copy(m)
    b, mb = _copy(p), _copy(m)
    for step in range(4):
        a, ma, la = plain(a, ma, x, y, 0.1)
        before = (b.w, b.b, mb.w, mb.b)
        b, mb, lb = donating(b, mb, x, y, 0.1)
        assert la == lb
        for u, v in zip(pb.tree_leaves((a, ma)), pb.tree_leaves((b, mb)), strict=True):
            np.testing.assert_array_equal(u, v)
        if step > 0:  # the first call converts on the general path and returns copies
            assert all(u is v for u, v in zip(before, (b.w, b.b, mb.w, mb.b), strict=True))


def _reads_after(w, v):
    """Results computed while the handed-over ``w`` is still to be read."""
    first = w * 2.0
    second = np.sin(w) + v
    return first, second, w, np.sum(w * first)


@pytest.mark.parametrize("how", ["fresh", "read-only", "overlapping", "same twice"])
def test_results_do_not_depend_on_which_memory_holds_them(how):
    rng = np.random.default_rng(1)
    base = rng.normal(size=12)
    w, v = base[:8].copy(), base[4:].copy()
    if how == "read-only":
        w.flags.writeable = False
    elif how == "overlapping":
        w, v = base[:8], base[4:]
    elif how == "same twice":
        v = w
    want = pb.jit(_reads_after, backend="c")(w.copy(), v.copy())
    for g, e in zip(want, _reads_after(w.copy(), v.copy()), strict=True):
        np.testing.assert_allclose(g, e, rtol=1e-15)
    kept = w.copy()
    f = pb.jit(_reads_after, backend="c", donate_argnums=0)
    for _ in range(2):  # the general path, then the fast one
        got = f(w if how != "fresh" else w.copy(), v)
        for g, e in zip(got, want, strict=True):
            np.testing.assert_array_equal(g, e)
    if how != "fresh":  # not written in place: read-only, or shared with another argument
        np.testing.assert_array_equal(w, kept)


def test_donated_arguments_in_loops_and_branches():
    def f(w, n, flag):
        for i in range(n):
            w = w * 0.5 + i
        if flag > 0:
            w = w[::-1].copy()
        return w, np.float64(n)

    w = np.arange(5.0)
    want = f(w.copy(), 3, 1.0)
    got = pb.jit(f, backend="c", donate_argnames="w")(w.copy(), 3, 1.0)
    np.testing.assert_array_equal(got[0], want[0])


def test_donate_argnums_are_checked():
    with pytest.raises(ValueError, match="donate_argnums"):
        pb.jit(loss, donate_argnums=3)


def test_an_adam_step_is_one_kernel_per_leaf_in_place():
    """loss -> grad -> Adam -> apply_updates: each parameter's first and second moments
    and the parameter itself are written by one kernel, into the arrays handed over
    (the schedule's scalars do not split it)."""
    opt = pb.optim.adam(pb.optim.cosine_decay(1e-2, 100))

    def step(p, state, x, y):
        g = pb.grad(loss)(p, x, y)
        updates, state = opt.update(g, state, p)
        return pb.optim.apply_updates(p, updates), state

    p, _, x, y = _data()
    lowered = pb.jit(step, backend="c", donate_argnums=(0, 1)).lower(p, opt.init(p), x, y)
    kernels = lowered.loops.split("kernel ")[1:]
    writes = [sorted(set(re.findall(r"\b(q\d+)\[i\] =", k))) for k in kernels]
    updates = [w for w in writes if len(w) == 3]
    assert len(updates) == 2, writes  # w and b: mu, nu and the parameter each
    assert len({q for w in updates for q in w}) == 6
