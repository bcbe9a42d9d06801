"""Every corpus program under ``pb.vmap`` returns what a Python loop over its lanes
returns, stacked along axis 0.

The ``LANES`` lanes of a case are its input generator called with different seeds.
Leaves that are arrays, NumPy scalars or Python floats are stacked (``in_axes`` 0);
the rest (Python ints, bools, strings, the program's ``static`` arguments) must be equal
in every lane and are shared (``in_axes`` None), so seeds whose draw differs there, or
in a stacked leaf's shape or dtype, are passed over for later ones.  The oracle is the
plain program called on exactly what each lane sees: lane ``k`` of a stacked leaf is
``stacked[k]`` (a stacked Python float becomes a ``np.float64``).

Every case runs on the interpreter; the C backend compiles one case per program, which
is where the time goes.  Lanes are drawn at random, so many take different branches,
make different numbers of loop trips or recurse to different depths:
``test_vmap_covers_the_corpus`` counts those programs by tracing the oracle's lines.
"""

from __future__ import annotations

import copy
import inspect
import sys
from collections import Counter
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np
import pytest

import pullback as pb
from programs.registry import Program, load
from samples import TOL

LANES = 4
SEEDS = range(100, 100 + 12 * LANES)  # the seeds tried, in order, for the lanes of a case
STACKED = (np.ndarray, np.generic, float, complex)
PROGRAMS = load()

# Differences on the C backend that are not vmap's: pb.jit alone, lane by lane, gives
# the same answers as vmap there, and both differ from NumPy.
XFAIL_C = {
    "dynamic_control.backtracking_descent":
        "the stopping tests compare at the rounding level, and the C backend rounds the "
        "line search differently from NumPy: lanes make 27 trips instead of 19, one runs "
        "to the cap of 500; pb.jit on C (no vmap) gives the same",
}
# Staging these takes seconds without vmap (pb.jit: 6 s and 2 s), and their batched C
# over 15 s: the default run keeps their case of mixed generators on the interpreter.
SLOW = {"recursion.adaptive_simpson", "scientific.bisection_kepler"}


class Batch(NamedTuple):
    """A case's lanes stacked: the arguments and in_axes for vmap, and each lane's own
    arguments for the oracle."""

    args: tuple
    in_axes: tuple
    lanes: list[tuple]


def _signature(prog: Program, args: tuple) -> list:
    """What lanes must share to be stacked: each argument's structure, and per leaf its
    value (shared leaves) or its shape and dtype (stacked leaves)."""
    names = list(inspect.signature(prog.fn).parameters)
    sig = []
    for k, arg in enumerate(args):
        leaves, tree = pb.tree_flatten(arg)
        static = k < len(names) and names[k] in prog.static
        sig.append((tree, tuple(
            ("shared", repr(x)) if static or not isinstance(x, STACKED)
            else ("stacked", np.shape(x), np.asarray(x).dtype) for x in leaves)))
    return sig


def _draw(prog: Program, gens: tuple[int, ...]) -> tuple[list[tuple], list] | None:
    """``LANES`` draws that agree on their signature, seed by seed from the generators
    ``gens`` in turn, or None."""
    draws = (prog.inputs[gens[k % len(gens)]](np.random.default_rng(seed))
             for k, seed in enumerate(SEEDS))
    first = next(draws)
    want = _signature(prog, first)
    lanes = [first]
    for args in draws:
        if len(lanes) == LANES:
            break
        if _signature(prog, args) == want:
            lanes.append(args)
    return (lanes, want) if len(lanes) == LANES else None


def _mixable(prog: Program) -> tuple[int, ...] | None:
    """The largest group (two or more) of the program's generators whose draws can share
    a batch: lanes from different generators are likelier to take different paths."""
    sigs = [repr(_signature(prog, gen(np.random.default_rng(SEEDS[0]))))
            for gen in prog.inputs]
    groups = [tuple(i for i, t in enumerate(sigs) if t == s) for s in sigs]
    best = max(groups, key=len)
    return best if len(best) > 1 else None


