"""Derivatives of every differentiable corpus program against float64 central differences
of the program run in plain Python.

For each input case of a program that declares ``differentiable`` positions (cases with
no float leaf there are left out), with a random tangent ``t`` on the float leaves of
those arguments (zero elsewhere) and a central-difference estimate ``J t``:

* ``pb.jvp`` gives the plain-Python result and ``J t`` at every float result leaf;
* ``pb.vjp`` gives the plain-Python result and cotangents with ``<vjp(c), t> == <c, J t>``
  for a random output cotangent ``c``;
* for a float-scalar result, ``pb.grad`` (and ``pb.jit(pb.grad)``) equals the gradient by
  central differences, element by element;
* for the programs of ``HESSIAN_PROGRAMS``, ``pb.hessian`` times ``t`` equals the central
  difference of ``pb.grad`` along ``t``.

Float32 programs are differentiated as they are, in float32: the derivative rules and
transforms must keep float32 in float32, which a float64 copy would not exercise.  The
references are computed in float64 from the same inputs (float32 -> float64 is exact)
and the tangents are the float32 values themselves, so both sides differentiate the same
function at the same point along the same direction; only the pullback side rounds in
float32, so it is compared with ``TOLERANCE[float32]`` (rtol 2e-3 against the leaf's
scale), which float32 rounding (1.2e-7 per operation) amplified by the conditioning of
these small programs stays well inside.  The Hessian test, whose reference is a
difference of gradients, uses the float64 cases only.

Central differences use ``h = 1e-6 * max(1, |x|)``; the comparison passes when
``|a - b| <= atol + rtol * max(|a|, |b|, scale)`` with ``scale`` the largest reference value
of the compared leaf (or, for a dot product, the sum of the absolute values of its terms).
"""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb
from programs.ad_check import (
    Case,
    assert_close,
    central_difference,
    gradient_by_differences,
    is_float,
    leaves,
    make_case,
    random_like,
    step_size,
    vdot,
)
from programs.registry import load
from programs.test_corpus import assert_same_tree

PROGRAMS = load()


def _has_float_input(case: Case) -> bool:
    return any(is_float(x) for k in case.positions for x in leaves(case.args[k]))


CASES = [c for c in (make_case(p, i) for p in PROGRAMS if p.differentiable
                     for i in range(len(p.inputs))) if _has_float_input(c)]


def _is_float_scalar(value: object) -> bool:
    return is_float(value) and np.shape(value) == ()


SCALAR_CASES = [c for c in CASES if _is_float_scalar(c.run(c.args))]


def _ids(cases: list[Case]) -> list[str]:
    return [c.name for c in cases]


def _rng(case: Case, salt: int) -> np.random.Generator:
    return np.random.default_rng([case.index, salt])


def _check_tree_types(got: object, like: object, where: str) -> None:
    """Derivative leaves have their primal's shape and dtype; None where the primal is
    not a float."""
    for k, (g, p) in enumerate(zip(leaves(got), leaves(like), strict=True)):
        if not is_float(p):
            assert g is None or not is_float(g), f"{where} leaf {k}: {g!r} for a non-float"
            continue
        assert is_float(g), f"{where} leaf {k}: {type(g).__name__}, not a float"
        assert np.shape(g) == np.shape(p), f"{where} leaf {k}: shape {np.shape(g)}"
        assert np.asarray(g).dtype == np.asarray(p).dtype, \
            f"{where} leaf {k}: dtype {np.asarray(g).dtype} != {np.asarray(p).dtype}"


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_jvp_matches_central_differences(case: Case) -> None:
    tangent = case.tangent(_rng(case, 0))
    args = case.fresh()
    out, tangent_out = pb.jvp(case.fn, args, tangent)
    assert_same_tree(out, case.run(case.args), where="primal result of pb.jvp")
    assert_same_tree(args, case.args, where="arguments after pb.jvp")
    _check_tree_types(tangent_out, out, "tangent of the result")
    want = central_difference(case, tangent, step_size(case))
    rtol, atol = case.tolerance
    for k, (got, w) in enumerate(zip(leaves(tangent_out), want, strict=True)):
        if w is not None:
            assert_close(got, w, rtol, atol, f"tangent of result leaf {k}")


@pytest.mark.parametrize("case", CASES, ids=_ids(CASES))
def test_vjp_is_the_transpose_of_central_differences(case: Case) -> None:
    tangent = case.tangent(_rng(case, 0))
    args = case.fresh()
    out, vjp_fn = pb.vjp(case.fn, *args)
    assert_same_tree(out, case.run(case.args), where="primal result of pb.vjp")
    assert_same_tree(args, case.args, where="arguments after pb.vjp")
    cotangent = random_like(out, _rng(case, 1))
    cts = vjp_fn(cotangent)
    assert isinstance(cts, tuple) and len(cts) == len(case.args)
    _check_tree_types(cts, case.args, "cotangent of the arguments")
    got, got_size = vdot(cts, tangent)
    want, want_size = vdot(cotangent, central_difference(case, tangent, step_size(case)))
    rtol, atol = case.tolerance
    assert_close(got, want, rtol, atol + rtol * max(got_size, want_size),
                 "<vjp(c), t> against <c, J t>")


@pytest.mark.parametrize("case", SCALAR_CASES, ids=_ids(SCALAR_CASES))
def test_grad_matches_central_differences(case: Case) -> None:
    want = gradient_by_differences(case, case.argnums, step_size(case))
    rtol, atol = case.tolerance
    grad = pb.grad(case.fn, argnums=case.argnums)
    for how, fn in (("pb.grad", grad), ("pb.jit(pb.grad)", pb.jit(grad))):
        args = case.fresh()
        got = fn(*args)
        assert_same_tree(args, case.args, where=f"arguments after {how}")
        assert isinstance(got, tuple) and len(got) == len(case.argnums), how
        _check_tree_types(got, tuple(case.args[k] for k in case.argnums), how)
        for k, (g, w) in enumerate(zip(leaves(got), leaves(want), strict=True)):
            if w is not None:
                assert_close(g, w, rtol, atol, f"{how}, leaf {k}")
