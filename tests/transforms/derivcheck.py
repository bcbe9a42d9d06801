"""Numerical checks of the derivative transforms on any IR function.

* forward mode against central differences of the function itself, in random
  directions (``check_jvp``);
* reverse mode against forward mode by the inner-product identity
  ``<J t, c> == <t, J^T c>`` for random ``t`` and ``c``, which holds up to rounding
  whatever ``J`` is, so it needs no step size (``check_vjp``);
* second order: the same two checks applied to the derivative functions
  (``check_jvp_of_vjp``, ``check_vjp_of_jvp``);
* exact zeros for piecewise-constant functions (``check_zero``).

Every function the transforms produce goes through the verifier before it runs.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from pullback.backends import interp
from pullback.ir.builder import Builder
from pullback.ir.core import Func, Lit
from pullback.ir.op import Op
from pullback.ir.types import TensorType, type_of_value
from pullback.ir.verify import verify
from pullback.transforms.jvp import jvp_func
from pullback.transforms.vjp import vjp_func


@dataclass(frozen=True)
class Tol:
    """The step of the central differences, the tolerance of jvp against them (relative
    to the largest derivative, at least 1) and that of the inner-product identity
    (relative to the sum of the magnitudes of the products)."""

    eps: float
    fd: float
    dot: float


#: Central differences lose about eps**2 to truncation and ulp / eps to rounding.
TOLS = {
    np.dtype(np.float64): Tol(eps=1e-6, fd=1e-6, dot=1e-10),
    np.dtype(np.float32): Tol(eps=4e-3, fd=2e-3, dot=1e-4),
}


def one_op(op: Op, args: Sequence[np.ndarray], params: dict[str, Any],
           lits: Sequence[int] = ()) -> tuple[Func, list[np.ndarray]]:
    """A function applying ``op`` to ``args`` (those at positions ``lits`` as literals,
    the others as parameters), and the arguments it takes."""
    with Builder() as b:
        ins = [Lit(a) if i in lits else b.param(type_of_value(a)) for i, a in enumerate(args)]
        func = b.finish(op.name, b.emit(op, ins, params))
    return func, [a for i, a in enumerate(args) if i not in lits]


def is_float(t) -> bool:
    return isinstance(t, TensorType) and t.dtype.is_float


def floats(types) -> list[TensorType]:
    return [t for t in types if is_float(t)]


def run(func: Func, args: Sequence[np.ndarray]) -> list[np.ndarray]:
    """``func`` verified and evaluated."""
    verify(func)
    return [np.asarray(v) for v in interp.run(func, *args)]


def tolerance(func: Func) -> Tol:
    """The tolerance of the least precise float among ``func``'s parameters and results."""
    dts = {t.dtype.np for t in floats([*func.in_types, *func.out_types])}
    return TOLS[min(dts, key=lambda d: d.itemsize, default=np.dtype(np.float64))]


def random_like(rng: np.random.Generator, types: Sequence[TensorType]) -> list[np.ndarray]:
    return [np.asarray(rng.standard_normal(t.shape)).astype(t.dtype.np) for t in types]


def tangents(rng: np.random.Generator, func: Func) -> list[np.ndarray]:
    """A random direction: one tangent per float parameter (what ``jvp_func`` takes)."""
    return random_like(rng, floats(func.in_types))


def cotangents(rng: np.random.Generator, func: Func) -> list[np.ndarray]:
    """Random cotangents, one per float result (what ``vjp_func`` takes)."""
    return random_like(rng, floats(func.out_types))


def _moved(func: Func, args, ts, step: float) -> list[np.ndarray]:
    """``args`` moved by ``step * ts`` along the float parameters."""
    it = iter(ts)
    return [np.asarray(a + step * next(it).astype(np.float64), a.dtype) if is_float(t) else a
            for a, t in zip(args, func.in_types, strict=True)]


