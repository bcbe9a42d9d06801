"""``grad`` and ``value_and_grad``: the gradient of a scalar, by reverse mode or, where
that is cheaper, forward mode with one lane per input scalar."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import CompileError
from ..frontend.stager import Stager
from ..frontend.subfunction import SubFunction
from ..frontend.values import Ref
from ..ir.core import Atom, Lit
from ..keys import value_key
from ..ops import shape as S
from ..transforms.jvp import forward_agrees, has_loops, scalar_only
from ..transforms.vjp import vjp_emit
from .arguments import is_static_float, split_aux
from .lanes import lane_count, lane_rows, unit_lanes
from .transform import Transform, differentiated

#: A gradient of a function with loops or calls, with respect to one scalar, or to this
#: many scalars or fewer when the function computes only scalars, runs forward mode with
#: one lane per scalar: no tape, and in scalar code the lanes' arithmetic runs beside the
#: primal's instead of after it (a loop's value and gradient with respect to two
#: parameters, with libm's sin: 1.6 ms by reverse mode, 1.33 by forward).  Array code
#: with more lanes is left to reverse mode, whose cost does not grow with them.
FORWARD_GRAD = 4


class Grad(Transform):
    def __init__(self, fn: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False,
                 with_value: bool = False):
        super().__init__(fn)
        self.argnums = argnums
        self.has_aux = has_aux
        self.with_value = with_value

    def __pb_key__(self, key_of: Callable[[Any], Any]) -> tuple:
        return ("grad", key_of(self.fn), value_key(self.argnums), self.has_aux,
                self.with_value)

    def __pb_stage__(self, st: Stager, args: list, kwargs: dict) -> Any:
        who = "pb.value_and_grad" if self.with_value else "pb.grad"
        sub, where, nums, varied = differentiated(st, self.fn, args, kwargs, self.argnums, who)
        ins = [q for q, v in enumerate(varied) if v]
        forward = _by_forward_mode(sub, ins)
        if forward:
            outs, touts = unit_lanes(sub, ins)
        else:
            outs, backward = vjp_emit(sub.func, sub.operands, varied)
        value = sub.rebuild(outs)
        loss, aux = split_aux(value, self.has_aux, who)
        seeds = _one_for(loss, outs, who)
        if forward:
            cts: list[Atom | None] = [None] * len(sub.operands)
            for i in (k for k, s in enumerate(seeds) if s is not None):  # none: constant
                rows = lane_rows(sub, ins, touts[i], outs[i].type)
                for q, row in zip(ins, rows, strict=True):
                    cts[q] = S.reshape(row, shape=sub.operands[q].type.shape)
        else:
            cts = backward(seeds)
        grads = where.grads(nums, cts, isinstance(self.argnums, int))
        if not self.with_value:
            return (grads, aux) if self.has_aux else grads
        return (value, grads)


def _by_forward_mode(sub: SubFunction, ins: Sequence[int]) -> bool:
    n = lane_count(sub, ins)
    return (n == 1 or 0 < n <= FORWARD_GRAD and scalar_only(sub.func)) and \
        has_loops(sub.func) and forward_agrees(sub.func)


def _one_for(loss: Any, outs: Sequence[Atom], who: str) -> list[Atom | None]:
    """The output cotangents that seed reverse mode on a scalar ``loss``: none for a
    compile-time float (``lambda x: 1.0``), whose gradient is zero."""
    if is_static_float(loss) and np.ndim(loss) == 0:
        return [None] * len(outs)
    if not isinstance(loss, Ref) or loss.type.shape != () or not loss.type.dtype.is_float:
        what = f"a value of type {loss.type}" if isinstance(loss, Ref) else \
            f"{type(loss).__name__} {loss!r}"
        raise CompileError(
            f"{who} needs a function returning a float scalar, but it returns {what}",
            hint="reduce it to a scalar (e.g. np.sum), or use pb.vjp / pb.jacrev for "
            "non-scalar results")
    t = loss.type
    one = Lit(np.ones((), t.dtype.np), t)
    return [one if o is loss.raw() else None for o in outs]


def grad(fn: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Grad:
    """The gradient of ``fn`` (which returns a float scalar) with respect to its
    positional arguments ``argnums``, in their structure."""
    return Grad(fn, argnums, has_aux)


def value_and_grad(fn: Callable, argnums: int | Sequence[int] = 0,
                   has_aux: bool = False) -> Grad:
    """``(fn(...), grad(fn)(...))`` from one forward and one backward pass."""
    return Grad(fn, argnums, has_aux, with_value=True)
