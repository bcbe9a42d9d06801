"""A kernel local read once, in a branch of a test of the loop index (a pad's operand,
read past its end where the pad is outside), is computed in that branch
(``loops/guarded.py``).  Computed for every element, it read a constant table one past
its end, and GCC, taking that for proof that the loop stops sooner, dropped its exit
test: the gradient of one Runge-Kutta step crashed."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c.build import compiler
from pullback.backends.c.loops.guarded import guard_locals
from pullback.backends.c.loops.ir import Bin, Cond, Const, Decl, Int, Load, Loop, Set, Sym
from pullback.ir.types import float64

from .differences import central_difference

I = Sym("i")


def _kernel(*stmts) -> Loop:
    return Loop("i", Int(7), list(stmts), pragma="simd")


def _shifted_pad(test=None) -> list:
    """t = x[i + 1]; u = i < 6 ? t : 0; out[i] = u."""
    inside = Bin("<", I, Int(6)) if test is None else test
    return [Decl("t", "double", Load(Sym("x"), I + 1)),
            Decl("u", "double", Cond(inside, Sym("t"), Const(0.0, float64)))]


def test_a_local_read_under_a_test_of_the_index_moves_into_the_branch():
    (loop,) = guard_locals([_kernel(*_shifted_pad(), Set(Load(Sym("out"), I), Sym("u")))])
    assert [s.name for s in loop.body[:-1]] == ["u"]
    value = loop.body[0].init
    assert isinstance(value, Cond) and isinstance(value.a, Load) and value.a.ptr.name == "x"


def test_locals_read_twice_or_elsewhere_stay():
    twice = _kernel(*_shifted_pad(), Set(Load(Sym("out"), I), Bin("+", Sym("u"), Sym("t"))))
    data = _kernel(*_shifted_pad(Bin("<", Sym("y"), Int(0))),
                   Set(Load(Sym("out"), I), Sym("u")))
    stored = _kernel(Decl("t", "double", Load(Sym("x"), I + 1)),
                     Set(Load(Sym("x"), I), Const(1.0, float64)),
                     Decl("u", "double", Cond(Bin("<", I, Int(6)), Sym("t"),
                                              Const(0.0, float64))),
                     Set(Load(Sym("out"), I), Sym("u")))
    for loop in (twice, data, stored):
        names = [s.name for s in loop.body if isinstance(s, Decl)]
        (after,) = guard_locals([loop])
        assert [s.name for s in after.body if isinstance(s, Decl)] == names


pytestmark_c = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")


def rhs(x, y):
    return x * np.concatenate((np.ones(1), y[:-1]))


def one_step(x):
    """One Runge-Kutta step from zero, no loop: the seed of ``[-1]`` is a constant table."""
    y, h = np.zeros_like(x), 2.0
    k1 = rhs(x, y)
    k2 = rhs(x, y + h * k1 / 2)
    k3 = rhs(x, y + h * k2 / 2)
    k4 = rhs(x, y + h * k3)
    return (y + h * (k1 + 2 * k2 + 2 * k3 + k4) / 6)[-1]


@pytestmark_c
@pytest.mark.parametrize("n", [3, 4, 5, 6, 7, 8, 9])
def test_gradient_of_a_step_whose_seed_is_a_constant_table(n, monkeypatch):
    monkeypatch.delenv("PULLBACK_CFLAGS", raising=False)  # -O3 as users build: at the
    # suite's -O1, GCC did not drop the loop's exit test
    x = np.random.default_rng(n).random(n) + 0.5
    got = pb.jit(pb.grad(one_step), backend="c")(x)
    np.testing.assert_allclose(got, central_difference(one_step, x), rtol=1e-7, atol=1e-9)