def central_differences(func: Func, args, ts, eps: float) -> list[np.ndarray]:
    """The derivatives of the float results in direction ``ts``, in float64."""
    plus = run(func, _moved(func, args, ts, eps))
    minus = run(func, _moved(func, args, ts, -eps))
    return [(p.astype(np.float64) - m) / (2 * eps)
            for p, m, t in zip(plus, minus, func.out_types, strict=True) if is_float(t)]


def _same_primals(func: Func, args, results) -> None:
    """A transformed function computes the original results unchanged."""
    for got, want in zip(results, run(func, args), strict=True):
        np.testing.assert_array_equal(got, want)


def _typed(values, types) -> None:
    for v, t in zip(values, types, strict=True):
        assert v.dtype == t.dtype.np and v.shape == t.shape, f"{v.dtype}{v.shape} for {t}"


def check_jvp(func: Func, args, rng: np.random.Generator, directions: int = 2) -> None:
    """``jvp_func(func)`` agrees with central differences in random directions."""
    tol = tolerance(func)
    jf = jvp_func(func)
    n = len(func.out_types)
    for _ in range(directions):
        ts = tangents(rng, func)
        res = run(jf, [*args, *ts])
        _same_primals(func, args, res[:n])
        _typed(res[n:], floats(func.out_types))
        for k, (got, want) in enumerate(zip(res[n:], central_differences(func, args, ts, tol.eps),
                                            strict=True)):
            scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
            np.testing.assert_allclose(got, want, rtol=0, atol=tol.fd * scale,
                                       err_msg=f"tangent of float result {k}")


def _dots(xs, ys) -> tuple[float, float]:
    """``sum <x, y>`` and ``sum <|x|, |y|>`` (the scale of its rounding error), in float64."""
    pairs = [(x.astype(np.float64).ravel(), y.astype(np.float64).ravel())
             for x, y in zip(xs, ys, strict=True)]
    return (sum(float(x @ y) for x, y in pairs),
            sum(float(np.abs(x) @ np.abs(y)) for x, y in pairs))


def check_vjp(func: Func, args, rng: np.random.Generator) -> None:
    """``<J t, c> == <t, J^T c>``, J t from ``jvp_func`` and J^T c from ``vjp_func``."""
    tol = tolerance(func)
    n = len(func.out_types)
    ts, cs = tangents(rng, func), cotangents(rng, func)
    jt = run(jvp_func(func), [*args, *ts])[n:]
    res = run(vjp_func(func), [*args, *cs])
    _same_primals(func, args, res[:n])
    _typed(res[n:], floats(func.in_types))
    forward, scale_f = _dots(jt, cs)
    backward, scale_b = _dots(ts, res[n:])
    assert abs(forward - backward) <= tol.dot * (scale_f + scale_b), (
        f"<J t, c> = {forward!r} but <t, J^T c> = {backward!r}")


def check_jvp_of_vjp(func: Func, args, rng: np.random.Generator) -> None:
    """Forward over reverse: the jvp of ``vjp_func(func)`` against its central differences."""
    check_jvp(vjp_func(func), [*args, *cotangents(rng, func)], rng)


def check_vjp_of_jvp(func: Func, args, rng: np.random.Generator) -> None:
    """Reverse over forward: the vjp of ``jvp_func(func)`` by the inner-product identity."""
    check_vjp(jvp_func(func), [*args, *tangents(rng, func)], rng)


def check_zero(func: Func, args, rng: np.random.Generator) -> None:
    """Every tangent and cotangent is exactly zero (a piecewise-constant function)."""
    n = len(func.out_types)
    jt = run(jvp_func(func), [*args, *tangents(rng, func)])[n:]
    ct = run(vjp_func(func), [*args, *cotangents(rng, func)])[n:]
    _typed(jt, floats(func.out_types))
    _typed(ct, floats(func.in_types))
    for d in [*jt, *ct]:
        assert not np.any(d), f"nonzero derivative {d}"
