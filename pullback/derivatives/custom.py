"""The derivative transforms users call: ``grad``, ``value_and_grad``, ``vjp``, ``jvp``,
``jacfwd``, ``jacrev``, ``hessian``, ``stop_gradient``, ``checkpoint``.

Each is a callable object.  Called from plain Python, it compiles itself with ``jit``
(cached per argument signature) and runs.  Met while pullback stages code (inside
``jit`` or inside another transform), the frontend hands it the abstract arguments
(``__pb_stage__``): it stages the wrapped function as an IR function of its own,
transforms that IR and emits the result in place.  So transforms compose with ``jit``
and with each other: ``grad(grad(f))`` differentiates the IR that ``grad(f)`` emitted.

The differentiated function sees its arguments as values: writes to them stay inside
it.  Run-time values it reads from an enclosing staged function are constants of the
derivative (as in JAX).  Gradients of results that do not depend on an argument are
zeros; nothing warns (see docs/autodiff.md).
"""

from __future__ import annotations

import contextlib
import functools
import inspect
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from ..api import Jitted
from ..errors import CompileError
from ..frontend.calls import StagedFunction, SubFunction
from ..frontend.stager import Stager
from ..frontend.values import Ref, is_static_number, lit_ref
from ..ir.builder import current
from ..ir.core import Atom, Block, Lit, Var
from ..ir.rewrite import inline
from ..ir.types import TensorType, dtype, int64, type_of_value
from ..keys import value_key
from ..ops import ad
from ..ops import elementwise as E
from ..ops import index as I
from ..ops import shape as S
from ..ops.control import LOOP_CHECKPOINT, for_loop
from ..ops.derivs import zeros
from ..passes.manager import optimize
from ..tracebacks import BARE_RAISE_KEEPS_TRACEBACK, hide_internal_frames, public
from ..transforms.fit import fit
from ..transforms.jvp import forward_agrees, has_loops, jvp_emit, scalar_only
from ..transforms.vjp import vjp_emit
from ..tree import tree_flatten, tree_map, tree_unflatten


def _bind(fn: Any, args: Sequence, kwargs: dict) -> tuple[list, dict]:
    """Positional and keyword arguments as ``fn``'s signature binds them."""
    try:
        sig = fn.signature if isinstance(fn, StagedFunction) else inspect.signature(fn)
    except (TypeError, ValueError):
        return list(args), dict(kwargs)
    bound = sig.bind(*args, **kwargs)
    bound.apply_defaults()
    return list(bound.args), dict(bound.kwargs)


def _argnums(argnums: int | Sequence[int], n: int, who: str) -> tuple[int, ...]:
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for k in nums:
        if not isinstance(k, int) or not -n <= k < n:
            raise CompileError(f"{who}: argnums={argnums!r} but the function is given {n} "
                               "positional arguments")
    return tuple(k % n for k in nums)


def _is_float(x: Any) -> bool:
    return isinstance(x, Ref) and x.type.dtype.is_float


def _is_static_float(x: Any) -> bool:
    """A compile-time float result (``return 1.0``): constant, so its derivatives are
    zeros."""
    return isinstance(x, (float, np.floating)) or (isinstance(x, np.ndarray)
                                                    and x.dtype.kind == "f")


def _static_zero(x: Any) -> Any:
    """The tangent of a compile-time result: a zero of its type for a number or an array,
    the value itself for what is structure (None, strings)."""
    if isinstance(x, (np.ndarray, np.generic)):
        return np.zeros_like(x)[()] if isinstance(x, np.generic) else np.zeros_like(x)
    if isinstance(x, (bool, int, float)):
        return type(x)()
    return x


def _runtime_floats(x: Any) -> Any:
    """``x`` with its compile-time floats made run-time values: Python floats and NumPy
    floats are run-time by the contract (DESIGN.md §2), and a transform differentiates
    with respect to them even where staging knew their value (``pb.grad(f)(2.0)``)."""
    return tree_map(lambda v: lit_ref(v) if isinstance(v, (float, np.floating)) else v, x)


