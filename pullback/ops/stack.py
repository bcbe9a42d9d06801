"""Run-time stacks: storage whose size is only known while running (AD residuals of
``while_loop`` iterations and recursive calls).

A stack value is *linear*: each one is consumed by exactly one push or pop, which
returns the next version.  The verifier enforces this, so an implementation may
update a stack in place.
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..ir.op import Op
from ..ir.types import StackType


def _expect_stack(op: str, t) -> StackType:
    if not isinstance(t, StackType):
        raise ShapeError(f"{op}: expected a stack operand, got {t}")
    return t


def _new_infer(ts, elem):
    if ts:
        raise ShapeError("stack_new takes no operands")
    return StackType(elem)


stack_new = Op("stack_new", infer=_new_infer, impl=lambda elem: [], params={"elem": "type"})


def _push_infer(ts):
    s, x = ts
    st = _expect_stack("stack_push", s)
    if x != st.elem:
        raise ShapeError(f"stack_push: pushing {x} onto {st}")
    return st


def _push_impl(s, x):
    s.append(np.array(x, copy=True))
    return s


stack_push = Op("stack_push", infer=_push_infer, impl=_push_impl)


def _pop_impl(s):
    if not s:
        raise IndexError("pop from an empty stack")
    x = s.pop()
    return [s, x]


stack_pop = Op(
    "stack_pop",
    infer=lambda ts: [ts[0], _expect_stack("stack_pop", ts[0]).elem],
    impl=_pop_impl,
    multiple_results=True,
)

