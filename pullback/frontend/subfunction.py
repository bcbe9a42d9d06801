"""Calls staged as IR functions of their own, rather than inline: for a transform to
rewrite (``stage_subfunction``: grad, jvp, vjp, custom rules), or because the call
recurses on run-time data (``stage_recursive``: its depth is only known at run time).

Inside such a function, the caller's run-time values it reads become extra parameters
(``values.CAPTURES``), and writes to the caller's arrays are refused (``Ref.set``)."""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import CompileError, UnsupportedError
from ..ir.builder import Builder, current, declare_func
from ..ops import control as C
from ..tree import tree_flatten, tree_unflatten
from .interface import Staging
from .regions import Bottom
from .values import CAPTURES, FUNC_DEPTH, DynStr, Ref

_names = itertools.count()


@dataclasses.dataclass
class SubFunction:
    """A call staged as a function of its own: ``func`` takes ``operands`` (the run-time
    leaves of the arguments, in order, then the caller's values it reads)."""

    func: Any
    operands: list
    arg_leaves: list[list]  # per positional argument, its leaves (cells and statics)
    arg_trees: list
    out_spec: tuple  # (tree, leaves, types) as ``rebuild`` takes them
    n_args: int  # how many operands come from the arguments

    def rebuild(self, outs) -> Any:
        return rebuild(self.out_spec, outs)


def rebuild(spec: tuple, outs) -> Any:
    """A function's result from the outputs of its ``call``: cells for the run-time
    leaves, the static ones as staged."""
    tree, leaves, _ = spec
    it = iter(outs)
    return tree_unflatten(tree, [Ref(next(it), s[2]) if s[0] == "dyn" else s[1]
                                 for s in leaves])


@contextlib.contextmanager
def _own_function(captures: dict) -> Iterator[None]:
    """Staging inside a function of its own; the cells of enclosing functions it reads
    are collected in ``captures`` (id: (cell, the parameter standing for it))."""
    tokens = (FUNC_DEPTH.set(FUNC_DEPTH.get() + 1), CAPTURES.set(captures))
    try:
        yield
    finally:
        FUNC_DEPTH.reset(tokens[0])
        CAPTURES.reset(tokens[1])


