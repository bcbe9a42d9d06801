"""What every derivative transform is, and how it stages the function it transforms.

Each transform is a callable object.  Called from plain Python, it compiles itself with
``jit`` (cached per argument signature) and runs.  Met while pullback stages code
(inside ``jit`` or inside another transform), the frontend hands it the abstract
arguments (``__pb_stage__``): it stages the wrapped function as an IR function of its
own, transforms that IR and emits the result in place.  So transforms compose with
``jit`` and with each other: ``grad(grad(f))`` differentiates the IR that ``grad(f)``
emitted.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Sequence
from typing import Any

from ..api import Jitted
from ..frontend.stager import Stager
from ..frontend.subfunction import SubFunction
from ..passes.manager import optimize
from ..tracebacks import BARE_RAISE_KEEPS_TRACEBACK, hide_internal_frames, public
from .arguments import Args, bind, resolve_argnums, runtime_floats


class Transform:
    """A function transformed by pullback: compiled on its own when called from plain
    Python, staged in place when called from staged code."""

    def __init__(self, fn: Callable):
        self.fn = fn
        functools.update_wrapper(self, fn, updated=())
        self._jitted: Jitted | None = None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        try:
            return self.jitted()(*args, **kwargs)
        except Exception as e:  # the API's boundary (``tracebacks.public``, inline: no call)
            hide_internal_frames(e)
            if BARE_RAISE_KEEPS_TRACEBACK:
                raise
            raise e  # noqa: B904 (Python 3.10: re-raised with the filtered traceback)

    def jitted(self) -> Jitted:
        """``pb.jit`` of this transform: what a call from plain Python runs."""
        if self._jitted is None:
            self._jitted = Jitted(self, (), _backend_of(self.fn))
        return self._jitted

    @public
    def lower(self, *args: Any, **kwargs: Any) -> Any:
        """What this transform compiles to for these arguments (see ``Jitted.lower``)."""
        return self.jitted().lower(*args, **kwargs)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else functools.partial(self, obj)

    def __pb_stage__(self, st: Stager, args: list, kwargs: dict) -> Any:
        raise NotImplementedError


def _backend_of(fn: Callable) -> str | None:
    """The backend of the ``pb.jit`` a chain of transforms ends in (``pb.grad(pb.jit(f,
    backend="c"))`` runs on C), else None: the default."""
    while isinstance(fn, Transform):
        fn = fn.fn
    return fn.backend if isinstance(fn, Jitted) else None


def stage_optimised(st: Stager, fn: Callable, args: list, kwargs: dict) -> SubFunction:
    """``fn`` staged on its own and optimised before it is differentiated: what LICM moves
    out of a loop is read there by the backward pass instead of pushed every iteration,
    and what CSE and DCE remove needs no derivative."""
    sub = st.stage_subfunction(fn, args, kwargs)
    sub.func = optimize(sub.func)
    return sub


def differentiated(st: Stager, fn: Callable, args: list, kwargs: dict,
                   argnums: int | Sequence[int],
                   who: str) -> tuple[SubFunction, Args, tuple[int, ...], list[bool]]:
    """``fn`` staged on its own, where its arguments are among the operands, the
    ``argnums`` as indices, and which operands are differentiated."""
    args, kwargs = bind(fn, args, kwargs)
    nums = resolve_argnums(argnums, len(args), who)
    args = [runtime_floats(a) if k in nums else a for k, a in enumerate(args)]
    sub = stage_optimised(st, fn, args, kwargs)
    where = Args(sub)
    return sub, where, nums, where.varied(nums, who)
