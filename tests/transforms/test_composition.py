"""The composition matrix: every ordered pair of the 9 compiling and derivative
transforms, vmap before or after each of them, and common triples, applied to corpus
programs of every category, on both backends, checked against plain Python, a loop over
lanes and float64 central differences (``compose.py``: the machinery, how each transform
maps a function of one argument to another, and how references are built level by
level).

For each program of ``PICKS`` (a function of one argument ``x``, its other arguments
constants) and each backend, the chains of ``CHAINS`` are staged into one function,
``pb.jit(..., backend=...)`` of a tuple of them, each on its own copy of ``x0``: one
compile per program and backend.  So every chain runs as staged code under a ``jit``
(``jit . c`` is a ``jit`` called inside staged code).  When that function raises, the
chains that cannot be staged on their own are set apart, the others compiled together
again, then by halves, so the report names every chain that raises.  The references
call pullback from Python on the interpreter (``pb.grad(g)(x)``, ``pb.jvp(g, ...)``,
``pb.vjp(g, x)`` from Python) and check those calls' values too; they are computed once
per program and process, for both backends.

A test fails on any exception, any wrong value or structure, any function the references
call that raises or is wrong (reported by the interpreter's test), and on the program's
constant arguments changed; its message lists every failing chain, one per line.
``test_the_matrix_reports_wrong_values_and_exceptions`` checks that the machinery flags
exactly the chains a deliberately wrong ``jvp`` and a raising ``checkpoint`` break.

Cost (the interpreter's matrix must stay within about 3.5 CPU-minutes, measured on a
2-core AMD EPYC).  ~120 chains of one program are
0.3-2.5 MB of C: the C side compiles with ``-O0`` appended to ``PULLBACK_CFLAGS`` (gcc
is 5x faster there than at -O3; the level does not change what the code computes: no
fast-math, and ISO C's ``-ffp-contract=off``; the corpus tests compile at -O3) and
without ``PULLBACK_VERIFY`` (the IR, which does not depend on the backend, is verified
by the interpreter's test).  Inputs are one to six numbers: Jacobians and their
references cost a pass per input element.
"""

from __future__ import annotations

import os

import pytest

import pullback as pb
from programs.registry import load

from . import compose
from .compose import PAIRED, TRANSFORMS, Chain, Pick, Subject, canonical, check, products

PROGRAMS = {p.name: p for p in load()}

#: The programs, as functions of one argument (see ``Pick``); every category, loops on
#: data, recursion, mutation and pytree arguments and results.
PICKS = [
    # straight-line code
    Pick("straight_line.cubic_horner", at=(1,), take=2),
    Pick("straight_line.lerp_and_angle", at=(2,)),  # x: a Python float
    Pick("straight_line.rotate_points", at=(0,)),  # x: a NumPy scalar angle
    # static control flow
    Pick("static_control.power_by_squaring", take=2),  # recursion on a Python int
    Pick("static_control.polynomial_from_tuple", at=(1,)),  # x: a tuple of Python floats
    Pick("static_control.moments_dict", take=2),  # a dict result
    Pick("static_control.discounted_return", take=3),  # x, result: lists of Python floats
    # control flow on data
    Pick("dynamic_control.smooth_piecewise"),  # branches on data
    Pick("dynamic_control.fixed_point_cosine", take=2),  # a while loop until converged
    Pick("dynamic_control.jacobi_solve", at=(1,)),  # a while loop until converged
    Pick("dynamic_control.log_barrier", take=2),  # raise under a branch on data
    # recursion
    Pick("recursion.power_with_dynamic_exponent", take=2),  # depth from a run-time int
    Pick("recursion.recursive_horner", at=(1,), take=2),  # static depth
    Pick("recursion.recursive_heron_sqrt", take=2),  # depth from convergence on data
    # mutation
    Pick("mutation.alias_then_write", take=2),  # writes through aliases of x
    Pick("mutation.lower_triangle_fill", take=2),  # slices of a buffer written in a loop
    Pick("mutation.insertion_sort_copy", take=2),  # a while loop on data writing a buffer
    Pick("mutation.zero_largest_row", take=2),  # returns x, written at a data index
    # pytrees
    Pick("data_structures.rotate_tuple_state"),  # a nested tuple result
    Pick("data_structures.power_series_lambdas", take=2),  # a list of lambdas
    Pick("data_structures.sgd_on_dict", at=(2,)),  # a dict in the result
    # ML layers
    Pick("ml_layers.dense", case=2, at=(2,)),
    Pick("ml_layers.batch_norm_inference", at=(4,)),  # x: the running variance
    # scientific
    Pick("scientific.lennard_jones", at=(1,)),  # an (energy, forces) result
    Pick("scientific.wave_leapfrog", take=2),  # a time-stepping loop
]