class _Args:
    """Where each positional argument's run-time leaves are among a sub-function's
    operands."""

    def __init__(self, sub: SubFunction):
        self.sub = sub
        self.positions: list[list[int | None]] = []
        k = 0
        for leaves in sub.arg_leaves:
            pos = []
            for x in leaves:
                pos.append(k if isinstance(x, Ref) else None)
                k += isinstance(x, Ref)
            self.positions.append(pos)

    def varied(self, nums: Sequence[int], who: str) -> list[bool]:
        """Which operands are differentiated: the float leaves of the ``nums`` arguments
        (their integer leaves get no derivative); an argument with no float leaf is
        refused."""
        varied = [False] * len(self.sub.operands)
        for k in nums:
            leaves = self.sub.arg_leaves[k]
            if not any(isinstance(x, Ref) for x in leaves):
                shown = leaves[0] if len(leaves) == 1 else self.sub.arg_trees[k]
                raise CompileError(
                    f"{who}: argument {k} ({shown!r}) is a compile-time value (Python ints, "
                    "bools and strings are); derivatives are taken with respect to "
                    "floating-point arrays and floats",
                    hint="pass a float (1.0, np.float64(1)) or a float array, or leave it out "
                    "of argnums")
            floats = [q for x, q in zip(leaves, self.positions[k], strict=True)
                      if q is not None and x.type.dtype.is_float]
            if not floats:
                types = ", ".join(str(x.type) for x in leaves if isinstance(x, Ref))
                raise CompileError(
                    f"{who}: argument {k} holds only integer or boolean values ({types}); "
                    "derivatives are taken with respect to floating-point values",
                    hint="convert it with .astype(np.float64), or leave it out of argnums")
            for q in floats:
                varied[q] = True
        return varied

    def tree(self, k: int, leaf: Callable[[int, Ref], Any]) -> Any:
        """Argument ``k``'s structure with ``leaf(operand, cell)`` at its run-time leaves
        and None at its compile-time ones."""
        leaves = [leaf(q, x) if q is not None else None
                  for x, q in zip(self.sub.arg_leaves[k], self.positions[k], strict=True)]
        return tree_unflatten(self.sub.arg_trees[k], leaves)

    def grads(self, nums: Sequence[int], cts: Sequence[Atom | None], single: bool) -> Any:
        def leaf(q: int, x: Ref) -> Any:
            if not x.type.dtype.is_float:
                return None
            ct = cts[q]
            return Ref(fit(ct, x.type) if ct is not None else zeros(x.type), x.kind)

        trees = tuple(self.tree(k, leaf) for k in nums)
        return trees[0] if single else trees


def _differentiated(st: Stager, fn: Callable, args: list, kwargs: dict,
                    argnums: int | Sequence[int], who: str):
    """``fn`` staged on its own, where its arguments are among the operands, the
    ``argnums`` as indices, and which operands are differentiated."""
    args, kwargs = _bind(fn, args, kwargs)
    nums = _argnums(argnums, len(args), who)
    args = [_runtime_floats(a) if k in nums else a for k, a in enumerate(args)]
    sub = _staged(st, fn, args, kwargs)
    where = _Args(sub)
    return sub, where, nums, where.varied(nums, who)


def _staged(st: Stager, fn: Callable, args: list, kwargs: dict) -> SubFunction:
    """``fn`` staged on its own and optimised before it is differentiated: what LICM moves
    out of a loop is read there by the backward pass instead of pushed every iteration,
    and what CSE and DCE remove needs no derivative."""
    sub = st.stage_subfunction(fn, args, kwargs)
    sub.func = optimize(sub.func)
    return sub


def _loss(value: Any, has_aux: bool, who: str) -> tuple[Any, Any]:
    if has_aux:
        if not (isinstance(value, tuple) and len(value) == 2):
            raise CompileError(f"{who} with has_aux=True: the function must return a pair "
                               "(value, aux)")
        return value
    return value, None


def _one_for(loss: Any, outs: Sequence[Atom], who: str) -> list[Atom | None]:
    """The output cotangents that seed reverse mode on a scalar ``loss``: none for a
    compile-time float (``lambda x: 1.0``), whose gradient is zero."""
    if _is_static_float(loss) and np.ndim(loss) == 0:
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
            self._jitted = Jitted(self, (), None)
        return self._jitted

    @public
    def lower(self, *args: Any, **kwargs: Any) -> Any:
        """What this transform compiles to for these arguments (see ``Jitted.lower``)."""
        return self.jitted().lower(*args, **kwargs)

    def __get__(self, obj: Any, objtype: Any = None) -> Any:
        return self if obj is None else functools.partial(self, obj)

    def __pb_stage__(self, st: Stager, args: list, kwargs: dict) -> Any:
        raise NotImplementedError


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
        sub, where, nums, varied = _differentiated(st, self.fn, args, kwargs, self.argnums, who)
        ins = [q for q, v in enumerate(varied) if v]
        forward = _by_forward_mode(sub, ins)
        if forward:
            outs, touts = _unit_lanes(sub, ins)
        else:
            outs, backward = vjp_emit(sub.func, sub.operands, varied)
        value = sub.rebuild(outs)
        loss, aux = _loss(value, self.has_aux, who)
        seeds = _one_for(loss, outs, who)
        if forward:
            cts: list[Atom | None] = [None] * len(sub.operands)
            for i in (k for k, s in enumerate(seeds) if s is not None):  # none: constant
                rows = _lane_rows(sub, ins, touts[i], outs[i].type)
                for q, row in zip(ins, rows, strict=True):
                    cts[q] = S.reshape(row, shape=sub.operands[q].type.shape)
        else:
            cts = backward(seeds)
        grads = where.grads(nums, cts, isinstance(self.argnums, int))
        if not self.with_value:
            return (grads, aux) if self.has_aux else grads
        return (value, grads)


