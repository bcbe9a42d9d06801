"""A compiled call with fixed Python scalars among its arguments, or reading module
globals, goes from ``Jitted.__call__`` straight to the module's entry bound to them
(``glue.c``'s ``bind``, ``call/fast.py``): the module checks the scalars and reads the
globals.  Each answer is plain Python's; what it holds is collected with the module that
defined the function."""

from __future__ import annotations

import gc
import weakref

import numpy as np
import pytest

import pullback as pb
from pullback.backends.c.build import compiler

pytestmark = pytest.mark.skipif(not compiler.have_compiler(), reason="no C compiler")

SCALE = 2.0
X = np.linspace(0.5, 1.5, 5)


def scaled(x):
    return x * SCALE


def times(x, n):
    return x * n


def plain(x):
    return x * 3.0


def helper(x):
    return x + 1.0


def uses_helper(x):
    return helper(x) * 2.0


def _kind(jitted) -> str:
    return type(jitted._spec.fast.call).__name__


def test_bound_where_there_is_something_to_check_or_read():
    for fn, args in ((scaled, (X,)), (times, (X, 3)), (plain, (X,))):
        jitted = pb.jit(fn, backend="c")
        for _ in range(2):
            np.testing.assert_array_equal(jitted(*args), fn(*args))
    assert _kind(pb.jit(scaled, backend="c")) == "bound_entry"
    assert _kind(pb.jit(times, backend="c")) == "bound_entry"
    assert _kind(pb.jit(plain, backend="c")) != "bound_entry"


def test_a_global_of_another_type_or_value_and_other_calls_answer_as_python():
    global SCALE
    jitted = pb.jit(scaled, backend="c")
    jitted(X)
    try:
        for now in (-1.5, np.float64(4.0), np.arange(5.0), 3):
            SCALE = now
            np.testing.assert_array_equal(jitted(X), scaled(X))
    finally:
        SCALE = 2.0
    n_times = pb.jit(times, backend="c")
    for n in (3, 3, 4, 3.0, True, 3):
        got = n_times(X, n)
        np.testing.assert_array_equal(got, X * n)
    with pytest.raises(TypeError):
        n_times(X, 3, 4)


def test_a_global_function_rebound_is_staged_again():
    global helper
    jitted = pb.jit(uses_helper, backend="c")
    for _ in range(2):
        np.testing.assert_array_equal(jitted(X), uses_helper(X))
    assert _kind(jitted) == "bound_entry"  # it checks that helper is still helper
    first = helper
    try:
        helper = np.sin
        np.testing.assert_allclose(jitted(X), np.sin(X) * 2.0, rtol=1e-15)
    finally:
        helper = first
    np.testing.assert_array_equal(jitted(X), uses_helper(X))


def test_the_collector_sees_what_a_bound_entry_holds():
    """A bound entry holds a module's globals, which may hold it (through the jitted
    function): a cycle the collector must see through (``tp_traverse``)."""
    jitted = pb.jit(plain, backend="c")
    jitted(X)
    runner = next(st.runner for variants in jitted._spec.cache.values() for st in variants
                  if st.runner is not None)

    class Probe:
        pass

    env = {"probe": Probe()}
    alive = weakref.ref(env["probe"])
    env["bound"] = runner.bind(1, (), (), (0,), env, ())
    np.testing.assert_array_equal(env["bound"]((X,), jitted._spec.fast.form), plain(X))
    del env
    gc.collect()
    assert alive() is None
