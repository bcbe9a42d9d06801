"""What a user may see when compiling fails: a ``CompileError`` (file:line:col, caret,
hint), the exception plain Python raises, or a ``pb.InternalError`` naming the user's
line with pullback's own exception chained.  Native Python code that meets a run-time
array (a builtin, a dict view of arrays) computes as NumPy would or refuses clearly."""

from __future__ import annotations

import dataclasses
import itertools

import numpy as np
import pytest

import pullback as pb
from pullback.ops import elementwise as E

X = np.array([0.5, -1.5, 2.0])


def test_builtins_over_containers_of_run_time_arrays():
    def sums(x):
        d = {"a": x, "b": x * 2}
        return sum(d.values()), sum([x[0], x[1]], start=1.0), sum(x), sum(d.values(), x)

    for got, want in zip(pb.jit(sums)(X), sums(X), strict=True):
        np.testing.assert_allclose(got, want)
    np.testing.assert_allclose(pb.grad(lambda x: np.sum(sum({"a": x, "b": x}.values())))(X),
                               np.full(3, 2.0))


class Holder:  # a plain class: its attributes are opaque to pullback's containers
    def __init__(self, value):
        self.value = value


def test_arrays_met_by_native_code_behave_as_arrays_or_refuse():
    def via_operator(x):  # a C function given run-time values
        return list(itertools.accumulate([x, 2 * x]))[-1]

    with pytest.raises(pb.UnsupportedError, match="no Python source"):
        pb.jit(via_operator)(X)

    def ordering(x):
        return sorted([x[0], x[1]])

    with pytest.raises(pb.CompileError):
        pb.jit(ordering)(X)


def test_the_programs_own_exceptions_pass_as_python_raises_them():
    @dataclasses.dataclass
    class Point:
        x: float
        y: float

    def divide(x):
        return x * (1 / 0)

    def index(x):
        return x * [1, 2][5]

    def construct(x):
        return Point(x)

    def key(x):
        return {"a": x}["b"]

    def raises(x):
        raise KeyError("mine")

    def broadcast(x):
        return x + np.ones(4)

    def attribute(x):
        return Holder(x).missing

    for fn, exc in [(divide, ZeroDivisionError), (index, IndexError), (construct, TypeError),
                    (key, KeyError), (raises, KeyError), (broadcast, ValueError),
                    (attribute, AttributeError)]:
        with pytest.raises(exc) as python:
            fn(X)
        with pytest.raises(exc) as compiled:
            pb.jit(fn)(X)
        assert isinstance(compiled.value, type(python.value)), fn.__name__
        assert not isinstance(compiled.value, pb.InternalError)


def test_a_bug_inside_pullback_is_an_internal_error_naming_the_users_line(monkeypatch):
    def f(x):
        y = np.exp(x)
        return np.sum(y)

    def broken_infer(*args, **kwargs):
        raise KeyError("some internal table")

    monkeypatch.setattr(E.exp, "infer", broken_infer)
    with pytest.raises(pb.InternalError) as info:
        pb.jit(f)(X)
    message = str(info.value)
    assert "pullback bug" in message
    assert "test_internal_errors.py" in message and "y = np.exp(x)" in message
    assert isinstance(info.value.__cause__, KeyError)
    with pytest.raises(pb.InternalError):
        pb.grad(f)(X)
    with pytest.raises(pb.InternalError):
        pb.make_ir(f)(X)


def test_a_bug_in_a_pass_is_an_internal_error_naming_the_function(monkeypatch):
    from pullback.passes import manager

    def broken(func):
        raise AttributeError("'NoneType' object has no attribute 'eqns'")

    monkeypatch.setattr(manager, "PIPELINE", [("broken", type("P", (), {
        "in_place": staticmethod(broken)})())])

    def g(x):
        return x * 2.0

    with pytest.raises(pb.InternalError, match="pullback bug") as info:
        pb.jit(g)(X)
    assert "test_internal_errors.py" in str(info.value)
    assert isinstance(info.value.__cause__, AttributeError)
