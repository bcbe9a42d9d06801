"""Differential testing of IR against NumPy: stage a mapping, check the IR, run, compare.

``check(np.sum, x, axis=0)`` builds a function whose parameters are the array (and
Python float) arguments, emits the registered mapping of ``np.sum`` into it, verifies
it, round-trips it through the printer and parser, runs it on the interpreter and
compares values, dtypes and weak-ness with what NumPy itself returns.
"""

from __future__ import annotations

import operator
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from pullback.backends import interp
from pullback.ir.builder import Builder, as_atom
from pullback.ir.core import Func, Lit, Var
from pullback.ir.parser import parse_func
from pullback.ir.printer import format_func
from pullback.ir.types import type_of_value
from pullback.ir.verify import verify
from pullback.numpy_api import ATTRIBUTES, CALLABLES, METHODS, OPERATORS

RTOL = {np.dtype(np.float32): 2e-5, np.dtype(np.float64): 1e-11}


def _is_leaf(x: Any, i: int, dyn: tuple[int, ...]) -> bool:
    if isinstance(x, (np.ndarray, np.generic, float)) and not isinstance(x, bool):
        return True
    return i in dyn and isinstance(x, (int, bool))


def _parametrize(b: Builder, args: tuple, dyn: tuple[int, ...], leaves: list) -> list:
    """Replace dynamic leaves of ``args`` by Func parameters (lists/tuples recursed)."""

    def walk(x, i):
        if isinstance(x, (list, tuple)):
            return type(x)(walk(e, i) for e in x)
        if _is_leaf(x, i, dyn):
            leaves.append(x)
            return b.param(type_of_value(x))
        return x

    return [walk(a, i) for i, a in enumerate(args)]


def _flatten_out(out: Any) -> tuple[list, Any]:
    if isinstance(out, (list, tuple)):
        parts = [_flatten_out(o) for o in out]
        return [x for p, _ in parts for x in p], (type(out), [s for _, s in parts])
    return [out], None


def roundtrip(func: Func) -> None:
    """The verifier accepts ``func`` and its text parses back to the same text."""
    verify(func)
    text = format_func(func)
    again = parse_func(text)
    verify(again)
    assert format_func(again) == text


def stage(mapping: Callable, args: tuple, kwargs: dict, dyn: tuple[int, ...] = ()):
    """A Func computing ``mapping(*args, **kwargs)``, its dynamic inputs, and the outputs'
    nesting (static outputs are returned as such, not staged)."""
    leaves: list = []
    with Builder() as b:
        staged = _parametrize(b, args, dyn, leaves)
        out = mapping(*staged, **kwargs)
        flat, tree = _flatten_out(out)
        results = [x for x in flat if isinstance(x, (Var, Lit))]
        func = b.finish("f", results)
    return func, leaves, flat, tree


def _compare(got: Any, want: Any, var_type) -> None:
    if isinstance(want, (bool, int, float)) and not isinstance(want, np.generic):
        assert var_type.weak, f"NumPy gave Python {type(want).__name__}, IR gave {var_type}"
    else:
        assert not var_type.weak, f"NumPy gave {type(want).__name__}, IR gave weak {var_type}"
    want_arr = np.asarray(want)
    got = np.asarray(got)
    assert got.dtype == want_arr.dtype, f"dtype {got.dtype} != NumPy's {want_arr.dtype}"
    assert got.shape == want_arr.shape, f"shape {got.shape} != NumPy's {want_arr.shape}"
    if want_arr.dtype.kind == "f":
        np.testing.assert_allclose(got, want_arr, rtol=RTOL[want_arr.dtype], atol=1e-6
                                   if want_arr.dtype == np.float32 else 1e-12, equal_nan=True)
    else:
        np.testing.assert_array_equal(got, want_arr)


def run_mapping(reference: Callable, mapping: Callable, *args, dyn=(), **kwargs) -> Func:
    want = reference(*args, **kwargs)
    func, leaves, flat, tree = stage(mapping, args, kwargs, dyn)
    roundtrip(func)
    got = iter(interp.run(func, *leaves))
    want_flat, want_tree = _flatten_out(want)
    assert tree == want_tree, f"output structure {tree} != NumPy's {want_tree}"
    for g, w in zip(flat, want_flat, strict=True):
        if isinstance(g, (Var, Lit)):
            _compare(next(got), w, g.type)
        else:
            assert type(g) is type(w) and g == w, f"static output {g!r} != NumPy's {w!r}"
    return func


def check(fn: Callable, *args, dyn=(), **kwargs) -> Func:
    """``CALLABLES[fn]`` staged on ``args`` agrees with ``fn(*args, **kwargs)``."""
    return run_mapping(fn, CALLABLES[fn], *args, dyn=dyn, **kwargs)


def check_method(name: str, x, *args, **kwargs) -> Func:
    return run_mapping(lambda s, *a, **k: getattr(s, name)(*a, **k), METHODS[name], x, *args,
                       **kwargs)


def check_attribute(name: str, x) -> Func:
    return run_mapping(lambda s: getattr(s, name), ATTRIBUTES[name], x)


def check_operator(name: str, *args, dyn=()) -> Func:
    return run_mapping(getattr(operator, name), OPERATORS[name], *args, dyn=dyn)


def check_raises(exc: type[BaseException], fn: Callable, *args, mapping=None, **kwargs) -> None:
    """NumPy raises ``exc``, and so does staging or running the mapping."""
    import pytest

    with pytest.raises(exc):
        fn(*args, **kwargs)
    with pytest.raises(exc):
        func, leaves, _, _ = stage(mapping or CALLABLES[fn], args, kwargs)
        interp.run(func, *leaves)


def agree(fn: Callable, *args, **kwargs) -> None:
    """The mapping gives NumPy's result, or raises what NumPy raises."""
    try:
        fn(*args, **kwargs)
    except Exception as e:  # noqa: BLE001 - the point is to raise the same thing
        check_raises(type(e), fn, *args, **kwargs)
        return
    check(fn, *args, **kwargs)


__all__ = ["agree", "as_atom", "check", "check_attribute", "check_method", "check_operator",
           "check_raises", "roundtrip", "run_mapping", "stage"]


def child_env(**changes: str) -> dict[str, str]:
    """The environment of a test's child Python: this checkout first on its path (before
    what the parent's PYTHONPATH holds, such as a --target install of the dependencies),
    the backend its own default, then ``changes``."""
    root = str(Path(__file__).resolve().parent.parent)
    path = os.pathsep.join(p for p in (root, os.environ.get("PYTHONPATH", "")) if p)
    env = {**os.environ, "PYTHONPATH": path, **changes}
    env.pop("PULLBACK_BACKEND", None)
    return env