#: A gradient of a function with loops or calls, with respect to one scalar, or to this
#: many scalars or fewer when the function computes only scalars, runs forward mode with
#: one lane per scalar: no tape, and in scalar code the lanes' arithmetic runs beside the
#: primal's instead of after it (a loop's value and gradient with respect to two
#: parameters, with libm's sin: 1.6 ms by reverse mode, 1.33 by forward).  Array code
#: with more lanes is left to reverse mode, whose cost does not grow with them.
FORWARD_GRAD = 4
#: ``jacfwd`` with respect to this many scalars or fewer computes every column in one
#: forward pass (one lane each) instead of one pass per column in a rolled loop.
FORWARD_JACOBIAN = 8


def _size(sub: SubFunction, ins: Sequence[int]) -> int:
    return sum(sub.operands[q].type.size for q in ins)


def _by_forward_mode(sub: SubFunction, ins: Sequence[int]) -> bool:
    n = _size(sub, ins)
    return (n == 1 or 0 < n <= FORWARD_GRAD and scalar_only(sub.func)) and \
        has_loops(sub.func) and forward_agrees(sub.func)


def _unit_lanes(sub: SubFunction, ins: Sequence[int]) -> tuple[list[Atom], list]:
    """``sub`` by forward mode with one lane per element of the operands ``ins``, each
    lane's tangent a unit vector: its results and their tangent bundles."""
    n = _size(sub, ins)
    bundles: list[tuple | None] = [None] * len(sub.operands)
    j = 0
    for q in ins:
        t = sub.operands[q].type
        lanes: list[Atom | None] = [None] * n
        for e in range(t.size):
            hot = np.zeros(t.size, t.dtype.np)
            hot[e] = 1
            lanes[j + e] = Lit(hot.reshape(t.shape), t)
        j += t.size
        bundles[q] = tuple(lanes) if t.size else None
    return jvp_emit(sub.func, sub.operands, bundles, lanes=n)


def _lane_rows(sub: SubFunction, ins: Sequence[int], bundle: tuple | None,
               t: TensorType) -> list[Atom]:
    """Per operand of ``ins``, its lanes of ``bundle`` (tangents of type ``t``) stacked:
    ``[size of the operand, *t.shape]``."""
    rows, j = [], 0
    for q in ins:
        size = sub.operands[q].type.size
        lanes = [bundle[k] if bundle is not None and bundle[k] is not None else zeros(t)
                 for k in range(j, j + size)]
        j += size
        if not lanes:
            rows.append(zeros(TensorType((0, *t.shape), t.dtype)))
            continue
        rows.append(S.concatenate(*[S.reshape(x, shape=(1, *t.shape)) for x in lanes], axis=0))
    return rows


def grad(fn: Callable, argnums: int | Sequence[int] = 0, has_aux: bool = False) -> Grad:
    """The gradient of ``fn`` (which returns a float scalar) with respect to its
    positional arguments ``argnums``, in their structure."""
    return Grad(fn, argnums, has_aux)


def value_and_grad(fn: Callable, argnums: int | Sequence[int] = 0,
                   has_aux: bool = False) -> Grad:
    """``(fn(...), grad(fn)(...))`` from one forward and one backward pass."""
    return Grad(fn, argnums, has_aux, with_value=True)


# -- forward mode ---------------------------------------------------------------------


def _tangent_atom(t: Any, like: Ref, k: int) -> Atom:
    """A tangent given for a primal leaf, as an atom of the primal's type."""
    if is_static_number(t) or isinstance(t, (np.ndarray, np.generic)):
        value = np.asarray(t)
        if value.shape != like.type.shape:
            raise CompileError(f"pb.jvp: the tangent of argument {k} has shape "
                               f"{value.shape}, its primal {like.type.shape}")
        return Lit(value.astype(like.type.dtype.np), like.type)
    if not isinstance(t, Ref):
        raise CompileError(f"pb.jvp: the tangent of argument {k} is {type(t).__name__}, "
                           "not a number or an array")
    if t.type.strong() != like.type.strong():
        raise CompileError(f"pb.jvp: the tangent of argument {k} has type {t.type}, but "
                           f"its primal has type {like.type}",
                           hint="tangents must have the shape and dtype of their primals")
    return fit(t.get(), like.type)


