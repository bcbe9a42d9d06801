"""Errors raised at compile time, and the source locations they point at.

Every error the user can see names where it happened in *their* code: a ``Loc`` is
carried by each IR equation and by each error, and the message shows the source line
with a caret under the column.  Run-time faults of compiled code name the line of the
equation that raised them (``at_run_time``), and errors leaving the public API show the
program's frames, not pullback's (``tracebacks.public``).
"""

from __future__ import annotations

import contextlib
import inspect
import linecache
import os
import sys
import traceback
import warnings
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any


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

    def where(self) -> str:
        """``file:line:col in func``, then the excerpt on lines of its own."""
        head = f"{self} in {self.func}" if self.func else str(self)
        excerpt = self.excerpt()
        return f"{head}\n{excerpt}" if excerpt else head


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
            head, _, excerpt = self.loc.where().partition("\n")
            parts.append(f"{head}: {self.message}")
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


def array_subclass(x: Any) -> UnsupportedError:
    """The refusal of an ndarray subclass, whose operators or reductions are not ndarray's
    (``np.matrix``'s ``*`` multiplies matrices, a masked array's sum skips masked values):
    computed as a plain array, it would give other numbers than plain Python."""
    kind = f"{type(x).__module__}.{type(x).__qualname__}"
    return UnsupportedError(
        f"{kind} is a NumPy array subclass whose operations differ from ndarray's; "
        "pullback computes with plain arrays", hint="pass np.asarray(x) (a masked array: "
        "x.filled(value)) and write the operation you mean")


class IRError(Exception):
    """Malformed IR: raised by the verifier and the parser, never by user programs."""


class VerifyError(IRError):
    """The verifier found IR that breaks an invariant."""


class ParseError(IRError):
    """Text that is not valid IR."""


class InternalError(Exception):
    """A bug in pullback, not in the program: raised where staging, transforming or
    compiling failed in a way no user can act on, with the user's location and the
    original exception chained (``__cause__``)."""


def mark_users(e: BaseException) -> None:
    """``e`` is the program's own exception (raised by its Python, run at compile time),
    which the user sees as plain Python would raise it."""
    try:
        e._pullback_user = True  # type: ignore[attr-defined]
    except AttributeError:  # exceptions without a __dict__
        pass


def users_call(fn: Callable, *args: Any, **kwargs: Any) -> Any:
    """``fn(*args, **kwargs)`` run by Python at compile time on the program's own values:
    what it raises is the program's exception, which plain execution raises too."""
    try:
        return fn(*args, **kwargs)
    except CompileError:
        raise
    except Exception as e:
        mark_users(e)
        raise


#: Where pullback's own files are: frames in them are pullback's, not the program's.
PACKAGE = str(Path(__file__).resolve().parent)


def _is_users(e: BaseException) -> bool:
    """Whether a Python exception raised while compiling is one a user may see: the
    program's own (raised in ``users_call``), one pullback raises on purpose (a
    ``raise`` in its code, as plain Python or NumPy would raise it, not an ``internal:``
    one), or NumPy's answer to what the program gave a NumPy function (an exception of
    NumPy's, or one raised in NumPy's code)."""
    if getattr(e, "_pullback_user", False):
        return True
    if type(e).__module__.split(".")[0] == "numpy":
        return True
    frames = [(frame.f_code.co_filename, line)
              for frame, line in traceback.walk_tb(e.__traceback__)]
    ours = [k for k, (file, _) in enumerate(frames) if file.startswith(PACKAGE)]
    if not ours:
        return True  # raised before entering pullback
    k = ours[-1]
    if k == len(frames) - 1:
        text = linecache.getline(*frames[k]).strip()
        return text.startswith("raise") and not str(e).startswith("internal")
    return any(f"{os.sep}numpy{os.sep}" in file for file, _ in frames[k + 1:])


def _where(fn: Any) -> str:
    code = getattr(inspect.unwrap(fn), "__code__", None) if fn is not None else None
    return f"{code.co_filename}:{code.co_firstlineno}" if code is not None else "?"


@contextlib.contextmanager
def internal_errors(fn: Any) -> Iterator[None]:
    """The API boundary: errors a user may see pass (``CompileError`` and what plain
    Python raises, see ``_is_users``); anything else is an ``InternalError``."""
    try:
        yield
    except CompileError:
        raise
    except Exception as e:
        if _is_users(e):
            raise
        loc = getattr(e, "_pullback_loc", None)
        where = loc.where() if loc is not None else \
            f"{getattr(fn, '__name__', fn)!s} ({_where(fn)})"
        raise InternalError(
            f"this is a pullback bug, not an error in your program: {type(e).__name__}: "
            f"{e}\n  while compiling {where}\nPlease report it with this message; the "
            "original exception is chained above.") from e


def add_note(e: BaseException, text: str) -> None:
    """A line under the exception's message: Python 3.11's note; Python 3.10 prints no
    notes, so there the text is appended to the message (when it is one string)."""
    if sys.version_info >= (3, 11):
        e.add_note(text)
    elif len(e.args) == 1 and isinstance(e.args[0], str) and not isinstance(e, KeyError):
        e.args = (f"{e.args[0]}\n{text}",)


def at_run_time(e: BaseException, loc: Loc | None) -> BaseException:
    """``e``, raised by compiled code at the equation of ``loc``, naming that line of the
    program (the innermost equation's, once): its type and message stay Python's."""
    if loc is None or getattr(e, "_pullback_loc", None) is not None:
        return e
    try:
        e._pullback_loc = loc  # type: ignore[attr-defined]
    except AttributeError:  # exceptions without a __dict__
        return e
    add_note(e, f"at {loc.where()}")
    return e


def warn_user(message: str, category: type[Warning] = RuntimeWarning) -> None:
    """Warn with the location of the program's innermost frame outside pullback (the
    call that led here), however deep in pullback this is."""
    frame, level = sys._getframe(1), 2  # stacklevel 2: the caller of warn_user
    while frame is not None and frame.f_code.co_filename.startswith(PACKAGE + os.sep):
        frame, level = frame.f_back, level + 1
    warnings.warn(message, category, stacklevel=level)
