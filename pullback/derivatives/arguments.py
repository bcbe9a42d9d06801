"""How a differentiated function's arguments become the operands of the IR it stages, and
how derivatives go back into the arguments' structure.

The differentiated function sees its arguments as values: writes to them stay inside
it.  Run-time values it reads from an enclosing staged function are constants of the
derivative (as in JAX).  Gradients of results that do not depend on an argument are
zeros; nothing warns (see docs/autodiff.md).
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ..errors import CompileError
from ..frontend.scope import StagedFunction
from ..frontend.specialise import binds_defaults
from ..frontend.subfunction import SubFunction
from ..frontend.values import Ref, is_static_number, lit_ref
from ..ir.core import Atom, Lit
from ..ops.derivs import zeros
from ..transforms.fit import fit
from ..tree import tree_map, tree_unflatten


def bind(fn: Any, args: Sequence, kwargs: dict) -> tuple[list, dict]:
    """Positional and keyword arguments as ``fn``'s signature binds them."""
    try:
        sig = fn.signature if isinstance(fn, StagedFunction) else inspect.signature(fn)
    except (TypeError, ValueError):
        return list(args), dict(kwargs)
    bound = sig.bind(*args, **kwargs)
    if binds_defaults(fn):
        bound.apply_defaults()
    return list(bound.args), dict(bound.kwargs)


def resolve_argnums(argnums: int | Sequence[int], n: int, who: str) -> tuple[int, ...]:
    """``argnums`` as indices into ``n`` positional arguments (negative ones counted
    from the end)."""
    nums = (argnums,) if isinstance(argnums, int) else tuple(argnums)
    for k in nums:
        if not isinstance(k, int) or not -n <= k < n:
            raise CompileError(f"{who}: argnums={argnums!r} but the function is given {n} "
                               "positional arguments")
    return tuple(k % n for k in nums)


def is_float(x: Any) -> bool:
    return isinstance(x, Ref) and x.type.dtype.is_float


def is_static_float(x: Any) -> bool:
    """A compile-time float result (``return 1.0``): constant, so its derivatives are
    zeros."""
    return isinstance(x, (float, np.floating)) or (isinstance(x, np.ndarray)
                                                    and x.dtype.kind == "f")


def static_zero(x: Any) -> Any:
    """The tangent of a compile-time result: a zero of its type for a number or an array,
    the value itself for what is structure (None, strings)."""
    if isinstance(x, (np.ndarray, np.generic)):
        return np.zeros_like(x)[()] if isinstance(x, np.generic) else np.zeros_like(x)
    if isinstance(x, (bool, int, float)):
        return type(x)()
    return x


def runtime_floats(x: Any) -> Any:
    """``x`` with its compile-time floats made run-time values: Python floats and NumPy
    floats are run-time by the contract (DESIGN.md §2), and a transform differentiates
    with respect to them even where staging knew their value (``pb.grad(f)(2.0)``)."""
    return tree_map(lambda v: lit_ref(v) if isinstance(v, (float, np.floating)) else v, x)


def tangent_atom(t: Any, like: Ref, k: int) -> Atom:
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


def split_aux(value: Any, has_aux: bool, who: str) -> tuple[Any, Any]:
    """The differentiated result and the auxiliary one (None without ``has_aux``)."""
    if has_aux:
        if not (isinstance(value, tuple) and len(value) == 2):
            raise CompileError(f"{who} with has_aux=True: the function must return a pair "
                               "(value, aux)")
        return value
    return value, None


class Args:
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
        (their integer leaves get no derivative); an argument with leaves but no float
        leaf is refused (one without leaves has its structure as its gradient)."""
        varied = [False] * len(self.sub.operands)
        for k in nums:
            leaves = self.sub.arg_leaves[k]
            if not leaves:  # a tree without leaves (a layer of configuration alone)
                continue
            if not any(isinstance(x, Ref) for x in leaves):
                shown = leaves[0] if len(leaves) == 1 else self.sub.arg_trees[k]
                raise CompileError(
                    f"{who}: argument {k} ({shown!r}) is a compile-time value (Python ints, "
                    "bools and strings are); derivatives are taken with respect to "
                    "floating-point arrays and floats",
                    hint="pass a float (1.0, np.float64(1)) or a float array, or leave it out "
                    "of argnums")
            frozen = self.sub.arg_trees[k].frozen()
            floats = [q for x, q, f in zip(leaves, self.positions[k], frozen, strict=True)
                      if q is not None and x.type.dtype.is_float and not f]
            if not floats:
                types = ", ".join(str(x.type) for x in leaves if isinstance(x, Ref))
                raise CompileError(
                    f"{who}: argument {k} holds only integer or boolean values or frozen "
                    f"fields ({types}); "
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
        """The cotangents ``cts`` of the operands in the structure of the ``nums``
        arguments (zeros where none came back); one tree if ``single``."""
        def leaf(q: int, x: Ref) -> Any:
            if not x.type.dtype.is_float or q in frozen:
                return None
            ct = cts[q]
            return Ref(fit(ct, x.type) if ct is not None else zeros(x.type), x.kind)

        frozen = {q for k in nums for q, f in zip(self.positions[k], self.sub.arg_trees[k].frozen(),
                                                  strict=True) if f and q is not None}
        trees = tuple(self.tree(k, leaf) for k in nums)
        return trees[0] if single else trees