#: Common triples, outermost first: higher orders through jit and checkpoint,
#: third-order derivatives, and the from-the-issue ones.
TRIPLES: list[Chain] = [
    ("jit", "grad", "jit"),
    ("grad", "grad", "jit"),
    ("vjp", "jit", "checkpoint"),
    ("jvp", "grad", "jit"),
    ("jvp", "grad", "checkpoint"),
    ("jacrev", "jacfwd", "jit"),
    ("jacfwd", "jacrev", "checkpoint"),
    ("hessian", "jit", "checkpoint"),
    ("value_and_grad", "checkpoint", "jit"),
    ("checkpoint", "grad", "grad"),
    ("jit", "jvp", "vjp"),
    ("grad", "vjp", "jit"),
    ("jvp", "jvp", "jvp"),
    ("grad", "grad", "grad"),
    ("vjp", "jvp", "grad"),
    ("jacfwd", "grad", "jit"),
]

#: vmap with every other transform, on one side or the other (both sides for the
#: compositions users write most: jit, grad, jvp, vjp), and with itself; the references
#: of the remaining sides (numerical Jacobians of three lanes) cost the most.
VMAP: list[Chain] = [
    ("vmap",), ("vmap", "vmap"),
    ("vmap", "jit"), ("jit", "vmap"), ("vmap", "grad"), ("grad", "vmap"),
    ("vmap", "jvp"), ("jvp", "vmap"), ("vmap", "vjp"), ("vjp", "vmap"),
    ("vmap", "checkpoint"), ("value_and_grad", "vmap"), ("vmap", "jacrev"),
    ("jacfwd", "vmap"), ("vmap", "hessian"),
]

CHAINS: list[Chain] = products(1) + products(2) + TRIPLES + VMAP

_subjects: dict[str, Subject] = {}


def subject(pick: Pick) -> Subject:
    """The program's subject, with the references computed so far (shared by the two
    backends' tests when they run in one process)."""
    if pick.program not in _subjects:
        _subjects[pick.program] = Subject(pick, PROGRAMS)
    return _subjects[pick.program]


def test_the_matrix_covers_what_it_should():
    assert len(PICKS) >= 20 and len({p.program for p in PICKS}) == len(PICKS)
    categories = {PROGRAMS[p.program].category for p in PICKS}
    assert categories >= {"straight_line", "static_control", "dynamic_control", "recursion",
                          "mutation", "data_structures", "ml_layers", "scientific"}
    assert {PROGRAMS[p.program].category for p in PICKS if p.program not in SLOW_PICKS} == \
        categories  # the default tier keeps every category
    assert set(CHAINS) >= {(a, b) for a in PAIRED for b in PAIRED}
    assert set(CHAINS) >= {(t,) for t in TRANSFORMS}
    assert all(("vmap", t) in CHAINS or (t, "vmap") in CHAINS for t in TRANSFORMS)
    assert len(set(CHAINS)) == len(CHAINS)


