"""Run one primitive on concrete inputs through the whole IR path.

``run_op(ops.add, x, y)`` builds a function whose parameters are the array inputs,
emits the op, verifies and round-trips the IR, and evaluates it on the interpreter
(which checks that ``impl`` returns exactly the types ``infer`` promised).
"""

from __future__ import annotations

import numpy as np

from harness import roundtrip
from pullback.backends import interp
from pullback.ir.builder import Builder
from pullback.ir.op import Op
from pullback.ir.types import type_of_value


def run_op(op: Op, *inputs, **params) -> list[np.ndarray]:
    """The op's outputs on ``inputs`` (NumPy arrays become parameters)."""
    with Builder() as b:
        args = [b.param(type_of_value(x)) for x in inputs]
        outs = b.emit(op, args, params)
        func = b.finish(op.name, outs)
    roundtrip(func)
    return interp.run(func, *inputs)


def infer(op: Op, *types, **params):
    """The op's inferred output types (a list) for operand types."""
    return op.infer_types(list(types), params)
