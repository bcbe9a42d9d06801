"""Finding a function's AST and turning AST positions into ``Loc`` s.

The whole file a function lives in is parsed (cached per file contents), so line numbers
and columns are the user's own; this also works for lambdas in the middle of an
expression and for IPython cells, whose text ``linecache`` keeps.
"""

from __future__ import annotations

import ast
import linecache
import types
from dataclasses import dataclass
from functools import lru_cache

from ..errors import Loc, UnsupportedError, add_note


@dataclass(frozen=True)
class Source:
    """The AST of one function (a ``FunctionDef`` or a ``Lambda``) and where it lives."""

    node: ast.FunctionDef | ast.Lambda
    file: str
    name: str

    def loc(self, node: ast.AST) -> Loc:
        return node_loc(self.file, node, self.name)


def node_loc(file: str, node: ast.AST, func: str | None) -> Loc:
    """The location of ``node``; AST columns count UTF-8 bytes, ours count characters."""
    line = getattr(node, "lineno", 0)
    col = getattr(node, "col_offset", 0)
    text = linecache.getline(file, line)
    if text and not text.isascii():
        col = len(text.encode()[:col].decode(errors="replace"))
    return Loc(file, line, col, func)


@dataclass(frozen=True)
class _Parsed:
    """A file's definitions and lambdas in ``ast.walk`` order, so that finding one does
    not walk the whole file again (staging looks a function up at every call it stages)."""

    defs: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]]
    lambdas: list[ast.Lambda]


@lru_cache(maxsize=256)
def _parse(file: str, text: str) -> _Parsed:
    defs: dict[str, list[ast.FunctionDef | ast.AsyncFunctionDef]] = {}
    lambdas: list[ast.Lambda] = []
    for node in ast.walk(ast.parse(text, filename=file)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            defs.setdefault(node.name, []).append(node)
        elif isinstance(node, ast.Lambda):
            lambdas.append(node)
    return _Parsed(defs, lambdas)


def _parsed(file: str) -> _Parsed | None:
    lines = linecache.getlines(file)
    if not lines:
        return None
    try:
        return _parse(file, "".join(lines))
    except SyntaxError:
        return None


def _no_source(fn: object, why: str) -> UnsupportedError:
    name = getattr(fn, "__qualname__", repr(fn))
    return UnsupportedError(
        f"cannot compile {name}: {why}",
        hint="pullback compiles Python source; define the function in a file or a notebook "
        "cell, not with exec/eval",
    )


def _positions(code: types.CodeType) -> list[tuple[int, int]]:
    """Where the code's instructions are, skipping the function's own prologue (none
    before Python 3.11, whose code objects have no columns)."""
    if not hasattr(code, "co_positions"):
        return []
    return [(ln, col) for ln, _, col, end in code.co_positions() if ln is not None and end]


def _fingerprint(code: types.CodeType) -> tuple:
    """What tells lambdas apart without columns: their parameters, the names they read
    (global or closed over, which a lambda compiled alone reads as globals) and their
    constants."""
    n = code.co_argcount + code.co_kwonlyargcount
    consts = tuple(c for c in code.co_consts if not isinstance(c, types.CodeType))
    return (code.co_varnames[:n], sorted({*code.co_names, *code.co_freevars}), consts)


def _compiles_to(node: ast.Lambda, code: types.CodeType) -> bool:
    try:
        outer = compile(ast.fix_missing_locations(ast.Expression(body=node)), "<lambda>",
                        "eval")
    except (SyntaxError, ValueError):
        return False
    inner = next(c for c in outer.co_consts if isinstance(c, types.CodeType))
    return _fingerprint(inner) == _fingerprint(code)


def _contains(node: ast.AST, pos: tuple[int, int]) -> bool:
    start = (node.lineno, node.col_offset)
    end = (node.end_lineno, node.end_col_offset)
    return start <= pos <= end


def function_source(fn: types.FunctionType) -> Source:
    """The AST node defining ``fn``, found by its code object's first line and name."""
    code = fn.__code__
    file = code.co_filename
    parsed = _parsed(file)
    if parsed is None:
        linecache.checkcache(file)
        parsed = _parsed(file)
    if parsed is None:
        raise _no_source(fn, f"its source file {file!r} is not available")
    first = code.co_firstlineno
    if code.co_name == "<lambda>":
        candidates = [n for n in parsed.lambdas if n.lineno <= first <= n.end_lineno]
        pos = _positions(code)
        if pos:
            hits = [n for n in candidates if _contains(n.body, pos[0])]
        else:  # Python 3.10: the lambdas of the line that compile to this one
            hits = [n for n in candidates if _compiles_to(n, code)]
            if len({ast.dump(n) for n in hits}) > 1:
                raise UnsupportedError(
                    f"cannot compile {fn.__qualname__}: several lambdas at line {first} "
                    "look alike to Python 3.10, which cannot tell them apart",
                    hint="define it with def, or put it on a line of its own")
        if not hits:
            raise _no_source(fn, "its lambda was not found on its line")
        hits.sort(key=lambda n: (n.end_lineno - n.lineno, n.end_col_offset - n.col_offset))
        return Source(hits[0], file, "<lambda>")
    for node in parsed.defs.get(code.co_name, ()):
        start = node.decorator_list[0].lineno if node.decorator_list else node.lineno
        if first in (start, node.lineno):
            if isinstance(node, ast.AsyncFunctionDef):
                raise UnsupportedError(
                    f"cannot compile async function {fn.__qualname__}",
                    node_loc(file, node, node.name),
                    hint="pullback compiles ordinary functions; drop `async`",
                )
            return Source(node, file, node.name)
    raise _no_source(fn, f"no definition found in {file!r} at line {first}")


def annotate(e: BaseException, loc: Loc) -> None:
    """Point a Python exception raised while staging at the user's line (the innermost
    one: an ``InternalError`` names it too)."""
    if getattr(e, "_pullback_loc", None) is not None:
        return
    try:
        e._pullback_loc = loc
    except AttributeError:  # exceptions without a __dict__
        return
    add_note(e, f"while compiling {loc.where()}")
