"""Tiered execution (``pullback/tiered.py``): a first call the interpreter runs quickly runs
there, its native code builds on a thread, and later calls (or ``wait``) wait for it and
run natively.  Dear interpreter runs (long scalar loops, ``while`` loops) compile before
their first call."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb
from pullback import api, tiered
from pullback.backends import interp
from pullback.errors import CompileError


@pytest.fixture(autouse=True)
def _tiered(monkeypatch):
    monkeypatch.setenv("PULLBACK_TIERED", "1")


def _affine(x):
    return 2.0 * x + 1.0


def _scalar_loop(x):
    s = 0.0
    for i in range(100_000):
        s = s + x[i % 4]
    return s


def _halvings(x):
    while x > 1.0:
        x = x / 2.0
    return x


def test_first_call_runs_on_the_interpreter_then_natively():
    f = pb.jit(_affine, backend="c")
    x = np.arange(6.0)
    np.testing.assert_array_equal(f(x), 2.0 * x + 1.0)
    staged, _ = f.specialise(x)
    assert staged.runner is None and tiered.pending(staged) and tiered.started(staged)
    np.testing.assert_array_equal(f(x), 2.0 * x + 1.0)  # waits for the build
    assert staged.runner is not None and not tiered.pending(staged)
    assert f._spec.fast is not None  # the native fast entry from the next call on


def test_wait_starts_a_build_no_call_started():
    f = pb.jit(_affine, backend="c")
    staged, _ = f.specialise(np.ones(2))
    assert tiered.pending(staged) and not tiered.started(staged)
    f.wait()
    assert staged.runner is not None


def test_dear_interpreter_runs_compile_first():
    x = np.arange(4.0)
    loop = pb.jit(_scalar_loop, backend="c")
    assert loop(x) == _scalar_loop(x)
    assert loop.specialise(x)[0].runner is not None
    whiles = pb.jit(_halvings, backend="c")
    assert whiles(np.float64(37.0)) == _halvings(37.0)
    assert whiles.specialise(np.float64(37.0))[0].runner is not None


def test_estimate_follows_the_structure():
    ir = pb.make_ir
    x = np.arange(4.0)
    assert interp.estimate(ir(_affine)(x)) < tiered.BUDGET_S
    assert interp.estimate(ir(_scalar_loop)(x)) > tiered.BUDGET_S
    assert interp.estimate(ir(_halvings)(np.float64(3.0))) is None


def test_off_by_setting(monkeypatch):
    monkeypatch.setenv("PULLBACK_TIERED", "0")
    f = pb.jit(lambda x: x - 3.0, backend="c")
    f(np.ones(3))
    assert f.specialise(np.ones(3))[0].runner is not None


def test_what_a_build_raises_is_raised_by_wait(monkeypatch):
    from pullback.backends import c

    def broken(func, donated=None):
        raise CompileError("the build broke")

    monkeypatch.setattr(c, "compile_func", broken)
    f = pb.jit(lambda x: x * 5.0, backend="c")
    np.testing.assert_array_equal(f(np.ones(2)), 5.0)
    with pytest.raises(CompileError, match="the build broke"):
        f.wait()
    np.testing.assert_array_equal(f(np.ones(2)), 5.0)  # the interpreter runs it on


def test_unsupported_warns_when_the_build_is_waited_for(monkeypatch):
    from pullback.backends import c

    def declined(func, donated=None):
        raise c.Unsupported("no code for this yet")

    monkeypatch.setattr(c, "compile_func", declined)
    f = pb.jit(lambda x: x * 7.0, backend="c")
    f(np.ones(2))
    with pytest.warns(RuntimeWarning, match="no code for this yet"):
        api.finish_builds()
    assert f.specialise(np.ones(2))[0].runner is None


def test_first_call_faults_as_plain_python():
    f = pb.jit(lambda x, i: x[i], backend="c")
    with pytest.raises(IndexError):
        f(np.ones(3), np.int64(5))
    f.wait()
    with pytest.raises(IndexError):
        f(np.ones(3), np.int64(5))
