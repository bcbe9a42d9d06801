"""Errors raised at compile time, and the source locations they point at.

Every error the user can see names where it happened in *their* code: a ``Loc`` is
carried by each IR equation and by each error, and the message shows the source line
with a caret under the column.
"""

from __future__ import annotations

import linecache
from dataclasses import dataclass


@dataclass(frozen=True)
class Loc:
    """A position in user source: file, 1-based line, 0-based column, enclosing function."""

    file: str
    line: int
    col: int = 0
    func: str | None = None

    def __str__(self) -> str:
        return f"{self.file}:{self.line}:{self.col}"

    def excerpt(self) -> str:
        """The source line and a caret under the column, or '' when the source is gone."""
        text = linecache.getline(self.file, self.line)
        if not text:
            return ""
        text = text.rstrip("\n")
        return f"    {text}\n    {' ' * self.col}^"


class CompileError(Exception):
    """A program that pullback refuses to compile, with where and what to do instead."""

    def __init__(self, message: str, loc: Loc | None = None, hint: str | None = None):
        self.message = message
        self.loc = loc
        self.hint = hint
        super().__init__(self._render())

    def _render(self) -> str:
        parts = []
        if self.loc is not None:
            where = f"{self.loc}"
            if self.loc.func:
                where += f" in {self.loc.func}"
            parts.append(f"{where}: {self.message}")
            excerpt = self.loc.excerpt()
            if excerpt:
                parts.append(excerpt)
        else:
            parts.append(self.message)
        if self.hint:
            parts.append(f"hint: {self.hint}")
        return "\n".join(parts)

    def with_loc(self, loc: Loc | None) -> CompileError:
        """Attach a location if the error has none yet (shape rules do not know theirs)."""
        if self.loc is None and loc is not None:
            self.loc = loc
            self.args = (self._render(),)
        return self

    def __str__(self) -> str:
        return self.args[0] if self.args else self.message


class ShapeError(CompileError, ValueError):
    """Shapes or dtypes that do not fit an operation (a ValueError, as in NumPy)."""


class UnsupportedError(CompileError):
    """Valid Python that pullback cannot compile faithfully."""


class ConcretizationError(CompileError):
    """A run-time value used where Python needs a compile-time one."""


class IRError(Exception):
    """Malformed IR: raised by the verifier and the parser, never by user programs."""


class VerifyError(IRError):
    """The verifier found IR that breaks an invariant."""


class ParseError(IRError):
    """Text that is not valid IR."""