class SubFunctionMixin(Staging):
    def stage_subfunction(self, fn: Any, args: list, kwargs: dict) -> SubFunction:
        """Stage ``fn(*args, **kwargs)`` as a function of its own (for a transform to
        rewrite): each run-time leaf of the arguments becomes a parameter, and so does
        each run-time value of the caller that ``fn`` reads."""
        flat = [tree_flatten(a) for a in args]
        kw_leaves, kw_tree = tree_flatten(kwargs)
        refs = [x for leaves, _ in flat for x in leaves if isinstance(x, Ref)]
        refs += [x for x in kw_leaves if isinstance(x, Ref)]
        name = getattr(fn, "__name__", None) or getattr(getattr(fn, "src", None), "name", "f")
        values = [r.get() for r in refs]  # in the caller: a view reads its base here
        with Builder(current().loc) as b:
            params = [b.param(v.type) for v in values]
            captures: dict = {}
            with _own_function(captures):
                cells = iter([Ref(p, r.kind, r.contiguous) for p, r in zip(params, refs,
                                                                            strict=True)])

                def inner(leaves: list) -> list:
                    return [next(cells) if isinstance(x, Ref) else x for x in leaves]

                new_args = [tree_unflatten(tree, inner(leaves)) for leaves, tree in flat]
                new_kwargs = tree_unflatten(kw_tree, inner(kw_leaves))
                result = self.call(fn, new_args, new_kwargs)
                out_leaves, out_tree = tree_flatten(result)
                if any(isinstance(x, DynStr) for x in out_leaves):
                    raise UnsupportedError("a function cannot return an f-string of run-time "
                                           "values")
                results = [x.get() for x in out_leaves if isinstance(x, Ref)]
                spec_leaves = [("dyn", x.type, x.kind) if isinstance(x, Ref) else ("static", x)
                               for x in out_leaves]
            b.frame.params.extend(v for _, v in captures.values())
            func = b.finish(name.replace("<lambda>", "lambda"), results)
        operands = values + [r.get() for r, _ in captures.values()]
        return SubFunction(func, operands, [leaves for leaves, _ in flat],
                           [tree for _, tree in flat], (out_tree, spec_leaves, None),
                           len(refs))

    # -- recursion on run-time data ---------------------------------------------------

    def stage_recursive(self, key: tuple, name: str, leaves: list, tree: Any,
                        enter: Callable[[dict], Any]) -> Any:
        """A function that calls itself with the same abstract arguments: its depth is
        decided at run time, so it becomes an IR function with a recursive ``call``.
        Run-time values it closes over become extra parameters."""
        dyn = [x for x in leaves if isinstance(x, Ref)]
        fname = f"{name}_{next(_names)}"
        result_spec = None
        captured: list[Ref] = []
        for _ in range(8):
            in_types = [x.get().type for x in [*dyn, *captured]]
            func = declare_func(fname, in_types, [] if result_spec is None else result_spec[2])
            self.recursive[key] = (func, result_spec, captured)
            saved_active = self.active
            self.active = [key]
            with Builder(current().loc) as b:
                params = [b.param(t) for t in in_types]
                captures = {id(r): (r, p) for r, p in zip(captured, params[len(dyn):],
                                                         strict=True)}
                try:
                    with _own_function(captures):
                        result = enter(tree_unflatten(tree, _parameter_cells(leaves, params)))
                except Bottom:
                    raise UnsupportedError(
                        f"recursive function {name} never returns without calling itself",
                        hint="give it a base case that does not recurse") from None
                finally:
                    self.active = saved_active
                    del self.recursive[key]
                out_leaves, out_tree = tree_flatten(result)
                body = b.finish(fname, [x.get() for x in out_leaves if isinstance(x, Ref)])
            spec_leaves = [("dyn", x.raw().type, x.kind) if isinstance(x, Ref) else ("static", x)
                           for x in out_leaves]
            spec = (out_tree, spec_leaves, [s[1] for s in spec_leaves if s[0] == "dyn"])
            new = [r for r, _ in captures.values() if r not in captured]
            if not new and result_spec is not None and _same_spec(spec, result_spec):
                func.block = body.block
                operands = [x.get() for x in [*dyn, *captured]]
                return rebuild(result_spec, C.call(*operands, callee=func))
            captured.extend(new)
            result_spec = spec
        raise CompileError(f"the result type of recursive function {name} does not settle",
                           hint="return the same types on every path")

    def recursive_call(self, key: tuple, leaves: list) -> Any:
        """A call of the recursive function being staged, from inside it."""
        func, spec, captured = self.recursive[key]
        if spec is None:
            raise Bottom
        operands = [x.get() for x in leaves if isinstance(x, Ref)]
        outs = C.call(*operands, *[r.get() for r in captured], callee=func)
        return rebuild(spec, outs)


def _parameter_cells(leaves: list, params: list) -> list:
    """The arguments inside a recursive function: cells of its parameters, which it
    must not write (the caller's arrays would change)."""
    it = iter(params)
    out = []
    for x in leaves:
        if isinstance(x, Ref):
            cell = Ref(next(it), x.kind)
            cell.note = ("a recursive function cannot write to its arguments (the "
                         "caller's array would change)")
            out.append(cell)
        else:
            out.append(x)
    return out


def _same_spec(a, b) -> bool:
    return a[0] == b[0] and len(a[1]) == len(b[1]) and all(
        x[0] == y[0] and (x[1:] == y[1:] if x[0] == "dyn" else x[1] is y[1] or x[1] == y[1])
        for x, y in zip(a[1], b[1], strict=True))