#: The picks whose matrix costs the most to stage (7-28 s each on the interpreter): in the
#: slow tier, each category keeping a cheaper program in the default one (CI time).
SLOW_PICKS = {"dynamic_control.jacobi_solve", "dynamic_control.fixed_point_cosine",
              "recursion.recursive_horner", "recursion.recursive_heron_sqrt",
              "mutation.insertion_sort_copy", "mutation.zero_largest_row",
              "static_control.moments_dict",
              # 7-10 s each (issue 24's session: CI at 9m56s on 2 cores)
              "scientific.lennard_jones", "static_control.power_by_squaring",
              "straight_line.cubic_horner", "straight_line.rotate_points",
              "data_structures.power_series_lambdas", "data_structures.rotate_tuple_state",
              "dynamic_control.smooth_piecewise",
              # 6-7 s each (wave 2, issue 24's third session: CI at 8m36s), each category
              # keeping one program in the default tier
              "static_control.polynomial_from_tuple", "mutation.lower_triangle_fill",
              "ml_layers.dense"}


@pytest.mark.parametrize("backend", ["interp", pytest.param("c", marks=pytest.mark.slow)])
@pytest.mark.parametrize("pick", [
    pytest.param(p, marks=pytest.mark.slow) if p.program in SLOW_PICKS else p for p in PICKS],
    ids=[p.id for p in PICKS])
def test_composition_matrix(pick: Pick, backend: str, monkeypatch) -> None:
    monkeypatch.setenv("PULLBACK_BACKEND", "interp")  # what the references call
    if backend == "c":
        from pullback.backends.c.build import compiler

        if not compiler.have_compiler():
            pytest.skip("no C compiler")
        monkeypatch.setenv("PULLBACK_CFLAGS",
                           f"{os.environ.get('PULLBACK_CFLAGS', '')} -O0".strip())
        # the IR is the interpreter test's, which verifies it (staging does not depend
        # on the backend); verifying it again after every pass would double the staging
        monkeypatch.setenv("PULLBACK_VERIFY", "0")
    failures = check(subject(pick), CHAINS, backend)
    if failures:
        pytest.fail(f"{len(failures)} of {len(CHAINS)} compositions of {pick.program} fail "
                    f"on the {backend} backend:\n" + "\n".join(f.line() for f in failures),
                    pytrace=False)


class _Sabotaged(Subject):
    """A subject whose ``jvp`` pushes 1.001 times the direction (wrong by 0.1%) and whose
    ``checkpoint`` raises when it is staged."""

    def _apply(self, t, g, inner, backend):
        if t == "jvp":
            v = pb.tree_map(lambda d: d * 1.001, self.direction())
            return lambda x: pb.jvp(g, (x,), (v,))
        if t == "checkpoint":
            def broken(x):
                raise ValueError("sabotaged")

            return broken
        return super()._apply(t, g, inner, backend)


@pytest.mark.parametrize("isolation", ["staging", "bisection"])
def test_the_matrix_reports_wrong_values_and_exceptions(isolation: str, monkeypatch) -> None:
    """The machinery flags exactly what it should: a wrong ``jvp`` at the level where it
    is outermost (and, called from Python, where the references use it), a raising
    transform in every chain that holds it — found by staging each chain on its own or,
    when staging is not what raises, by compiling halves."""
    monkeypatch.setenv("PULLBACK_BACKEND", "interp")
    if isolation == "bisection":
        monkeypatch.setattr(compose, "_staging_error", lambda *args: None)
    few = ("checkpoint", "grad", "jvp")
    chains = [c for c in CHAINS if len(c) <= 2 and set(c) <= set(few)]
    failures = check(_Sabotaged(Pick("straight_line.rotate_points"), PROGRAMS),
                     chains, "interp")
    found = {(f.kind, f.chain) for f in failures}
    assert found == (
        {("raised", c) for c in chains if "checkpoint" in c}
        | {("wrong value", c) for c in chains
           if "checkpoint" not in c and canonical(c)[:1] == ("jvp",)}
        | {("from Python", ("jvp",))}), "\n".join(f.line() for f in failures)
    assert all("sabotaged" in f.detail for f in failures if f.kind == "raised")
