"""``jvp``: forward mode as users call it, with the tangents they give."""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

from ..errors import CompileError
from ..frontend.stager import Stager
from ..frontend.values import Ref
from ..ir.core import Atom
from ..ops.derivs import zeros
from ..tracebacks import public
from ..transforms.jvp import jvp_emit
from ..tree import tree_flatten, tree_map
from .arguments import Args, bind, runtime_floats, static_zero, tangent_atom
from .transform import Transform, stage_optimised


def _stage_jvp(st: Stager, fn: Callable, primals: Any, tangents: Any) -> Any:
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)) \
            or len(primals) != len(tangents):
        raise CompileError("pb.jvp(f, primals, tangents): primals and tangents must be "
                           "tuples of one length")
    sub = stage_optimised(st, fn, [runtime_floats(p) for p in primals], {})
    where = Args(sub)
    ts: list[Atom | None] = [None] * len(sub.operands)
    for k, t in enumerate(tangents):
        t_leaves, t_tree = tree_flatten(t)
        if t_tree != sub.arg_trees[k]:
            raise CompileError(f"pb.jvp: the tangent of argument {k} has structure {t_tree}, "
                               f"its primal {sub.arg_trees[k]}")
        for x, q, tl in zip(sub.arg_leaves[k], where.positions[k], t_leaves, strict=True):
            if q is not None and x.type.dtype.is_float:
                ts[q] = tangent_atom(tl, x, k)
    outs, touts = jvp_emit(sub.func, sub.operands, [None if t is None else (t,) for t in ts])
    full = [t[0] if t is not None else zeros(o.type) for o, t in zip(outs, touts, strict=True)]
    tangents_out = tree_map(lambda v: v if isinstance(v, Ref) else static_zero(v),
                            sub.rebuild(full))
    return sub.rebuild(outs), tangents_out


class _JVPOf(Transform):
    """``pb.jvp(fn, ...)`` called from plain Python: a compiled function of ``(primals,
    tangents)``, made per call (its specialisations are shared through ``fn``'s key)."""

    def __init__(self, fn: Callable):
        super().__init__(fn)
        self.__name__ = f"jvp_{getattr(fn, '__name__', 'f')}"
        self.__signature__ = inspect.signature(self.__call__)

    def __pb_key__(self, key_of: Callable[[Any], Any]) -> tuple:
        return ("jvp", key_of(self.fn))

    def __call__(self, primals: tuple, tangents: tuple) -> Any:
        return super().__call__(primals, tangents)

    def __pb_stage__(self, st: Stager, args: list, kwargs: dict) -> Any:
        (primals, tangents), _ = bind(self.__call__, args, kwargs)
        return _stage_jvp(st, self.fn, primals, tangents)


class _JVP:
    """``jvp(fn, primals, tangents) -> (fn(*primals), tangents of the results)``: forward
    mode, one pass, for any number of inputs."""

    @public
    def __call__(self, fn: Callable, primals: Sequence, tangents: Sequence) -> Any:
        return _JVPOf(fn)(tuple(primals), tuple(tangents))

    def __pb_stage__(self, st: Stager, args: list, kwargs: dict) -> Any:
        (fn, primals, tangents), _ = bind(self.__call__, args, kwargs)
        return _stage_jvp(st, fn, primals, tangents)


jvp = _JVP()
