"""The whole corpus through the pipeline: the IR ``pb.jit`` stages for every program and
input case, and for the differentiable programs the IR of ``pb.grad`` (scalar results)
and of a ``pb.vjp`` pullback, each optimised with the verifier run after every pass.
The staged IR is left unchanged, and the optimised function computes on the interpreter
exactly (bit for bit) what the staged one computes.  The gradient IR gets smaller."""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import pullback as pb
from programs.ad_check import Case, is_float, leaves, make_case, random_like
from programs.registry import load
from pullback.ir.core import Func
from pullback.ir.printer import format_func
from pullback.passes.manager import optimize

from .passcheck import assert_same_outcome, count_eqns

PROGRAMS = load()
JIT_CASES = [(p, i) for p in PROGRAMS for i in range(len(p.inputs))]
AD_CASES = [c for c in (make_case(p, i) for p in PROGRAMS if p.differentiable
                        for i in range(len(p.inputs)))
            if any(is_float(x) for k in c.positions for x in leaves(c.args[k]))]
SCALAR_CASES = [c for c in AD_CASES
                if is_float(out := c.run(c.args)) and np.shape(out) == ()]


def _tiered(inputs: list[int], ids: list[str]) -> list[Any]:
    """Case numbers, each program's first input in the default tier and its others in
    the slow tier (CI time; the interpreter's corpus test runs every input)."""
    return [pytest.param(k, id=name, marks=[pytest.mark.slow] if i else [])
            for k, (i, name) in enumerate(zip(inputs, ids, strict=True))]


def _staged(fn: Callable, args: tuple, static: tuple[str, ...] = ()) -> tuple[Func, list]:
    """The IR ``pb.jit(fn)`` runs for ``args``, and its run-time arguments."""
    staged, sig = pb.jit(fn, static_argnames=static).specialise(*args)
    given = sig.leaves[:-1]
    return staged.staged_func, [given[i] for i in sig.dynamic]


def _optimise_checked(func: Func, inputs: list, where: str) -> tuple[int, int]:
    """``optimize`` (verifying after every pass) leaves ``func`` alone and computes what
    it computes; equation counts before and after."""
    before = format_func(func)
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("PULLBACK_VERIFY", "passes")
        out = optimize(func)
    assert format_func(func) == before, f"{where}: optimize changed its input"
    assert_same_outcome(out, func, inputs, where)
    return count_eqns(func), count_eqns(out)


def _pullback(case: Case) -> tuple[Callable, tuple]:
    """A function returning the program's results and the cotangents of all its
    arguments for a fixed random output cotangent, and its arguments."""
    cotangent = random_like(case.run(case.args), np.random.default_rng([case.index, 1]))

    def pullback(args: tuple, ct: Any) -> Any:
        out, back = pb.vjp(case.fn, *args)
        return out, back(ct)

    return pullback, (case.fresh(), cotangent)


@functools.cache
def _jit(k: int) -> tuple[int, int]:
    prog, i = JIT_CASES[k]
    args = copy.deepcopy(prog.inputs[i](np.random.default_rng(i)))
    return _optimise_checked(*_staged(prog.fn, args, prog.static), f"{prog.name}-{i}")


@functools.cache
def _grad(k: int) -> tuple[int, int]:
    case = SCALAR_CASES[k]
    grad = pb.grad(case.fn, argnums=case.argnums)
    return _optimise_checked(*_staged(grad, case.fresh()), f"grad {case.name}")


@functools.cache
def _vjp(k: int) -> tuple[int, int]:
    case = AD_CASES[k]
    return _optimise_checked(*_staged(*_pullback(case)), f"vjp {case.name}")


@pytest.mark.parametrize("k", _tiered([i for _, i in JIT_CASES],
                                      [f"{p.name}-{i}" for p, i in JIT_CASES]))
def test_jit(k: int) -> None:
    _jit(k)


@pytest.mark.parametrize("k", _tiered([c.index for c in SCALAR_CASES],
                                      [c.name for c in SCALAR_CASES]))
def test_grad(k: int) -> None:
    _grad(k)


@pytest.mark.parametrize("k", _tiered([c.index for c in AD_CASES], [c.name for c in AD_CASES]))
def test_vjp(k: int) -> None:
    _vjp(k)


def _mean_ratio(counts: list[tuple[int, int]]) -> float:
    """The mean fraction of equations left (functions with none left out)."""
    return float(np.mean([after / before for before, after in counts if before]))


def test_gradient_ir_gets_smaller() -> None:
    """On average a quarter of ``pb.grad``'s equations and a tenth of a pullback's go
    (0.75 and 0.90 of them are left when this was written: since the reverse of an
    element update reads the old value in place and loop index arithmetic is recomputed
    in the backward, the rules add less to remove).  The function is optimised before it
    is differentiated, so what is left to remove is what the rules add.  Each program
    counts once, at its first input (the default tier's cases)."""
    grads = [_grad(k) for k, c in enumerate(SCALAR_CASES) if not c.index]
    pullbacks = [_vjp(k) for k, c in enumerate(AD_CASES) if not c.index]
    assert _mean_ratio(grads) < 0.8
    assert _mean_ratio(pullbacks) < 0.92
    assert all(after <= before for before, after in grads + pullbacks)
