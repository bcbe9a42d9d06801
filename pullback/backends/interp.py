"""The reference backend: evaluate graph IR with each op's NumPy ``impl``.

It is the semantics every other backend is tested against, so it checks what the ops
return against what their shape rules promised.  Blocks are turned once per run into
lists of steps; values live in one dictionary per function invocation (values are SSA,
so a loop body simply overwrites its previous iteration's).  Floating-point warnings are
silenced for the whole run: inf and nan are values, as in NumPy code.  What an equation
raises (a failed check, NumPy's own error) names the program's line of that equation.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ..errors import at_run_time
from ..ir.core import Block, Func, Lit, Module
from ..ir.types import StackType, TensorType, Type


def _checked(value: Any, t: Type, what: str) -> Any:
    if isinstance(t, StackType):
        if not isinstance(value, list):
            raise TypeError(f"{what}: expected a stack, got {type(value).__name__}")
        return value
    arr = np.asarray(value)
    if arr.dtype != t.dtype.np or arr.shape != t.shape:
        raise TypeError(f"{what}: produced {arr.dtype}{list(arr.shape)}, declared {t}")
    return arr


class _Program:
    """The blocks of one run, each compiled on first use to ``(op, inputs, outputs,
    params, loc)`` steps; an input is ``(True, constant)`` or ``(False, value id)``."""

    def __init__(self):
        self.compiled: dict[int, tuple[Block, list]] = {}

    def steps(self, block: Block) -> list:
        entry = self.compiled.get(id(block))
        if entry is None:
            steps = []
            for eqn in block.eqns:
                ins = [(True, a.value) if isinstance(a, Lit) else (False, id(a))
                       for a in eqn.inputs]
                outs = [(id(v), v.type) for v in eqn.outputs]
                steps.append((eqn.op, ins, outs, eqn.params, eqn.loc))
            entry = self.compiled[id(block)] = (block, steps)
        return entry[1]

    def run_block(self, block: Block, args: Sequence[Any], env: dict) -> list[Any]:
        for p, a in zip(block.params, args, strict=True):
            env[id(p)] = a

        def run(blk: Block, *xs: Any) -> list[Any]:
            return self.run_block(blk, xs, env)

        def call(blk: Block, *xs: Any) -> list[Any]:  # a function: values of its own
            return self.run_block(blk, xs, {})

        loc = None
        try:
            for op, ins, outs, params, loc in self.steps(block):  # noqa: B007 (see except)
                vals = [k if lit else env[k] for lit, k in ins]
                if op.owns_code:
                    result = op.impl(*vals, run=call if op.name == "call" else run, **params)
                else:
                    result = op.impl(*vals, **params)
                if not op.multiple_results:
                    result = [result]
                if len(result) != len(outs):
                    raise TypeError(f"{op.name}: impl returned {len(result)} values, "
                                    f"expected {len(outs)}")
                for (key, t), value in zip(outs, result, strict=True):
                    env[key] = _checked(value, t, op.name)
        except Exception as e:
            at_run_time(e, loc)
            raise
        return [r.value if isinstance(r, Lit) else env[id(r)] for r in block.results]


#: Seconds a step (one equation run) costs here besides its data, and per element it
#: reads or writes (NumPy's loops; ``np.add.at`` and copies are slower): an AMD EPYC runs
#: a small network's gradient, about 300 steps, in 11 ms.
STEP_S = 30e-6
ELEMENT_S = 5e-9
#: Ops whose work grows faster than their data: counted as (largest operand)**1.5
#: elements, which overestimates them (a factorisation, a sort, a convolution).
_SUPERLINEAR = frozenset({"cholesky", "cholesky_adjoint", "conv", "eigh", "lu", "qr", "svd", "sort",
                          "triangular_solve"})
#: What the other opaque ops (gathers, scatters, scans along an axis, stacks) cost per
#: element, in elements: NumPy's strided and indexed paths (a cumsum along the first
#: axis, ``np.add.at``) are several times slower than its element-wise loops.
OPAQUE_ELEMENT = 4


def estimate(func: Func) -> float | None:
    """Seconds a run of ``func`` takes here, roughly (an overestimate of the data's work);
    None when it cannot be told from the IR: a ``while`` loop, a ``for`` loop whose bounds
    are run-time values, recursion."""
    return _block_cost(func.block, frozenset({id(func)}))


def _size(t: Type) -> int:
    return int(np.prod(t.shape)) if isinstance(t, TensorType) else 0


def _block_cost(block: Block, calling: frozenset) -> float | None:
    total = 0.0
    for eqn in block.eqns:
        name = eqn.op.name
        if name == "while_loop":
            return None
        sizes = [_size(a.type) for a in eqn.inputs] + [_size(v.type) for v in eqn.outputs]
        if name == "dot_general":
            lhs, shape = eqn.params["contract"][0], eqn.inputs[0].type.shape
            work = _size(eqn.outputs[0].type) * int(np.prod([shape[i] for i in lhs]))
        elif name in _SUPERLINEAR:
            work = max(sizes, default=0) ** 1.5
        else:
            work = sum(sizes) * (OPAQUE_ELEMENT if eqn.op.fusion == "opaque" else 1)
        cost = STEP_S + work * ELEMENT_S
        inner = [_block_cost(b, calling) for b in eqn.blocks()]
        if name == "call":
            callee = eqn.params["callee"]
            inner = [None] if id(callee) in calling else \
                [_block_cost(callee.block, calling | {id(callee)})]
        if None in inner:
            return None
        if name == "for_loop":
            lo, hi, step = eqn.inputs[:3]
            if not all(isinstance(b, Lit) for b in (lo, hi, step)) or int(step.value) == 0:
                return None
            cost += len(range(int(lo.value), int(hi.value), int(step.value))) * inner[0]
        else:  # a conditional runs one of its blocks: the dearest counted
            cost += max(inner, default=0.0)
        total += cost
    return total


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
    with np.errstate(all="ignore"):
        return _Program().run_block(func.block, xs, {})
