"""Loops over array elements made vectorisable (``loops/stencils.py``): the reverse sweep of
a stencil loop adds its values at several offsets after the loop, in the order the loop
added them, and sums its scalar cotangents in vector partial sums.  Derivatives against
float64 central differences; the added-in arrays against the loop as it was, bit for bit;
primal values against plain Python."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb
from pullback.backends import c
from pullback.backends.c import pipeline
from pullback.backends.c.build import compiler
from pullback.backends.c.loops import passes
from pullback.backends.c.loops.ir import (
    Alloc,
    Const,
    Decl,
    Int,
    Load,
    Loop,
    LoopFunc,
    Move,
    Op,
    Param,
    Pointer,
    Scope,
    Set,
    Sym,
    walk,
)
from pullback.backends.c.loops.stencils import gather_stencils
from pullback.ir.types import TensorType, float64

from .differences import central_difference

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

STEPS = 3


def heat3(u0, a):
    u = u0.copy()
    n = u.shape[0]
    for _ in range(STEPS):
        new = u.copy()
        for i in range(1, n - 1):
            new[i] = u[i] + a * (u[i - 1] - 2.0 * u[i] + u[i + 1])
        u = new
    return np.sum(u * u)


def heat5(u0, a):
    u = u0.copy()
    n = u.shape[0]
    for _ in range(STEPS):
        new = u.copy()
        for i in range(2, n - 2):
            new[i] = u[i] + a * (-u[i - 2] + 16.0 * u[i - 1] - 30.0 * u[i] + 16.0 * u[i + 1]
                                 - u[i + 2]) / 12.0
        u = new
    return np.sum(u * u * u)


def upwind(u0, a):  # offsets on one side only
    u = u0.copy()
    n = u.shape[0]
    for _ in range(STEPS):
        new = u.copy()
        for i in range(2, n):
            new[i] = u[i] - a * (3.0 * u[i] - 4.0 * u[i - 1] + u[i - 2])
        u = new
    return np.sum(np.sin(u))


def _grad(f, u0, a):
    return pb.jit(pb.grad(f, argnums=(0, 1)), backend="c")(u0, a)


def _check(f, u0, a, rtol):
    du, da = _grad(f, u0, a)
    x64 = u0.astype(np.float64)
    want_u = central_difference(lambda x: f(x, float(a)), x64)
    want_a = central_difference(lambda v: f(x64, float(v[0])), np.array([float(a)]))[0]
    assert du.dtype == u0.dtype
    np.testing.assert_allclose(du, want_u, rtol=rtol, atol=rtol)
    np.testing.assert_allclose(da, want_a, rtol=rtol, atol=rtol)


@pytest.mark.parametrize("f", [heat3, heat5, upwind])
@pytest.mark.parametrize("n", [3, 4, 5, 7, 13, 40])  # short ones: fewer trips than lanes
def test_stencil_gradients_match_central_differences(f, n):
    u0 = np.sin(np.linspace(0.0, 3.0, n)) + 0.1 * np.cos(np.linspace(0.0, 40.0, n))
    _check(f, u0, 0.2, 1e-6)


@pytest.mark.parametrize("f", [heat3, heat5])
def test_float32_stencil_gradients(f):
    u0 = (np.sin(np.linspace(0.0, 3.0, 21)) + 0.5).astype(np.float32)
    _check(f, u0, np.float32(0.2), 2e-3)


def _heat_step(u, a):  # a jitted helper the solver calls each step
    new = u.copy()
    for i in range(1, u.shape[0] - 1):
        new[i] = u[i] + a * (u[i - 1] - 2.0 * u[i] + u[i + 1])
    return new


_jitted_step = pb.jit(_heat_step, backend="c")


def heat_helper(u0, a):
    u = u0.copy()
    for _ in range(STEPS):
        u = _jitted_step(u, a)
    return np.sum(u * u)


def test_every_composition_gives_the_same_stencil_gradient():
    """grad(jit(f)) and jit(grad(f)), the step as a jitted helper, and a transform built
    anew each time round a loop agree with central differences."""
    u0 = np.sin(np.linspace(0.0, 3.0, 17))
    want = central_difference(lambda x: heat3(x, 0.2), u0)
    for got in (pb.grad(pb.jit(heat3, backend="c"))(u0, 0.2),
                pb.jit(pb.grad(heat_helper), backend="c")(u0, 0.2),
                pb.grad(heat_helper)(u0, 0.2)):
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)
    for scale in (1.0, 2.0):  # built inline, each time round
        got = pb.jit(pb.grad(heat3), backend="c")(scale * u0, 0.2)
        want = central_difference(lambda x: heat3(x, 0.2), scale * u0)
        np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


def _adjoint_loops(fn, *args):
    src = c.source_of(pb.jit(fn, backend="c").lower(*args).ir)
    stmts = [s for f in src.module.funcs for s in walk(f.body)]
    return [s for s in stmts if isinstance(s, Loop) and s.adjoint], stmts, src


def test_the_reverse_sweep_is_a_simd_loop_and_gathers():
    u0 = np.linspace(0.0, 1.0, 40)
    adjoint, stmts, src = _adjoint_loops(pb.grad(heat3, argnums=(0, 1)), u0, 0.2)
    assert len(adjoint) == 2  # the steps' reverse, and the sweep over elements in it
    (sweep,) = [s for s in adjoint if s.pragma]
    assert sweep.pragma == "simd" and len(sweep.reductions) == 1
    body = [t for t in walk(sweep.body) if isinstance(t, (Decl, Set))]
    assert not [t for t in body if "pb_clamp" in repr(t)], "index arithmetic evaluated"
    # the cotangent of u, added into at i-1, i, i+1: after the sweep, in five stretches
    # (one element, one, the 36 that get all three terms, one, one)
    gathers = [s for s in stmts if isinstance(s, Loop) and s.var.endswith("_j")]
    assert [(g.start.value, g.stop.value) for g in gathers] == \
        [(0, 1), (1, 2), (2, 38), (38, 39), (39, 40)]
    assert all(g.pragma == "simd" for g in gathers)
    assert "#pragma omp simd reduction(+:" in src.text
    # the values' buffers are allocated once a call, not once a step
    top = [s.name for s in src.module.funcs[0].body if isinstance(s, Alloc)]
    assert [t for t in top if t.startswith(sweep.var + "_t")] == \
        [f"{sweep.var}_t0", f"{sweep.var}_t1"]


def _compiled(fn, args, stencils: bool, monkeypatch):
    ir = pb.jit(fn, backend="c").lower(*args).ir
    with monkeypatch.context() as m:
        if not stencils:
            m.setattr(passes, "LOOP_PASSES",
                      [p for p in passes.LOOP_PASSES if p[0] != "stencils"])
        return ir, pipeline.run(ir)


@pytest.mark.parametrize("f", [heat3, heat5])
def test_added_in_cotangents_are_the_same_bits(f, monkeypatch):
    u0 = np.cos(np.linspace(0.0, 2.0, 13))
    grad = pb.grad(f, argnums=(0, 1))
    ir, new = _compiled(grad, (u0, 0.3), True, monkeypatch)
    _, old = _compiled(grad, (u0, 0.3), False, monkeypatch)
    assert "reduction(+:" in new.source and "reduction(+:" not in old.source
    args = [u0 if t.shape else np.float64(0.3) for t in ir.in_types]
    (du_new, da_new), (du_old, da_old) = new(*args), old(*args)
    np.testing.assert_array_equal(du_new, du_old)  # each element's terms in loop order
    np.testing.assert_allclose(da_new, da_old, rtol=1e-13)  # a sum reordered


def scatter(x, w):
    out = np.zeros(x.shape[0])
    for i in range(1, x.shape[0] - 1):
        out[i - 1] += w * x[i]
        out[i + 1] += x[i] * x[i]
        out[i - 1] += x[i]
    return out


def test_a_primal_loop_adding_at_offsets_keeps_python_s_values():
    x = np.random.default_rng(0).standard_normal(11)
    _, stmts, _ = _adjoint_loops(scatter, x, 0.3)
    assert [s for s in stmts if isinstance(s, Loop) and s.var.endswith("_j")]
    want = np.zeros(11)
    for i in range(1, 10):
        want[i - 1] += 0.3 * x[i]
        want[i + 1] += x[i] * x[i]
        want[i - 1] += x[i]
    np.testing.assert_array_equal(pb.jit(scatter, backend="c")(x, 0.3), want)


def running(x, w):
    out = x.copy()
    for i in range(1, x.shape[0]):
        out[i] = out[i] + w * out[i - 1]
    return np.sum(out * out)


def test_a_loop_reading_what_it_adds_into_is_left_alone():
    x = np.linspace(0.5, 1.5, 12)
    adjoint, _, _ = _adjoint_loops(pb.grad(running, argnums=(0, 1)), x, 0.7)
    assert adjoint and all(not s.pragma for s in adjoint)
    _check(running, x, 0.7, 1e-6)


def total(x):
    s = 0.0
    for i in range(x.shape[0]):
        s = s + x[i] * x[i]
    return s


def test_a_primal_sum_keeps_its_order():
    x = np.random.default_rng(1).standard_normal(101) * 10.0 ** np.arange(-50, 51)
    _, stmts, src = _adjoint_loops(total, x)
    assert "reduction(+:" not in src.text
    want = 0.0
    for v in x:
        want = want + v * v
    assert pb.jit(total, backend="c")(x) == want


def _hand_loop(placed: bool, adjoint: bool) -> LoopFunc:
    """``acc += w[i] * d[i]; d[i] += 1`` over 8 elements: ``w`` a buffer of its own, or
    placed one element into ``d``."""
    f64 = TensorType((16,), float64)
    w = Pointer("w", "double", Sym("d") + 1) if placed else Pointer("w", "double", Sym("p1"))
    body = [Decl("x", "double", Load(Sym("d"), Sym("i"))),
            Decl("y", "double", Op("add", (Sym("x"), Const(1.0, float64)), float64)),
            Decl("t", "double", Op("mul", (Load(Sym("w"), Sym("i")), Sym("x")), float64)),
            Decl("s", "double", Op("add", (Sym("acc"), Sym("t")), float64)),
            Set(Load(Sym("d"), Sym("i")), Sym("y")),
            Move(Sym("acc"), Sym("s"))]
    return LoopFunc("f", [Param("p0", f64), Param("p1", f64)], [
        Pointer("d", "double", Sym("p0")), w, Decl("acc", "double"),
        Loop("i", Int(8), [Scope(body)], adjoint=adjoint)])


@pytest.mark.parametrize("placed, adjoint, rewritten", [
    (False, True, True),
    (True, True, False),  # w[i] is d[i + 1], which iteration i + 1 writes
    (False, False, False),  # a primal float sum keeps its order
])
def test_only_independent_iterations_become_simd(placed, adjoint, rewritten):
    func = _hand_loop(placed, adjoint)
    gather_stencils(func)
    (loop,) = [s for s in func.body if isinstance(s, Loop)]
    assert (loop.pragma == "simd") is rewritten
    assert loop.reductions == (("reduction(+:acc)",) if rewritten else ())