def _axes(tree: Any, axes: list) -> Any:
    """One argument's in_axes: 0 or None when all its leaves agree, else a tree."""
    if axes and all(a == 0 for a in axes):
        return 0
    if all(a is None for a in axes):
        return None
    return pb.tree_unflatten(tree, axes)


def batch(prog: Program, case: tuple[int, ...]) -> Batch:
    """The case's lanes stacked (skips the case when its lanes cannot agree)."""
    drawn = _draw(prog, case)
    if drawn is None:
        pytest.skip(f"no {LANES} draws among seeds {SEEDS} share their static values, "
                    "structure and shapes")
    lanes, sig = drawn
    args, in_axes, views = [], [], [[] for _ in range(LANES)]
    for k, (tree, kinds) in enumerate(sig):
        per_lane = [pb.tree_flatten(lane[k])[0] for lane in lanes]
        leaves = [np.stack([np.asarray(p[j]) for p in per_lane]) if kind[0] == "stacked"
                  else per_lane[0][j] for j, kind in enumerate(kinds)]
        args.append(pb.tree_unflatten(tree, leaves))
        in_axes.append(_axes(tree, [0 if kind[0] == "stacked" else None for kind in kinds]))
        for i, view in enumerate(views):
            view.append(pb.tree_unflatten(tree, [
                x[i].copy() if kind[0] == "stacked" else copy.deepcopy(x)
                for x, kind in zip(leaves, kinds, strict=True)]))
    return Batch(tuple(args), tuple(in_axes), [tuple(v) for v in views])


def lane_results(prog: Program, lanes: list[tuple]) -> list:
    """The plain program's result for each lane."""
    return [prog.fn(*lane) for lane in lanes]


def stacked(results: list) -> Any:
    """The lanes' results stacked leaf by leaf; a leaf that is no number (a string)
    must be the same in every lane and stays as it is."""
    flat = [pb.tree_flatten(r) for r in results]
    tree = flat[0][1]
    assert all(t == tree for _, t in flat), "the lanes' results differ in structure"
    out = []
    for j, first in enumerate(flat[0][0]):
        column = [leaves[j] for leaves, _ in flat]
        if isinstance(first, (*STACKED, int)):
            out.append(np.stack([np.asarray(x) for x in column]))
        else:
            assert all(x == first for x in column), f"leaf {j} differs from lane to lane"
            out.append(first)
    return pb.tree_unflatten(tree, out)


def _tolerance(args: tuple) -> float | None:
    """The float32 tolerance when any argument holds float32 (a float64 result computed
    from float32 values carries their rounding); None: each result by its own dtype."""
    kinds = {np.asarray(x).dtype for x in pb.tree_leaves(args) if isinstance(x, STACKED)}
    return TOL[np.dtype(np.float32)] if np.dtype(np.float32) in kinds else None


def assert_matches(got: Any, want: Any, tol: float | None) -> None:
    """``got`` has ``want``'s structure, dtypes, shapes, and values (floats within
    ``tol``, or the TOL of their dtype)."""
    gl, gt = pb.tree_flatten(got)
    wl, wt = pb.tree_flatten(want)
    assert gt == wt, f"structure {gt} != {wt}"
    for k, (g, w) in enumerate(zip(gl, wl, strict=True)):
        if not isinstance(w, np.ndarray):
            assert g == w, f"leaf {k}: {g!r} != {w!r}"
            continue
        assert isinstance(g, np.ndarray), f"leaf {k}: got {type(g).__name__}"
        assert (g.dtype, g.shape) == (w.dtype, w.shape), \
            f"leaf {k}: {g.dtype}{g.shape} != {w.dtype}{w.shape}"
        if w.dtype.kind in "fc":
            rtol = tol or TOL[w.dtype]
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol, err_msg=f"leaf {k}")
        else:
            np.testing.assert_array_equal(g, w, err_msg=f"leaf {k}")


