"""Numerical checks of the derivative transforms on any IR function.

* forward mode against central differences of the function itself, in random
  directions (``check_jvp``);
* reverse mode against forward mode by the inner-product identity
  ``<J t, c> == <t, J^T c>`` for random ``t`` and ``c``, which holds up to rounding
  whatever ``J`` is, so it needs no step size (``check_vjp``);
* second order: the same two checks applied to the derivative functions
  (``check_jvp_of_vjp``, ``check_vjp_of_jvp``);
* exact zeros for piecewise-constant functions (``check_zero``).

``active`` masks say which parameters get tangents (the others are held fixed); by
default every float one does.  Every function the transforms produce goes through the
verifier before it runs.
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


@dataclass(frozen=True)
class Same:
    """An operand that is operand ``index`` again (one value used twice)."""

    index: int


def one_op(op: Op, args: Sequence[Any], params: dict[str, Any], lits: Sequence[int] = (),
           keep: Sequence[int] | None = None) -> tuple[Func, list[Any]]:
    """A function applying ``op`` to ``args`` and returning its results ``keep`` (default:
    all), and the arguments it takes.  Operands at positions ``lits`` are literals, a
    ``Same`` repeats an operand, the others are parameters."""
    with Builder() as b:
        ins: list = []
        for i, a in enumerate(args):
            if isinstance(a, Same):
                ins.append(ins[a.index])
            else:
                ins.append(Lit(a) if i in lits else b.param(type_of_value(a)))
        outs = b.emit(op, ins, params)
        func = b.finish(op.name, outs if keep is None else [outs[k] for k in keep])
    return func, [a for i, a in enumerate(args) if i not in lits and not isinstance(a, Same)]


def is_float(t) -> bool:
    return isinstance(t, TensorType) and t.dtype.is_float


def floats(types) -> list[TensorType]:
    return [t for t in types if is_float(t)]


def float_mask(func: Func) -> list[bool]:
    """Every float parameter active (what the transforms do by default)."""
    return [is_float(t) for t in func.in_types]


def run(func: Func, args: Sequence[Any]) -> list[np.ndarray]:
    """``func`` verified and evaluated."""
    verify(func)
    return [np.asarray(v) for v in interp.run(func, *args)]


def tolerance(func: Func) -> Tol:
    """The tolerance of the least precise float among ``func``'s parameters and results."""
    dts = {t.dtype.np for t in floats([*func.in_types, *func.out_types])}
    return TOLS[min(dts, key=lambda d: d.itemsize, default=np.dtype(np.float64))]


def random_like(rng: np.random.Generator, types: Sequence[TensorType]) -> list[np.ndarray]:
    return [np.asarray(rng.standard_normal(t.shape)).astype(t.dtype.np) for t in types]


def tangents(rng: np.random.Generator, func: Func, active: Sequence[bool]) -> list[np.ndarray]:
    """A random direction: one tangent per active parameter (what ``jvp_func`` takes)."""
    return random_like(rng, [t for t, a in zip(func.in_types, active, strict=True) if a])


def cotangents(rng: np.random.Generator, func: Func) -> list[np.ndarray]:
    """Random cotangents, one per float result (what ``vjp_func`` takes)."""
    return random_like(rng, floats(func.out_types))


def _moved(args, active, ts, step: float) -> list[Any]:
    """``args`` moved by ``step * ts`` along the active parameters."""
    it = iter(ts)
    return [np.asarray(a + step * next(it).astype(np.float64), np.asarray(a).dtype) if on else a
            for a, on in zip(args, active, strict=True)]


def central_differences(func: Func, args, active, ts, eps: float) -> list[np.ndarray]:
    """The derivatives of the float results in direction ``ts``, in float64."""
    plus = run(func, _moved(args, active, ts, eps))
    minus = run(func, _moved(args, active, ts, -eps))
    return [(p.astype(np.float64) - m) / (2 * eps)
            for p, m, t in zip(plus, minus, func.out_types, strict=True) if is_float(t)]


