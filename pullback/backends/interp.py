"""The reference backend: evaluate graph IR with each op's NumPy ``impl``.

It is the semantics every other backend is tested against, so it checks what the ops
return against what their shape rules promised.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..ir.core import Block, Func, Lit, Module
from ..ir.types import StackType, TensorType, Type


class _Env:
    """Values of the Vars in scope: this block's, then those of enclosing blocks."""

    __slots__ = ("vals", "parent")

    def __init__(self, parent: _Env | None = None):
        self.vals: dict[int, Any] = {}
        self.parent = parent

    def __getitem__(self, v) -> Any:
        if isinstance(v, Lit):
            return v.value
        env = self
        while env is not None:
            try:
                return env.vals[id(v)]
            except KeyError:
                env = env.parent
        raise KeyError(f"{v!r} has no value (unbound in this scope)")


def _checked(value: Any, t: Type, what: str) -> Any:
    if isinstance(t, StackType):
        if not isinstance(value, list):
            raise TypeError(f"{what}: expected a stack, got {type(value).__name__}")
        return value
    arr = np.asarray(value)
    if arr.dtype != t.dtype.np or arr.shape != t.shape:
        raise TypeError(f"{what}: produced {arr.dtype}{list(arr.shape)}, declared {t}")
    return arr


def _run_block(block: Block, args: Sequence[Any], parent: _Env | None) -> list[Any]:
    env = _Env(parent)
    for p, a in zip(block.params, args, strict=True):
        env.vals[id(p)] = a

    def run(blk: Block, *xs: Any) -> list[Any]:
        return _run_block(blk, xs, env)

    for eqn in block.eqns:
        op = eqn.op
        ins = [env[a] for a in eqn.inputs]
        if op.owns_code:
            outs = op.impl(*ins, run=run, **eqn.params)
        else:
            outs = op.impl(*ins, **eqn.params)
        if not op.multiple_results:
            outs = [outs]
        if len(outs) != len(eqn.outputs):
            raise TypeError(f"{op.name}: impl returned {len(outs)} values, expected "
                            f"{len(eqn.outputs)}")
        for v, o in zip(eqn.outputs, outs, strict=True):
            env.vals[id(v)] = _checked(o, v.type, op.name)
    return [env[r] for r in block.results]


def _as_input(x: Any, t: Type, i: int) -> Any:
    """An argument as the parameter's array; only Python scalars are converted."""
    if not isinstance(t, TensorType):
        return x
    python_scalar = isinstance(x, (bool, int, float)) and not isinstance(x, np.generic)
    arr = np.asarray(x)
    if arr.shape != t.shape:
        raise ValueError(f"argument {i}: shape {arr.shape} does not match {t}")
    if arr.dtype != t.dtype.np:
        if not (python_scalar and np.can_cast(arr.dtype, t.dtype.np, "same_kind")):
            raise TypeError(f"argument {i}: dtype {arr.dtype} does not match {t}")
        arr = arr.astype(t.dtype.np)
    return arr


def run(fn: Func | Module, *args: Any) -> list[Any]:
    """Evaluate ``fn`` on NumPy arguments; returns the list of results."""
    func = fn.main if isinstance(fn, Module) else fn
    if len(args) != len(func.in_types):
        raise TypeError(f"@{func.name} takes {len(func.in_types)} arguments, got {len(args)}")
    xs = [_as_input(x, t, i) for i, (x, t) in enumerate(zip(args, func.in_types, strict=True))]
    return _run_block(func.block, xs, None)
