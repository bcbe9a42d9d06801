"""Where no C compiler works: a function that is only jitted runs as plain Python once
staging has accepted it (exact, and far faster than the interpreter); transforms and an
explicit ``backend="interp"`` run their IR on the interpreter; the warning says how much
slower that is and how to get a compiler."""

from __future__ import annotations

import itertools
import warnings

import numpy as np
import pytest

import pullback as pb
from pullback.backends import interp
from pullback.backends.c.build import compiler

X = np.array([0.5, -1.5, 2.0])


@pytest.fixture
def no_compiler(monkeypatch):
    monkeypatch.delenv("PULLBACK_BACKEND", raising=False)
    monkeypatch.setenv("PULLBACK_CC", "/nonexistent/pullback-cc")
    compiler.warn_no_compiler_once.cache_clear()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        yield caught
    compiler.warn_no_compiler_once.cache_clear()


@pytest.fixture
def interpreter_runs(monkeypatch):
    """How many times the IR interpreter ran a function."""
    runs = []
    real = interp.run

    def counted(*args):
        runs.append(args[0])
        return real(*args)

    monkeypatch.setattr(interp, "run", counted)
    return runs


def scalar_loop(x, n):
    s = 0.0
    for i in range(n):
        s = s + x * i - s * 0.5
    return s


def test_a_jitted_function_runs_as_python(no_compiler, interpreter_runs):
    for backend in (None, "c"):
        jitted = pb.jit(scalar_loop, backend=backend)
        for n in (3, 3, 50):
            assert jitted(1.5, n) == scalar_loop(1.5, n)
    assert interpreter_runs == []
    (warning,) = [w for w in no_compiler if "C compiler" in str(w.message)]
    message = str(warning.message)
    assert "/nonexistent/pullback-cc" in message and "plain Python" in message
    assert "slower" in message and "apt install gcc" in message and "PULLBACK_CC" in message


def test_python_semantics_are_kept(no_compiler, interpreter_runs):
    def scale_in_place(x, a):
        x *= a
        return x[1:]

    x = X.copy()
    view = pb.jit(scale_in_place)(x, 2.0)
    np.testing.assert_array_equal(x, X * 2.0)
    assert view.base is x  # what plain Python returns: a view of the argument
    assert interpreter_runs == []


def test_what_staging_refuses_is_refused(no_compiler):
    def via_operator(x):  # a C function given run-time values
        return list(itertools.accumulate([x, 2 * x]))[-1]

    with pytest.raises(pb.UnsupportedError, match="no Python source"):
        pb.jit(via_operator)(X)


def test_transforms_and_the_explicit_interpreter_run_the_ir(no_compiler, interpreter_runs):
    def loss(x):
        return np.sum(np.sin(x) * x)

    np.testing.assert_allclose(pb.grad(loss)(X), np.sin(X) + X * np.cos(X))
    assert len(interpreter_runs) == 1
    np.testing.assert_allclose(pb.jit(loss, backend="interp")(X), loss(X))
    assert len(interpreter_runs) == 2
    np.testing.assert_allclose(pb.jit(pb.grad(loss))(X), np.sin(X) + X * np.cos(X))
    assert len(interpreter_runs) == 3