def check(prog: Program, case: tuple[int, ...], backend: str) -> None:
    """vmap of the program on ``backend`` against the loop over its lanes."""
    b = batch(prog, case)
    want = stacked(lane_results(prog, b.lanes))
    mapped = pb.vmap(prog.fn, in_axes=b.in_axes, axis_size=LANES)
    got = pb.jit(mapped, static_argnames=prog.static, backend=backend)(*b.args)
    assert_matches(got, want, _tolerance(b.args))


# A case: the generators its lanes are drawn from, one, or a group that mixes.
CASES = [(p, (i,)) for p in PROGRAMS for i in range(len(p.inputs))] + [
    (p, g) for p in PROGRAMS if (g := _mixable(p)) is not None]


#: Categories whose every program runs on C in the default tier (lanes there take their
#: own branches, trip counts and recursion depths); of the others every sixth does, the
#: rest in the slow tier (a C build per program is most of this file's time in CI).
C_CATEGORIES = ("dynamic_control", "recursion")


def _c_default(prog: Program) -> bool:
    return prog.category in C_CATEGORIES or PROGRAMS.index(prog) % 6 == 0


def _param(prog: Program, case: tuple[int, ...], backend: str) -> Any:
    """The test's parameter, with its id and marks (expected failures, slow tier)."""
    marks = []
    if backend == "c" and prog.name in XFAIL_C:
        marks.append(pytest.mark.xfail(strict=True, reason=XFAIL_C[prog.name]))
    if prog.name in SLOW and (backend == "c" or len(case) == 1) or \
            backend == "c" and not _c_default(prog):
        marks.append(pytest.mark.slow)
    return pytest.param(prog, case, id=f"{prog.name}-{'+'.join(map(str, case))}", marks=marks)


@pytest.mark.parametrize(("prog", "case"), [_param(p, g, "interp") for p, g in CASES])
def test_vmap_matches_lane_loop(prog: Program, case: tuple[int, ...]) -> None:
    check(prog, case, "interp")


@pytest.mark.parametrize(("prog", "case"), [_param(p, (0,), "c") for p in PROGRAMS])
def test_vmap_matches_lane_loop_on_c(prog: Program, case: tuple[int, ...]) -> None:
    check(prog, case, "c")


def _line_counts(prog: Program, lanes: list[tuple]) -> list[Counter]:
    """How many times each line of the corpus runs in each lane's plain call."""
    here = str(Path(__file__).parent)
    counts: list[Counter] = []

    def tracer(frame: Any, event: str, arg: Any) -> Any:
        if not frame.f_code.co_filename.startswith(here):
            return None
        if event == "line":
            counts[-1][frame.f_code.co_filename, frame.f_lineno] += 1
        return tracer

    for lane in lanes:
        counts.append(Counter())
        sys.settrace(tracer)
        try:
            prog.fn(*lane)
        finally:
            sys.settrace(None)
    return counts


def lanes_diverge(prog: Program) -> bool:
    """Whether, in some case, the lanes run different lines or loop trips."""
    for p, case in CASES:
        if p is prog and _draw(prog, case) is not None:
            counts = _line_counts(prog, batch(prog, case).lanes)
            if any(c != counts[0] for c in counts[1:]):
                return True
    return False


def test_vmap_covers_the_corpus() -> None:
    """Most of the corpus is batched (every case that draws is run above, on the
    interpreter, with no expected failure), from every category; many programs run
    different paths in different lanes, dynamic control flow and recursion among them."""
    drawn = {p.name for p, case in CASES if _draw(p, case) is not None}
    batched = [p for p in PROGRAMS if p.name in drawn]
    assert len(batched) >= 200, len(batched)
    assert {p.category for p in batched} >= {
        "straight_line", "static_control", "dynamic_control", "recursion",
        "data_structures", "mutation", "ml_layers", "scientific", "int_bool",
    }
    assert sum(_c_default(p) and p.name not in SLOW for p in PROGRAMS) >= 60
    diverging = Counter(p.category for p in batched if lanes_diverge(p))
    assert diverging["dynamic_control"] >= 12, diverging
    assert diverging["recursion"] >= 8, diverging
    assert sum(diverging.values()) >= 40, diverging
