"""Derivatives of every differentiable corpus program against float64 central differences
of the program run in plain Python.

For each input case of a program that declares ``differentiable`` positions (cases with
no float leaf there are left out), with a random tangent ``t`` on the float leaves of
those arguments (zero elsewhere) and a central-difference estimate ``J t``:

* ``pb.jvp`` returns what plain Python returns, leaves its arguments alone, and gives
  ``J t`` at every float result leaf, in the leaf's dtype;
* ``pb.vjp`` returns what plain Python returns, leaves its arguments alone, and gives
  cotangents (None at non-float leaves) with ``<vjp(c), t> == <c, J t>`` for a random
  output cotangent ``c``;
* for a float-scalar result, ``pb.grad`` (and ``pb.jit(pb.grad)``) equals the gradient by
  central differences, element by element;
* for the programs of ``HESSIAN_PROGRAMS``, ``pb.hessian`` times ``t`` equals the central
  difference of ``pb.grad`` along ``t``.  The corpus has fewer programs with a scalar
  result than that list, so each program is reduced to ``sum(w * leaf)`` over its float
  result leaves with fixed random weights ``w`` (``ad_check.weighted_loss``, staged by
  pullback with the program: a scalar result is just scaled).

Float32 programs are differentiated as they are, in float32: the derivative rules and
transforms must keep float32 in float32, which a float64 copy would not exercise.  The
references are computed in float64 from the same inputs (float32 -> float64 is exact)
along the same float32 tangents, so both sides differentiate the same function at the
same point in the same direction and only the pullback side rounds in float32; it is
held to ``ad_check.TOLERANCE[float32]`` (rtol 2e-4, atol 1e-5, five times the worst
rounding error seen in the corpus), tight enough to catch a derivative rule that is off
by 0.1%.  The Hessian test, whose reference is a difference of gradients, uses the
float64 case of each program.

Derivatives are estimated by five-point central differences (error O(h^4)) with
``h = 1e-6 * max(1, |x|)`` (1e-5 for the Hessian, whose reference differences
gradients), except for the programs of ``STEPS``.  A comparison
passes when ``|a - b| <= atol + rtol * max(|a|, |b|, scale)``, ``scale`` being the largest
reference value of the compared leaf (for a dot product, the sum of the absolute values
of its terms); float64 uses rtol 1e-5, atol 1e-7.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import pullback as pb
from programs.ad_check import (
    Case,
    assert_close,
    central_difference,
    five_point,
    gradient_by_differences,
    hessian_times,
    is_float,
    leaves,
    make_case,
    random_like,
    random_weights,
    shifted,
    step_size,
    vdot,
    weighted_loss,
)
from programs.registry import load
from programs.test_corpus import assert_same_tree

PROGRAMS = load()

#: Central-difference steps (times max(1, |x|)) other than 1e-6, for sample points next
#: to a non-smooth spot; with each, the differences converge to the pullback value.
STEPS = {
    # v = 0 in case 0: sqrt(999 v + g^2) with g[1, 1] = 0.04 is near its branch point, its
    # k-th derivative in v ~ 999^k / g^(2k-1) (steps of 1e-3 even leave the domain)
    "ml_layers.adam_step": 1e-8,
    # the trip count of `while delta > tol` changes inside the stencil at h = 1e-6
    "scientific.power_iteration": 1e-8,
}

#: Programs whose Hessian is checked (non-scalar results reduced to a scalar by a random
#: weighting of their float leaves), across categories and control flow.
HESSIAN_PROGRAMS = [
    "straight_line.matrix_expression", "straight_line.softmax_cross_entropy",
    "straight_line.python_float_math", "straight_line.logistic_loss",
    "straight_line.rbf_kernel", "straight_line.log_det_spd", "straight_line.ridge_regression",
    "straight_line.cosine_similarity",
    "static_control.polynomial_from_tuple", "static_control.mlp_over_layer_list",
    "static_control.back_substitution", "static_control.rk4_fixed_steps",
    "static_control.discounted_return",
    "dynamic_control.smooth_piecewise", "dynamic_control.newton_cubic_root",
    "dynamic_control.log_by_sign_pattern", "dynamic_control.lambert_w_secant",
    "dynamic_control.fixed_point_cosine", "dynamic_control.jacobi_solve",
    "dynamic_control.clip_rows_by_norm", "dynamic_control.branch_on_sum",
    "recursion.recursive_horner", "recursion.tree_reductions",
    "recursion.laplace_determinant", "recursion.recursive_heron_sqrt",
    "recursion.continued_fraction_tan", "recursion.scaling_and_squaring_exp",
    "recursion.power_with_dynamic_exponent",
    "data_structures.tree_norm_recursive", "data_structures.mlp_from_layer_list",
    "data_structures.gaussian_mixture_logpdf", "data_structures.spring_leapfrog",
    "mutation.zero_row_through_view", "mutation.transpose_in_place",
    "mutation.gauss_elimination_in_place",
    "ml_layers.label_smoothed_nll", "ml_layers.attention", "ml_layers.gru",
    "ml_layers.layer_norm",
    "scientific.lennard_jones", "scientific.kalman_filter_track",
    "scientific.cholesky_solve", "scientific.euler_damped_oscillator",
]


def _has_float_input(case: Case) -> bool:
    return any(is_float(x) for k in case.positions for x in leaves(case.args[k]))


CASES = [c for c in (make_case(p, i) for p in PROGRAMS if p.differentiable
                     for i in range(len(p.inputs))) if _has_float_input(c)]


def _is_float_scalar(value: object) -> bool:
    return is_float(value) and np.shape(value) == ()


SCALAR_CASES = [c for c in CASES if _is_float_scalar(c.run(c.args))]


def _step(case: Case) -> float:
    return step_size(case, STEPS.get(case.prog.name, 1e-6))


def _tiered(cases: list[Case], slow: frozenset[str] = frozenset()) -> list[Any]:
    """Each program's first input in the default tier, its others and the programs of
    ``slow`` in the slow tier (CI time; the interpreter's corpus test runs every input)."""
    return [pytest.param(c, id=c.name, marks=[pytest.mark.slow]
                         if c.index or c.prog.name in slow else [])
            for c in cases]


def _rng(case: Case, salt: int) -> np.random.Generator:
    return np.random.default_rng([case.index, salt])


def _check_tree_types(got: object, like: object, where: str, cotangent: bool) -> None:
    """Derivative leaves have their primal's shape and dtype; cotangents are None where
    the primal is not a float (tangents are anything but a float there)."""
    for k, (g, p) in enumerate(zip(leaves(got), leaves(like), strict=True)):
        if not is_float(p):
            ok = g is None if cotangent else not is_float(g)
            assert ok, f"{where} leaf {k}: {g!r} for the non-float {p!r}"
            continue
        assert is_float(g), f"{where} leaf {k}: {type(g).__name__}, not a float"
        assert np.shape(g) == np.shape(p), f"{where} leaf {k}: shape {np.shape(g)}"
        assert np.asarray(g).dtype == np.asarray(p).dtype, \
            f"{where} leaf {k}: dtype {np.asarray(g).dtype} != {np.asarray(p).dtype}"


@pytest.mark.parametrize("case", _tiered(CASES))
def test_jvp_matches_central_differences(case: Case) -> None:
    tangent = case.tangent(_rng(case, 0))
    args = case.fresh()
    out, tangent_out = pb.jvp(case.fn, args, tangent)
    assert_same_tree(out, case.run(case.args), where="primal result of pb.jvp")
    assert_same_tree(args, case.args, where="arguments after pb.jvp")
    _check_tree_types(tangent_out, out, "tangent of the result", cotangent=False)
    want = central_difference(case, tangent, _step(case))
    rtol, atol = case.tolerance
    for k, (got, w) in enumerate(zip(leaves(tangent_out), want, strict=True)):
        if w is not None:
            assert_close(got, w, rtol, atol, f"tangent of result leaf {k}")


@pytest.mark.parametrize("case", _tiered(CASES))
def test_vjp_is_the_transpose_of_central_differences(case: Case) -> None:
    tangent = case.tangent(_rng(case, 0))
    args = case.fresh()
    out, vjp_fn = pb.vjp(case.fn, *args)
    assert_same_tree(out, case.run(case.args), where="primal result of pb.vjp")
    assert_same_tree(args, case.args, where="arguments after pb.vjp")
    cotangent = random_like(out, _rng(case, 1))
    cts = vjp_fn(cotangent)
    assert isinstance(cts, tuple) and len(cts) == len(case.args)
    _check_tree_types(cts, case.args, "cotangent of the arguments", cotangent=True)
    got, got_size = vdot(cts, tangent)
    want, want_size = vdot(cotangent, central_difference(case, tangent, _step(case)))
    rtol, atol = case.tolerance
    assert_close(got, want, rtol, atol + rtol * max(got_size, want_size),
                 "<vjp(c), t> against <c, J t>")


@pytest.mark.parametrize("case", _tiered(SCALAR_CASES))
def test_grad_matches_central_differences(case: Case) -> None:
    want = gradient_by_differences(case, _step(case))
    rtol, atol = case.tolerance
    grad = pb.grad(case.fn, argnums=case.argnums)
    for how, fn in (("pb.grad", grad), ("pb.jit(pb.grad)", pb.jit(grad))):
        args = case.fresh()
        got = fn(*args)
        assert_same_tree(args, case.args, where=f"arguments after {how}")
        assert isinstance(got, tuple) and len(got) == len(case.argnums), how
        _check_tree_types(got, case.split(case.args)[0], how, cotangent=True)
        for k, (g, w) in enumerate(zip(leaves(got), leaves(want), strict=True)):
            if w is not None:
                assert_close(g, w, rtol, atol, f"{how}, leaf {k}")


FLOAT64_CASES: dict[str, Case] = {}  # the first float64 case of each program
for _case in CASES:
    if _case.dtype == np.float64:
        FLOAT64_CASES.setdefault(_case.prog.name, _case)
HESSIAN_CASES = [FLOAT64_CASES[n] for n in HESSIAN_PROGRAMS if n in FLOAT64_CASES]


def test_hessian_programs_cover_the_corpus() -> None:
    missing = [n for n in HESSIAN_PROGRAMS if n not in FLOAT64_CASES]
    assert not missing, f"not differentiable corpus programs with a float64 case: {missing}"
    assert len(set(HESSIAN_PROGRAMS)) == len(HESSIAN_PROGRAMS) >= 25
    categories = {c.prog.category for c in HESSIAN_CASES}
    assert {"dynamic_control", "recursion"} < categories and len(categories) >= 8


#: 13 s of the Hessians' 37 s in CI (200 Euler steps on Python floats, differentiated twice)
SLOW_HESSIANS = frozenset({"scientific.euler_damped_oscillator"})


@pytest.mark.parametrize("case", _tiered(HESSIAN_CASES, SLOW_HESSIANS))
def test_hessian_matches_differences_of_grad(case: Case) -> None:
    weights = random_weights(case.run(case.args), _rng(case, 2))
    extra = (case.fn, weights, case.order)
    dyn, rest = case.split(case.fresh())
    tangent, _ = case.split(case.tangent(_rng(case, 0)))
    got = hessian_times(pb.hessian(weighted_loss)(dyn, rest, *extra), dyn, tangent)
    grad = pb.grad(weighted_loss)
    want = five_point(lambda d: leaves(grad(shifted(dyn, tangent, d),
                                            case.split(case.fresh())[1], *extra)),
                      step_size(case, 1e-5))
    rtol, atol = case.tolerance
    for k, (g, w) in enumerate(zip(got, want, strict=True)):
        if w is not None:
            assert_close(g, w, rtol, atol, f"H t, leaf {k}")
