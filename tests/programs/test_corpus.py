"""Every corpus program compiled with ``pb.jit`` returns what plain Python returns:
values, dtypes, Python-vs-NumPy scalar kinds, pytree structure, and the arguments it
mutates."""

from __future__ import annotations

import copy

import numpy as np
import pytest

import pullback as pb
from programs.registry import Program, load
from samples import TOL

PROGRAMS = load()
CASES = [(p, i) for p in PROGRAMS for i in range(len(p.inputs))]


def assert_same_tree(got, want, where="result"):
    """``got`` has ``want``'s structure, leaf kinds, dtypes, shapes and values."""
    gl, gt = pb.tree_flatten(got)
    wl, wt = pb.tree_flatten(want)
    assert gt == wt, f"{where}: structure {gt} != {wt}"
    for k, (g, w) in enumerate(zip(gl, wl, strict=True)):
        at = f"{where} leaf {k}"
        if isinstance(w, (bool, int, float, complex, str)) or w is None:
            assert type(g) is type(w), f"{at}: {type(g).__name__} != {type(w).__name__}"
            if isinstance(w, float):
                np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12, err_msg=at)
            else:
                assert g == w, f"{at}: {g!r} != {w!r}"
            continue
        if not isinstance(w, (np.ndarray, np.generic)):
            assert g == w, f"{at}: {g!r} != {w!r}"
            continue
        assert isinstance(g, (np.ndarray, np.generic)), f"{at}: got {type(g).__name__}"
        assert g.dtype == w.dtype, f"{at}: dtype {g.dtype} != {w.dtype}"
        assert np.shape(g) == np.shape(w), f"{at}: shape {np.shape(g)} != {np.shape(w)}"
        if w.dtype.kind in "fc":
            rtol = TOL[w.dtype]
            np.testing.assert_allclose(g, w, rtol=rtol, atol=rtol, err_msg=at)
        else:
            np.testing.assert_array_equal(g, w, err_msg=at)


@pytest.mark.parametrize(("prog", "case"), CASES,
                         ids=[f"{p.name}-{i}" for p, i in CASES])
def test_jit_matches_python(prog: Program, case: int) -> None:
    args = prog.inputs[case](np.random.default_rng(case))
    mine, theirs = copy.deepcopy(args), copy.deepcopy(args)
    want = prog.fn(*theirs)
    got = pb.jit(prog.fn, static_argnames=prog.static)(*mine)
    assert_same_tree(got, want)
    assert_same_tree(mine, theirs, where="arguments after the call")


def test_corpus_is_large_and_covers_every_category() -> None:
    assert len(PROGRAMS) >= 150
    assert {p.category for p in PROGRAMS} >= {
        "straight_line", "static_control", "dynamic_control", "recursion",
        "data_structures", "mutation", "ml_layers", "scientific", "int_bool",
    }
    assert len({p.name for p in PROGRAMS}) == len(PROGRAMS), "program names must be unique"
