"""Numerical machinery of the corpus AD tests (``test_corpus_ad.py``): which leaves are
differentiated, random tangents, float64 central differences of the plain program, and a
comparison whose tolerance scales with the compared values."""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

import pullback as pb
from programs.registry import Program

#: (rtol, atol) of derivatives computed in each precision, against float64 references.
TOLERANCE = {np.dtype(np.float64): (1e-5, 1e-7), np.dtype(np.float32): (2e-3, 1e-4)}


def is_float(x: Any) -> bool:
    """A leaf pullback differentiates: a float array, a NumPy float scalar or a Python
    float (ints, bools, strings and integer arrays are not)."""
    if isinstance(x, (np.ndarray, np.generic)):
        return x.dtype.kind == "f"
    return isinstance(x, float)


def leaves(tree: Any) -> list:
    """The leaves of ``tree``, with each None kept as a leaf: primals and the cotangents
    pullback returns for them (None for non-float leaves) then line up one to one."""
    return pb.tree_flatten(tree, is_leaf=lambda x: x is None)[0]


def float64(tree: Any) -> Any:
    """``tree`` with its float arrays and NumPy float scalars in float64 (exact for
    float32), other leaves as they are."""
    def cast(x: Any) -> Any:
        if isinstance(x, (np.ndarray, np.generic)) and x.dtype.kind == "f":
            return x.astype(np.float64) if isinstance(x, np.ndarray) else np.float64(x)
        return x

    return pb.tree_map(cast, tree)


def _like(x: Any, values: np.ndarray) -> Any:
    """``values`` (of ``x``'s shape) as a leaf of ``x``'s kind and dtype."""
    if isinstance(x, np.ndarray):
        return values.astype(x.dtype)
    if isinstance(x, np.generic):
        return x.dtype.type(values)
    return float(values)


def random_like(tree: Any, rng: np.random.Generator) -> Any:
    """Standard normal values at the float leaves of ``tree``; other leaves as they are
    (pullback ignores what is given for them)."""
    return pb.tree_map(lambda x: _like(x, rng.standard_normal(np.shape(x)))
                       if is_float(x) else x, tree)


def zeros_like(tree: Any) -> Any:
    return pb.tree_map(lambda x: _like(x, np.zeros(np.shape(x))) if is_float(x) else x, tree)


def vdot(a: Any, b: Any) -> tuple[float, float]:
    """``<a, b>`` over the leaves where both are floats, and ``<|a|, |b|>`` (the size of
    its terms, which sets the tolerance of a comparison)."""
    total = size = 0.0
    for x, y in zip(leaves(a), leaves(b), strict=True):
        if is_float(x) and is_float(y):
            p = np.asarray(x, np.float64) * np.asarray(y, np.float64)
            total += float(np.sum(p))
            size += float(np.sum(np.abs(p)))
    return total, size


@dataclass
class Case:
    """One input case of a differentiable program, with static arguments bound."""

    prog: Program
    index: int
    fn: Callable
    args: tuple
    positions: tuple[int, ...]  # the differentiable positions among ``args``

    @property
    def name(self) -> str:
        return f"{self.prog.name}-{self.index}"

    @property
    def argnums(self) -> tuple[int, ...]:
        """Differentiable positions holding at least one float leaf."""
        return tuple(k for k in self.positions if any(map(is_float, leaves(self.args[k]))))

    @property
    def dtype(self) -> np.dtype:
        """float32 when any argument leaf is float32 (the program computes in float32)."""
        kinds = {np.asarray(x).dtype for x in leaves(self.args) if is_float(x)}
        return np.dtype(np.float32) if np.dtype(np.float32) in kinds else np.dtype(np.float64)

    @property
    def tolerance(self) -> tuple[float, float]:
        return TOLERANCE[self.dtype]

    def fresh(self) -> tuple:
        """A copy of the arguments: programs may write into them."""
        return copy.deepcopy(self.args)

    def run(self, args: tuple) -> Any:
        """The program in plain Python on a copy of ``args``."""
        return self.fn(*copy.deepcopy(args))

    def tangent(self, rng: np.random.Generator) -> tuple:
        """Random at the float leaves of the differentiable arguments, zero elsewhere."""
        return tuple(random_like(a, rng) if k in self.positions else zeros_like(a)
                     for k, a in enumerate(self.args))


