"""The corpus on the native backend: every program compiled with ``backend="c"`` returns
what plain Python returns, and its derivatives agree with the interpreter's.

Floating-point results may differ from NumPy's in the last bits (C's libm versus NumPy's
own vectorised functions, float32 sums accumulated in double), so float64 results from
float32 inputs get float32's tolerance, and programs that iterate to a tolerance get
that tolerance.  Programs with ops the backend has no code for yet run on the
interpreter: ``FALLBACK`` lists them, and the test fails if another program falls back.
"""

from __future__ import annotations

import copy
import warnings

import numpy as np
import pytest

import pullback as pb
from programs.registry import Program, load
from samples import TOL

PROGRAMS = load()
CASES = [(p, i) for p in PROGRAMS for i in range(len(p.inputs))]

#: Programs that stop iterating when a tolerance is met: a last-bit difference in a
#: math function can move the stopping point by one step.
ITERATIVE = {"dynamic_control.golden_section_minimum": 1e-6}

#: Programs that use ops without C code yet (they run on the interpreter).
FALLBACK = {
    "static_control.static_float_branch",  # debug_print
}


def _tolerance(prog: Program, args: tuple) -> dict:
    leaves = pb.tree_leaves(args)
    single = any(getattr(x, "dtype", None) == np.float32 for x in leaves)
    rtol = TOL[np.dtype(np.float32)] if single else 1e-9
    return {"rtol": max(rtol, ITERATIVE.get(prog.name, 0.0))}


def _close(got, want, rtol: float, where: str) -> None:
    gl, gt = pb.tree_flatten(got)
    wl, wt = pb.tree_flatten(want)
    assert gt == wt, f"{where}: structure {gt} != {wt}"
    for k, (g, w) in enumerate(zip(gl, wl, strict=True)):
        assert type(g) is type(w) or isinstance(w, np.ndarray), f"{where} leaf {k}"
        if isinstance(w, (np.ndarray, np.generic, float)):
            assert np.asarray(g).dtype == np.asarray(w).dtype, f"{where} leaf {k} dtype"
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol, err_msg=f"{where} {k}")
        else:
            assert g == w, f"{where} leaf {k}: {g!r} != {w!r}"


def _run_c(fn, static, args):
    """``fn(*args)`` compiled for the C backend, and whether it ran on the interpreter."""
    jitted = pb.jit(fn, static_argnames=static, backend="c")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        staged, _ = jitted.specialise(*args)
        return jitted(*args), staged.runner is None


#: Every program's first input on C in the default tier, its others in the slow tier (the
#: interpreter's corpus test runs them all; a C build per case is most of this file's time).
C_PARAMS = [pytest.param(p, i, id=f"{p.name}-{i}", marks=[pytest.mark.slow] if i else [])
            for p, i in CASES]


@pytest.mark.parametrize(("prog", "case"), C_PARAMS)
def test_c_matches_python(prog: Program, case: int) -> None:
    args = prog.inputs[case](np.random.default_rng(case))
    mine, theirs = copy.deepcopy(args), copy.deepcopy(args)
    try:
        want = prog.fn(*theirs)
    except Exception as e:  # noqa: BLE001 - the compiled code must raise the same
        with pytest.raises(type(e)):
            _run_c(prog.fn, prog.static, mine)
        return
    got, fell_back = _run_c(prog.fn, prog.static, mine)
    assert not fell_back or prog.name in FALLBACK, "ran on the interpreter: see FALLBACK"
    tol = _tolerance(prog, args)
    _close(got, want, tol["rtol"], "result")
    _close(mine, theirs, tol["rtol"], "arguments after the call")


DIFFERENTIABLE = [p for p in PROGRAMS if p.differentiable and p.name not in FALLBACK]


@pytest.mark.parametrize("prog", DIFFERENTIABLE, ids=[p.name for p in DIFFERENTIABLE])
def test_c_derivatives_match_the_interpreter(prog: Program) -> None:
    args = prog.inputs[0](np.random.default_rng(0))
    floats = [k for k in prog.differentiable
              if any(np.asarray(x).dtype.kind == "f" for x in pb.tree_leaves(args[k]))]
    if not floats:
        pytest.skip("no float argument to differentiate")
    rng = np.random.default_rng(1)

    def tangent(x, active: bool):
        if active and np.asarray(x).dtype.kind == "f":
            return rng.standard_normal(np.shape(x)).astype(np.asarray(x).dtype)
        return np.zeros_like(x) if isinstance(x, np.ndarray) else x

    tangents = tuple(pb.tree_map(lambda x, k=k: tangent(x, k in floats), a)
                     for k, a in enumerate(args))

    def both(*primals):
        return pb.jvp(prog.fn, primals, tangents)

    interp = pb.jit(both, static_argnames=prog.static)(*copy.deepcopy(args))
    native, _ = _run_c(both, prog.static, copy.deepcopy(args))
    _close(native, interp, _tolerance(prog, args)["rtol"] * 10, "jvp")
