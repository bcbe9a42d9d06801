"""What a program says about its own derivatives without writing rules: ``stop_gradient``
(none flows through here) and ``checkpoint`` / ``checkpoint_loops`` (recompute rather
than keep, for memory)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ..frontend.stager import Stager
from ..frontend.values import Ref
from ..ops import ad
from ..ops.control import LOOP_CHECKPOINT
from ..tree import tree_map
from .arguments import bind, is_float
from .transform import Transform


class _StopGradient:
    """``stop_gradient(x)``: ``x`` itself, through which no derivative flows."""

    def __call__(self, x: Any) -> Any:
        return x

    def __pb_stage__(self, st: Stager, args: list, kwargs: dict) -> Any:
        (x,), _ = bind(self.__call__, args, kwargs)
        return tree_map(lambda r: Ref(ad.stop_gradient(r.get()), r.kind) if is_float(r)
                        else r, x)


stop_gradient = _StopGradient()


class Checkpoint(Transform):
    """``checkpoint(fn)``: reverse mode keeps only ``fn``'s inputs and recomputes its
    forward pass during the backward pass (less memory, more time)."""

    def __pb_key__(self, key_of: Callable[[Any], Any]) -> tuple:
        return ("checkpoint", key_of(self.fn))

    def __pb_stage__(self, st: Stager, args: list, kwargs: dict) -> Any:
        args, kwargs = bind(self.fn, args, kwargs)
        sub = st.stage_subfunction(self.fn, args, kwargs)
        outs = ad.checkpoint(*sub.operands, body=sub.func.block)
        return sub.rebuild(outs)


def checkpoint(fn: Callable) -> Checkpoint:
    """``fn`` rematerialised: its value and derivatives are unchanged, but reverse mode
    keeps only its inputs and runs its forward pass again during the backward pass,
    trading time for the memory of its intermediate values.  Called from plain Python
    it compiles like ``pb.jit(fn)``."""
    return Checkpoint(fn)


class checkpoint_loops:  # noqa: N801 (used like a function)
    """``with pb.checkpoint_loops(every=k):`` — the loops staged inside are checkpointed
    for reverse mode: the forward pass keeps the carried values every ``k`` iterations
    instead of every iteration's residuals, and the backward pass recomputes each
    segment before running back through it.  Memory goes from n residual sets to n/k
    snapshots plus k residual sets, for one more forward pass; gradients are the same.
    In plain Python it does nothing."""

    def __init__(self, every: int = 100):
        if not isinstance(every, int) or every < 1:
            raise ValueError(f"checkpoint_loops(every={every!r}): every must be an int >= 1")
        self.every = every
        self._tokens: list = []

    def __enter__(self) -> checkpoint_loops:
        self._tokens.append(LOOP_CHECKPOINT.set(self.every))
        return self

    def __exit__(self, *exc: Any) -> None:
        LOOP_CHECKPOINT.reset(self._tokens.pop())
