"""The fast path of a call with fixed Python scalars among its arguments that also reads
module globals at run time (GradBench's ode: a step count and a global ``TF``): the
scalars are checked, the globals read anew, on every call, each answer plain Python's."""

from __future__ import annotations

import numpy as np
import pytest

import pullback as pb

TF = 2.0
OFFSET = 0.5
X = np.linspace(0.5, 1.5, 7)


def steps(x, n):
    y = np.zeros_like(x)
    for _ in range(n):
        y = y + TF * x / n
    return y


def steps_offset(x, n, m):
    return steps(x, n) + OFFSET * m


def _fast(fn, *args):
    jitted = pb.jit(fn, backend="c")
    np.testing.assert_allclose(jitted(*args), fn(*args), rtol=1e-12)
    fast = jitted._spec.fast  # the module checks the scalars and reads the globals
    assert fast is not None and type(fast.call).__name__ == "bound_entry"
    return jitted


def test_a_global_changed_between_calls_is_read_again():
    global TF
    jitted = _fast(steps, X, 3)
    try:
        for tf in (2.0, -1.25, 7.0):
            TF = tf
            np.testing.assert_allclose(jitted(X, 3), X * tf, rtol=1e-12)
    finally:
        TF = 2.0


@pytest.mark.parametrize("n", [3, 4, True, 1, 3])
def test_fixed_scalars_of_another_value_or_type_compile_again(n):
    jitted = _fast(steps, X, 3)
    got = jitted(X, n)
    np.testing.assert_allclose(got, steps(X, n), rtol=1e-12)
    assert jitted._spec.fast.guard[1] == ((1, type(n), n),)


def test_two_fixed_scalars_and_two_globals():
    jitted = _fast(steps_offset, X, 2, 5)
    assert jitted._spec.fast.guard == (3, ((1, int, 2), (2, int, 5)))
    for n, m in ((2, 5), (2, 6), (3, 5), (2, 5), (1, 5), (True, 5)):
        np.testing.assert_allclose(jitted(X, n, m), steps_offset(X, n, m), rtol=1e-12)
    assert jitted._spec.fast.guard[1] == ((1, bool, True), (2, int, 5))  # True is not 1


def test_a_deleted_global_raises_what_python_raises(monkeypatch):
    jitted = _fast(steps_offset, X, 2, 5)
    monkeypatch.delitem(globals(), "OFFSET")
    with pytest.raises(NameError):
        jitted(X, 2, 5)
    monkeypatch.undo()
    np.testing.assert_allclose(jitted(X, 2, 5), steps_offset(X, 2, 5), rtol=1e-12)

