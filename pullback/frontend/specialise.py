"""One specialisation of a compiled function: what a call's arguments make of it (the
cache key, which leaves are run-time values and how they are fed: ``signature``), and
staging the function for it (``stage``): each run-time leaf becomes an IR parameter held
in a cell, the function is staged on them, and its results, the caller's arrays it
writes and the values it reads from outside become the IR function's outputs and extra
parameters (``Staged``).

Arguments are pytrees.  NumPy arrays, NumPy scalars and Python floats are run-time
values; Python ints, bools, strings, None and other objects are compile-time (static)
values, part of the cache key, as are the arguments named in ``static_argnames``.
"""

from __future__ import annotations

import inspect
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import ConcretizationError, UnsupportedError, array_subclass
from ..ir.builder import Builder
from ..ir.core import Func
from ..ir.types import type_of_value
from ..keys import value_key
from ..tree import TreeDef, tree_flatten, tree_unflatten
from .outside import Capture, Outside
from .stager import Stager
from .values import Ref, View


def leaf_kind(x: Any) -> str | None:
    """How a leaf is passed: 'array', 'scalar' (NumPy), 'python' (float), None (static).
    A Python complex is a run-time number as a float is (staging refuses its type)."""
    if isinstance(x, np.ndarray):
        return "array"
    if isinstance(x, np.generic):
        return "scalar"
    if isinstance(x, (float, complex)):
        return "python"
    return None


def _static_key(x: Any) -> Any:
    """A compile-time value in the cache key: by value, never by ``id`` (a later object may
    reuse it); what cannot be compared by value is refused."""
    return value_key(x, strict=True)


@dataclass
class Signature:
    """What a compiled specialisation depends on, and how to feed it."""

    key: tuple
    tree: TreeDef
    leaves: list
    dynamic: list[int]  # positions of run-time leaves, first occurrence of each array
    alias: list[int]  # for each run-time leaf, the position of its first occurrence
    outside: list = field(default_factory=list)  # the captures' values (see Staged)


def binds_defaults(fn: Callable) -> bool:
    """Whether a call of ``fn`` is staged with its defaults bound: not for a ufunc,
    whose defaults (``where=True`` ...) are NumPy's own, not arguments to stage."""
    return not isinstance(inspect.unwrap(fn), np.ufunc)


def signature(fn: Callable, args: tuple, kwargs: dict, static_argnames: Sequence[str],
              params: inspect.Signature | None = None) -> Signature:
    """The cache key and feeding plan of a call; ``params`` is ``fn``'s signature when the
    caller has it already."""
    bound = (params or inspect.signature(fn)).bind(*args, **kwargs)
    if binds_defaults(fn):
        bound.apply_defaults()
    arguments = dict(bound.arguments)
    static = {n: arguments.pop(n) for n in static_argnames if n in arguments}
    leaves, tree = tree_flatten(arguments)
    key_parts, dynamic, alias = [], [], []
    first: dict[int, int] = {}
    for i, x in enumerate(leaves):
        kind = leaf_kind(x)
        if kind is None:
            key_parts.append(_static_key(x))
            continue
        if kind == "array" and type(x) is not np.ndarray:
            raise array_subclass(x)
        j = first.setdefault(id(x), i) if kind == "array" else i
        if j == i:
            dynamic.append(i)
        alias.append(j)
        contiguous = bool(x.flags.c_contiguous) if kind == "array" else True
        key_parts.append((kind, np.shape(x), np.asarray(x).dtype.str, contiguous, j))
    key = (tree, tuple(key_parts), tuple(sorted((n, _static_key(v)) for n, v in static.items())))
    return Signature(key, tree, [*leaves, static], dynamic, alias)


@dataclass
class Staged:
    """A staged specialisation: the IR and how to rebuild results and write back."""

    func: Func
    outputs: list  # per result leaf: ('dyn', kind, weak), ('arg', leaf) or ('static', value)
    out_tree: TreeDef
    writeback: list[int]  # leaf positions of arguments the function mutates
    runner: Callable[..., list] | None = None  # the compiled function (None: interpreter)
    staged_func: Func | None = None  # the IR as staged, before the optimisation passes
    extra: int = 0  # parameters the staging added after the arguments' (see pb.vjp)
    # globals and closure cells it read (frontend.outside): the run-time ones are its last
    # parameters; the positions among those of the arrays it writes to
    captures: list[Capture] = field(default_factory=list)
    outside_writeback: list[int] = field(default_factory=list)


