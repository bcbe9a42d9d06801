"""``vjp``: reverse mode as users call it, with the cotangents they give to the
``vjp_fn`` it returns."""

from __future__ import annotations

import inspect
from collections.abc import Callable
from typing import Any

import numpy as np

from ..api import Jitted, run
from ..errors import CompileError
from ..frontend.stager import Stager
from ..frontend.subfunction import SubFunction
from ..frontend.values import Ref
from ..ir.builder import current
from ..ir.core import Atom
from ..ir.types import TensorType, type_of_value
from ..tracebacks import public
from ..transforms.fit import fit
from ..transforms.vjp import vjp_emit
from ..tree import tree_flatten, tree_map
from .arguments import Args, is_float, is_static_float, runtime_floats, split_aux, tangent_atom
from .transform import stage_optimised


def _out_cts(sub: SubFunction, outs: list[Atom], out: Any, ct: Any) -> list[Atom | None]:
    """The cotangent pytree ``ct`` given for the result ``out``, per result atom."""
    o_leaves, o_tree = tree_flatten(out)
    c_leaves, c_tree = tree_flatten(ct)
    if o_tree != c_tree:
        raise CompileError(f"vjp: the cotangent has structure {c_tree}, the result {o_tree}")
    cts: list[Atom | None] = [None] * len(outs)
    pos = {id(a): i for i, a in enumerate(outs)}
    for o, c in zip(o_leaves, c_leaves, strict=True):
        if not is_float(o):
            continue
        cts[pos[id(o.raw())]] = tangent_atom(c, o, 0) if c is not None else None
    return cts


class _StagedVJP:
    """The ``vjp_fn`` that ``pb.vjp`` returns inside staged code: calling it emits the
    backward pass, reading the forward pass's residuals."""

    def __init__(self, where: Args, out: Any, outs: list[Atom], backward: Callable):
        self.where, self.out, self.outs, self.backward = where, out, outs, backward

    def __pb_stage__(self, st: Stager, args: list, kwargs: dict) -> Any:
        if len(args) != 1 or kwargs:
            raise CompileError("vjp_fn takes one argument: the cotangent of the result")
        cts = self.backward(_out_cts(self.where.sub, self.outs, self.out, args[0]))
        n = len(self.where.sub.arg_leaves)
        return self.where.grads(range(n), cts, single=False)

    def __call__(self, ct: Any) -> Any:
        raise TypeError("this vjp function was made while staging; call it in the same "
                        "staged function")


def _stage_vjp(st: Stager, fn: Callable, primals: list, has_aux: bool) -> tuple:
    sub = stage_optimised(st, fn, [runtime_floats(p) for p in primals], {})
    where = Args(sub)
    varied = [is_float(x) for leaves in sub.arg_leaves for x in leaves if isinstance(x, Ref)]
    varied += [False] * (len(sub.operands) - len(varied))
    outs, backward = vjp_emit(sub.func, sub.operands, varied)
    out, aux = split_aux(sub.rebuild(outs), has_aux, "pb.vjp")
    return where, out, aux, outs, backward


class _PythonVJP:
    """``pb.vjp(fn, *primals)`` called from plain Python: one specialisation per signature
    of the primals runs the forward and the backward pass, the result's cotangent being
    parameters added after the primals' (typed by the result, so nothing is staged
    twice).  The result comes from a call with zero cotangents; ``vjp_fn(ct)`` calls it
    again with ``ct``."""

    def __init__(self, fn: Callable, has_aux: bool):
        self.fn, self.has_aux = fn, has_aux
        self.__name__ = f"vjp_{getattr(fn, '__name__', 'f')}"
        self.__signature__ = inspect.Signature(
            [inspect.Parameter("primals", inspect.Parameter.VAR_POSITIONAL)])
        self.jitted = Jitted(self, (), None)

    def __pb_key__(self, key_of: Callable[[Any], Any]) -> tuple:
        return ("vjp", key_of(self.fn), self.has_aux)

    def __pb_stage__(self, st: Stager, args: list, kwargs: dict) -> Any:
        where, out, aux, outs, backward = _stage_vjp(st, self.fn, args, self.has_aux)
        pos = {id(a): i for i, a in enumerate(outs)}
        cts: list[Atom | None] = [None] * len(outs)
        for o in tree_flatten(out)[0]:
            if is_float(o):
                t = o.type
                cts[pos[id(o.raw())]] = fit(current().param(TensorType(t.shape, t.dtype)), t)
            elif is_static_float(o):  # constant: vjp_fn takes its cotangent, unused
                current().param(type_of_value(o).strong())
        grads = where.grads(range(len(args)), backward(cts), single=False)
        return out, aux, grads

    def __call__(self, *primals: Any) -> tuple:
        def copied() -> tuple:  # fn may write to its arguments; the caller's stay as they are
            return tree_map(lambda x: x.copy() if isinstance(x, np.ndarray) else x, primals)

        staged, sig = self.jitted.specialise(*copied())
        end = len(staged.func.in_types) - len(sig.outside)  # the values read from outside
        extra = staged.func.in_types[end - staged.extra:end]  # come after the cotangents
        out, aux, _ = run(staged, sig, [np.zeros(t.shape, t.dtype.np) for t in extra])

        o_leaves, o_tree = tree_flatten(out)

        @public
        def vjp_fn(ct: Any) -> tuple:
            c_leaves, c_tree = tree_flatten(ct)
            if c_tree != o_tree:
                raise ValueError(f"vjp: the cotangent has structure {c_tree}, the result "
                                 f"{o_tree}")
            floats = [c for o, c in zip(o_leaves, c_leaves, strict=True) if _is_float_value(o)]
            given = [np.asarray(c, t.dtype.np) for c, t in zip(floats, extra, strict=True)]
            for c, t in zip(given, extra, strict=True):
                if c.shape != t.shape:
                    raise ValueError(f"vjp: a cotangent of shape {c.shape} for a result of "
                                     f"shape {t.shape}")
            return run(staged, sig, given)[2]

        return (out, vjp_fn, aux) if self.has_aux else (out, vjp_fn)


def _is_float_value(x: Any) -> bool:
    """A result leaf that has a cotangent: a float array, NumPy float or Python float."""
    return isinstance(x, float) or (isinstance(x, (np.ndarray, np.generic))
                                    and x.dtype.kind == "f")


class _VJP:
    """``vjp(fn, *primals) -> (fn(*primals), vjp_fn)``; ``vjp_fn(ct)`` returns the
    cotangents of the primals (a tuple).  With ``has_aux=True``, ``fn`` returns
    ``(out, aux)`` and ``vjp`` returns ``(out, vjp_fn, aux)``.

    Inside staged code the backward pass reads the forward pass's residuals.  From plain
    Python, ``vjp_fn`` runs the forward pass again with the backward pass (one compiled
    function does both, see ``_PythonVJP``)."""

    @public
    def __call__(self, fn: Callable, *primals: Any, has_aux: bool = False) -> tuple:
        return _PythonVJP(fn, has_aux)(*primals)

    def __pb_stage__(self, st: Stager, args: list, kwargs: dict) -> tuple:
        fn, *primals = args
        has_aux = kwargs.pop("has_aux", False)
        if kwargs:
            raise CompileError(f"pb.vjp got unexpected keyword arguments {sorted(kwargs)}")
        where, out, aux, outs, backward = _stage_vjp(st, fn, primals, has_aux)
        vjp_fn = _StagedVJP(where, out, outs, backward)
        return (out, vjp_fn, aux) if has_aux else (out, vjp_fn)


vjp = _VJP()
