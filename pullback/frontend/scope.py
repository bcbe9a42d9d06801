"""Frames: the environment of one staged function call, with Python's scoping rules.

A name is local to a function when the function assigns it anywhere (Python decides
this at compile time, and so do we); other names come from enclosing staged functions,
the function's closure cells, its globals, then builtins.  A ``def`` or ``lambda``
evaluated while staging closes over its frame (``StagedFunction``).
"""

from __future__ import annotations

import ast
import builtins
import inspect
from collections.abc import Callable
from typing import Any

from ..errors import Loc, UnsupportedError
from .source import Source
from .values import Undefined

#: Pseudo-variables that carry control flow through branches and loops.
RETURNED, RETVAL, BROKE, CONTINUED, DEAD = ".returned", ".retval", ".broke", ".continued", ".dead"
FLAGS = (RETURNED, BROKE, CONTINUED, DEAD)


def defined_flag(name: str) -> str:
    """The pseudo-variable saying, at run time, whether ``name`` has been assigned (for
    names assigned on some paths only; reading one unassigned raises UnboundLocalError)."""
    return ".defined:" + name


class _Stores(ast.NodeVisitor):
    """Names a statement list binds, not looking inside nested scopes."""

    def __init__(self) -> None:
        self.names: set[str] = set()
        self.declared: dict[str, str] = {}
        self.flags: set[str] = set()

    def visit_Name(self, node: ast.Name) -> None:
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            self.names.add(node.id)

    def _scope(self, node: ast.AST) -> None:
        if hasattr(node, "name"):
            self.names.add(node.name)
        for d in getattr(node, "decorator_list", []):
            self.visit(d)
        args = getattr(node, "args", None)
        if isinstance(args, ast.arguments):
            for d in [*args.defaults, *(d for d in args.kw_defaults if d is not None)]:
                self.visit(d)

    visit_FunctionDef = visit_AsyncFunctionDef = visit_ClassDef = visit_Lambda = _scope

    def _comprehension(self, node: ast.AST) -> None:
        self.visit(node.generators[0].iter)
        for g in node.generators:  # walrus targets inside comprehensions leak out
            for sub in ast.walk(g):
                if isinstance(sub, ast.NamedExpr):
                    self.visit(sub.target)
        for part in ("elt", "key", "value"):
            for sub in ast.walk(getattr(node, part, None) or ast.Pass()):
                if isinstance(sub, ast.NamedExpr):
                    self.visit(sub.target)

    visit_ListComp = visit_SetComp = visit_DictComp = visit_GeneratorExp = _comprehension

    def visit_Import(self, node: ast.Import) -> None:
        for a in node.names:
            self.names.add((a.asname or a.name).split(".")[0])

    visit_ImportFrom = visit_Import

    def visit_Global(self, node: ast.Global) -> None:
        for n in node.names:
            self.declared[n] = "global"

    def visit_Nonlocal(self, node: ast.Nonlocal) -> None:
        for n in node.names:
            self.declared[n] = "nonlocal"

    def visit_Return(self, node: ast.Return) -> None:
        self.flags |= {RETURNED, RETVAL}
        self.generic_visit(node)

    def visit_Break(self, node: ast.Break) -> None:
        self.flags.add(BROKE)

    def visit_Continue(self, node: ast.Continue) -> None:
        self.flags.add(CONTINUED)

    def visit_Raise(self, node: ast.Raise) -> None:
        self.flags.add(DEAD)
        self.generic_visit(node)



def stores(stmts: list[ast.stmt]) -> _Stores:
    v = _Stores()
    for s in stmts:
        v.visit(s)
    return v


def loop_stores(stmts: list[ast.stmt]) -> set[str]:
    """Names and flags a loop body may change; break/continue of inner loops stay there."""
    v = stores(stmts)
    names = v.names | (v.flags & {RETURNED, RETVAL, DEAD})
    for s in stmts:
        names |= _own_loop_flags(s)
    return names


_LOCALS: dict[int, tuple[ast.AST, set[str], dict[str, str]]] = {}  # by id of the node


def local_names(src: Source) -> tuple[set[str], dict[str, str]]:
    """The names local to a function (its parameters and what it assigns), and those it
    declares ``global`` or ``nonlocal``."""
    node = src.node
    hit = _LOCALS.get(id(node))
    if hit is None or hit[0] is not node:
        a = node.args
        params = {x.arg for x in [*a.posonlyargs, *a.args, *a.kwonlyargs]}
        params |= {x.arg for x in (a.vararg, a.kwarg) if x is not None}
        if isinstance(node, ast.Lambda):
            body_stores = stores([ast.Expr(node.body)])
        else:
            body_stores = stores(node.body)
        names = (params | body_stores.names) - set(body_stores.declared)
        hit = (node, names, body_stores.declared)
        _LOCALS[id(node)] = hit
    return hit[1], hit[2]