def make_case(prog: Program, index: int) -> Case:
    """The case ``index`` of ``prog``, its inputs drawn as ``test_corpus`` draws them;
    static arguments (``prog.static``) are bound by keyword."""
    args = prog.inputs[index](np.random.default_rng(index))
    if not prog.static:
        return Case(prog, index, prog.fn, args, prog.differentiable)
    names = list(inspect.signature(prog.fn).parameters)[: len(args)]
    fixed = {n: a for n, a in zip(names, args, strict=True) if n in prog.static}
    keep = [k for k, n in enumerate(names) if n not in fixed]
    return Case(prog, index, functools.partial(prog.fn, **fixed), tuple(args[k] for k in keep),
                tuple(keep.index(k) for k in prog.differentiable))


def step_size(case: Case, scale: float = 1e-6) -> float:
    """``scale * max(1, |x|)`` over the differentiated leaves."""
    size = max([float(np.max(np.abs(x)))
                for k in case.positions for x in leaves(case.args[k])
                if is_float(x) and np.size(x)] or [0.0])
    return scale * max(1.0, size)


def _shifted(args: tuple, tangent: tuple, h: float) -> tuple:
    return pb.tree_map(lambda x, t: x + h * t if is_float(x) else x, args, tangent)


def central_difference(case: Case, tangent: tuple, h: float) -> list[np.ndarray | None]:
    """``(f(x + h t) - f(x - h t)) / 2h`` in float64 per result leaf (None at non-float
    leaves), the program run in plain Python on float64 copies of its arguments."""
    x = float64(case.args)
    plus, minus = (leaves(case.run(_shifted(x, tangent, s))) for s in (h, -h))
    return [(np.asarray(p, np.float64) - np.asarray(m, np.float64)) / (2 * h)
            if is_float(p) else None for p, m in zip(plus, minus, strict=True)]


def gradient_by_differences(case: Case, argnums: Sequence[int], h: float) -> tuple:
    """The gradient of a scalar program with respect to ``argnums``, element by element
    by central differences, in the arguments' structure (None at non-float leaves)."""
    zero = tuple(zeros_like(a) for a in case.args)
    flat, tree = pb.tree_flatten(zero, is_leaf=lambda x: x is None)
    grads: list[Any] = [None] * len(flat)
    owner = [k for k, a in enumerate(zero) for _ in leaves(a)]
    for i, x in enumerate(flat):
        if owner[i] not in argnums or not is_float(x):
            continue
        g = np.zeros(np.shape(x))
        for j in np.ndindex(np.shape(x)):
            unit = np.zeros(np.shape(x))
            unit[j] = 1.0
            direction = list(flat)
            direction[i] = _like(x, unit)
            (d,) = central_difference(case, pb.tree_unflatten(tree, direction), h)
            g[j] = d
        grads[i] = g
    full = pb.tree_unflatten(tree, grads)
    return tuple(full[k] for k in argnums)


def assert_close(got: Any, want: Any, rtol: float, atol: float, where: str) -> None:
    """``|got - want| <= atol + rtol * max(|got|, |want|, max |want|)`` elementwise: the
    relative error is measured against the largest value of the compared leaf."""
    g, w = np.asarray(got, np.float64), np.asarray(want, np.float64)
    assert g.shape == w.shape, f"{where}: shape {g.shape} != {w.shape}"
    scale = float(np.max(np.abs(w), initial=0.0))
    bound = atol + rtol * np.maximum(np.maximum(np.abs(g), np.abs(w)), scale)
    bad = ~(np.abs(g - w) <= bound)
    if bad.any():
        worst = np.unravel_index(np.argmax(np.where(bad, np.abs(g - w), -1)), g.shape)
        raise AssertionError(
            f"{where}: {int(bad.sum())} of {g.size} elements differ; worst at {worst}: "
            f"got {g[worst]!r}, want {w[worst]!r} (leaf scale {scale:.3g})\n"
            f"got:  {np.array2string(g, precision=8)}\nwant: {np.array2string(w, precision=8)}")