def stage(fn: Callable, sig: Signature, name: str, cells: Sequence[Any] = ()) -> Staged:
    """Stage ``fn`` for ``sig``; ``cells`` are the closure cells of the compiled callable
    (see ``frontend.outside``).  Globals and cells that staging needs as constants are
    staged again as constants checked by content."""
    *leaves, static = sig.leaves
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(max(limit, 12000))  # staging nests deeper than running
    try:
        stager = Stager()
        try:
            return _stage(fn, sig, name, stager, leaves, static, cells, False)
        except ConcretizationError:
            if stager.outside is None or not stager.outside.params:
                raise
            return _stage(fn, sig, name, Stager(), leaves, static, cells, True)
        except Exception as e:
            if _wrote(stager):  # the program raised after writing to the caller's arrays
                e._pullback_wrote = True  # type: ignore[attr-defined]
            raise
    finally:
        sys.setrecursionlimit(limit)


def _stage(fn: Callable, sig: Signature, name: str, stager: Stager, leaves: list,
           static: dict, root_cells: Sequence[Any], freeze: bool) -> Staged:
    with Builder() as b:
        cells: dict[int, Ref] = {}
        abstract = []
        runtime = [i for i, x in enumerate(leaves) if leaf_kind(x) is not None]
        first = dict(zip(runtime, sig.alias, strict=True))
        for i, x in enumerate(leaves):
            kind = leaf_kind(x)
            if kind is None:
                abstract.append(x)
                continue
            j = first[i]
            if j not in cells:
                var = b.param(type_of_value(x), hint=f"arg{i}")
                cells[j] = Ref(var, "array" if kind == "array" else "scalar",
                               bool(x.flags.c_contiguous) if kind == "array" else True)
            abstract.append(cells[j])
        stager.arguments = list(cells.values())
        stager.argument_params = [cell.raw() for cell in stager.arguments]
        outside = stager.outside = Outside(b, root_cells, {
            id(leaves[j]): (j, cell) for j, cell in cells.items() if cell.kind == "array"})
        outside.freeze = freeze
        arguments = tree_unflatten(sig.tree, abstract)
        sig_fn = inspect.signature(fn)
        merged = {**arguments, **static}
        bound = inspect.BoundArguments(sig_fn, {n: merged[n] for n in sig_fn.parameters
                                                if n in merged})
        result = stager.call(fn, list(bound.args), dict(bound.kwargs))
        out_leaves, out_tree = tree_flatten(result)
        results, outputs = [], []
        arg_of = {id(cell): ("arg", j) for j, cell in cells.items() if cell.kind == "array"}
        arg_of.update((id(cell), ("outside", k)) for k, cell in enumerate(outside.cells)
                      if cell.kind == "array")
        for x in out_leaves:
            if id(x) in arg_of:  # the caller's own array, as plain Python returns it
                outputs.append(arg_of[id(x)])
            elif _view_of(x, arg_of) is not None:  # ... or a view of it
                outputs.append(_view_of(x, arg_of))
            elif isinstance(x, Ref):
                results.append(x.get())
                outputs.append(("dyn", x.kind, x.get().type.weak))
            else:
                if hasattr(x, "fmt"):
                    raise UnsupportedError("a function cannot return an f-string of run-time "
                                           "values")
                outputs.append(("static", x))
        writeback, outside_writeback = [], []
        params = list(b.frame.params)
        for (j, cell), param in zip(cells.items(), params[:len(cells)], strict=True):
            if cell.kind == "array" and cell.raw() is not param:
                writeback.append(j)
                results.append(cell.raw())
        for k, (param, cell) in enumerate(zip(outside.params, outside.cells, strict=True)):
            if cell.raw() is not param:
                outside_writeback.append(k)
                results.append(cell.raw())
        later = [p for p in params[len(cells):] if p not in outside.params]
        b.frame.params = [*params[:len(cells)], *later, *outside.params]
        func = b.finish(name, results)
    return Staged(func, outputs, out_tree, writeback, extra=len(later),
                  captures=outside.captures, outside_writeback=outside_writeback)


def _view_of(x: Any, arrays: dict[int, tuple]) -> tuple | None:
    """``('view', whose, recipes)`` when ``x`` is a view of one of ``arrays`` (cells by id:
    where the caller's array is) that NumPy would make too (``recipes``, applied in
    order to the caller's array); None otherwise."""
    recipes = []
    while isinstance(x, View) and x.native is not None:
        recipes.append(x.native)
        x = x.base
    if not recipes or id(x) not in arrays or isinstance(x, View):
        return None
    return ("view", arrays[id(x)], tuple(reversed(recipes)))


def _wrote(stager: Stager) -> bool:
    """Whether staging has written to an array of the caller (an argument, a global)."""
    outside = stager.outside
    pairs = [*zip(stager.arguments, stager.argument_params, strict=True),
             *(zip(outside.cells, outside.params, strict=True) if outside else ())]
    return any(cell.kind == "array" and cell.raw() is not param for cell, param in pairs)
