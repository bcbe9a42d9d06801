"""Run-time stacks: storage whose size is only known while running (the residual tape
of reverse-mode AD through ``while_loop`` iterations and recursive calls).

A stack holds tensors of any types; each ``stack_pop`` names the type it expects, and
the backend checks it, so a tape is one value however many kinds of residual it holds.
A stack value is *linear*: each one is consumed by exactly one push or pop, which
returns the next version.  The verifier enforces this, so an implementation may update
a stack in place.

Derivatives: the tangent of a stack is the stack of the tangents of its float elements
(``jvp``), and the cotangent of a stack is a stack of cotangents popped in the reverse
order (``vjp``); so a derivative of a derivative works through loops.
"""

from __future__ import annotations

import numpy as np

from ..errors import ShapeError
from ..ir.op import Op
from ..ir.types import StackType, TensorType
from .derivs import zeros


class Tape(list):
    """The reference backend's stack: a list that counts the bytes it holds."""

    __slots__ = ("nbytes",)

    def __init__(self):
        super().__init__()
        self.nbytes = 0


class TapeStats:
    """The most bytes any one stack held since ``reset`` (what reverse mode keeps)."""

    def __init__(self):
        self.peak = 0

    def reset(self) -> None:
        self.peak = 0


TAPE_STATS = TapeStats()


def _expect_stack(op: str, t) -> StackType:
    if not isinstance(t, StackType):
        raise ShapeError(f"{op}: expected a stack operand, got {t}")
    return t


def _new_infer(ts):
    if ts:
        raise ShapeError("stack_new takes no operands")
    return StackType()


def _differentiable(t) -> bool:
    return isinstance(t, TensorType) and t.dtype.is_float


def _new_jvp(primals, tangents, outs):
    return [stack_new()]


stack_new = Op("stack_new", infer=_new_infer, arity=0, impl=Tape, jvp=_new_jvp,
               vjp=lambda primals, outs, cts: [])


def _push_infer(ts):
    s, x = ts
    _expect_stack("stack_push", s)
    if not isinstance(x, TensorType):
        raise ShapeError(f"stack_push: can only push tensors, got {x}")
    return StackType()


def _push_impl(s, x):
    s.append(np.array(x, copy=True))
    s.nbytes += x.nbytes
    TAPE_STATS.peak = max(TAPE_STATS.peak, s.nbytes)
    return s


def _push_jvp(primals, tangents, outs):
    s, x = primals
    ts, tx = tangents
    ts = stack_new() if ts is None else ts
    if _differentiable(x.type):
        ts = stack_push(ts, zeros(x.type) if tx is None else tx)
    return [ts]


def _push_vjp(primals, outs, cts):
    s, x = primals
    (ct,) = cts
    if not _differentiable(x.type):
        return [ct, None]
    ct, ct_x = stack_pop(ct, elem=x.type)
    return [ct, ct_x]


stack_push = Op("stack_push", infer=_push_infer, arity=2, impl=_push_impl, jvp=_push_jvp,
                vjp=_push_vjp)


def _pop_infer(ts, elem):
    (s,) = ts
    _expect_stack("stack_pop", s)
    return [StackType(), elem]


def _pop_impl(s, elem):
    if not s:
        raise IndexError("pop from an empty stack")
    x = s.pop()
    s.nbytes -= x.nbytes
    if x.dtype != elem.dtype.np or x.shape != elem.shape:
        raise TypeError(f"stack_pop: popped {x.dtype}{list(x.shape)}, expected {elem}")
    return [s, x]


def _pop_jvp(primals, tangents, outs, elem):
    (ts,) = tangents
    ts = stack_new() if ts is None else ts
    if not _differentiable(elem):
        return [ts, None]
    ts, tx = stack_pop(ts, elem=elem)
    return [ts, tx]


def _pop_vjp(primals, outs, cts, elem):
    ct_s, ct_x = cts
    ct_s = stack_new() if ct_s is None else ct_s
    if _differentiable(elem):
        ct_s = stack_push(ct_s, zeros(elem) if ct_x is None else ct_x)
    return [ct_s]


stack_pop = Op("stack_pop", infer=_pop_infer, arity=1, impl=_pop_impl, params={"elem": "type"},
               multiple_results=True, jvp=_pop_jvp, vjp=_pop_vjp)
