"""Compilation that costs more than it should says so: a build running long reports
itself on stderr, IR too large for a C compiler runs on the interpreter with a warning
naming the unrolled line, and a function compiled again and again for new values of a
Python int argument is told to make it a run-time value."""

from __future__ import annotations

import time
import warnings

import numpy as np
import pytest

import pullback as pb
from pullback import config
from pullback.backends.c import pipeline
from pullback.backends.c.build import long_builds

X = np.array([0.5, -1.5, 2.0])


@pytest.fixture
def slow_builds(monkeypatch):
    """Every C build takes half a second longer."""
    real = pipeline.build_module

    def slow(*args, **kwargs):
        time.sleep(0.5)
        return real(*args, **kwargs)

    monkeypatch.setattr(pipeline, "build_module", slow)


def test_a_long_build_says_what_it_compiles(slow_builds, monkeypatch, capfd):
    def sine_sum(x):
        return np.sum(np.sin(x) * 3.0)

    monkeypatch.setenv("PULLBACK_PROGRESS", "0.05")
    np.testing.assert_allclose(pb.jit(sine_sum, backend="c")(X), sine_sum(X))
    err = capfd.readouterr().err
    assert "pullback: compiling sine_sum (" in err and "lines of C" in err, err
    assert err.count("pullback:") == 1


def test_builds_are_silent_when_fast_or_told(slow_builds, monkeypatch, capfd):
    def cosine_sum(x):
        return np.sum(np.cos(x) * 3.0)

    monkeypatch.delenv("PULLBACK_PROGRESS", raising=False)
    assert config.progress_after() == 2.0
    monkeypatch.setenv("PULLBACK_PROGRESS", "60")
    pb.jit(cosine_sum, backend="c")(X)
    monkeypatch.setenv("PULLBACK_PROGRESS", "off")
    pb.jit(cosine_sum, backend="c")(X[:2])
    assert capfd.readouterr().err == ""


WEIGHTS = [np.full(3, 0.01 * k) for k in range(30)]


def layered(x):
    s = x
    for w in WEIGHTS:
        s = np.tanh(s * w + 1.0)
    return s


def test_ir_too_large_for_c_runs_on_the_interpreter_naming_the_unrolled_line(monkeypatch):
    monkeypatch.setattr(long_builds, "MAX_EQUATIONS", 50)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        staged, _ = pb.jit(layered, backend="c").specialise(X)
        np.testing.assert_allclose(pb.jit(layered, backend="c")(X), layered(X))
    assert staged.runner is None
    (message,) = [str(w.message) for w in caught if "equations" in str(w.message)]
    assert "more than the 50" in message
    assert f"{__file__}:{layered.__code__.co_firstlineno + 3}" in message
    assert "s = np.tanh(s * w + 1.0)" in message and "np.stack" in message


def halved(x, n):
    for _ in range(n):
        x = x * 0.5
    return x


def test_many_values_of_a_python_int_warn_once():
    jitted = pb.jit(halved)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for n in range(12):
            np.testing.assert_allclose(jitted(X, n), halved(X, n))
    (warning,) = [w for w in caught if "compile-time constant" in str(w.message)]
    message = str(warning.message)
    assert "halved" in message and "'n'" in message and "np.int64(n)" in message
    assert "9 values" in message
    assert warning.filename == __file__


def test_static_by_name_or_run_time_ints_do_not_warn():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        static = pb.jit(halved, static_argnames="n")
        for n in range(12):
            static(X, n)
        run_time = pb.jit(halved)
        for n in range(12):
            run_time(X, np.int64(n))
    assert not [w for w in caught if "compile-time constant" in str(w.message)]
