"""Numerical machinery of the corpus AD tests (``test_corpus_ad.py``): which leaves are
differentiated, random tangents, float64 central differences of the plain program, and a
comparison whose tolerance scales with the compared values."""

from __future__ import annotations

import copy
import functools
import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import pullback as pb
from programs.registry import Program

#: (rtol, atol) of derivatives computed in each precision, against float64 references.
#: float32: rounding (1.2e-7 per operation) on intermediate values of order 1-10 leaves
#: absolute errors up to ~1e-6 where a derivative is near zero, and relative errors up to
#: 4e-5 (recursion.scaling_and_squaring_exp squares 12 times); both with a 5x margin.
TOLERANCE = {np.dtype(np.float64): (1e-5, 1e-7), np.dtype(np.float32): (2e-4, 1e-5)}


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
    """Zeros at the float leaves of ``tree``; other leaves as they are."""
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
        dtypes = {np.asarray(x).dtype for x in leaves(self.args) if is_float(x)}
        return np.dtype(np.float32) if np.dtype(np.float32) in dtypes else np.dtype(np.float64)

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

    def split(self, args: tuple) -> tuple[tuple, tuple]:
        """``args`` as (the ``argnums`` arguments, the others), as ``weighted_loss``
        takes them."""
        return (tuple(args[k] for k in self.argnums),
                tuple(a for k, a in enumerate(args) if k not in self.argnums))

    @property
    def order(self) -> tuple[tuple[bool, int], ...]:
        """Where ``weighted_loss`` finds each argument: (in the first part?, index)."""
        nums, rest = self.argnums, [k for k in range(len(self.args)) if k not in self.argnums]
        return tuple((True, nums.index(k)) if k in nums else (False, rest.index(k))
                     for k in range(len(self.args)))


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


def weighted_sum(tree: Any, weights: Any) -> Any:
    """``sum(w * leaf)`` over the result leaves that have a weight (None elsewhere).
    Staged by pullback as part of the differentiated function."""
    if isinstance(tree, dict):
        return sum([weighted_sum(tree[k], weights[k]) for k in tree])
    if isinstance(tree, (list, tuple)):
        return sum([weighted_sum(t, w) for t, w in zip(tree, weights, strict=True)])
    if weights is None:
        return 0.0
    return np.sum(tree * weights)


def weighted_loss(dyn: tuple, rest: tuple, fn: Callable, weights: Any,
                  order: tuple[tuple[bool, int], ...]) -> Any:
    """``weighted_sum(fn(*args), weights)``: a program reduced to a float scalar, with its
    differentiated arguments ``dyn`` apart from the ``rest`` (see ``Case.order``)."""
    args = [dyn[i] if first else rest[i] for first, i in order]
    return weighted_sum(fn(*args), weights)


def random_weights(result: Any, rng: np.random.Generator) -> Any:
    """Random weights for the float leaves of ``result``, None for the others."""
    return pb.tree_map(lambda x: _like(x, rng.standard_normal(np.shape(x)))
                       if is_float(x) else None, result)


def hessian_times(hessian: Any, primals: Any, tangent: Any) -> list[np.ndarray | None]:
    """``H t`` per leaf of ``primals`` (None at non-float leaves), where ``hessian`` is
    ``pb.hessian``'s result for ``primals``: at each float leaf ``i``, a copy of the
    primals' structure holding the blocks ``d2f / dx_i dx_j``."""
    xs, ts, blocks = leaves(primals), leaves(tangent), leaves(hessian)
    assert len(blocks) == sum(len(xs) if is_float(x) else 1 for x in xs), \
        "the Hessian does not have the structure of the primals nested in itself"
    out: list[np.ndarray | None] = []
    for x in xs:
        if not is_float(x):
            assert blocks.pop(0) is None
            out.append(None)
            continue
        row, blocks = blocks[: len(xs)], blocks[len(xs):]
        out.append(sum([np.tensordot(np.asarray(b), np.asarray(t), axes=np.ndim(t))
                        for b, t, y in zip(row, ts, xs, strict=True) if is_float(y)]))
    return out


def step_size(case: Case, scale: float) -> float:
    """``scale * max(1, |x|)`` over the differentiated leaves."""
    size = max([float(np.max(np.abs(x)))
                for k in case.positions for x in leaves(case.args[k])
                if is_float(x) and np.size(x)] or [0.0])
    return scale * max(1.0, size)


def shifted(args: Any, tangent: Any, h: float) -> Any:
    """``args + h * tangent`` at the float leaves."""
    return pb.tree_map(lambda x, t: x + h * t if is_float(x) else x, args, tangent)


#: The five-point central difference: f'(x) ~ sum(w f(x + s h)) / h, error O(h^4).
STENCIL = ((-2.0, 1 / 12), (-1.0, -2 / 3), (1.0, 2 / 3), (2.0, -1 / 12))


def five_point(evaluate: Callable[[float], list], h: float) -> list[np.ndarray | None]:
    """The derivative of ``evaluate(d)`` (a list of leaves) at ``d = 0`` by the
    five-point central difference with step ``h``, in float64 per float leaf (None at the
    others)."""
    runs = [evaluate(s * h) for s, _ in STENCIL]
    weights = [w for _, w in STENCIL]
    return [sum([w * np.asarray(r, np.float64) for w, r in zip(weights, rs, strict=True)]) / h
            if is_float(rs[0]) else None for rs in zip(*runs, strict=True)]


def central_difference(case: Case, tangent: tuple, h: float) -> list[np.ndarray | None]:
    """The derivative of the program's result leaves along ``tangent``, the program run
    in plain Python on float64 copies of its arguments."""
    x = float64(case.args)
    return five_point(lambda d: leaves(case.run(shifted(x, tangent, d))), h)


def gradient_by_differences(case: Case, h: float) -> tuple:
    """The gradient of a scalar program with respect to ``case.argnums``, element by
    element by central differences, in the arguments' structure (None at non-float
    leaves)."""
    zero = tuple(zeros_like(a) for a in case.args)
    flat, tree = pb.tree_flatten(zero, is_leaf=lambda x: x is None)
    grads: list[Any] = [None] * len(flat)
    owner = [k for k, a in enumerate(zero) for _ in leaves(a)]
    for i, x in enumerate(flat):
        if owner[i] not in case.argnums or not is_float(x):
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
    return case.split(pb.tree_unflatten(tree, grads))[0]


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
