"""The API's boundary: errors leaving pullback's public functions show the program's
frames, not pullback's (as JAX filters its tracebacks); ``PULLBACK_TRACEBACK=full``
keeps them."""

from __future__ import annotations

import contextlib
import functools
import os
import sys
import types
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

from . import config
from .errors import PACKAGE


def _ours(tb: types.TracebackType) -> bool:
    return tb.tb_frame.f_code.co_filename.startswith(PACKAGE + os.sep)


#: Python 3.11's bare ``raise`` re-raises with the traceback the exception holds; 3.10's
#: restores the one it caught, so there ``raise e`` re-raises (showing that one frame).
BARE_RAISE_KEEPS_TRACEBACK = sys.version_info >= (3, 11)


def hide_internal_frames(e: BaseException) -> None:
    """Leave in ``e``'s traceback only the frames outside pullback (the program's, and
    what it called): an error leaving the API reads as the program's, as JAX filters its
    tracebacks.  ``PULLBACK_TRACEBACK=full`` keeps every frame; an ``InternalError``
    (a pullback bug) chains the original exception with its traceback whole."""
    frames = list(_walk(e.__traceback__))
    kept = [tb for tb in frames if not _ours(tb)]
    if len(kept) == len(frames) or config.full_tracebacks():
        return
    tail = None
    for tb in reversed(kept):
        tail = types.TracebackType(tail, tb.tb_frame, tb.tb_lasti, tb.tb_lineno)
    e.__traceback__ = tail
    if not getattr(e, "_pullback_hidden", False):
        with contextlib.suppress(AttributeError):
            e._pullback_hidden = True  # type: ignore[attr-defined]
            if sys.version_info >= (3, 11):  # on 3.10 the message would change
                e.add_note("(pullback's internal frames are hidden from this traceback; "
                           "PULLBACK_TRACEBACK=full shows them)")


def _walk(tb: types.TracebackType | None) -> Iterator[types.TracebackType]:
    while tb is not None:
        yield tb
        tb = tb.tb_next


F = TypeVar("F", bound=Callable[..., Any])


def public(fn: F) -> F:
    """An entry point of the API: what it raises leaves without pullback's frames (see
    ``hide_internal_frames``).  The hottest entries (``Jitted.__call__``) do the same
    inline, sparing a call."""

    @functools.wraps(fn)
    def entry(*args: Any, **kwargs: Any) -> Any:
        try:
            return fn(*args, **kwargs)
        except Exception as e:
            hide_internal_frames(e)
            if BARE_RAISE_KEEPS_TRACEBACK:
                raise
            raise e

    return entry  # type: ignore[return-value]