def _own_loop_flags(node: ast.AST) -> set[str]:
    if isinstance(node, ast.Break):
        return {BROKE}
    if isinstance(node, ast.Continue):
        return {CONTINUED}
    if isinstance(node, (ast.For, ast.While)):
        out: set[str] = set()
        for s in node.orelse:
            out |= _own_loop_flags(s)
        return out
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef, ast.Lambda)):
        return set()
    out = set()
    for child in ast.iter_child_nodes(node):
        out |= _own_loop_flags(child)
    return out


class Frame:
    """One staged call: local variables, the enclosing frame, closure cells (by name),
    globals.  What is read from cells and globals goes through ``outside(source, name,
    value)`` (see ``frontend.outside``), which gives what staging works with."""

    def __init__(self, name: str, file: str, locals_: set[str], declared: dict[str, str],
                 parent: Frame | None, closure: dict[str, Any], globals_: dict[str, Any],
                 outside: Callable[[Any, str, Any], Any] | None = None):
        self.name = name
        self.file = file
        self.locals = locals_
        self.declared = declared
        self.parent = parent
        self.closure = closure
        self.globals = globals_
        self.outside = outside or (lambda source, name, value: value)
        self.vars: dict[str, Any] = {}
        self.where: dict[str, Loc] = {}  # where each variable was last assigned

    def lookup(self, name: str) -> Any:
        frame: Frame | None = self
        while frame is not None:
            if name in frame.locals and frame.declared.get(name) is None:
                if name in frame.vars:
                    return frame.vars[name]
                if frame is self:
                    raise UnboundLocalError(
                        f"cannot access local variable '{name}' where it is not associated "
                        "with a value")
                raise NameError(f"cannot access free variable '{name}' where it is not "
                                "associated with a value in enclosing scope")
            if frame.declared.get(name) == "global":
                break
            if name in frame.closure:
                cell = frame.closure[name]
                try:
                    value = cell.cell_contents
                except ValueError:
                    raise NameError(f"cannot access free variable '{name}' where it is not "
                                    "associated with a value in enclosing scope") from None
                return self.outside(cell, name, value)
            if frame.parent is None:
                break
            frame = frame.parent
        g = (frame or self).globals
        if name in g:
            return self.outside(g, name, g[name])
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise NameError(f"name '{name}' is not defined")

    def assign(self, name: str, value: Any, loc: Loc | None) -> None:
        kind = self.declared.get(name)
        if kind == "global":
            raise UnsupportedError(
                f"assignment to global variable '{name}' inside a compiled function",
                hint="return the value instead; a compiled function runs its assignments "
                "once, at compile time, not on every call",
            )
        if kind == "nonlocal":
            frame = self.parent
            while frame is not None and name not in frame.locals:
                frame = frame.parent
            if frame is None:
                raise UnsupportedError(
                    f"nonlocal '{name}' belongs to a function that is not being compiled",
                    hint="return the value instead of assigning it to an enclosing function",
                )
            frame.assign(name, value, loc)
            return
        self.vars[name] = value
        if defined_flag(name) in self.vars:
            self.vars[defined_flag(name)] = True
        if loc is not None:
            self.where[name] = loc

    def read(self, name: str) -> Any:
        v = self.lookup(name)
        if isinstance(v, Undefined):
            raise UnsupportedError(f"'{name}' {v.why}", v.loc,
                                   hint=f"assign '{name}' before the branch or loop")
        return v


class StagedFunction:
    """A ``def`` or ``lambda`` evaluated while staging: its AST, defaults, and the frame
    it closes over (read when called, as Python's closures are)."""

    def __init__(self, src: Source, frame: Frame, defaults: list, kw_defaults: dict):
        self.src = src
        self.frame = frame
        args = src.node.args
        params = []
        kinds = inspect.Parameter
        pos = [*args.posonlyargs, *args.args]
        first_default = len(pos) - len(defaults)
        for k, a in enumerate(pos):
            kind = kinds.POSITIONAL_ONLY if k < len(args.posonlyargs) else \
                kinds.POSITIONAL_OR_KEYWORD
            d = defaults[k - first_default] if k >= first_default else kinds.empty
            params.append(kinds(a.arg, kind, default=d))
        if args.vararg:
            params.append(kinds(args.vararg.arg, kinds.VAR_POSITIONAL))
        for a in args.kwonlyargs:
            params.append(kinds(a.arg, kinds.KEYWORD_ONLY,
                                default=kw_defaults.get(a.arg, kinds.empty)))
        if args.kwarg:
            params.append(kinds(args.kwarg.arg, kinds.VAR_KEYWORD))
        self.signature = inspect.Signature(params)
        self.__name__ = src.name
        self.__qualname__ = src.name