def _stage_jvp(st: Stager, fn: Callable, primals: Any, tangents: Any) -> Any:
    if not isinstance(primals, (tuple, list)) or not isinstance(tangents, (tuple, list)) \
            or len(primals) != len(tangents):
        raise CompileError("pb.jvp(f, primals, tangents): primals and tangents must be "
                           "tuples of one length")
    sub = _staged(st, fn, [_runtime_floats(p) for p in primals], {})
    where = _Args(sub)
    ts: list[Atom | None] = [None] * len(sub.operands)
    for k, t in enumerate(tangents):
        t_leaves, t_tree = tree_flatten(t)
        if t_tree != sub.arg_trees[k]:
            raise CompileError(f"pb.jvp: the tangent of argument {k} has structure {t_tree}, "
                               f"its primal {sub.arg_trees[k]}")
        for x, q, tl in zip(sub.arg_leaves[k], where.positions[k], t_leaves, strict=True):
            if q is not None and x.type.dtype.is_float:
                ts[q] = _tangent_atom(tl, x, k)
    outs, touts = jvp_emit(sub.func, sub.operands, [None if t is None else (t,) for t in ts])
    full = [t[0] if t is not None else zeros(o.type) for o, t in zip(outs, touts, strict=True)]
    tangents_out = tree_map(lambda v: v if isinstance(v, Ref) else _static_zero(v),
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
        (primals, tangents), _ = _bind(self.__call__, args, kwargs)
        return _stage_jvp(st, self.fn, primals, tangents)


class _JVP:
    """``jvp(fn, primals, tangents) -> (fn(*primals), tangents of the results)``: forward
    mode, one pass, for any number of inputs."""

    @public
    def __call__(self, fn: Callable, primals: Sequence, tangents: Sequence) -> Any:
        return _JVPOf(fn)(tuple(primals), tuple(tangents))

    def __pb_stage__(self, st: Stager, args: list, kwargs: dict) -> Any:
        (fn, primals, tangents), _ = _bind(self.__call__, args, kwargs)
        return _stage_jvp(st, fn, primals, tangents)


jvp = _JVP()


# -- vjp --------------------------------------------------------------------------------


def _out_cts(sub: SubFunction, outs: list[Atom], out: Any, ct: Any) -> list[Atom | None]:
    """The cotangent pytree ``ct`` given for the result ``out``, per result atom."""
    o_leaves, o_tree = tree_flatten(out)
    c_leaves, c_tree = tree_flatten(ct)
    if o_tree != c_tree:
        raise CompileError(f"vjp: the cotangent has structure {c_tree}, the result {o_tree}")
    cts: list[Atom | None] = [None] * len(outs)
    pos = {id(a): i for i, a in enumerate(outs)}
    for o, c in zip(o_leaves, c_leaves, strict=True):
        if not _is_float(o):
            continue
        cts[pos[id(o.raw())]] = _tangent_atom(c, o, 0) if c is not None else None
    return cts


class _StagedVJP:
    """The ``vjp_fn`` that ``pb.vjp`` returns inside staged code: calling it emits the
    backward pass, reading the forward pass's residuals."""

    def __init__(self, where: _Args, out: Any, outs: list[Atom], backward: Callable):
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
    sub = _staged(st, fn, [_runtime_floats(p) for p in primals], {})
    where = _Args(sub)
    varied = [_is_float(x) for leaves in sub.arg_leaves for x in leaves if isinstance(x, Ref)]
    varied += [False] * (len(sub.operands) - len(varied))
    outs, backward = vjp_emit(sub.func, sub.operands, varied)
    out, aux = _loss(sub.rebuild(outs), has_aux, "pb.vjp")
    return where, out, aux, outs, backward


class _PythonVJP:
    """``pb.vjp(fn, *primals)`` called from plain Python: one specialisation per signature
    of the primals runs the forward and the backward pass, the result's cotangent being
    parameters added after the primals' (typed by the result, so nothing is staged
    twice).  The result comes from a call with zero cotangents; ``vjp_fn(ct)`` calls it
    again with ``ct``."""

    def __init__(self, fn: Callable, has_aux: bool):
        from ..api import Jitted

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
            if _is_float(o):
                t = o.type
                cts[pos[id(o.raw())]] = fit(current().param(TensorType(t.shape, t.dtype)), t)
            elif _is_static_float(o):  # constant: vjp_fn takes its cotangent, unused
                current().param(type_of_value(o).strong())
        grads = where.grads(range(len(args)), backward(cts), single=False)
        return out, aux, grads

    def __call__(self, *primals: Any) -> tuple:
        from ..api import run

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


# -- Jacobians ------------------------------------------------------------------------


def _basis(k: Atom, t: TensorType) -> Atom:
    """The k-th unit vector of ``t``'s flattened shape, in ``t``'s shape."""
    n = max(t.size, 1)
    hot = E.eq(S.iota(shape=(n,), dim=0, dtype=int64), k)
    return S.reshape(E.convert(hot, dtype=t.dtype, weak=False), shape=t.shape)


def _stacked(buf: Atom, k: Atom, row: Atom) -> Atom:
    """``buf[k] = row`` for a buffer with one row per basis vector."""
    row = S.reshape(row, shape=(1, *row.type.shape))
    zero = Lit(np.int64(0))
    return I.dynamic_update_slice(buf, row, k, *[zero] * (buf.type.ndim - 1))


def _rows(n: int, row_types: Sequence[TensorType], body: Callable) -> list[Atom]:
    """Buffers ``[n, *row_type]`` filled by ``body(k) -> rows`` for k in range(n), as a
    rolled loop."""
    bufs = [TensorType((n, *t.shape), t.dtype) for t in row_types]
    if n == 0:
        return [zeros(t) for t in bufs]

    def loop_body(k, *carry):
        return [_stacked(buf, k, row) for buf, row in zip(carry, body(k), strict=True)]

    block = current().block([TensorType((), int64), *bufs], loop_body)
    res = for_loop(Lit(np.int64(0)), Lit(np.int64(n)), Lit(np.int64(1)),
                   *[zeros(t) for t in bufs], body=block)
    return list(res)


class Jacobian(Transform):
    """The Jacobian of ``fn`` by forward mode (one ``jvp`` per input element, a rolled
    loop) or reverse mode (one ``vjp`` per output element).  For each result leaf, the
    structure of the ``argnums`` arguments with arrays of shape
    ``result.shape + argument.shape``."""

    def __init__(self, fn: Callable, argnums: int | Sequence[int], forward: bool):
        super().__init__(fn)
        self.argnums, self.forward = argnums, forward

    def __pb_key__(self, key_of: Callable[[Any], Any]) -> tuple:
        return ("jacobian", key_of(self.fn), value_key(self.argnums), self.forward)

    def __pb_stage__(self, st: Stager, args: list, kwargs: dict) -> Any:
        who = "pb.jacfwd" if self.forward else "pb.jacrev"
        sub, where, nums, varied = _differentiated(st, self.fn, args, kwargs, self.argnums, who)
        ins = [q for q, v in enumerate(varied) if v]
        in_types = [sub.operands[q].type for q in ins]
        probe_outs = list(sub.func.out_types)
        outs = [i for i, t in enumerate(probe_outs) if t.dtype.is_float]
        out_types = [probe_outs[i] for i in outs]
        jac: dict[tuple[int, int], Atom] = {}
        if self.forward and 0 < _size(sub, ins) <= FORWARD_JACOBIAN:
            res, touts = _unit_lanes(sub, ins)
            for i in outs:
                rows = _lane_rows(sub, ins, touts[i], res[i].type)
                for q, tq, buf in zip(ins, in_types, rows, strict=True):
                    jac[i, q] = _forward_layout(buf, tq, probe_outs[i])
        elif self.forward:
            for q, tq in zip(ins, in_types, strict=True):
                def rows(k, q=q, tq=tq):
                    ts: list[tuple | None] = [None] * len(sub.operands)
                    ts[q] = (_basis(k, tq),)
                    res, touts = jvp_emit(sub.func, sub.operands, ts)
                    return [touts[i][0] if touts[i] is not None else zeros(res[i].type)
                            for i in outs]

                for i, buf in zip(outs, _rows(tq.size, out_types, rows), strict=True):
                    jac[i, q] = _forward_layout(buf, tq, probe_outs[i])
        else:
            for i, ti in zip(outs, out_types, strict=True):
                def rows(k, i=i, ti=ti):
                    res, backward = vjp_emit(sub.func, sub.operands, varied)
                    seed: list[Atom | None] = [None] * len(res)
                    seed[i] = _basis(k, ti)
                    cts = backward(seed)
                    return [cts[q] if cts[q] is not None else zeros(t)
                            for q, t in zip(ins, in_types, strict=True)]

                for q, buf in zip(ins, _rows(ti.size, in_types, rows), strict=True):
                    jac[i, q] = S.reshape(buf, shape=ti.shape + sub.operands[q].type.shape)
        return _jacobian_tree(sub, where, nums, outs, jac, isinstance(self.argnums, int))


def _forward_layout(buf: Atom, tq: TensorType, to: TensorType) -> Atom:
    """Rows indexed by input elements, ``[n_in, *out]``, as ``[*out, *in]``."""
    x = S.reshape(buf, shape=tq.shape + to.shape)
    nin, nout = len(tq.shape), len(to.shape)
    return S.transpose(x, perm=(*range(nin, nin + nout), *range(nin)))


def _jacobian_tree(sub: SubFunction, where: _Args, nums, outs, jac, single: bool) -> Any:
    tree, spec, _ = sub.out_spec
    leaves = []
    k = 0
    for s in spec:
        if s[0] != "dyn":
            leaves.append(_static_jacobian(s[1], where, nums, single))
            continue
        if k in outs:
            def leaf(q, x, k=k):
                return Ref(jac[k, q]) if (k, q) in jac else None

            trees = tuple(where.tree(n, leaf) for n in nums)
            leaves.append(trees[0] if single else trees)
        else:
            leaves.append(None)
        k += 1
    return tree_unflatten(tree, leaves)


def _static_jacobian(value: Any, where: _Args, nums, single: bool) -> Any:
    """The Jacobian of a compile-time result: zeros for a float (it is constant), of
    shape ``value.shape + argument.shape``; None for what has no derivative."""
    if not _is_static_float(value):
        return None
    shape = np.shape(value)
    dt = value.dtype if isinstance(value, (np.ndarray, np.generic)) else None

    def leaf(q: int, x: Ref) -> Any:
        t = x.type
        if not t.dtype.is_float:
            return None
        return Ref(zeros(TensorType(shape + t.shape, dtype(dt) if dt is not None else t.dtype)))

    trees = tuple(where.tree(n, leaf) for n in nums)
    return trees[0] if single else trees


def jacfwd(fn: Callable, argnums: int | Sequence[int] = 0) -> Jacobian:
    """The Jacobian of ``fn`` by forward mode (cheap for few inputs)."""
    return Jacobian(fn, argnums, forward=True)


def jacrev(fn: Callable, argnums: int | Sequence[int] = 0) -> Jacobian:
    """The Jacobian of ``fn`` by reverse mode (cheap for few outputs)."""
    return Jacobian(fn, argnums, forward=False)


def hessian(fn: Callable, argnums: int | Sequence[int] = 0) -> Jacobian:
    """The Hessian of a scalar ``fn``: forward mode over reverse mode."""
    return jacfwd(jacrev(fn, argnums), argnums)


# -- steering ---------------------------------------------------------------------------


class _StopGradient:
    """``stop_gradient(x)``: ``x`` itself, through which no derivative flows."""

    def __call__(self, x: Any) -> Any:
        return x

    def __pb_stage__(self, st: Stager, args: list, kwargs: dict) -> Any:
        (x,), _ = _bind(self.__call__, args, kwargs)
        return tree_map(lambda r: Ref(ad.stop_gradient(r.get()), r.kind) if _is_float(r)
                        else r, x)


stop_gradient = _StopGradient()


class Checkpoint(Transform):
    """``checkpoint(fn)``: reverse mode keeps only ``fn``'s inputs and recomputes its
    forward pass during the backward pass (less memory, more time)."""

    def __pb_key__(self, key_of: Callable[[Any], Any]) -> tuple:
        return ("checkpoint", key_of(self.fn))

    def __pb_stage__(self, st: Stager, args: list, kwargs: dict) -> Any:
        args, kwargs = _bind(self.fn, args, kwargs)
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


# -- custom rules -----------------------------------------------------------------------


def _stand_ins(sub: SubFunction) -> tuple[Any, dict[int, int]]:
    """``sub``'s result rebuilt from stand-in values (to stage the next rule with), and
    which result each stand-in is (by ``id``)."""
    vs = [Var(t) for t in sub.func.out_types]
    return sub.rebuild(vs), {id(v): k for k, v in enumerate(vs)}


class _Rules:
    """The operands and blocks of a custom-rule op.  Operands: the arguments' run-time
    leaves, then every caller value one of the staged functions reads (constants of the
    derivative).  Each block takes all operands first."""

    def __init__(self, subs: Sequence[SubFunction]):
        first = subs[0]
        self.n_args = first.n_args
        self.atoms = list(first.operands[:first.n_args])
        for sub in subs:
            for a in sub.operands[sub.n_args:]:
                if all(a is not b for b in self.atoms):
                    self.atoms.append(a)

    def block(self, extra: Sequence[TensorType], body: Callable) -> Block:
        """``body(operands, extra, call)`` builds the block; ``call(sub, args)`` inlines a
        staged function on ``args`` plus the operands it captured."""
        n = len(self.atoms)

        def build(*params):
            ops = list(params[:n])

            def call(sub: SubFunction, args: Sequence[Atom]) -> list[Atom]:
                captured = [ops[next(k for k, b in enumerate(self.atoms) if b is a)]
                            for a in sub.operands[sub.n_args:]]
                return inline(sub.func.block, [*args, *captured])

            return body(ops, list(params[n:]), call)

        return current().block([*(a.type for a in self.atoms), *extra], build)

    def float_results(self, found: dict[int, Atom]) -> list[Atom]:
        """One value per float operand: ``found[k]`` for operand k, zeros elsewhere."""
        return [found[k] if k in found else zeros(a.type) for k, a in enumerate(self.atoms)
                if a.type.dtype.is_float]


@contextlib.contextmanager
def _rules_of(st: Stager, fn: Transform) -> Iterator[None]:
    """While ``fn``'s rules are staged, a call to ``fn`` in them means its primal (as in
    ``return f(x), residuals``)."""
    st.in_rules.append(fn)
    try:
        yield
    finally:
        st.in_rules.pop()


def _pair(value: Any, who: str) -> tuple[Any, Any]:
    if not (isinstance(value, tuple) and len(value) == 2):
        raise CompileError(f"{who} must return a pair")
    return value


def _matching(primal: SubFunction, value: Any, index: dict[int, int], who: str) -> list[int]:
    """Where ``value`` (a rule's version of the primal result) has each primal result."""
    leaves, tree = tree_flatten(value)
    if tree != primal.out_spec[0]:
        raise CompileError(f"{who} returns a result of structure {tree}, but the function "
                           f"returns {primal.out_spec[0]}")
    spec = primal.out_spec[1]
    found = [index.get(id(x.raw())) for x, s in zip(leaves, spec, strict=True)
             if s[0] == "dyn" and isinstance(x, Ref)]
    if len(found) != len(primal.func.out_types):
        raise CompileError(f"{who} returns compile-time values where the function returns "
                           "run-time ones")
    return found


def _per_argument(value: Any, index: dict[int, int], got: list[Atom], where: _Args,
                  who: str) -> dict[int, Atom]:
    """The values a rule returned for each argument leaf (one pytree per argument, in
    the argument's structure; None for an argument means zero)."""
    n = len(where.sub.arg_trees)
    if not (isinstance(value, (tuple, list)) and len(value) == n):
        raise CompileError(f"{who} must return a tuple of {n} values, one per argument")
    out: dict[int, Atom] = {}
    for k, d in enumerate(value):
        if d is None:
            continue
        leaves, tree = tree_flatten(d)
        if tree != where.sub.arg_trees[k]:
            raise CompileError(f"{who} returns structure {tree} for argument {k}, which has "
                               f"{where.sub.arg_trees[k]}")
        for x, q in zip(leaves, where.positions[k], strict=True):
            if q is not None and isinstance(x, Ref) and id(x.raw()) in index:
                out[q] = fit(got[index[id(x.raw())]], where.sub.operands[q].type)
    return out


class custom_vjp(Transform):  # noqa: N801 (named like the decorator it is)
    """A function with a user-written reverse-mode rule::

        @pb.custom_vjp
        def f(x, y): ...
        def f_fwd(x, y): return f(x, y), residuals
        def f_bwd(residuals, ct): return (ct_x, ct_y)
        f.defvjp(f_fwd, f_bwd)

    Reverse mode runs ``f_fwd`` and, in the backward pass, ``f_bwd`` (``None`` for an
    argument means a zero cotangent); forward mode differentiates ``f`` itself.  Caller
    values the functions read are constants of the derivative."""

    def __init__(self, fn: Callable):
        super().__init__(fn)
        self.fwd: Callable | None = None
        self.bwd: Callable | None = None

    def defvjp(self, fwd: Callable, bwd: Callable) -> custom_vjp:
        self.fwd, self.bwd = fwd, bwd
        return self

    def __pb_stage__(self, st: Stager, args: list, kwargs: dict) -> Any:
        if self.fwd is None or self.bwd is None:
            raise CompileError(f"custom_vjp {self.__name__}: call defvjp(fwd, bwd) first")
        if self in st.in_rules:  # f called from its own rule: its primal
            return st.call(self.fn, args, kwargs)
        args, kwargs = _bind(self.fn, args, kwargs)
        primal = st.stage_subfunction(self.fn, args, kwargs)
        with _rules_of(st, self):
            fwd = st.stage_subfunction(self.fwd, args, kwargs)
            fwd_value, fwd_index = _stand_ins(fwd)
            out, res = _pair(fwd_value, "the custom_vjp fwd rule")
            outs_at = _matching(primal, out, fwd_index, "the custom_vjp fwd rule")
            res_at = [fwd_index[id(x.raw())] for x in tree_flatten(res)[0]
                      if isinstance(x, Ref)]
            cts_value, _ = _stand_ins(primal)
            bwd = st.stage_subfunction(self.bwd, [res, cts_value], {})
        bwd_value, bwd_index = _stand_ins(bwd)
        rules = _Rules([primal, fwd, bwd])
        where = _Args(primal)
        out_types = primal.func.out_types
        res_types = [fwd.func.out_types[k] for k in res_at]
        float_outs = [t for t in out_types if t.dtype.is_float]

        def fwd_block(ops, extra, call):
            got = call(fwd, ops[:rules.n_args])
            return [got[k] for k in outs_at] + [got[k] for k in res_at]

        def bwd_block(ops, extra, call):
            saved, cts = extra[:len(res_types)], iter(extra[len(res_types):])
            ct_all = [next(cts) if t.dtype.is_float else zeros(t) for t in out_types]
            got = call(bwd, [*saved, *ct_all])
            found = _per_argument(bwd_value, bwd_index, got, where, "the custom_vjp bwd rule")
            return rules.float_results(found)

        outs = ad.custom_vjp(
            *rules.atoms,
            primal=rules.block([], lambda ops, extra, call: call(primal, ops[:rules.n_args])),
            fwd=rules.block([], fwd_block),
            bwd=rules.block([*res_types, *float_outs], bwd_block))
        return primal.rebuild(outs)


class custom_jvp(Transform):  # noqa: N801 (named like the decorator it is)
    """A function with a user-written forward-mode rule::

        @pb.custom_jvp
        def f(x): ...
        @f.defjvp
        def f_jvp(primals, tangents): return f(*primals), tangent_of_result

    Forward mode runs the rule; reverse mode reverses it (its tangent is linear in the
    input tangents).  Tangents of non-float arguments are given as zeros."""

    def __init__(self, fn: Callable):
        super().__init__(fn)
        self.rule: Callable | None = None

    def defjvp(self, rule: Callable) -> Callable:
        self.rule = rule
        return rule

    def __pb_stage__(self, st: Stager, args: list, kwargs: dict) -> Any:
        if self.rule is None:
            raise CompileError(f"custom_jvp {self.__name__}: define the rule with defjvp")
        if self in st.in_rules:  # f called from its own rule: its primal
            return st.call(self.fn, args, kwargs)
        args, kwargs = _bind(self.fn, args, kwargs)
        primal = st.stage_subfunction(self.fn, args, kwargs)
        where = _Args(primal)
        stand = [Var(a.type) for a in primal.operands[:primal.n_args]]
        tangents = tuple(
            tree_unflatten(tree, [x if q is None else Ref(stand[q], x.kind)
                                  for x, q in zip(leaves, pos, strict=True)])
            for leaves, tree, pos in zip(primal.arg_leaves, primal.arg_trees,
                                         where.positions, strict=True))
        with _rules_of(st, self):
            rule = st.stage_subfunction(self.rule, [tuple(args), tangents], {})
        value, index = _stand_ins(rule)
        out, tout = _pair(value, "the custom_jvp rule")
        outs_at = _matching(primal, out, index, "the custom_jvp rule")
        touts = tree_flatten(tout)[0]
        if tree_flatten(tout)[1] != primal.out_spec[0]:
            raise CompileError("the custom_jvp rule's tangent must have the structure of the "
                               "result")
        rules = _Rules([primal, rule])
        out_types = primal.func.out_types
        dyn = [x for x, s in zip(touts, primal.out_spec[1], strict=True) if s[0] == "dyn"]

        def rule_block(ops, extra, call):
            it = iter(extra)
            ts = [next(it) if a.type.dtype.is_float else zeros(a.type)
                  for a in rules.atoms]
            args_ops = ops[:rules.n_args]
            got = call(rule, [*args_ops, *ts[:rules.n_args]])
            tangent_outs = [fit(got[index[id(x.raw())]], t) if isinstance(x, Ref)
                            else zeros(t) for x, t in zip(dyn, out_types, strict=True)]
            return [got[k] for k in outs_at] + [t for t, o in zip(tangent_outs, out_types,
                                                                  strict=True)
                                                if o.dtype.is_float]

        floats = [a.type for a in rules.atoms if a.type.dtype.is_float]
        outs = ad.custom_jvp(
            *rules.atoms,
            primal=rules.block([], lambda ops, extra, call: call(primal, ops[:rules.n_args])),
            rule=rules.block(floats, rule_block))
        return primal.rebuild(outs)