def _same_primals(func: Func, args, results) -> None:
    """A transformed function computes the original results unchanged."""
    for got, want in zip(results, run(func, args), strict=True):
        np.testing.assert_array_equal(got, want)


def _typed(values, types) -> None:
    for v, t in zip(values, types, strict=True):
        assert v.dtype == t.dtype.np and v.shape == t.shape, f"{v.dtype}{v.shape} for {t}"


def check_jvp(func: Func, args, rng: np.random.Generator,
              active: Sequence[bool] | None = None, directions: int = 2) -> None:
    """``jvp_func(func, active, lanes=directions)`` agrees with central differences in
    random directions, each a lane of one forward pass."""
    active = float_mask(func) if active is None else active
    tol = tolerance(func)
    jf = jvp_func(func, active, lanes=directions)
    n = len(func.out_types)
    ts = [tangents(rng, func, active) for _ in range(directions)]
    res = run(jf, [*args, *[lane[p] for p in range(len(ts[0])) for lane in ts]])
    _same_primals(func, args, res[:n])
    for j, direction in enumerate(ts):
        got = res[n + j::directions]
        _typed(got, floats(func.out_types))
        want = central_differences(func, args, active, direction, tol.eps)
        for k, (g, fd) in enumerate(zip(got, want, strict=True)):
            scale = max(1.0, float(np.max(np.abs(fd), initial=0.0)))
            np.testing.assert_allclose(g, fd, rtol=0, atol=tol.fd * scale,
                                       err_msg=f"lane {j}: tangent of float result {k}")


def _dots(xs, ys) -> tuple[float, float]:
    """``sum <x, y>`` and ``sum <|x|, |y|>`` (the scale of its rounding error), in float64."""
    pairs = [(x.astype(np.float64).ravel(), y.astype(np.float64).ravel())
             for x, y in zip(xs, ys, strict=True)]
    return (sum(float(x @ y) for x, y in pairs),
            sum(float(np.abs(x) @ np.abs(y)) for x, y in pairs))


def check_vjp(func: Func, args, rng: np.random.Generator,
              wrt: Sequence[bool] | None = None) -> None:
    """``<J t, c> == <t, J^T c>`` over the ``wrt`` parameters, J t from ``jvp_func`` and
    J^T c from ``vjp_func``."""
    wrt = float_mask(func) if wrt is None else wrt
    tol = tolerance(func)
    n = len(func.out_types)
    ts, cs = tangents(rng, func, wrt), cotangents(rng, func)
    jt = run(jvp_func(func, wrt), [*args, *ts])[n:]
    res = run(vjp_func(func, wrt), [*args, *cs])
    _same_primals(func, args, res[:n])
    _typed(res[n:], [t for t, w in zip(func.in_types, wrt, strict=True) if w])
    forward, scale_f = _dots(jt, cs)
    backward, scale_b = _dots(ts, res[n:])
    assert abs(forward - backward) <= tol.dot * (scale_f + scale_b), (
        f"<J t, c> = {forward!r} but <t, J^T c> = {backward!r}")


def check_jvp_of_vjp(func: Func, args, rng: np.random.Generator) -> None:
    """Forward over reverse: the jvp of ``vjp_func(func)`` against its central differences."""
    check_jvp(vjp_func(func), [*args, *cotangents(rng, func)], rng)


def check_vjp_of_jvp(func: Func, args, rng: np.random.Generator) -> None:
    """Reverse over forward: the vjp of ``jvp_func(func)`` by the inner-product identity."""
    check_vjp(jvp_func(func), [*args, *tangents(rng, func, float_mask(func))], rng)


def check_zero(func: Func, args, rng: np.random.Generator) -> None:
    """Every tangent and cotangent is exactly zero (a piecewise-constant function)."""
    n = len(func.out_types)
    mask = float_mask(func)
    jt = run(jvp_func(func), [*args, *tangents(rng, func, mask)])[n:]
    ct = run(vjp_func(func), [*args, *cotangents(rng, func)])[n:]
    _typed(jt, floats(func.out_types))
    _typed(ct, floats(func.in_types))
    for d in [*jt, *ct]:
        assert not np.any(d), f"nonzero derivative {d}"
